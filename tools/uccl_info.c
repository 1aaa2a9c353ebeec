/* uccl_info: what libuccl can do on this machine (version, transports built
 * and usable, configuration, topology and the NIC each GPU would use), as a
 * human report or --json for scripts.
 *
 * The configuration comes from the public uccl_config_dump. For the rest it
 * links the internal library (like the unit tests): src/core/tp_api.h lists the
 * transports compiled in, src/core/core_config.h gives the topology settings,
 * src/gpu/gpu.h the runtime's GPUs and src/topo/topo.h the topology (until a
 * public topology dump exists). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl.h>
#include <uccl/uccl_coll.h>

#include "core/core_config.h"
#include "core/tp_api.h"
#include "gpu/gpu.h"
#include "topo/topo.h"

typedef struct info_opts {
    bool json;
    bool config;
    const char *topo_xml;
} info_opts_t;

/* ------------------------------------------------------------ transports */

static void report_transports(FILE *out, const info_opts_t *opts)
{
    uccl_engine_t *engine = NULL;
    uccl_status_t st = uccl_engine_create(NULL, &engine);
    uint64_t caps = st == UCCL_OK ? uccl_engine_caps(engine) : 0;
    const struct uccl_tp_ops *const *list = uccl_tp_list();
    static const struct {
        uint64_t cap;
        const char *name;
    } features[] = {{UCCL_CAP_HWLOC, "hwloc"}, {UCCL_CAP_MPI, "mpi"},
                    {UCCL_CAP_CUDA, "cuda"},   {UCCL_CAP_ROCM, "rocm"}};

    if (opts->json) {
        fprintf(out, "\"engine\":{\"status\":");
        uccl_json_string(out, uccl_status_name(st));
        fprintf(out, "},\"transports\":[");
        for (size_t i = 0; list[i] != NULL; i++) {
            fprintf(out, "%s{\"name\":", i ? "," : "");
            uccl_json_string(out, list[i]->name);
            fprintf(out, ",\"usable\":%s}", (caps & list[i]->engine_cap) ? "true" : "false");
        }
        fprintf(out, "],\"features\":{");
        for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
            fprintf(out, "%s\"%s\":%s", i ? "," : "", features[i].name,
                    (caps & features[i].cap) ? "true" : "false");
        fprintf(out, "},");
    } else {
        fprintf(out, "transports (compiled in):\n");
        for (size_t i = 0; list[i] != NULL; i++)
            fprintf(out, "  %-8s %s\n", list[i]->name,
                    (caps & list[i]->engine_cap) ? "usable" : "not usable here");
        if (st != UCCL_OK)
            fprintf(out, "  (engine with default parameters failed: %s)\n", uccl_strerror(st));
        fprintf(out, "features:");
        for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
            fprintf(out, " %s=%s", features[i].name, (caps & features[i].cap) ? "yes" : "no");
        fprintf(out, "\n\n");
    }
    if (engine != NULL)
        uccl_engine_destroy(engine);
}

/* ------------------------------------------------------------ config */

/* The public dump (uccl_config_dump) formats every value; the tool only
 * sizes the buffer and prints it. */
static int report_config(FILE *out, const info_opts_t *opts)
{
    unsigned flags = opts->json ? UCCL_CONFIG_DUMP_JSON : 0;
    size_t len = 0;
    char *text = NULL;
    uccl_status_t st = uccl_config_dump(flags, NULL, &len);

    while (st == UCCL_ERR_BUFFER_TOO_SMALL) { /* grows only if the environment changes */
        char *bigger = realloc(text, len);
        if (bigger == NULL) {
            st = UCCL_ERR_NO_MEMORY;
            break;
        }
        text = bigger;
        st = uccl_config_dump(flags, text, &len);
    }
    if (st != UCCL_OK) {
        fprintf(stderr, "uccl_info: configuration: %s\n", uccl_strerror(st));
        free(text);
        return 1;
    }
    fprintf(out, opts->json ? "\"config\":%s," : "%s\n", text);
    free(text);
    return 0;
}

/* ------------------------------------------------------------ topology */

static void nic_ports_text(const uccl_topo_nic_t *nic, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int p = 0; p < nic->nports && used < len; p++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d:%s", p ? "," : "",
                                 nic->ports[p].num,
                                 uccl_topo_port_state_name(nic->ports[p].state));
    if (nic->nports == 0)
        snprintf(buf, len, "-");
}

static const char *kind_name(unsigned kind)
{
    return kind == UCCL_TOPO_NIC_VERBS ? "verbs" : kind == UCCL_TOPO_NIC_OFI ? "ofi" : "net";
}

static void print_gpus_nics(FILE *out, const uccl_topo_t *topo, bool json)
{
    char ports[128];

    fprintf(out, json ? "\"gpus\":[" : "GPUs:\n");
    for (int g = 0; g < uccl_topo_gpu_count(topo); g++) {
        const uccl_topo_gpu_t *gpu = uccl_topo_gpu(topo, g);
        if (!json) {
            fprintf(out, "  %2d %s %04x:%04x numa %-2d dev %-2d %s %s\n", g, gpu->busid,
                    gpu->vendor, gpu->device_id, gpu->numa, gpu->device, gpu->name, gpu->model);
            continue;
        }
        fprintf(out, "%s{\"index\":%d,\"busid\":\"%s\",\"vendor\":\"0x%04x\",\"device\":\"0x%04x\","
                "\"numa\":%d,\"ordinal\":%d,\"name\":", g ? "," : "", g, gpu->busid,
                gpu->vendor, gpu->device_id, gpu->numa, gpu->device);
        uccl_json_string(out, gpu->name);
        fprintf(out, ",\"model\":");
        uccl_json_string(out, gpu->model);
        fputc('}', out);
    }
    fprintf(out, json ? "],\"nics\":[" : "NICs:\n");
    for (int i = 0; i < uccl_topo_nic_count(topo); i++) {
        const uccl_topo_nic_t *nic = uccl_topo_nic(topo, i);
        nic_ports_text(nic, ports, sizeof(ports));
        if (!json) {
            fprintf(out, "  %2d %-12s %-5s %-12s numa %-2d %-4s ports %s%s%s\n", i, nic->name,
                    kind_name(nic->kind), nic->busid[0] ? nic->busid : "(virtual)", nic->numa,
                    nic->up ? "up" : "DOWN", ports, nic->netdev[0] ? " netdev " : "", nic->netdev);
            continue;
        }
        fprintf(out, "%s{\"index\":%d,\"name\":", i ? "," : "", i);
        uccl_json_string(out, nic->name);
        fprintf(out, ",\"kind\":\"%s\",\"busid\":\"%s\",\"numa\":%d,\"up\":%s,\"ports\":\"%s\","
                "\"link_gbps\":%.1f,\"netdev\":", kind_name(nic->kind), nic->busid, nic->numa,
                nic->up ? "true" : "false", ports, nic->link_gbps);
        uccl_json_string(out, nic->netdev);
        fputc('}', out);
    }
    fprintf(out, json ? "]," : "");
}

static void print_choice(FILE *out, const char *who, uccl_status_t st,
                         const uccl_topo_choice_t *choice, bool json, bool first)
{
    if (!json) {
        fprintf(out, "  %s\n", choice->why[0] ? choice->why : uccl_strerror(st));
        return;
    }
    fprintf(out, "%s{\"for\":", first ? "" : ",");
    uccl_json_string(out, who);
    fprintf(out, ",\"status\":\"%s\",\"dist\":\"%s\",\"nics\":[", uccl_status_name(st),
            st == UCCL_OK ? uccl_topo_dist_name(choice->dist) : "");
    for (int k = 0; st == UCCL_OK && k < choice->n; k++) {
        fprintf(out, "%s{\"name\":", k ? "," : "");
        uccl_json_string(out, choice->nics[k].nic->name);
        fprintf(out, ",\"port\":%d}", choice->nics[k].port);
    }
    fprintf(out, "],\"why\":");
    uccl_json_string(out, choice->why);
    fputc('}', out);
}

/* GPU -> NIC table: the RDMA choice, and the tcp interface next to it. */
static int print_choices(FILE *out, const uccl_topo_t *topo, const char *override, bool json)
{
    uccl_topo_choice_t choice;
    uccl_topo_query_t query = {.numa_node = -1, .override = override};
    char who[64];
    int rc = 0;

    fprintf(out, json ? "\"choices\":[" : "GPU -> NIC (RDMA, then tcp interface):\n");
    for (int g = -1; g < uccl_topo_gpu_count(topo); g++) {
        const uccl_topo_gpu_t *gpu = uccl_topo_gpu(topo, g);
        uccl_status_t st;

        query.gpu_busid = gpu != NULL ? gpu->busid : NULL;
        snprintf(who, sizeof(who), gpu != NULL ? "GPU %d" : "host memory", g);
        query.kinds = UCCL_TOPO_NIC_RDMA;
        st = uccl_topo_select(topo, &query, &choice);
        rc |= st != UCCL_OK && st != UCCL_ERR_NO_DEVICE;
        print_choice(out, who, st, &choice, json, g == -1);
        query.kinds = UCCL_TOPO_NIC_NET;
        snprintf(who + strlen(who), sizeof(who) - strlen(who), " tcp");
        st = uccl_topo_select(topo, &query, &choice);
        print_choice(out, who, st, &choice, json, false);
    }
    fprintf(out, json ? "]" : "");
    return rc;
}

/* The topology, with the GPUs numbered as the runtime numbers them (as the
 * engine does: topo itself never asks the runtime). */
static uccl_status_t load_topology(const char *xml, uccl_topo_t **topo)
{
    char ids[64][UCCL_GPU_BUS_ID_MAX];
    const char *busids[64];
    int n = 0;

    if (uccl_gpu_count(&n) != UCCL_OK || n < 0)
        n = 0;
    n = n > 64 ? 64 : n;
    for (int dev = 0; dev < n; dev++) {
        if (uccl_gpu_pci_bus_id(dev, ids[dev], sizeof(ids[dev])) != UCCL_OK)
            ids[dev][0] = '\0';
        busids[dev] = ids[dev];
    }
    return uccl_topo_load_gpus(xml, busids, n, topo);
}

static int report_topology(FILE *out, const info_opts_t *opts)
{
    uccl_config_t cfg;
    uccl_topo_t *topo = NULL;
    const char *xml = opts->topo_xml;
    uccl_status_t st = uccl_config_get(&cfg);
    int rc;

    if (xml == NULL && st == UCCL_OK && cfg.topo_xml[0] != '\0')
        xml = cfg.topo_xml;
    if (st == UCCL_OK)
        st = load_topology(xml, &topo);
    if (st != UCCL_OK) {
        if (opts->json) {
            fprintf(out, "\"topology\":{\"status\":");
            uccl_json_string(out, uccl_status_name(st));
            fprintf(out, "}");
        } else {
            fprintf(out, "topology: not available (%s)\n", uccl_strerror(st));
        }
        return st == UCCL_ERR_UNSUPPORTED ? 0 : 1;
    }
    if (opts->json) {
        fprintf(out, "\"topology\":{\"status\":\"UCCL_OK\",\"source\":");
        uccl_json_string(out, uccl_topo_source(topo));
        fprintf(out, ",\"machine\":");
        uccl_json_string(out, uccl_topo_machine(topo));
        fprintf(out, ",\"numa_nodes\":%d,", uccl_topo_numa_count(topo));
    } else {
        fprintf(out, "topology: %s (machine %s, %d NUMA node%s)\n", uccl_topo_source(topo),
                uccl_topo_machine(topo)[0] ? uccl_topo_machine(topo) : "?",
                uccl_topo_numa_count(topo), uccl_topo_numa_count(topo) == 1 ? "" : "s");
    }
    print_gpus_nics(out, topo, opts->json);
    rc = print_choices(out, topo, cfg.net_devices, opts->json);
    fprintf(out, opts->json ? "}" : "");
    uccl_topo_free(topo);
    return rc;
}

/* How the GPUs of this process reach each other (what gpu_ipc will use):
 * "NVLink" when peer access carries native atomics, "PCIe" for plain peer
 * access, "none" when copies must go through the host. */
static void report_gpu_links(FILE *out, const info_opts_t *opts)
{
    bool first = true;
    int n = 0;

    if (opts->topo_xml != NULL || uccl_gpu_count(&n) != UCCL_OK || n < 1)
        return;
    fprintf(out, opts->json ? "\"gpu_links\":[" : "GPU peer access (%s runtime):\n", uccl_gpu_backend());
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            int can = 0, nvlink = 0;
            const char *link;

            if (a == b)
                continue;
            if (uccl_gpu_peer_query(a, b, &can, &nvlink) != UCCL_OK)
                link = "unknown";
            else
                link = !can ? "none" : nvlink ? "NVLink" : "PCIe";
            if (opts->json)
                fprintf(out, "%s{\"from\":%d,\"to\":%d,\"link\":\"%s\"}", first ? "" : ",", a,
                        b, link);
            else
                fprintf(out, "  GPU %d -> GPU %d: %s\n", a, b, link);
            first = false;
        }
    }
    fprintf(out, opts->json ? "]," : "\n");
}

/* The collectives' algorithm table, through the public uccl_coll_table_print. */
static void report_coll_table(FILE *out, const info_opts_t *opts)
{
    unsigned flags = opts->json ? UCCL_COLL_TABLE_JSON : 0;
    int len = uccl_coll_table_print(NULL, 0, flags);
    char *text = len > 0 ? malloc((size_t)len + 1) : NULL;

    if (text == NULL || uccl_coll_table_print(text, (size_t)len + 1, flags) != len) {
        fprintf(out, opts->json ? "\"coll_table\":null," : "collective algorithms: unavailable\n\n");
    } else if (opts->json) {
        fprintf(out, "\"coll_table\":%s,", text);
    } else {
        fprintf(out, "Collective algorithms (UCCL_COLL_ALGO=auto picks by this table):\n%s\n", text);
    }
    free(text);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *out)
{
    fprintf(out, "usage: uccl_info [-c|--config] [--json] [--topo-xml FILE] [-h]\n"
                 "  (default)        version, transports usable here, the collectives' algorithm\n"
                 "                   table, topology and NIC choice\n"
                 "  -c, --config     every UCCL_* setting with its current value and doc\n"
                 "  --json           one JSON object instead of the human report\n"
                 "  --topo-xml FILE  report on a recorded hwloc XML topology\n");
}

static int parse_args(int argc, char **argv, info_opts_t *opts)
{
    static const struct option longopts[] = {
        {"config", no_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"topo-xml", required_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    while ((c = getopt_long(argc, argv, "ch", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': opts->config = true; break;
        case 'j': opts->json = true; break;
        case 'x': opts->topo_xml = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "uccl_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    info_opts_t opts = {0};
    int rc = 0;

    if (parse_args(argc, argv, &opts) != 0)
        return 2;
    if (opts.json) {
        printf("{\"version\":\"%s\",", uccl_version());
    } else {
        printf("libuccl %s\n\n", uccl_version());
    }
    if (opts.config) {
        rc |= report_config(stdout, &opts);
    } else {
        report_transports(stdout, &opts);
        report_coll_table(stdout, &opts);
        report_gpu_links(stdout, &opts);
        rc |= report_topology(stdout, &opts);
    }
    if (opts.json)
        printf("%s\"exit\":%d}\n", opts.config ? "" : ",", rc);
    return rc;
}

/* NIC choice: nearest active NICs per GPU (round-robin among GPUs that tie),
 * NUMA preference for host memory, and the UCCL_NET_DEVICES override. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "topo/topo_priv.h"

/* Sort key of a GPU-NIC pair: the class first; within PXB fewer bridges win
 * ("via more switches" is farther). Hop counts in other classes say nothing
 * about bandwidth, so they do not split ties there. */
static int pair_key(const uccl_topo_t *topo, int gpu, int nic)
{
    size_t at = (size_t)gpu * (size_t)topo->nnics + (size_t)nic;
    int dist = topo->dist[at];
    return dist * 256 + (dist == UCCL_TOPO_DIST_PXB ? topo->hops[at] : 0);
}

static bool nic_usable(const uccl_topo_nic_t *nic, unsigned kinds)
{
    return (nic->kind & kinds) != 0 && nic->up;
}

/* Indices of the usable NICs nearest to gpu, in NIC order; returns count. */
static int nearest_nics(const uccl_topo_t *topo, int gpu, unsigned kinds, int *set)
{
    int best = -1, n = 0;

    for (int i = 0; i < topo->nnics; i++) {
        int key;
        if (!nic_usable(&topo->nics[i], kinds))
            continue;
        key = pair_key(topo, gpu, i);
        if (best < 0 || key < best) {
            best = key;
            n = 0;
        }
        if (key == best)
            set[n++] = i;
    }
    return n;
}

static int first_active_port(const uccl_topo_nic_t *nic)
{
    for (int p = 0; p < nic->nports; p++)
        if (nic->ports[p].state == UCCL_TOPO_PORT_ACTIVE ||
            nic->ports[p].state == UCCL_TOPO_PORT_ACTIVE_DEFER)
            return nic->ports[p].num;
    return nic->nports > 0 ? nic->ports[0].num : 0;
}

static void append(char *buf, size_t len, const char *fmt, const char *arg)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, fmt, arg);
}

/* ", skipped (down): a, b" for the NICs of the kinds that are down. */
static void note_down_nics(const uccl_topo_t *topo, unsigned kinds, char *why, size_t len)
{
    const char *sep = "; skipped (down): %s";
    for (int i = 0; i < topo->nnics; i++) {
        if ((topo->nics[i].kind & kinds) && !topo->nics[i].up) {
            append(why, len, sep, topo->nics[i].name);
            sep = ", %s";
        }
    }
}

static void fill_picks(const uccl_topo_t *topo, const int *set, int n, int first,
                       uccl_topo_choice_t *out)
{
    out->n = n < UCCL_TOPO_CHOICE_MAX ? n : UCCL_TOPO_CHOICE_MAX;
    for (int k = 0; k < out->n; k++) {
        const uccl_topo_nic_t *nic = &topo->nics[set[(first + k) % n]];
        out->nics[k].nic = nic;
        out->nics[k].port = first_active_port(nic);
    }
}

static const char *dist_words(uccl_topo_dist_t dist)
{
    switch (dist) {
    case UCCL_TOPO_DIST_PIX: return "same PCIe switch";
    case UCCL_TOPO_DIST_PXB: return "through several PCIe switches";
    case UCCL_TOPO_DIST_PHB: return "same PCIe host bridge";
    case UCCL_TOPO_DIST_NODE: return "same NUMA node";
    case UCCL_TOPO_DIST_SYS: return "across NUMA nodes / sockets";
    }
    return "?";
}

static uccl_status_t no_nic(const uccl_topo_t *topo, unsigned kinds, const char *who,
                            uccl_topo_choice_t *out)
{
    snprintf(out->why, sizeof(out->why), "%s: no active NIC of the requested kinds", who);
    note_down_nics(topo, kinds, out->why, sizeof(out->why));
    uccl_info("%s", out->why);
    return UCCL_ERR_NO_DEVICE;
}

static uccl_status_t select_for_gpu(const uccl_topo_t *topo, int gpu, unsigned kinds,
                                    uccl_topo_choice_t *out)
{
    int set[UCCL_TOPO_CHOICE_MAX * 4], other[UCCL_TOPO_CHOICE_MAX * 4];
    int n, rank = 0, sharing = 1, hops;
    char who[96];
    size_t used;

    if (topo->nnics > (int)(sizeof(set) / sizeof(set[0])))
        return UCCL_ERR_UNSUPPORTED; /* cannot happen with the loader's cap */
    snprintf(who, sizeof(who), "GPU %d (%s)", gpu, topo->gpus[gpu].busid);
    n = nearest_nics(topo, gpu, kinds, set);
    if (n == 0)
        return no_nic(topo, kinds, who, out);
    /* GPUs with exactly the same nearest set share those NICs: spread them. */
    for (int g = 0; g < topo->ngpus; g++) {
        if (g == gpu || nearest_nics(topo, g, kinds, other) != n ||
            memcmp(other, set, (size_t)n * sizeof(int)) != 0)
            continue;
        sharing++;
        rank += g < gpu;
    }
    fill_picks(topo, set, n, rank % n, out);
    out->dist = (uccl_topo_dist_t)topo->dist[(size_t)gpu * topo->nnics + set[0]];
    hops = topo->hops[(size_t)gpu * topo->nnics + out->nics[0].nic->index];
    snprintf(out->why, sizeof(out->why), "%s -> %s port %d: %s (%s, %d PCI bridge%s)", who,
             out->nics[0].nic->name, out->nics[0].port, uccl_topo_dist_name(out->dist),
             dist_words(out->dist), hops, hops == 1 ? "" : "s");
    used = strlen(out->why);
    if (n > 1 || sharing > 1)
        snprintf(out->why + used, sizeof(out->why) - used,
                 "; %d equally near NIC%s shared by %d GPU%s, round-robin slot %d", n,
                 n == 1 ? "" : "s", sharing, sharing == 1 ? "" : "s", rank);
    note_down_nics(topo, kinds, out->why, sizeof(out->why));
    return UCCL_OK;
}

/* Host memory: a NIC on the preferred NUMA node is NODE, any other SYS. */
static uccl_status_t select_for_host(const uccl_topo_t *topo, int node, unsigned kinds,
                                     uccl_topo_choice_t *out)
{
    int set[UCCL_TOPO_CHOICE_MAX * 4];
    int n = 0;
    uccl_topo_dist_t best = UCCL_TOPO_DIST_SYS;
    char who[64];

    if (node >= 0)
        snprintf(who, sizeof(who), "host memory (NUMA node %d)", node);
    else
        snprintf(who, sizeof(who), "host memory");
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        best = pass == 0 ? UCCL_TOPO_DIST_NODE : UCCL_TOPO_DIST_SYS;
        for (int i = 0; i < topo->nnics && n < (int)(sizeof(set) / sizeof(set[0])); i++) {
            bool local = node < 0 || topo->nics[i].numa == node;
            if (nic_usable(&topo->nics[i], kinds) && local == (pass == 0))
                set[n++] = i;
        }
    }
    if (n == 0)
        return no_nic(topo, kinds, who, out);
    fill_picks(topo, set, n, 0, out);
    out->dist = best;
    snprintf(out->why, sizeof(out->why), "%s -> %s port %d: %s", who, out->nics[0].nic->name,
             out->nics[0].port,
             node < 0 ? "process not bound to one NUMA node, every NIC is as near"
             : best == UCCL_TOPO_DIST_NODE ? "NIC on the process's NUMA node"
                                           : "no NIC on the process's NUMA node");
    if (n > 1)
        append(out->why, sizeof(out->why), "; %s equally near NICs", n == 2 ? "2" : "several");
    note_down_nics(topo, kinds, out->why, sizeof(out->why));
    return UCCL_OK;
}

static void list_known(const uccl_topo_t *topo, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < topo->nnics; i++)
        append(buf, len, i == 0 ? "%s" : ", %s", topo->nics[i].name);
    if (topo->nnics == 0)
        append(buf, len, "%s", "none");
}

/* One "device[:port]" entry of the override. */
static uccl_status_t parse_override_entry(const uccl_topo_t *topo, char *entry,
                                          uccl_topo_pick_t *pick, char *why, size_t len)
{
    char *colon = strchr(entry, ':'), *end, known[256];
    const uccl_topo_nic_t *nic;
    long port = 0;

    if (colon != NULL) {
        *colon = '\0';
        port = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 255) {
            snprintf(why, len, "net devices override: bad port '%s' for '%s' (want device[:port])",
                     colon + 1, entry);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    if (entry[0] == '\0') {
        snprintf(why, len, "net devices override: empty device name (want device[:port],...)");
        return UCCL_ERR_INVALID_PARAM;
    }
    nic = uccl_topo_nic_by_name(topo, entry);
    if (nic == NULL) {
        list_known(topo, known, sizeof(known));
        snprintf(why, len, "net devices override: unknown device '%s' (known: %s)", entry, known);
        return UCCL_ERR_NOT_FOUND;
    }
    if (port != 0 && nic->nports > 0) {
        bool found = false;
        for (int p = 0; p < nic->nports; p++)
            found |= nic->ports[p].num == port;
        if (!found) {
            snprintf(why, len, "net devices override: %s has no port %ld (it has %d)", nic->name,
                     port, nic->nports);
            return UCCL_ERR_NOT_FOUND;
        }
    }
    if (!nic->up)
        uccl_warn("net devices override names %s, which is down; using it as asked", nic->name);
    pick->nic = nic;
    pick->port = port != 0 ? (int)port : first_active_port(nic);
    return UCCL_OK;
}

static uccl_status_t select_override(const uccl_topo_t *topo, int gpu, const char *override,
                                     uccl_topo_choice_t *out)
{
    char copy[512], *save = NULL, *entry;
    uccl_status_t st;

    if (strlen(override) >= sizeof(copy)) {
        snprintf(out->why, sizeof(out->why), "net devices override too long");
        return UCCL_ERR_INVALID_PARAM;
    }
    strcpy(copy, override);
    /* strtok would fold ",," into one separator and hide the empty entry. */
    for (entry = copy; entry != NULL; entry = save) {
        save = strchr(entry, ',');
        if (save != NULL)
            *save++ = '\0';
        if (out->n == UCCL_TOPO_CHOICE_MAX) {
            snprintf(out->why, sizeof(out->why), "net devices override: more than %d devices",
                     UCCL_TOPO_CHOICE_MAX);
            return UCCL_ERR_INVALID_PARAM;
        }
        st = parse_override_entry(topo, entry, &out->nics[out->n], out->why, sizeof(out->why));
        if (st != UCCL_OK)
            return st;
        out->n++;
    }
    out->overridden = true;
    out->dist = gpu >= 0 ? (uccl_topo_dist_t)topo->dist[(size_t)gpu * topo->nnics +
                                                        out->nics[0].nic->index]
                         : UCCL_TOPO_DIST_SYS;
    snprintf(out->why, sizeof(out->why), "net devices override '%s' -> %s port %d", override,
             out->nics[0].nic->name, out->nics[0].port);
    return UCCL_OK;
}

uccl_status_t uccl_topo_select(const uccl_topo_t *topo, const uccl_topo_query_t *query,
                               uccl_topo_choice_t *out)
{
    unsigned kinds;
    const uccl_topo_gpu_t *gpu = NULL;
    uccl_status_t st;

    if (topo == NULL || query == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    memset(out, 0, sizeof(*out));
    out->gpu = -1;
    kinds = query->kinds != 0 ? query->kinds : UCCL_TOPO_NIC_RDMA;
    if (query->gpu_busid != NULL) {
        gpu = uccl_topo_gpu_by_busid(topo, query->gpu_busid);
        if (gpu == NULL) {
            snprintf(out->why, sizeof(out->why), "GPU %s is not in the topology (%s, %d GPUs)",
                     query->gpu_busid, topo->source, topo->ngpus);
            uccl_error("%s", out->why);
            return UCCL_ERR_NOT_FOUND;
        }
        out->gpu = gpu->index;
    }
    if (query->override != NULL && query->override[0] != '\0') {
        st = select_override(topo, out->gpu, query->override, out);
        if (st != UCCL_OK) {
            uccl_error("%s", out->why);
            out->n = 0;
        }
        return st;
    }
    if (gpu != NULL)
        return select_for_gpu(topo, gpu->index, kinds, out);
    return select_for_host(topo, query->numa_node >= 0 ? query->numa_node : topo->proc_numa,
                           kinds, out);
}

uccl_status_t uccl_topo_select_nics(const uccl_topo_t *topo, const char *gpu_busid,
                                    const char *override, uccl_topo_choice_t *out)
{
    uccl_topo_query_t query = {
        .gpu_busid = gpu_busid,
        .numa_node = -1,
        .kinds = UCCL_TOPO_NIC_RDMA,
        .override = override,
    };
    return uccl_topo_select(topo, &query, out);
}

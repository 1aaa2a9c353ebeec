/* The engine's view of the machine topology, loaded at most once per engine
 * and shared by its transports (uccl_tp_topo, uccl_tp_nics of tp_api.h) and
 * its progress thread. topo never asks the GPU runtime (it stays buildable
 * and testable without one), so the engine gathers the runtime's ordinal ->
 * PCI bus id table and passes it in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "gpu/gpu.h"
#include "topo/topo.h"

#define ENGINE_TOPO_GPUS_MAX 64

static uccl_status_t engine_topo_load(const uccl_engine_t *engine, uccl_topo_t **topo)
{
    char ids[ENGINE_TOPO_GPUS_MAX][UCCL_GPU_BUS_ID_MAX];
    const char *busids[ENGINE_TOPO_GPUS_MAX];
    const char *xml = engine->cfg.topo_xml[0] != '\0' ? engine->cfg.topo_xml : NULL;
    int n = 0;

    if (uccl_gpu_count(&n) != UCCL_OK || n < 0)
        n = 0;
    if (n > ENGINE_TOPO_GPUS_MAX)
        n = ENGINE_TOPO_GPUS_MAX;
    for (int dev = 0; dev < n; dev++) {
        if (uccl_gpu_pci_bus_id(dev, ids[dev], sizeof(ids[dev])) != UCCL_OK)
            ids[dev][0] = '\0';
        busids[dev] = ids[dev];
    }
    return uccl_topo_load_gpus(xml, busids, n, topo);
}

const uccl_topo_t *uccl_engine_topo(uccl_engine_t *engine, uccl_status_t *status)
{
    if (!engine->topo_loaded) {
        engine->topo_loaded = true;
        engine->topo_status = engine_topo_load(engine, &engine->topo);
        if (engine->topo_status != UCCL_OK)
            engine->topo = NULL;
    }
    if (status != NULL)
        *status = engine->topo_status;
    return engine->topo;
}

void uccl_engine_topo_free(uccl_engine_t *engine)
{
    if (engine->topo != NULL)
        uccl_topo_free(engine->topo);
    engine->topo = NULL;
    engine->topo_loaded = false;
}

const uccl_topo_t *uccl_tp_topo(const uccl_tp_open_params_t *params, uccl_status_t *status)
{
    return uccl_engine_topo(params->engine, status);
}

/* params->net_devices as given: "name[:port],..." (settings.c checked it). */
static uccl_status_t nics_configured(const char *names, uccl_tp_nics_t *out)
{
    out->configured = true;
    for (const char *p = names; *p != '\0' && out->n < UCCL_TP_NICS_MAX;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t name_len = colon ? (size_t)(colon - p) : len;

        if (name_len == 0 || name_len >= UCCL_TP_NIC_NAME_MAX) {
            snprintf(out->why, sizeof(out->why), "UCCL_NET_DEVICES=%s: bad entry '%.*s'", names,
                     (int)len, p);
            return UCCL_ERR_INVALID_PARAM;
        }
        memcpy(out->nic[out->n].name, p, name_len);
        out->nic[out->n].name[name_len] = '\0';
        out->nic[out->n].port = colon ? atoi(colon + 1) : 0;
        out->n++;
        p += len + (end ? 1 : 0);
    }
    snprintf(out->why, sizeof(out->why), "as UCCL_NET_DEVICES=%s asks", names);
    return UCCL_OK;
}

uccl_status_t uccl_tp_nics(const uccl_tp_open_params_t *params, unsigned kinds, uccl_tp_nics_t *out)
{
    char busid[UCCL_TOPO_BUSID_MAX];
    uccl_topo_query_t query = {.numa_node = -1, .kinds = kinds};
    uccl_topo_choice_t choice = {.n = 0};
    const uccl_topo_t *topo;
    uccl_status_t st;

    if (params == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    memset(out, 0, sizeof(*out));
    if (params->net_devices != NULL && params->net_devices[0] != '\0')
        return nics_configured(params->net_devices, out);
    topo = uccl_tp_topo(params, &st);
    if (topo == NULL) {
        snprintf(out->why, sizeof(out->why), "no topology (%s)",
                 st == UCCL_ERR_UNSUPPORTED ? "built without hwloc" : uccl_strerror(st));
        return st;
    }
    if (params->gpu_index >= 0 &&
        uccl_gpu_pci_bus_id(params->gpu_index, busid, sizeof(busid)) == UCCL_OK)
        query.gpu_busid = busid;
    st = uccl_topo_select(topo, &query, &choice);
    snprintf(out->why, sizeof(out->why), "%s", choice.why);
    if (st != UCCL_OK)
        return st;
    for (int i = 0; i < choice.n && out->n < UCCL_TP_NICS_MAX; i++, out->n++) {
        const uccl_topo_nic_t *nic = choice.nics[i].nic;

        snprintf(out->nic[out->n].name, sizeof(out->nic[out->n].name), "%s", nic->name);
        snprintf(out->nic[out->n].netdev, sizeof(out->nic[out->n].netdev), "%s", nic->netdev);
        snprintf(out->nic[out->n].busid, sizeof(out->nic[out->n].busid), "%s", nic->busid);
        out->nic[out->n].port = choice.nics[i].port;
    }
    return UCCL_OK;
}

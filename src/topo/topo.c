/* Topology object lifetime and accessors; independent of hwloc so that the
 * NIC choice logic builds (and is testable) in every configuration. */
#include "topo/topo_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uccl_status_t uccl_topo_alloc(int ngpus, int nnics, uccl_topo_t **out)
{
    size_t pairs = (size_t)(ngpus > 0 ? ngpus : 1) * (size_t)(nnics > 0 ? nnics : 1);
    uccl_topo_t *topo = calloc(1, sizeof(*topo));

    if (topo == NULL)
        return UCCL_ERR_NO_MEMORY;
    topo->ngpus = ngpus;
    topo->nnics = nnics;
    topo->proc_numa = -1;
    topo->gpus = calloc((size_t)ngpus + 1, sizeof(*topo->gpus));
    topo->nics = calloc((size_t)nnics + 1, sizeof(*topo->nics));
    topo->dist = calloc(pairs, 1);
    topo->hops = calloc(pairs, 1);
    topo->gpu_cpus = calloc((size_t)ngpus + 1, sizeof(cpu_set_t));
    topo->nic_cpus = calloc((size_t)nnics + 1, sizeof(cpu_set_t));
    topo->gpu_has_cpus = calloc((size_t)ngpus + 1, sizeof(bool));
    topo->nic_has_cpus = calloc((size_t)nnics + 1, sizeof(bool));
    if (topo->gpus == NULL || topo->nics == NULL || topo->dist == NULL || topo->hops == NULL ||
        topo->gpu_cpus == NULL || topo->nic_cpus == NULL || topo->gpu_has_cpus == NULL ||
        topo->nic_has_cpus == NULL) {
        uccl_topo_free(topo);
        return UCCL_ERR_NO_MEMORY;
    }
    *out = topo;
    return UCCL_OK;
}

void uccl_topo_free(uccl_topo_t *topo)
{
    if (topo == NULL)
        return;
    free(topo->gpus);
    free(topo->nics);
    free(topo->dist);
    free(topo->hops);
    free(topo->gpu_cpus);
    free(topo->nic_cpus);
    free(topo->gpu_has_cpus);
    free(topo->nic_has_cpus);
    free(topo);
}

bool uccl_topo_parse_busid(const char *text, uint64_t *key)
{
    unsigned long domain = 0;
    unsigned bus, dev, fn;
    int used = 0;

    if (text == NULL)
        return false;
    if (sscanf(text, "%lx:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) != 4 || text[used] != '\0') {
        domain = 0;
        used = 0;
        if (sscanf(text, "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3 || text[used] != '\0')
            return false;
    }
    if (domain > 0xffffffffUL || bus > 0xff || dev > 0x1f || fn > 0x7)
        return false;
    *key = ((uint64_t)domain << 16) | (bus << 8) | (dev << 3) | fn;
    return true;
}

const char *uccl_topo_source(const uccl_topo_t *topo)
{
    return topo->source;
}

const char *uccl_topo_machine(const uccl_topo_t *topo)
{
    return topo->machine;
}

int uccl_topo_numa_count(const uccl_topo_t *topo)
{
    return topo->numa_count;
}

int uccl_topo_gpu_count(const uccl_topo_t *topo)
{
    return topo != NULL ? topo->ngpus : 0;
}

const uccl_topo_gpu_t *uccl_topo_gpu(const uccl_topo_t *topo, int index)
{
    return topo != NULL && index >= 0 && index < topo->ngpus ? &topo->gpus[index] : NULL;
}

const uccl_topo_gpu_t *uccl_topo_gpu_by_busid(const uccl_topo_t *topo, const char *busid)
{
    uint64_t want, have;

    if (topo == NULL || !uccl_topo_parse_busid(busid, &want))
        return NULL;
    for (int i = 0; i < topo->ngpus; i++)
        if (uccl_topo_parse_busid(topo->gpus[i].busid, &have) && have == want)
            return &topo->gpus[i];
    return NULL;
}

int uccl_topo_nic_count(const uccl_topo_t *topo)
{
    return topo != NULL ? topo->nnics : 0;
}

const uccl_topo_nic_t *uccl_topo_nic(const uccl_topo_t *topo, int index)
{
    return topo != NULL && index >= 0 && index < topo->nnics ? &topo->nics[index] : NULL;
}

const uccl_topo_nic_t *uccl_topo_nic_by_name(const uccl_topo_t *topo, const char *name)
{
    if (topo == NULL || name == NULL)
        return NULL;
    for (int i = 0; i < topo->nnics; i++)
        if (strcmp(topo->nics[i].name, name) == 0)
            return &topo->nics[i];
    return NULL;
}

uccl_status_t uccl_topo_distance(const uccl_topo_t *topo, int gpu, int nic,
                                 uccl_topo_dist_t *dist, int *hops)
{
    size_t at;

    if (topo == NULL || dist == NULL || gpu < 0 || gpu >= topo->ngpus || nic < 0 ||
        nic >= topo->nnics)
        return UCCL_ERR_INVALID_PARAM;
    at = (size_t)gpu * (size_t)topo->nnics + (size_t)nic;
    *dist = (uccl_topo_dist_t)topo->dist[at];
    if (hops != NULL)
        *hops = topo->hops[at];
    return UCCL_OK;
}

const char *uccl_topo_dist_name(uccl_topo_dist_t dist)
{
    static const char *const names[] = {"PIX", "PXB", "PHB", "NODE", "SYS"};
    return (unsigned)dist < sizeof(names) / sizeof(names[0]) ? names[dist] : "?";
}

const char *uccl_topo_port_state_name(uccl_topo_port_state_t state)
{
    static const char *const names[] = {"unknown", "down", "init", "armed", "active", "active_defer"};
    return (unsigned)state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

uccl_status_t uccl_topo_cpuset(const uccl_topo_t *topo, int gpu, int nic, cpu_set_t *set)
{
    if (topo == NULL || set == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (gpu >= 0) {
        if (gpu >= topo->ngpus)
            return UCCL_ERR_INVALID_PARAM;
        if (!topo->gpu_has_cpus[gpu])
            return UCCL_ERR_NOT_FOUND;
        *set = topo->gpu_cpus[gpu];
        return UCCL_OK;
    }
    if (nic < 0 || nic >= topo->nnics)
        return UCCL_ERR_INVALID_PARAM;
    if (!topo->nic_has_cpus[nic])
        return UCCL_ERR_NOT_FOUND;
    *set = topo->nic_cpus[nic];
    return UCCL_OK;
}

/* The topology object shared by the loader (topo_hwloc.c) and the generic
 * accessors and NIC choice (topo.c, topo_select.c), which need no hwloc. */
#ifndef UCCL_TOPO_TOPO_PRIV_H
#define UCCL_TOPO_TOPO_PRIV_H

#include <stdint.h>

#include "topo/topo.h"

struct uccl_topo {
    char source[256];
    char machine[UCCL_TOPO_NAME_MAX];
    int numa_count;
    int proc_numa; /* NUMA node this process is bound to, -1 none / not this machine */
    int ngpus;
    int nnics;
    uccl_topo_gpu_t *gpus;
    uccl_topo_nic_t *nics;
    uint8_t *dist;       /* [gpu * nnics + nic]: uccl_topo_dist_t */
    uint8_t *hops;       /* [gpu * nnics + nic]: PCI bridges on the path */
    cpu_set_t *gpu_cpus; /* CPUs near each GPU */
    cpu_set_t *nic_cpus; /* CPUs near each NIC */
    bool *gpu_has_cpus;
    bool *nic_has_cpus;
};

/* Allocate the arrays for ngpus GPUs and nnics NICs (all zero). */
uccl_status_t uccl_topo_alloc(int ngpus, int nnics, uccl_topo_t **topo);

/* Parse "dddd:bb:dd.f" or "bb:dd.f" (hex, any case, long domains allowed)
 * into one comparable number; false when malformed. */
bool uccl_topo_parse_busid(const char *text, uint64_t *key);

#endif

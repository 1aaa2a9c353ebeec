/* Topology loader for builds without hwloc: there is none, so callers fall
 * back to their own default (a transport takes its first active device). */
#include "util/log.h"
#include "topo/topo_priv.h"

uccl_status_t uccl_topo_load(const char *xml, uccl_topo_t **topo)
{
    return uccl_topo_load_gpus(xml, NULL, 0, topo);
}

uccl_status_t uccl_topo_load_gpus(const char *xml, const char *const *busids, int n,
                                  uccl_topo_t **topo)
{
    (void)xml;
    (void)busids;
    (void)n;
    if (topo != NULL)
        *topo = NULL;
    uccl_debug("built without hwloc: no topology, NIC choice falls back to the first device");
    return UCCL_ERR_UNSUPPORTED;
}

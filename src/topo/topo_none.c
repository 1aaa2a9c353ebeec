/* Topology loader for builds without hwloc: there is none, so callers fall
 * back to their own default (a transport takes its first active device). */
#include "core/log.h"
#include "topo/topo_priv.h"

uccl_status_t uccl_topo_load(const char *xml, uccl_topo_t **topo)
{
    (void)xml;
    if (topo != NULL)
        *topo = NULL;
    uccl_debug("built without hwloc: no topology, NIC choice falls back to the first device");
    return UCCL_ERR_UNSUPPORTED;
}

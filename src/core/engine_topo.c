/* The engine's view of the machine topology: topo never asks the GPU runtime
 * (it stays buildable and testable without one), so the engine gathers the
 * runtime's ordinal -> PCI bus id table and passes it in. */
#include "core.h"
#include "gpu/gpu.h"
#include "topo/topo.h"

#define ENGINE_TOPO_GPUS_MAX 64

uccl_status_t uccl_engine_topo_load(const uccl_engine_t *engine, uccl_topo_t **topo)
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

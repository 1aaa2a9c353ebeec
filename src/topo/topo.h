/* Machine topology for NIC choice: GPUs and NICs with their PCI location,
 * the PCIe distance between each GPU and NIC, and the nearest-NIC choice.
 *
 * Transports do not load a topology: the engine loads one per engine (with
 * the GPU runtime's ordinals) and hands it out through the transport SPI
 * (src/core/tp_api.h): uccl_tp_topo() for the object, uccl_tp_nics() for
 * the ranked NIC names (configured devices, else uccl_topo_select()).
 * Others (tests, uccl_info) use uccl_topo_load_gpus() / uccl_topo_select():
 *   st = uccl_topo_select_nics(topo, gpu_busid_or_NULL, override, &choice);
 *   choice.nics[0].nic->name / .port is the device to open; choice.nics[1..n-1]
 *   are equally near ones to stripe over; choice.why says why (log it at info).
 *   uccl_topo_free(topo) once done (choice points into topo).
 * A topology is immutable after load: any number of threads may query one
 * topology at once. Everything here is internal (not exported by libuccl). */
#ifndef UCCL_TOPO_TOPO_H
#define UCCL_TOPO_TOPO_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <uccl/uccl.h>

#define UCCL_TOPO_NAME_MAX 64
#define UCCL_TOPO_BUSID_MAX 16 /* "dddd:bb:dd.f" */
#define UCCL_TOPO_PORTS_MAX 4
#define UCCL_TOPO_CHOICE_MAX 16
#define UCCL_TOPO_WHY_MAX 384

typedef struct uccl_topo uccl_topo_t;

/* What a NIC can be used for (a mask in queries). */
enum {
    UCCL_TOPO_NIC_VERBS = 1u << 0, /* OpenFabrics (ibverbs) device: mlx5_0, rxe0 */
    UCCL_TOPO_NIC_OFI = 1u << 1,   /* libfabric-only device found by PCI id: cxi, EFA */
    UCCL_TOPO_NIC_NET = 1u << 2,   /* plain network interface (tcp): eth0, ib0 */
};
#define UCCL_TOPO_NIC_RDMA (UCCL_TOPO_NIC_VERBS | UCCL_TOPO_NIC_OFI)

/* GPU-to-NIC distance classes, nearest first (names as nvidia-smi topo -m). */
typedef enum {
    UCCL_TOPO_DIST_PIX = 0,  /* behind the same PCIe switch or bridge */
    UCCL_TOPO_DIST_PXB = 1,  /* through several PCIe switches, not the host bridge */
    UCCL_TOPO_DIST_PHB = 2,  /* through the same PCIe host bridge (CPU root complex) */
    UCCL_TOPO_DIST_NODE = 3, /* same NUMA node, different host bridges */
    UCCL_TOPO_DIST_SYS = 4,  /* across NUMA nodes / sockets (or location unknown) */
} uccl_topo_dist_t;

/* Port state as the IB sysfs / hwloc "PortNState" numbers. */
typedef enum {
    UCCL_TOPO_PORT_UNKNOWN = 0, /* not reported: treated as usable */
    UCCL_TOPO_PORT_DOWN = 1,
    UCCL_TOPO_PORT_INIT = 2,
    UCCL_TOPO_PORT_ARMED = 3,
    UCCL_TOPO_PORT_ACTIVE = 4,
    UCCL_TOPO_PORT_ACTIVE_DEFER = 5,
} uccl_topo_port_state_t;

typedef struct uccl_topo_gpu {
    int index;                       /* position in uccl_topo_gpu(); round-robin key */
    int device;                      /* runtime ordinal, -1 when unknown (XML replay) */
    char busid[UCCL_TOPO_BUSID_MAX]; /* "0000:17:00.0" */
    uint16_t vendor, device_id;      /* PCI ids (0x10de NVIDIA, 0x1002 AMD) */
    char name[UCCL_TOPO_NAME_MAX];   /* OS device (cuda0, nvml0, card0) or "" */
    char model[UCCL_TOPO_NAME_MAX];  /* PCI device string, may be "" */
    int numa;                        /* nearest NUMA node os index, -1 unknown */
} uccl_topo_gpu_t;

typedef struct uccl_topo_port {
    int num;                      /* 1-based port number */
    uccl_topo_port_state_t state;
} uccl_topo_port_t;

typedef struct uccl_topo_nic {
    int index;                       /* position in uccl_topo_nic() */
    unsigned kind;                   /* one UCCL_TOPO_NIC_* bit */
    char name[UCCL_TOPO_NAME_MAX];   /* mlx5_0, cxi0, eth0 */
    char busid[UCCL_TOPO_BUSID_MAX]; /* "" for a virtual device (rxe, lo-less veth) */
    uint16_t vendor, device_id;
    char netdev[UCCL_TOPO_NAME_MAX]; /* network interface on the same PCI device, or "" */
    float link_gbps;                 /* PCIe link speed in GB/s as hwloc reports, 0 unknown */
    int nports;
    uccl_topo_port_t ports[UCCL_TOPO_PORTS_MAX];
    bool up;                         /* an active port (or no state reported at all) */
    int numa;                        /* nearest NUMA node os index, -1 unknown */
} uccl_topo_nic_t;

/* One chosen NIC and the port to use on it (0 when the NIC has no ports). */
typedef struct uccl_topo_pick {
    const uccl_topo_nic_t *nic;
    int port;
} uccl_topo_pick_t;

typedef struct uccl_topo_choice {
    int n;                        /* entries in nics[] (>= 1 on success) */
    uccl_topo_pick_t nics[UCCL_TOPO_CHOICE_MAX]; /* nics[0] = this GPU's primary */
    uccl_topo_dist_t dist;        /* class of nics[0] */
    int gpu;                      /* GPU index in the topology, -1 for host memory */
    bool overridden;              /* came from UCCL_NET_DEVICES / the override */
    char why[UCCL_TOPO_WHY_MAX];  /* one human line: what was chosen and why */
} uccl_topo_choice_t;

/* A general query; uccl_topo_select_nics fills one with the defaults. */
typedef struct uccl_topo_query {
    const char *gpu_busid; /* PCI bus id of the engine's GPU, NULL = host memory */
    int numa_node;         /* host memory: NUMA node to prefer, -1 = this process's */
    unsigned kinds;        /* UCCL_TOPO_NIC_* mask, 0 = UCCL_TOPO_NIC_RDMA */
    const char *override;  /* "mlx5_0:1,rxe0" (device[:port]), NULL or "" = by distance */
} uccl_topo_query_t;

/* Load the topology: from xml when non-NULL, else HWLOC_XMLFILE when set,
 * else the live machine (with I/O devices). GPUs keep device -1 (no runtime
 * ordinal); uccl_topo_load_gpus numbers them.
 * Errors: UCCL_ERR_UNSUPPORTED (built without hwloc), UCCL_ERR_NOT_FOUND (xml
 * file missing or unreadable), UCCL_ERR_INVALID_PARAM (xml malformed),
 * UCCL_ERR_NO_MEMORY, UCCL_ERR_IO (hwloc failed on the live machine). */
uccl_status_t uccl_topo_load(const char *xml, uccl_topo_t **topo);
/* The same, and on the live machine the GPUs are numbered as the GPU
 * runtime numbers them: busids[i] is the PCI bus id of runtime ordinal i
 * ("" or NULL when unknown), for i < n. The caller (the engine) asks the
 * runtime; topo never does, so it builds and tests without a GPU layer. */
uccl_status_t uccl_topo_load_gpus(const char *xml, const char *const *busids, int n,
                                  uccl_topo_t **topo);
void uccl_topo_free(uccl_topo_t *topo);

/* Where the topology came from ("live machine" or the XML path) and the
 * machine's name (hostname or DMI product from the XML, may be ""). */
const char *uccl_topo_source(const uccl_topo_t *topo);
const char *uccl_topo_machine(const uccl_topo_t *topo);
int uccl_topo_numa_count(const uccl_topo_t *topo);

/* GPUs, ordered by runtime ordinal when known, else by PCI bus id. */
int uccl_topo_gpu_count(const uccl_topo_t *topo);
const uccl_topo_gpu_t *uccl_topo_gpu(const uccl_topo_t *topo, int index);
/* The GPU with that PCI bus id (any case, 4 or 8 digit domain), or NULL. */
const uccl_topo_gpu_t *uccl_topo_gpu_by_busid(const uccl_topo_t *topo, const char *busid);
int uccl_topo_nic_count(const uccl_topo_t *topo);
const uccl_topo_nic_t *uccl_topo_nic(const uccl_topo_t *topo, int index);
const uccl_topo_nic_t *uccl_topo_nic_by_name(const uccl_topo_t *topo, const char *name);

/* Distance class between GPU gpu and NIC nic (indices); *hops = PCI bridges
 * on the path (may be NULL). Errors: UCCL_ERR_INVALID_PARAM (bad index). */
uccl_status_t uccl_topo_distance(const uccl_topo_t *topo, int gpu, int nic,
                                 uccl_topo_dist_t *dist, int *hops);
const char *uccl_topo_dist_name(uccl_topo_dist_t dist);
const char *uccl_topo_port_state_name(uccl_topo_port_state_t state);

/* CPUs near the GPU (its NUMA node's CPUs), for the progress thread's
 * affinity; gpu = -1: CPUs of the NUMA node of nic (index) instead.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NOT_FOUND (locality unknown). */
uccl_status_t uccl_topo_cpuset(const uccl_topo_t *topo, int gpu, int nic, cpu_set_t *set);

/* Choose NICs of the RDMA kinds for the GPU with PCI id gpu_busid (NULL =
 * host memory, then NICs on this process's NUMA node are preferred).
 * override (UCCL_NET_DEVICES format, may be NULL/"") wins when set.
 * Returns the nearest active NICs: equally near NICs all appear, rotated so
 * GPUs that tie for the same NICs spread round-robin by GPU index; NICs that
 * are down are skipped. Errors (out->why says more, logged once):
 * UCCL_ERR_NOT_FOUND (gpu_busid not in the topology, or override names a
 * device or port that does not exist: the known ones are listed),
 * UCCL_ERR_INVALID_PARAM (malformed override or bad arguments),
 * UCCL_ERR_NO_DEVICE (no active NIC of those kinds). */
uccl_status_t uccl_topo_select_nics(const uccl_topo_t *topo, const char *gpu_busid,
                                    const char *override, uccl_topo_choice_t *out);
/* The same with every knob (kinds, NUMA node for host memory). */
uccl_status_t uccl_topo_select(const uccl_topo_t *topo, const uccl_topo_query_t *query,
                               uccl_topo_choice_t *out);

#endif

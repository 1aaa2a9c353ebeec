/* Topology loader over hwloc 2.x: the live machine (with I/O devices) or an
 * XML file; finds GPUs and NICs and the PCIe distance of every pair. */
#include <dirent.h>
#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "topo/topo_priv.h"

#define TOPO_NICS_MAX 64 /* topo_select.c sizes its scratch arrays by this */
#define TOPO_GPUS_MAX 64

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMD 0x1002
#define PCI_VENDOR_CRAY 0x17db   /* HPE Slingshot Cassini (cxi) */
#define PCI_VENDOR_AMAZON 0x1d0f /* EFA */

/* What the loader collected: the topology plus the hwloc objects behind its
 * GPUs and NICs, for the distance pass. */
typedef struct topo_scan {
    hwloc_topology_t hw;
    hwloc_obj_t gpu_obj[TOPO_GPUS_MAX];
    hwloc_obj_t nic_obj[TOPO_NICS_MAX]; /* PCI device, NULL for a virtual NIC */
    uccl_topo_gpu_t gpus[TOPO_GPUS_MAX];
    uccl_topo_nic_t nics[TOPO_NICS_MAX];
    int ngpus;
    int nnics;
} topo_scan_t;

static bool pci_is_gpu(const struct hwloc_pcidev_attr_s *pci)
{
    /* 0x0300 VGA, 0x0302 3D controller, 0x0380 display (AMD Instinct). */
    bool display = pci->class_id == 0x0300 || pci->class_id == 0x0302 || pci->class_id == 0x0380;
    return display && (pci->vendor_id == PCI_VENDOR_NVIDIA || pci->vendor_id == PCI_VENDOR_AMD);
}

/* NICs only libfabric drives: EFA (its verbs device cannot do RC) and cxi
 * (no verbs device at all, and hwloc has no OS device for it). */
static bool pci_is_ofi_nic(const struct hwloc_pcidev_attr_s *pci)
{
    if (pci->vendor_id == PCI_VENDOR_AMAZON)
        return (pci->device_id & 0xfff0) == 0xefa0;
    return pci->vendor_id == PCI_VENDOR_CRAY && pci->device_id == 0x0501;
}

static void format_busid(const struct hwloc_pcidev_attr_s *pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", (unsigned)pci->domain, (unsigned)pci->bus,
             (unsigned)pci->dev, (unsigned)pci->func);
}

/* NUMA node (os index) and CPUs of the normal object an I/O object hangs on. */
static void locality(hwloc_topology_t hw, hwloc_obj_t obj, int *numa, cpu_set_t *cpus, bool *has)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, obj);
    unsigned cpu;

    *numa = -1;
    *has = false;
    CPU_ZERO(cpus);
    if (anc == NULL)
        return;
    if (anc->nodeset != NULL && hwloc_bitmap_weight(anc->nodeset) == 1)
        *numa = hwloc_bitmap_first(anc->nodeset);
    if (anc->cpuset == NULL)
        return;
    hwloc_bitmap_foreach_begin(cpu, anc->cpuset)
        if (cpu < CPU_SETSIZE) {
            CPU_SET(cpu, cpus);
            *has = true;
        }
    hwloc_bitmap_foreach_end();
}

static void copy_info(hwloc_obj_t obj, const char *key, char *buf, size_t len)
{
    const char *value = obj != NULL ? hwloc_obj_get_info_by_name(obj, key) : NULL;
    snprintf(buf, len, "%s", value != NULL ? value : "");
}

static void scan_gpus(topo_scan_t *scan)
{
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(scan->hw, NULL); pci != NULL;
         pci = hwloc_get_next_pcidev(scan->hw, pci)) {
        uccl_topo_gpu_t *gpu = &scan->gpus[scan->ngpus];

        if (!pci_is_gpu(&pci->attr->pcidev))
            continue;
        if (scan->ngpus == TOPO_GPUS_MAX) {
            uccl_warn("topology: more than %d GPUs, ignoring the rest", TOPO_GPUS_MAX);
            return;
        }
        format_busid(&pci->attr->pcidev, gpu->busid, sizeof(gpu->busid));
        gpu->vendor = pci->attr->pcidev.vendor_id;
        gpu->device_id = pci->attr->pcidev.device_id;
        gpu->device = -1;
        copy_info(pci, "PCIDevice", gpu->model, sizeof(gpu->model));
        for (hwloc_obj_t os = pci->io_first_child; os != NULL; os = os->next_sibling)
            if (os->type == HWLOC_OBJ_OS_DEVICE && gpu->name[0] == '\0' && os->name != NULL)
                snprintf(gpu->name, sizeof(gpu->name), "%s", os->name);
        scan->gpu_obj[scan->ngpus++] = pci;
    }
}

static uccl_topo_nic_t *add_nic(topo_scan_t *scan, hwloc_obj_t pci, unsigned kind,
                                const char *name)
{
    uccl_topo_nic_t *nic = &scan->nics[scan->nnics];

    if (scan->nnics == TOPO_NICS_MAX) {
        uccl_warn("topology: more than %d NICs, ignoring %s", TOPO_NICS_MAX, name);
        return NULL;
    }
    memset(nic, 0, sizeof(*nic));
    nic->kind = kind;
    nic->up = true;
    snprintf(nic->name, sizeof(nic->name), "%s", name);
    if (pci != NULL) {
        format_busid(&pci->attr->pcidev, nic->busid, sizeof(nic->busid));
        nic->vendor = pci->attr->pcidev.vendor_id;
        nic->device_id = pci->attr->pcidev.device_id;
        nic->link_gbps = pci->attr->pcidev.linkspeed;
    }
    scan->nic_obj[scan->nnics++] = pci;
    return nic;
}

/* Ports from hwloc's "PortNState" infos (the IB sysfs numbers). A NIC is up
 * when a port is active, or when no state is reported at all (old XMLs). */
static void read_port_infos(hwloc_obj_t os, uccl_topo_nic_t *nic)
{
    char key[32];

    for (int num = 1; nic->nports < UCCL_TOPO_PORTS_MAX && num <= 16; num++) {
        const char *state;
        snprintf(key, sizeof(key), "Port%dState", num);
        state = hwloc_obj_get_info_by_name(os, key);
        if (state == NULL)
            continue;
        nic->ports[nic->nports].num = num;
        nic->ports[nic->nports].state = (uccl_topo_port_state_t)atoi(state);
        if (nic->ports[nic->nports].state > UCCL_TOPO_PORT_ACTIVE_DEFER)
            nic->ports[nic->nports].state = UCCL_TOPO_PORT_UNKNOWN;
        nic->nports++;
    }
    if (nic->nports > 0) {
        nic->up = false;
        for (int p = 0; p < nic->nports; p++)
            nic->up |= nic->ports[p].state == UCCL_TOPO_PORT_ACTIVE ||
                       nic->ports[p].state == UCCL_TOPO_PORT_ACTIVE_DEFER;
    }
}

static hwloc_obj_t pci_parent(hwloc_obj_t os)
{
    return os->parent != NULL && os->parent->type == HWLOC_OBJ_PCI_DEVICE ? os->parent : NULL;
}

static void scan_nics(topo_scan_t *scan)
{
    hwloc_obj_t os;
    int cxi = 0;

    /* RDMA devices first, then network interfaces (which name their RDMA
     * sibling's netdev), then libfabric-only PCI devices without OS device. */
    for (os = NULL; (os = hwloc_get_next_osdev(scan->hw, os)) != NULL;) {
        hwloc_obj_t pci = pci_parent(os);
        bool ofi = pci != NULL && pci_is_ofi_nic(&pci->attr->pcidev);
        uccl_topo_nic_t *nic;

        if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == NULL)
            continue;
        nic = add_nic(scan, pci, ofi ? UCCL_TOPO_NIC_OFI : UCCL_TOPO_NIC_VERBS, os->name);
        if (nic != NULL)
            read_port_infos(os, nic);
    }
    for (os = NULL; (os = hwloc_get_next_osdev(scan->hw, os)) != NULL;) {
        hwloc_obj_t pci = pci_parent(os);
        if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || os->name == NULL)
            continue;
        for (int i = 0; pci != NULL && i < scan->nnics; i++)
            if (scan->nic_obj[i] == pci && scan->nics[i].netdev[0] == '\0')
                snprintf(scan->nics[i].netdev, sizeof(scan->nics[i].netdev), "%s", os->name);
        add_nic(scan, pci, UCCL_TOPO_NIC_NET, os->name);
    }
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(scan->hw, NULL); pci != NULL;
         pci = hwloc_get_next_pcidev(scan->hw, pci)) {
        char name[32];
        if (!pci_is_ofi_nic(&pci->attr->pcidev) || pci->attr->pcidev.vendor_id != PCI_VENDOR_CRAY)
            continue;
        snprintf(name, sizeof(name), "cxi%d", cxi++);
        add_nic(scan, pci, UCCL_TOPO_NIC_OFI, name);
    }
}

/* hwloc leaves out virtual OpenFabrics devices (Soft-RoCE rxe0, siw0): they
 * sit under /sys/devices/virtual. On the live machine we add them ourselves,
 * with no PCI location, and their port state from the same sysfs files hwloc
 * reads for real HCAs; that is the only sysfs we read by hand. */
static void scan_virtual_verbs(topo_scan_t *scan)
{
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *entry;
    char path[512], text[32];

    if (dir == NULL)
        return;
    while ((entry = readdir(dir)) != NULL) {
        bool known = false;
        uccl_topo_nic_t *nic;

        if (entry->d_name[0] == '.')
            continue;
        for (int i = 0; i < scan->nnics; i++)
            known |= strcmp(scan->nics[i].name, entry->d_name) == 0;
        if (known || (nic = add_nic(scan, NULL, UCCL_TOPO_NIC_VERBS, entry->d_name)) == NULL)
            continue;
        for (int num = 1; num <= UCCL_TOPO_PORTS_MAX; num++) {
            FILE *file;
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/state", entry->d_name,
                     num);
            if ((file = fopen(path, "r")) == NULL)
                break;
            if (fgets(text, sizeof(text), file) != NULL) {
                nic->ports[nic->nports].num = num;
                nic->ports[nic->nports].state = (uccl_topo_port_state_t)atoi(text); /* "4: ACTIVE" */
                nic->nports++;
            }
            fclose(file);
        }
        nic->up = nic->nports == 0;
        for (int p = 0; p < nic->nports; p++)
            nic->up |= nic->ports[p].state == UCCL_TOPO_PORT_ACTIVE;
    }
    closedir(dir);
}

/* Bridges strictly between obj and its ancestor top. */
static int bridges_below(hwloc_obj_t obj, hwloc_obj_t top)
{
    int n = 0;
    for (hwloc_obj_t o = obj->parent; o != NULL && o != top; o = o->parent)
        n += o->type == HWLOC_OBJ_BRIDGE;
    return n;
}

/* hwloc_get_common_ancestor_obj compares depths, which are negative
 * special values for I/O objects: walk parents instead. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x != NULL; x = x->parent)
        for (hwloc_obj_t y = b; y != NULL; y = y->parent)
            if (x == y)
                return x;
    return NULL;
}

/* The class from the nearest common ancestor in hwloc's PCI tree: a PCI
 * bridge (switch) below the host bridge, the host bridge itself, or a
 * normal object, where the NUMA nodes of both sides decide. */
static void pair_distance(hwloc_topology_t hw, hwloc_obj_t gpu, hwloc_obj_t nic,
                          uint8_t *dist, uint8_t *hops)
{
    hwloc_obj_t top, gpu_anc, nic_anc;
    int below_gpu, below_nic;

    if (nic == NULL) {
        *dist = UCCL_TOPO_DIST_SYS;
        *hops = 0;
        return;
    }
    top = common_ancestor(gpu, nic);
    if (top == NULL) { /* separate trees cannot happen in one topology */
        *dist = UCCL_TOPO_DIST_SYS;
        *hops = 0;
        return;
    }
    below_gpu = bridges_below(gpu, top);
    below_nic = bridges_below(nic, top);
    *hops = (uint8_t)(below_gpu + below_nic + (top->type == HWLOC_OBJ_BRIDGE));
    if (top->type == HWLOC_OBJ_BRIDGE) {
        if (top->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
            *dist = UCCL_TOPO_DIST_PHB;
        else /* one switch: each side at most one downstream port away */
            *dist = below_gpu <= 1 && below_nic <= 1 ? UCCL_TOPO_DIST_PIX : UCCL_TOPO_DIST_PXB;
        return;
    }
    gpu_anc = hwloc_get_non_io_ancestor_obj(hw, gpu);
    nic_anc = hwloc_get_non_io_ancestor_obj(hw, nic);
    *dist = gpu_anc != NULL && nic_anc != NULL &&
                    hwloc_bitmap_intersects(gpu_anc->nodeset, nic_anc->nodeset)
                ? UCCL_TOPO_DIST_NODE
                : UCCL_TOPO_DIST_SYS;
}

/* Runtime ordinals, so that "GPU index" means what CUDA/HIP call it. */
static void map_runtime_ordinals(topo_scan_t *scan, const char *const *busids, int count)
{
    uint64_t want, have;

    for (int dev = 0; busids != NULL && dev < count; dev++) {
        if (busids[dev] == NULL || !uccl_topo_parse_busid(busids[dev], &want))
            continue;
        for (int i = 0; i < scan->ngpus; i++)
            if (uccl_topo_parse_busid(scan->gpus[i].busid, &have) && have == want)
                scan->gpus[i].device = dev;
    }
}

static uint64_t busid_key(const char *busid)
{
    uint64_t key;
    return uccl_topo_parse_busid(busid, &key) ? key : UINT64_MAX;
}

static int compare_gpus(const topo_scan_t *scan, int a, int b)
{
    const uccl_topo_gpu_t *x = &scan->gpus[a];
    const uccl_topo_gpu_t *y = &scan->gpus[b];
    unsigned xo = (unsigned)x->device, yo = (unsigned)y->device; /* -1 sorts last */
    uint64_t xk = busid_key(x->busid), yk = busid_key(y->busid);

    if (xo != yo)
        return xo < yo ? -1 : 1;
    return xk < yk ? -1 : xk > yk;
}

static int compare_nics(const topo_scan_t *scan, int a, int b)
{
    const uccl_topo_nic_t *x = &scan->nics[a];
    const uccl_topo_nic_t *y = &scan->nics[b];
    uint64_t xk = busid_key(x->busid), yk = busid_key(y->busid);

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (xk != yk)
        return xk < yk ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Insertion sort of the scan's indices order[0..n) (n <= 64). qsort has no
 * context argument, and a static one mixed up the scans of engines that load
 * their topologies in two threads at once. */
static void sort_order(const topo_scan_t *scan, int *order, int n,
                       int (*cmp)(const topo_scan_t *, int, int))
{
    for (int i = 1; i < n; i++) {
        int v = order[i], j = i;
        for (; j > 0 && cmp(scan, order[j - 1], v) > 0; j--)
            order[j] = order[j - 1];
        order[j] = v;
    }
}

static int process_numa_node(hwloc_topology_t hw)
{
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), nodes = hwloc_bitmap_alloc();
    int node = -1;

    if (cpus != NULL && nodes != NULL && hwloc_get_cpubind(hw, cpus, HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_cpuset_to_nodeset(hw, cpus, nodes);
        if (hwloc_bitmap_weight(nodes) == 1)
            node = hwloc_bitmap_first(nodes);
    }
    hwloc_bitmap_free(cpus);
    hwloc_bitmap_free(nodes);
    return node;
}

/* Move the scan, sorted, into a topology and fill distances and localities. */
static uccl_status_t build_topo(topo_scan_t *scan, uccl_topo_t **out)
{
    int gorder[TOPO_GPUS_MAX], norder[TOPO_NICS_MAX];
    uccl_topo_t *topo;
    uccl_status_t st = uccl_topo_alloc(scan->ngpus, scan->nnics, &topo);

    if (st != UCCL_OK)
        return st;
    for (int i = 0; i < scan->ngpus; i++)
        gorder[i] = i;
    for (int i = 0; i < scan->nnics; i++)
        norder[i] = i;
    sort_order(scan, gorder, scan->ngpus, compare_gpus);
    sort_order(scan, norder, scan->nnics, compare_nics);
    for (int i = 0; i < scan->nnics; i++) {
        hwloc_obj_t obj = scan->nic_obj[norder[i]];
        topo->nics[i] = scan->nics[norder[i]];
        topo->nics[i].index = i;
        topo->nics[i].numa = -1;
        if (obj != NULL)
            locality(scan->hw, obj, &topo->nics[i].numa, &topo->nic_cpus[i],
                     &topo->nic_has_cpus[i]);
    }
    for (int g = 0; g < scan->ngpus; g++) {
        hwloc_obj_t obj = scan->gpu_obj[gorder[g]];
        topo->gpus[g] = scan->gpus[gorder[g]];
        topo->gpus[g].index = g;
        locality(scan->hw, obj, &topo->gpus[g].numa, &topo->gpu_cpus[g], &topo->gpu_has_cpus[g]);
        for (int i = 0; i < scan->nnics; i++) {
            size_t at = (size_t)g * (size_t)scan->nnics + (size_t)i;
            pair_distance(scan->hw, obj, scan->nic_obj[norder[i]], &topo->dist[at],
                          &topo->hops[at]);
        }
    }
    *out = topo;
    return UCCL_OK;
}

static void describe(hwloc_topology_t hw, const char *path, uccl_topo_t *topo)
{
    hwloc_obj_t root = hwloc_get_root_obj(hw);
    const char *name = hwloc_obj_get_info_by_name(root, "HostName");

    if (name == NULL)
        name = hwloc_obj_get_info_by_name(root, "DMIProductName");
    snprintf(topo->machine, sizeof(topo->machine), "%s", name != NULL ? name : "");
    snprintf(topo->source, sizeof(topo->source), "%s", path != NULL ? path : "live machine");
    topo->numa_count = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    topo->proc_numa = hwloc_topology_is_thissystem(hw) ? process_numa_node(hw) : -1;
}

static uccl_status_t open_hwloc(const char *path, hwloc_topology_t *hw)
{
    if (hwloc_topology_init(hw) < 0) {
        uccl_error("hwloc_topology_init failed: %s", strerror(errno));
        return UCCL_ERR_NO_MEMORY;
    }
    if (path != NULL && access(path, R_OK) != 0) {
        uccl_error("topology XML %s: %s", path, strerror(errno));
        goto err_not_found;
    }
    if (path != NULL && hwloc_topology_set_xml(*hw, path) < 0) {
        uccl_error("topology XML %s: hwloc cannot read it (%s)", path, strerror(errno));
        goto err_malformed;
    }
    hwloc_topology_set_io_types_filter(*hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(*hw) < 0) {
        uccl_error("hwloc failed to load %s: %s", path != NULL ? path : "the live topology",
                   strerror(errno));
        hwloc_topology_destroy(*hw);
        return path != NULL ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_IO;
    }
    return UCCL_OK;

err_malformed:
    hwloc_topology_destroy(*hw);
    return UCCL_ERR_INVALID_PARAM;
err_not_found:
    hwloc_topology_destroy(*hw);
    return UCCL_ERR_NOT_FOUND;
}

uccl_status_t uccl_topo_load(const char *xml, uccl_topo_t **topo)
{
    return uccl_topo_load_gpus(xml, NULL, 0, topo);
}

uccl_status_t uccl_topo_load_gpus(const char *xml, const char *const *busids, int n,
                                  uccl_topo_t **topo)
{
    topo_scan_t *scan;
    const char *path = xml;
    uccl_status_t st;

    if (topo == NULL || (xml != NULL && xml[0] == '\0'))
        return UCCL_ERR_INVALID_PARAM;
    /* hwloc's own variable: hwloc would honour it silently; we load it
     * explicitly so that a missing file is an error, not the live machine. */
    if (path == NULL && getenv("HWLOC_XMLFILE") != NULL && getenv("HWLOC_XMLFILE")[0] != '\0')
        path = getenv("HWLOC_XMLFILE");
    scan = calloc(1, sizeof(*scan));
    if (scan == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = open_hwloc(path, &scan->hw);
    if (st != UCCL_OK)
        goto err_free;
    scan_gpus(scan);
    scan_nics(scan);
    if (hwloc_topology_is_thissystem(scan->hw)) {
        scan_virtual_verbs(scan);
        map_runtime_ordinals(scan, busids, n);
    }
    st = build_topo(scan, topo);
    if (st != UCCL_OK)
        goto err_destroy;
    describe(scan->hw, path, *topo);
    uccl_debug("topology from %s: %d GPUs, %d NICs", (*topo)->source, scan->ngpus, scan->nnics);
    hwloc_topology_destroy(scan->hw);
    free(scan);
    return UCCL_OK;

err_destroy:
    hwloc_topology_destroy(scan->hw);
err_free:
    free(scan);
    return st;
}

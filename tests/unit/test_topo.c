/* Unit tests of src/topo: recorded and synthetic hwloc XML topologies, the
 * NIC chosen for each GPU, host-memory NUMA preference, overrides, bad input. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "topo/topo.h"
#include "unit.h"

static char data_dir[512];

static uccl_topo_t *load(const char *name)
{
    char path[768];
    uccl_topo_t *topo = NULL;

    snprintf(path, sizeof(path), "%s/%s", data_dir, name);
    CU_ASSERT_EQUAL_FATAL(uccl_topo_load(path, &topo), UCCL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(topo);
    return topo;
}

/* The primary NIC chosen for GPU gpu (RDMA kinds), or "" on error. */
static const char *primary(const uccl_topo_t *topo, int gpu, uccl_topo_choice_t *choice)
{
    const uccl_topo_gpu_t *g = uccl_topo_gpu(topo, gpu);
    if (g == NULL || uccl_topo_select_nics(topo, g->busid, NULL, choice) != UCCL_OK)
        return "";
    return choice->nics[0].nic->name;
}

/* 32em64t-2n8c2t-pci-normalio.xml (hwloc test suite), read by hand:
 *   socket 0: host bridge [00-05]: 0000:03:00.0 Tesla M2075 (0302 10de), Matrox VGA
 *             (0300 102b: not a GPU vendor we drive).
 *   socket 1: host bridge [80-84]:
 *     root port 80:01.0: 81:00.0/81:00.1 I350 (eth0, eth1)
 *     root port 80:02.0: 83:00.0 Tesla M2075
 *     root port 80:03.0: 84:00.0 Tesla (cuda0), 84:00.1 AMD Radeon (0300 1002),
 *                        04:00.0 ConnectX-4: ib0 + mlx5_0 (Port1State 4 = active)
 * GPUs by bus id: 03:00.0, 83:00.0, 84:00.0, 84:00.1. The only RDMA NIC is
 * mlx5_0, so every GPU gets it; the class differs:
 *   03:00.0: other socket (common ancestor = Machine, NUMA 0 vs 1) -> SYS
 *   83:00.0: different root port, same host bridge                   -> PHB
 *   84:00.0, 84:00.1: same root port 80:03.0, no bridge in between   -> PIX */
static void test_real_32em64t(void)
{
    uccl_topo_t *topo = load("32em64t-2n8c2t-pci-normalio.xml");
    static const char *const busids[] = {"0000:03:00.0", "0000:83:00.0", "0000:84:00.0",
                                         "0000:84:00.1"};
    static const uccl_topo_dist_t want[] = {UCCL_TOPO_DIST_SYS, UCCL_TOPO_DIST_PHB,
                                            UCCL_TOPO_DIST_PIX, UCCL_TOPO_DIST_PIX};
    const uccl_topo_nic_t *mlx;
    uccl_topo_choice_t choice;
    uccl_topo_query_t query = {.numa_node = -1, .kinds = UCCL_TOPO_NIC_NET};

    CU_ASSERT_EQUAL(uccl_topo_gpu_count(topo), 4);
    for (int g = 0; g < 4 && g < uccl_topo_gpu_count(topo); g++) {
        CU_ASSERT_STRING_EQUAL(uccl_topo_gpu(topo, g)->busid, busids[g]);
        CU_ASSERT_STRING_EQUAL(primary(topo, g, &choice), "mlx5_0");
        CU_ASSERT_EQUAL(choice.dist, want[g]);
        CU_ASSERT_EQUAL(choice.n, 1);
        CU_ASSERT_EQUAL(choice.nics[0].port, 1);
    }
    CU_ASSERT_EQUAL(uccl_topo_gpu(topo, 3)->vendor, 0x1002);
    CU_ASSERT_STRING_EQUAL(uccl_topo_gpu(topo, 2)->name, "cuda0");
    mlx = uccl_topo_nic_by_name(topo, "mlx5_0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mlx);
    CU_ASSERT_EQUAL(mlx->kind, UCCL_TOPO_NIC_VERBS);
    CU_ASSERT_STRING_EQUAL(mlx->busid, "0000:04:00.0");
    CU_ASSERT_STRING_EQUAL(mlx->netdev, "ib0");
    CU_ASSERT_EQUAL(mlx->numa, 1);
    CU_ASSERT(mlx->up);
    CU_ASSERT_EQUAL(mlx->nports, 1);
    CU_ASSERT_EQUAL(mlx->ports[0].state, UCCL_TOPO_PORT_ACTIVE);
    /* tcp for the GPU on 84:00.0: ib0 is on its PCI device's bridge (PIX);
     * eth0/eth1 hang on another root port (PHB). */
    query.gpu_busid = "0000:84:00.0";
    CU_ASSERT_EQUAL(uccl_topo_select(topo, &query, &choice), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "ib0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_PIX);
    /* Host memory on NUMA node 0: no NIC there, mlx5_0 (node 1) is the
     * nearest anyway, across sockets. Node 1: local. */
    query.gpu_busid = NULL;
    query.kinds = UCCL_TOPO_NIC_RDMA;
    query.numa_node = 0;
    CU_ASSERT_EQUAL(uccl_topo_select(topo, &query, &choice), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "mlx5_0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_SYS);
    query.numa_node = 1;
    CU_ASSERT_EQUAL(uccl_topo_select(topo, &query, &choice), UCCL_OK);
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_NODE);
    uccl_topo_free(topo);
}

/* h200x2-vm.xml (the 2xH200 device machine, a VM): one host bridge with
 * virtio disks, virtio-net eth0 (00:03.0) and two H200 (10de:2335) at 00:06.0
 * and 00:07.0. No RDMA device at all: RDMA choice is UCCL_ERR_NO_DEVICE, the
 * tcp choice is eth0 through the shared host bridge (PHB). */
static void test_real_h200_vm(void)
{
    uccl_topo_t *topo = load("h200x2-vm.xml");
    uccl_topo_choice_t choice;
    uccl_topo_query_t query = {.gpu_busid = "0000:00:07.0", .numa_node = -1,
                               .kinds = UCCL_TOPO_NIC_NET};

    CU_ASSERT_EQUAL(uccl_topo_gpu_count(topo), 2);
    CU_ASSERT_STRING_EQUAL(uccl_topo_gpu(topo, 0)->busid, "0000:00:06.0");
    CU_ASSERT_EQUAL(uccl_topo_gpu(topo, 1)->device_id, 0x2335);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, "0000:00:06.0", NULL, &choice), UCCL_ERR_NO_DEVICE);
    CU_ASSERT_EQUAL(choice.n, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(choice.why, "no active NIC"));
    CU_ASSERT_EQUAL(uccl_topo_select(topo, &query, &choice), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "eth0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_PHB);
    /* CUDA prints 8-digit domains; upper case too. */
    CU_ASSERT_PTR_EQUAL(uccl_topo_gpu_by_busid(topo, "00000000:00:07.0"), uccl_topo_gpu(topo, 1));
    CU_ASSERT_PTR_EQUAL(uccl_topo_gpu_by_busid(topo, "0000:00:07.0"), uccl_topo_gpu(topo, 1));
    uccl_topo_free(topo);
}

/* nvidiaDGX2.xml: 16 V100 (0302 10de) behind PCIe switches, 12 NVSwitches
 * (0680, not GPUs) and no NIC in the recording: a GPU with no NIC at all. */
static void test_real_dgx2_no_nic(void)
{
    uccl_topo_t *topo = load("nvidiaDGX2.xml");
    uccl_topo_choice_t choice;

    CU_ASSERT_EQUAL(uccl_topo_gpu_count(topo), 16);
    CU_ASSERT_EQUAL(uccl_topo_nic_count(topo), 0);
    CU_ASSERT_STRING_EQUAL(uccl_topo_gpu(topo, 0)->busid, "0000:34:00.0");
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, "0000:34:00.0", NULL, &choice), UCCL_ERR_NO_DEVICE);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, NULL, &choice), UCCL_ERR_NO_DEVICE);
    uccl_topo_free(topo);
}

/* 24em64t-2n6c2t-pci.xml: mlx4_0 recorded without port state: unknown is
 * treated as usable (old XMLs), and host memory gets it. */
static void test_real_unknown_port_state(void)
{
    uccl_topo_t *topo = load("24em64t-2n6c2t-pci.xml");
    const uccl_topo_nic_t *nic = uccl_topo_nic_by_name(topo, "mlx4_0");
    uccl_topo_choice_t choice;

    CU_ASSERT_PTR_NOT_NULL_FATAL(nic);
    CU_ASSERT_EQUAL(nic->nports, 0);
    CU_ASSERT(nic->up);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, NULL, &choice), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "mlx4_0");
    CU_ASSERT_EQUAL(choice.nics[0].port, 0);
    uccl_topo_free(topo);
}

/* synth-dgx-h100.xml: 2 sockets x 4 host bridges; each: root port -> switch
 * with GPU k on one downstream port and mlx5_k on the other. GPU k -> mlx5_k,
 * PIX (3 bridges: two downstream ports and the switch's upstream port), and
 * it is the only NIC that near, so the list has one entry. */
static void test_synth_dgx_h100(void)
{
    uccl_topo_t *topo = load("synth-dgx-h100.xml");
    uccl_topo_choice_t choice;
    char want[16];
    cpu_set_t cpus;
    int hops;
    uccl_topo_dist_t dist;

    CU_ASSERT_EQUAL_FATAL(uccl_topo_gpu_count(topo), 8);
    for (int g = 0; g < 8; g++) {
        snprintf(want, sizeof(want), "mlx5_%d", g);
        CU_ASSERT_STRING_EQUAL(primary(topo, g, &choice), want);
        CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_PIX);
        CU_ASSERT_EQUAL(choice.n, 1);
        CU_ASSERT_EQUAL(choice.gpu, g);
    }
    /* GPU 0 to mlx5_1: other host bridge, same socket -> NODE; to mlx5_4: SYS. */
    CU_ASSERT_EQUAL(uccl_topo_distance(topo, 0, 1, &dist, &hops), UCCL_OK);
    CU_ASSERT_EQUAL(dist, UCCL_TOPO_DIST_NODE);
    CU_ASSERT_EQUAL(uccl_topo_distance(topo, 0, 4, &dist, NULL), UCCL_OK);
    CU_ASSERT_EQUAL(dist, UCCL_TOPO_DIST_SYS);
    CU_ASSERT_EQUAL(uccl_topo_distance(topo, 0, 0, &dist, &hops), UCCL_OK);
    CU_ASSERT_EQUAL(hops, 3);
    CU_ASSERT_EQUAL(uccl_topo_distance(topo, 8, 0, &dist, NULL), UCCL_ERR_INVALID_PARAM);
    /* Affinity: GPU 5 is on socket 1 = PUs 4..7. */
    CU_ASSERT_EQUAL(uccl_topo_cpuset(topo, 5, -1, &cpus), UCCL_OK);
    CU_ASSERT_EQUAL(CPU_COUNT(&cpus), 4);
    CU_ASSERT(CPU_ISSET(4, &cpus) && CPU_ISSET(7, &cpus) && !CPU_ISSET(3, &cpus));
    CU_ASSERT_EQUAL(uccl_topo_gpu(topo, 5)->numa, 1);
    /* Host memory on node 1: the four socket-1 NICs, first mlx5_4. */
    {
        uccl_topo_query_t query = {.numa_node = 1};
        CU_ASSERT_EQUAL(uccl_topo_select(topo, &query, &choice), UCCL_OK);
        CU_ASSERT_EQUAL(choice.n, 4);
        CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "mlx5_4");
        CU_ASSERT_STRING_EQUAL(choice.nics[3].nic->name, "mlx5_7");
    }
    uccl_topo_free(topo);
}

/* synth-dgx-h100-nicdown.xml: the same with mlx5_2's only port DOWN. GPU 2
 * skips it; the next nearest are the other NICs of socket 0 (mlx5_0, 1, 3,
 * other host bridges, NODE), a 3-way tie that only GPU 2 has, so it takes
 * the first, mlx5_0, and lists all three for striping. Others unchanged. */
static void test_synth_nic_down(void)
{
    uccl_topo_t *topo = load("synth-dgx-h100-nicdown.xml");
    uccl_topo_choice_t choice;

    CU_ASSERT_FALSE(uccl_topo_nic_by_name(topo, "mlx5_2")->up);
    CU_ASSERT_STRING_EQUAL(primary(topo, 2, &choice), "mlx5_0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_NODE);
    CU_ASSERT_EQUAL_FATAL(choice.n, 3);
    CU_ASSERT_STRING_EQUAL(choice.nics[1].nic->name, "mlx5_1");
    CU_ASSERT_STRING_EQUAL(choice.nics[2].nic->name, "mlx5_3");
    CU_ASSERT_PTR_NOT_NULL(strstr(choice.why, "down"));
    CU_ASSERT_STRING_EQUAL(primary(topo, 3, &choice), "mlx5_3");
    CU_ASSERT_STRING_EQUAL(primary(topo, 6, &choice), "mlx5_6");
    uccl_topo_free(topo);
}

/* synth-more-gpus-than-nics.xml: one switch U with GPUs 0-3 and mlx5_0/1 on
 * its downstream ports (PIX to both NICs), and GPU 4 two switch levels lower
 * (PXB, 5 bridges). All five GPUs have the same nearest set {mlx5_0, mlx5_1}
 * and are spread round-robin by index: 0->mlx5_0, 1->mlx5_1, 2->mlx5_0,
 * 3->mlx5_1, 4->mlx5_0; each list holds both NICs, primary first. */
static void test_synth_round_robin(void)
{
    uccl_topo_t *topo = load("synth-more-gpus-than-nics.xml");
    static const char *const want[] = {"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1", "mlx5_0"};
    uccl_topo_choice_t choice;
    int hops;
    uccl_topo_dist_t dist;

    CU_ASSERT_EQUAL_FATAL(uccl_topo_gpu_count(topo), 5);
    for (int g = 0; g < 5; g++) {
        CU_ASSERT_STRING_EQUAL(primary(topo, g, &choice), want[g]);
        CU_ASSERT_EQUAL(choice.n, 2);
        CU_ASSERT_STRING_NOT_EQUAL(choice.nics[0].nic->name, choice.nics[1].nic->name);
        CU_ASSERT_EQUAL(choice.dist, g < 4 ? UCCL_TOPO_DIST_PIX : UCCL_TOPO_DIST_PXB);
    }
    CU_ASSERT_EQUAL(uccl_topo_distance(topo, 4, 0, &dist, &hops), UCCL_OK);
    CU_ASSERT_EQUAL(hops, 5);
    uccl_topo_free(topo);
}

/* synth-nics-one-socket.xml: socket 0 has GPUs 0,1 (host bridge A) and both
 * NICs (host bridge B; mlx5_1 port 1 down, port 2 active); socket 1 has
 * GPUs 2,3 and no NIC. GPUs 0,1: NODE to both NICs; GPUs 2,3: SYS to both.
 * Every GPU's nearest set is {mlx5_0, mlx5_1}: round-robin over all four,
 * 0->mlx5_0, 1->mlx5_1, 2->mlx5_0, 3->mlx5_1; mlx5_1 is used on port 2. */
static void test_synth_nics_one_socket(void)
{
    uccl_topo_t *topo = load("synth-nics-one-socket.xml");
    uccl_topo_choice_t choice;

    CU_ASSERT_STRING_EQUAL(primary(topo, 0, &choice), "mlx5_0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_NODE);
    CU_ASSERT_STRING_EQUAL(primary(topo, 1, &choice), "mlx5_1");
    CU_ASSERT_EQUAL(choice.nics[0].port, 2);
    CU_ASSERT_STRING_EQUAL(primary(topo, 2, &choice), "mlx5_0");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_SYS);
    CU_ASSERT_STRING_EQUAL(primary(topo, 3, &choice), "mlx5_1");
    /* Override with an explicit port, and a port that does not exist. */
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_1:1,mlx5_0", &choice), UCCL_OK);
    CU_ASSERT(choice.overridden);
    CU_ASSERT_EQUAL_FATAL(choice.n, 2);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "mlx5_1");
    CU_ASSERT_EQUAL(choice.nics[0].port, 1);
    CU_ASSERT_EQUAL(choice.nics[1].port, 1);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_1:3", &choice), UCCL_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(choice.why, "no port 3"));
    uccl_topo_free(topo);
}

static void test_override_errors(void)
{
    uccl_topo_t *topo = load("synth-dgx-h100.xml");
    uccl_topo_choice_t choice;

    /* Unknown device: NOT_FOUND, and the message lists the known ones. */
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_0,mlx5_9", &choice),
                    UCCL_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(choice.why, "unknown device 'mlx5_9'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(choice.why, "mlx5_7"));
    CU_ASSERT_EQUAL(choice.n, 0);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_0,,mlx5_1", &choice),
                    UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_0:", &choice), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, "mlx5_0:x", &choice), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, ":1", &choice), UCCL_ERR_INVALID_PARAM);
    /* The override wins over distance: GPU 0 told to use mlx5_5 (SYS). */
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, "0000:13:00.0", "mlx5_5", &choice), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(choice.nics[0].nic->name, "mlx5_5");
    CU_ASSERT_EQUAL(choice.dist, UCCL_TOPO_DIST_SYS);
    /* A GPU that is not in the topology. */
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, "0000:99:00.0", NULL, &choice), UCCL_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(uccl_topo_select_nics(topo, NULL, NULL, NULL), UCCL_ERR_INVALID_PARAM);
    uccl_topo_free(topo);
}

static void test_bad_xml(void)
{
    char path[768];
    uccl_topo_t *topo = NULL;
    FILE *file;

    snprintf(path, sizeof(path), "%s/no-such-topology.xml", data_dir);
    CU_ASSERT_EQUAL(uccl_topo_load(path, &topo), UCCL_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NULL(topo);
    CU_ASSERT_EQUAL(uccl_topo_load("", &topo), UCCL_ERR_INVALID_PARAM);
    snprintf(path, sizeof(path), "/tmp/uccl-test-topo-%d.xml", (int)getpid());
    file = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(file);
    fputs("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Machi", file);
    fclose(file);
    CU_ASSERT_EQUAL(uccl_topo_load(path, &topo), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_NULL(topo);
    remove(path);
    /* HWLOC_XMLFILE pointing nowhere is an error, not the live machine. */
    setenv("HWLOC_XMLFILE", "/nonexistent/topology.xml", 1);
    CU_ASSERT_EQUAL(uccl_topo_load(NULL, &topo), UCCL_ERR_NOT_FOUND);
    snprintf(path, sizeof(path), "%s/synth-dgx-h100.xml", data_dir);
    setenv("HWLOC_XMLFILE", path, 1);
    CU_ASSERT_EQUAL_FATAL(uccl_topo_load(NULL, &topo), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_topo_gpu_count(topo), 8);
    uccl_topo_free(topo);
    unsetenv("HWLOC_XMLFILE");
}

/* Two engines may load their topologies in two threads at once (handles of
 * different engines are independent): each load must come out as it does
 * alone. The loader's sort once kept its scan in a static, so a load sorted
 * by the other thread's GPUs got its GPUs out of order (a few times a second
 * with these two files). Each thread loads its file for a second. */
typedef struct load_loop {
    char path[768];
    char order[16 * UCCL_TOPO_BUSID_MAX + UCCL_TOPO_CHOICE_MAX * UCCL_TOPO_NAME_MAX];
    int loads, wrong;
} load_loop_t;

/* "busid,busid,...;nic,nic,..." of a topology. */
static void topo_order(const uccl_topo_t *topo, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int g = 0; g < uccl_topo_gpu_count(topo) && used < len; g++)
        used += (size_t)snprintf(buf + used, len - used, "%s,", uccl_topo_gpu(topo, g)->busid);
    for (int i = 0; i < uccl_topo_nic_count(topo) && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, ";%s", uccl_topo_nic(topo, i)->name);
}

static void *load_loop(void *arg)
{
    load_loop_t *l = arg;
    char order[sizeof(l->order)];
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        uccl_topo_t *topo = NULL;
        if (uccl_topo_load(l->path, &topo) != UCCL_OK) {
            l->wrong++;
            break;
        }
        topo_order(topo, order, sizeof(order));
        l->wrong += strcmp(order, l->order) != 0;
        l->loads++;
        uccl_topo_free(topo);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000000L);
    return NULL;
}

static void test_concurrent_loads(void)
{
    static const char *const names[2] = {"nvidiaDGX2.xml", "synth-dgx-h100.xml"};
    load_loop_t loops[2];
    pthread_t threads[2];

    for (int i = 0; i < 2; i++) {
        uccl_topo_t *topo = load(names[i]);
        memset(&loops[i], 0, sizeof(loops[i]));
        snprintf(loops[i].path, sizeof(loops[i].path), "%s/%s", data_dir, names[i]);
        topo_order(topo, loops[i].order, sizeof(loops[i].order));
        uccl_topo_free(topo);
    }
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[i], NULL, load_loop, &loops[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (loops[i].wrong != 0)
            fprintf(stderr, "%s: %d of %d loads came out otherwise than alone\n", names[i],
                    loops[i].wrong, loops[i].loads);
        CU_ASSERT(loops[i].loads > 0);
        CU_ASSERT_EQUAL(loops[i].wrong, 0);
    }
}

/* The live machine loads; whatever it has, every GPU gets a choice or a
 * clear NO_DEVICE. */
static void test_live_machine(void)
{
    uccl_topo_t *topo = NULL;
    uccl_topo_choice_t choice;

    CU_ASSERT_EQUAL_FATAL(uccl_topo_load(NULL, &topo), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(uccl_topo_source(topo), "live machine");
    CU_ASSERT(uccl_topo_numa_count(topo) >= 1);
    for (int g = 0; g < uccl_topo_gpu_count(topo); g++) {
        uccl_status_t st = uccl_topo_select_nics(topo, uccl_topo_gpu(topo, g)->busid, NULL, &choice);
        CU_ASSERT(st == UCCL_OK || st == UCCL_ERR_NO_DEVICE);
    }
    uccl_topo_free(topo);
}

int main(void)
{
    const char *srcdir = getenv("top_srcdir");
    CU_pSuite suite;

    snprintf(data_dir, sizeof(data_dir), "%s/tests/data", srcdir != NULL ? srcdir : ".");
    unsetenv("HWLOC_XMLFILE");
    /* hwloc's own XML reader, not libxml2's (hwloc picks it once): libxml2
     * keeps state per thread that LeakSanitizer reports after the case of
     * two loading threads (11-28 blocks of ~1 KiB in the ASan builds);
     * what these cases check is the loader's result, not the XML library */
    setenv("HWLOC_LIBXML_IMPORT", "0", 1);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    suite = CU_add_suite("topo", NULL, NULL);
    CU_add_test(suite, "real 32em64t: GPUs, mlx5_0, classes", test_real_32em64t);
    CU_add_test(suite, "real h200x2 vm: no RDMA NIC, tcp eth0", test_real_h200_vm);
    CU_add_test(suite, "real DGX-2: 16 GPUs, no NIC", test_real_dgx2_no_nic);
    CU_add_test(suite, "real 24em64t: unknown port state", test_real_unknown_port_state);
    CU_add_test(suite, "synthetic DGX-H100: GPU k -> mlx5_k", test_synth_dgx_h100);
    CU_add_test(suite, "synthetic NIC down is skipped", test_synth_nic_down);
    CU_add_test(suite, "synthetic more GPUs than NICs: round-robin", test_synth_round_robin);
    CU_add_test(suite, "synthetic NICs on one socket", test_synth_nics_one_socket);
    CU_add_test(suite, "override errors", test_override_errors);
    CU_add_test(suite, "missing and malformed XML", test_bad_xml);
    CU_add_test(suite, "live machine", test_live_machine);
    CU_add_test(suite, "two threads load at once", test_concurrent_loads);
    return unit_run_registered();
}

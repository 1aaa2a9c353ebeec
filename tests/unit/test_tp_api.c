/* Unit tests of the transport SPI's core side (src/core/tp_api.h,
 * tp_api.c, engine_topo.c): the open parameters the engine hands its
 * transports, the engine's one topology and the NIC-choice helper shared by
 * verbs and ofi, and the connection and region accessors. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "topo/topo.h"
#include "uccl_build.h"
#include "unit.h"
#include "unit_conn.h"

static char data_dir[512];

static uccl_engine_t *engine_with_topo(const char *xml)
{
    char path[600];
    uccl_engine_t *engine = NULL;

    snprintf(path, sizeof(path), "%s/%s", data_dir, xml);
    setenv("UCCL_TOPO_XML", path, 1);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &engine), UCCL_OK);
    unsetenv("UCCL_TOPO_XML");
    return engine;
}

/* Every transport got the engine's own parameters, which stay put. */
static void test_open_params(void)
{
    uccl_engine_t *engine = NULL;
    const uccl_tp_open_params_t *p;

    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &engine), UCCL_OK);
    CU_ASSERT_FATAL(engine != NULL && engine->ntp == 1);
    p = engine->tp[0]->params;
    CU_ASSERT_PTR_EQUAL_FATAL(p, &engine->tp_params);
    CU_ASSERT_EQUAL(p->gpu_index, -1);
    CU_ASSERT_EQUAL(p->engine_id, uccl_engine_id(engine));
    CU_ASSERT_EQUAL(p->host_id, uccl_engine_host_id(engine));
    CU_ASSERT_EQUAL(p->pid, (int)getpid());
    CU_ASSERT_EQUAL(p->ifaddr, engine->oob_addr.sin_addr.s_addr);
    CU_ASSERT_EQUAL(p->timeout_ms, engine->cfg.timeout_ms);
    CU_ASSERT_EQUAL(p->setup_max_pending, engine->cfg.setup_max_pending);
    CU_ASSERT_EQUAL(p->setup_timeout_ms, engine->cfg.setup_timeout_ms);
    CU_ASSERT_STRING_EQUAL(p->net_devices, "");
    CU_ASSERT_PTR_EQUAL(p->engine, engine);
    CU_ASSERT_PTR_EQUAL(engine->tp[0]->engine, engine);
    uccl_engine_destroy(engine);
}

/* Loaded on first use only, then the same object for every caller. */
static void test_topology_once(void)
{
    uccl_engine_t *engine = engine_with_topo("32em64t-2n8c2t-pci-normalio.xml");
    const uccl_topo_t *a, *b;
    uccl_status_t st = UCCL_ERR_IO;

    CU_ASSERT_PTR_NOT_NULL_FATAL(engine);
#ifndef UCCL_HAVE_HWLOC
    CU_ASSERT_PTR_NULL(uccl_tp_topo(&engine->tp_params, &st));
    UNIT_ASSERT_STATUS(st, UCCL_ERR_UNSUPPORTED);
    uccl_engine_destroy(engine);
    UNIT_SKIP("built without hwloc: no topology to share");
#else
    CU_ASSERT(!engine->topo_loaded); /* tcp never asked for it */
    a = uccl_tp_topo(&engine->tp_params, &st);
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT(engine->topo_loaded);
    b = uccl_tp_topo(&engine->tp_params, NULL);
    CU_ASSERT_PTR_EQUAL(a, b);
    CU_ASSERT_PTR_EQUAL(uccl_engine_topo(engine, NULL), a);
    CU_ASSERT_PTR_NOT_NULL(uccl_topo_nic_by_name(a, "mlx5_0"));
    uccl_engine_destroy(engine); /* frees it (ASan: no leak) */
#endif
}

/* Configured devices win, in the order given, unchecked. */
static void test_nics_configured(void)
{
    uccl_engine_t *engine = NULL;
    uccl_tp_open_params_t p;
    uccl_tp_nics_t nics;

    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &engine), UCCL_OK);
    CU_ASSERT_FATAL(engine != NULL);
    p = engine->tp_params;
    p.net_devices = "mlx5_3:1,rxe0,nosuchdev:2";
    UNIT_ASSERT_STATUS(uccl_tp_nics(&p, UCCL_TOPO_NIC_VERBS, &nics), UCCL_OK);
    CU_ASSERT(nics.configured);
    CU_ASSERT_EQUAL_FATAL(nics.n, 3);
    CU_ASSERT_STRING_EQUAL(nics.nic[0].name, "mlx5_3");
    CU_ASSERT_EQUAL(nics.nic[0].port, 1);
    CU_ASSERT_STRING_EQUAL(nics.nic[1].name, "rxe0");
    CU_ASSERT_EQUAL(nics.nic[1].port, 0);
    CU_ASSERT_STRING_EQUAL(nics.nic[2].name, "nosuchdev");
    CU_ASSERT_EQUAL(nics.nic[2].port, 2);
    CU_ASSERT_STRING_EQUAL(nics.nic[0].busid, "");
    CU_ASSERT_STRING_EQUAL(nics.nic[0].netdev, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(nics.why, "UCCL_NET_DEVICES=mlx5_3:1,rxe0,nosuchdev:2"));
    CU_ASSERT(!engine->topo_loaded); /* a configured list needs no topology */
    p.net_devices = ",rxe0";
    UNIT_ASSERT_STATUS(uccl_tp_nics(&p, UCCL_TOPO_NIC_VERBS, &nics), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(nics.why[0] != '\0');
    UNIT_ASSERT_STATUS(uccl_tp_nics(NULL, UCCL_TOPO_NIC_VERBS, &nics), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_tp_nics(&p, UCCL_TOPO_NIC_VERBS, NULL), UCCL_ERR_INVALID_PARAM);
    uccl_engine_destroy(engine);
}

/* Without configured devices: the topology's choice (32em64t has one
 * RDMA NIC, mlx5_0, and no other OpenFabrics device). */
static void test_nics_by_topology(void)
{
    uccl_engine_t *engine = engine_with_topo("32em64t-2n8c2t-pci-normalio.xml");
    uccl_tp_nics_t nics;
    uccl_status_t st;

    CU_ASSERT_PTR_NOT_NULL_FATAL(engine);
    st = uccl_tp_nics(&engine->tp_params, UCCL_TOPO_NIC_VERBS, &nics);
#ifndef UCCL_HAVE_HWLOC
    UNIT_ASSERT_STATUS(st, UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(nics.why, "without hwloc"));
    uccl_engine_destroy(engine);
    UNIT_SKIP("built without hwloc: no NIC choice by topology");
#else
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    CU_ASSERT(!nics.configured);
    CU_ASSERT_EQUAL_FATAL(nics.n, 1);
    CU_ASSERT_STRING_EQUAL(nics.nic[0].name, "mlx5_0");
    CU_ASSERT_STRING_EQUAL(nics.nic[0].busid,
                           uccl_topo_nic_by_name(uccl_tp_topo(&engine->tp_params, NULL), "mlx5_0")->busid);
    CU_ASSERT(nics.nic[0].busid[0] != '\0');
    CU_ASSERT(nics.why[0] != '\0');
    /* no NIC of that kind: an error with a reason, nothing listed */
    uccl_engine_destroy(engine);
    engine = engine_with_topo("nvidiaDGX2.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(engine);
    st = uccl_tp_nics(&engine->tp_params, UCCL_TOPO_NIC_VERBS, &nics);
    CU_ASSERT(st == UCCL_ERR_NO_DEVICE || st == UCCL_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(nics.n, 0);
    CU_ASSERT(nics.why[0] != '\0');
    uccl_engine_destroy(engine);
#endif
}

/* What a transport may read of a connection and of a region. */
static void test_accessors(void)
{
    static uint8_t buf[8192];
    unit_pair_t p;
    uccl_mr_t *mr = NULL;
    uccl_region_t *region = NULL;

    UNIT_ASSERT_STATUS(unit_pair_open("tcp", &p), UCCL_OK);
    CU_ASSERT_FATAL(p.ab != NULL);
    UNIT_ASSERT_STATUS(uccl_conn_status(p.ab), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_conn_peer_pid(p.ab), (int)getpid());
    CU_ASSERT_STRING_EQUAL(uccl_conn_peer_host(p.ab), p.b->hostname);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, buf, sizeof(buf), 0, &mr), UCCL_OK);
    CU_ASSERT_FATAL(mr != NULL);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(p.b, mr->region->id, (uint64_t)(uintptr_t)buf + 16,
                                               64, &region), UCCL_OK);
    CU_ASSERT_PTR_EQUAL_FATAL(region, mr->region);
    CU_ASSERT_PTR_EQUAL(uccl_region_addr(region), buf);
    CU_ASSERT_EQUAL(uccl_region_len(region), sizeof(buf));
    CU_ASSERT_EQUAL(uccl_region_mem_type(region), UCCL_MEM_HOST);
    CU_ASSERT_EQUAL(uccl_region_id(region), mr->region->id);
    CU_ASSERT_PTR_NULL(uccl_region_memh(region, p.b->tp[0])); /* tcp registers nothing */
    /* a failed connection says why */
    uccl_conn_fail(p.ab, UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(uccl_conn_status(p.ab), UCCL_ERR_PEER_FAILED);
    uccl_mr_dereg(mr);
    unit_pair_close(&p);
}

static CU_TestInfo tp_api_tests[] = {
    {"open params: the engine's, shared, stable", test_open_params},
    {"topology: loaded once per engine, on first use", test_topology_once},
    {"NICs: configured devices as given", test_nics_configured},
    {"NICs: nearest by topology, or an error with a reason", test_nics_by_topology},
    {"connection and region accessors", test_accessors},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"tp_api", NULL, NULL, NULL, NULL, tp_api_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    const char *srcdir = getenv("top_srcdir");

    snprintf(data_dir, sizeof(data_dir), "%s/tests/data", srcdir != NULL ? srcdir : ".");
    unsetenv("UCCL_NET_DEVICES");
    unsetenv("UCCL_TOPO_XML");
    unsetenv("HWLOC_XMLFILE");
    return unit_main(suites);
}

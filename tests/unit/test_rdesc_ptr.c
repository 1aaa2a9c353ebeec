/* uccl_rdesc_ptr (direct access to peer memory) over shm and tcp: argument
 * and descriptor errors, and UNSUPPORTED where the connection cannot map
 * the memory (tcp never maps; memory not from uccl_mem_alloc is not
 * shareable on shm). The connection keeps working after every refusal. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_conn.h"

#define LEN 4096

static unit_fixture_t F; /* F.src on a, F.dst on b */

static int suite_init(void)
{
    return unit_fixture_open(unit_tp, LEN, LEN, &F) == UCCL_OK ? 0 : -1;
}

static int suite_cleanup(void)
{
    unit_fixture_close(&F);
    return 0;
}

/* One write a -> b of LEN bytes, verified: the connection still works. */
static void check_conn_works(unsigned seed)
{
    uccl_rdesc_t d;
    uccl_req_t *req = NULL;

    unit_fill(F.src, LEN, seed);
    memset(F.dst, 0, LEN);
    UNIT_ASSERT_STATUS(uccl_mr_pack(F.dst_mr, 0, LEN, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_write(F.p.ab, F.src_mr, 0, LEN, &d, 0, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    uccl_req_free(req);
    CU_ASSERT_EQUAL(unit_mismatches(F.dst, LEN, seed), 0);
}

static void test_bad_arguments(void)
{
    uccl_rdesc_t d, garbage;
    void *ptr = &ptr;

    UNIT_ASSERT_STATUS(uccl_mr_pack(F.dst_mr, 0, LEN, &d), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, NULL, &ptr), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &d, NULL), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(NULL, &d, &ptr), UCCL_ERR_INVALID_HANDLE);
    memset(&garbage, 0x5a, sizeof(garbage));
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &garbage, &ptr), UCCL_ERR_BAD_DESC);
    CU_ASSERT_PTR_NULL(ptr); /* cleared on every error after the argument checks */
    check_conn_works(1);
}

static void test_other_engines_descriptor(void)
{
    uccl_rdesc_t mine;
    void *ptr = &ptr;

    /* a's own region, offered on a's connection to b: not b's memory */
    UNIT_ASSERT_STATUS(uccl_mr_pack(F.src_mr, 0, LEN, &mine), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &mine, &ptr), UCCL_ERR_STALE);
    CU_ASSERT_PTR_NULL(ptr);
    check_conn_works(2);
}

static void test_unmappable_memory(void)
{
    uccl_rdesc_t d;
    void *ptr = &ptr;

    /* malloc'd memory: tcp maps nothing, shm only memory of uccl_mem_alloc */
    UNIT_ASSERT_STATUS(uccl_mr_pack(F.dst_mr, 0, LEN, &d), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &d, &ptr), UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(ptr);
    check_conn_works(3);
}

/* Memory of uccl_mem_alloc: shm maps it (stores and loads both ways, at
 * the descriptor's offset, the same mapping again), tcp refuses it. */
static void test_mem_alloc_memory(void)
{
    uint8_t *mem = NULL, *p = NULL, *q = NULL;
    uccl_mr_t *mr = NULL;
    uccl_rdesc_t d, d2;
    bool shm = strcmp(unit_tp, "shm") == 0;

    UNIT_ASSERT_STATUS(uccl_mem_alloc(F.p.b, UCCL_MEM_HOST, 3 * LEN, (void **)&mem), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(F.p.b, mem + LEN, 2 * LEN, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 0, 2 * LEN, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, LEN, 16, &d2), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &d, (void **)&p), shm ? UCCL_OK : UCCL_ERR_UNSUPPORTED);
    if (shm && p != NULL) {
        unit_fill(p, 2 * LEN, 7); /* a stores, b loads */
        CU_ASSERT_EQUAL(unit_mismatches(mem + LEN, 2 * LEN, 7), 0);
        unit_fill(mem + LEN, 2 * LEN, 8); /* b stores, a loads */
        CU_ASSERT_EQUAL(unit_mismatches(p, 2 * LEN, 8), 0);
        UNIT_ASSERT_STATUS(uccl_rdesc_ptr(F.p.ab, &d2, (void **)&q), UCCL_OK);
        CU_ASSERT_PTR_EQUAL(q, p + LEN);
        UNIT_ASSERT_STATUS(uccl_rdesc_ptr(F.p.ab, &d, (void **)&q), UCCL_OK);
        CU_ASSERT_PTR_EQUAL(q, p);
    }
    /* one flipped key byte breaks the checksum */
    d.bytes[45] ^= 1;
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(F.p.ab, &d, (void **)&q), UCCL_ERR_BAD_DESC);
    check_conn_works(4);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mem_free(F.p.b, mem), UCCL_OK);
}

static CU_TestInfo tests[] = {
    {"bad arguments and garbage descriptors", test_bad_arguments},
    {"a descriptor of another engine: STALE", test_other_engines_descriptor},
    {"memory the connection cannot map: UNSUPPORTED", test_unmappable_memory},
    {"memory of uccl_mem_alloc: mapped on shm, not on tcp", test_mem_alloc_memory},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_tp("rdesc_ptr", tests, suite_init, suite_cleanup);
}

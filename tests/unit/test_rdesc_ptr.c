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

/* Sends from memory of uccl_mem_alloc (on shm the receiver copies from its
 * mapping of the sender's memfd, not with CMA: UCCL_SHM_MAP_MAX): eager and
 * rendezvous sizes, receive posted first and message held unexpected, and
 * the buffer freed and allocated again each round, which reuses its fd
 * number and often its address: the receiver's kept mapping of the old
 * file must not be read for the new one. */
#define BIG (3 * 1024 * 1024 + 4096)
static void test_send_from_mem_alloc(void)
{
    static const size_t sizes[] = {100, 64 * 1024, 3 * 1024 * 1024 + 5, 20000};
    uint8_t *dst = malloc(BIG);
    uccl_mr_t *rmr = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(dst);
    UNIT_ASSERT_STATUS(uccl_mr_reg(F.p.b, dst, BIG, 0, &rmr), UCCL_OK);
    for (unsigned round = 0; round < 3; round++) {
        uint8_t *mem = NULL;
        uccl_mr_t *smr = NULL;
        UNIT_ASSERT_STATUS(uccl_mem_alloc(F.p.a, UCCL_MEM_HOST, BIG, (void **)&mem), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_reg(F.p.a, mem, BIG, 0, &smr), UCCL_OK);
        for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            uccl_req_t *r[2] = {NULL, NULL};
            unsigned seed = 20 + 10 * round + k;
            unit_fill(mem + 8, sizes[k], seed); /* at an offset into the allocation */
            memset(dst, 0, sizes[k]);
            if (k % 2 == 0)
                UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, rmr, 0, BIG, 50 + k, &r[1]), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_send(F.p.ab, smr, 8, sizes[k], 50 + k, &r[0]), UCCL_OK);
            if (k % 2 == 1) {
                for (int i = 0; i < 100; i++) { /* let the offer arrive first */
                    uccl_engine_progress(F.p.a);
                    uccl_engine_progress(F.p.b);
                }
                UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, rmr, 0, BIG, 50 + k, &r[1]), UCCL_OK);
            }
            UNIT_ASSERT_STATUS(unit_drive(&F.p, r, 2, UNIT_TIMEOUT_MS), UCCL_OK);
            CU_ASSERT_EQUAL(uccl_wait(r[0], 0), UCCL_OK);
            CU_ASSERT_EQUAL(uccl_wait(r[1], 0), UCCL_OK);
            uccl_req_free(r[0]);
            uccl_req_free(r[1]);
            CU_ASSERT_EQUAL(unit_mismatches(dst, sizes[k], seed), 0);
        }
        UNIT_ASSERT_STATUS(uccl_mr_dereg(smr), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mem_free(F.p.a, mem), UCCL_OK);
    }
    UNIT_ASSERT_STATUS(uccl_mr_dereg(rmr), UCCL_OK);
    free(dst);
}

static CU_TestInfo tests[] = {
    {"bad arguments and garbage descriptors", test_bad_arguments},
    {"a descriptor of another engine: STALE", test_other_engines_descriptor},
    {"memory the connection cannot map: UNSUPPORTED", test_unmappable_memory},
    {"memory of uccl_mem_alloc: mapped on shm, not on tcp", test_mem_alloc_memory},
    {"sends from memory of uccl_mem_alloc, freed and allocated again", test_send_from_mem_alloc},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_tp("rdesc_ptr", tests, suite_init, suite_cleanup);
}

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

static const char *transport;
static unit_pair_t pair;
static uint8_t *a_buf, *b_buf;
static uccl_mr_t *a_mr, *b_mr;

static int suite_init(const char *tp)
{
    transport = tp;
    a_buf = malloc(LEN);
    b_buf = malloc(LEN);
    if (a_buf == NULL || b_buf == NULL || unit_pair_open(transport, &pair) != UCCL_OK)
        return -1;
    if (uccl_mr_reg(pair.a, a_buf, LEN, 0, &a_mr) != UCCL_OK ||
        uccl_mr_reg(pair.b, b_buf, LEN, 0, &b_mr) != UCCL_OK)
        return -1;
    return 0;
}
static int suite_init_shm(void) { return suite_init("shm"); }
static int suite_init_tcp(void) { return suite_init("tcp"); }

static int suite_cleanup(void)
{
    uccl_mr_dereg(a_mr);
    uccl_mr_dereg(b_mr);
    unit_pair_close(&pair);
    free(a_buf);
    free(b_buf);
    return 0;
}

/* One write a -> b of LEN bytes, verified: the connection still works. */
static void check_conn_works(unsigned seed)
{
    uccl_rdesc_t d;
    uccl_req_t *req = NULL;

    unit_fill(a_buf, LEN, seed);
    memset(b_buf, 0, LEN);
    UNIT_ASSERT_STATUS(uccl_mr_pack(b_mr, 0, LEN, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_write(pair.ab, a_mr, 0, LEN, &d, 0, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&pair, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    uccl_req_free(req);
    CU_ASSERT_EQUAL(unit_mismatches(b_buf, LEN, seed), 0);
}

static void test_bad_arguments(void)
{
    uccl_rdesc_t d, garbage;
    void *ptr = &ptr;

    UNIT_ASSERT_STATUS(uccl_mr_pack(b_mr, 0, LEN, &d), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(pair.ab, NULL, &ptr), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(pair.ab, &d, NULL), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(NULL, &d, &ptr), UCCL_ERR_INVALID_HANDLE);
    memset(&garbage, 0x5a, sizeof(garbage));
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(pair.ab, &garbage, &ptr), UCCL_ERR_BAD_DESC);
    CU_ASSERT_PTR_NULL(ptr); /* cleared on every error after the argument checks */
    check_conn_works(1);
}

static void test_other_engines_descriptor(void)
{
    uccl_rdesc_t mine;
    void *ptr = &ptr;

    /* a's own region, offered on a's connection to b: not b's memory */
    UNIT_ASSERT_STATUS(uccl_mr_pack(a_mr, 0, LEN, &mine), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(pair.ab, &mine, &ptr), UCCL_ERR_STALE);
    CU_ASSERT_PTR_NULL(ptr);
    check_conn_works(2);
}

static void test_unmappable_memory(void)
{
    uccl_rdesc_t d;
    void *ptr = &ptr;

    /* malloc'd memory: tcp maps nothing, shm only memory of uccl_mem_alloc */
    UNIT_ASSERT_STATUS(uccl_mr_pack(b_mr, 0, LEN, &d), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_rdesc_ptr(pair.ab, &d, &ptr), UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(ptr);
    check_conn_works(3);
}

static CU_TestInfo tests[] = {
    {"bad arguments and garbage descriptors", test_bad_arguments},
    {"a descriptor of another engine: STALE", test_other_engines_descriptor},
    {"memory the connection cannot map: UNSUPPORTED", test_unmappable_memory},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo all[] = {
        {"rdesc_ptr/shm", suite_init_shm, suite_cleanup, NULL, NULL, tests},
        {"rdesc_ptr/tcp", suite_init_tcp, suite_cleanup, NULL, NULL, tests},
    };

    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_per_transport(all);
}

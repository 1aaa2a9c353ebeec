/* Unit tests of the collectives' argument checks (coll/coll.c,
 * uccl_coll_args_check) on comm sizes no CI job runs: a state of 65 ranks
 * made by hand (no comm, no engine: the checks read only rank and size
 * when the algorithm is forced). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "unit.h"

#define NBIG 65 /* above the size whose alltoallv skips the overlap check */

static uccl_status_t check(int size, const uccl_coll_args_t *in)
{
    coll_state_t *cs = calloc(1, sizeof(*cs));
    coll_args_t a;
    uccl_status_t st;

    CU_ASSERT_PTR_NOT_NULL_FATAL(cs);
    cs->size = size;
    cs->rank = 0;
    st = uccl_coll_args_check(cs, in, &a);
    if (st == UCCL_OK)
        uccl_coll_args_free(&a);
    free(cs);
    return st;
}

/* alltoallv with receive counts > 0 and a NULL receive buffer: refused at
 * every size (a big comm's skipped overlap check must not skip this) */
static void test_alltoallv_null_recvbuf(void)
{
    static size_t cnt[NBIG], dsp[NBIG];
    static char sb[NBIG * 8];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALLV,
                          .sendbuf = sb, .recvbuf = NULL, .sendcounts = cnt, .sdispls = dsp,
                          .recvcounts = cnt, .rdispls = dsp, .algo = UCCL_COLL_ALGO_LINEAR};

    for (int i = 0; i < NBIG; i++)
        cnt[i] = 8, dsp[i] = (size_t)i * 8;
    UNIT_ASSERT_STATUS(check(3, &a), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(check(NBIG, &a), UCCL_ERR_INVALID_PARAM);
    a.recvbuf = malloc(NBIG * 8); /* the control: the same call with a buffer passes */
    CU_ASSERT_PTR_NOT_NULL_FATAL(a.recvbuf);
    UNIT_ASSERT_STATUS(check(NBIG, &a), UCCL_OK);
    free(a.recvbuf);
}

/* a receive block past the end of the address space, at a big size too */
static void test_alltoallv_wrap_big(void)
{
    static size_t cnt[NBIG], dsp[NBIG];
    static char sb[NBIG * 8], rb[NBIG * 8];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALLV,
                          .sendbuf = sb, .recvbuf = rb, .sendcounts = cnt, .sdispls = dsp,
                          .recvcounts = cnt, .rdispls = dsp, .algo = UCCL_COLL_ALGO_LINEAR};

    for (int i = 0; i < NBIG; i++)
        cnt[i] = 8, dsp[i] = (size_t)i * 8;
    UNIT_ASSERT_STATUS(check(NBIG, &a), UCCL_OK);
    dsp[NBIG - 1] = SIZE_MAX - 16;
    UNIT_ASSERT_STATUS(check(NBIG, &a), UCCL_ERR_INVALID_PARAM);
}

/* The collectives' log lines go where the library's go: to the sink set
 * with uccl_log_set_sink (a binding's logger), not to stderr around it. */
typedef struct {
    int errors;
    char msg[256];
} sink_seen_t;

static void sink(void *arg, uccl_log_level_t level, const char *file, int line, const char *msg)
{
    sink_seen_t *seen = arg;

    (void)line;
    if (level == UCCL_LOG_ERROR && strcmp(file, "coll.c") == 0 && seen->errors++ == 0)
        snprintf(seen->msg, sizeof(seen->msg), "%s", msg);
}

static void test_log_sink(void)
{
    static char rb[64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ROOT, .op = UCCL_COLL_BCAST, .recvbuf = rb,
                          .count = 8, .root = 5};
    sink_seen_t seen = {0};

    uccl_log_set_sink(sink, &seen);
    UNIT_ASSERT_STATUS(check(3, &a), UCCL_ERR_INVALID_PARAM); /* "root 5 out of range" */
    uccl_log_set_sink(NULL, NULL);
    CU_ASSERT_EQUAL(seen.errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(seen.msg, "root 5 out of range"));
}

static CU_TestInfo args_tests[] = {
    {"the collectives' log lines reach the log sink", test_log_sink},
    {"alltoallv, NULL receive buffer, 3 and 65 ranks", test_alltoallv_null_recvbuf},
    {"alltoallv, a block past the address space, 65 ranks", test_alltoallv_wrap_big},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"coll args", NULL, NULL, NULL, NULL, args_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

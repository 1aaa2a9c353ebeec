/* Unit tests of persistent send/recv requests (src/core/preq.c,
 * uccl_send_init / uccl_recv_init / uccl_start / uccl_start_all) over a live
 * connection between two engines of this process: many starts with new
 * data and new tags (bytes compared), matching order, truncation, the
 * errors (not persistent, active, several engines, bad arguments), regions
 * held until the request is freed, and a free while active. One suite per
 * transport that can be opened here; skipped when none can. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define BUF_SIZE (64 * 1024)

static unit_fixture_t F; /* src (sends) on a, dst (receives) on b */

static int suite_init(void)
{
    return unit_fixture_open(unit_tp, BUF_SIZE, BUF_SIZE, &F) == UCCL_OK ? 0 : 1;
}

static int suite_cleanup(void)
{
    unit_fixture_close(&F);
    return 0;
}

/* 200 starts of 4 pairs (sizes 0 B to 40 KiB: eager and rendezvous), new
 * data and a new tag each round, receives and sends started together. */
static void test_many_starts(void)
{
    static const size_t len[4] = {0, 8, 1024, 40000};
    size_t off[4] = {0, 64, 2048, 8192};
    uccl_req_t *s[4], *r[4], *all[8];
    uint64_t tags[4];

    for (int i = 0; i < 4; i++) {
        UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, off[i], len[i], 5, &s[i]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, F.dst_mr, off[i], len[i], 5, &r[i]), UCCL_OK);
        /* inactive: finished at once with no bytes */
        UNIT_ASSERT_STATUS(uccl_wait(s[i], 0), UCCL_OK);
        int done = 0;
        UNIT_ASSERT_STATUS(uccl_test(r[i], &done), UCCL_OK);
        CU_ASSERT_EQUAL(done, 1);
        all[i] = s[i];
        all[4 + i] = r[i];
    }
    for (unsigned round = 0; round < 200; round++) {
        for (int i = 0; i < 4; i++) {
            unit_fill(F.src + off[i], len[i], round * 4 + (unsigned)i);
            memset(F.dst + off[i], 0xee, len[i]);
            tags[i] = 1000 + round * 4 + (uint64_t)i;
        }
        UNIT_ASSERT_STATUS(uccl_start_all(r, 4, tags), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_start_all(s, 4, tags), UCCL_OK);
        UNIT_ASSERT_STATUS(unit_drive(&F.p, all, 8, UNIT_TIMEOUT_MS), UCCL_OK);
        for (int i = 0; i < 4; i++) {
            size_t bytes = 99;
            UNIT_ASSERT_STATUS(uccl_wait(r[i], 0), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_req_bytes(r[i], &bytes), UCCL_OK);
            CU_ASSERT_EQUAL(bytes, len[i]);
            CU_ASSERT_EQUAL(unit_mismatches(F.dst + off[i], len[i], round * 4 + (unsigned)i),
                            0);
            UNIT_ASSERT_STATUS(uccl_wait(s[i], 0), UCCL_OK);
        }
        if (round % 50 == 49) /* tags NULL: each keeps the last one */
            for (int i = 0; i < 4; i++) {
                UNIT_ASSERT_STATUS(uccl_start(s[i]), UCCL_OK);
                UNIT_ASSERT_STATUS(uccl_start(r[i]), UCCL_OK);
                UNIT_ASSERT_STATUS(unit_drive(&F.p, all, 8, UNIT_TIMEOUT_MS), UCCL_OK);
                UNIT_ASSERT_STATUS(uccl_wait(r[i], 0), UCCL_OK);
            }
    }
    for (int i = 0; i < 8; i++)
        UNIT_ASSERT_STATUS(uccl_req_free(all[i]), UCCL_OK);
}

/* A persistent receive takes messages in order with ordinary ones, and one
 * too small fails with TRUNCATED while the message stays. */
static void test_order_and_truncation(void)
{
    uccl_req_t *pr, *ps, *s1, *s2, *r2;
    size_t bytes = 0;

    unit_fill(F.src, 256, 7);
    UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, F.dst_mr, 0, 16, 44, &pr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(F.p.ab, F.src_mr, 0, 16, 44, &s1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(F.p.ab, F.src_mr, 16, 32, 44, &s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_OK);
    uccl_req_t *w1[] = {pr, s1, s2};
    UNIT_ASSERT_STATUS(unit_drive(&F.p, w1, 3, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(pr, 0), UCCL_OK);
    CU_ASSERT_EQUAL(unit_mismatches(F.dst, 16, 7), 0); /* the first message */
    /* the 32-byte message does not fit the 16-byte persistent receive */
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &pr, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(pr, 0), UCCL_ERR_TRUNCATED);
    UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, F.dst_mr, 1024, 64, 44, &r2), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &r2, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(r2, &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 32);
    CU_ASSERT_EQUAL(memcmp(F.dst + 1024, F.src + 16, 32), 0);
    /* and the persistent send pairs with an ordinary receive */
    UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, 64, 100, 45, &ps), UCCL_OK);
    uccl_req_free(r2);
    UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, F.dst_mr, 2048, 100, 45, &r2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(ps), UCCL_OK);
    uccl_req_t *w2[] = {ps, r2};
    UNIT_ASSERT_STATUS(unit_drive(&F.p, w2, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(r2, 0), UCCL_OK);
    CU_ASSERT_EQUAL(memcmp(F.dst + 2048, F.src + 64, 100), 0);
    uccl_req_free(r2);
    uccl_req_free(s1);
    uccl_req_free(s2);
    uccl_req_free(pr);
    uccl_req_free(ps);
}

static void test_errors(void)
{
    uccl_req_t *pr, *ps, *plain, *other, *two[2];
    uccl_mr_t *mr;
    static uint8_t extra[4096];

    UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, BUF_SIZE - 8, 16, 1, &ps),
                       UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, NULL, 0, 16, 1, &pr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_send_init(NULL, F.src_mr, 0, 16, 1, &ps), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, 0, 16, 1, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_start(NULL), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_start_all(NULL, 1, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_start_all(NULL, 0, NULL), UCCL_OK);
    /* not a persistent request */
    UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, F.dst_mr, 0, 16, 2, &plain), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(plain), UCCL_ERR_INVALID_PARAM);
    /* a region with a persistent request is in use until the request is freed */
    UNIT_ASSERT_STATUS(uccl_mr_reg(F.p.b, extra, sizeof(extra), 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, mr, 0, 16, 2, &pr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_ERR_BUSY);
    /* active: a second start is refused, and none of a batch starts */
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, F.dst_mr, 0, 16, 3, &other), UCCL_OK);
    two[0] = other;
    two[1] = pr;
    UNIT_ASSERT_STATUS(uccl_start_all(two, 2, NULL), UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(uccl_wait(other, 0), UCCL_OK); /* did not start: still inactive */
    /* requests of two engines in one call */
    UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, 0, 16, 2, &ps), UCCL_OK);
    two[0] = ps;
    two[1] = other;
    UNIT_ASSERT_STATUS(uccl_start_all(two, 2, NULL), UCCL_ERR_INVALID_PARAM);
    /* the first of the two sends (tag 2) goes to the ordinary receive, which
     * was posted first; the second to the persistent one */
    unit_fill(F.src, 16, 3);
    UNIT_ASSERT_STATUS(uccl_start(ps), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &plain, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(ps, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(ps), UCCL_OK);
    /* freed while active: detached, finishes in the background, and then
     * releases its region */
    UNIT_ASSERT_STATUS(uccl_req_free(pr), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &ps, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    for (int i = 0; i < 1000; i++) {
        uccl_engine_progress(F.p.a);
        uccl_engine_progress(F.p.b);
    }
    CU_ASSERT_EQUAL(unit_mismatches(extra, 16, 3), 0);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_ERR_INVALID_HANDLE); /* freed */
    uccl_req_free(plain);
    uccl_req_free(ps);
    uccl_req_free(other);
}

/* One request twice in a uccl_start_all batch: refused, nothing starts
 * (a second post of a posted request would link it twice and send it twice);
 * the connection then works as before. */
static void test_start_all_duplicate(void)
{
    uccl_req_t *ps, *pr, *batch[3], *both[2];
    size_t bytes = 0;
    int done = 0;

    UNIT_ASSERT_STATUS(uccl_send_init(F.p.ab, F.src_mr, 0, 100, 7, &ps), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv_init(F.p.ba, F.dst_mr, 0, 100, 7, &pr), UCCL_OK);
    batch[0] = ps;
    batch[1] = ps;
    UNIT_ASSERT_STATUS(uccl_start_all(batch, 2, NULL), UCCL_ERR_INVALID_PARAM);
    batch[0] = pr; /* the duplicate after another request: that one stays inactive too */
    batch[1] = ps;
    batch[2] = ps;
    UNIT_ASSERT_STATUS(uccl_start_all(batch, 3, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_test(pr, &done), UCCL_OK);
    CU_ASSERT_EQUAL(done, 1); /* not started */
    for (int i = 0; i < 100; i++) { /* nothing was sent */
        uccl_engine_progress(F.p.a);
        uccl_engine_progress(F.p.b);
    }
    unit_fill(F.src, 100, 11);
    memset(F.dst, 0xee, 100);
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_start(ps), UCCL_OK);
    both[0] = ps;
    both[1] = pr;
    UNIT_ASSERT_STATUS(unit_drive(&F.p, both, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(pr, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(pr, &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 100);
    CU_ASSERT_EQUAL(unit_mismatches(F.dst, 100, 11), 0);
    /* exactly one message: a second receive of tag 7 finds none */
    UNIT_ASSERT_STATUS(uccl_start(pr), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &pr, 1, 50), UCCL_ERR_TIMEOUT);
    uccl_req_free(pr); /* detached; finishes with the engines */
    uccl_req_free(ps);
}

static CU_TestInfo preq_tests[] = {
    {"200 starts, new data and tags, 0 B to 40 KiB", test_many_starts},
    {"matching order with ordinary requests, truncation", test_order_and_truncation},
    {"errors, regions held, free while active", test_errors},
    {"one request twice in a batch: refused", test_start_all_duplicate},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_tp("preq", preq_tests, suite_init, suite_cleanup);
}

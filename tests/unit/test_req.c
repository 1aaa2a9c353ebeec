/* Unit tests of the request lifecycle (src/core/req.c) over a live
 * connection between two engines of this process: test, wait, wait_all,
 * req_bytes, req_free, freed and detached requests. One suite per transport
 * that can be opened here; the program is skipped when none can. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define BUF_SIZE (64 * 1024)

static unit_fixture_t F; /* src (sends) on a, dst (receives) on b */

static int suite_init(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_fixture_open(unit_tp, BUF_SIZE, BUF_SIZE, &F) == UCCL_OK ? 0 : 1;
}

static int suite_cleanup(void)
{
    unit_fixture_close(&F);
    return 0;
}

static void fill_pattern(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 31 + seed);
}

static int check_pattern(const uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)(i * 31 + seed))
            return 0;
    return 1;
}

/* Post a send of len bytes at F.src+off with tag; returns the request. */
static uccl_req_t *post_send(size_t off, size_t len, uint64_t tag)
{
    uccl_req_t *req = NULL;
    UNIT_ASSERT_STATUS(uccl_send(F.p.ab, F.src_mr, off, len, tag, &req), UCCL_OK);
    return req;
}

static uccl_req_t *post_recv(size_t off, size_t len, uint64_t tag)
{
    uccl_req_t *req = NULL;
    UNIT_ASSERT_STATUS(uccl_recv(F.p.ba, F.dst_mr, off, len, tag, &req), UCCL_OK);
    return req;
}

/* Each finished request's own status (uccl_wait_all takes one engine's
 * requests per call, and these span both). */
static void expect_all_ok(uccl_req_t **reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reqs[i] != NULL)
            UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), UCCL_OK);
}

static void test_send_recv_test_bytes(void)
{
    const size_t len = 5000;
    uccl_req_t *reqs[2];
    size_t bytes = 0;
    int done = 0;

    fill_pattern(F.src, len, 1);
    memset(F.dst, 0, len);
    reqs[0] = post_recv(0, len, 11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reqs[0]);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], &bytes), UCCL_INPROGRESS);
    reqs[1] = post_send(0, len, 11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reqs[1]);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_test(reqs[0], &done), UCCL_OK);
    CU_ASSERT_EQUAL(done, 1);
    UNIT_ASSERT_STATUS(uccl_test(reqs[1], &done), UCCL_OK);
    CU_ASSERT_EQUAL(done, 1);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK); /* done requests stay readable */
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, len);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[1], &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, len);
    CU_ASSERT(check_pattern(F.dst, len, 1));
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_test(reqs[0], NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[1]), UCCL_OK);
}

/* A freed request is an invalid handle for every request call. */
static void test_freed_request(void)
{
    uccl_req_t *reqs[2];
    size_t bytes;
    int done = 7;

    reqs[0] = post_recv(0, 16, 12);
    reqs[1] = post_send(0, 16, 12);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reqs[0]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reqs[1]);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[0]), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_test(reqs[0], &done), UCCL_ERR_INVALID_HANDLE);
    CU_ASSERT_EQUAL(done, 7);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], &bytes), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_wait_all(reqs, 2, 0), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(NULL), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_test(NULL, &done), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_wait(NULL, 0), UCCL_ERR_INVALID_HANDLE);
}

/* wait(0) on a receive nobody sends to times out and leaves it valid; the
 * message sent afterwards still lands in it. */
static void test_wait_timeout_keeps_request(void)
{
    uccl_req_t *reqs[2];
    uint64_t t0;
    size_t bytes = 0;
    int done = 1;

    fill_pattern(F.src, 300, 3);
    memset(F.dst, 0, 300);
    reqs[0] = post_recv(0, 300, 13);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reqs[0]);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_ERR_TIMEOUT);
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 50), UCCL_ERR_TIMEOUT);
    CU_ASSERT(unit_now_ms() - t0 >= 50);
    CU_ASSERT(unit_now_ms() - t0 < 1000);
    UNIT_ASSERT_STATUS(uccl_wait_all(reqs, 1, 20), UCCL_ERR_TIMEOUT);
    UNIT_ASSERT_STATUS(uccl_test(reqs[0], &done), UCCL_INPROGRESS);
    CU_ASSERT_EQUAL(done, 0);
    reqs[1] = post_send(0, 300, 13);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 300);
    CU_ASSERT(check_pattern(F.dst, 300, 3));
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
}

/* A receive freed while in flight is detached: it still consumes the next
 * message of its tag (posting order), then recycles itself; the following
 * message goes to the following receive. */
static void test_free_in_flight(void)
{
    uccl_req_t *detached, *reqs[3];
    int done;

    detached = post_recv(0, 100, 14);
    CU_ASSERT_PTR_NOT_NULL_FATAL(detached);
    UNIT_ASSERT_STATUS(uccl_req_free(detached), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_test(detached, &done), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_req_free(detached), UCCL_ERR_INVALID_HANDLE);
    fill_pattern(F.src, 100, 4);
    fill_pattern(F.src + 1000, 100, 5);
    memset(F.dst, 0, 2000);
    reqs[0] = post_recv(1000, 100, 14);
    reqs[1] = post_send(0, 100, 14);    /* to the detached receive */
    reqs[2] = post_send(1000, 100, 14); /* to reqs[0] */
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 3, UNIT_TIMEOUT_MS), UCCL_OK);
    expect_all_ok(reqs, 3);
    CU_ASSERT(check_pattern(F.dst, 100, 4));
    CU_ASSERT(check_pattern(F.dst + 1000, 100, 5));
    for (int i = 0; i < 3; i++)
        uccl_req_free(reqs[i]);
    /* a freed send in flight completes in the background too */
    reqs[0] = post_recv(0, 64, 15);
    reqs[1] = post_send(0, 64, 15);
    UNIT_ASSERT_STATUS(uccl_req_free(reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    uccl_req_free(reqs[0]);
    /* many detached requests do not leak (ASan) nor exhaust the pool */
    for (int round = 0; round < 300; round++) {
        reqs[0] = post_recv(0, 8, 16);
        reqs[1] = post_send(0, 8, 16);
        if (reqs[0] == NULL || reqs[1] == NULL)
            break;
        uccl_req_free(reqs[0]);
        uccl_req_free(reqs[1]);
    }
    reqs[0] = post_recv(0, 8, 17);
    reqs[1] = post_send(0, 8, 17);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
}

/* wait_all: NULL entries skipped, first error in array order wins, a
 * truncated receive leaves the message for the next one. */
static void test_wait_all_mixed(void)
{
    uccl_req_t *recvs[4] = {NULL}, *sends[2];
    size_t bytes = 0;

    fill_pattern(F.src, 400, 6);
    memset(F.dst, 0, 4096);
    recvs[0] = post_recv(0, 1000, 18);   /* larger than the message: ok, 400 bytes */
    recvs[2] = post_recv(1024, 100, 19); /* smaller: truncated */
    sends[0] = post_send(0, 400, 18);
    sends[1] = post_send(0, 400, 19);
    recvs[3] = sends[0]; /* drive the first send along */
    UNIT_ASSERT_STATUS(unit_drive(&F.p, recvs, 4, UNIT_TIMEOUT_MS), UCCL_OK);
    recvs[3] = NULL;
    UNIT_ASSERT_STATUS(uccl_wait_all(recvs, 4, UNIT_TIMEOUT_MS), UCCL_ERR_TRUNCATED);
    UNIT_ASSERT_STATUS(uccl_wait(recvs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(recvs[0], &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 400);
    CU_ASSERT(check_pattern(F.dst, 400, 6));
    UNIT_ASSERT_STATUS(uccl_wait(recvs[2], 0), UCCL_ERR_TRUNCATED);
    UNIT_ASSERT_STATUS(uccl_req_free(recvs[2]), UCCL_OK);
    /* the message of tag 19 waits for a receive that fits */
    recvs[2] = post_recv(2048, 400, 19);
    recvs[3] = sends[1];
    UNIT_ASSERT_STATUS(unit_drive(&F.p, recvs, 4, UNIT_TIMEOUT_MS), UCCL_OK);
    recvs[3] = NULL;
    UNIT_ASSERT_STATUS(uccl_wait_all(recvs, 4, 0), UCCL_OK);
    CU_ASSERT(check_pattern(F.dst + 2048, 400, 6));
    UNIT_ASSERT_STATUS(uccl_wait_all(sends, 2, 0), UCCL_OK);
    uccl_req_free(recvs[0]);
    uccl_req_free(recvs[2]);
    uccl_req_free(sends[0]);
    uccl_req_free(sends[1]);
    UNIT_ASSERT_STATUS(uccl_wait_all(NULL, 0, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait_all(NULL, 2, 0), UCCL_ERR_INVALID_PARAM);
    memset(recvs, 0, sizeof(recvs));
    UNIT_ASSERT_STATUS(uccl_wait_all(recvs, 4, 0), UCCL_OK);
}

/* Messages match receives by tag in posting order; zero-length allowed. */
static void test_tags_and_zero_length(void)
{
    uccl_req_t *reqs[5];
    size_t bytes = 1;

    fill_pattern(F.src, 64, 7);
    fill_pattern(F.src + 64, 64, 8);
    memset(F.dst, 0, 256);
    reqs[0] = post_recv(0, 64, 21);  /* gets tag 21 = pattern 8 */
    reqs[1] = post_recv(64, 64, 20); /* gets tag 20 = pattern 7 */
    reqs[2] = post_send(0, 64, 20);
    reqs[3] = post_send(64, 64, 21);
    reqs[4] = NULL;
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 4, UNIT_TIMEOUT_MS), UCCL_OK);
    expect_all_ok(reqs, 4);
    CU_ASSERT(check_pattern(F.dst, 64, 8));
    CU_ASSERT(check_pattern(F.dst + 64, 64, 7));
    for (int i = 0; i < 4; i++)
        uccl_req_free(reqs[i]);
    reqs[0] = post_recv(0, 64, 22);
    reqs[1] = post_send(0, 0, 22);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[0], &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 0);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
}

/* Poll a 4 KiB send and its receive to completion with one wait entry point
 * and one timeout only; nothing else progresses the engines. A zero timeout
 * must progress once per call (it once never did: 200,000 polls left a tcp
 * send pending). Returns the number of rounds it took. */
static long poll_until_done(int use_wait_all, int timeout_ms)
{
    uccl_req_t *s, *r;
    uccl_status_t ss = UCCL_ERR_TIMEOUT, rs = UCCL_ERR_TIMEOUT;
    long n = 0;

    fill_pattern(F.src, 4096, 77);
    memset(F.dst, 0, 4096);
    s = post_send(0, 4096, 900);
    r = post_recv(0, 4096, 900);
    for (; n < 200000 && (ss == UCCL_ERR_TIMEOUT || rs == UCCL_ERR_TIMEOUT); n++) {
        if (ss == UCCL_ERR_TIMEOUT)
            ss = use_wait_all ? uccl_wait_all(&s, 1, timeout_ms) : uccl_wait(s, timeout_ms);
        if (rs == UCCL_ERR_TIMEOUT)
            rs = use_wait_all ? uccl_wait_all(&r, 1, timeout_ms) : uccl_wait(r, timeout_ms);
    }
    UNIT_ASSERT_STATUS(ss, UCCL_OK);
    UNIT_ASSERT_STATUS(rs, UCCL_OK);
    CU_ASSERT(check_pattern(F.dst, 4096, 77));
    uccl_req_free(s);
    uccl_req_free(r);
    return n;
}

static void test_wait_zero_progresses(void)
{
    long n = poll_until_done(0, 0);
    CU_ASSERT(n < 200000);
    n = poll_until_done(1, 0);
    CU_ASSERT(n < 200000);
}

static void test_wait_small_and_default_timeouts(void)
{
    CU_ASSERT(poll_until_done(0, 5) < 200000);
    CU_ASSERT(poll_until_done(1, 5) < 200000);
    CU_ASSERT(poll_until_done(0, -1) < 200000);
    CU_ASSERT(poll_until_done(1, -1) < 200000);
}

/* uccl_test alone finishes it too, and wait(0) on a finished request returns
 * its status at once. */
static void test_test_polls(void)
{
    uccl_req_t *s = post_send(0, 4096, 901), *r = post_recv(0, 4096, 901);
    int sd = 0, rd = 0;

    for (long n = 0; n < 200000 && !(sd && rd); n++) {
        if (!sd)
            uccl_test(s, &sd);
        if (!rd)
            uccl_test(r, &rd);
    }
    CU_ASSERT(sd && rd);
    UNIT_ASSERT_STATUS(uccl_wait(s, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait_all(&r, 1, 0), UCCL_OK);
    uccl_req_free(s);
    uccl_req_free(r);
}

static CU_TestInfo req_tests[] = {
    {"send/recv with test and req_bytes", test_send_recv_test_bytes},
    {"freed request is an invalid handle", test_freed_request},
    {"wait with timeout keeps the request", test_wait_timeout_keeps_request},
    {"free in flight (detached)", test_free_in_flight},
    {"wait_all mixed, truncation", test_wait_all_mixed},
    {"tag matching and zero-length", test_tags_and_zero_length},
    {"wait(0) and wait_all(0) progress", test_wait_zero_progresses},
    {"wait with 5 ms and -1 timeouts", test_wait_small_and_default_timeouts},
    {"test alone finishes a transfer", test_test_polls},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_tp("req", req_tests, suite_init, suite_cleanup);
}

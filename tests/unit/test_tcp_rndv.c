/* tcp rendezvous (UCCL_TCP_RNDV_MIN): a message of at least that size sends
 * only its header until a receive takes it, then its bytes land in place.
 * So large messages that arrive before their receives are held as headers
 * (never as UCCL_UNEXPECTED_MAX bytes of bounce buffers), their sends wait
 * for the receives, and every byte arrives intact, whatever the order in
 * which the receives are posted. Also: a UCCL_TCP_PROGRESS_BYTES whose send
 * budget (times the streams) overflowed. Two engines in one process, tcp only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define NMSG 4
#define SIZE ((1u << 20) + 13) /* above UCCL_TCP_RNDV_MIN, not a multiple of the chunk */

static uccl_status_t conn_state(uccl_conn_t *conn)
{
    uccl_conn_attr_t attr = {.state = UCCL_ERR_INVALID_HANDLE};

    return uccl_conn_query(conn, &attr) == UCCL_OK ? attr.state : UCCL_ERR_INVALID_HANDLE;
}

/* Drive both engines for ms milliseconds (requests stay as they are). */
static void drive_for(unit_pair_t *p, int ms)
{
    uint64_t end = unit_now_ms() + (uint64_t)ms;

    while (unit_now_ms() < end) {
        uccl_engine_progress(p->a);
        uccl_engine_progress(p->b);
    }
}

/* NMSG large messages sent before any receive, taken in reverse tag order.
 * The cap on unexpected bytes is 64 KiB: without rendezvous the first of
 * them already fails the receiver's connection with NO_MEMORY. */
static void test_held_as_headers(void)
{
    unit_fixture_t f;
    uccl_req_t *sends[NMSG] = {NULL}, *recvs[NMSG] = {NULL};
    int done = 1;

    UNIT_ASSERT_STATUS(unit_fixture_open("tcp", NMSG * (size_t)SIZE, NMSG * (size_t)SIZE, &f),
                       UCCL_OK);
    if (f.p.a == NULL)
        return;
    for (unsigned m = 0; m < NMSG; m++) {
        unit_fill(f.src + m * (size_t)SIZE, SIZE, m + 1);
        UNIT_ASSERT_STATUS(uccl_send(f.p.ab, f.src_mr, m * (size_t)SIZE, SIZE, m + 1, &sends[m]),
                           UCCL_OK);
    }
    drive_for(&f.p, 300);
    /* held as headers: the receiver's connection is fine, no send is done */
    UNIT_ASSERT_STATUS(conn_state(f.p.ba), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_test(sends[0], &done), UCCL_INPROGRESS);
    CU_ASSERT_EQUAL(done, 0);
    for (int m = NMSG - 1; m >= 0; m--)
        UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, (size_t)m * SIZE, SIZE, (uint64_t)m + 1,
                                     &recvs[m]),
                           UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, recvs, NMSG, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, sends, NMSG, 10000), UCCL_OK);
    for (unsigned m = 0; m < NMSG; m++) {
        size_t bytes = 0;

        UNIT_ASSERT_STATUS(uccl_wait(recvs[m], 0), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_wait(sends[m], 0), UCCL_OK);
        uccl_req_bytes(recvs[m], &bytes);
        CU_ASSERT_EQUAL(bytes, SIZE);
        CU_ASSERT_EQUAL(unit_mismatches(f.dst + m * (size_t)SIZE, SIZE, m + 1), 0);
        uccl_req_free(recvs[m]);
        uccl_req_free(sends[m]);
    }
    UNIT_ASSERT_STATUS(conn_state(f.p.ba), UCCL_OK);
    unit_fixture_close(&f);
}

/* A receive posted first takes the bytes straight; one too small fails
 * with TRUNCATED and the message waits, whole, for the next receive. */
static void test_posted_first_and_truncated(void)
{
    unit_fixture_t f;
    uccl_req_t *r[3] = {NULL}, *s[2] = {NULL};
    size_t bytes = 0;

    UNIT_ASSERT_STATUS(unit_fixture_open("tcp", 2 * (size_t)SIZE, 2 * (size_t)SIZE, &f), UCCL_OK);
    if (f.p.a == NULL)
        return;
    unit_fill(f.src, 2 * (size_t)SIZE, 9);
    /* posted first, then sent */
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, SIZE, 5, &r[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(f.p.ab, f.src_mr, 0, SIZE, 5, &s[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, r, 1, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(r[0], 0), UCCL_OK);
    CU_ASSERT_EQUAL(unit_mismatches(f.dst, SIZE, 9), 0);
    /* 2 x SIZE sent; a receive of SIZE is too small for it */
    memset(f.dst, 0, 2 * (size_t)SIZE);
    UNIT_ASSERT_STATUS(uccl_send(f.p.ab, f.src_mr, 0, 2 * (size_t)SIZE, 6, &s[1]), UCCL_OK);
    drive_for(&f.p, 100);
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, SIZE, 6, &r[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, &r[1], 1, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(r[1], 0), UCCL_ERR_TRUNCATED);
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, 2 * (size_t)SIZE, 6, &r[2]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, &r[2], 1, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, s, 2, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(r[2], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(s[1], 0), UCCL_OK);
    uccl_req_bytes(r[2], &bytes);
    CU_ASSERT_EQUAL(bytes, 2 * (size_t)SIZE);
    CU_ASSERT_EQUAL(unit_mismatches(f.dst, 2 * (size_t)SIZE, 9), 0);
    for (int i = 0; i < 3; i++)
        uccl_req_free(r[i]);
    for (int i = 0; i < 2; i++)
        uccl_req_free(s[i]);
    unit_fixture_close(&f);
}

/* The default threshold (UCCL_TCP_RNDV_MIN unset: 256K, coll13b's
 * measurement): a message of exactly 256 KiB sent before its receive is held
 * as a header (with 1M it went eagerly and failed the receiver's connection
 * at the 64 KiB cap), then lands intact. */
static void test_default_threshold(void)
{
    enum { DSIZE = 256 * 1024 };
    unit_fixture_t f;
    uccl_req_t *s = NULL, *r = NULL;
    int done = 1;

    unsetenv("UCCL_TCP_RNDV_MIN");
    UNIT_ASSERT_STATUS(unit_fixture_open("tcp", DSIZE, DSIZE, &f), UCCL_OK);
    setenv("UCCL_TCP_RNDV_MIN", "1M", 1);
    if (f.p.a == NULL)
        return;
    unit_fill(f.src, DSIZE, 7);
    UNIT_ASSERT_STATUS(uccl_send(f.p.ab, f.src_mr, 0, DSIZE, 3, &s), UCCL_OK);
    drive_for(&f.p, 300);
    UNIT_ASSERT_STATUS(conn_state(f.p.ba), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_test(s, &done), UCCL_INPROGRESS);
    CU_ASSERT_EQUAL(done, 0);
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, DSIZE, 3, &r), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, &r, 1, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, &s, 1, 10000), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(r, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(s, 0), UCCL_OK);
    CU_ASSERT_EQUAL(unit_mismatches(f.dst, DSIZE, 7), 0);
    uccl_req_free(r);
    uccl_req_free(s);
    UNIT_ASSERT_STATUS(conn_state(f.p.ba), UCCL_OK);
    unit_fixture_close(&f);
}

/* A value that is not a size is refused at engine creation. */
static void test_bad_setting(void)
{
    uccl_engine_t *e = NULL;

    setenv("UCCL_TCP_RNDV_MIN", "lots", 1);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &e), UCCL_ERR_INVALID_PARAM);
    if (e != NULL)
        uccl_engine_destroy(e);
    setenv("UCCL_TCP_RNDV_MIN", "1M", 1);
}

/* UCCL_TCP_PROGRESS_BYTES is per stream; a progress call's send budget is
 * that times the streams. 2^63 with 2 streams (a "no limit" value) wrapped
 * it to 0: nothing went out, not even the streams' hello, and the peer
 * dropped them (PEER_FAILED). Now the product saturates: a message goes. */
static void test_huge_progress_bytes(void)
{
    unit_fixture_t f;
    uccl_req_t *r[2] = {NULL, NULL};

    setenv("UCCL_TCP_PROGRESS_BYTES", "8589934592G", 1);
    setenv("UCCL_TCP_NUM_STREAMS", "2", 1);
    UNIT_ASSERT_STATUS(unit_fixture_open("tcp", 4096, 4096, &f), UCCL_OK);
    unsetenv("UCCL_TCP_PROGRESS_BYTES");
    unsetenv("UCCL_TCP_NUM_STREAMS");
    if (f.p.a == NULL)
        return;
    unit_fill(f.src, 4096, 9);
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, 4096, 4, &r[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(f.p.ab, f.src_mr, 0, 4096, 4, &r[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, r, 2, 5000), UCCL_OK);
    for (int i = 0; i < 2; i++) {
        UNIT_ASSERT_STATUS(uccl_wait(r[i], 0), UCCL_OK);
        uccl_req_free(r[i]);
    }
    CU_ASSERT_EQUAL(unit_mismatches(f.dst, 4096, 9), 0);
    unit_fixture_close(&f);
}

static CU_TestInfo tests[] = {
    {"large messages before their receives: held as headers, intact", test_held_as_headers},
    {"receive posted first; a receive too small: TRUNCATED, then taken",
     test_posted_first_and_truncated},
    {"default threshold: 256 KiB before its receive is held as a header", test_default_threshold},
    {"UCCL_TCP_RNDV_MIN that is not a size: INVALID_PARAM", test_bad_setting},
    {"UCCL_TCP_PROGRESS_BYTES 2^63, 2 streams: a message goes", test_huge_progress_bytes},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"tcp_rndv", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "10000", 1);
    setenv("UCCL_UNEXPECTED_MAX", "64K", 1);
    setenv("UCCL_TCP_RNDV_MIN", "1M", 1);
    return unit_main(suites);
}

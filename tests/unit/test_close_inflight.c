/* uccl_conn_close and uccl_engine_destroy with requests in flight (issue
 * 20), over shm and tcp: the closing side's requests complete with
 * UCCL_ERR_CANCELED, the peer's fail with UCCL_ERR_PEER_FAILED (none hangs),
 * and once close returns nothing lands in the closing side's buffers any
 * more, however long the peer keeps going. ASan checks that nothing leaks. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define BIG (64u << 20)
#define AFTER_MS 300

typedef struct side {
    uint8_t *buf;
    uccl_mr_t *mr;
} side_t;

static void side_open(uccl_engine_t *e, side_t *s, unsigned seed)
{
    s->buf = malloc(BIG);
    CU_ASSERT_FATAL(s->buf != NULL);
    unit_fill(s->buf, BIG, seed);
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, s->buf, BIG, 0, &s->mr), UCCL_OK);
}

static void side_close(side_t *s)
{
    if (s->mr != NULL)
        UNIT_ASSERT_STATUS(uccl_mr_dereg(s->mr), UCCL_OK);
    free(s->buf);
}

/* Drive both engines (either may be NULL) until some bytes moved: a few
 * rounds, so that the transfer is under way but not done. */
static void start(unit_pair_t *p, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        uccl_engine_progress(p->a);
        uccl_engine_progress(p->b);
    }
}

/* Keep the surviving engine going for a while; buf must keep seed's bytes. */
static size_t landed_after(uccl_engine_t *survivor, uccl_req_t **reqs, size_t n, side_t *s,
                           unsigned seed)
{
    uint64_t end = unit_now_ms() + AFTER_MS;

    unit_fill(s->buf, BIG, seed);
    while (unit_now_ms() < end) {
        uccl_engine_progress(survivor);
        for (size_t i = 0; i < n; i++) {
            int done;
            if (reqs[i] != NULL)
                uccl_test(reqs[i], &done);
        }
    }
    return unit_mismatches(s->buf, BIG, seed);
}

static uccl_status_t final_status(uccl_engine_t *e, uccl_req_t *req)
{
    uccl_status_t st = uccl_wait(req, UNIT_TIMEOUT_MS + 1000);
    (void)e;
    return st;
}

/* The receiver closes while a large send is coming in. */
static void test_close_receiver(void)
{
    for (int round = 0; round < 2; round++) {
        unit_pair_t p;
        side_t src = {0}, dst = {0};
        uccl_req_t *send = NULL, *recv = NULL, *other = NULL;

        UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
        if (p.a == NULL)
            return;
        side_open(p.a, &src, 1);
        side_open(p.b, &dst, 2);
        UNIT_ASSERT_STATUS(uccl_recv(p.ba, dst.mr, 0, BIG, 7, &recv), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_recv(p.ba, dst.mr, 0, 64, 8, &other), UCCL_OK); /* never sent */
        UNIT_ASSERT_STATUS(uccl_send(p.ab, src.mr, 0, BIG, 7, &send), UCCL_OK);
        start(&p, round);
        UNIT_ASSERT_STATUS(uccl_conn_close(p.ba), UCCL_OK);
        /* the receiver's requests: canceled, right away */
        UNIT_ASSERT_STATUS(uccl_wait(other, 0), UCCL_ERR_CANCELED);
        {
            uccl_status_t st = uccl_wait(recv, 0);
            /* 64 MiB do not move in one bounded round of progress */
            CU_ASSERT(st == UCCL_ERR_CANCELED || (round > 0 && st == UCCL_OK));
        }
        CU_ASSERT_EQUAL(landed_after(p.a, &send, 1, &dst, 3), 0);
        /* the sender's: done or failed, never hanging */
        {
            uccl_status_t st = final_status(p.a, send);
            CU_ASSERT(st == UCCL_OK || st == UCCL_ERR_PEER_FAILED);
        }
        uccl_req_free(send);
        uccl_req_free(recv);
        uccl_req_free(other);
        side_close(&src);
        side_close(&dst);
        unit_pair_close(&p);
    }
}

/* The initiator of a write and of a read closes mid-transfer: its requests
 * are canceled; the read's destination gets nothing after close. */
static void test_close_initiator(void)
{
    for (int rd = 0; rd < 2; rd++) {
        unit_pair_t p;
        side_t loc = {0}, rem = {0};
        uccl_rdesc_t d;
        uccl_req_t *req = NULL, *none = NULL;

        UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
        if (p.a == NULL)
            return;
        side_open(p.a, &loc, 4);
        side_open(p.b, &rem, 5);
        UNIT_ASSERT_STATUS(uccl_mr_pack(rem.mr, 0, BIG, &d), UCCL_OK);
        if (rd)
            UNIT_ASSERT_STATUS(uccl_read(p.ab, loc.mr, 0, BIG, &d, 0, &req), UCCL_OK);
        else
            UNIT_ASSERT_STATUS(uccl_write(p.ab, loc.mr, 0, BIG, &d, 0, &req), UCCL_OK);
        start(&p, 1);
        UNIT_ASSERT_STATUS(uccl_conn_close(p.ab), UCCL_OK);
        {
            uccl_status_t st = uccl_wait(req, 0);
            CU_ASSERT_EQUAL(st, UCCL_ERR_CANCELED);
        }
        CU_ASSERT_EQUAL(landed_after(p.b, &none, 0, &loc, 6), 0);
        uccl_req_free(req);
        side_close(&loc);
        side_close(&rem);
        unit_pair_close(&p);
    }
}

/* The engine goes with everything in flight: the peer's requests fail
 * within the timeout, nothing lands in the destroyed engine's buffers. */
static void test_destroy_engine(void)
{
    unit_pair_t p;
    side_t a = {0}, b = {0};
    uccl_rdesc_t da;
    uccl_req_t *ra[4] = {NULL}, *rb[2] = {NULL};
    uint8_t *abuf;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    side_open(p.a, &a, 7);
    side_open(p.b, &b, 8);
    UNIT_ASSERT_STATUS(uccl_mr_pack(a.mr, 0, BIG, &da), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(p.ab, a.mr, 0, BIG / 2, 1, &ra[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, a.mr, BIG / 2, BIG / 2, 2, &ra[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(p.ba, b.mr, 0, BIG / 2, 1, &rb[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_write(p.ba, b.mr, BIG / 2, BIG / 2, &da, 0, &rb[1]), UCCL_OK);
    start(&p, 10);
    /* the requests go with the engine (their handles with it): keep the
     * buffer, forget the region handle */
    uccl_req_free(ra[0]);
    uccl_req_free(ra[1]);
    UNIT_ASSERT_STATUS(uccl_engine_destroy(p.a), UCCL_OK);
    p.a = NULL;
    a.mr = NULL;
    abuf = a.buf;
    CU_ASSERT_EQUAL(landed_after(p.b, rb, 2, &a, 9), 0);
    for (int i = 0; i < 2; i++) {
        uccl_status_t st = final_status(p.b, rb[i]);
        CU_ASSERT(st == UCCL_OK || st == UCCL_ERR_PEER_FAILED);
        uccl_req_free(rb[i]);
    }
    (void)abuf;
    side_close(&a);
    side_close(&b);
    unit_pair_close(&p);
}


static CU_TestInfo cases[] = {
    {"receiver closes mid-send", test_close_receiver},
    {"initiator closes mid-write / mid-read", test_close_initiator},
    {"engine destroyed with requests in flight", test_destroy_engine},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", "1500", 0); /* the peer's failures come within it */
    return unit_main_tp("close_inflight", cases, NULL, NULL);
}

/* Edge cases of t_p2p: many requests in flight per peer, truncated
 * receives, stale descriptors and out-of-range remote offsets. */
#include "p2p_edge.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { TAG_MANY = 21, TAG_TRUNC = 22 };
#define MANY 256
#define MANY_LEN 1000
#define MANY_STRIDE 1024
#define TRUNC_LEN 1000

static mt_layout_t slot(size_t i, size_t base)
{
    return (mt_layout_t){.base = base + i * MANY_STRIDE, .parts = 1, .gap = 0};
}

/* 256 sends (or writes) per peer, all posted before any is waited for. */
static void many_in_flight(mt_ctx_t *c, int use_write)
{
    size_t nreq = (size_t)MANY * 2 * (size_t)c->size, n = 0;
    uccl_req_t **reqs = calloc(nreq, sizeof(*reqs));
    size_t rbase = use_write ? 1 : 0;
    int salt = use_write ? 2000 : 1000;

    for (int q = 0; q < c->size; q++) {
        for (size_t i = 0; q != c->rank && i < MANY; i++) {
            mt_fill(c->src[q], slot(i, 0), MANY_LEN, mt_seed(c->rank, q, i, salt));
            mt_poison(c->dst[q], slot(i, rbase), MANY_LEN, mt_seed(q, c->rank, i, salt));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int q = 0; q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        for (size_t i = 0; q != c->rank && i < MANY; i++) {
            size_t off = i * MANY_STRIDE;
            if (use_write) {
                mt_expect(c, uccl_write(conn, c->src_mr[q], off, MANY_LEN, &c->peer_dst[q],
                                        off + rbase, &reqs[n++]), UCCL_OK, "uccl_write");
                continue;
            }
            mt_expect(c, uccl_recv(conn, c->dst_mr[q], off, MANY_STRIDE, TAG_MANY, &reqs[n++]),
                      UCCL_OK, "uccl_recv");
            mt_expect(c, uccl_send(conn, c->src_mr[q], off, MANY_LEN, TAG_MANY, &reqs[n++]),
                      UCCL_OK, "uccl_send");
        }
    }
    mt_wait(c, reqs, (int)n, UCCL_OK, use_write ? "256 writes per peer" : "256 sends per peer");
    mt_uccl_barrier(c);
    for (int q = 0; q < c->size; q++) {
        for (size_t i = 0; q != c->rank && i < MANY; i++) {
            if (mt_check(c, c->dst[q], slot(i, rbase), MANY_LEN, mt_seed(q, c->rank, i, salt),
                         use_write ? "write in a crowd" : "message in a crowd (posting order)"))
                c->failed = 1;
        }
    }
    free(reqs);
}

/* A receive smaller than the message fails with TRUNCATED and loses
 * nothing: the next, larger receive gets the whole message. */
static void truncation(mt_ctx_t *c)
{
    const mt_layout_t whole = {0, 1, 0};

    for (int q = 0; q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        uccl_req_t *send = NULL, *small = NULL, *big = NULL;
        uccl_status_t st;
        size_t bytes = 0;

        if (q == c->rank)
            continue;
        mt_fill(c->src[q], whole, TRUNC_LEN, mt_seed(c->rank, q, TRUNC_LEN, 3000));
        mt_poison(c->dst[q], whole, TRUNC_LEN, mt_seed(q, c->rank, TRUNC_LEN, 3000));
        mt_expect(c, uccl_send(conn, c->src_mr[q], 0, TRUNC_LEN, TAG_TRUNC, &send), UCCL_OK,
                  "uccl_send");
        st = uccl_recv(conn, c->dst_mr[q], 0, TRUNC_LEN / 2, TAG_TRUNC, &small);
        if (st == UCCL_OK) {
            st = uccl_wait(small, -1);
            uccl_req_free(small);
        }
        mt_expect(c, st, UCCL_ERR_TRUNCATED, "receive smaller than the message");
        mt_poison(c->dst[q], whole, TRUNC_LEN, mt_seed(q, c->rank, TRUNC_LEN, 3000));
        mt_expect(c, uccl_recv(conn, c->dst_mr[q], 0, 2 * TRUNC_LEN, TAG_TRUNC, &big), UCCL_OK,
                  "uccl_recv");
        st = big ? uccl_wait(big, -1) : UCCL_ERR_INVALID_HANDLE;
        mt_expect(c, st, UCCL_OK, "larger receive after the truncated one");
        if (st == UCCL_OK && (uccl_req_bytes(big, &bytes) != UCCL_OK || bytes != TRUNC_LEN))
            mt_fail(c, "larger receive got %zu bytes, expected %d", bytes, TRUNC_LEN);
        if (st == UCCL_OK && mt_check(c, c->dst[q], whole, TRUNC_LEN,
                                      mt_seed(q, c->rank, TRUNC_LEN, 3000), "after truncation"))
            c->failed = 1;
        uccl_req_free(big);
        mt_wait(c, &send, 1, UCCL_OK, "the truncated message's send");
    }
}

/* Post with a descriptor the conn must refuse; a request that gets through
 * is waited for and counted as a failure. */
static void expect_refused(mt_ctx_t *c, uccl_conn_t *conn, int do_read, uccl_mr_t *mr,
                           size_t len, const uccl_rdesc_t *desc, size_t roff,
                           uccl_status_t want, const char *what)
{
    uccl_req_t *req = NULL;
    uccl_status_t st = do_read ? uccl_read(conn, mr, 0, len, desc, roff, &req)
                               : uccl_write(conn, mr, 0, len, desc, roff, &req);
    mt_expect(c, st, want, what);
    if (st == UCCL_OK) {
        uccl_wait(req, -1);
        uccl_req_free(req);
    }
}

static void stale(mt_ctx_t *c)
{
    uccl_engine_t *other = NULL;
    uccl_mr_t *other_mr = NULL;
    uccl_rdesc_t own, foreign;
    static uint8_t other_buf[4096];

    if (uccl_engine_create(NULL, &other) != UCCL_OK ||
        uccl_mr_reg(other, other_buf, sizeof(other_buf), 0, &other_mr) != UCCL_OK ||
        uccl_mr_pack(other_mr, 0, sizeof(other_buf), &foreign) != UCCL_OK) {
        mt_fail(c, "setting up a second engine");
        goto out;
    }
    for (int q = 0; q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        if (q == c->rank)
            continue;
        uccl_mr_pack(c->dst_mr[q], 0, 64, &own);
        expect_refused(c, conn, 0, c->src_mr[q], 8, &foreign, 0, UCCL_ERR_STALE,
                       "write with another engine's descriptor");
        expect_refused(c, conn, 1, c->dst_mr[q], 8, &foreign, 0, UCCL_ERR_STALE,
                       "read with another engine's descriptor");
        expect_refused(c, conn, 0, c->src_mr[q], 8, &own, 0, UCCL_ERR_STALE,
                       "write with my own descriptor to a peer");
        for (int r = 0; r < c->size; r++) {
            if (r != q && r != c->rank)
                expect_refused(c, conn, 0, c->src_mr[q], 8, &c->peer_dst[r], 0, UCCL_ERR_STALE,
                               "write with a third rank's descriptor");
        }
    }
out:
    if (other_mr != NULL)
        uccl_mr_dereg(other_mr);
    if (other != NULL)
        uccl_engine_destroy(other);
}

static void out_of_bounds(mt_ctx_t *c)
{
    size_t len = c->buf_len;

    for (int q = 0; q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        uccl_req_t *req = NULL;
        if (q == c->rank)
            continue;
        expect_refused(c, conn, 0, c->src_mr[q], 20, &c->peer_dst[q], len - 10,
                       UCCL_ERR_OUT_OF_BOUNDS, "write across the end of the range");
        expect_refused(c, conn, 1, c->dst_mr[q], 0, &c->peer_src[q], len + 1,
                       UCCL_ERR_OUT_OF_BOUNDS, "read starting past the range");
        expect_refused(c, conn, 0, c->src_mr[q], 10, &c->peer_dst[q], SIZE_MAX - 5,
                       UCCL_ERR_OUT_OF_BOUNDS, "write with a wrapping offset");
        mt_expect(c, uccl_send(conn, c->src_mr[q], len - 4, 8, TAG_TRUNC, &req),
                  UCCL_ERR_OUT_OF_BOUNDS, "send past the end of the local region");
        if (req != NULL)
            uccl_req_free(req);
    }
}

int p2p_edge_run(mt_ctx_t *c)
{
    int failures = 0;

    many_in_flight(c, 0);
    failures += mt_report(c, "256 sends in flight per peer, matched in posting order");
    many_in_flight(c, 1);
    failures += mt_report(c, "256 writes in flight per peer");
    truncation(c);
    mt_uccl_barrier(c);
    failures += mt_report(c, "truncated receive, message kept for the next one");
    stale(c);
    failures += mt_report(c, "stale descriptors refused (UCCL_ERR_STALE)");
    out_of_bounds(c);
    failures += mt_report(c, "out-of-range offsets refused (UCCL_ERR_OUT_OF_BOUNDS)");
    return failures;
}

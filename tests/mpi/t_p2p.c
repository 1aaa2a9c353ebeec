/* MPI test of every point-to-point operation between all pairs of ranks, at
 * sizes around page and chunk boundaries, bytes checked with a pattern that
 * depends on sender, receiver, size and offset. The transport comes from
 * UCCL_TRANSPORTS (set by the script). Reads that the transport refuses with
 * UCCL_ERR_UNSUPPORTED on every rank (verbs with UC QPs) are reported as
 * skipped, not failed. Usage: t_p2p [--max-size BYTES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_test.h"
#include "p2p_edge.h"

typedef enum { OP_SEND, OP_SENDV, OP_WRITE, OP_WRITEV, OP_READ, OP_READV, OP_NOTIFY } op_t;

typedef struct op_desc {
    op_t op;
    const char *name;
    mt_layout_t src; /* where the data lies on the rank that owns it */
    mt_layout_t dst; /* where it must land */
    int zero_ok;     /* meaningful at size 0 */
} op_desc_t;

/* Remote ranges start at an odd offset (1) so nothing relies on alignment. */
static const op_desc_t ops[] = {
    {OP_SEND, "send/recv", {0, 1, 0}, {0, 1, 0}, 1},
    {OP_SENDV, "sendv/recvv", {0, 3, 7}, {0, 5, 3}, 1},
    {OP_WRITE, "write", {0, 1, 0}, {1, 1, 0}, 0},
    {OP_WRITEV, "writev", {0, 3, 7}, {1, 1, 0}, 0},
    {OP_READ, "read", {1, 1, 0}, {0, 1, 0}, 0},
    {OP_READV, "readv", {1, 1, 0}, {0, 4, 5}, 0},
    {OP_NOTIFY, "write_notify", {0, 1, 0}, {1, 1, 0}, 0},
};

enum { TAG_DATA = 11 };
#define EDGE_BUF_MIN (256u * 1024u + 4096u) /* p2p_edge's 256 slots of 1 KiB per peer */
#define RECV_SLACK 16 /* receives are posted larger than the message */

static uint64_t notif_value(int from, int size_index)
{
    return 0xabc0000000000000ull | ((uint64_t)from << 16) | (uint64_t)size_index;
}

/* A read the transport refuses as unsupported (UC QPs carry no reads) is
 * noted in *unsupported instead of failing; any other status must be OK. */
static void expect_read_posted(mt_ctx_t *c, uccl_status_t st, int *unsupported, const char *what)
{
    if (st == UCCL_ERR_UNSUPPORTED)
        *unsupported = 1;
    else
        mt_expect(c, st, UCCL_OK, what);
}

/* Post the transfer(s) between me and peer q for one op; returns how many
 * requests it added at reqs. */
static int post_pair(mt_ctx_t *c, const op_desc_t *d, int q, size_t len, int size_index,
                     uccl_req_t **reqs, int *unsupported)
{
    uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
    uccl_iov_t iov[8];
    int n = 0, cnt;

    switch (d->op) {
    case OP_SEND:
        mt_expect(c, uccl_recv(conn, c->dst_mr[q], 0, len + RECV_SLACK, TAG_DATA, &reqs[n++]),
                  UCCL_OK, "uccl_recv");
        mt_expect(c, uccl_send(conn, c->src_mr[q], 0, len, TAG_DATA, &reqs[n++]), UCCL_OK,
                  "uccl_send");
        break;
    case OP_SENDV:
        cnt = mt_iov(iov, c->dst_mr[q], d->dst, len);
        mt_expect(c, uccl_recvv(conn, iov, cnt, TAG_DATA, &reqs[n++]), UCCL_OK, "uccl_recvv");
        cnt = mt_iov(iov, c->src_mr[q], d->src, len);
        mt_expect(c, uccl_sendv(conn, iov, cnt, TAG_DATA, &reqs[n++]), UCCL_OK, "uccl_sendv");
        break;
    case OP_WRITE:
        mt_expect(c, uccl_write(conn, c->src_mr[q], 0, len, &c->peer_dst[q], 1, &reqs[n++]),
                  UCCL_OK, "uccl_write");
        break;
    case OP_WRITEV:
        cnt = mt_iov(iov, c->src_mr[q], d->src, len);
        mt_expect(c, uccl_writev(conn, iov, cnt, &c->peer_dst[q], 1, &reqs[n++]), UCCL_OK,
                  "uccl_writev");
        break;
    case OP_READ:
        expect_read_posted(c, uccl_read(conn, c->dst_mr[q], 0, len, &c->peer_src[q], 1, &reqs[n++]),
                           unsupported, "uccl_read");
        break;
    case OP_READV:
        cnt = mt_iov(iov, c->dst_mr[q], d->dst, len);
        expect_read_posted(c, uccl_readv(conn, iov, cnt, &c->peer_src[q], 1, &reqs[n++]),
                           unsupported, "uccl_readv");
        break;
    case OP_NOTIFY:
        mt_expect(c, uccl_write_notify(conn, c->src_mr[q], 0, len, &c->peer_dst[q], 1,
                                       notif_value(c->rank, size_index), &reqs[n++]),
                  UCCL_OK, "uccl_write_notify");
        break;
    }
    /* A failed post leaves NULL behind; mt_wait skips it. */
    return n;
}

/* Receives must report the message length, not the posted one. */
static void check_recv_bytes(mt_ctx_t *c, uccl_req_t *req, size_t len)
{
    size_t bytes = 0;

    if (req == NULL)
        return;
    if (uccl_wait(req, -1) == UCCL_OK && uccl_req_bytes(req, &bytes) == UCCL_OK && bytes != len)
        mt_fail(c, "receive of a %zu-byte message reports %zu bytes", len, bytes);
}

/* Poll each peer's notification; the data must be there once it is seen. */
static void await_notifs(mt_ctx_t *c, const op_desc_t *d, size_t len, int size_index)
{
    for (int q = 0; q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        uccl_status_t st;
        uint64_t value = 0;
        time_t deadline = time(NULL) + 60;

        if (q == c->rank)
            continue;
        while ((st = uccl_notif_poll(conn, &value)) == UCCL_ERR_NOT_FOUND && time(NULL) < deadline)
            ;
        mt_expect(c, st, UCCL_OK, "uccl_notif_poll");
        if (st == UCCL_OK && value != notif_value(q, size_index))
            mt_fail(c, "notification from rank %d: %#llx, expected %#llx", q,
                    (unsigned long long)value, (unsigned long long)notif_value(q, size_index));
        if (st == UCCL_OK && mt_check(c, c->dst[q], d->dst, len, mt_seed(q, c->rank, len, d->op),
                                      "data at notification time") != 0)
            c->failed = 1;
    }
}

/* Runs one case; returns 1 when every rank's transport refused it as
 * unsupported (nothing to check then), else 0. */
static int run_case(mt_ctx_t *c, const op_desc_t *d, size_t len, int size_index)
{
    uccl_req_t **reqs = calloc(2 * (size_t)c->size, sizeof(*reqs));
    int n = 0, unsupported = 0, all_unsupported = 0;

    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        mt_fill(c->src[q], d->src, len, mt_seed(c->rank, q, len, d->op));
        mt_poison(c->dst[q], d->dst, len, mt_seed(q, c->rank, len, d->op));
    }
    MPI_Barrier(MPI_COMM_WORLD); /* every source filled, every target poisoned */
    for (int q = 0; q < c->size; q++) {
        if (q != c->rank)
            n += post_pair(c, d, q, len, size_index, &reqs[n], &unsupported);
    }
    MPI_Allreduce(&unsupported, &all_unsupported, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (unsupported && !all_unsupported)
        mt_fail(c, "%s refused as unsupported here but not on every rank", d->name);
    if (d->op == OP_SEND)
        for (int i = 0; i < n; i += 2)
            check_recv_bytes(c, reqs[i], len);
    if (d->op == OP_NOTIFY)
        await_notifs(c, d, len, size_index);
    mt_wait(c, reqs, n, UCCL_OK, d->name);
    mt_uccl_barrier(c); /* every peer's transfers into me are complete */
    for (int q = 0; q < c->size && !unsupported; q++) {
        if (q != c->rank && mt_check(c, c->dst[q], d->dst, len, mt_seed(q, c->rank, len, d->op),
                                     d->name) != 0)
            c->failed = 1;
    }
    free(reqs);
    return all_unsupported;
}

/* Rank 0 prints why a case was skipped, as a "SKIP: " line that
 * tests/driver.sh and tests/rxe/check.sh count; all ranks agree that it was. */
static void report_skip(mt_ctx_t *c, const char *name)
{
    if (c->rank == 0) {
        printf("SKIP: %s [%s, np %d]: reads need RC (the transport answered "
               "UCCL_ERR_UNSUPPORTED)\n", name, c->transport, c->size);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    /* the last size is the large case: --max-size sets it (and drops the sizes above) */
    size_t sizes[] = {0, 1, 4095, 4096, 65537, 1u << 20, (64u << 20) + 3};
    size_t max_size = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    mt_ctx_t c;
    int failures = 0, rc;
    char name[96];

    MPI_Init(&argc, &argv);
    if (argc == 3 && strcmp(argv[1], "--max-size") == 0)
        max_size = strtoull(argv[2], NULL, 0);
    if (max_size > (1u << 20)) { /* odd on purpose: the last chunk is a partial one */
        max_size |= 3;
        sizes[sizeof(sizes) / sizeof(sizes[0]) - 1] = max_size;
    }
    /* the edge cases need room for their 256 slots even when max_size is small */
    rc = mt_init(&c, (max_size > EDGE_BUF_MIN ? max_size : EDGE_BUF_MIN) + 4096);
    for (size_t s = 0; rc == 0 && s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        if (sizes[s] > max_size)
            continue;
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            if (sizes[s] == 0 && !ops[o].zero_ok)
                continue;
            int skipped = run_case(&c, &ops[o], sizes[s], (int)s), any_failed = 0;
            snprintf(name, sizeof(name), "%s size %zu", ops[o].name, sizes[s]);
            MPI_Allreduce(&c.failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (skipped && !any_failed)
                report_skip(&c, name);
            else
                failures += mt_report(&c, name);
        }
    }
    if (rc == 0)
        failures += p2p_edge_run(&c);
    mt_fini(&c);
    MPI_Finalize();
    if (rc != 0)
        return rc;
    return failures ? 1 : 0;
}

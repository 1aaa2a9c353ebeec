/* perf_ofi: libfabric measured raw next to libuccl over its ofi transport,
 * same provider, same job, same pattern (a window of transfers, then wait
 * for all), and the UCCL CXI seed's pattern: 1,179,648 bytes written as
 * 1, 8, 32, 128 and 512 adjacent remote pieces, against the same bytes in
 * one piece; the same as every other block (scattered).
 * And the same bytes from n local pieces (at most UCCL_IOV_MAX) into one
 * remote range, where libuccl may pack the pieces (UCCL_OFI_PACK_BELOW).
 * And send's parts: raw send next to the rendezvous built from raw
 * operations (RTS then the data; RTS, CTS, write with CQ data) and uccl's;
 * and raw send with 1 or 4 receives posted at a time (depth).
 *   mpirun -np 2 perf_ofi [--provider P] [--window W]
 *                         [--ops write,read,send,sendv,seed,scatter,local,parts,depth]
 *                         (sendv: send's bytes in 3 pieces into 3, 4 KiB apart;
 *                          each name matched whole)
 *                         [--repeat R]   (R alternated runs per side, median kept; seed rows
 *                                         also time uccl's 1 piece in each round; op rows:
 *                                         R pairs, the order flipped every pair, see op_row)
 *                         [--sizes 65536,262144]  (op rows' sizes; default 64K,256K,1M,4M)
 *                         [--dump 1]     (op rows: each pair's times as "#pair" lines)
 *                         [--phases 1]   (op rows: "#phase" lines, perf_ofi_phase.c)
 * P goes to UCCL_OFI_PROVIDER too (default "tcp;ofi_rxm"). Rank 0 prints one
 * table; every figure is GB/s (1e9 bytes/s) of rank 0's wall time.
 * A benchmark tool, not a test: errors abort the job with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl_mpi.h>

#include "perf_ofi.h"

static const char *op_names[] = {"write", "read", "send", "sendv"};

/* Where piece i of n lies in the remote buffer (and, for raw, the local
 * one): the seed's layout, adjacent pieces; or every other block. */
static size_t piece_off(int i, size_t piece, int scattered)
{
    return scattered ? (size_t)i * piece * 2 % (BUF_SIZE - piece) : (size_t)i * piece;
}

/* SEED_BYTES from one contiguous local slice into n remote pieces, raw:
 * adjacent ones (the seed's pattern) one fi_writemsg each, as the seed
 * does; every other block at raw's best, one fi_writemsg of up to
 * rma_iov_limit (at most 16) pieces. */
static double raw_pieces(raw_t *r, int n, int iters, int scattered)
{
    static struct fi_context2 ctx[512];
    size_t piece = SEED_BYTES / (size_t)n, lim = r->info->tx_attr->rma_iov_limit;
    struct fi_rma_iov rma[16];
    double t0;

    lim = !scattered || lim < 1 ? 1 : lim > 16 ? 16 : lim;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters && r->rank == 0; it++) {
        int ops = 0;

        for (int i = 0; i < n; i += (int)lim, ops++) {
            size_t cnt = (size_t)(n - i) < lim ? (size_t)(n - i) : lim;
            struct iovec iov = {r->buf + (size_t)i * piece, cnt * piece};
            struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &r->desc, .iov_count = 1,
                                     .addr = r->peer, .rma_iov = rma, .rma_iov_count = cnt,
                                     .context = &ctx[ops]};

            for (size_t j = 0; j < cnt; j++)
                rma[j] = (struct fi_rma_iov){
                    r->peer_addr + piece_off(i + (int)j, piece, scattered), piece, r->peer_key};
            raw_writemsg(r, &msg);
        }
        raw_wait(r, ops);
    }
    raw_done(r, &ctx[0]);
    return now_s() - t0;
}

/* The seed's bytes from n scattered local pieces into one remote range,
 * raw: fi_writemsg of up to iov_limit local pieces each. */
static double raw_seed_local(raw_t *r, int n, int iters, int unused)
{
    static struct fi_context2 ctx[512];
    size_t piece = SEED_BYTES / (size_t)n, lim = r->info->tx_attr->iov_limit;
    struct iovec iov[64];
    void *desc[64];
    double t0;

    (void)unused;
    if (lim > 64)
        lim = 64;
    for (int i = 0; i < n; i++) {
        iov[i] = (struct iovec){r->buf + (size_t)i * piece * 2 % (BUF_SIZE - piece), piece};
        desc[i] = r->desc;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters && r->rank == 0; it++) {
        int ops = 0;

        for (int i = 0; i < n; i += (int)lim, ops++) {
            size_t cnt = (size_t)(n - i) < lim ? (size_t)(n - i) : lim;
            struct fi_rma_iov rma = {r->peer_addr + (size_t)i * piece, cnt * piece, r->peer_key};
            struct fi_msg_rma msg = {.msg_iov = &iov[i], .desc = &desc[i], .iov_count = cnt,
                                     .addr = r->peer, .rma_iov = &rma, .rma_iov_count = 1,
                                     .context = &ctx[ops]};

            raw_writemsg(r, &msg);
        }
        raw_wait(r, ops);
    }
    raw_done(r, &ctx[0]);
    return now_s() - t0;
}

#define MAX_REPEAT 63
#define MAX_SIZES 8

/* Sorts v (n values). */
static void sort_values(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* The median of n run times (n <= MAX_REPEAT; sorts v). */
static double median(double *v, int n)
{
    sort_values(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Quantile q (0..1) of sorted v, linearly interpolated. */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;

    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* "65536,262144": up to MAX_SIZES byte counts of 1..BUF_SIZE; how many, or
 * 0 if one is not such a number. */
static int parse_sizes(const char *arg, size_t *sizes)
{
    int n = 0;

    for (const char *p = arg; *p != '\0' && n < MAX_SIZES; n++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);

        if (end == p || v < 1 || v > BUF_SIZE || (*end != ',' && *end != '\0'))
            return 0;
        sizes[n] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* ------------------------------------------------------------------ uccl */

typedef struct ucc {
    uccl_comm_t *comm;
    uccl_conn_t *conn;
    uccl_mr_t *mr;
    uccl_rdesc_t peer;
    uint8_t *buf;
    int rank;
} ucc_t;

/* Whether the comma-separated list ops names op (whole names: "sendv" is
 * not "send"). */
static int has_op(const char *ops, const char *op)
{
    size_t n = strlen(op);

    for (const char *p = ops; (p = strstr(p, op)) != NULL; p += n)
        if ((p == ops || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

static void ucheck(int rank, const char *what, uccl_status_t st)
{
    if (st != UCCL_OK) {
        fprintf(stderr, "perf_ofi rank %d: %s: %s\n", rank, what, uccl_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void ucc_fin(ucc_t *u)
{
    uccl_req_t *req;

    if (u->rank == 0)
        ucheck(u->rank, "fin", uccl_send(u->conn, NULL, 0, 0, 3, &req));
    else
        ucheck(u->rank, "fin", uccl_recv(u->conn, NULL, 0, 0, 3, &req));
    ucheck(u->rank, "fin", uccl_wait(req, -1));
    uccl_req_free(req);
}

static double ucc_run(ucc_t *u, int op, size_t len, int window, int iters)
{
    uccl_req_t *reqs[MAX_WINDOW + 1];
    uccl_iov_t iov[SENDV_PIECES];
    double t0;

    for (int j = 0; j < SENDV_PIECES; j++) {
        iov[j].mr = u->mr;
        iov[j].off = sendv_piece(len, j, &iov[j].len);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters; it++) {
        bool ph = phase_on && (u->rank == 0 || op >= OP_SEND);
        int n = 0;

        if (ph)
            phase_begin(1);
        if (u->rank == 0) {
            for (int i = 0; i < window; i++, n++)
                ucheck(0, op_names[op],
                       op == OP_WRITE  ? uccl_write(u->conn, u->mr, 0, len, &u->peer, 0, &reqs[n])
                       : op == OP_READ ? uccl_read(u->conn, u->mr, 0, len, &u->peer, 0, &reqs[n])
                       : op == OP_SEND ? uccl_send(u->conn, u->mr, 0, len, 1, &reqs[n])
                                       : uccl_sendv(u->conn, iov, SENDV_PIECES, 1, &reqs[n]));
            if (op >= OP_SEND)
                ucheck(0, "ack", uccl_recv(u->conn, NULL, 0, 0, 2, &reqs[n++]));
            if (ph)
                phase_mark(1, PH_POST);
        } else if (op >= OP_SEND) {
            for (int i = 0; i < window; i++, n++)
                ucheck(1, "recv",
                       op == OP_SEND ? uccl_recv(u->conn, u->mr, 0, len, 1, &reqs[n])
                                     : uccl_recvv(u->conn, iov, SENDV_PIECES, 1, &reqs[n]));
            if (ph)
                phase_mark(1, PH_POST);
            ucheck(1, "wait", uccl_wait_all(reqs, (size_t)n, -1));
            if (ph)
                phase_mark(1, PH_WAIT);
            for (int i = 0; i < n; i++)
                uccl_req_free(reqs[i]);
            n = 0;
            ucheck(1, "ack", uccl_send(u->conn, NULL, 0, 0, 2, &reqs[n++]));
        }
        if (n > 0)
            ucheck(u->rank, "wait", uccl_wait_all(reqs, (size_t)n, -1));
        if (ph && u->rank == 0)
            phase_mark(1, PH_WAIT);
        for (int i = 0; i < n; i++)
            uccl_req_free(reqs[i]);
        if (ph)
            phase_mark(1, PH_TAIL);
    }
    if (op < OP_SEND)
        ucc_fin(u);
    return now_s() - t0;
}

/* One op row: raw and uccl on the same bytes (op, len, window, the same
 * runs' length), each after one warm-up run of that length, then `pairs`
 * pairs of runs, raw first in even pairs and uccl first in odd ones (so
 * that neither always follows the other). Printed: each side's median run
 * as GB/s, the ratio of those medians (raw time / uccl time), and the
 * median and quartiles of the pairs' own ratios: one job's uccl / raw and
 * how far its pairs scatter (raw alone moves between jobs on shm, so a
 * pair's ratio is the figure that compares like with like). dump: each
 * pair's times too, as "#pair" lines. */
static void op_row(raw_t *r, ucc_t *u, int op, size_t len, int window, int pairs, int dump)
{
    int iters = (int)((64u << 20) / (len * (size_t)window));
    double tr[MAX_REPEAT], tu[MAX_REPEAT], ratio[MAX_REPEAT], bytes, mr, mu, mp;

    if (iters < 3)
        iters = 3;
    raw_run(r, op, len, window, iters); /* warm-up, the same for both */
    ucc_run(u, op, len, window, iters);
    for (int k = 0; k < pairs; k++) {
        if (k % 2 == 0) {
            tr[k] = raw_run(r, op, len, window, iters);
            tu[k] = ucc_run(u, op, len, window, iters);
        } else {
            tu[k] = ucc_run(u, op, len, window, iters);
            tr[k] = raw_run(r, op, len, window, iters);
        }
        ratio[k] = tr[k] / tu[k];
    }
    if (phase_on) { /* rank 1's lines after rank 0's row */
        if (r->rank == 0)
            phase_report(0, op_names[op], len, window);
        MPI_Barrier(MPI_COMM_WORLD);
        if (r->rank == 1)
            phase_report(1, op_names[op], len, window);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (r->rank != 0)
        return;
    for (int k = 0; k < pairs && dump; k++)
        printf("#pair %s %zu %d %.9f %.9f %.4f\n", op_names[op], len, k, tr[k], tu[k], ratio[k]);
    bytes = (double)len * window * iters;
    mr = median(tr, pairs);
    mu = median(tu, pairs);
    mp = median(ratio, pairs);

    printf("%-6s %10zu %10.3f %10.3f %7.2f %6.3f %6.3f %6.3f\n", op_names[op], len,
           bytes / mr / 1e9, bytes / mu / 1e9, mr / mu, mp, quantile(ratio, pairs, 0.25),
           quantile(ratio, pairs, 0.75));
}

/* Rank 0 posts msg iters times, each waited for. Returns seconds. */
static double ucc_time_writemsg(ucc_t *u, const uccl_rma_msg_t *msg, int iters)
{
    uccl_req_t *req;
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters && u->rank == 0; it++) {
        ucheck(0, "writemsg", uccl_writemsg(u->conn, msg, &req));
        ucheck(0, "writemsg", uccl_wait(req, -1));
        uccl_req_free(req);
    }
    ucc_fin(u);
    return now_s() - t0;
}

/* Through uccl_writemsg: one local piece, n remote pieces, adjacent (the
 * seed's pattern) or every other block. */
static double ucc_pieces(ucc_t *u, int n, int iters, int scattered)
{
    static uccl_riov_t riov[512];
    size_t piece = SEED_BYTES / (size_t)n;
    uccl_iov_t iov = {u->mr, 0, SEED_BYTES};
    uccl_rma_msg_t msg = {.iov = &iov, .iovcnt = 1, .riov = riov, .riovcnt = n};

    for (int i = 0; i < n; i++)
        riov[i] = (uccl_riov_t){&u->peer, piece_off(i, piece, scattered), piece};
    return ucc_time_writemsg(u, &msg, iters);
}

/* The same through uccl_writemsg: n local pieces, one remote piece. */
static double ucc_seed_local(ucc_t *u, int n, int iters, int unused)
{
    static uccl_iov_t iov[UCCL_IOV_MAX];
    size_t piece = SEED_BYTES / (size_t)n;
    uccl_riov_t riov = {&u->peer, 0, piece * (size_t)n};
    uccl_rma_msg_t msg = {.iov = iov, .iovcnt = n, .riov = &riov, .riovcnt = 1};

    (void)unused;
    for (int i = 0; i < n; i++)
        iov[i] = (uccl_iov_t){u->mr, (size_t)i * piece * 2 % (BUF_SIZE - piece), piece};
    return ucc_time_writemsg(u, &msg, iters);
}

/* One row per piece count n: raw and uccl timed on the same bytes (after 2
 * warm-up rounds each), then `repeat` alternated rounds of raw n pieces,
 * uccl n pieces and uccl 1 piece, each side's median kept: GB/s, raw/uccl
 * time ratio, and uccl n pieces against uccl 1 piece of the same rounds
 * (median, and the lowest and highest single round's ratio). */
static void seed_rows(raw_t *r, ucc_t *u, const int *n, size_t rows,
                      double (*raw)(raw_t *, int, int, int), double (*ucc)(ucc_t *, int, int, int),
                      int mode, int rank, int repeat)
{
    for (size_t k = 0; k < rows; k++) {
        int iters = 50;
        double tr[MAX_REPEAT], tu[MAX_REPEAT], t1[MAX_REPEAT], lo = 1e9, hi = 0;

        raw(r, n[k], 2, mode);
        ucc(u, n[k], 2, mode);
        for (int i = 0; i < repeat; i++) {
            tr[i] = raw(r, n[k], iters, mode);
            tu[i] = ucc(u, n[k], iters, mode);
            t1[i] = ucc(u, n[0], iters, mode);
            lo = t1[i] / tu[i] < lo ? t1[i] / tu[i] : lo;
            hi = t1[i] / tu[i] > hi ? t1[i] / tu[i] : hi;
        }
        if (rank == 0) {
            double bytes = (double)SEED_BYTES * iters, mr = median(tr, repeat);
            double mu = median(tu, repeat), m1 = median(t1, repeat);

            printf("%-6d %10.3f %10.3f %7.2f %10.2f %6.2f %6.2f\n", n[k], bytes / mr / 1e9,
                   bytes / mu / 1e9, mr / mu, m1 / mu, lo, hi);
        }
    }
}

/* send's parts at 64 and 256 KiB: raw send, the rendezvous built from raw
 * operations (perf_ofi.h) and uccl's send, `repeat` alternated runs each,
 * medians: GB/s and each against raw send (raw send time / its time). */
static void parts_rows(raw_t *r, ucc_t *u, int window, int rank, int repeat)
{
    static const size_t sizes[] = {65536, 262144};

    for (size_t s = 0; s < 2; s++) {
        size_t len = sizes[s];
        int iters = (int)((64u << 20) / (len * (size_t)window));
        double t[5][MAX_REPEAT], m[5];

        raw_run(r, OP_SEND, len, window, 1);
        raw_rndv_run(r, RAW_RTS_SEND, len, window, 1);
        raw_rndv_run(r, RAW_RTS_CTS_WRITE, len, window, 1);
        ucc_run(u, OP_SEND, len, window, 1);
        raw_rndv_run(r, RAW_RTS_SEND_LATE, len, window, 1);
        for (int k = 0; k < repeat; k++) {
            t[0][k] = raw_run(r, OP_SEND, len, window, iters);
            t[1][k] = raw_rndv_run(r, RAW_RTS_SEND, len, window, iters);
            t[2][k] = raw_rndv_run(r, RAW_RTS_CTS_WRITE, len, window, iters);
            t[3][k] = ucc_run(u, OP_SEND, len, window, iters);
            t[4][k] = raw_rndv_run(r, RAW_RTS_SEND_LATE, len, window, iters);
        }
        for (int i = 0; i < 5; i++)
            m[i] = median(t[i], repeat);
        if (rank == 0) {
            double bytes = (double)len * window * iters, per = 1e6 / (window * iters);

            printf("%-7zu %8.3f %8.3f %5.2f %8.3f %5.2f %8.3f %5.2f  %5.2f %5.2f %5.2f %5.2f"
                   "  %8.3f %5.2f %5.2f\n",
                   len, bytes / m[0] / 1e9, bytes / m[1] / 1e9, m[0] / m[1], bytes / m[2] / 1e9,
                   m[0] / m[2], bytes / m[3] / 1e9, m[0] / m[3], m[0] * per, m[1] * per,
                   m[2] * per, m[3] * per, bytes / m[4] / 1e9, m[0] / m[4], m[4] * per);
        }
    }
}

/* Receives posted ahead, at 64 and 256 KiB: raw send with the whole window
 * posted, with 1 and with 4 receives posted at a time (one more as one
 * completes), and uccl's send; `repeat` alternated runs, medians: GB/s
 * and each against raw send. */
static void depth_rows(raw_t *r, ucc_t *u, int window, int rank, int repeat)
{
    static const size_t sizes[] = {65536, 262144};
    static const int depths[] = {1, 4};

    for (size_t s = 0; s < 2; s++) {
        size_t len = sizes[s];
        int iters = (int)((64u << 20) / (len * (size_t)window));
        double t[4][MAX_REPEAT], m[4];

        raw_run(r, OP_SEND, len, window, 1);
        for (int d = 0; d < 2; d++)
            raw_depth_run(r, len, window, depths[d], 1);
        ucc_run(u, OP_SEND, len, window, 1);
        for (int k = 0; k < repeat; k++) {
            t[0][k] = raw_run(r, OP_SEND, len, window, iters);
            for (int d = 0; d < 2; d++)
                t[1 + d][k] = raw_depth_run(r, len, window, depths[d], iters);
            t[3][k] = ucc_run(u, OP_SEND, len, window, iters);
        }
        for (int i = 0; i < 4; i++)
            m[i] = median(t[i], repeat);
        if (rank == 0) {
            double bytes = (double)len * window * iters;

            printf("%-7zu %8.3f %8.3f %5.2f %8.3f %5.2f %8.3f %5.2f\n", len, bytes / m[0] / 1e9,
                   bytes / m[1] / 1e9, m[0] / m[1], bytes / m[2] / 1e9, m[0] / m[2],
                   bytes / m[3] / 1e9, m[0] / m[3]);
        }
    }
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {65536, 262144, 1u << 20, 4u << 20};
    static const int pieces[] = {1, 8, 32, 128, 512};
    const char *prov = "tcp;ofi_rxm", *ops = "write,read,send,seed,scatter,local,parts,depth";
    int window = 16, repeat = 1, rank, nranks, nsizes = 4, dump = 0;
    raw_t r = {0};
    ucc_t u = {0};
    uccl_rdesc_t mine;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--provider") == 0)
            prov = argv[i + 1];
        else if (strcmp(argv[i], "--window") == 0)
            window = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ops") == 0)
            ops = argv[i + 1];
        else if (strcmp(argv[i], "--repeat") == 0)
            repeat = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--sizes") == 0)
            nsizes = parse_sizes(argv[i + 1], sizes);
        else if (strcmp(argv[i], "--dump") == 0)
            dump = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--phases") == 0)
            phase_init(atoi(argv[i + 1]));
    }
    if (nsizes < 1) {
        fprintf(stderr, "perf_ofi: --sizes takes 1 to %d byte counts, 1 to %u each, "
                        "comma-separated\n", MAX_SIZES, BUF_SIZE);
        return 2;
    }
    if (window < 1 || window > MAX_WINDOW)
        window = 16;
    if (repeat < 1 || repeat > MAX_REPEAT)
        repeat = 1;
    setenv("UCCL_OFI_PROVIDER", prov, 1);
    setenv("UCCL_TRANSPORTS", "ofi", 1);
    setenv("UCCL_TIMEOUT_MS", "600000", 0); /* a loaded host: the peer waits long in fin */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "perf_ofi: run with exactly 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    r.rank = u.rank = rank;
    r.buf = aligned_alloc(4096, BUF_SIZE);
    u.buf = aligned_alloc(4096, BUF_SIZE);
    memset(r.buf, rank + 1, BUF_SIZE);
    memset(u.buf, rank + 1, BUF_SIZE);
    raw_open(&r, prov);
    ucheck(rank, "uccl_comm_init_mpi", uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &u.comm));
    u.conn = uccl_comm_conn(u.comm, 1 - rank);
    ucheck(rank, "uccl_mr_reg", uccl_mr_reg(uccl_comm_engine(u.comm), u.buf, BUF_SIZE, 0, &u.mr));
    ucheck(rank, "uccl_mr_pack", uccl_mr_pack(u.mr, 0, BUF_SIZE, &mine));
    MPI_Sendrecv(&mine, sizeof(mine), MPI_BYTE, 1 - rank, 0, &u.peer, sizeof(u.peer), MPI_BYTE,
                 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0)
        printf("# perf_ofi: provider %s, window %d; GB/s of rank 0; raw = libfabric directly, "
               "uccl = libuccl over ofi (UCCL_TRANSPORTS=ofi), alternated, same job; op rows: "
               "%d pairs of runs after a warm-up run each, the order flipped every pair; raw, "
               "uccl: each side's median run; ratio: raw / uccl of those medians; pair, q1, q3: "
               "the median and quartiles of the %d pairs' own ratios\n"
               "%-6s %10s %10s %10s %7s %6s %6s %6s\n", r.info->fabric_attr->prov_name, window,
               repeat, repeat, "op", "size", "raw", "uccl", "ratio", "pair", "q1", "q3");
    for (int op = OP_WRITE; op <= OP_SENDV; op++)
        for (int s = 0; s < nsizes && has_op(ops, op_names[op]); s++)
            op_row(&r, &u, op, sizes[s], window, repeat, dump);
    if (has_op(ops, "seed")) {
        if (rank == 0)
            printf("# seed pattern: %u bytes written as n adjacent remote pieces (raw: one "
                   "fi_writemsg per piece, as the seed; uccl: one uccl_writemsg)\n"
                   "%-6s %10s %10s %7s %10s %6s %6s\n", SEED_BYTES, "pieces", "raw", "uccl", "ratio",
                   "uccl/1pc", "min", "max");
        seed_rows(&r, &u, pieces, sizeof(pieces) / sizeof(pieces[0]), raw_pieces, ucc_pieces, 0,
                  rank, repeat);
    }
    if (has_op(ops, "scatter")) {
        if (rank == 0)
            printf("# scattered: %u bytes written as n remote pieces, every other block (raw: "
                   "fi_writemsg of rma_iov_limit %zu remote pieces each; uccl: one "
                   "uccl_writemsg)\n%-6s %10s %10s %7s %10s %6s %6s\n", SEED_BYTES,
                   r.info->tx_attr->rma_iov_limit, "pieces", "raw", "uccl", "ratio", "uccl/1pc",
                   "min", "max");
        seed_rows(&r, &u, pieces, sizeof(pieces) / sizeof(pieces[0]), raw_pieces, ucc_pieces, 1,
                  rank, repeat);
    }
    if (has_op(ops, "local")) {
        static const int lpieces[] = {1, 8, 32, 64};

        if (rank == 0)
            printf("# seed bytes from n local pieces into one remote range (raw: fi_writemsg of "
                   "iov_limit %zu pieces each; uccl: one uccl_writemsg, at most %d local "
                   "pieces)\n%-6s %10s %10s %7s %10s %6s %6s\n", r.info->tx_attr->iov_limit, UCCL_IOV_MAX,
                   "lpieces", "raw", "uccl", "ratio", "uccl/1pc", "min", "max");
        seed_rows(&r, &u, lpieces, sizeof(lpieces) / sizeof(lpieces[0]), raw_seed_local,
                  ucc_seed_local, 0, rank, repeat);
    }
    if (has_op(ops, "parts")) {
        if (rank == 0)
            printf("# send's parts: raw send; raw RTS (64-byte tagged message) then the data "
                   "tagged; raw RTS, CTS, fi_writemsg with CQ data, delivery complete (uccl's "
                   "push rendezvous by hand); uccl send. GB/s, / raw send, then us per message; "
                   "then raw RTS + send with the data's receive posted at its RTS (late): GB/s, "
                   "/ raw send, us\n"
                   "%-7s %8s %8s %5s %8s %5s %8s %5s  %5s %5s %5s %5s  %8s %5s %5s\n", "size", "raw",
                   "rts+snd", "/raw", "rts/cts", "/raw", "uccl", "/raw", "us", "us", "us", "us",
                   "late", "/raw", "us");
        parts_rows(&r, &u, window, rank, repeat);
    }
    if (has_op(ops, "depth")) {
        if (rank == 0)
            printf("# receives posted ahead: raw send (window posted); raw send with 1, then 4 "
                   "receives posted at a time; uccl send. GB/s, / raw send\n"
                   "%-7s %8s %8s %5s %8s %5s %8s %5s\n", "size", "raw", "depth1", "/raw", "depth4",
                   "/raw", "uccl", "/raw");
        depth_rows(&r, &u, window, rank, repeat);
    }
    if (getenv("PERF_OFI_POLLS") != NULL)
        fprintf(stderr, "#polls rank %d: raw_wait's fi_cq_read calls %ld, empty %ld\n", rank,
                raw_cq_reads, phase_empty_polls);
    uccl_mr_dereg(u.mr);
    uccl_comm_destroy(u.comm);
    raw_close(&r);
    free(r.buf);
    free(u.buf);
    MPI_Finalize();
    return 0;
}

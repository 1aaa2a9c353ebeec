/* uccl_perf coll: collective bandwidth and latency of libuccl next to the
 * MPI library's own collective on the same buffers in the same job, as an
 * nccl-tests-style table (size, time, algbw, busbw, #wrong) and JSON. Each
 * size times plain calls, a persistent plan's starts and the MPI call, in
 * turns for --rounds rounds; every column is the median of its rounds of
 * the slowest rank's mean time per call. A second reference, Open MPI over
 * UCX, comes from a run of this program under its own mpirun
 * (perf_coll_ref.c), before the table, where that path runs. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uccl/uccl_mpi.h>

#include "perf_coll.h"
#include "perf_cuda.h"
#include "perf_opts.h"

#define COLL_MAX_BYTES ((size_t)1 << 30) /* one rank's whole receive buffer */
#define COLL_ROWS_MAX 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void coll_fail(const coll_ctx_t *c, const char *what, uccl_status_t st)
{
    fprintf(stderr, "uccl_perf coll rank %d: %s failed: %s (%s)\n", c->rank, what,
            uccl_status_name(st), uccl_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Does one rank send a block to each rank (else one block to all)? */
static int sends_blocks(const coll_ctx_t *c)
{
    return c->o.op == UCCL_COLL_ALLTOALL || c->o.op == UCCL_COLL_ALLTOALLV ||
           c->o.op == UCCL_COLL_SCATTER;
}

/* Bytes of one rank's send and receive buffers for count bytes per block. */
static size_t send_bytes(const coll_ctx_t *c, size_t count)
{
    return sends_blocks(c) ? count * (size_t)c->n : count;
}

static size_t recv_bytes(const coll_ctx_t *c, size_t count)
{
    return c->o.op == UCCL_COLL_BCAST || c->o.op == UCCL_COLL_SCATTER ? count
                                                                       : count * (size_t)c->n;
}

/* The byte rank src sends in block dst at offset i (bcast: the root's). */
static uint8_t pattern(int src, int dst, size_t i, unsigned salt)
{
    return (uint8_t)(i * 131 + (i >> 10) * 7 + (size_t)src * 29 + (size_t)dst * 17 + salt);
}

static void fill_send(coll_ctx_t *c, size_t count, unsigned salt)
{
    int multi = sends_blocks(c);

    for (int b = 0; b < (multi ? c->n : 1); b++)
        for (size_t i = 0; i < count; i++)
            c->hsend[(size_t)b * count + i] = pattern(c->rank, multi ? b : -1, i, salt);
    if (c->o.op == UCCL_COLL_BCAST) /* bcast works in place on the root's recv */
        for (size_t i = 0; i < count; i++)
            c->hrecv[i] = c->rank == 0 ? pattern(0, -1, i, salt) : 0;
    if (c->o.cuda) {
        uccl_engine_t *e = uccl_comm_engine(c->comm);
        uccl_status_t st = uccl_copy(e, c->send, c->hsend, send_bytes(c, count));
        if (st == UCCL_OK && c->o.op == UCCL_COLL_BCAST)
            st = uccl_copy(e, c->recv, c->hrecv, count);
        if (st != UCCL_OK)
            coll_fail(c, "uccl_copy to the GPU", st);
    }
}

/* Bytes of this rank's receive buffer that differ from what it must hold;
 * 0 where the op leaves nothing here (gather off the root). */
static long long count_wrong(const coll_ctx_t *c, size_t count, unsigned salt)
{
    long long wrong = 0;
    int root_only = c->o.op == UCCL_COLL_GATHER;

    if (root_only && c->rank != 0)
        return 0;
    if (c->o.cuda && uccl_copy(uccl_comm_engine(c->comm), c->hrecv, c->recv,
                               recv_bytes(c, count)) != UCCL_OK)
        coll_fail(c, "uccl_copy from the GPU", UCCL_ERR_IO);
    for (int b = 0; b < (int)(recv_bytes(c, count) / (count ? count : 1)) && count; b++) {
        int src, dst;
        switch (c->o.op) {
        case UCCL_COLL_ALLTOALL:
        case UCCL_COLL_ALLTOALLV: src = b; dst = c->rank; break;
        case UCCL_COLL_BCAST: src = 0; dst = -1; break;
        case UCCL_COLL_SCATTER: src = 0; dst = c->rank; break;
        default: src = b; dst = -1; break;
        }
        for (size_t i = 0; i < count; i++)
            wrong += c->hrecv[(size_t)b * count + i] != pattern(src, dst, i, salt);
    }
    return wrong;
}

static uccl_coll_args_t make_args(const coll_ctx_t *c, size_t count)
{
    uccl_coll_args_t a = {.op = c->o.op, .sendbuf = c->send, .recvbuf = c->recv, .count = count,
                          .field_mask = UCCL_COLL_ARG_ROOT, .root = 0};

    for (int r = 0; r < c->n; r++) {
        c->counts[r] = count;
        c->displs[r] = (size_t)r * count;
    }
    a.sendcounts = a.recvcounts = c->counts;
    a.sdispls = a.rdispls = c->displs;
    if (c->o.op == UCCL_COLL_BCAST)
        a.sendbuf = NULL;
    if (c->o.algo != UCCL_COLL_ALGO_AUTO) {
        a.field_mask |= UCCL_COLL_ARG_ALGO;
        a.algo = c->o.algo;
    }
    return a;
}

static void mpi_call(coll_ctx_t *c, size_t count)
{
    int n = (int)count, *cnt = NULL, *dsp = NULL;
    MPI_Comm w = MPI_COMM_WORLD;

    if (c->o.op == UCCL_COLL_ALLGATHERV || c->o.op == UCCL_COLL_ALLTOALLV) {
        cnt = malloc(sizeof(int) * (size_t)c->n);
        dsp = malloc(sizeof(int) * (size_t)c->n);
        for (int r = 0; cnt && dsp && r < c->n; r++) {
            cnt[r] = n;
            dsp[r] = r * n;
        }
    }
    switch (c->o.op) {
    case UCCL_COLL_ALLGATHER: MPI_Allgather(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, w); break;
    case UCCL_COLL_ALLGATHERV:
        MPI_Allgatherv(c->send, n, MPI_BYTE, c->recv, cnt, dsp, MPI_BYTE, w);
        break;
    case UCCL_COLL_ALLTOALL: MPI_Alltoall(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, w); break;
    case UCCL_COLL_ALLTOALLV:
        MPI_Alltoallv(c->send, cnt, dsp, MPI_BYTE, c->recv, cnt, dsp, MPI_BYTE, w);
        break;
    case UCCL_COLL_BCAST: MPI_Bcast(c->recv, n, MPI_BYTE, 0, w); break;
    case UCCL_COLL_GATHER: MPI_Gather(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, 0, w); break;
    case UCCL_COLL_SCATTER: MPI_Scatter(c->send, n, MPI_BYTE, c->recv, n, MPI_BYTE, 0, w); break;
    default: break;
    }
    free(cnt);
    free(dsp);
}

typedef enum { METHOD_UCCL, METHOD_PLAN, METHOD_MPI } coll_method_t;

/* warmup + iters calls of one method; returns the slowest rank's mean time
 * per call and adds the wrong bytes of the result (checked after timing). */
static double time_method(coll_ctx_t *c, coll_method_t m, size_t count, int iters,
                          long long *wrong)
{
    uccl_coll_args_t a = make_args(c, count);
    uccl_coll_plan_t *plan = NULL;
    unsigned salt = (unsigned)m * 3 + (unsigned)iters;
    double t = 0, tmax = 0;
    long long w;
    uccl_status_t st;

    fill_send(c, count, salt);
    if (m == METHOD_PLAN && (st = uccl_coll_init(c->comm, &a, &plan)) != UCCL_OK)
        coll_fail(c, "uccl_coll_init", st);
    for (int i = -c->o.warmup; i < iters; i++) {
        uccl_req_t *req = NULL;
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now_s();
            perf_coll_stream_host_s = 0;
        }
        if (m == METHOD_MPI) {
            mpi_call(c, count);
            continue;
        }
        st = m == METHOD_PLAN  ? uccl_coll_start(plan, &req)
             : c->o.stream ? perf_coll_gpu_stream_call(c, &a)
                           : uccl_coll(c->comm, &a);
        if (st == UCCL_OK && req != NULL)
            st = uccl_wait(req, -1);
        if (req != NULL)
            uccl_req_free(req);
        if (st != UCCL_OK)
            coll_fail(c, m == METHOD_UCCL ? "a collective" : "a persistent start", st);
    }
    t = (now_s() - t) / iters;
    if (plan != NULL)
        uccl_coll_plan_free(plan);
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    w = count_wrong(c, count, salt);
    *wrong += w;
    return tmax;
}

/* --mem cuda reference: every rank copies the bytes it receives (the bcast
 * root, gather's non-roots: none) device to device, all at once. */
static double time_copy(coll_ctx_t *c, size_t count, int iters)
{
    bool none = (c->o.op == UCCL_COLL_BCAST && c->rank == 0) ||
                (c->o.op == UCCL_COLL_GATHER && c->rank != 0);
    size_t len = none ? 0 : recv_bytes(c, count);
    double t, tmax = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    if ((t = perf_cuda_copy_s(c->recv, c->dsrc, len, iters)) < 0)
        coll_fail(c, "the device-to-device copy", UCCL_ERR_IO);
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static int auto_iters(const coll_ctx_t *c, size_t count)
{
    size_t per_call = recv_bytes(c, count) + 4096;
    size_t it = ((size_t)64 << 20) / per_call;

    if (c->o.iters > 0)
        return c->o.iters;
    return it < 5 ? 5 : it > 1000 ? 1000 : (int)it;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* --stream: the uccl column's path (UCCL_COLL_STREAM, coll/stream.c). */
static const char *stream_path(void)
{
    const char *v = getenv("UCCL_COLL_STREAM");

    return v != NULL && strcmp(v, "hold") == 0 ? "stream-hold" : "stream-direct";
}

static void run_size(coll_ctx_t *c, size_t count, coll_row_t *row)
{
    double tu[COLL_ROUNDS_MAX], tp[COLL_ROUNDS_MAX], tm[COLL_ROUNDS_MAX];
    double tc[COLL_ROUNDS_MAX] = {0}, tn[COLL_ROUNDS_MAX] = {0}, tq[COLL_ROUNDS_MAX] = {0};
    double tk[COLL_ROUNDS_MAX] = {0};
    double th[COLL_ROUNDS_MAX] = {0}, host = 0;
    long long wrong = 0, all = 0;
    int iters = auto_iters(c, count), gpu_refs = c->o.cuda && !c->o.no_ref && c->n > 1;

    for (int r = 0; r < c->o.rounds; r++) {
        tu[r] = c->o.ref_only ? 0 : time_method(c, METHOD_UCCL, count, iters, &wrong);
        th[r] = c->o.stream && !c->o.ref_only ? perf_coll_stream_host_s / iters : 0;
        tp[r] = c->o.ref_only ? 0 : time_method(c, METHOD_PLAN, count, iters, &wrong);
        tm[r] = c->o.cuda     ? time_copy(c, count, iters)
                : c->o.no_ref ? 0 : time_method(c, METHOD_MPI, count, iters, &wrong);
        if (gpu_refs) { /* ranks on several GPUs: the ceiling and NCCL, same turns */
            tc[r] = perf_coll_gpu_peer_s(c, count, iters);
            tk[r] = perf_coll_gpu_kern_s(c, count, iters);
            tn[r] = perf_coll_gpu_nccl_s(c, count, iters, 0);
            tq[r] = perf_coll_gpu_nccl_s(c, count, iters, 1);
            if (tc[r] < 0 || tk[r] < 0 || tn[r] < 0 || tq[r] < 0)
                coll_fail(c, "a GPU reference (peer copy, kernel or NCCL)", UCCL_ERR_IO);
        }
    }
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    host = median(th, c->o.rounds);
    MPI_Allreduce(MPI_IN_PLACE, &host, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *row = (coll_row_t){.host_s = host, .count = count, .size = recv_bytes(c, count), .iters = iters,
                        .uccl_s = median(tu, c->o.rounds), .plan_s = median(tp, c->o.rounds),
                        .mpi_s = median(tm, c->o.rounds), .wrong = all,
                        .peer_s = median(tc, c->o.rounds), .kern_s = median(tk, c->o.rounds), .nccl_s = median(tn, c->o.rounds),
                        .ncclq_s = median(tq, c->o.rounds),
                        .algo = c->o.ref_only ? "-" : c->o.stream ? stream_path() :
                                uccl_coll_algo_name(c->o.algo != UCCL_COLL_ALGO_AUTO ? c->o.algo :
                                uccl_coll_algo_select(c->comm, c->o.op, count))};
}

/* The UCX reference, before the table: rank 0 runs it while the others
 * sleep (a spinning rank would take a CPU from the inner job). */
static void ucx_reference(coll_ctx_t *c, int argc, char **argv, coll_row_t *rows, int nrows)
{
    double us[COLL_ROWS_MAX] = {0};
    size_t counts[COLL_ROWS_MAX];
    MPI_Request req;
    int done = 0;

    MPI_Comm local;
    int nlocal = 0;

    for (int i = 0; i < nrows; i++)
        counts[i] = rows[i].count;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &nlocal);
    MPI_Comm_free(&local);
    if (nlocal != c->n) {
        snprintf(c->ucx_why, sizeof(c->ucx_why), "the ranks span hosts (the UCX job runs on "
                 "rank 0's host only)");
        return;
    }
    if (c->rank == 0) {
        perf_coll_ref_t r = {.mpirun = c->o.mpirun, .ucx_tls = c->o.ucx_tls, .ranks = c->n};
        if (perf_coll_ucx_ref(&r, argc, argv, counts, us, nrows, c->ucx_why,
                              sizeof(c->ucx_why)) == 0)
            c->ucx_why[0] = '\0';
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done)
            usleep(2000);
    }
    MPI_Bcast(us, nrows, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(c->ucx_why, (int)sizeof(c->ucx_why), MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int i = 0; i < nrows; i++)
        rows[i].ucx_s = us[i] * 1e-6;
}

/* --mem cuda: the engine on GPU local_rank % count (ranks of a host share
 * it when it has fewer GPUs than ranks), and this thread's current device
 * too: the copy reference's stream is created there (on the device 0 of
 * every rank, the ranks of GPUs 1.. timed copies driven from GPU 0); no UCX
 * reference. */
static int coll_pick_gpu(coll_ctx_t *c, uccl_engine_params_t *ep, uccl_comm_params_t *cp)
{
    int ngpu = perf_cuda_count(), local = 0;
    MPI_Comm node;

    if (ngpu == 0) {
        if (c->rank == 0)
            fprintf(stderr, "uccl_perf coll: --mem cuda, but no GPU here\n");
        return -1;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &c->nlocal);
    MPI_Comm_free(&node);
    c->gpu = local % ngpu;
    c->ngpu = ngpu;
    if (perf_cuda_set_device(c->gpu) != 0) {
        fprintf(stderr, "uccl_perf coll rank %d: cannot make GPU %d current\n", c->rank, c->gpu);
        return -1;
    }
    ep->field_mask |= UCCL_ENGINE_PARAM_GPU_INDEX;
    ep->gpu_index = c->gpu;
    cp->field_mask = UCCL_COMM_PARAM_ENGINE_PARAMS;
    cp->engine_params = ep;
    c->o.ucx = 0;
    return 0;
}

static int coll_setup(coll_ctx_t *c)
{
    uccl_engine_params_t ep = {0};
    uccl_comm_params_t cp = {0};
    uccl_conn_attr_t attr;
    size_t sb = send_bytes(c, c->o.max), rb = recv_bytes(c, c->o.max);
    uccl_status_t st;

    if (rb > COLL_MAX_BYTES) {
        if (c->rank == 0)
            fprintf(stderr, "uccl_perf coll: --max %zu needs %zu bytes per rank (limit %zu)\n",
                    c->o.max, rb, COLL_MAX_BYTES);
        return -1;
    }
    c->send = c->hsend = aligned_alloc(4096, (sb + 4095) / 4096 * 4096);
    c->recv = c->hrecv = aligned_alloc(4096, (rb + 4095) / 4096 * 4096);
    c->counts = calloc((size_t)c->n, sizeof(size_t));
    c->displs = calloc((size_t)c->n, sizeof(size_t));
    if (!c->send || !c->recv || !c->counts || !c->displs)
        return -1;
    if (c->o.cuda && coll_pick_gpu(c, &ep, &cp) != 0)
        return -1;
    if (c->o.transport != NULL) {
        ep.field_mask |= UCCL_ENGINE_PARAM_TRANSPORTS;
        ep.transports = c->o.transport;
        cp.field_mask = UCCL_COMM_PARAM_ENGINE_PARAMS;
        cp.engine_params = &ep;
    }
    c->transport = "self";
    if (c->o.ref_only)
        return 0; /* the UCX reference run: MPI only */
    st = uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, &c->comm);
    if (st != UCCL_OK)
        coll_fail(c, "uccl_comm_init_mpi", st);
    if (c->n > 1 && uccl_conn_query(uccl_comm_conn(c->comm, (c->rank + 1) % c->n), &attr) ==
                        UCCL_OK)
        c->transport = c->o.cuda ? attr.gpu_transport : attr.transport;
    if (c->o.uccl_host) { /* the same sizes from uccl_mem_alloc, in place of aligned_alloc */
        uccl_engine_t *e = uccl_comm_engine(c->comm);
        void *sp = NULL, *rp = NULL;
        if ((st = uccl_mem_alloc(e, UCCL_MEM_HOST, sb ? sb : 1, &sp)) != UCCL_OK ||
            (st = uccl_mem_alloc(e, UCCL_MEM_HOST, rb ? rb : 1, &rp)) != UCCL_OK)
            coll_fail(c, "uccl_mem_alloc of host buffers", st);
        free(c->hsend);
        free(c->hrecv);
        c->send = c->hsend = sp;
        c->recv = c->hrecv = rp;
    }
    if (c->o.cuda) {
        uccl_engine_t *e = uccl_comm_engine(c->comm);
        void *sp = NULL, *rp = NULL;
        if ((st = uccl_mem_alloc(e, UCCL_MEM_CUDA, sb ? sb : 1, &sp)) != UCCL_OK ||
            (st = uccl_mem_alloc(e, UCCL_MEM_CUDA, rb ? rb : 1, &rp)) != UCCL_OK ||
            (st = uccl_mem_alloc(e, UCCL_MEM_CUDA, rb ? rb : 1, &c->dsrc)) != UCCL_OK)
            coll_fail(c, "uccl_mem_alloc of GPU buffers", st);
        c->send = sp;
        c->recv = rp;
        /* the ceiling and NCCL; ranks of several hosts: one host's GPUs
         * only (IPC), so no such columns */
        if (!c->o.no_ref && c->n > 1 && c->nlocal == c->n &&
            perf_coll_gpu_setup(c, c->gpu, c->ngpu) != 0)
            return -1;
    }
    return 0;
}

int perf_coll_main(int argc, char **argv)
{
    coll_ctx_t c = {0};
    coll_row_t *rows = calloc(COLL_ROWS_MAX, sizeof(*rows));
    int nrows = 0, rc;

    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.n);
    rc = rows == NULL ? -1 : perf_coll_parse_args(argc, argv, &c.o, c.rank == 0);
    if (rc == 0)
        rc = coll_setup(&c);
    for (size_t count = c.o.min; rc == 0 && count <= c.o.max && nrows < COLL_ROWS_MAX;
         count = count ? count * 2 : 1)
        rows[nrows++].count = count;
    if (rc == 0 && c.o.ucx && !c.o.no_ref && !c.o.ref_only)
        ucx_reference(&c, argc, argv, rows, nrows);
    if (rc == 0 && c.rank == 0)
        perf_coll_print_header(&c);
    for (int i = 0; rc == 0 && i < nrows; i++) {
        double ucx = rows[i].ucx_s;
        run_size(&c, rows[i].count, &rows[i]);
        rows[i].ucx_s = ucx;
        if (c.rank == 0)
            perf_coll_print_row(&c, &rows[i]);
    }
    if (rc == 0 && c.rank == 0 && c.o.json != NULL)
        rc = perf_coll_write_json(&c, rows, nrows);
    for (int i = 0; rc == 0 && i < nrows; i++)
        rc = rows[i].wrong != 0 ? -1 : 0; /* a wrong byte fails the run */
    perf_coll_gpu_teardown(&c);
    if (c.comm != NULL && c.o.cuda) {
        uccl_engine_t *e = uccl_comm_engine(c.comm);
        uccl_comm_coll_flush(c.comm);
        uccl_mem_free(e, c.send);
        uccl_mem_free(e, c.recv);
        uccl_mem_free(e, c.dsrc);
    }
    if (c.comm != NULL && c.o.uccl_host) {
        uccl_engine_t *e = uccl_comm_engine(c.comm);
        uccl_comm_coll_flush(c.comm);
        uccl_mem_free(e, c.hsend);
        uccl_mem_free(e, c.hrecv);
        c.hsend = c.hrecv = NULL;
    }
    if (c.comm != NULL)
        uccl_comm_destroy(c.comm);
    free(c.hsend);
    free(c.hrecv);
    free(c.counts);
    free(c.displs);
    free(rows);
    return rc == 0 ? 0 : 1;
}

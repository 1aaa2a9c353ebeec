/* uccl_perf: point-to-point bandwidth of libuccl against MPI, measured in the
 * same run with the same pattern (a window of transfers, then an ack; the
 * loops are perf_p2p.c's). With --mem cuda the buffers are on the GPUs and the
 * references are a plain cudaMemcpyAsync and NCCL (tools/perf_cuda.c) instead
 * of MPI. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uccl/uccl_mpi.h>

#include "perf_coll.h"
#include "perf_cuda.h"
#include "perf_opts.h"
#include "perf_p2p.h"

/* ------------------------------------------------------------------ data check */

static uint8_t pattern_byte(size_t size, size_t i)
{
    return (uint8_t)(i * 131 + (i >> 12) * 7 + size * 13 + 1);
}

/* The destination of the data: rank 1 for send/write, rank 0 for read. */
static int is_destination(const perf_ctx_t *c)
{
    return (c->o.op == PERF_OP_READ) == (c->rank == 0);
}

static void fill(perf_ctx_t *c, size_t size, int poison)
{
    for (size_t i = 0; i < size; i++)
        c->host[i] = (uint8_t)(pattern_byte(size, i) ^ (poison ? 0xff : 0));
    if (c->gpu != NULL && perf_cuda_upload(c->gpu, c->host, size) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

/* One untimed window with a poisoned destination, then a byte compare.
 * Returns 0 on both ranks when the data arrived intact. */
static int verify(perf_ctx_t *c, size_t size, const char *who,
                  double (*phase)(perf_ctx_t *, size_t, int))
{
    int bad = 0, any_bad = 0;

    if (is_destination(c))
        fill(c, size, 1);
    phase(c, size, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    /* the destination's bytes are in GPU memory only where its buffer is
     * there (rank 1 of --peer-mem host keeps a GPU but uses host memory) */
    if (c->gpu != NULL && c->buf != c->host && is_destination(c) &&
        perf_cuda_download(c->gpu, c->host, size) != 0)
        bad = 1;
    for (size_t i = 0; is_destination(c) && !bad && i < size; i++) {
        if (c->host[i] != pattern_byte(size, i)) {
            fprintf(stderr, "uccl_perf: DATA MISMATCH (%s) at size %zu offset %zu: got 0x%02x "
                    "expected 0x%02x\n", who, size, i, c->host[i], pattern_byte(size, i));
            bad = 1;
            break;
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_bad;
}

/* ------------------------------------------------------------------ driver */

static int auto_iters(const perf_ctx_t *c, size_t size)
{
    size_t per_iter = size * (size_t)c->o.window, iters;

    if (c->o.iters > 0)
        return c->o.iters;
    iters = ((size_t)256 << 20) / (per_iter ? per_iter : 1);
    return iters < 3 ? 3 : iters > 200 ? 200 : (int)iters;
}

/* --mem cuda: the plain copy and NCCL, same sizes, window and iterations. */
static int gpu_refs(perf_ctx_t *c, size_t size, int iters, perf_row_t *row)
{
    int from0 = c->o.op != PERF_OP_READ, w = c->o.window;

    if (c->o.warmup > 0)
        perf_cuda_plain_window(c->gpu, from0, size, w, c->o.warmup);
    row->ref_s = perf_cuda_plain_window(c->gpu, from0, size, w, iters);
    /* two-sided: the copy with the notification and ack the send loop has */
    row->told_s = c->o.op == PERF_OP_SEND ? perf_cuda_told_window(c->gpu, from0, size, w, iters) : -1;
    row->nccl_s = -1;
    if (perf_cuda_have_nccl(c->gpu)) {
        if (c->o.warmup > 0)
            perf_cuda_nccl_window(c->gpu, from0, size, w, c->o.warmup);
        row->nccl_s = perf_cuda_nccl_window(c->gpu, from0, size, w, iters);
    }
    return row->ref_s > 0 ? 0 : -1;
}

/* Fill, warm up and time one implementation of the pattern, then verify it
 * when asked; the seconds of the timed windows go to *seconds. Returns -1
 * on bad data. */
static int timed_phase(perf_ctx_t *c, size_t size, int iters, const char *who,
                       double (*phase)(perf_ctx_t *, size_t, int), double *seconds, int check)
{
    if (!is_destination(c))
        fill(c, size, 0);
    if (c->o.warmup > 0)
        phase(c, size, c->o.warmup);
    *seconds = phase(c, size, iters);
    return check && verify(c, size, who, phase) ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n times; -1 (no result) when any of them is. */
static double median(double *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i] < 0)
            return -1;
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* One size: --rounds times uccl then the references, each round's uccl
 * data verified; every column is the median of its rounds, and the JSON
 * has the spread of the per-round ratios. */
static int run_size(perf_ctx_t *c, size_t size, perf_row_t *row)
{
    double u[PERF_ROUNDS_MAX], r[PERF_ROUNDS_MAX], n[PERF_ROUNDS_MAX], a[PERF_ROUNDS_MAX];
    int iters = auto_iters(c, size), rounds = c->o.rounds;

    for (int k = 0; k < rounds; k++) {
        u[k] = r[k] = n[k] = a[k] = -1;
        if (timed_phase(c, size, iters, "uccl", perf_uccl_phase, &u[k], 1) != 0)
            return -1;
        if (c->o.no_ref)
            continue;
        if (c->gpu != NULL) {
            if (gpu_refs(c, size, iters, row) != 0)
                return -1;
            r[k] = row->ref_s;
            n[k] = row->nccl_s;
            a[k] = row->told_s;
        } else if (timed_phase(c, size, iters, "MPI reference", perf_mpi_phase, &r[k], k == rounds - 1) != 0) {
            return -1;
        }
    }
    row->size = size;
    row->ops = (double)iters * c->o.window;
    row->ratio_lo = row->ratio_hi = 0; /* each round's uccl against its reference, before sorting */
    for (int k = 0; k < rounds && !c->o.no_ref && c->gpu == NULL; k++) {
        double q = u[k] > 0 && r[k] > 0 ? r[k] / u[k] : 0;

        row->ratio_lo = k == 0 || q < row->ratio_lo ? q : row->ratio_lo;
        row->ratio_hi = q > row->ratio_hi ? q : row->ratio_hi;
    }
    row->uccl_s = median(u, rounds);
    row->ref_s = c->o.no_ref ? 0 : median(r, rounds);
    row->nccl_s = median(n, rounds);
    row->told_s = median(a, rounds);
    return 0;
}

static void setup_uccl(perf_ctx_t *c)
{
    uccl_engine_params_t ep = {0};
    uccl_comm_params_t cp = {0};
    uccl_conn_attr_t attr;
    uccl_status_t st;

    if (c->o.transport != NULL) {
        ep.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS;
        ep.transports = c->o.transport;
    }
    if (c->gpu != NULL) {
        ep.field_mask |= UCCL_ENGINE_PARAM_GPU_INDEX;
        ep.gpu_index = perf_cuda_gpu(c->gpu);
    }
    if (ep.field_mask != 0) {
        cp.field_mask = UCCL_COMM_PARAM_ENGINE_PARAMS;
        cp.engine_params = &ep;
    }
    st = uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, &c->comm);
    if (st != UCCL_OK)
        perf_fail(c, "uccl_comm_init_mpi", st);
    c->conn = uccl_comm_conn(c->comm, 1 - c->rank);
    st = uccl_conn_query(c->conn, &attr);
    if (st != UCCL_OK)
        perf_fail(c, "uccl_conn_query", st);
    c->conn_transport = c->o.mem == PERF_MEM_CUDA ? attr.gpu_transport : attr.transport;
    c->target_polls = c->conn_transport != NULL && strcmp(c->conn_transport, "ofi") == 0;
    st = uccl_mr_reg(uccl_comm_engine(c->comm), c->buf, c->o.max, 0, &c->mr);
    if (st != UCCL_OK)
        perf_fail(c, "uccl_mr_reg", st);
    if (c->rank == 1) {
        st = uccl_mr_pack(c->mr, 0, c->o.max, &c->peer_desc);
        if (st != UCCL_OK)
            perf_fail(c, "uccl_mr_pack", st);
    }
    /* Setup only; no data moves through MPI on the uccl side. */
    MPI_Bcast(&c->peer_desc, (int)sizeof(c->peer_desc), MPI_BYTE, 1, MPI_COMM_WORLD);
}

/* Some MPI paths have no one-sided support (Open MPI's osc over btl tcp
 * alone): say so and stop, rather than abort in MPI. */
static int setup_window(perf_ctx_t *c)
{
    int rc, any = 0;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Win_create(c->buf, (MPI_Aint)c->o.max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &c->win);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (rc != MPI_SUCCESS)
        c->win = MPI_WIN_NULL;
    rc = rc != MPI_SUCCESS;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && c->rank == 0)
        fprintf(stderr, "uccl_perf: MPI_Win_create failed: this MPI setup has no one-sided "
                        "path for the reference here (see its path in the usage text; or --no-ref)\n");
    return any ? -1 : 0;
}

static int mpi_xchg(const void *mine, void *theirs, size_t len)
{
    int rank;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return MPI_Sendrecv(mine, (int)len, MPI_BYTE, 1 - rank, TAG_FIN, theirs, (int)len, MPI_BYTE,
                        1 - rank, TAG_FIN, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : -1;
}

/* GPU = local rank % GPUs; the buffer, the plain-copy mapping and NCCL. */
static int setup_gpu(perf_ctx_t *c)
{
    MPI_Comm node;
    int local = 0, rc, any = 0;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    rc = c->host == NULL ? -1 : perf_cuda_setup(c->rank, local, c->o.max, mpi_xchg, &c->gpu);
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (any != 0)
        return -1;
    c->buf = perf_cuda_buf(c->gpu);
    return 0;
}

static int setup(perf_ctx_t *c)
{
    int nranks;

    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (c->rank == 0)
            fprintf(stderr, "uccl_perf p2p needs exactly 2 ranks (mpirun -np 2), got %d\n",
                    nranks);
        return -1;
    }
    c->host = aligned_alloc(4096, (c->o.max + 4095) / 4096 * 4096);
    c->buf = c->host;
    if (c->o.mem == PERF_MEM_CUDA && setup_gpu(c) != 0)
        return -1;
    if (c->o.peer_host && c->rank == 1)
        c->buf = c->host; /* --peer-mem host: the engine keeps its GPU */
    c->reqs = calloc((size_t)c->o.window + 1, sizeof(*c->reqs));
    c->mreqs = calloc((size_t)c->o.window, sizeof(*c->mreqs));
    if (c->host == NULL || c->reqs == NULL || c->mreqs == NULL) {
        fprintf(stderr, "uccl_perf: out of memory for %zu-byte buffers\n", c->o.max);
        return -1;
    }
    memset(c->host, 0, c->o.max);
    setup_uccl(c);
    return c->o.op == PERF_OP_SEND || c->gpu != NULL || c->o.no_ref ? 0 : setup_window(c);
}

static void teardown(perf_ctx_t *c)
{
    if (c->win != MPI_WIN_NULL)
        MPI_Win_free(&c->win);
    if (c->mr != NULL)
        uccl_mr_dereg(c->mr);
    if (c->comm != NULL)
        uccl_comm_destroy(c->comm);
    free(c->mreqs);
    free(c->reqs);
    perf_cuda_teardown(c->gpu);
    free(c->host);
}

/* "GPU 0 (0000:19:00.0), NCCL" for the header, NULL in host mode. */
static const char *gpu_text(const perf_ctx_t *c)
{
    static char text[128];

    if (c->gpu == NULL)
        return NULL;
    perf_cuda_describe(c->gpu, text, sizeof(text) - 16);
    strcat(text, perf_cuda_have_nccl(c->gpu) ? ", NCCL" : ", no NCCL");
    return text;
}

int main(int argc, char **argv)
{
    perf_ctx_t c = {.win = MPI_WIN_NULL};
    perf_row_t *rows = NULL;
    int nrows = 0, rc = 0;

    perf_pin_mpi_path(argc, argv, c.o.ref_path, sizeof(c.o.ref_path));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    if (argc >= 2 && strcmp(argv[1], "coll") == 0) {
        rc = perf_coll_main(argc, argv);
        MPI_Finalize();
        return rc;
    }
    rc = perf_parse_args(argc, argv, &c.o, c.rank == 0);
    if (rc == 0)
        rc = setup(&c);
    if (rc == 0) {
        rows = calloc(64, sizeof(*rows));
        rc = rows ? 0 : -1;
    }
    for (int k = 0; rc == 0 && k < c.o.nops; k++) { /* --op a,b: a block of rows each */
        c.o.op = c.o.ops[k];
        nrows = 0;
        if (c.rank == 0)
            perf_print_header(&c.o, c.conn_transport, gpu_text(&c));
        for (size_t size = c.o.min; rc == 0 && size <= c.o.max && nrows < 64; size *= 2) {
            rc = run_size(&c, size, &rows[nrows]);
            if (rc == 0 && c.rank == 0)
                perf_print_row(&c.o, &rows[nrows]);
            nrows += rc == 0;
        }
    }
    if (rc == 0 && c.rank == 0 && c.o.json != NULL)
        rc = perf_write_json(&c.o, c.conn_transport, gpu_text(&c), rows, nrows);
    teardown(&c);
    free(rows);
    MPI_Finalize();
    return rc == 0 ? 0 : 1;
}

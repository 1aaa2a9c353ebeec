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

#define COLL_DEFAULT_MIN 8
#define COLL_DEFAULT_MAX (16u << 20)
#define COLL_MAX_BYTES ((size_t)1 << 30) /* one rank's whole receive buffer */
#define COLL_ROUNDS_MAX 15
#define COLL_ROWS_MAX 64

typedef struct coll_opts {
    uccl_coll_op_t op;
    uccl_coll_algo_t algo; /* AUTO = the selection table */
    const char *transport;
    size_t min, max; /* bytes per rank block */
    int iters, warmup, rounds, no_ref;
    int ref_only; /* MPI column only (the UCX reference run) */
    int ucx;      /* run the UCX reference */
    const char *ucx_tls, *mpirun;
    int cuda; /* --mem cuda: GPU buffers, a D2D copy as the reference */
    const char *json;
} coll_opts_t;

typedef struct coll_row {
    size_t count, size;
    int iters;
    const char *algo;
    double uccl_s, plan_s, mpi_s; /* per call */
    double ucx_s;                 /* Open MPI over UCX, 0 = not run */
    long long wrong;              /* bytes wrong over every rank and method */
} coll_row_t;

typedef struct coll_ctx {
    coll_opts_t o;
    int rank, n;
    uccl_comm_t *comm;
    const char *transport; /* what the comm's connections use */
    char ucx_why[256];     /* why the UCX reference is missing */
    uint8_t *send, *recv;    /* what the calls get (GPU memory with --mem cuda) */
    uint8_t *hsend, *hrecv;  /* host: the patterns (send, recv with host memory) */
    void *dsrc;              /* --mem cuda: source of the copy reference */
    size_t *counts, *displs; /* v-variants: every rank's block, packed */
} coll_ctx_t;

static void coll_usage(void)
{
    fprintf(stderr,
            "usage: mpirun -np N uccl_perf coll --op OP [options]\n"
            "  --op allgather|allgatherv|alltoall|alltoallv|bcast|gather|scatter\n"
            "  --algo NAME            force an algorithm (direct, ring, pairwise, bruck,\n"
            "                         binomial, scatter_allgather, linear; default: auto)\n"
            "  --transport LIST       transports the engine may use, e.g. shm or tcp\n"
            "  --mem host|cuda        buffer memory (default host); cuda: GPU local_rank %% count,\n"
            "                         the reference (mpi column) is then a device-to-device\n"
            "                         copy of the bytes each rank receives, all ranks at once\n"
            "  --min SIZE, --max SIZE bytes per rank block (default 8 and 16M, sizes double)\n"
            "  --iters N              timed calls per size (default: by size, 5 to 1000)\n"
            "  --warmup N             untimed calls per size first (default 3)\n"
            "  --rounds N             per size, uccl, its persistent plan and MPI in turns N\n"
            "                         times; medians (default 1, at most 15)\n"
            "  --json FILE            also write the results as JSON\n"
            "  --no-ref               no MPI reference (its column reads 0)\n"
            "  --ucx-ref on|off       also Open MPI over UCX (default on): this program again\n"
            "                         under mpirun --mca pml ucx --mca osc ucx (any UCX\n"
            "                         transport/device), MPI column only, before the table\n"
            "  --ucx-tls LIST         UCX_TLS for that run (e.g. tcp; default: UCX's choice)\n"
            "  --mpirun PATH          launcher of that run (default mpirun)\n"
            "The reference is the MPI library's own collective on MPI_BYTE with the same\n"
            "buffers; choose its path with mpirun's options (e.g. --mca pml ucx).\n"
            "busbw = algbw * (n-1)/n (bcast: algbw), size = bytes one rank receives.\n");
}

static int parse_op(const char *text, uccl_coll_op_t *op)
{
    for (int i = 0; i < UCCL_COLL_OP_COUNT; i++)
        if (strcmp(text, uccl_coll_op_name((uccl_coll_op_t)i)) == 0) {
            *op = (uccl_coll_op_t)i;
            return 0;
        }
    return -1;
}

/* Each bad value is named; returns 0 or -1. */
static int coll_parse_one(coll_opts_t *o, int opt, const char *arg, int verbose)
{
    int bad = 0;

    switch (opt) {
    case 'o': bad = parse_op(arg, &o->op); break;
    case 'a': bad = uccl_coll_algo_parse(arg, &o->algo) != UCCL_OK; break;
    case 't': o->transport = arg; break;
    case 'm': bad = perf_parse_size(arg, &o->min); break;
    case 'M': bad = perf_parse_size(arg, &o->max); break;
    case 'i': bad = perf_parse_int(arg, 1, 1000000, &o->iters); break;
    case 'w': bad = perf_parse_int(arg, 0, 1000000, &o->warmup); break;
    case 'r': bad = perf_parse_int(arg, 1, COLL_ROUNDS_MAX, &o->rounds); break;
    case 'j': o->json = arg; break;
    case 'n': o->no_ref = 1; break;
    case 'R': o->ref_only = 1; break;
    case 'u':
        bad = strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0;
        o->ucx = strcmp(arg, "on") == 0;
        break;
    case 'T': o->ucx_tls = arg; break;
    case 'P': o->mpirun = arg; break;
    case 'g':
        bad = strcmp(arg, "host") != 0 && strcmp(arg, "cuda") != 0;
        o->cuda = strcmp(arg, "cuda") == 0;
        break;
    default: bad = 1; break;
    }
    if (bad && verbose)
        fprintf(stderr, "uccl_perf coll: bad value '%s' for an option (see the usage below)\n",
                arg ? arg : "");
    return bad ? -1 : 0;
}

static int coll_parse_args(int argc, char **argv, coll_opts_t *o, int verbose)
{
    static const struct option longopts[] = {
        {"op", required_argument, NULL, 'o'},       {"algo", required_argument, NULL, 'a'},
        {"transport", required_argument, NULL, 't'}, {"min", required_argument, NULL, 'm'},
        {"max", required_argument, NULL, 'M'},      {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},   {"rounds", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},     {"no-ref", no_argument, NULL, 'n'},
        {"ref-only", no_argument, NULL, 'R'},       {"ucx-ref", required_argument, NULL, 'u'},
        {"ucx-tls", required_argument, NULL, 'T'},  {"mpirun", required_argument, NULL, 'P'},
        {"mem", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0},
    };
    int opt, have_op = 0;

    *o = (coll_opts_t){.op = UCCL_COLL_ALLGATHER, .min = COLL_DEFAULT_MIN,
                       .max = COLL_DEFAULT_MAX, .warmup = 3, .rounds = 1, .ucx = 1,
                       .mpirun = "mpirun"};
    opterr = 0; /* we name the bad option ourselves, once */
    optind = 2; /* argv[1] is "coll" */
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (opt == '?') {
            if (verbose) {
                fprintf(stderr, "uccl_perf coll: unknown or incomplete option '%s'\n",
                        argv[optind - 1]);
                coll_usage();
            }
            return -1;
        }
        have_op |= opt == 'o';
        if (coll_parse_one(o, opt, optarg, verbose) != 0) {
            if (verbose)
                coll_usage();
            return -1;
        }
    }
    if (!have_op || optind != argc || o->min > o->max) {
        if (verbose) {
            fprintf(stderr, "uccl_perf coll: %s\n",
                    !have_op ? "--op is required" :
                    optind != argc ? "unexpected argument" : "--min is larger than --max");
            coll_usage();
        }
        return -1;
    }
    return 0;
}

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
        }
        if (m == METHOD_MPI) {
            mpi_call(c, count);
            continue;
        }
        st = m == METHOD_UCCL ? uccl_coll(c->comm, &a) : uccl_coll_start(plan, &req);
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

static void run_size(coll_ctx_t *c, size_t count, coll_row_t *row)
{
    double tu[COLL_ROUNDS_MAX], tp[COLL_ROUNDS_MAX], tm[COLL_ROUNDS_MAX];
    long long wrong = 0, all = 0;
    int iters = auto_iters(c, count);

    for (int r = 0; r < c->o.rounds; r++) {
        tu[r] = c->o.ref_only ? 0 : time_method(c, METHOD_UCCL, count, iters, &wrong);
        tp[r] = c->o.ref_only ? 0 : time_method(c, METHOD_PLAN, count, iters, &wrong);
        tm[r] = c->o.cuda     ? time_copy(c, count, iters)
                : c->o.no_ref ? 0 : time_method(c, METHOD_MPI, count, iters, &wrong);
    }
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    *row = (coll_row_t){.count = count, .size = recv_bytes(c, count), .iters = iters,
                        .uccl_s = median(tu, c->o.rounds), .plan_s = median(tp, c->o.rounds),
                        .mpi_s = median(tm, c->o.rounds), .wrong = all,
                        .algo = c->o.ref_only ? "-" :
                                uccl_coll_algo_name(c->o.algo != UCCL_COLL_ALGO_AUTO ? c->o.algo :
                                uccl_coll_algo_select(c->comm, c->o.op, count))};
}

static double busbw_gbs(const coll_ctx_t *c, const coll_row_t *row, double t)
{
    double algbw = t > 0 ? (double)row->size / t / 1e9 : 0;
    return c->o.op == UCCL_COLL_BCAST ? algbw : algbw * (c->n - 1) / c->n;
}

static const char *mpi_path(void)
{
    static char text[160];
    const char *pml = getenv("OMPI_MCA_pml"), *btl = getenv("OMPI_MCA_btl");

    snprintf(text, sizeof(text), "pml %s, btl %s", pml ? pml : "default",
             btl ? btl : "default");
    return text;
}

static const char *ucx_text(const coll_ctx_t *c)
{
    static char text[320];

    if (!c->o.ucx || c->o.no_ref)
        return "not asked (--ucx-ref off)";
    if (c->ucx_why[0] != '\0')
        snprintf(text, sizeof(text), "skipped: %s", c->ucx_why);
    else
        snprintf(text, sizeof(text), "pml ucx, osc ucx, pml_ucx_tls any, pml_ucx_devices any%s%s",
                 c->o.ucx_tls ? ", UCX_TLS=" : "", c->o.ucx_tls ? c->o.ucx_tls : "");
    return text;
}

static void print_header(const coll_ctx_t *c)
{
    char host[64] = "?";
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    gethostname(host, sizeof(host) - 1);
    printf("# uccl_perf coll --op %s: %d ranks, uccl over %s (asked: %s), on %s (%ld CPUs)\n",
           uccl_coll_op_name(c->o.op), c->n, c->transport,
           c->o.transport ? c->o.transport : "default", host, cpus);
    if (c->o.cuda)
        printf("# cuda memory; reference (mpi column): cuda d2d copy of the bytes each rank "
               "receives, all ranks at once\n");
    else
        printf("# reference mpi: Open MPI in this job (%s)\n", c->o.no_ref ? "none" : mpi_path());
    printf("# reference ucx: Open MPI over UCX, its own mpirun before this table (%s)\n",
           ucx_text(c));
    printf("# x best = uccl busbw / the better of the two references' busbw; pl/call = plain "
           "call time / persistent start time\n");
    printf("# %10s %12s %-8s %6s %10s %8s %8s %10s %10s %8s %10s %8s %7s %7s %7s\n", "count(B)",
           "size(B)", "algo", "iters", "uccl(us)", "algbw", "busbw", "plan(us)", "mpi(us)", "busbw",
           "ucx(us)", "busbw", "x best", "pl/call", "#wrong");
}

static void print_row(const coll_ctx_t *c, const coll_row_t *r)
{
    double bu = busbw_gbs(c, r, r->uccl_s), bm = busbw_gbs(c, r, r->mpi_s),
           bx = busbw_gbs(c, r, r->ucx_s), best = bm > bx ? bm : bx;

    printf("  %10zu %12zu %-8s %6d %10.2f %8.3f %8.3f %10.2f %10.2f %8.3f %10.2f %8.3f %7.3f "
           "%7.3f %7lld\n",
           r->count, r->size, r->algo, r->iters, r->uccl_s * 1e6,
           r->uccl_s > 0 ? (double)r->size / r->uccl_s / 1e9 : 0, bu, r->plan_s * 1e6,
           r->mpi_s * 1e6, bm, r->ucx_s * 1e6, bx, best > 0 ? bu / best : 0,
           r->plan_s > 0 ? r->uccl_s / r->plan_s : 0, r->wrong);
    fflush(stdout);
}

static int write_json(const coll_ctx_t *c, const coll_row_t *rows, int n)
{
    FILE *f = fopen(c->o.json, "w");
    char host[64] = "?";

    if (f == NULL) {
        fprintf(stderr, "uccl_perf coll: cannot write %s: %s\n", c->o.json, strerror(errno));
        return -1;
    }
    gethostname(host, sizeof(host) - 1);
    fprintf(f, "{\"benchmark\": \"uccl_perf coll\", \"op\": \"%s\", \"ranks\": %d, "
               "\"transport\": \"%s\", \"host\": \"%s\", \"cpus\": %ld, "
               "\"mem\": \"%s\", \"reference\": \"%s\", \"reference_ucx\": \"%s\", \"rounds\": %d,\n"
               " \"rows\": [\n",
            uccl_coll_op_name(c->o.op), c->n, c->transport, host,
            sysconf(_SC_NPROCESSORS_ONLN), c->o.cuda ? "cuda" : "host",
            c->o.cuda ? "cuda d2d copy of the bytes each rank receives"
                      : c->o.no_ref ? "none" : mpi_path(), ucx_text(c),
            c->o.rounds);
    for (int i = 0; i < n; i++) {
        const coll_row_t *r = &rows[i];
        fprintf(f, "  {\"count\": %zu, \"size\": %zu, \"algo\": \"%s\", \"iters\": %d, "
                   "\"uccl_us\": %.3f, \"uccl_busbw_gbs\": %.4f, \"plan_us\": %.3f, "
                   "\"%s_us\": %.3f, \"%s_busbw_gbs\": %.4f, \"ucx_us\": %.3f, "
                   "\"ucx_busbw_gbs\": %.4f, \"wrong\": %lld}%s\n",
                r->count, r->size, r->algo, r->iters, r->uccl_s * 1e6, busbw_gbs(c, r, r->uccl_s),
                r->plan_s * 1e6, c->o.cuda ? "copy" : "mpi", r->mpi_s * 1e6,
                c->o.cuda ? "copy" : "mpi", busbw_gbs(c, r, r->mpi_s), r->ucx_s * 1e6,
                busbw_gbs(c, r, r->ucx_s), r->wrong, i + 1 < n ? "," : "");
    }
    fprintf(f, " ]}\n");
    return fclose(f) == 0 ? 0 : -1;
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
 * it when it has fewer GPUs than ranks); no UCX reference. */
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
    MPI_Comm_free(&node);
    ep->field_mask |= UCCL_ENGINE_PARAM_GPU_INDEX;
    ep->gpu_index = local % ngpu;
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
    if (c->o.cuda) {
        uccl_engine_t *e = uccl_comm_engine(c->comm);
        void *sp = NULL, *rp = NULL;
        if ((st = uccl_mem_alloc(e, UCCL_MEM_CUDA, sb ? sb : 1, &sp)) != UCCL_OK ||
            (st = uccl_mem_alloc(e, UCCL_MEM_CUDA, rb ? rb : 1, &rp)) != UCCL_OK ||
            (st = uccl_mem_alloc(e, UCCL_MEM_CUDA, rb ? rb : 1, &c->dsrc)) != UCCL_OK)
            coll_fail(c, "uccl_mem_alloc of GPU buffers", st);
        c->send = sp;
        c->recv = rp;
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
    rc = rows == NULL ? -1 : coll_parse_args(argc, argv, &c.o, c.rank == 0);
    if (rc == 0)
        rc = coll_setup(&c);
    for (size_t count = c.o.min; rc == 0 && count <= c.o.max && nrows < COLL_ROWS_MAX;
         count = count ? count * 2 : 1)
        rows[nrows++].count = count;
    if (rc == 0 && c.o.ucx && !c.o.no_ref && !c.o.ref_only)
        ucx_reference(&c, argc, argv, rows, nrows);
    if (rc == 0 && c.rank == 0)
        print_header(&c);
    for (int i = 0; rc == 0 && i < nrows; i++) {
        double ucx = rows[i].ucx_s;
        run_size(&c, rows[i].count, &rows[i]);
        rows[i].ucx_s = ucx;
        if (c.rank == 0)
            print_row(&c, &rows[i]);
    }
    if (rc == 0 && c.rank == 0 && c.o.json != NULL)
        rc = write_json(&c, rows, nrows);
    for (int i = 0; rc == 0 && i < nrows; i++)
        rc = rows[i].wrong != 0 ? -1 : 0; /* a wrong byte fails the run */
    if (c.comm != NULL && c.o.cuda) {
        uccl_engine_t *e = uccl_comm_engine(c.comm);
        uccl_comm_coll_flush(c.comm);
        uccl_mem_free(e, c.send);
        uccl_mem_free(e, c.recv);
        uccl_mem_free(e, c.dsrc);
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

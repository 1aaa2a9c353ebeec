/* uccl_perf coll: options, the nccl-tests-style table and the JSON
 * (split from tools/perf_coll.c, which runs the measurements). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uccl/uccl_coll.h>

#include "perf_coll.h"
#include "perf_opts.h"

static void coll_usage(void)
{
    fprintf(stderr,
            "usage: mpirun -np N uccl_perf coll --op OP [options]\n"
            "  --op allgather|allgatherv|alltoall|alltoallv|bcast|gather|scatter\n"
            "  --algo NAME            force an algorithm (direct, ring, pairwise, bruck,\n"
            "                         binomial, scatter_allgather, linear, hier, mapped;\n"
            "                         default: auto)\n"
            "  --transport LIST       transports the engine may use, e.g. shm or tcp\n"
            "  --stream               with --mem cuda: time the stream-ordered form (each call's\n"
            "                         stream synchronized); UCCL_COLL_STREAM=hold: the old path\n"
            "  --mem host|uccl|cuda   buffer memory (default host: aligned_alloc); uccl: host\n"
            "                         memory of uccl_mem_alloc (shared, peers map it; the MPI\n"
            "                         column uses the same buffers); cuda: GPU local_rank %% count,\n"
            "                         the reference (mpi column) is then a device-to-device\n"
            "                         copy of the bytes each rank receives, all ranks at once;\n"
            "                         ranks of one host add the peer-copy ceiling (every rank\n"
            "                         copies to every other GPU at once; PERF_PEER_MODE=streams|\n"
            "                         one|pull|self varies it), the same by the library's\n"
            "                         copy kernel, and NCCL (one GPU a rank)\n"
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
    case 's': o->stream = 1; break;
    case 'g':
        bad = strcmp(arg, "host") != 0 && strcmp(arg, "cuda") != 0 && strcmp(arg, "uccl") != 0;
        o->cuda = strcmp(arg, "cuda") == 0;
        o->uccl_host = strcmp(arg, "uccl") == 0;
        break;
    default: bad = 1; break;
    }
    if (bad && verbose)
        fprintf(stderr, "uccl_perf coll: bad value '%s' for an option (see the usage below)\n",
                arg ? arg : "");
    return bad ? -1 : 0;
}

int perf_coll_parse_args(int argc, char **argv, coll_opts_t *o, int verbose)
{
    static const struct option longopts[] = {
        {"op", required_argument, NULL, 'o'},       {"algo", required_argument, NULL, 'a'},
        {"transport", required_argument, NULL, 't'}, {"min", required_argument, NULL, 'm'},
        {"max", required_argument, NULL, 'M'},      {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},   {"rounds", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},     {"no-ref", no_argument, NULL, 'n'},
        {"ref-only", no_argument, NULL, 'R'},       {"ucx-ref", required_argument, NULL, 'u'},
        {"ucx-tls", required_argument, NULL, 'T'},  {"mpirun", required_argument, NULL, 'P'},
        {"mem", required_argument, NULL, 'g'},       {"stream", no_argument, NULL, 's'},
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
    if (o->stream && !o->cuda) {
        if (verbose)
            fprintf(stderr, "uccl_perf coll: --stream needs --mem cuda\n");
        return -1;
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

/* The ceiling moves count bytes from every rank to every other: per rank
 * (n-1) * count out and in, whatever the op (for bcast too: a bcast's
 * busbw cannot pass what one GPU takes in). */
static double ceil_gbs(const coll_ctx_t *c, const coll_row_t *row, double t)
{
    return t > 0 ? (double)(c->n - 1) * (double)row->count / t / 1e9 : 0;
}

static double peer_gbs(const coll_ctx_t *c, const coll_row_t *row)
{
    return ceil_gbs(c, row, row->peer_s);
}

static int gpu_refs(const coll_ctx_t *c)
{
    return c->o.cuda && c->gref != NULL;
}

/* --mem cuda on several ranks of one host: uccl, the local copy, the
 * ceiling and NCCL (each call waited for; queued), one row a size. */
static void print_gpu_header(const coll_ctx_t *c)
{
    printf("# cuda memory, rank r on GPU local_rank %% %d; references in the same run, in turns "
           "with uccl:\n#   copy: each rank's d2d copy of the bytes it receives (all ranks at "
           "once)\n#   peer: every rank cudaMemcpyAsync's count bytes to every other rank's "
           "GPU at once (IPC, a stream per peer, both directions of every link busy), each "
           "call waited for: the ceiling (PERF_PEER_MODE %s); busbw = (n-1)*count/time\n"
           "#   kern: the same copies by the library's copy kernel (%s)\n"
           "#   nccl (%s): each call "
           "waited for (as uccl's blocking call); ncclq: the timed calls queued, one "
           "sync (nccl-tests style)\n", c->ngpu, perf_coll_gpu_peer_mode(), perf_coll_gpu_kern_text(c),
           c->nccl_why);
    printf("# %10s %12s %-8s %6s %10s %8s %10s %10s %8s %10s %8s %10s %8s %10s %8s %10s %8s %6s %6s %6s "
           "%6s %7s\n",
           "count(B)", "size(B)", "algo", "iters", "uccl(us)", "busbw", "plan(us)", "copy(us)",
           "busbw", "peer(us)", "busbw", "kern(us)", "busbw", "nccl(us)", "busbw", "ncclq(us)", "busbw",
           "x peer", "x kern", "x nccl", "x nq", "#wrong");
}

static void print_gpu_row(const coll_ctx_t *c, const coll_row_t *r)
{
    double bu = busbw_gbs(c, r, r->uccl_s), bp = peer_gbs(c, r), bn = busbw_gbs(c, r, r->nccl_s),
           bq = busbw_gbs(c, r, r->ncclq_s), bk = ceil_gbs(c, r, r->kern_s);

    printf("  %10zu %12zu %-8s %6d %10.2f %8.2f %10.2f %10.2f %8.2f %10.2f %8.2f %10.2f %8.2f %10.2f %8.2f "
           "%10.2f %8.2f %6.3f %6.3f %6.3f %6.3f %7lld\n",
           r->count, r->size, r->algo, r->iters, r->uccl_s * 1e6, bu, r->plan_s * 1e6,
           r->mpi_s * 1e6, busbw_gbs(c, r, r->mpi_s), r->peer_s * 1e6, bp, r->kern_s * 1e6, bk,
           r->nccl_s * 1e6, bn, r->ncclq_s * 1e6, bq, bp > 0 ? bu / bp : 0, bk > 0 ? bu / bk : 0,
           bn > 0 ? bu / bn : 0, bq > 0 ? bu / bq : 0, r->wrong);
    fflush(stdout);
}

void perf_coll_print_header(const coll_ctx_t *c)
{
    char host[64] = "?";
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    gethostname(host, sizeof(host) - 1);
    printf("# uccl_perf coll --op %s: %d ranks, uccl over %s (asked: %s), on %s (%ld CPUs)\n",
           uccl_coll_op_name(c->o.op), c->n, c->transport,
           c->o.transport ? c->o.transport : "default", host, cpus);
    if (c->o.uccl_host)
        printf("# host buffers of uccl_mem_alloc (memfd, shared), the mpi column's too; the ucx "
               "column's run allocates its own with aligned_alloc\n");
    if (gpu_refs(c)) {
        print_gpu_header(c);
        return;
    }
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

void perf_coll_print_row(const coll_ctx_t *c, const coll_row_t *r)
{
    double bu = busbw_gbs(c, r, r->uccl_s), bm = busbw_gbs(c, r, r->mpi_s),
           bx = busbw_gbs(c, r, r->ucx_s), best = bm > bx ? bm : bx;

    if (c->rank == 0 && c->o.stream && r->host_s > 0)
        printf("# stream call at count %zu: %.2f us of CPU inside uccl_coll_post_stream per call "
               "(slowest rank)\n", r->count, r->host_s * 1e6);
    if (gpu_refs(c)) {
        print_gpu_row(c, r);
        return;
    }
    printf("  %10zu %12zu %-8s %6d %10.2f %8.3f %8.3f %10.2f %10.2f %8.3f %10.2f %8.3f %7.3f "
           "%7.3f %7lld\n",
           r->count, r->size, r->algo, r->iters, r->uccl_s * 1e6,
           r->uccl_s > 0 ? (double)r->size / r->uccl_s / 1e9 : 0, bu, r->plan_s * 1e6,
           r->mpi_s * 1e6, bm, r->ucx_s * 1e6, bx, best > 0 ? bu / best : 0,
           r->plan_s > 0 ? r->uccl_s / r->plan_s : 0, r->wrong);
    fflush(stdout);
}

/* text as a JSON string: quoted; quotes, backslashes and control characters escaped */
static void json_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

int perf_coll_write_json(const coll_ctx_t *c, const coll_row_t *rows, int n)
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
               "\"mem\": \"%s\", \"reference\": ",
            uccl_coll_op_name(c->o.op), c->n, c->transport, host,
            sysconf(_SC_NPROCESSORS_ONLN), c->o.cuda ? "cuda" : c->o.uccl_host ? "uccl" : "host");
    /* escaped: the MCA variables' values, and the UCX job's last line of
     * output (Open MPI's errors quote options: unknown option "--mca") */
    json_string(f, c->o.cuda ? "cuda d2d copy of the bytes each rank receives"
                             : c->o.no_ref ? "none" : mpi_path());
    fprintf(f, ", \"reference_ucx\": ");
    json_string(f, ucx_text(c));
    fprintf(f, ", \"rounds\": %d,\n"
               " \"gpus\": %d, \"nccl\": \"%s\", \"peer_mode\": \"%s\", \"kern\": \"%s\",\n"
               " \"rows\": [\n",
            c->o.rounds, c->o.cuda ? c->ngpu : 0, gpu_refs(c) ? c->nccl_why : "not run",
            perf_coll_gpu_peer_mode(), gpu_refs(c) ? perf_coll_gpu_kern_text(c) : "not run");
    for (int i = 0; i < n; i++) {
        const coll_row_t *r = &rows[i];
        fprintf(f, "  {\"count\": %zu, \"size\": %zu, \"algo\": \"%s\", \"iters\": %d, "
                   "\"uccl_us\": %.3f, \"uccl_busbw_gbs\": %.4f, \"plan_us\": %.3f, "
                   "\"%s_us\": %.3f, \"%s_busbw_gbs\": %.4f, \"ucx_us\": %.3f, "
                   "\"ucx_busbw_gbs\": %.4f, \"peer_us\": %.3f, \"peer_busbw_gbs\": %.4f, "
                   "\"kern_us\": %.3f, \"kern_busbw_gbs\": %.4f, \"nccl_us\": %.3f, \"nccl_busbw_gbs\": %.4f, \"ncclq_us\": %.3f, "
                   "\"ncclq_busbw_gbs\": %.4f, \"host_us\": %.3f, \"wrong\": %lld}%s\n",
                r->count, r->size, r->algo, r->iters, r->uccl_s * 1e6, busbw_gbs(c, r, r->uccl_s),
                r->plan_s * 1e6, c->o.cuda ? "copy" : "mpi", r->mpi_s * 1e6,
                c->o.cuda ? "copy" : "mpi", busbw_gbs(c, r, r->mpi_s), r->ucx_s * 1e6,
                busbw_gbs(c, r, r->ucx_s), r->peer_s * 1e6, peer_gbs(c, r), r->kern_s * 1e6,
                ceil_gbs(c, r, r->kern_s), r->nccl_s * 1e6,
                busbw_gbs(c, r, r->nccl_s), r->ncclq_s * 1e6, busbw_gbs(c, r, r->ncclq_s), r->host_s * 1e6,
                r->wrong, i + 1 < n ? "," : "");
    }
    fprintf(f, " ]}\n");
    return fclose(f) == 0 ? 0 : -1;
}


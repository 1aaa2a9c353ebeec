/* uccl_perf: command line, the human table and the JSON file. */
#include "perf_opts.h"

#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <uccl/uccl.h>

#define PERF_DEFAULT_MIN 4096
#define PERF_DEFAULT_MAX (64 << 20)
#define PERF_MAX_SIZE ((size_t)1 << 30) /* MPI counts are int */

static void usage(void)
{
    fprintf(stderr,
            "usage: mpirun -np 2 uccl_perf p2p [options]\n"
            "  --op send|write|read   operation measured (default send); a comma list, e.g.\n"
            "                         write,read,send, measures each in turn in one job\n"
            "                         (with --no-ref, host memory, without --json)\n"
            "  --transport LIST       transports the engine may use, e.g. shm or tcp\n"
            "                         (default: $UCCL_TRANSPORTS, else every usable one)\n"
            "  --min SIZE             smallest message (default 4K; K/M/G suffixes)\n"
            "  --max SIZE             largest message, sizes double (default 64M, at most 1G)\n"
            "  --iters N              timed windows per size (default: 256 MiB / (size*window),\n"
            "                         between 3 and 200)\n"
            "  --warmup N             untimed windows per size first (default 2)\n"
            "  --window W             transfers in flight per window (default 16)\n"
            "  --sliding              keep W transfers in flight, posting the next one as the\n"
            "                         oldest completes, no drain per window (as ucx_perftest\n"
            "                         -O W and perftest's tx depth); send: rank 1 keeps W\n"
            "                         receives posted, reposting each as it completes, and\n"
            "                         acks once at the end, and the MPI reference slides\n"
            "                         alike; write/read: the MPI reference keeps its windows\n"
            "                         (a put or get completes only at a flush, which waits\n"
            "                         for all), as do the --mem cuda references\n"
            "  --rounds N             per size, time uccl then each reference N times\n"
            "                         alternately and report the medians (default 1, at most 15)\n"
            "  --json FILE            also write the results as JSON\n"
            "  --no-ref               uccl only, no reference (its columns read 0)\n"
            "  --mem host|cuda        buffers in host memory (default) or on the GPUs (GPU =\n"
            "                         local rank %% GPU count; e.g. --transport gpu_ipc)\n"
            "  --peer-mem host        with --mem cuda: the target's (rank 1's) buffer in host\n"
            "                         memory, so that a GPU source or sink meets a host\n"
            "                         peer (write/read; the uccl column only)\n"
            "The MPI reference (MPI_Isend/Irecv, MPI_Put/MPI_Get with lock_all+flush) runs\n"
            "the same pattern in the same job; choose its path with mpirun --mca btl ...;\n"
            "with --transport tcp it is pinned to Open MPI's tcp path (btl tcp,self, pml ob1,\n"
            "osc pt2pt). The header and the JSON say which path it used.\n"
            "With --mem cuda the references are a plain single-stream cudaMemcpyAsync between\n"
            "the same IPC-mapped buffers and NCCL send/recv (when libnccl.so.2 loads).\n");
}

int perf_parse_size(const char *text, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    /* compared before the shift: 17179869185G would wrap to 1G */
    if (*end != '\0' || v == 0 || v > (PERF_MAX_SIZE >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

int perf_parse_int(const char *text, int min, int max, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* One name, or a comma list of at most 3 (each its own row block). */
static int parse_op(const char *text, perf_opts_t *o)
{
    static const char *const names[] = {"send", "write", "read"};

    o->nops = 0;
    for (const char *p = text;; p++) {
        size_t n = strcspn(p, ",");
        int i = 0;

        while (i < 3 && (strlen(names[i]) != n || strncmp(p, names[i], n) != 0))
            i++;
        if (i == 3 || o->nops == 3)
            return -1;
        o->ops[o->nops++] = (perf_op_t)i;
        p += n;
        if (*p == '\0')
            break;
    }
    o->op = o->ops[0];
    return 0;
}

static int parse_one(int opt, const char *arg, perf_opts_t *o)
{
    switch (opt) {
    case 'o': return parse_op(arg, o);
    case 't': o->transport = arg; return 0;
    case 'a': return perf_parse_size(arg, &o->min);
    case 'b': return perf_parse_size(arg, &o->max);
    case 'i': return perf_parse_int(arg, 1, 1000000, &o->iters);
    case 'w': return perf_parse_int(arg, 0, 1000000, &o->warmup);
    case 'W': return perf_parse_int(arg, 1, 1000000, &o->window);
    case 'r': return perf_parse_int(arg, 1, 1000000, &o->rounds) || o->rounds > PERF_ROUNDS_MAX ? -1 : 0;
    case 'j': o->json = arg; return 0;
    case 'n': o->no_ref = 1; return 0;
    case 's': o->sliding = 1; return 0;
    case 'm':
        if (strcmp(arg, "host") == 0 || strcmp(arg, "cuda") == 0) {
            o->mem = arg[0] == 'c' ? PERF_MEM_CUDA : PERF_MEM_HOST;
            return 0;
        }
        return -1;
    case 'p':
        if (strcmp(arg, "host") == 0 || strcmp(arg, "cuda") == 0) {
            o->peer_host = arg[0] == 'h';
            return 0;
        }
        return -1;
    default: return -1;
    }
}

static const struct option perf_longopts[] = {
    {"op", required_argument, NULL, 'o'},     {"transport", required_argument, NULL, 't'},
    {"min", required_argument, NULL, 'a'},    {"max", required_argument, NULL, 'b'},
    {"iters", required_argument, NULL, 'i'},  {"warmup", required_argument, NULL, 'w'},
    {"window", required_argument, NULL, 'W'}, {"json", required_argument, NULL, 'j'},
    {"mem", required_argument, NULL, 'm'},    {"no-ref", no_argument, NULL, 'n'},
    {"rounds", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'},
    {"peer-mem", required_argument, NULL, 'p'}, {"sliding", no_argument, NULL, 's'},
    {NULL, 0, NULL, 0},
};

static const char *long_name(int opt)
{
    for (const struct option *l = perf_longopts; l->name != NULL; l++)
        if (l->val == opt)
            return l->name;
    return "?";
}

/* Parse into o; on an error print (when verbose) what was wrong, then the usage. */
int perf_parse_args(int argc, char **argv, perf_opts_t *o, int verbose)
{
    char path[sizeof(o->ref_path)];
    int opt;

    memcpy(path, o->ref_path, sizeof(path));
    *o = (perf_opts_t){.op = PERF_OP_SEND, .min = PERF_DEFAULT_MIN, .max = PERF_DEFAULT_MAX,
                       .warmup = 2, .window = 16, .rounds = 1};
    memcpy(o->ref_path, path, sizeof(path));
    opterr = verbose; /* getopt names an unknown option or a missing argument itself */
    if (argc < 2 || strcmp(argv[1], "p2p") != 0) {
        if (verbose)
            fprintf(stderr, "uccl_perf: the first argument names the benchmark: p2p (usage "
                            "below) or coll (uccl_perf coll prints its own)%s%s%s\n",
                    argc < 2 ? "" : " (not '", argc < 2 ? "" : argv[1], argc < 2 ? "" : "')");
        goto err_usage;
    }
    optind = 2;
    while ((opt = getopt_long(argc, argv, "", perf_longopts, NULL)) != -1) {
        if (opt == '?' || opt == 'h')
            goto err_usage;
        if (parse_one(opt, optarg, o) != 0) {
            if (verbose)
                fprintf(stderr, "uccl_perf: invalid value '%s' for --%s\n", optarg, long_name(opt));
            goto err_usage;
        }
    }
    if (optind != argc) {
        if (verbose)
            fprintf(stderr, "uccl_perf: unexpected argument '%s'\n", argv[optind]);
        goto err_usage;
    }
    if (o->nops > 1 && (!o->no_ref || o->mem != PERF_MEM_HOST || o->json != NULL)) {
        if (verbose)
            fprintf(stderr, "uccl_perf: a list of ops is for --no-ref in host memory, without --json\n");
        goto err_usage;
    }
    if (o->nops == 0) { /* no --op: the default */
        o->ops[0] = o->op;
        o->nops = 1;
    }
    if (o->min > o->max) {
        if (verbose)
            fprintf(stderr, "uccl_perf: --min %zu is larger than --max %zu\n", o->min, o->max);
        goto err_usage;
    }
    return 0;

err_usage:
    if (verbose)
        usage();
    return -1;
}

/* The value of --transport in argv, or NULL (argv is not parsed yet). */
static const char *transport_arg(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--transport=", 12) == 0)
            return argv[i] + 12;
    }
    return NULL;
}

void perf_pin_mpi_path(int argc, char **argv, char *path, size_t len)
{
    const char *tp = transport_arg(argc, argv), *btl = getenv("OMPI_MCA_btl");
    const char *pml = getenv("OMPI_MCA_pml"), *osc = getenv("OMPI_MCA_osc");

    if (tp != NULL && strcmp(tp, "tcp") == 0) {
        /* Open MPI reads its MCA parameters from the environment in MPI_Init;
         * pt2pt is its one-sided component that runs over btl tcp */
        snprintf(path, len, "btl tcp,self, pml ob1, osc pt2pt (pinned to match --transport tcp%s%s)",
                 btl != NULL ? "; OMPI_MCA_btl was " : "", btl != NULL ? btl : "");
        setenv("OMPI_MCA_pml", "ob1", 1);
        setenv("OMPI_MCA_btl", "tcp,self", 1);
        setenv("OMPI_MCA_osc", "pt2pt", 1);
    } else if (pml != NULL || osc != NULL) {
        /* e.g. --mca pml ucx --mca osc ucx --mca btl self: the data takes
         * UCX, and the btl alone would name the wrong path */
        snprintf(path, len, "pml %s, osc %s, btl %s (OMPI_MCA_pml, _osc, _btl, e.g. mpirun --mca pml ucx)",
                 pml != NULL ? pml : "default", osc != NULL ? osc : "default",
                 btl != NULL ? btl : "default");
    } else if (btl != NULL) {
        snprintf(path, len, "btl %s (OMPI_MCA_btl, e.g. mpirun --mca btl)", btl);
    } else {
        snprintf(path, len, "the MPI library's default (Open MPI: shared memory, btl vader, "
                            "between ranks of one host)");
    }
}

static const char *op_name(perf_op_t op)
{
    return op == PERF_OP_SEND ? "send" : op == PERF_OP_WRITE ? "write" : "read";
}

static const char *ref_pattern(perf_op_t op, int sliding)
{
    if (op == PERF_OP_SEND && sliding)
        return "MPI_Isend/MPI_Irecv, window in flight, each reposted as it completes + 0-byte ack";
    return op == PERF_OP_SEND    ? "MPI_Isend/MPI_Irecv + 0-byte ack"
           : op == PERF_OP_WRITE ? "MPI_Put, MPI_Win_lock_all + MPI_Win_flush"
                                 : "MPI_Get, MPI_Win_lock_all + MPI_Win_flush";
}

/* "Open MPI v4.1.4" out of the library's multi-line version text. */
static void mpi_name(char *buf, size_t len)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;

    MPI_Get_library_version(text, &n);
    text[strcspn(text, ",\n")] = '\0';
    snprintf(buf, len, "%s", text);
}

static void machine_name(char *buf, size_t len)
{
    struct utsname u;
    char host[128] = "?";

    gethostname(host, sizeof(host) - 1);
    if (uname(&u) != 0)
        snprintf(u.release, sizeof(u.release), "?");
    snprintf(buf, len, "%s, %ld CPUs, Linux %s", host, sysconf(_SC_NPROCESSORS_ONLN), u.release);
}

static const char *gpu_ref_pattern(perf_op_t op)
{
    return op == PERF_OP_READ ? "plain: rank 0 cudaMemcpyAsync from rank 1's IPC-mapped buffer, "
                                "one stream, one stream sync per window; NCCL: rank 1 ncclSend, "
                                "rank 0 ncclRecv, 1-byte ack back, one stream sync per window"
                              : "plain: rank 0 cudaMemcpyAsync into rank 1's IPC-mapped buffer, "
                                "one stream, one stream sync per window; NCCL: rank 0 ncclSend, "
                                "rank 1 ncclRecv, 1-byte ack back, one stream sync per window";
}

static void print_gpu_header(const perf_opts_t *o, const char *conn_transport, const char *gpu,
                             const char *machine)
{
    printf("# uccl_perf p2p --op %s --mem cuda: uccl %s over %s (asked: %s), %s, window %d, on %s\n",
           op_name(o->op), uccl_version(), conn_transport, o->transport ? o->transport : "default",
           gpu, o->window, machine);
    printf("# references in the same run, same sizes, window and iterations: %s\n",
           o->no_ref ? "none (--no-ref)" : gpu_ref_pattern(o->op));
    if (o->rounds > 1)
        printf("# each time: the median of %d rounds, uccl and the references alternating\n",
               o->rounds);
    printf("# GB/s = size*transfers/time on rank 0 (1 GB = 1e9 B); us = the same time per "
           "transfer\n#   (a window of %d in flight%s); x = uccl / reference (GB/s); last "
           "uccl window verified byte for byte\n", o->window,
           o->window == 1 ? ": with window 1 this is post-to-completion latency" : ", not a latency");
    if (o->op == PERF_OP_SEND)
        printf("# copy+ack: the plain copy, then per window rank 0 tells rank 1 through a host flag and "
               "waits for its ack flag\n#   (the notification and ack uccl's send loop has, which the "
               "plain copy lacks)\n");
    printf("%10s %9s %9s %9s %9s %7s %9s %9s %7s%s\n", "size", "uccl GB/s", "uccl us", "copy GB/s",
           "copy us", "x copy", "nccl GB/s", "nccl us", "x nccl",
           o->op == PERF_OP_SEND ? "  c+ack us x c+ack" : "");
    fflush(stdout);
}

void perf_print_header(const perf_opts_t *o, const char *conn_transport, const char *gpu)
{
    char mpi[256], machine[256];

    machine_name(machine, sizeof(machine));
    if (gpu != NULL) {
        print_gpu_header(o, conn_transport, gpu, machine);
        return;
    }
    mpi_name(mpi, sizeof(mpi));
    printf("# uccl_perf p2p --op %s: uccl %s over %s (asked: %s), window %d%s, on %s\n",
           op_name(o->op), uccl_version(), conn_transport,
           o->transport ? o->transport : "default", o->window,
           o->sliding ? " sliding (--sliding: the next posted as the oldest completes)" : "", machine);
    if (o->no_ref)
        printf("# reference: none (--no-ref)\n");
    else
        printf("# reference: %s, %s; path: %s\n", mpi, ref_pattern(o->op, o->sliding), o->ref_path);
    if (o->rounds > 1)
        printf("# each time: the median of %d rounds, uccl and the reference alternating\n",
               o->rounds);
    printf("# GB/s = size*transfers/time on rank 0 (1 GB = 1e9 B); us/op = the same time per "
           "transfer\n#   (a window of %d in flight, not a ping-pong latency); last window of "
           "each size verified byte for byte\n", o->window);
    printf("%10s %11s %11s %11s %11s %7s\n", "size", "uccl GB/s", "uccl us/op", "ref GB/s",
           "ref us/op", "ratio");
    fflush(stdout);
}

static double gbps(const perf_row_t *r, double t)
{
    return t > 0 ? (double)r->size * r->ops / t / 1e9 : 0;
}

static double us_op(const perf_row_t *r, double t)
{
    return t > 0 ? t / r->ops * 1e6 : 0;
}

void perf_print_row(const perf_opts_t *o, const perf_row_t *r)
{
    double u = gbps(r, r->uccl_s), m = gbps(r, r->ref_s), n = gbps(r, r->nccl_s);

    if (o->mem == PERF_MEM_CUDA) {
        double a = gbps(r, r->told_s);

        printf("%10zu %9.2f %9.2f %9.2f %9.2f %7.3f %9.2f %9.2f %7.3f", r->size, u,
               us_op(r, r->uccl_s), m, us_op(r, r->ref_s), m > 0 ? u / m : 0, n,
               us_op(r, r->nccl_s), n > 0 ? u / n : 0);
        if (o->op == PERF_OP_SEND)
            printf(" %9.2f %7.3f", us_op(r, r->told_s), a > 0 ? u / a : 0);
        printf("\n");
        fflush(stdout);
        return;
    }
    printf("%10zu %11.3f %11.2f %11.3f %11.2f %7.2f\n", r->size, u, r->uccl_s / r->ops * 1e6, m,
           r->ref_s / r->ops * 1e6, m > 0 ? u / m : 0);
    fflush(stdout);
}

static void json_gpu_rows(FILE *f, const perf_row_t *rows, int nrows)
{
    for (int i = 0; i < nrows; i++) {
        const perf_row_t *r = &rows[i];
        double u = gbps(r, r->uccl_s), m = gbps(r, r->ref_s), n = gbps(r, r->nccl_s);
        double a = gbps(r, r->told_s);
        fprintf(f, "  {\"size\": %zu, \"uccl_gbps\": %.4f, \"uccl_us\": %.3f, \"copy_gbps\": %.4f, "
                   "\"copy_us\": %.3f, \"ratio_copy\": %.4f, \"nccl_gbps\": %.4f, \"nccl_us\": %.3f, "
                   "\"ratio_nccl\": %.4f, \"copy_ack_us\": %.3f, \"ratio_copy_ack\": %.4f}%s\n",
                r->size, u, us_op(r, r->uccl_s), m, us_op(r, r->ref_s), m > 0 ? u / m : 0, n,
                us_op(r, r->nccl_s), n > 0 ? u / n : 0, us_op(r, r->told_s), a > 0 ? u / a : 0,
                i + 1 < nrows ? "," : "");
    }
}

int perf_write_json(const perf_opts_t *o, const char *conn_transport, const char *gpu,
                    const perf_row_t *rows, int nrows)
{
    char mpi[256], machine[256];
    FILE *f = fopen(o->json, "w");

    if (f == NULL) {
        fprintf(stderr, "uccl_perf: cannot write %s: %s\n", o->json, strerror(errno));
        return -1;
    }
    mpi_name(mpi, sizeof(mpi));
    machine_name(machine, sizeof(machine));
    if (gpu != NULL) {
        fprintf(f, "{\"machine\": \"%s\", \"transport\": \"%s\", \"mem\": \"cuda\", \"gpu\": \"%s\", "
                   "\"op\": \"%s\", \"window\": %d, \"rounds\": %d,\n \"reference\": \"%s%s\",\n \"rows\": [\n",
                machine, conn_transport, gpu, op_name(o->op), o->window, o->rounds,
                o->no_ref ? "none (--no-ref)" : gpu_ref_pattern(o->op),
                o->op == PERF_OP_SEND && !o->no_ref
                    ? "; copy_ack: the plain copy, then per window rank 0 sets a host flag "
                      "rank 1 waits for and waits for rank 1's ack flag" : "");
        json_gpu_rows(f, rows, nrows);
        goto out;
    }
    fprintf(f, "{\"machine\": \"%s\", \"transport\": \"%s\", \"op\": \"%s\", \"window\": %d, "
               "\"sliding\": %s, \"rounds\": %d,\n \"reference\": \"%s (%s)\",\n \"reference_path\": \"%s\",\n"
               " \"rows\": [\n",
            machine, conn_transport, op_name(o->op), o->window, o->sliding ? "true" : "false",
            o->rounds, o->no_ref ? "none" : mpi,
            o->no_ref ? "--no-ref" : ref_pattern(o->op, o->sliding), o->no_ref ? "none" : o->ref_path);
    for (int i = 0; i < nrows; i++) {
        const perf_row_t *r = &rows[i];
        double u = gbps(r, r->uccl_s), m = gbps(r, r->ref_s);
        fprintf(f, "  {\"size\": %zu, \"uccl_gbps\": %.4f, \"uccl_us\": %.3f, \"ref_gbps\": %.4f, "
                   "\"ref_us\": %.3f, \"ratio\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f}%s\n",
                r->size, u, r->uccl_s / r->ops * 1e6, m, r->ref_s / r->ops * 1e6,
                m > 0 ? u / m : 0, r->ratio_lo, r->ratio_hi, i + 1 < nrows ? "," : "");
    }
out:
    fprintf(f, " ]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "uccl_perf: writing %s: %s\n", o->json, strerror(errno));
        return -1;
    }
    return 0;
}

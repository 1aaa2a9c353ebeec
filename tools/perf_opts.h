/* uccl_perf's options, result rows and output (table and JSON). */
#ifndef UCCL_TOOLS_PERF_OPTS_H
#define UCCL_TOOLS_PERF_OPTS_H

#include <stddef.h>

typedef enum { PERF_OP_SEND, PERF_OP_WRITE, PERF_OP_READ } perf_op_t;
typedef enum { PERF_MEM_HOST, PERF_MEM_CUDA } perf_mem_t;

typedef struct perf_opts {
    perf_op_t op;
    perf_op_t ops[3]; /* --op a,b,c: each in turn in one job (uccl_perf.c sets op from it) */
    int nops;
    perf_mem_t mem;
    int peer_host; /* --peer-mem host: rank 1's buffer in host memory (one-sided) */
    const char *transport; /* NULL = UCCL_TRANSPORTS / all usable */
    size_t min, max;
    int iters; /* 0 = by size */
    int warmup;
    int window;
    int sliding;      /* 1 = keep `window` in flight, one posted as one completes */
    const char *json; /* NULL = no JSON */
    int no_ref;       /* 1 = uccl only */
    int rounds;       /* per size: uccl then the references, this many times; medians */
    char ref_path[192]; /* the MPI path the reference uses (perf_pin_mpi_path) */
} perf_opts_t;

#define PERF_ROUNDS_MAX 15

typedef struct perf_row {
    size_t size;
    double ops;    /* transfers timed (in each round) */
    double uccl_s; /* rank 0's time for them (median of the rounds, as the others) */
    double ref_s;  /* MPI, or with --mem cuda the plain cudaMemcpyAsync */
    double nccl_s; /* --mem cuda: NCCL send/recv, < 0 without NCCL */
    double told_s; /* --mem cuda, send: the plain copy plus a host-flag notification and ack
                    * per window (perf_cuda_told_window), <= 0 without it */
    double ratio_lo, ratio_hi; /* host memory: least and greatest uccl / MPI of one round */
} perf_row_t;

/* A size with an optional K/M/G suffix, 1 .. 1 GiB; an int in [min, max].
 * 0 on success, -1 when the text is not one (nothing written). */
int perf_parse_size(const char *text, size_t *out);
int perf_parse_int(const char *text, int min, int max, int *out);
/* 0 on success; -1 after printing why, naming the option, and the usage
 * (when verbose). Keeps o->ref_path. */
int perf_parse_args(int argc, char **argv, perf_opts_t *o, int verbose);
/* Before MPI_Init: with --transport tcp, pin Open MPI's reference to its tcp
 * path (pml ob1, btl tcp,self, osc pt2pt) rather than its default (shared
 * memory on one host); say in path which path the reference uses. */
void perf_pin_mpi_path(int argc, char **argv, char *path, size_t len);
/* gpu: "GPU n (bus id), NCCL" with --mem cuda, else NULL. */
void perf_print_header(const perf_opts_t *o, const char *conn_transport, const char *gpu);
void perf_print_row(const perf_opts_t *o, const perf_row_t *row);
int perf_write_json(const perf_opts_t *o, const char *conn_transport, const char *gpu,
                    const perf_row_t *rows, int nrows);

#endif

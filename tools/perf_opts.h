/* uccl_perf's options, result rows and output (table and JSON). */
#ifndef UCCL_TOOLS_PERF_OPTS_H
#define UCCL_TOOLS_PERF_OPTS_H

#include <stddef.h>

typedef enum { PERF_OP_SEND, PERF_OP_WRITE, PERF_OP_READ } perf_op_t;

typedef struct perf_opts {
    perf_op_t op;
    const char *transport; /* NULL = UCCL_TRANSPORTS / all usable */
    size_t min, max;
    int iters; /* 0 = by size */
    int warmup;
    int window;
    const char *json; /* NULL = no JSON */
} perf_opts_t;

typedef struct perf_row {
    size_t size;
    double ops;    /* transfers timed */
    double uccl_s; /* rank 0's time for them */
    double ref_s;
} perf_row_t;

/* 0 on success; -1 after printing why (when verbose). */
int perf_parse_args(int argc, char **argv, perf_opts_t *o, int verbose);
void perf_print_header(const perf_opts_t *o, const char *conn_transport);
void perf_print_row(const perf_opts_t *o, const perf_row_t *row);
int perf_write_json(const perf_opts_t *o, const char *conn_transport, const perf_row_t *rows,
                    int nrows);

#endif

/* uccl_perf coll: the collectives benchmark (tools/perf_coll.c). */
#ifndef UCCL_TOOLS_PERF_COLL_H
#define UCCL_TOOLS_PERF_COLL_H

/* Run "uccl_perf coll ..." (argv[1] == "coll") after MPI_Init; returns the
 * process exit status (non-zero on bad options, errors or a wrong byte). */
int perf_coll_main(int argc, char **argv);

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl_coll.h>

#define COLL_DEFAULT_MIN 8
#define COLL_DEFAULT_MAX (16u << 20)
#define COLL_ROUNDS_MAX 15

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
    int uccl_host; /* --mem uccl: host buffers of uccl_mem_alloc (peers on the host can map
                    * them), for uccl and the in-job MPI reference alike */
    int stream; /* --stream (with --mem cuda): the uccl column times the stream form,
                 * each call's stream synchronized (as NCCL's synced column) */
    const char *json;
} coll_opts_t;

typedef struct coll_row {
    size_t count, size;
    int iters;
    const char *algo;
    double uccl_s, plan_s, mpi_s; /* per call */
    double ucx_s;                 /* Open MPI over UCX, 0 = not run */
    /* --mem cuda, 2+ ranks (0 = not run): every rank copying to every
     * other at once (the ceiling), NCCL each call waited for, NCCL queued */
    double peer_s, kern_s, nccl_s, ncclq_s;
    double host_s;                /* --stream: the CPU's time inside the stream call (slowest rank) */
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
    int gpu, ngpu, nlocal;   /* --mem cuda: this rank's GPU, the host's GPUs and ranks */
    struct coll_gpu *gref;   /* --mem cuda: the peer-copy and NCCL references */
    char nccl_why[128];      /* "NCCL 2.28.9", or why there is no NCCL column */
} coll_ctx_t;

/* tools/perf_coll_out.c: options, table and JSON. */
/* Parse argv (argv[1] == "coll"); each bad value named when verbose; 0 or -1. */
int perf_coll_parse_args(int argc, char **argv, coll_opts_t *o, int verbose);
void perf_coll_print_header(const coll_ctx_t *c);
void perf_coll_print_row(const coll_ctx_t *c, const coll_row_t *r);
int perf_coll_write_json(const coll_ctx_t *c, const coll_row_t *rows, int n);


/* tools/perf_coll_gpu.c: --mem cuda references on several ranks. setup
 * (collective, after the GPU buffers exist, with the rank's GPU and the
 * host's GPU count) maps every rank's ceiling target and sets up NCCL where
 * it can; 0 or -1. The timers are collective and return the slowest
 * rank's seconds per call (0: not run, < 0: failed). */
typedef struct coll_gpu coll_gpu_t;
/* --stream: seconds spent inside uccl_coll_post_stream so far (this rank). */
extern double perf_coll_stream_host_s;
int perf_coll_gpu_setup(coll_ctx_t *c, int gpu, int ngpu);
int perf_coll_gpu_have_nccl(const coll_ctx_t *c);
const char *perf_coll_gpu_peer_mode(void); /* PERF_PEER_MODE, see perf_coll_gpu.c */
double perf_coll_gpu_peer_s(coll_ctx_t *c, size_t count, int iters);
/* The same copies by the library's copy kernel (0: none on some rank). */
double perf_coll_gpu_kern_s(coll_ctx_t *c, size_t count, int iters);
const char *perf_coll_gpu_kern_text(const coll_ctx_t *c);
double perf_coll_gpu_nccl_s(coll_ctx_t *c, size_t count, int iters, int queued);
void perf_coll_gpu_teardown(coll_ctx_t *c);
/* --stream: one stream-ordered call on a stream of the tool, then a
 * synchronize of that stream (UCCL_COLL_STREAM picks the path). */
uccl_status_t perf_coll_gpu_stream_call(coll_ctx_t *c, const uccl_coll_args_t *a);

/* The Open MPI over UCX reference (tools/perf_coll_ref.c). */
typedef struct perf_coll_ref {
    const char *mpirun;  /* launcher (default "mpirun") */
    const char *ucx_tls; /* UCX_TLS for the inner job, or NULL (UCX's choice) */
    int ranks;
} perf_coll_ref_t;

/* On rank 0 only: run this program again under mpirun with Open MPI's UCX
 * path (--ref-only) and read its MPI time per call (us) for each count;
 * 0, or -1 with the reason in why. */
int perf_coll_ucx_ref(const perf_coll_ref_t *r, int argc, char **argv, const size_t *counts,
                      double *us, int nrows, char *why, size_t why_len);

#endif

/* Shared by the collective tests: one case (an op, its buffers and the
 * reference result Open MPI computes on the same inputs) and the runs. */
#ifndef UCCL_TESTS_MPI_COLL_TEST_H
#define UCCL_TESTS_MPI_COLL_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "mpi_test.h"

typedef enum { CT_BLOCKING, CT_NONBLOCKING, CT_PERSISTENT, CT_STREAM } ct_mode_t;

typedef struct ct_case {
    uccl_coll_args_t args;
    uint8_t *sbuf, *rbuf, *ref; /* ref: what MPI left in its copy of rbuf */
    size_t slen, rlen;
    size_t *scounts, *sdispls, *rcounts, *rdispls;
} ct_case_t;

/* Inputs of op for this rank (count: bytes per block, or the largest
 * random block of the v-variants; seed must agree on every rank), then the
 * reference through the blocking MPI collective. */
void ct_prepare(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root,
                bool in_place, uint32_t seed);
void ct_free(ct_case_t *k);
/* Run k through uccl with algo in mode; compare with the reference. */
void ct_run(mt_ctx_t *c, ct_case_t *k, uccl_coll_algo_t algo, ct_mode_t mode);
/* 0 when rbuf equals the reference, else prints the first difference. */
int ct_compare(mt_ctx_t *c, const ct_case_t *k, const char *what);

/* coll_gpu.c (t_coll_gpu only; the stubs of t_coll say "host"):
 * T_COLL_MEM=gpu|mixed stages a case's buffers into GPU memory (mixed:
 * even ranks send from host into GPU, odd ranks from GPU into host),
 * runs it (CT_STREAM: uccl_coll_post_stream on a stream of the test),
 * and copies the receive buffer back for the comparison. */
typedef enum { CT_MEM_HOST, CT_MEM_GPU, CT_MEM_MIXED } ct_mem_t;
ct_mem_t ct_mem(void);
const char *ct_mem_name(void);
/* Before mt_init: MT_SKIP when GPU memory was asked for and there is
 * none, else 0 (and the engine gets GPU 0). */
int ct_mem_init(int rank);
void ct_mem_fini(void);
uccl_status_t ct_gpu_run(mt_ctx_t *c, ct_case_t *k, ct_mode_t mode);
/* Stream ordering: a producer queued before, a consumer after, the hold. */
void ct_stream_order(mt_ctx_t *c);
/* GPU buffers where no connection moves GPU memory: UCCL_ERR_UNSUPPORTED
 * on every rank at once. */
void ct_gpu_refused(mt_ctx_t *c);
/* AUTO leaves MAPPED out where every peer is reached by gpu_ipc. */
void ct_gpu_auto_small(mt_ctx_t *c);
/* The test's stream (GPU builds; NULL otherwise). */
void *ct_stream(void);
/* coll_stream.c: the direct stream path: back-to-back calls on the
 * stream (wrapping sequence numbers under UCCL_COLL_STREAM_SEQ0), and a
 * peer gone while its part is queued. */
void ct_stream_direct(mt_ctx_t *c);
void ct_stream_dead(mt_ctx_t *c);
void ct_stream_cache(mt_ctx_t *c);
void ct_stream_stats(mt_ctx_t *c);
/* A sticky fault on every rank's stream: the fault's status at once (the
 * context stays lost: a run's last GPU case). */
void ct_stream_fault(mt_ctx_t *c);
/* Every rank on the direct path and the fake GPU backend, else one SKIP
 * line naming the case and false (the same answer on every rank). */
bool ct_fake_direct(mt_ctx_t *c, const char *name);
/* The end of a case on a comm of its own: its request freed (if any), every
 * rank met, then the comm destroyed (if any) and ds, dr freed. */
void ct_case_done(mt_ctx_t *c, uccl_comm_t *comm, uccl_req_t *req, void *ds, void *dr);
/* A stream call on comm run out (its request waited for and freed, the
 * stream synchronized), then every rank meets: the first call sets the
 * direct path up (flags mapped both ways), a later one is a plan hit. */
void ct_path_setup(mt_ctx_t *c, uccl_comm_t *comm, const uccl_coll_args_t *a, void *s);
/* coll_stream_more.c: direct stream calls on two streams of one comm, the
 * second's stream run first; a flush while a call is queued (refused);
 * a rank gone while its peers' hold-path calls are in flight; calls on
 * every rank of a wide comm (8+). */
void ct_stream_two(mt_ctx_t *c);
void ct_stream_flush(mt_ctx_t *c);
void ct_stream_hold_dead(mt_ctx_t *c);
void ct_stream_destroy(mt_ctx_t *c);
void ct_stream_wide(mt_ctx_t *c);

/* coll_cases.c: plan reuse, several in flight, persistent, errors. */
void ct_reuse(mt_ctx_t *c);
void ct_freed(mt_ctx_t *c);
void ct_shared_large(mt_ctx_t *c);
void ct_inflight(mt_ctx_t *c);
void ct_persistent(mt_ctx_t *c);
void ct_bad_args(mt_ctx_t *c);
void ct_mismatch(mt_ctx_t *c);
void ct_peer_gone(mt_ctx_t *c, uccl_coll_algo_t algo, bool persistent);
/* A mapped allgather on comm: true when it ran, false when the ranks
 * cannot map each other (UCCL_ERR_UNSUPPORTED, on every rank alike). */
bool ct_mapped_usable(mt_ctx_t *c, uccl_comm_t *comm);
/* coll_ring.c: MAPPED's ring of buffers: many rooted calls back to back
 * (wrapping every writer's ring), and a reader gone mid-ring. */
void ct_mapped_ring(mt_ctx_t *c);
/* Scatters back to back whose blocks cross the bytes a writer and a
 * reader prefetch (1-8 KiB, a line short and over), in place or not. */
void ct_mapped_scatter_edges(mt_ctx_t *c);
void ct_mapped_ring_dead(mt_ctx_t *c);
/* A few calls repeated on the same buffers (plan-cache hits), blocking
 * and non-blocking in flight together, byte-checked; the counters; a
 * repeated truncated bcast. */
void ct_mapped_hits(mt_ctx_t *c);
/* Persistent MAPPED plans started repeatedly, new bytes each time, plain
 * calls (blocking and non-blocking) between and in flight, byte-checked;
 * a second start and a free while in flight refused; the counters; a
 * repeated truncated persistent bcast. */
void ct_mapped_plans(mt_ctx_t *c);

#endif

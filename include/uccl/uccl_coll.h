/* libuccl communicators: an ordered set of connections to every rank,
 * the base of the copy-only collectives. Built only on uccl.h. */
#ifndef UCCL_UCCL_COLL_H
#define UCCL_UCCL_COLL_H

#include <uccl/uccl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uccl_comm uccl_comm_t;

/* The bootstrap's only collective: gather bytes_per_rank bytes from every
 * rank into recv, rank r's block at recv + r * bytes_per_rank (send is this
 * rank's block; recv holds size blocks). UCC's ucc_oob_coll_t idea, blocking.
 * The callback must be collective: on every rank it either completes the
 * exchange or returns an error after taking its part, so that no rank waits
 * for it forever (MPI_Allgather, a torch store's set + get of every key).
 * An error means only that this rank's recv is unusable; the bootstrap then
 * goes on calling it for the remaining rounds, so that every rank makes the
 * same number of calls. */
typedef uccl_status_t (*uccl_allgather_fn_t)(const void *send, void *recv, size_t bytes_per_rank,
                                             void *ctx);

/* Which fields of uccl_comm_params_t are set. Each call below names the
 * bits it reads; any other bit is refused with UCCL_ERR_INVALID_PARAM. */
enum {
    UCCL_COMM_PARAM_ENGINE = 1u << 0,        /* use this engine instead of creating one */
    UCCL_COMM_PARAM_ENGINE_PARAMS = 1u << 1, /* create the engine with these params */
    UCCL_COMM_PARAM_RANK = 1u << 2,
    UCCL_COMM_PARAM_SIZE = 1u << 3,
    UCCL_COMM_PARAM_ALLGATHER = 1u << 4, /* allgather and allgather_ctx */
    UCCL_COMM_PARAM_CONNS = 1u << 5,
    UCCL_COMM_PARAM_HOST_IDS = 1u << 6,
    UCCL_COMM_PARAM_FLAGS = 1u << 7,
};

/* uccl_comm_params_t.flags */
enum {
    UCCL_COMM_FLAG_OWN_ENGINE = 1u << 0, /* uccl_comm_create: the comm destroys the engine */
};

typedef struct uccl_comm_params {
    uint64_t field_mask;                       /* UCCL_COMM_PARAM_* bits */
    uccl_engine_t *engine;                     /* not owned by the comm (unless OWN_ENGINE) */
    const uccl_engine_params_t *engine_params; /* when the comm creates its engine */
    int rank;                                  /* this rank, 0 <= rank < size */
    int size;                                  /* number of ranks, >= 1 */
    uccl_allgather_fn_t allgather;             /* the bootstrap's collective */
    void *allgather_ctx;                       /* passed to allgather as ctx */
    uccl_conn_t *const *conns;                 /* conns[r]: connection to rank r */
    const uint64_t *host_ids;                  /* host_ids[r]: rank r's host identity */
    uint64_t flags;                            /* UCCL_COMM_FLAG_* */
} uccl_comm_params_t;

/* Bootstrap a communicator, collectively over params->allgather: every rank
 * creates an engine (ENGINE_PARAMS, or defaults) or uses the caller's
 * (ENGINE: it must have no connection in progress and outlives the comm),
 * all ranks exchange address blobs, lower ranks connect to higher ranks and
 * higher ranks accept (no deadlock), and the host map comes from each
 * engine's uccl_engine_host_id (so uccl_comm_same_host agrees with
 * uccl_conn_query's same_host). Needs RANK, SIZE and ALLGATHER; reads also
 * ENGINE or ENGINE_PARAMS (not both). Calls allgather three times on every
 * rank, from the calling thread (addresses, then two agreements on the
 * outcome); no message goes over the new connections, so no tag is used.
 * Every rank gets the same status: if any rank fails, all return an error
 * (the failing rank's own status there, UCCL_ERR_PEER_FAILED elsewhere).
 * The one exception is a callback failing in the last round, which only the
 * rank it failed on can see. Argument errors are returned at once, before
 * any allgather call: they are programming errors, the same on every rank.
 * Lazy connection (UCCL_LAZY_CONNECT=1, and by default above 32 ranks;
 * =0 forces eager): uccl_comm_init connects nobody; it keeps every rank's
 * address, engine id and host id, and a pair connects on its first use:
 * uccl_comm_conn(comm, r) (or a collective whose schedule talks to r)
 * connects when r is a higher rank and otherwise waits, up to
 * UCCL_TIMEOUT_MS, for r to connect (accepting on the comm's engine, whose
 * incoming connections then belong to the comm). So in lazy mode the first
 * use of a pair must happen on both ranks (two-sided traffic, collectives);
 * a one-sided transfer to a lower rank that never uses the pair waits for it.
 * UCCL_LAZY_CONNECT must be the same on every rank of the job; where it is
 * not, every rank returns UCCL_ERR_INVALID_PARAM before anyone connects.
 * Errors: UCCL_ERR_INVALID_PARAM (unknown field bit, missing field, rank
 * out of range, NULL callback or engine, a callback that puts blocks out of
 * rank order, blocks that do not check (garbled, truncated, another
 * libuccl version), another address table to some rank, or ranks that
 * differ in UCCL_LAZY_CONNECT: every rank returns it then), UCCL_ERR_NO_TRANSPORT (on both ranks of a pair
 * whose engines open no transport in common, or only shm/gpu_ipc on
 * different hosts; found from the exchange, before anyone connects), those
 * of uccl_engine_create / uccl_connect / uccl_accept, those the callback
 * returns, UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_comm_init(const uccl_comm_params_t *params, uccl_comm_t **comm);

/* Build a communicator from connections the caller has made (not
 * collective). Needs ENGINE, RANK, SIZE and, when size > 1, CONNS: conns[r]
 * is the connection to rank r (conns[rank] is ignored, may be NULL).
 * Optional HOST_IDS: host_ids[r] names rank r's host (equal values = same
 * host); by default they are read from the engine (uccl_engine_host_id)
 * and the connections (uccl_conn_query's host_id). Optional FLAGS.
 * The comm takes ownership of the connections and, with
 * UCCL_COMM_FLAG_OWN_ENGINE, of the engine; on error it takes nothing.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_MEMORY, those of
 * uccl_conn_query. */
UCCL_API uccl_status_t uccl_comm_create(const uccl_comm_params_t *params, uccl_comm_t **comm);

/* Close every connection (and the engine if owned) and free the comm. */
UCCL_API uccl_status_t uccl_comm_destroy(uccl_comm_t *comm);

UCCL_API int uccl_comm_rank(const uccl_comm_t *comm);
UCCL_API int uccl_comm_size(const uccl_comm_t *comm);
UCCL_API uccl_engine_t *uccl_comm_engine(const uccl_comm_t *comm);
/* The connection to rank r; NULL for r == own rank or r out of range. A
 * lazy comm (see uccl_comm_init) connects here on first use, blocking; NULL
 * when that fails (the error is logged). */
UCCL_API uccl_conn_t *uccl_comm_conn(const uccl_comm_t *comm, int r);
/* 1 when rank r runs on this rank's host (own rank included). */
UCCL_API int uccl_comm_same_host(const uccl_comm_t *comm, int r);


/* ---------------------------------------------------------------- collectives
 *
 * Copy-only collectives over a communicator, MPI/NCCL shape, every count
 * and displacement in BYTES (no datatypes, no reductions). One general
 * call, uccl_coll_post, takes a uccl_coll_args_t and does the work; the
 * named calls below are thin wrappers that fill it.
 *
 * Rules common to every collective:
 * - Every rank of the comm calls the same collectives in the same order
 *   (blocking, non-blocking and persistent starts alike), with matching
 *   counts; root and algo (when set) must agree on every rank.
 * - Any count may be 0; a buffer may then be NULL.
 * - Memory type comes from the pointer (uccl_mem_query): host or GPU
 *   memory, in place too. Mixed calls work: a rank's send and receive
 *   buffers may be of different types, and ranks may use different types
 *   (one-sided and two-sided transfers carry any pairing; local copies go
 *   through uccl_copy_post). Temporaries of the algorithms that need one
 *   (Bruck, binomial gather/scatter, in-place alltoall(v)) are host memory,
 *   so GPU data is staged through the host there; DIRECT and LINEAR move
 *   GPU data GPU to GPU. GPU buffers need a transport that
 *   moves GPU memory between the ranks (gpu_ipc on one host; shm and tcp
 *   stage it; verbs with GPUDirect RDMA), else the collective fails with
 *   the transfer's error, UCCL_ERR_UNSUPPORTED. Verbs without GPUDirect
 *   RDMA stages GPU memory for send/recv only: there the one-sided
 *   algorithm (DIRECT) fails with UCCL_ERR_UNSUPPORTED on every rank on
 *   GPU buffers; the two-sided ones (ring, pairwise, binomial, linear)
 *   work.
 * - Buffers are registered by the comm and kept in a per-comm cache (with
 *   the remote descriptors peers sent for them), so repeated calls on the
 *   same buffers pay no registration and no descriptor exchange; a plain
 *   call with the same arguments as a recent one (up to 8 kept) reuses that
 *   call's plan, like a persistent start; see uccl_comm_coll_stats.
 *   Buffers freed with uccl_mem_free leave the cache by themselves: the
 *   next call on memory allocated at the same address registers it anew
 *   and builds a new plan, and a persistent plan over freed memory fails
 *   to start with UCCL_ERR_STALE (free the plan). Memory freed any other
 *   way (free, munmap, cudaFree) is not seen: call uccl_comm_coll_flush
 *   after freeing such buffers if they may come back at the same address.
 * - A rank's buffers belong to the collective until it completes on that
 *   rank; after that they are the caller's again, whatever peers still do.
 * - Traffic of collectives uses the reserved tag bits (UCCL_TAG_LIB_MASK)
 *   plus a per-comm sequence number, so it never matches the caller's
 *   messages on the comm's connections. Write notifications
 *   (uccl_write_notify, UCCL_RMA_NOTIFY) on the comm's connections belong
 *   to the collectives: the caller must not send or poll its own there.
 * - Errors: UCCL_ERR_INVALID_PARAM (NULL buffer with a count > 0, root or
 *   op out of range, displacements making blocks overlap or reach past the
 *   end of the address space, a send block of allgather(v) or alltoall(v)
 *   overlapping a receive block without UCCL_IN_PLACE (only this rank's
 *   own block may be read from where it lands), UCCL_IN_PLACE
 *   where it is not allowed), UCCL_ERR_TRUNCATED (the counts of two ranks
 *   disagree, detected on both sides when the algorithm lets them meet),
 *   UCCL_ERR_PEER_FAILED and the peer errors (a rank died or its connection
 *   broke), UCCL_ERR_TIMEOUT (no progress for UCCL_TIMEOUT_MS), never a
 *   hang. After an error the comm's collectives are undefined (as in MPI);
 *   destroy it.
 * - Thread safety: one collective call at a time per comm (calls of
 *   several comms may run on several threads); non-blocking collectives
 *   in flight progress from any thread that progresses the engine (the
 *   progress thread included).
 * - uccl_comm_destroy cancels the comm's collectives in flight (their
 *   requests finish with UCCL_ERR_CANCELED), except the direct stream
 *   calls already queued on a stream (uccl_coll_post_stream): those run
 *   out there, the comm's buffers staying registered until this rank's
 *   stream has passed them; free its plans before it. A
 *   plan left over is detached: its start fails with
 *   UCCL_ERR_INVALID_HANDLE, uccl_coll_plan_free still frees it. */

/* "Send from the receive buffer": allgather/gather (sendbuf), alltoall(v)
 * (sendbuf: the data is taken from recvbuf and replaced), scatter at the
 * root (recvbuf: the root's block stays in sendbuf). */
#define UCCL_IN_PLACE ((void *)1)

typedef enum {
    UCCL_COLL_ALLGATHER = 0,
    UCCL_COLL_ALLGATHERV,
    UCCL_COLL_ALLTOALL,
    UCCL_COLL_ALLTOALLV,
    UCCL_COLL_BCAST,
    UCCL_COLL_GATHER,
    UCCL_COLL_SCATTER,
    UCCL_COLL_OP_COUNT,
} uccl_coll_op_t;

/* Algorithms. AUTO picks from the selection table (uccl_coll_algo_select);
 * the environment variable UCCL_COLL_ALGO=NAME forces one for every call
 * whose args leave algo unset, where it applies (else AUTO's choice). */
typedef enum {
    UCCL_COLL_ALGO_AUTO = 0,
    UCCL_COLL_ALGO_DIRECT,    /* one-sided writes with notification into every
                               * receiver's buffer, all peers in flight:
                               * allgather(v), alltoall(v), bcast, gather, scatter */
    UCCL_COLL_ALGO_RING,      /* allgather(v) */
    UCCL_COLL_ALGO_PAIRWISE,  /* alltoall(v): n-1 steps, partner rank+-step */
    UCCL_COLL_ALGO_BRUCK,     /* alltoall: log2(n) steps of packed blocks (small) */
    UCCL_COLL_ALGO_BINOMIAL,  /* bcast, gather, scatter: binomial tree */
    UCCL_COLL_ALGO_SCATTER_ALLGATHER, /* bcast (large): scatter, then ring allgather */
    UCCL_COLL_ALGO_LINEAR,    /* bcast, gather, scatter: root talks to every rank;
                               * allgather(v), alltoall(v): two-sided to every peer */
    UCCL_COLL_ALGO_HIER,      /* allgather(v), bcast: inside each host through one
                               * leader rank, between hosts among the leaders */
    UCCL_COLL_ALGO_MAPPED,    /* every collective, small blocks: each rank maps its
                               * peers' shared segments (uccl_rdesc_ptr) and copies
                               * through them with flags, no message per block;
                               * blocks above a slot go two-sided. Only where every
                               * rank maps every peer (shm, memory of one host):
                               * elsewhere an explicit request for it fails with
                               * UCCL_ERR_UNSUPPORTED and UCCL_COLL_ALGO=mapped
                               * falls back to AUTO's next choice */
    UCCL_COLL_ALGO_COUNT,
} uccl_coll_algo_t;

/* Which optional fields of uccl_coll_args_t are set. */
enum {
    UCCL_COLL_ARG_ROOT = 1u << 0, /* default root 0 */
    UCCL_COLL_ARG_ALGO = 1u << 1, /* default UCCL_COLL_ALGO_AUTO (or UCCL_COLL_ALGO) */
};

/* One collective. Fields by op (sizes in bytes, n = comm size):
 *  ALLGATHER   sendbuf[count] (or IN_PLACE: own block already at recvbuf +
 *              rank*count), recvbuf[n*count]
 *  ALLGATHERV  sendbuf[count], count == recvcounts[rank]; rank r's block
 *              lands at recvbuf + rdispls[r] (IN_PLACE: already there)
 *  ALLTOALL    block r of sendbuf (at r*count) goes to rank r, block r of
 *              recvbuf comes from rank r (IN_PLACE: from/to recvbuf)
 *  ALLTOALLV   sendcounts/sdispls, recvcounts/rdispls (IN_PLACE: sendbuf
 *              ignored, data taken from recvbuf at recvcounts/rdispls)
 *  BCAST       recvbuf[count] on every rank, the root's content is sent
 *  GATHER      sendbuf[count] on every rank, recvbuf[n*count] at the root
 *              (IN_PLACE at the root: own block already there)
 *  SCATTER     sendbuf[n*count] at the root, recvbuf[count] on every rank
 *              (IN_PLACE recvbuf at the root)
 * Fields an op does not use are ignored. */
typedef struct uccl_coll_args {
    uint64_t field_mask; /* UCCL_COLL_ARG_* */
    uccl_coll_op_t op;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    const size_t *sendcounts, *sdispls; /* ALLTOALLV: [n] */
    const size_t *recvcounts, *rdispls; /* ALLGATHERV, ALLTOALLV: [n] */
    int root;
    uccl_coll_algo_t algo;
} uccl_coll_args_t;

/* Start a collective; *req completes when this rank's part is done (its
 * receive buffer holds the result, its send buffer is free). The request
 * is a generalized request of the comm's engine: uccl_test, uccl_wait,
 * uccl_wait_all (with other requests of that engine) and uccl_req_free
 * work on it. The arrays of args are copied; the buffers are not.
 * Errors: as listed above, immediately or through the request. */
UCCL_API uccl_status_t uccl_coll_post(uccl_comm_t *comm, const uccl_coll_args_t *args,
                                      uccl_req_t **req);

/* Blocking form of uccl_coll_post: returns when this rank's part is done,
 * or on the first error (no progress for UCCL_TIMEOUT_MS = UCCL_ERR_TIMEOUT). */
UCCL_API uccl_status_t uccl_coll(uccl_comm_t *comm, const uccl_coll_args_t *args);

/* Stream-ordered form (NCCL's ordering; stream is a cudaStream_t or
 * hipStream_t as void *): the collective starts once the work queued on
 * stream before the call has run, and work queued on stream after the
 * call waits until the collective is done on this rank. The host never
 * waits on the stream. Two paths, the same on every rank:
 * - direct (allgather(v), alltoall(v) not in place, bcast, when every
 *   buffer is GPU memory and every peer is reached by gpu_ipc; default,
 *   UCCL_COLL_STREAM=hold turns it off): the whole collective is enqueued
 *   on stream at call time from the calling thread, over the peers' GPU
 *   memory mapped here (uccl_rdesc_ptr) and stream memory operations:
 *   ready flags into every peer, waits for theirs, copies straight into
 *   each peer's receive buffer, done flags, waits (a rank waits only for
 *   the ready flags of the peers it writes into and the done flags of
 *   those writing into it). A comm's direct calls run on the device in
 *   call order, whatever streams they are queued on (each waits for the
 *   comm's previous one): the later call's stream holds meanwhile, so a
 *   stream may be synchronized only once every earlier call's stream can
 *   run. The first call on given arguments (op,
 *   buffers, counts, root) exchanges one small message with every peer on
 *   the host (where each block goes); later calls on the same arguments
 *   reuse that plan when every rank does, agreed by one 8-byte host
 *   allgather (on one host over shm: the mapped segments, no message), and
 *   enqueue only the stream operations (stats: stream_exchanges,
 *   stream_plan_hits; the receive buffer stays registered meanwhile:
 *   uccl_comm_coll_flush drops the plans; a buffer freed with
 *   uccl_mem_free drops its plan on its next call; UCCL_COLL_STREAM_CACHE=0
 *   turns the cache off). Either way the call returns once every rank has
 *   made it, or fails (UCCL_ERR_PEER_FAILED, UCCL_ERR_TIMEOUT);
 *   nothing of the library runs later, so the caller may load kernels,
 *   synchronize the stream or the device at once. The comm's first
 *   stream call sets the path up on every rank (2 MiB of flags in GPU
 *   memory, mapped by each peer). A peer that dies with its part queued:
 *   its flags never come, and a stream wait cannot time out: the request
 *   (uccl_test / uccl_wait, or the engine's progress thread) sees the
 *   failed connection, or UCCL_TIMEOUT_MS without the stream passing the
 *   call, writes the flags itself and fails with UCCL_ERR_PEER_FAILED or
 *   UCCL_ERR_TIMEOUT; the stream goes on (the receive buffer undefined)
 *   and later stream calls on the comm fail at once. A fault on this
 *   rank's stream that the runtime keeps for the context (CUDA's sticky
 *   errors, e.g. a kernel's illegal address) fails the request within
 *   milliseconds with its status (UCCL_ERR_IO, the runtime's text logged),
 *   learnt from the engine's own stream (uccl_stream_query with a NULL
 *   stream), never from the caller's; peers of a rank that faulted alone
 *   fail once its connections close, else at UCCL_TIMEOUT_MS. A caller
 *   that drops the request (req NULL) and only synchronizes its stream
 *   needs the progress thread for that bound.
 * - hold (everything else): an event recorded on the stream is polled by
 *   progress (uccl_stream_event), and a stream-ordered wait on a
 *   host-mapped flag holds the stream's later work (uccl_stream_hold) until
 *   the collective ends, with success or an error (the stream always goes
 *   on; after an error the receive buffer is undefined). Progress comes
 *   from the engine's progress thread (UCCL_ENGINE_PARAM_PROGRESS_THREAD)
 *   or, without one, from a helper thread the engine runs while any stream
 *   hold is out (see uccl_stream_hold), so the caller may synchronize the
 *   stream or the device right after the call, as with NCCL. Known limit of
 *   this path only: a kernel module load in this process while the call is
 *   in flight (the first launch of a kernel under CUDA's lazy loading,
 *   CuPy's compiled kernels) takes the context's lock while it waits for
 *   the held stream, and progress's own next cudaMemcpyAsync for the
 *   collective waits for that lock: a deadlock (seen on the device in
 *   Python tests). Load the kernels first (a warm-up call,
 *   CUDA_MODULE_LOADING=EAGER) or use the host-ordered call there.
 * req may be NULL: the request is then detached, and an error is only
 * logged. Order with the comm's other collectives as any non-blocking
 * collective (every rank the same order). uccl_comm_coll_stats counts the
 * direct calls (stream_direct).
 * Errors: those of uccl_coll_post, those of uccl_stream_event and
 * uccl_stream_hold (UCCL_ERR_NO_DEVICE without a GPU runtime,
 * UCCL_ERR_UNSUPPORTED without stream memory operations). */
UCCL_API uccl_status_t uccl_coll_post_stream(uccl_comm_t *comm, const uccl_coll_args_t *args,
                                             void *stream, uccl_req_t **req);

/* Persistent collectives (MPI_Allgather_init's idea): a plan registers the
 * buffers once and keeps the descriptors peers send for them; each
 * uccl_coll_start moves only data (DIRECT: plus one ready message, from
 * receiver to writer, and one notification per peer: a receiver must say
 * its buffer is free again before a peer may write into it). Every rank builds its plans in the
 * same order and starts them in the same order; at most one start of a
 * plan is in flight. The plan keeps a copy of args (arrays included).
 * Errors: those of uccl_coll_post; uccl_coll_start: UCCL_ERR_BUSY while
 * the plan's last start is in flight, UCCL_ERR_STALE (see above),
 * UCCL_ERR_INVALID_HANDLE once the plan's comm is destroyed;
 * uccl_coll_plan_free: UCCL_ERR_BUSY while a start is in flight. */
typedef struct uccl_coll_plan uccl_coll_plan_t;
UCCL_API uccl_status_t uccl_coll_init(uccl_comm_t *comm, const uccl_coll_args_t *args,
                                      uccl_coll_plan_t **plan);
UCCL_API uccl_status_t uccl_coll_start(uccl_coll_plan_t *plan, uccl_req_t **req);
UCCL_API uccl_status_t uccl_coll_plan_free(uccl_coll_plan_t *plan);
/* A start in the stream form (see uccl_coll_post_stream). */
UCCL_API uccl_status_t uccl_coll_start_stream(uccl_coll_plan_t *plan, void *stream,
                                              uccl_req_t **req);

/* Thin blocking variants (uccl_coll with the matching args). */
UCCL_API uccl_status_t uccl_allgather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count);
UCCL_API uccl_status_t uccl_allgatherv(uccl_comm_t *comm, const void *sendbuf, size_t count,
                                       void *recvbuf, const size_t *recvcounts,
                                       const size_t *rdispls);
UCCL_API uccl_status_t uccl_alltoall(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count);
UCCL_API uccl_status_t uccl_alltoallv(uccl_comm_t *comm, const void *sendbuf,
                                      const size_t *sendcounts, const size_t *sdispls,
                                      void *recvbuf, const size_t *recvcounts,
                                      const size_t *rdispls);
UCCL_API uccl_status_t uccl_bcast(uccl_comm_t *comm, void *buf, size_t count, int root);
UCCL_API uccl_status_t uccl_gather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, int root);
UCCL_API uccl_status_t uccl_scatter(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t count, int root);

/* Thin non-blocking variants (uccl_coll_post with the matching args). */
UCCL_API uccl_status_t uccl_iallgather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, uccl_req_t **req);
UCCL_API uccl_status_t uccl_iallgatherv(uccl_comm_t *comm, const void *sendbuf, size_t count,
                                        void *recvbuf, const size_t *recvcounts,
                                        const size_t *rdispls, uccl_req_t **req);
UCCL_API uccl_status_t uccl_ialltoall(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, uccl_req_t **req);
UCCL_API uccl_status_t uccl_ialltoallv(uccl_comm_t *comm, const void *sendbuf,
                                       const size_t *sendcounts, const size_t *sdispls,
                                       void *recvbuf, const size_t *recvcounts,
                                       const size_t *rdispls, uccl_req_t **req);
UCCL_API uccl_status_t uccl_ibcast(uccl_comm_t *comm, void *buf, size_t count, int root,
                                   uccl_req_t **req);
UCCL_API uccl_status_t uccl_igather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t count, int root, uccl_req_t **req);
UCCL_API uccl_status_t uccl_iscatter(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, int root, uccl_req_t **req);

/* Counters of a comm's collectives, for tests and benchmarks. */
typedef struct uccl_coll_stats {
    uint64_t calls;         /* collectives started (plain and persistent) */
    uint64_t buf_regs;      /* user buffers registered (cache misses) */
    uint64_t buf_hits;      /* user buffers found in the cache */
    uint64_t desc_sent;     /* remote descriptors sent to peers (DIRECT) */
    uint64_t desc_reused;   /* ready messages naming a descriptor sent before */
    uint64_t plan_hits;     /* plain calls that reused the cached plan of an earlier
                             * call with the same arguments (no build, no look-ups) */
    uint64_t stream_direct; /* stream-ordered calls enqueued whole on the caller's stream
                             * (over peer-mapped GPU memory, no host hold) */
    uint64_t stream_exchanges; /* of those, calls that exchanged a token with every peer
                                * (the first call on given arguments) */
    uint64_t stream_plan_hits; /* of those, calls that reused the plan of an earlier
                                * exchange: no token, no descriptor, only stream ops */
    uint64_t helper_copies;    /* local host copies run by the copy helper thread
                                * (UCCL_COLL_COPY_THREAD) beside the caller's transfers */
} uccl_coll_stats_t;

UCCL_API uccl_status_t uccl_comm_coll_stats(const uccl_comm_t *comm, uccl_coll_stats_t *stats);

/* Forget every cached buffer registration and cached plain-call plan of
 * the comm (buffers of persistent plans stay registered until the plan is
 * freed). Not while a collective is in
 * flight (UCCL_ERR_BUSY): a stream-ordered call counts until this rank's
 * stream has passed it (its peers may still write into its buffers). */
UCCL_API uccl_status_t uccl_comm_coll_flush(uccl_comm_t *comm);

/* The algorithm AUTO picks for op with bytes per rank block on this comm
 * (UCCL_COLL_ALGO where it applies, else the table: comm size and host
 * layout), and the name of an algorithm ("direct",
 * "ring", ...; "?" when out of range). uccl_coll_algo_parse maps a name
 * back (UCCL_ERR_NOT_FOUND when unknown). */
UCCL_API uccl_coll_algo_t uccl_coll_algo_select(const uccl_comm_t *comm, uccl_coll_op_t op,
                                                size_t bytes);
UCCL_API const char *uccl_coll_algo_name(uccl_coll_algo_t algo);
UCCL_API const char *uccl_coll_op_name(uccl_coll_op_t op);
UCCL_API uccl_status_t uccl_coll_algo_parse(const char *name, uccl_coll_algo_t *algo);

/* The selection table AUTO walks (uccl_coll_algo_select), one rule a line
 * (collectives, host layout, ranks, bytes per block, algorithm), written
 * into buf like snprintf: returns the length of the whole text (call with
 * buf NULL and len 0 to size it), -1 on error. flags: 0 for text,
 * UCCL_COLL_TABLE_JSON for a JSON object {"rules": [...]}. */
#define UCCL_COLL_TABLE_JSON 1u
UCCL_API int uccl_coll_table_print(char *buf, size_t len, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* UCCL_UCCL_COLL_H */

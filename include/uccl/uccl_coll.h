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
 * Errors: UCCL_ERR_INVALID_PARAM (unknown field bit, missing field, rank
 * out of range, NULL callback or engine, a callback that puts blocks out of
 * rank order), those of uccl_engine_create / uccl_connect / uccl_accept,
 * those the callback returns, UCCL_ERR_NO_MEMORY. */
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
/* The connection to rank r; NULL for r == own rank or r out of range. */
UCCL_API uccl_conn_t *uccl_comm_conn(const uccl_comm_t *comm, int r);
/* 1 when rank r runs on this rank's host (own rank included). */
UCCL_API int uccl_comm_same_host(const uccl_comm_t *comm, int r);

#ifdef __cplusplus
}
#endif

#endif /* UCCL_UCCL_COLL_H */

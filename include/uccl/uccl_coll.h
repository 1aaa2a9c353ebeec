/* libuccl communicators: an ordered set of connections to every rank,
 * the base of the copy-only collectives. Built only on uccl.h. */
#ifndef UCCL_UCCL_COLL_H
#define UCCL_UCCL_COLL_H

#include <uccl/uccl.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uccl_comm uccl_comm_t;

enum {
    UCCL_COMM_PARAM_ENGINE = 1u << 0, /* use this engine instead of creating one */
    UCCL_COMM_PARAM_ENGINE_PARAMS = 1u << 1,
};

typedef struct uccl_comm_params {
    uint64_t field_mask;
    uccl_engine_t *engine;                     /* not owned by the comm */
    const uccl_engine_params_t *engine_params; /* when the comm creates its engine */
} uccl_comm_params_t;

/* Build a communicator from connections the caller has made: conns[r] is
 * the connection to rank r (conns[rank] is ignored, may be NULL), host[r]
 * a small integer naming rank r's host (equal values = same host).
 * The comm takes ownership of the connections and, if owns_engine, the engine.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_comm_create(uccl_engine_t *engine, int owns_engine, int rank,
                                        int size, uccl_conn_t *const *conns, const int *host,
                                        uccl_comm_t **comm);

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

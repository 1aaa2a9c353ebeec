/* Communicators: an ordered set of connections, one per rank, plus the host
 * map. Built from connections the caller made (see src/mpi for MPI). */
#include <stdlib.h>
#include <uccl/uccl_coll.h>

#include "coll.h"

struct uccl_comm {
    uccl_engine_t *engine;
    int owns_engine;
    int rank;
    int size;
    uccl_conn_t **conns; /* conns[rank] == NULL */
    int *host;
    coll_state_t *coll; /* collectives' state, made on first use */
};

static uccl_status_t check_create_args(uccl_engine_t *engine, int rank, int size,
                                       uccl_conn_t *const *conns, const int *host,
                                       uccl_comm_t **comm)
{
    if (engine == NULL || comm == NULL || size < 1 || rank < 0 || rank >= size)
        return UCCL_ERR_INVALID_PARAM;
    if (size > 1 && (conns == NULL || host == NULL))
        return UCCL_ERR_INVALID_PARAM;
    for (int r = 0; r < size && size > 1; r++) {
        if (r != rank && conns[r] == NULL)
            return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

uccl_status_t uccl_comm_create(uccl_engine_t *engine, int owns_engine, int rank, int size,
                               uccl_conn_t *const *conns, const int *host, uccl_comm_t **comm)
{
    uccl_comm_t *c;
    uccl_status_t st = check_create_args(engine, rank, size, conns, host, comm);

    if (st != UCCL_OK)
        return st;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto err;
    c->conns = calloc((size_t)size, sizeof(*c->conns));
    c->host = calloc((size_t)size, sizeof(*c->host));
    if (c->conns == NULL || c->host == NULL)
        goto err_arrays;
    for (int r = 0; r < size; r++) {
        c->conns[r] = (r == rank || conns == NULL) ? NULL : conns[r];
        c->host[r] = host != NULL ? host[r] : 0;
    }
    c->engine = engine;
    c->owns_engine = owns_engine != 0;
    c->rank = rank;
    c->size = size;
    *comm = c;
    return UCCL_OK;

err_arrays:
    free(c->host);
    free(c->conns);
    free(c);
err:
    return UCCL_ERR_NO_MEMORY;
}

uccl_status_t uccl_comm_destroy(uccl_comm_t *comm)
{
    uccl_status_t first = UCCL_OK;

    if (comm == NULL)
        return UCCL_ERR_INVALID_PARAM;
    coll_state_destroy(comm->coll);
    for (int r = 0; r < comm->size; r++) {
        if (comm->conns[r] == NULL)
            continue;
        uccl_status_t st = uccl_conn_close(comm->conns[r]);
        if (st != UCCL_OK && first == UCCL_OK)
            first = st;
    }
    if (comm->owns_engine) {
        uccl_status_t st = uccl_engine_destroy(comm->engine);
        if (st != UCCL_OK && first == UCCL_OK)
            first = st;
    }
    free(comm->host);
    free(comm->conns);
    free(comm);
    return first;
}

int uccl_comm_rank(const uccl_comm_t *comm)
{
    return comm != NULL ? comm->rank : -1;
}

int uccl_comm_size(const uccl_comm_t *comm)
{
    return comm != NULL ? comm->size : 0;
}

uccl_engine_t *uccl_comm_engine(const uccl_comm_t *comm)
{
    return comm != NULL ? comm->engine : NULL;
}

uccl_conn_t *uccl_comm_conn(const uccl_comm_t *comm, int r)
{
    if (comm == NULL || r < 0 || r >= comm->size)
        return NULL;
    return comm->conns[r];
}

int uccl_comm_same_host(const uccl_comm_t *comm, int r)
{
    if (comm == NULL || r < 0 || r >= comm->size)
        return 0;
    return comm->host[r] == comm->host[comm->rank];
}

uccl_status_t coll_state_get(uccl_comm_t *comm, coll_state_t **cs)
{
    if (comm == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (comm->coll == NULL) {
        uccl_status_t st = coll_state_create(comm, &comm->coll);
        if (st != UCCL_OK)
            return st;
    }
    *cs = comm->coll;
    return UCCL_OK;
}

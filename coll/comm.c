/* Communicators: an ordered set of connections, one per rank, plus the host
 * map. Built from connections the caller made (uccl_comm_create) or by the
 * bootstrap in boot.c (uccl_comm_init). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl_coll.h>

#include "coll.h"

/* A lazy comm's way to every peer, from the bootstrap: connections are
 * made on first use (uccl_comm_conn). */
typedef struct comm_lazy {
    pthread_mutex_t lock;  /* one connection attempt at a time */
    uint64_t *engine_id;   /* [size]: matches accepted connections to ranks */
    uint8_t **addr;        /* [size]: address blobs */
    uint32_t *addr_len;
    uccl_status_t *failed; /* [size]: a pair that could not connect stays failed */
} comm_lazy_t;

struct uccl_comm {
    uccl_engine_t *engine;
    int owns_engine;
    int rank;
    int size;
    uccl_conn_t **conns; /* conns[rank] == NULL; lazy: NULL until first use */
    uint64_t *host_id;   /* host_id[r]: rank r's host identity */
    coll_state_t *coll;  /* collectives' state, made on first use */
    comm_lazy_t *lazy;   /* NULL: every connection made at creation */
};

#define CREATE_FIELDS                                                                        \
    (UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |                  \
     UCCL_COMM_PARAM_CONNS | UCCL_COMM_PARAM_HOST_IDS | UCCL_COMM_PARAM_FLAGS)
#define CREATE_NEEDS (UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE)

static uccl_status_t check_create_params(const uccl_comm_params_t *p, uccl_comm_t **comm)
{
    if (p == NULL || comm == NULL || (p->field_mask & ~(uint64_t)CREATE_FIELDS) != 0 ||
        (p->field_mask & CREATE_NEEDS) != CREATE_NEEDS)
        return UCCL_ERR_INVALID_PARAM;
    if (p->engine == NULL || p->size < 1 || p->rank < 0 || p->rank >= p->size)
        return UCCL_ERR_INVALID_PARAM;
    if ((p->field_mask & UCCL_COMM_PARAM_FLAGS) &&
        (p->flags & ~(uint64_t)UCCL_COMM_FLAG_OWN_ENGINE) != 0)
        return UCCL_ERR_INVALID_PARAM;
    if ((p->field_mask & UCCL_COMM_PARAM_HOST_IDS) && p->host_ids == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (p->size == 1)
        return UCCL_OK;
    if (!(p->field_mask & UCCL_COMM_PARAM_CONNS) || p->conns == NULL)
        return UCCL_ERR_INVALID_PARAM;
    for (int r = 0; r < p->size; r++) {
        if (r != p->rank && p->conns[r] == NULL)
            return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* The caller's host ids, or the engine's own and each peer's from its conn. */
static uccl_status_t fill_host_ids(uccl_comm_t *c, const uccl_comm_params_t *p)
{
    for (int r = 0; r < c->size; r++) {
        uccl_conn_attr_t attr;
        uccl_status_t st;

        if (p->field_mask & UCCL_COMM_PARAM_HOST_IDS) {
            c->host_id[r] = p->host_ids[r];
            continue;
        }
        if (r == c->rank) {
            c->host_id[r] = uccl_engine_host_id(c->engine);
            continue;
        }
        st = uccl_conn_query(c->conns[r], &attr);
        if (st != UCCL_OK)
            return st;
        c->host_id[r] = attr.host_id;
    }
    return UCCL_OK;
}

static void lazy_free(comm_lazy_t *l, int size)
{
    if (l == NULL)
        return;
    for (int r = 0; l->addr != NULL && r < size; r++)
        free(l->addr[r]);
    free(l->addr);
    free(l->addr_len);
    free(l->failed);
    free(l->engine_id);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static void comm_free(uccl_comm_t *c)
{
    lazy_free(c->lazy, c->size);
    free(c->host_id);
    free(c->conns);
    free(c);
}

uccl_status_t uccl_comm_create(const uccl_comm_params_t *params, uccl_comm_t **comm)
{
    uccl_comm_t *c;
    uccl_status_t st = check_create_params(params, comm);

    if (st != UCCL_OK)
        return st;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return UCCL_ERR_NO_MEMORY;
    c->conns = calloc((size_t)params->size, sizeof(*c->conns));
    c->host_id = calloc((size_t)params->size, sizeof(*c->host_id));
    if (c->conns == NULL || c->host_id == NULL) {
        comm_free(c);
        return UCCL_ERR_NO_MEMORY;
    }
    c->engine = params->engine;
    c->rank = params->rank;
    c->size = params->size;
    for (int r = 0; r < c->size && c->size > 1; r++)
        c->conns[r] = r == c->rank ? NULL : params->conns[r];
    st = fill_host_ids(c, params);
    if (st != UCCL_OK) {
        comm_free(c); /* the caller keeps its conns and engine */
        return st;
    }
    c->owns_engine = (params->field_mask & UCCL_COMM_PARAM_FLAGS) &&
                     (params->flags & UCCL_COMM_FLAG_OWN_ENGINE);
    *comm = c;
    return UCCL_OK;
}

uccl_status_t uccl_comm_destroy(uccl_comm_t *comm)
{
    uccl_status_t first = UCCL_OK;

    if (comm == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_coll_state_destroy(comm->coll);
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
    comm_free(comm);
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

uccl_status_t uccl_comm_create_lazy(uccl_engine_t *engine, bool owns_engine, int rank, int size,
                                    const uint64_t *host_ids, const uint64_t *engine_ids,
                                    const uint8_t *const *addr, const uint32_t *addr_len,
                                    uccl_comm_t **comm)
{
    uccl_comm_t *c = calloc(1, sizeof(*c));
    comm_lazy_t *l = calloc(1, sizeof(*l));

    if (c == NULL || l == NULL || pthread_mutex_init(&l->lock, NULL) != 0) {
        free(c);
        free(l);
        return UCCL_ERR_NO_MEMORY;
    }
    c->engine = engine;
    c->rank = rank;
    c->size = size;
    c->lazy = l;
    c->conns = calloc((size_t)size, sizeof(*c->conns));
    c->host_id = malloc((size_t)size * sizeof(*c->host_id));
    l->engine_id = malloc((size_t)size * sizeof(*l->engine_id));
    l->addr = calloc((size_t)size, sizeof(*l->addr));
    l->addr_len = malloc((size_t)size * sizeof(*l->addr_len));
    l->failed = calloc((size_t)size, sizeof(*l->failed));
    if (c->conns == NULL || c->host_id == NULL || l->engine_id == NULL || l->addr == NULL ||
        l->addr_len == NULL || l->failed == NULL)
        goto nomem;
    for (int r = 0; r < size; r++) {
        c->host_id[r] = host_ids[r];
        l->engine_id[r] = engine_ids[r];
        l->addr_len[r] = addr_len[r];
        if (r == rank)
            continue;
        l->addr[r] = malloc(addr_len[r] ? addr_len[r] : 1);
        if (l->addr[r] == NULL)
            goto nomem;
        memcpy(l->addr[r], addr[r], addr_len[r]);
    }
    c->owns_engine = owns_engine;
    *comm = c;
    return UCCL_OK;
nomem:
    comm_free(c);
    return UCCL_ERR_NO_MEMORY;
}

/* Accept until rank r (< own rank) has connected; connections of other
 * lower ranks that come first are kept for them. */
static uccl_status_t lazy_accept(uccl_comm_t *c, int r)
{
    comm_lazy_t *l = c->lazy;

    while (c->conns[r] == NULL) {
        uccl_conn_attr_t attr;
        uccl_conn_t *conn;
        uccl_status_t st = uccl_accept(c->engine, -1, &conn);
        int q = -1;

        if (st != UCCL_OK) {
            coll_error("rank %d: waiting for rank %d to connect (lazy connection): %s", c->rank,
                       r, uccl_strerror(st));
            return st;
        }
        if (uccl_conn_query(conn, &attr) == UCCL_OK) {
            for (q = c->rank - 1; q >= 0; q--)
                if (l->engine_id[q] == attr.peer_id && c->conns[q] == NULL)
                    break;
        }
        if (q < 0) {
            coll_error("rank %d: accepted a connection from engine %016llx, no lower rank of the "
                       "comm still expected (does the caller accept on the comm's engine?)",
                       c->rank, (unsigned long long)attr.peer_id);
            uccl_conn_close(conn);
            return UCCL_ERR_INVALID_PARAM;
        }
        c->conns[q] = conn;
    }
    return UCCL_OK;
}

static uccl_conn_t *lazy_conn(uccl_comm_t *c, int r)
{
    comm_lazy_t *l = c->lazy;
    uccl_status_t st = UCCL_OK;

    pthread_mutex_lock(&l->lock);
    if (c->conns[r] == NULL && l->failed[r] != UCCL_OK) {
        st = l->failed[r]; /* tried and failed before: no second wait */
    } else if (c->conns[r] == NULL && r > c->rank) {
        st = uccl_connect(c->engine, l->addr[r], l->addr_len[r], &c->conns[r]);
        if (st != UCCL_OK) {
            c->conns[r] = NULL;
            coll_error("rank %d: lazy connection to rank %d failed: %s", c->rank, r,
                       uccl_strerror(st));
        }
    } else if (c->conns[r] == NULL) {
        st = lazy_accept(c, r);
    }
    if (st != UCCL_OK)
        l->failed[r] = st;
    pthread_mutex_unlock(&l->lock);
    return st == UCCL_OK ? c->conns[r] : NULL;
}

uccl_conn_t *uccl_comm_conn(const uccl_comm_t *comm, int r)
{
    if (comm == NULL || r < 0 || r >= comm->size || r == comm->rank)
        return NULL;
    if (comm->conns[r] == NULL && comm->lazy != NULL)
        return lazy_conn((uccl_comm_t *)comm, r); /* the comm is ours to complete */
    return comm->conns[r];
}

uint64_t uccl_comm_host_id(const uccl_comm_t *comm, int r)
{
    return comm != NULL && r >= 0 && r < comm->size ? comm->host_id[r] : 0;
}

int uccl_comm_same_host(const uccl_comm_t *comm, int r)
{
    if (comm == NULL || r < 0 || r >= comm->size)
        return 0;
    return comm->host_id[r] == comm->host_id[comm->rank];
}

uccl_status_t uccl_coll_state_get(uccl_comm_t *comm, coll_state_t **cs)
{
    if (comm == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (comm->coll == NULL) {
        uccl_status_t st = uccl_coll_state_create(comm, &comm->coll);
        if (st != UCCL_OK)
            return st;
    }
    *cs = comm->coll;
    return UCCL_OK;
}

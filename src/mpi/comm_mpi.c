/* uccl_comm_init_mpi: bootstrap a communicator over MPI. MPI carries only the
 * address exchange and the final agreement; data never touches it. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uccl/uccl_mpi.h>

/* What each rank publishes; fixed size so one MPI_Allgather moves all. */
typedef struct boot_entry {
    int32_t status; /* UCCL_OK, or why this rank could not set up */
    uint32_t addr_len;
    uint64_t engine_id;
    uint64_t host_key; /* hash of the hostname: equal = same host */
    uint8_t addr[UCCL_ADDRESS_MAX];
} boot_entry_t;

typedef struct boot {
    MPI_Comm mpi_comm;
    int rank;
    int size;
    uccl_engine_t *engine;
    int owns_engine;
    boot_entry_t *entries; /* one per rank */
    uccl_conn_t **conns;   /* conns[r], NULL for own rank */
    int *host;             /* lowest rank sharing r's host */
} boot_t;

static void boot_error(const boot_t *b, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[uccl mpi-boot rank %d/%d] ", b->rank, b->size);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static uint64_t host_key(void)
{
    char name[256] = {0};
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    if (gethostname(name, sizeof(name) - 1) != 0)
        snprintf(name, sizeof(name), "unknown-host");
    for (const char *p = name; *p; p++) {
        h ^= (uint8_t)*p;
        h *= 1099511628211ull;
    }
    return h;
}

static uccl_status_t local_setup(boot_t *b, const uccl_comm_params_t *params, boot_entry_t *me)
{
    const uccl_engine_params_t *eparams = NULL;
    size_t len = sizeof(me->addr);
    uccl_status_t st;

    if (params != NULL && (params->field_mask & UCCL_COMM_PARAM_ENGINE)) {
        if (params->engine == NULL)
            return UCCL_ERR_INVALID_PARAM;
        b->engine = params->engine;
    } else {
        if (params != NULL && (params->field_mask & UCCL_COMM_PARAM_ENGINE_PARAMS))
            eparams = params->engine_params;
        st = uccl_engine_create(eparams, &b->engine);
        if (st != UCCL_OK) {
            boot_error(b, "engine creation failed: %s", uccl_strerror(st));
            return st;
        }
        b->owns_engine = 1;
    }
    st = uccl_engine_address(b->engine, me->addr, &len);
    if (st != UCCL_OK) {
        boot_error(b, "engine address: %s", uccl_strerror(st));
        return st;
    }
    me->addr_len = (uint32_t)len;
    me->engine_id = uccl_engine_id(b->engine);
    me->host_key = host_key();
    return UCCL_OK;
}

/* Gather every rank's entry; a rank that failed locally still takes part, so
 * everyone learns of the failure here instead of waiting on a connection. */
static uccl_status_t exchange(boot_t *b, const boot_entry_t *me)
{
    int rc = MPI_Allgather(me, (int)sizeof(*me), MPI_BYTE, b->entries, (int)sizeof(*me),
                           MPI_BYTE, b->mpi_comm);
    if (rc != MPI_SUCCESS) {
        boot_error(b, "MPI_Allgather of addresses failed (MPI error %d)", rc);
        return UCCL_ERR_IO;
    }
    if (me->status != UCCL_OK)
        return (uccl_status_t)me->status;
    for (int r = 0; r < b->size; r++) {
        if (b->entries[r].status != UCCL_OK)
            return UCCL_ERR_PEER_FAILED;
    }
    return UCCL_OK;
}

static uccl_status_t connect_up(boot_t *b)
{
    for (int r = b->rank + 1; r < b->size; r++) {
        const boot_entry_t *e = &b->entries[r];
        uccl_status_t st = uccl_connect(b->engine, e->addr, e->addr_len, &b->conns[r]);
        if (st != UCCL_OK) {
            boot_error(b, "connect to rank %d failed: %s", r, uccl_strerror(st));
            return st;
        }
    }
    return UCCL_OK;
}

static int rank_of_engine(const boot_t *b, uint64_t engine_id)
{
    for (int r = 0; r < b->rank; r++) {
        if (b->entries[r].engine_id == engine_id)
            return r;
    }
    return -1;
}

static uccl_status_t accept_down(boot_t *b)
{
    for (int n = 0; n < b->rank; n++) {
        uccl_conn_attr_t attr;
        uccl_conn_t *conn;
        uccl_status_t st = uccl_accept(b->engine, -1, &conn);
        int r;

        if (st != UCCL_OK) {
            boot_error(b, "accept (%d of %d from lower ranks) failed: %s", n + 1, b->rank,
                       uccl_strerror(st));
            return st;
        }
        st = uccl_conn_query(conn, &attr);
        r = st == UCCL_OK ? rank_of_engine(b, attr.peer_id) : -1;
        if (r < 0 || b->conns[r] != NULL) {
            boot_error(b, "accepted a connection from engine %016llx, which is no lower rank "
                          "still expected (was the engine given in params already in use?)",
                       (unsigned long long)attr.peer_id);
            uccl_conn_close(conn);
            return UCCL_ERR_INVALID_PARAM;
        }
        b->conns[r] = conn;
    }
    return UCCL_OK;
}

/* Every rank returns the same verdict: its own error if it failed, else
 * UCCL_ERR_PEER_FAILED when another rank did. */
static uccl_status_t agree(boot_t *b, uccl_status_t st)
{
    int mine = (int)st, worst = 0;
    int rc = MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, b->mpi_comm);

    if (rc != MPI_SUCCESS) {
        boot_error(b, "MPI_Allreduce of the setup status failed (MPI error %d)", rc);
        return st != UCCL_OK ? st : UCCL_ERR_IO;
    }
    if (st != UCCL_OK)
        return st;
    return worst < 0 ? UCCL_ERR_PEER_FAILED : UCCL_OK;
}

/* host[r] = lowest rank on r's host, so equal values mean the same host. */
static void map_hosts(boot_t *b)
{
    for (int r = 0; r < b->size; r++) {
        int q = 0;
        while (b->entries[q].host_key != b->entries[r].host_key)
            q++; /* stops at r at the latest */
        b->host[r] = q;
    }
}

static void boot_release(boot_t *b, int keep)
{
    if (!keep) {
        for (int r = 0; b->conns != NULL && r < b->size; r++) {
            if (b->conns[r] != NULL)
                uccl_conn_close(b->conns[r]);
        }
        if (b->owns_engine)
            uccl_engine_destroy(b->engine);
    }
    free(b->entries);
    free(b->conns);
    free(b->host);
}

static uccl_status_t boot_init(boot_t *b, MPI_Comm mpi_comm)
{
    memset(b, 0, sizeof(*b));
    b->mpi_comm = mpi_comm;
    if (MPI_Comm_rank(mpi_comm, &b->rank) != MPI_SUCCESS ||
        MPI_Comm_size(mpi_comm, &b->size) != MPI_SUCCESS)
        return UCCL_ERR_IO;
    b->entries = calloc((size_t)b->size, sizeof(*b->entries));
    b->conns = calloc((size_t)b->size, sizeof(*b->conns));
    b->host = calloc((size_t)b->size, sizeof(*b->host));
    return b->entries && b->conns && b->host ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

static uccl_status_t boot_connect_all(boot_t *b, const uccl_comm_params_t *params,
                                      uccl_comm_t **comm)
{
    boot_entry_t me;
    uccl_status_t st;

    memset(&me, 0, sizeof(me));
    me.status = local_setup(b, params, &me);
    st = exchange(b, &me);
    if (st == UCCL_OK)
        st = connect_up(b);
    if (st == UCCL_OK)
        st = accept_down(b);
    if (st == UCCL_OK) {
        map_hosts(b);
        st = uccl_comm_create(b->engine, b->owns_engine, b->rank, b->size, b->conns, b->host,
                              comm);
    }
    return st;
}

uccl_status_t uccl_comm_init_mpi(MPI_Comm mpi_comm, const uccl_comm_params_t *params,
                                 uccl_comm_t **comm)
{
    uccl_comm_t *c = NULL;
    boot_t b;
    uccl_status_t st;

    if (comm == NULL || mpi_comm == MPI_COMM_NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = boot_init(&b, mpi_comm);
    if (st == UCCL_ERR_IO)
        return st; /* not even our rank is known: nothing collective is possible */
    /* Agree on the allocations first, so that no rank skips a collective. */
    st = agree(&b, st);
    if (st == UCCL_OK)
        st = boot_connect_all(&b, params, &c);
    st = agree(&b, st);
    if (st != UCCL_OK && c != NULL) {
        uccl_comm_destroy(c); /* owns the conns and (if ours) the engine now */
        c = NULL;
        b.owns_engine = 0;
        memset(b.conns, 0, sizeof(*b.conns) * (size_t)b.size);
    }
    boot_release(&b, c != NULL);
    if (c != NULL)
        *comm = c;
    return st;
}

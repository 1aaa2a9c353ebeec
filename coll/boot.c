/* uccl_comm_init: bootstrap a communicator over the caller's allgather
 * callback (MPI, mpi4py, a torch store). The callback carries only the
 * address exchange and two agreements on the outcome; data never touches it. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl_coll.h>

#include "coll.h"

/* What each rank publishes; fixed size so one allgather moves all. */
typedef struct boot_entry {
    int32_t status; /* UCCL_OK, or why this rank could not set up */
    int32_t rank;   /* who wrote the block: checks the callback's order */
    int32_t size;
    uint32_t addr_len;
    uint64_t engine_id;
    uint64_t host_id; /* uccl_engine_host_id: the host map without connections */
    uint64_t caps;    /* uccl_engine_caps: a pair with no transport in common fails here */
    uint64_t check;   /* block_check of the block: catches garbled or truncated blocks */
    uint8_t addr[UCCL_ADDRESS_MAX];
} boot_entry_t;

/* A vote: the setup status, the rank's way of connecting (UCCL_LAZY_CONNECT:
 * ranks that differ would wait on each other until UCCL_TIMEOUT_MS), and in
 * the vote before connecting the digest of the address table, so that a
 * callback that delivered different tables to different ranks is caught
 * before anyone connects to garbage. */
typedef struct boot_vote {
    int32_t status;
    uint32_t lazy; /* 1: connects on first use, 0: connects in uccl_comm_init */
    uint64_t digest;
} boot_vote_t;

typedef struct boot {
    int rank;
    int size;
    uccl_allgather_fn_t allgather;
    void *ctx;
    uccl_engine_t *engine;
    int owns_engine;
    int lazy;              /* uccl_coll_lazy_connect: the same on every rank, or refused */
    boot_entry_t *entries; /* one per rank */
    boot_vote_t *votes;    /* one per rank */
    uint64_t digest;       /* of the entries as this rank received them */
    uccl_conn_t **conns;   /* conns[r], NULL for own rank */
} boot_t;

#define INIT_FIELDS                                                                          \
    (UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_ENGINE_PARAMS | UCCL_COMM_PARAM_RANK |         \
     UCCL_COMM_PARAM_SIZE | UCCL_COMM_PARAM_ALLGATHER)
#define INIT_NEEDS (UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE | UCCL_COMM_PARAM_ALLGATHER)

static void boot_error(int rank, int size, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[uccl boot rank %d/%d] ", rank, size);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static uccl_status_t check_init_params(const uccl_comm_params_t *p, uccl_comm_t **comm)
{
    const char *why = NULL;

    if (p == NULL || comm == NULL)
        why = "params or comm is NULL";
    else if ((p->field_mask & ~(uint64_t)INIT_FIELDS) != 0)
        why = "params->field_mask has bits uccl_comm_init does not know";
    else if ((p->field_mask & INIT_NEEDS) != INIT_NEEDS)
        why = "rank, size and allgather are required";
    else if (p->size < 1 || p->rank < 0 || p->rank >= p->size)
        why = "rank out of range [0, size)";
    else if (p->allgather == NULL)
        why = "allgather callback is NULL";
    else if ((p->field_mask & UCCL_COMM_PARAM_ENGINE) &&
             (p->field_mask & UCCL_COMM_PARAM_ENGINE_PARAMS))
        why = "an engine and engine params are exclusive";
    else if ((p->field_mask & UCCL_COMM_PARAM_ENGINE) && p->engine == NULL)
        why = "the engine given is NULL";
    if (why == NULL)
        return UCCL_OK;
    boot_error(p != NULL ? p->rank : -1, p != NULL ? p->size : 0, "uccl_comm_init: %s", why);
    return UCCL_ERR_INVALID_PARAM;
}

/* The callback's status as ours: positive values are no success either. */
static uccl_status_t call_allgather(const boot_t *b, const void *send, void *recv, size_t bytes,
                                    const char *what)
{
    uccl_status_t st = b->allgather(send, recv, bytes, b->ctx);

    if (st == UCCL_OK)
        return UCCL_OK;
    boot_error(b->rank, b->size, "allgather of %s failed: %s (%d)", what, uccl_strerror(st),
               (int)st);
    return UCCL_STATUS_IS_ERR(st) ? st : UCCL_ERR_INVALID_PARAM;
}

static uint64_t fnv1a(const void *data, size_t len, uint64_t h)
{
    const uint8_t *p = data;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* FNV-1a over the table as received, unused address bytes included (every
 * rank zeroes its block before filling it). */
static uint64_t table_digest(const boot_entry_t *entries, int size)
{
    return fnv1a(entries, (size_t)size * sizeof(*entries), 14695981039346656037ull);
}

/* A block's own check value, over the block with check zero; the seed names
 * this layout, so a block of another libuccl version does not check. */
static uint64_t block_check(const boot_entry_t *e)
{
    boot_entry_t copy = *e;

    copy.check = 0;
    return fnv1a(&copy, sizeof(copy), fnv1a("uccl-boot-entry-v1", 18, 14695981039346656037ull));
}

/* Did the callback deliver another table to some rank than to us? A zero
 * digest has no say (the rank's callback failed in the exchange). */
static int digest_differs(const boot_t *b, uint64_t digest)
{
    for (int r = 0; r < b->size && digest != 0; r++) {
        if (b->votes[r].digest == 0 || b->votes[r].digest == digest)
            continue;
        boot_error(b->rank, b->size,
                   "rank %d received another address table than this rank (digest %016llx, "
                   "here %016llx): the callback must deliver the same data to every rank",
                   r, (unsigned long long)b->votes[r].digest, (unsigned long long)digest);
        return 1;
    }
    return 0;
}

/* Does some rank connect otherwise (lazy or eager) than this one? */
static int lazy_differs(const boot_t *b)
{
    for (int r = 0; r < b->size; r++) {
        if ((int)b->votes[r].lazy == b->lazy)
            continue;
        boot_error(b->rank, b->size,
                   "rank %d connects %s, this rank %s: UCCL_LAZY_CONNECT must be the same on "
                   "every rank", r, b->votes[r].lazy ? "on first use (lazy)" : "in uccl_comm_init",
                   b->lazy ? "on first use (lazy)" : "in uccl_comm_init");
        return 1;
    }
    return 0;
}

/* One agreement round. The verdict is UCCL_ERR_INVALID_PARAM on every rank
 * when the tables differ (digest: this rank's, 0 for no check) or the ranks
 * do not all connect the same way (lazy or eager), else this
 * rank's own error, else UCCL_ERR_PEER_FAILED when another rank voted an
 * error. *cb_failed tells that the callback failed here (the verdict is
 * then its error). */
static uccl_status_t agree(boot_t *b, uccl_status_t st, uint64_t digest, int *cb_failed)
{
    boot_vote_t mine = {.status = (int32_t)st, .lazy = (uint32_t)b->lazy, .digest = digest};
    uccl_status_t cb = call_allgather(b, &mine, b->votes, sizeof(mine), "the setup status");

    *cb_failed = cb != UCCL_OK;
    if (cb != UCCL_OK)
        return st != UCCL_OK ? st : cb;
    if (digest_differs(b, digest) || lazy_differs(b))
        return UCCL_ERR_INVALID_PARAM;
    if (st != UCCL_OK)
        return st;
    for (int r = 0; r < b->size; r++) {
        if (b->votes[r].status != UCCL_OK)
            return UCCL_ERR_PEER_FAILED;
    }
    return UCCL_OK;
}


static uccl_status_t local_setup(boot_t *b, const uccl_comm_params_t *p, boot_entry_t *me)
{
    const uccl_engine_params_t *eparams = NULL;
    size_t len = sizeof(me->addr);
    uccl_status_t st;

    if (p->field_mask & UCCL_COMM_PARAM_ENGINE) {
        b->engine = p->engine;
    } else {
        if (p->field_mask & UCCL_COMM_PARAM_ENGINE_PARAMS)
            eparams = p->engine_params;
        st = uccl_engine_create(eparams, &b->engine);
        if (st != UCCL_OK) {
            boot_error(b->rank, b->size, "engine creation failed: %s", uccl_strerror(st));
            return st;
        }
        b->owns_engine = 1;
    }
    st = uccl_engine_address(b->engine, me->addr, &len);
    if (st != UCCL_OK) {
        boot_error(b->rank, b->size, "engine address: %s", uccl_strerror(st));
        return st;
    }
    me->addr_len = (uint32_t)len;
    me->engine_id = uccl_engine_id(b->engine);
    me->host_id = uccl_engine_host_id(b->engine);
    me->caps = uccl_engine_caps(b->engine);
    return UCCL_OK;
}

/* Every transport is in one of the two (a new one must be added here). */
#define NET_CAPS (UCCL_CAP_TCP | UCCL_CAP_VERBS | UCCL_CAP_OFI)
#define HOST_CAPS (UCCL_CAP_SHM | UCCL_CAP_GPU_IPC)

/* A pair whose engines open no transport in common, or only host-local ones
 * between hosts, could never connect: say so before anyone connects, or the
 * other side of the failed connect waits UCCL_TIMEOUT_MS in its accept. */
static uccl_status_t check_reach(const boot_t *b)
{
    const boot_entry_t *me = &b->entries[b->rank];

    for (int r = 0; r < b->size; r++) {
        const boot_entry_t *e = &b->entries[r];
        uint64_t common = me->caps & e->caps & (NET_CAPS | HOST_CAPS);
        if (r == b->rank || (common & NET_CAPS) != 0 ||
            (common != 0 && e->host_id == me->host_id))
            continue;
        boot_error(b->rank, b->size,
                   "no transport reaches rank %d: its engine opens %#llx, this one %#llx%s "
                   "(UCCL_TRANSPORTS or the engine params differ?)",
                   r, (unsigned long long)e->caps, (unsigned long long)me->caps,
                   common != 0 ? ", only host-local ones in common and the hosts differ" : "");
        return UCCL_ERR_NO_TRANSPORT;
    }
    return UCCL_OK;
}

/* A block out of place means the callback does not order ranks as we do. */
static uccl_status_t check_entries(const boot_t *b)
{
    for (int r = 0; r < b->size; r++) {
        const boot_entry_t *e = &b->entries[r];
        if (e->check == block_check(e))
            continue;
        boot_error(b->rank, b->size,
                   "allgather delivered a block at position %d that does not check: garbled, "
                   "truncated, or from another libuccl version", r);
        return UCCL_ERR_INVALID_PARAM;
    }
    for (int r = 0; r < b->size; r++) {
        const boot_entry_t *e = &b->entries[r];
        if (e->rank == r && e->size == b->size && e->addr_len <= UCCL_ADDRESS_MAX)
            continue;
        boot_error(b->rank, b->size,
                   "allgather put a block from rank %d of %d (address %u bytes) at position %d: "
                   "the callback must order blocks by rank",
                   (int)e->rank, (int)e->size, (unsigned)e->addr_len, r);
        return UCCL_ERR_INVALID_PARAM;
    }
    for (int r = 0; r < b->size; r++) {
        if (b->entries[r].status != UCCL_OK)
            return UCCL_ERR_PEER_FAILED;
    }
    return check_reach(b);
}

/* Set up locally and gather every rank's entry; a rank that failed locally
 * still takes part, so everyone learns of it without waiting on a conn. */
static uccl_status_t exchange(boot_t *b, const uccl_comm_params_t *p)
{
    boot_entry_t me;
    uccl_status_t st;

    memset(&me, 0, sizeof(me));
    me.rank = b->rank;
    me.size = b->size;
    me.status = local_setup(b, p, &me);
    me.check = block_check(&me);
    st = call_allgather(b, &me, b->entries, sizeof(me), "engine addresses");
    b->digest = st == UCCL_OK ? table_digest(b->entries, b->size) : 0;
    if (me.status != UCCL_OK)
        return (uccl_status_t)me.status;
    return st != UCCL_OK ? st : check_entries(b);
}

static uccl_status_t connect_up(boot_t *b)
{
    for (int r = b->rank + 1; r < b->size; r++) {
        const boot_entry_t *e = &b->entries[r];
        uccl_status_t st = uccl_connect(b->engine, e->addr, e->addr_len, &b->conns[r]);
        if (st != UCCL_OK) {
            boot_error(b->rank, b->size, "connect to rank %d failed: %s", r, uccl_strerror(st));
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
            boot_error(b->rank, b->size, "accept (%d of %d from lower ranks) failed: %s", n + 1,
                       b->rank, uccl_strerror(st));
            return st;
        }
        st = uccl_conn_query(conn, &attr);
        r = st == UCCL_OK ? rank_of_engine(b, attr.peer_id) : -1;
        if (r < 0 || b->conns[r] != NULL) {
            boot_error(b->rank, b->size,
                       "accepted a connection from engine %016llx, which is no lower rank "
                       "still expected (was the engine given in params already in use?)",
                       (unsigned long long)attr.peer_id);
            uccl_conn_close(conn);
            return UCCL_ERR_INVALID_PARAM;
        }
        b->conns[r] = conn;
    }
    return UCCL_OK;
}

static uccl_status_t connect_all(boot_t *b, uccl_comm_t **comm)
{
    uccl_comm_params_t cp = {
        .field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |
                      UCCL_COMM_PARAM_CONNS | UCCL_COMM_PARAM_FLAGS,
        .engine = b->engine,
        .rank = b->rank,
        .size = b->size,
        .conns = b->conns,
        .flags = b->owns_engine ? UCCL_COMM_FLAG_OWN_ENGINE : 0,
    };
    uccl_status_t st = connect_up(b);

    if (st == UCCL_OK)
        st = accept_down(b);
    if (st == UCCL_OK) /* the host map comes from the engines' host ids */
        st = uccl_comm_create(&cp, comm);
    if (st == UCCL_OK) { /* the comm owns the conns and (if ours) the engine now */
        memset(b->conns, 0, sizeof(*b->conns) * (size_t)b->size);
        b->owns_engine = 0;
    }
    return st;
}

/* Lazy connection: the comm keeps every peer's address and connects on
 * first use (uccl_comm_conn). */
static uccl_status_t connect_none(boot_t *b, uccl_comm_t **comm)
{
    uint64_t *host = malloc((size_t)b->size * sizeof(*host));
    uint64_t *id = malloc((size_t)b->size * sizeof(*id));
    uint32_t *len = malloc((size_t)b->size * sizeof(*len));
    const uint8_t **addr = malloc((size_t)b->size * sizeof(*addr));
    uccl_status_t st = UCCL_ERR_NO_MEMORY;

    if (host != NULL && id != NULL && len != NULL && addr != NULL) {
        for (int r = 0; r < b->size; r++) {
            host[r] = b->entries[r].host_id;
            id[r] = b->entries[r].engine_id;
            len[r] = b->entries[r].addr_len;
            addr[r] = b->entries[r].addr;
        }
        st = uccl_comm_create_lazy(b->engine, b->owns_engine, b->rank, b->size, host, id,
                                   (const uint8_t *const *)addr, len, comm);
        if (st == UCCL_OK)
            b->owns_engine = 0;
    }
    free(host);
    free(id);
    free(len);
    free(addr);
    return st;
}

static uccl_status_t boot_alloc(boot_t *b, const uccl_comm_params_t *p)
{
    memset(b, 0, sizeof(*b));
    b->rank = p->rank;
    b->size = p->size;
    b->allgather = p->allgather;
    b->ctx = p->allgather_ctx;
    b->lazy = uccl_coll_lazy_connect(b->size);
    b->entries = calloc((size_t)b->size, sizeof(*b->entries));
    b->votes = calloc((size_t)b->size, sizeof(*b->votes));
    b->conns = calloc((size_t)b->size, sizeof(*b->conns));
    if (b->entries != NULL && b->votes != NULL && b->conns != NULL)
        return UCCL_OK;
    boot_error(b->rank, b->size, "no memory for the tables of %d ranks; the other ranks may "
                                 "wait in their allgather", b->size);
    return UCCL_ERR_NO_MEMORY;
}

/* Close what the comm did not take over, and free the tables. */
static void boot_release(boot_t *b)
{
    for (int r = 0; b->conns != NULL && r < b->size; r++) {
        if (b->conns[r] != NULL)
            uccl_conn_close(b->conns[r]);
    }
    if (b->owns_engine)
        uccl_engine_destroy(b->engine);
    free(b->entries);
    free(b->votes);
    free(b->conns);
}

/* Three allgather calls on every rank, whatever happens: addresses, a vote
 * before connecting (nobody waits on a rank that failed), a final vote. */
uccl_status_t uccl_comm_init(const uccl_comm_params_t *params, uccl_comm_t **comm)
{
    uccl_comm_t *c = NULL;
    uccl_status_t st = check_init_params(params, comm);
    int cb_failed = 0;
    boot_t b;

    if (st != UCCL_OK)
        return st;
    st = boot_alloc(&b, params);
    if (st == UCCL_OK)
        st = exchange(&b, params);
    if (b.entries != NULL && b.votes != NULL && b.conns != NULL) {
        uccl_status_t mine = st;
        st = agree(&b, mine, b.digest, &cb_failed);
        /* The vote's callback failed here only: the others, seeing every vote
         * OK, will connect to us, so connect too and tell them in the last vote. */
        if (st == UCCL_OK || (cb_failed && mine == UCCL_OK)) {
            uccl_status_t cst = b.lazy ? connect_none(&b, &c) : connect_all(&b, &c);
            st = st != UCCL_OK ? st : cst;
        }
        st = agree(&b, st, 0, &cb_failed);
    }
    if (st != UCCL_OK && c != NULL) {
        uccl_comm_destroy(c);
        c = NULL;
    }
    boot_release(&b);
    if (c != NULL)
        *comm = c;
    return st;
}

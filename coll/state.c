/* Per-comm collective state: the cache of registered user buffers (slot =
 * index, the name peers store its descriptor under), registered scratch
 * memory, descriptors peers sent, and the notification demultiplexer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"

#define COLL_CACHE_MAX 64 /* unpinned entries kept before LRU eviction */

static uccl_status_t state_arrays(coll_state_t *cs)
{
    size_t n = (size_t)cs->size;
    long local = 0, cpus;

    cs->peer_desc = calloc(n, sizeof(*cs->peer_desc));
    cs->peer_ndesc = calloc(n, sizeof(*cs->peer_ndesc));
    cs->stash = calloc(n, sizeof(*cs->stash));
    cs->nstash = calloc(n, sizeof(*cs->nstash));
    cs->capstash = calloc(n, sizeof(*cs->capstash));
    cs->host_id = calloc(n, sizeof(*cs->host_id));
    if (!cs->peer_desc || !cs->peer_ndesc || !cs->stash || !cs->nstash || !cs->capstash ||
        !cs->host_id)
        return UCCL_ERR_NO_MEMORY;
    /* The hosts as the engines see them (UCCL_HOST_ID included), for the
     * algorithm table: the comm's map (no connection needed: lazy comms).
     * Peers of this host talk over the network when this engine has no shm. */
    for (int r = 0; r < cs->size; r++) {
        cs->host_id[r] = uccl_comm_host_id(cs->comm, r);
        local += cs->host_id[r] == cs->host_id[cs->rank];
    }
    cs->net = !(uccl_engine_caps(cs->engine) & UCCL_CAP_SHM);
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cs->oversubscribed = cpus > 0 && local > cpus;
    cs->trace = uccl_coll_trace_on();
    uccl_coll_helper_init(cs, cpus, local);
    return UCCL_OK;
}

static uccl_status_t entry_init(coll_state_t *cs, coll_buf_entry_t *e, void *addr, size_t len)
{
    uccl_mr_attr_t attr;
    uccl_status_t st;

    memset(e, 0, sizeof(*e));
    e->sent = calloc((size_t)cs->size, 1);
    if (e->sent == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_mr_reg(cs->engine, addr, len, 0, &e->mr);
    if (st != UCCL_OK) {
        coll_error("registering a %zu-byte collective buffer at %p: %s", len, addr,
                   uccl_strerror(st));
        goto err_sent;
    }
    st = uccl_mr_query(e->mr, &attr);
    if (st != UCCL_OK)
        goto err_mr;
    e->mem_type = attr.mem_type;
    e->addr = addr;
    e->len = len;
    e->gen = ++cs->gen_clock;
    return UCCL_OK;

err_mr:
    uccl_mr_dereg(e->mr);
    e->mr = NULL;
err_sent:
    free(e->sent);
    e->sent = NULL;
    return st;
}

static void entry_fini(coll_buf_entry_t *e)
{
    if (e->mr != NULL)
        uccl_mr_dereg(e->mr);
    free(e->sent);
    memset(e, 0, sizeof(*e));
}

uccl_status_t uccl_coll_state_create(uccl_comm_t *comm, coll_state_t **out)
{
    coll_state_t *cs = calloc(1, sizeof(*cs));
    uccl_status_t st = UCCL_ERR_NO_MEMORY;

    if (cs == NULL)
        return st;
    pthread_mutex_init(&cs->lock, NULL);
    cs->comm = comm;
    cs->engine = uccl_comm_engine(comm);
    cs->rank = uccl_comm_rank(comm);
    cs->size = uccl_comm_size(comm);
    cs->bufs = calloc(1, sizeof(*cs->bufs));
    if (cs->bufs == NULL || (st = state_arrays(cs)) != UCCL_OK)
        goto err;
    cs->nbufs = 1;
    st = entry_init(cs, &cs->bufs[0], cs->ctl, sizeof(cs->ctl));
    if (st != UCCL_OK)
        goto err;
    cs->bufs[0].pins = 1; /* the control region stays */
    *out = cs;
    return UCCL_OK;
err:
    uccl_coll_state_destroy(cs);
    return st;
}

void uccl_coll_state_destroy(coll_state_t *cs)
{
    if (cs == NULL)
        return;
    /* under the lock: a progress thread (the engine's, or its stream-hold
     * helper) may be in a schedule's callback, which only trylocks it */
    pthread_mutex_lock(&cs->lock);
    while (cs->inflight != NULL) {
        coll_sched_t *s = cs->inflight;
        uccl_coll_sched_abort(s, UCCL_ERR_CANCELED); /* unlinks s */
    }
    uccl_coll_plans_detach(cs);
    pthread_mutex_unlock(&cs->lock);
    uccl_coll_helper_destroy(cs);
    uccl_coll_stream_destroy(cs);
    uccl_coll_cache_clear(cs);
    uccl_coll_mapped_destroy(cs);
    for (int i = 0; i < cs->nbufs; i++)
        entry_fini(&cs->bufs[i]);
    for (int i = 0; i < cs->nscratch; i++) {
        if (cs->scratch[i].mr != NULL)
            uccl_mr_dereg(cs->scratch[i].mr);
        free(cs->scratch[i].addr);
    }
    for (int p = 0; p < cs->size; p++) {
        if (cs->peer_desc != NULL)
            free(cs->peer_desc[p]);
        if (cs->stash != NULL)
            free(cs->stash[p]);
    }
    free(cs->peer_desc);
    free(cs->peer_ndesc);
    free(cs->stash);
    free(cs->nstash);
    free(cs->capstash);
    free(cs->host_id);
    free(cs->scratch);
    free(cs->bufs);
    pthread_mutex_destroy(&cs->lock);
    free(cs);
}

/* ------------------------------------------------------------------ buffer cache */

bool uccl_coll_buf_query_stale(coll_state_t *cs, int slot)
{
    uccl_mr_attr_t attr;

    return slot < cs->nbufs && cs->bufs[slot].mr != NULL &&
           uccl_mr_query(cs->bufs[slot].mr, &attr) == UCCL_ERR_STALE;
}

/* A live entry holding the range; stale ones met on the way (their memory
 * was freed with uccl_mem_free) are dropped once nothing pins them. */
static int find_entry(coll_state_t *cs, const char *addr, size_t len)
{
    for (int i = 1; i < cs->nbufs; i++) {
        coll_buf_entry_t *e = &cs->bufs[i];
        /* by lengths: addr + len may wrap (a count past the address space),
         * and a wrapped end would look inside any entry starting at addr */
        if (e->mr == NULL || addr < e->addr || len > e->len ||
            (size_t)(addr - e->addr) > e->len - len)
            continue;
        if (!uccl_coll_buf_stale(cs, i))
            return i;
        if (e->pins == 0)
            entry_fini(e);
    }
    return -1;
}

/* A free slot: an empty one, else the least recently used unpinned entry
 * once the cache is full, else a new one. */
static int free_slot(coll_state_t *cs)
{
    int unpinned = 0, lru = -1;

    for (int i = 1; i < cs->nbufs; i++) {
        coll_buf_entry_t *e = &cs->bufs[i];
        if (e->mr == NULL)
            return i;
        if (e->pins == 0) {
            unpinned++;
            if (lru < 0 || e->last_use < cs->bufs[lru].last_use)
                lru = i;
        }
    }
    if (unpinned >= COLL_CACHE_MAX && lru > 0) {
        entry_fini(&cs->bufs[lru]);
        return lru;
    }
    coll_buf_entry_t *grown = realloc(cs->bufs, ((size_t)cs->nbufs + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    cs->bufs = grown;
    memset(&cs->bufs[cs->nbufs], 0, sizeof(*grown));
    return cs->nbufs++;
}

uccl_status_t uccl_coll_buf_get(coll_state_t *cs, const void *addr, size_t len, bool counted,
                                int *slot)
{
    int i = find_entry(cs, addr, len);
    uccl_status_t st;

    if (i > 0) {
        cs->stats.buf_hits += counted;
    } else {
        i = free_slot(cs);
        if (i < 0)
            return UCCL_ERR_NO_MEMORY;
        st = entry_init(cs, &cs->bufs[i], (void *)addr, len);
        if (st != UCCL_OK)
            return st;
        cs->stats.buf_regs += counted;
    }
    cs->bufs[i].pins++;
    cs->bufs[i].last_use = ++cs->use_clock;
    *slot = i;
    return UCCL_OK;
}

void uccl_coll_buf_unpin(coll_state_t *cs, int slot)
{
    if (slot > 0 && slot < cs->nbufs && cs->bufs[slot].pins > 0)
        cs->bufs[slot].pins--;
}

uccl_status_t uccl_coll_buf_desc(coll_state_t *cs, int slot, const uccl_rdesc_t **desc)
{
    coll_buf_entry_t *e = &cs->bufs[slot];

    if (!e->packed) {
        uccl_status_t st = uccl_mr_pack(e->mr, 0, e->len, &e->desc);
        if (st != UCCL_OK) {
            coll_error("packing the descriptor of a collective buffer: %s", uccl_strerror(st));
            return st;
        }
        e->packed = true;
    }
    *desc = &e->desc;
    return UCCL_OK;
}

uccl_status_t uccl_comm_coll_flush(uccl_comm_t *comm)
{
    coll_state_t *cs;
    uccl_status_t st = uccl_coll_state_get(comm, &cs);

    if (st != UCCL_OK)
        return st;
    pthread_mutex_lock(&cs->lock);
    st = cs->inflight != NULL || uccl_coll_stream_busy(cs) ? UCCL_ERR_BUSY : UCCL_OK;
    if (st == UCCL_OK)
        uccl_coll_cache_clear(cs); /* cached plans pin their buffers */
    if (st == UCCL_OK)
        uccl_coll_stream_flush(cs); /* and so do the stream form's */
    for (int i = 1; i < cs->nbufs && st == UCCL_OK; i++)
        if (cs->bufs[i].mr != NULL && cs->bufs[i].pins == 0)
            entry_fini(&cs->bufs[i]);
    pthread_mutex_unlock(&cs->lock);
    return st;
}

uccl_status_t uccl_comm_coll_stats(const uccl_comm_t *comm, uccl_coll_stats_t *stats)
{
    coll_state_t *cs;
    uccl_status_t st;

    if (stats == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_coll_state_get((uccl_comm_t *)comm, &cs);
    if (st != UCCL_OK)
        return st;
    pthread_mutex_lock(&cs->lock);
    *stats = cs->stats;
    pthread_mutex_unlock(&cs->lock);
    return UCCL_OK;
}

/* ------------------------------------------------------------------ scratch */

uccl_status_t uccl_coll_scratch_get(coll_state_t *cs, size_t len, int *idx)
{
    int best = -1;
    coll_scratch_t *sc;
    uccl_status_t st;

    for (int i = 0; i < cs->nscratch; i++) {
        sc = &cs->scratch[i];
        if (!sc->busy && sc->len >= len && (best < 0 || sc->len < cs->scratch[best].len))
            best = i;
    }
    if (best < 0) {
        size_t cap = 256;
        while (cap < len)
            cap *= 2;
        sc = realloc(cs->scratch, ((size_t)cs->nscratch + 1) * sizeof(*sc));
        if (sc == NULL)
            return UCCL_ERR_NO_MEMORY;
        cs->scratch = sc;
        sc = &cs->scratch[cs->nscratch];
        memset(sc, 0, sizeof(*sc));
        sc->addr = malloc(cap);
        if (sc->addr == NULL)
            return UCCL_ERR_NO_MEMORY;
        st = uccl_mr_reg(cs->engine, sc->addr, cap, 0, &sc->mr);
        if (st != UCCL_OK) {
            coll_error("registering %zu bytes of collective scratch: %s", cap, uccl_strerror(st));
            free(sc->addr);
            return st;
        }
        sc->len = cap;
        best = cs->nscratch++;
    }
    cs->scratch[best].busy = true;
    *idx = best;
    return UCCL_OK;
}

void uccl_coll_scratch_put(coll_state_t *cs, int idx)
{
    if (idx >= 0 && idx < cs->nscratch)
        cs->scratch[idx].busy = false;
}

/* ------------------------------------------------------------------ peer descriptors */

uccl_status_t uccl_coll_peer_desc_set(coll_state_t *cs, int peer, int slot, uint32_t gen,
                                 const uccl_rdesc_t *d)
{
    if (slot < 0 || slot > 1 << 20 || gen == 0)
        return UCCL_ERR_BAD_DESC;
    if (slot >= cs->peer_ndesc[peer]) {
        int n = slot + 16;
        coll_peer_desc_t *grown = realloc(cs->peer_desc[peer], (size_t)n * sizeof(*grown));
        if (grown == NULL)
            return UCCL_ERR_NO_MEMORY;
        memset(grown + cs->peer_ndesc[peer], 0,
               (size_t)(n - cs->peer_ndesc[peer]) * sizeof(*grown));
        cs->peer_desc[peer] = grown;
        cs->peer_ndesc[peer] = n;
    }
    /* a token read late must not take a slot back to an older registration */
    if (gen >= cs->peer_desc[peer][slot].gen) {
        cs->peer_desc[peer][slot].desc = *d;
        cs->peer_desc[peer][slot].gen = gen;
    }
    return UCCL_OK;
}

const uccl_rdesc_t *uccl_coll_peer_desc(const coll_state_t *cs, int peer, int slot, uint32_t gen)
{
    if (slot < 0 || slot >= cs->peer_ndesc[peer] || gen == 0 ||
        cs->peer_desc[peer][slot].gen != gen)
        return NULL;
    return &cs->peer_desc[peer][slot].desc;
}

/* ------------------------------------------------------------------ notifications */

static uccl_status_t stash_push(coll_state_t *cs, int peer, uint64_t v)
{
    if (cs->nstash[peer] == cs->capstash[peer]) {
        int cap = cs->capstash[peer] ? 2 * cs->capstash[peer] : 16;
        uint64_t *grown = realloc(cs->stash[peer], (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return UCCL_ERR_NO_MEMORY;
        cs->stash[peer] = grown;
        cs->capstash[peer] = cap;
    }
    cs->stash[peer][cs->nstash[peer]++] = v;
    return UCCL_OK;
}

uccl_status_t uccl_coll_notif_take(coll_state_t *cs, int peer, uint32_t seq, unsigned step,
                              unsigned *code)
{
    uint64_t want = coll_notif(seq, step, 0), v;
    uccl_conn_t *conn = uccl_comm_conn(cs->comm, peer);
    uccl_status_t st;

    for (int i = 0; i < cs->nstash[peer]; i++) {
        if ((cs->stash[peer][i] & ~0xffull) == want) {
            *code = (unsigned)(cs->stash[peer][i] & 0xff);
            cs->stash[peer][i] = cs->stash[peer][--cs->nstash[peer]];
            return UCCL_OK;
        }
    }
    while ((st = uccl_notif_poll(conn, &v)) == UCCL_OK) {
        if ((v & ~0xffull) == want) {
            *code = (unsigned)(v & 0xff);
            return UCCL_OK;
        }
        if ((st = stash_push(cs, peer, v)) != UCCL_OK)
            return st;
    }
    return st == UCCL_ERR_NOT_FOUND ? UCCL_INPROGRESS : st;
}

/* ------------------------------------------------------------------ a schedule's buffers */

/* Register the user buffers and take the temporary (once for a plan). */
uccl_status_t uccl_coll_sched_pin(coll_sched_t *s)
{
    uccl_status_t st;

    if (s->pinned)
        return UCCL_OK;
    for (int b = 0; b < COLL_BUF_COUNT; b++)
        s->slot[b] = -1;
    s->tmp_scratch = -1;
    for (int b = COLL_BUF_SEND; b <= COLL_BUF_RECV; b++) {
        if (s->len[b] == 0)
            continue;
        st = uccl_coll_buf_get(s->cs, s->addr[b], s->len[b], !s->internal, &s->slot[b]);
        if (st != UCCL_OK)
            goto err;
    }
    if (s->len[COLL_BUF_TMP] > 0) {
        st = uccl_coll_scratch_get(s->cs, s->len[COLL_BUF_TMP], &s->tmp_scratch);
        if (st != UCCL_OK)
            goto err;
        s->addr[COLL_BUF_TMP] = s->cs->scratch[s->tmp_scratch].addr;
    }
    s->pinned = true;
    return UCCL_OK;
err:
    for (int b = 0; b < COLL_BUF_COUNT; b++)
        uccl_coll_buf_unpin(s->cs, s->slot[b]);
    return st;
}

void uccl_coll_sched_unpin(coll_sched_t *s)
{
    if (!s->pinned)
        return;
    for (int b = 0; b < COLL_BUF_COUNT; b++)
        uccl_coll_buf_unpin(s->cs, s->slot[b]);
    uccl_coll_scratch_put(s->cs, s->tmp_scratch);
    s->pinned = false;
}

/* Where buf+off lies for the transfer calls: a region and an offset. */
uccl_mr_t *uccl_coll_buf_mr(const coll_sched_t *s, int buf, size_t off, size_t len, size_t *moff)
{
    const coll_state_t *cs = s->cs;

    *moff = 0;
    if (len == 0)
        return NULL;
    if (buf == COLL_BUF_TMP) {
        *moff = off;
        return cs->scratch[s->tmp_scratch].mr;
    }
    *moff = (size_t)(s->addr[buf] - cs->bufs[s->slot[buf]].addr) + off;
    return cs->bufs[s->slot[buf]].mr;
}

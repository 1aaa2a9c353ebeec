/* The stream plan cache of the direct stream path (coll/stream.h): the
 * first stream call on given arguments (op, buffers, counts, root) exchanges
 * a token with every peer (coll/stream.c) and keeps what it learnt - where
 * each peer's block goes in the peer's receive buffer, mapped here, and how
 * many bytes - under the number of that exchange, which is the same on
 * every rank (every rank makes the same exchanges). A later call with the
 * same arguments enqueues only the stream operations, no token and no
 * descriptor, when every rank holds the plan of that same exchange: one
 * 8-byte host allgather of the ids decides it alike on every rank (on one
 * host over shm it runs through the mapped segments, no message). A rank
 * whose arguments differ from that exchange's, or that dropped the entry
 * (evicted, flushed, its receive buffer freed with uccl_mem_free since),
 * says 0 and every rank exchanges anew. The receive buffer's registration
 * stays pinned while the entry lives, so the peers' mappings of it (ended
 * only by its deregistration) stay valid for the hits. */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

bool uccl_coll_splan_alloc(splan_t *p, int n)
{
    p->src = calloc((size_t)n, sizeof(*p->src));
    p->dst = calloc((size_t)n, sizeof(*p->dst));
    p->len = calloc((size_t)n, sizeof(*p->len));
    p->rlen = calloc((size_t)n, sizeof(*p->rlen));
    return p->src != NULL && p->dst != NULL && p->len != NULL && p->rlen != NULL;
}

void uccl_coll_splan_free(splan_t *p)
{
    free(p->src);
    free(p->dst);
    free(p->len);
    free(p->rlen);
    memset(p, 0, sizeof(*p));
}

static void entry_drop(coll_state_t *cs, scached_t *c)
{
    if (c->slot > 0)
        uccl_coll_buf_unpin(cs, c->slot);
    free(c->vec);
    uccl_coll_splan_free(&c->plan);
    memset(c, 0, sizeof(*c));
}

scached_t *uccl_coll_sc_find(coll_sflags_t *sf, coll_state_t *cs, const uccl_coll_args_t *args)
{
    if (!uccl_coll_stream_cache_on())
        return NULL;
    for (int i = 0; i < SCACHE; i++) {
        scached_t *c = &sf->cache[i];
        if (c->id == 0 || !uccl_coll_args_same(cs, &c->key, args))
            continue;
        if (uccl_coll_buf_stale(cs, c->slot)) { /* freed, maybe allocated again there */
            entry_drop(cs, c);
            return NULL;
        }
        c->last_use = ++sf->use_clock;
        return c;
    }
    return NULL;
}

/* Where a new plan for args goes: the entry of the same key (exchanged
 * again), else the first empty entry, else the least recently used. */
static scached_t *sc_victim(coll_sflags_t *sf, const coll_state_t *cs, const uccl_coll_args_t *args)
{
    scached_t *empty = NULL, *lru = NULL;

    for (int i = 0; i < SCACHE; i++) {
        scached_t *c = &sf->cache[i];
        if (c->id == 0) {
            if (empty == NULL)
                empty = c;
        } else if (uccl_coll_args_same(cs, &c->key, args)) {
            return c;
        } else if (lru == NULL || c->last_use < lru->last_use) {
            lru = c;
        }
    }
    return empty != NULL ? empty : lru;
}

void uccl_coll_sc_put(coll_sflags_t *sf, coll_state_t *cs, const uccl_coll_args_t *args, int slot)
{
    scached_t *v;
    int n = sf->size;

    if (!uccl_coll_stream_cache_on())
        return;
    v = sc_victim(sf, cs, args);
    if (v->id != 0)
        entry_drop(cs, v);
    if (!uccl_coll_splan_alloc(&v->plan, n) || !uccl_coll_args_keep(cs, args, &v->key, &v->vec)) {
        entry_drop(cs, v); /* no entry: this rank says 0 next time */
        return;
    }
    v->plan.own_dst = sf->cur.own_dst;
    v->plan.own_src = sf->cur.own_src;
    v->plan.own_len = sf->cur.own_len;
    memcpy(v->plan.src, sf->cur.src, (size_t)n * sizeof(*v->plan.src));
    memcpy(v->plan.dst, sf->cur.dst, (size_t)n * sizeof(*v->plan.dst));
    memcpy(v->plan.len, sf->cur.len, (size_t)n * sizeof(*v->plan.len));
    memcpy(v->plan.rlen, sf->cur.rlen, (size_t)n * sizeof(*v->plan.rlen));
    v->slot = slot;
    if (slot > 0)
        cs->bufs[slot].pins++;
    v->id = sf->xid;
    v->last_use = ++sf->use_clock;
}

void uccl_coll_sc_clear(coll_sflags_t *sf, coll_state_t *cs)
{
    for (int i = 0; i < SCACHE; i++)
        if (sf->cache[i].id != 0)
            entry_drop(cs, &sf->cache[i]);
}

void uccl_coll_stream_flush(coll_state_t *cs)
{
    if (cs->sf != NULL)
        uccl_coll_sc_clear(cs->sf, cs);
}

/* This rank's stream has not passed the comm's last direct call: the
 * peers may still enqueue and run their copies into its receive buffer
 * through their mappings, which its deregistration would close (a call
 * that failed released its stream: not counted). */
bool uccl_coll_stream_busy(coll_state_t *cs)
{
    coll_sflags_t *sf = cs->sf;

    return sf != NULL && sf->state > 0 && __atomic_load_n(&sf->broken, __ATOMIC_ACQUIRE) == UCCL_OK &&
           !uccl_stream_word_reached(sf->word, sf->seq);
}

/* The ids through one 8-byte allgather of the library's own: it does
 * not count in the comm's counters, while a non-blocking collective that
 * its progress advances meanwhile still does. */
uccl_status_t uccl_coll_sc_agree(coll_sflags_t *sf, coll_state_t *cs, uint64_t id, bool *hit)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = sf->ids, .recvbuf = sf->ids + 1,
                          .count = sizeof(uint64_t)};
    uccl_status_t st;

    sf->ids[0] = id;
    st = uccl_coll_internal(cs->comm, &a);
    *hit = st == UCCL_OK && id != 0;
    for (int q = 0; *hit && q < sf->size; q++)
        *hit = sf->ids[1 + q] == id;
    return st;
}

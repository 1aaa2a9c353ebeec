/* Plan cache of plain calls: a blocking or non-blocking call whose
 * arguments equal an earlier call's reuses that call's schedule, already
 * built, its buffers registered and pinned, so a repeated call pays
 * neither the argument copies, the build nor the buffer-cache look-ups
 * (uccl_coll_stats_t.plan_hits counts them). Least recently used entries
 * make room; uccl_comm_coll_flush empties it; a hit whose buffers were
 * freed with uccl_mem_free since is dropped instead. */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static bool vec_op(uccl_coll_op_t op)
{
    return op == UCCL_COLL_ALLGATHERV || op == UCCL_COLL_ALLTOALLV;
}

static bool same_array(const size_t *a, const size_t *b, int n)
{
    if (a == NULL || b == NULL)
        return a == b;
    return memcmp(a, b, (size_t)n * sizeof(*a)) == 0;
}

static inline bool key_same(const coll_state_t *cs, const uccl_coll_args_t *k,
                            const uccl_coll_args_t *a)
{
    uint64_t mask = UCCL_COLL_ARG_ROOT | UCCL_COLL_ARG_ALGO;
    int n = cs->size;

    if (k->op != a->op || k->sendbuf != a->sendbuf || k->recvbuf != a->recvbuf ||
        k->count != a->count || (k->field_mask & mask) != (a->field_mask & mask))
        return false;
    if ((a->field_mask & UCCL_COLL_ARG_ROOT) && k->root != a->root)
        return false;
    if ((a->field_mask & UCCL_COLL_ARG_ALGO) && k->algo != a->algo)
        return false;
    if (!vec_op(a->op))
        return true;
    return same_array(k->recvcounts, a->recvcounts, n) && same_array(k->rdispls, a->rdispls, n) &&
           same_array(k->sendcounts, a->sendcounts, n) && same_array(k->sdispls, a->sdispls, n);
}

bool uccl_coll_args_same(const coll_state_t *cs, const uccl_coll_args_t *k, const uccl_coll_args_t *a)
{
    return key_same(cs, k, a);
}

static void entry_drop(coll_cached_t *c)
{
    uccl_coll_sched_free(c->sched); /* unpins its buffers */
    free(c->vec);
    memset(c, 0, sizeof(*c));
}

static inline bool entry_fits(const coll_state_t *cs, const coll_cached_t *c,
                              const uccl_coll_args_t *args, bool internal)
{
    return c->sched != NULL && c->sched->status != UCCL_INPROGRESS &&
           c->sched->internal == internal && key_same(cs, &c->key, args);
}

coll_sched_t *uccl_coll_cache_find(coll_state_t *cs, const uccl_coll_args_t *args, bool internal)
{
    int i = cs->cache_last; /* the last hit's entry first (a loop of calls repeats one) */
    coll_cached_t *c;

    if (!entry_fits(cs, &cs->cache[i], args, internal)) {
        for (i = 0; i < COLL_PLAN_CACHE; i++)
            if (i != cs->cache_last && entry_fits(cs, &cs->cache[i], args, internal))
                break;
        if (i == COLL_PLAN_CACHE)
            return NULL;
    }
    c = &cs->cache[i];
    /* a buffer freed with uccl_mem_free (and maybe allocated again at the
     * same address): the plan goes, the call builds anew */
    if (uccl_coll_buf_stale(cs, c->sched->slot[COLL_BUF_SEND]) ||
        uccl_coll_buf_stale(cs, c->sched->slot[COLL_BUF_RECV])) {
        entry_drop(c);
        return NULL;
    }
    c->last_use = ++cs->use_clock;
    cs->cache_last = i;
    cs->stats.plan_hits += !internal;
    return c->sched;
}

bool uccl_coll_args_keep(const coll_state_t *cs, const uccl_coll_args_t *args, uccl_coll_args_t *key,
                         size_t **vec)
{
    const size_t *in[4] = {args->sendcounts, args->sdispls, args->recvcounts, args->rdispls};
    const size_t **out[4] = {(const size_t **)&key->sendcounts, (const size_t **)&key->sdispls,
                             (const size_t **)&key->recvcounts, (const size_t **)&key->rdispls};
    size_t n = (size_t)cs->size;

    *key = *args;
    *vec = NULL;
    if (!vec_op(args->op)) {
        for (int i = 0; i < 4; i++)
            *out[i] = NULL;
        return true;
    }
    *vec = malloc(4 * n * sizeof(size_t));
    if (*vec == NULL)
        return false;
    for (int i = 0; i < 4; i++) {
        if (in[i] != NULL)
            memcpy(*vec + (size_t)i * n, in[i], n * sizeof(size_t));
        *out[i] = in[i] != NULL ? *vec + (size_t)i * n : NULL;
    }
    return true;
}

bool uccl_coll_cache_put(coll_state_t *cs, const uccl_coll_args_t *args, coll_sched_t *s)
{
    coll_cached_t *victim = NULL;

    for (int i = 0; i < COLL_PLAN_CACHE; i++) {
        coll_cached_t *c = &cs->cache[i];
        if (c->sched == NULL) {
            victim = c;
            break;
        }
        if (c->sched->status != UCCL_INPROGRESS &&
            (victim == NULL || c->last_use < victim->last_use))
            victim = c;
    }
    if (victim == NULL) /* every entry running */
        return false;
    if (victim->sched != NULL)
        entry_drop(victim);
    if (!uccl_coll_args_keep(cs, args, &victim->key, &victim->vec))
        return false;
    s->keep = true;
    victim->sched = s;
    victim->last_use = ++cs->use_clock;
    cs->cache_last = (int)(victim - cs->cache);
    return true;
}

void uccl_coll_cache_clear(coll_state_t *cs)
{
    for (int i = 0; i < COLL_PLAN_CACHE; i++)
        if (cs->cache[i].sched != NULL && cs->cache[i].sched->status != UCCL_INPROGRESS)
            entry_drop(&cs->cache[i]);
}

/* The general collective call (uccl_coll_post), its blocking form,
 * persistent plans, and the argument checks they share. The thin named
 * variants are in coll/variants.c; the schedules in coll/NAME.c. */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

struct uccl_coll_plan {
    coll_state_t *cs; /* NULL once the comm is destroyed (uccl_coll_plans_detach) */
    coll_args_t args;
    coll_sched_t *sched;
    struct uccl_coll_plan *next, **pprev; /* on cs->plans */
};

/* ------------------------------------------------------------------ argument checks */

static bool rooted(uccl_coll_op_t op)
{
    return op == UCCL_COLL_BCAST || op == UCCL_COLL_GATHER || op == UCCL_COLL_SCATTER;
}

static uccl_status_t copy_array(const size_t *in, int n, size_t **out)
{
    if (in == NULL)
        return UCCL_ERR_INVALID_PARAM;
    *out = malloc((size_t)n * sizeof(**out));
    if (*out == NULL)
        return UCCL_ERR_NO_MEMORY;
    memcpy(*out, in, (size_t)n * sizeof(**out));
    return UCCL_OK;
}

/* Blocks [displs[i], +counts[i]) must not overlap or wrap. */
static uccl_status_t check_blocks(const size_t *counts, const size_t *displs, int n)
{
    for (int i = 0; i < n; i++) {
        if (counts[i] == 0)
            continue;
        if (displs[i] + counts[i] < displs[i])
            return UCCL_ERR_INVALID_PARAM;
        for (int j = 0; j < i; j++)
            if (counts[j] > 0 && displs[i] < displs[j] + counts[j] &&
                displs[j] < displs[i] + counts[i]) {
                coll_error("receive blocks %d and %d overlap", j, i);
                return UCCL_ERR_INVALID_PARAM;
            }
    }
    return UCCL_OK;
}

/* buf + displ + count stays inside the address space. A displacement that
 * fits size_t but not the pointer (buf + SIZE_MAX - 16) would wrap to
 * memory before buf: read or written as the caller's block. */
static bool block_addressable(const void *buf, size_t displ, size_t count)
{
    uintptr_t room = UINTPTR_MAX - (uintptr_t)buf;

    return displ <= room && count <= room - displ;
}

static uccl_status_t check_vectors(coll_state_t *cs, const uccl_coll_args_t *in, coll_args_t *a)
{
    int n = cs->size;
    uccl_status_t st;

    if ((st = copy_array(in->recvcounts, n, &a->recvcounts)) != UCCL_OK ||
        (st = copy_array(in->rdispls, n, &a->rdispls)) != UCCL_OK)
        return st;
    /* quadratic check: trust big comms (not for the linear checks below) */
    if ((n <= 64 || a->op != UCCL_COLL_ALLTOALLV) &&
        (st = check_blocks(a->recvcounts, a->rdispls, n)) != UCCL_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (a->recvcounts[i] > 0 && a->recvbuf == NULL)
            return UCCL_ERR_INVALID_PARAM;
        if (a->recvcounts[i] > 0 && !block_addressable(a->recvbuf, a->rdispls[i],
                                                        a->recvcounts[i])) {
            coll_error("%s: receive block %d (%zu bytes at %zu) is past the address space",
                       uccl_coll_op_name(a->op), i, a->recvcounts[i], a->rdispls[i]);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    if (a->op == UCCL_COLL_ALLGATHERV) {
        if (!a->in_place && a->count != a->recvcounts[cs->rank]) {
            coll_error("allgatherv: rank %d sends %zu bytes, recvcounts[%d] = %zu", cs->rank,
                       a->count, cs->rank, a->recvcounts[cs->rank]);
            return UCCL_ERR_TRUNCATED;
        }
        return UCCL_OK;
    }
    if (a->in_place)
        return UCCL_OK;
    if ((st = copy_array(in->sendcounts, n, &a->sendcounts)) != UCCL_OK ||
        (st = copy_array(in->sdispls, n, &a->sdispls)) != UCCL_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (a->sendcounts[i] > 0 && a->sendbuf == NULL)
            return UCCL_ERR_INVALID_PARAM;
        if (a->sendcounts[i] > 0 &&
            !block_addressable(a->sendbuf, a->sdispls[i], a->sendcounts[i])) {
            coll_error("alltoallv: send block %d (%zu bytes at %zu) is past the address space",
                       i, a->sendcounts[i], a->sdispls[i]);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    return UCCL_OK;
}

/* Which buffer may be UCCL_IN_PLACE, and which must be non-NULL. */
static uccl_status_t check_buffers(coll_state_t *cs, coll_args_t *a)
{
    bool root = !rooted(a->op) || a->root == cs->rank;
    bool send_ip = a->sendbuf == (const char *)UCCL_IN_PLACE;
    bool recv_ip = a->recvbuf == (char *)UCCL_IN_PLACE;
    bool send_used, recv_used;

    switch (a->op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLGATHERV:
    case UCCL_COLL_ALLTOALL: case UCCL_COLL_ALLTOALLV:
        a->in_place = send_ip;
        send_used = !send_ip;
        recv_used = true;
        break;
    case UCCL_COLL_BCAST: send_used = false; recv_used = true; break;
    case UCCL_COLL_GATHER:
        a->in_place = root && send_ip;
        send_used = !a->in_place;
        recv_used = root;
        break;
    default: /* scatter */
        a->in_place = root && recv_ip;
        send_used = root;
        recv_used = !a->in_place;
        break;
    }
    if ((send_ip && !(a->in_place && a->op != UCCL_COLL_SCATTER)) ||
        (recv_ip && !(a->in_place && a->op == UCCL_COLL_SCATTER))) {
        coll_error("%s: UCCL_IN_PLACE not allowed here", uccl_coll_op_name(a->op));
        return UCCL_ERR_INVALID_PARAM;
    }
    if (!send_used || send_ip)
        a->sendbuf = NULL;
    if (!recv_used || recv_ip)
        a->recvbuf = NULL;
    if (a->count > 0 && a->op != UCCL_COLL_ALLGATHERV && a->op != UCCL_COLL_ALLTOALLV &&
        ((send_used && a->sendbuf == NULL) || (recv_used && a->recvbuf == NULL)))
        return UCCL_ERR_INVALID_PARAM;
    if (a->op == UCCL_COLL_ALLGATHERV && send_used && a->count > 0 && a->sendbuf == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return UCCL_OK;
}

/* The block size the table decides by, the same on every rank: the
 * count; allgatherv's largest block; 0 for alltoallv (no rank knows the
 * others' counts; MAPPED decides pair by pair). */
static size_t select_bytes(const coll_state_t *cs, const uccl_coll_args_t *in)
{
    size_t m = 0;

    if (in->op == UCCL_COLL_ALLTOALLV)
        return 0;
    if (in->op != UCCL_COLL_ALLGATHERV || in->recvcounts == NULL)
        return in->count;
    for (int i = 0; i < cs->size; i++)
        m = in->recvcounts[i] > m ? in->recvcounts[i] : m;
    return m;
}

static uccl_status_t resolve_algo(coll_state_t *cs, const uccl_coll_args_t *in, coll_args_t *a)
{
    bool asked = (in->field_mask & UCCL_COLL_ARG_ALGO) && in->algo != UCCL_COLL_ALGO_AUTO;
    uccl_coll_algo_t algo = asked ? in->algo : UCCL_COLL_ALGO_AUTO;
    bool forced = asked; /* by the call or UCCL_COLL_ALGO, not the table */
    uccl_status_t st;

    if ((unsigned)algo >= UCCL_COLL_ALGO_COUNT)
        return UCCL_ERR_INVALID_PARAM;
    if (algo == UCCL_COLL_ALGO_AUTO) {
        algo = uccl_coll_algo_forced();
        forced = uccl_coll_algo_supports(a->op, algo);
        if (!forced && (st = uccl_coll_net_agree(cs)) != UCCL_OK)
            return st;
        if (!forced)
            algo = uccl_coll_select(cs, a->op, select_bytes(cs, in));
    } else if (!uccl_coll_algo_supports(a->op, algo)) {
        coll_error("algorithm %s does not implement %s", uccl_coll_algo_name(algo),
                   uccl_coll_op_name(a->op));
        return UCCL_ERR_INVALID_PARAM;
    }
    if (algo == UCCL_COLL_ALGO_MAPPED) { /* every rank gets here at the same call */
        st = uccl_coll_mapped_ready(cs);
        if (st == UCCL_ERR_UNSUPPORTED && asked) {
            coll_error("%s: algorithm mapped needs every rank to map every peer's memory "
                       "(shm on one host); not so on this comm", uccl_coll_op_name(a->op));
            return st;
        }
        /* the table's next choice; also where the setup found a GPU comm
         * (cs->mapped_gpu: the table leaves MAPPED out from now on) */
        if (st == UCCL_ERR_UNSUPPORTED || (st == UCCL_OK && cs->mapped_gpu && !forced))
            algo = uccl_coll_select(cs, a->op, select_bytes(cs, in));
        else if (st != UCCL_OK)
            return st;
    }
    a->algo = algo;
    return UCCL_OK;
}

uccl_status_t uccl_coll_args_check(coll_state_t *cs, const uccl_coll_args_t *in, coll_args_t *a)
{
    uccl_status_t st;
    bool vec;

    memset(a, 0, sizeof(*a));
    if (in == NULL || (unsigned)in->op >= UCCL_COLL_OP_COUNT)
        return UCCL_ERR_INVALID_PARAM;
    a->op = in->op;
    a->sendbuf = in->sendbuf;
    a->recvbuf = in->recvbuf;
    a->count = in->count;
    a->root = (in->field_mask & UCCL_COLL_ARG_ROOT) ? in->root : 0;
    if (rooted(a->op) && (a->root < 0 || a->root >= cs->size)) {
        coll_error("%s: root %d out of range (comm size %d)", uccl_coll_op_name(a->op), a->root,
                   cs->size);
        return UCCL_ERR_INVALID_PARAM;
    }
    if ((st = check_buffers(cs, a)) != UCCL_OK || (st = resolve_algo(cs, in, a)) != UCCL_OK)
        return st;
    if (a->count > SIZE_MAX / (size_t)cs->size)
        return UCCL_ERR_INVALID_PARAM;
    vec = a->op == UCCL_COLL_ALLGATHERV || a->op == UCCL_COLL_ALLTOALLV;
    if ((vec && (st = check_vectors(cs, in, a)) != UCCL_OK) ||
        (st = uccl_coll_args_overlap(cs, a)) != UCCL_OK) {
        uccl_coll_args_free(a);
        return st;
    }
    return UCCL_OK;
}

void uccl_coll_args_free(coll_args_t *a)
{
    free(a->sendcounts);
    free(a->sdispls);
    free(a->recvcounts);
    free(a->rdispls);
    a->sendcounts = a->sdispls = a->recvcounts = a->rdispls = NULL;
}

/* ------------------------------------------------------------------ schedules */

uccl_status_t uccl_coll_build(coll_sched_t *s, const coll_args_t *a)
{
    uccl_status_t st;

    if (a->algo == UCCL_COLL_ALGO_MAPPED)
        st = uccl_coll_build_mapped(s, a);
    else switch (a->op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLGATHERV: st = uccl_coll_build_allgather(s, a); break;
    case UCCL_COLL_ALLTOALL: case UCCL_COLL_ALLTOALLV: st = uccl_coll_build_alltoall(s, a); break;
    case UCCL_COLL_BCAST: st = uccl_coll_build_bcast(s, a); break;
    case UCCL_COLL_GATHER: st = uccl_coll_build_gather(s, a); break;
    default: st = uccl_coll_build_scatter(s, a); break;
    }
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    return st;
}

static uccl_status_t sched_new(coll_state_t *cs, const coll_args_t *a, bool internal,
                               coll_sched_t **out)
{
    coll_sched_t *s = calloc(1, sizeof(*s));
    uccl_status_t st;

    if (s == NULL)
        return UCCL_ERR_NO_MEMORY;
    s->cs = cs;
    s->internal = internal;
    s->status = UCCL_OK;
    s->tmp_scratch = -1;
    for (int b = 0; b < COLL_BUF_COUNT; b++)
        s->slot[b] = -1;
    st = uccl_coll_build(s, a);
    /* A lazy comm connects the peers this schedule talks to now, before
     * the state lock is taken (connecting progresses the engine, and with
     * it the callbacks of other collectives in flight). */
    for (int i = 0; st == UCCL_OK && i < s->nops; i++) {
        int peer = s->ops[i].peer;
        if (peer >= 0 && peer != cs->rank && uccl_comm_conn(cs->comm, peer) == NULL)
            st = UCCL_ERR_PEER_FAILED;
    }
    if (st != UCCL_OK) {
        uccl_coll_sched_free(s);
        return st;
    }
    *out = s;
    return UCCL_OK;
}

/* The comm's state, locked, and the cached schedule of these arguments
 * (NULL: none). */
static uccl_status_t lock_find(uccl_comm_t *comm, const uccl_coll_args_t *args, bool internal,
                               coll_state_t **cs, coll_sched_t **s)
{
    uccl_status_t st = uccl_coll_state_get(comm, cs);

    if (st != UCCL_OK)
        return st;
    if (args == NULL)
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&(*cs)->lock);
    *s = uccl_coll_cache_find(*cs, args, internal);
    return UCCL_OK;
}

/* After lock_find: on a miss, check, build and cache a new schedule. On
 * success cs->lock is held and *cached says whether the cache keeps it
 * (else it is the caller's to free); on failure it is released. */
static uccl_status_t build_missing(coll_state_t *cs, const uccl_coll_args_t *args, bool internal,
                                   coll_sched_t **s, bool *cached)
{
    coll_args_t a;
    uccl_status_t st;

    *cached = true;
    if (*s != NULL)
        return UCCL_OK;
    pthread_mutex_unlock(&cs->lock);
    if ((st = uccl_coll_args_check(cs, args, &a)) != UCCL_OK)
        return st;
    st = sched_new(cs, &a, internal, s);
    uccl_coll_args_free(&a);
    if (st != UCCL_OK)
        return st;
    pthread_mutex_lock(&cs->lock);
    *cached = uccl_coll_cache_put(cs, args, *s);
    return UCCL_OK; /* locked */
}

/* Start s (cs->lock held): on failure unlocked, and s freed unless
 * cached. */
static uccl_status_t start_found(coll_sched_t *s, bool cached)
{
    uccl_status_t st = uccl_coll_sched_start(s);

    if (st != UCCL_OK) {
        pthread_mutex_unlock(&s->cs->lock);
        if (!cached)
            uccl_coll_sched_free(s);
    }
    return st;
}

/* Take the cached schedule of these arguments, or check, build and cache
 * a new one; then start it. On success cs->lock is held (the caller posts
 * or runs the schedule, then unlocks) and *cached says whether the cache
 * keeps it (else it is the caller's to free). */
static uccl_status_t start_plain(uccl_comm_t *comm, const uccl_coll_args_t *args, bool internal,
                                 coll_sched_t **out, bool *cached)
{
    coll_state_t *cs;
    uccl_status_t st = lock_find(comm, args, internal, &cs, out);

    if (st == UCCL_OK)
        st = build_missing(cs, args, internal, out, cached);
    return st != UCCL_OK ? st : start_found(*out, *cached);
}

/* Post a plain collective, gated on stream when it is set (stream form;
 * req may then be NULL: the request is detached). */
static uccl_status_t post_plain(uccl_comm_t *comm, const uccl_coll_args_t *args, bool streamed,
                                void *stream, uccl_req_t **req)
{
    coll_state_t *cs;
    coll_sched_t *s;
    uccl_req_t *mine = NULL;
    uccl_status_t st;
    bool cached;

    if (req == NULL && !streamed)
        return UCCL_ERR_INVALID_PARAM;
    if ((st = start_plain(comm, args, false, &s, &cached)) != UCCL_OK)
        return st;
    cs = s->cs;
    s->free_when_done = !cached;
    s->dropped = req == NULL;
    if (streamed && (st = uccl_coll_sched_stream(s, stream)) != UCCL_OK)
        uccl_coll_sched_abort(s, st); /* no request yet: stays ours */
    else
        st = uccl_coll_sched_post(s, &mine);
    if (st != UCCL_OK && !cached) /* aborted, never reached a callback */
        uccl_coll_sched_free(s);
    pthread_mutex_unlock(&cs->lock);
    if (st == UCCL_OK && req != NULL)
        *req = mine;
    else if (st == UCCL_OK)
        uccl_req_free(mine); /* detached: finishes in the background */
    return st;
}

uccl_status_t uccl_coll_post(uccl_comm_t *comm, const uccl_coll_args_t *args, uccl_req_t **req)
{
    return post_plain(comm, args, false, NULL, req);
}

uccl_status_t uccl_coll_post_stream(uccl_comm_t *comm, const uccl_coll_args_t *args,
                                    void *stream, uccl_req_t **req)
{
    bool taken;
    uccl_status_t st = uccl_coll_stream_try(comm, args, stream, req, &taken);

    if (taken || st != UCCL_OK)
        return st;
    return post_plain(comm, args, true, stream, req);
}

/* Blocking. A hit whose schedule is MAPPED's op alone (small blocks on
 * one host, called again on the same buffers) runs by
 * uccl_coll_mapped_call: about half the instructions of the general
 * start / run / end around the same flags (coll19-H200host). */
static uccl_status_t run_plain(uccl_comm_t *comm, const uccl_coll_args_t *args, bool internal)
{
    coll_state_t *cs;
    coll_sched_t *s;
    bool cached;
    uccl_status_t st = lock_find(comm, args, internal, &cs, &s);

    if (st != UCCL_OK)
        return st;
    if (s != NULL && s->pinned && !cs->trace && uccl_coll_mapped_only(s)) {
        st = uccl_coll_mapped_call(s);
        pthread_mutex_unlock(&cs->lock);
        return st;
    }
    if ((st = build_missing(cs, args, internal, &s, &cached)) != UCCL_OK ||
        (st = start_found(s, cached)) != UCCL_OK)
        return st;
    s->free_when_done = false;
    st = uccl_coll_sched_run_locked(s); /* unlocks */
    if (!cached)
        uccl_coll_sched_free(s);
    return st;
}

uccl_status_t uccl_coll(uccl_comm_t *comm, const uccl_coll_args_t *args)
{
    return run_plain(comm, args, false);
}

uccl_status_t uccl_coll_internal(uccl_comm_t *comm, const uccl_coll_args_t *args)
{
    return run_plain(comm, args, true);
}

/* ------------------------------------------------------------------ persistent plans */

uccl_status_t uccl_coll_init(uccl_comm_t *comm, const uccl_coll_args_t *args,
                             uccl_coll_plan_t **plan)
{
    uccl_coll_plan_t *p;
    coll_state_t *cs;
    uccl_status_t st = uccl_coll_state_get(comm, &cs);

    if (st != UCCL_OK)
        return st;
    if (plan == NULL)
        return UCCL_ERR_INVALID_PARAM;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    p->cs = cs;
    if ((st = uccl_coll_args_check(cs, args, &p->args)) != UCCL_OK)
        goto err_plan;
    if ((st = sched_new(cs, &p->args, false, &p->sched)) != UCCL_OK)
        goto err_args;
    p->sched->plan = p;
    p->sched->keep = true;
    pthread_mutex_lock(&cs->lock);
    /* registered now, as documented: a buffer freed before the first start
     * is then seen as stale (UCCL_ERR_STALE), not registered anew there */
    if ((st = uccl_coll_sched_pin(p->sched)) != UCCL_OK) {
        pthread_mutex_unlock(&cs->lock);
        uccl_coll_sched_free(p->sched);
        goto err_args;
    }
    p->next = cs->plans;
    p->pprev = &cs->plans;
    if (cs->plans != NULL)
        cs->plans->pprev = &p->next;
    cs->plans = p;
    pthread_mutex_unlock(&cs->lock);
    *plan = p;
    return UCCL_OK;

err_args:
    uccl_coll_args_free(&p->args);
err_plan:
    free(p);
    return st;
}

static uccl_status_t plan_start(uccl_coll_plan_t *plan, bool streamed, void *stream,
                                uccl_req_t **req)
{
    uccl_req_t *mine = NULL;
    uccl_status_t st;

    if (plan == NULL || (req == NULL && !streamed))
        return UCCL_ERR_INVALID_PARAM;
    if (plan->cs == NULL) {
        coll_error("persistent collective: its communicator was destroyed (free the plan)");
        return UCCL_ERR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&plan->cs->lock);
    if (plan->sched->status == UCCL_INPROGRESS) {
        st = UCCL_ERR_BUSY;
    } else if (uccl_coll_buf_stale(plan->cs, plan->sched->slot[COLL_BUF_SEND]) ||
               uccl_coll_buf_stale(plan->cs, plan->sched->slot[COLL_BUF_RECV])) {
        coll_error("persistent collective: a buffer of the plan was freed with uccl_mem_free");
        st = UCCL_ERR_STALE;
    } else if ((st = uccl_coll_sched_start(plan->sched)) == UCCL_OK) {
        plan->sched->dropped = req == NULL;
        if (streamed && (st = uccl_coll_sched_stream(plan->sched, stream)) != UCCL_OK)
            uccl_coll_sched_abort(plan->sched, st);
        else
            st = uccl_coll_sched_post(plan->sched, &mine);
    }
    pthread_mutex_unlock(&plan->cs->lock);
    if (st == UCCL_OK && req != NULL)
        *req = mine;
    else if (st == UCCL_OK)
        uccl_req_free(mine);
    return st;
}

uccl_status_t uccl_coll_start(uccl_coll_plan_t *plan, uccl_req_t **req)
{
    return plan_start(plan, false, NULL, req);
}

uccl_status_t uccl_coll_start_stream(uccl_coll_plan_t *plan, void *stream, uccl_req_t **req)
{
    return plan_start(plan, true, stream, req);
}

uccl_status_t uccl_coll_plan_free(uccl_coll_plan_t *plan)
{
    coll_sched_t *s;

    if (plan == NULL)
        return UCCL_ERR_INVALID_PARAM;
    s = plan->sched;
    if (plan->cs != NULL) { /* else detached: the comm freed the schedule */
        pthread_mutex_lock(&plan->cs->lock);
        if (s->status == UCCL_INPROGRESS) {
            pthread_mutex_unlock(&plan->cs->lock);
            return UCCL_ERR_BUSY;
        }
        *plan->pprev = plan->next;
        if (plan->next != NULL)
            plan->next->pprev = plan->pprev;
        uccl_coll_sched_free(s); /* unpins its buffers */
        pthread_mutex_unlock(&plan->cs->lock);
    }
    uccl_coll_args_free(&plan->args);
    free(plan);
    return UCCL_OK;
}

/* The comm is being destroyed (cs->lock held, nothing in flight any more):
 * every plan still alive loses its schedule and its comm, so that a later
 * start fails with UCCL_ERR_INVALID_HANDLE instead of touching freed state,
 * and uccl_coll_plan_free only frees the handle. */
void uccl_coll_plans_detach(coll_state_t *cs)
{
    while (cs->plans != NULL) {
        uccl_coll_plan_t *p = cs->plans;
        cs->plans = p->next;
        uccl_coll_sched_free(p->sched); /* unpins its buffers */
        p->sched = NULL;
        p->cs = NULL;
        p->next = NULL;
        p->pprev = NULL;
    }
}

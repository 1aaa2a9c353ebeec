/* Schedules: phases of operations (two-sided send/recv, local copies,
 * DIRECT one-sided puts, coll/direct.c) run in order, the ops of one phase
 * all in flight.
 * The same state machine runs blocking (uccl_coll_sched_run) and non-blocking
 * (advanced from a generalized request's progress callback). Building a
 * schedule (its ops and phases) and freeing it: sched_build.c. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

/* Millisecond deadlines only: the coarse clock costs a memory read where
 * the precise one reads the TSC (per completed op, it showed in profiles). */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* GPU memory: local copies go through uccl_copy_post (the temporary is
 * host memory). */
static bool buf_on_gpu(const coll_sched_t *s, int buf)
{
    return buf != COLL_BUF_TMP && s->slot[buf] >= 0 &&
           s->cs->bufs[s->slot[buf]].mem_type != UCCL_MEM_HOST;
}

/* A host copy the copy helper takes (helper.c): posted before the
 * transfers, so that it runs while this thread moves the peers' blocks. */
static bool copy_to_helper(const coll_sched_t *s, const coll_op_t *op)
{
    return op->kind == COLL_OP_COPY && s->cs->copy_helper && op->len >= s->cs->copy_min &&
           !buf_on_gpu(s, op->buf) && !buf_on_gpu(s, op->buf2);
}

static void op_release(coll_sched_t *s, coll_op_t *op)
{
    size_t bytes;

    if (op->helper_slot >= 0) /* an aborted schedule: its buffers stay until the copy ends */
        uccl_coll_helper_done(s->cs, op->helper_slot, true);
    op->helper_slot = -1;

    if (op->req != NULL && op->req == op->preq) {
        /* kept for the next start unless still active (a failed
         * collective): then detached like any other, built anew next time */
        if (uccl_req_bytes(op->preq, &bytes) == UCCL_INPROGRESS) {
            uccl_req_free(op->preq);
            op->preq = NULL;
        }
        op->req = NULL;
    }
    if (op->req != NULL)
        uccl_req_free(op->req);
    if (op->req2 != NULL)
        uccl_req_free(op->req2);
    op->req = op->req2 = NULL;
    uccl_coll_scratch_put(s->cs, op->scratch);
    op->scratch = -1;
}

/* ------------------------------------------------------------------ ops */

static uccl_status_t op_post(coll_sched_t *s, coll_op_t *op)
{
    uccl_conn_t *conn = op->peer >= 0 ? uccl_comm_conn(s->cs->comm, op->peer) : NULL;
    uint64_t tag = coll_tag(s->seq, op->step);
    uccl_mr_t *mr;
    size_t moff;

    switch (op->kind) {
    case COLL_OP_SEND:
        mr = uccl_coll_buf_mr(s, op->buf, op->off, op->len, &moff);
        return uccl_send(conn, mr, moff, op->len, tag, &op->req);
    case COLL_OP_RECV:
        mr = uccl_coll_buf_mr(s, op->buf, op->off, op->len, &moff);
        return uccl_recv(conn, mr, moff, op->len, tag, &op->req);
    case COLL_OP_COPY:
        if (buf_on_gpu(s, op->buf) || buf_on_gpu(s, op->buf2))
            return uccl_copy_post(s->cs->engine, s->addr[op->buf] + op->off,
                                  s->addr[op->buf2] + op->off2, op->len, &op->req);
        if (copy_to_helper(s, op) &&
            uccl_coll_helper_post(s->cs, s->addr[op->buf] + op->off,
                                  s->addr[op->buf2] + op->off2, op->len, &op->helper_slot)) {
            s->cs->stats.helper_copies++;
            return UCCL_OK;
        }
        memmove(s->addr[op->buf] + op->off, s->addr[op->buf2] + op->off2, op->len);
        op->state = -1;
        return UCCL_OK;
    case COLL_OP_PUT:
    case COLL_OP_WAITPUT: return uccl_coll_direct_post(s, op, conn);
    case COLL_OP_MAPPED: return UCCL_OK; /* runs in its advance */
    }
    return UCCL_ERR_INVALID_PARAM;
}

/* OK when op is finished, INPROGRESS, or its error. */
static uccl_status_t op_advance(coll_sched_t *s, coll_op_t *op)
{
    size_t bytes = 0;
    uccl_status_t st;

    if (op->state == -1)
        return UCCL_OK;
    if (op->state == COLL_OP_HELD)
        return UCCL_INPROGRESS;
    if (op->kind == COLL_OP_PUT || op->kind == COLL_OP_WAITPUT) {
        st = uccl_coll_direct_advance(s, op);
    } else if (op->kind == COLL_OP_MAPPED) {
        st = uccl_coll_mapped_advance(s, op);
    } else if (op->helper_slot >= 0) {
        if (!uccl_coll_helper_done(s->cs, op->helper_slot, false))
            return UCCL_INPROGRESS;
        op->helper_slot = -1;
        st = UCCL_OK;
    } else {
        st = uccl_coll_req_status(op->req, &bytes);
        if (st == UCCL_OK && op->kind == COLL_OP_RECV && bytes != op->len) {
            coll_error("rank %d sent %zu bytes where rank %d expects %zu", op->peer, bytes,
                       s->cs->rank, op->len);
            st = UCCL_ERR_TRUNCATED;
        }
    }
    if (st == UCCL_INPROGRESS)
        return st;
    op_release(s, op);
    op->state = -1;
    s->last_event_ms = now_ms();
    uccl_coll_trace_done(s, op);
    return st;
}

/* ------------------------------------------------------------------ running */

static void sched_end(coll_sched_t *s, uccl_status_t st)
{
    int nops = s->nops;

    if (s->dropped && st != UCCL_OK && st != UCCL_ERR_CANCELED) /* before the stream goes on */
        coll_error("stream-ordered collective %u, its request dropped: %s", s->seq, uccl_strerror(st));

    for (int i = 0; i < nops; i++)
        op_release(s, &s->ops[i]);
    if (s->gate != NULL)
        uccl_req_free(s->gate);
    s->gate = NULL;
    if (s->hold != NULL) /* the stream goes on, after an error too */
        uccl_stream_release(s->hold);
    s->hold = NULL;
    if (!s->keep)
        uccl_coll_sched_unpin(s);
    if (s->mapped != NULL)
        uccl_coll_mapped_end(s, st);
    uccl_coll_sched_unlink(s);
    s->status = st;
    uccl_coll_trace_end(s);
}

uccl_status_t uccl_coll_sched_start(coll_sched_t *s)
{
    uccl_status_t st = uccl_coll_sched_pin(s);

    if (st != UCCL_OK)
        return st;
    for (int i = 0; i < s->nops; i++) {
        s->ops[i].state = 0;
        s->ops[i].req = s->ops[i].req2 = NULL;
        s->ops[i].scratch = -1;
        s->ops[i].helper_slot = -1;
    }
    s->seq = s->cs->seq++;
    s->dropped = false;
    if (s->mapped != NULL)
        uccl_coll_mapped_start(s);
    s->cs->stats.calls += !s->internal;
    s->cur_phase = 0;
    s->posted = false;
    s->status = UCCL_INPROGRESS;
    s->soft_error = UCCL_OK;
    s->last_event_ms = now_ms();
    s->held = 0;
    s->rounds = 0;
    s->trace_t0 = uccl_coll_trace_now();
    uccl_coll_sched_link(s);
    return UCCL_OK;
}

void uccl_coll_sched_abort(coll_sched_t *s, uccl_status_t st)
{
    if (s->status != UCCL_INPROGRESS)
        return;
    sched_end(s, st);
    if (s->greq != NULL) {
        uccl_req_t *greq = s->greq;
        bool free_it = s->free_when_done; /* once finished, a persistent plan's owner may free s */

        s->greq = NULL;
        uccl_req_finish(greq, st, 0);
        if (free_it)
            uccl_coll_sched_free(s);
    }
}

/* Posting order within a phase: the copy helper's copies (queued in an
 * instant, they run beside everything else), sends (they are what the peers
 * wait for: the critical path), then receives and the DIRECT ops, then the
 * local copies (the peers move data while this rank copies its own block).
 * Between two ranks, each direction's messages keep their order. */
#define POST_PASSES 4
static int post_pass(const coll_sched_t *s, const coll_op_t *op)
{
    if (op->kind == COLL_OP_COPY && s->phase_xfer && uccl_coll_gpu_copy_late() > 0 &&
        (buf_on_gpu(s, op->buf) || buf_on_gpu(s, op->buf2)))
        return POST_PASSES; /* held: posted by held_post */
    if (op->kind == COLL_OP_COPY)
        return copy_to_helper(s, op) ? 0 : 3;
    return op->kind == COLL_OP_SEND ? 1 : 2;
}

/* Kept schedules (plans, cached plain calls) post their sends and
 * receives as persistent requests, built on first use and started many
 * under one engine lock (uccl_start_all); the tag carries this call's
 * sequence number. */
#define COLL_START_BATCH 64
typedef struct {
    uccl_req_t *reqs[COLL_START_BATCH];
    uint64_t tags[COLL_START_BATCH];
    int n;
} start_batch_t;

static uccl_status_t batch_flush(start_batch_t *b)
{
    uccl_status_t st = b->n > 0 ? uccl_start_all(b->reqs, (size_t)b->n, b->tags) : UCCL_OK;

    b->n = 0;
    return st;
}

static bool op_persistent(const coll_sched_t *s, const coll_op_t *op)
{
    return s->keep && (op->kind == COLL_OP_SEND || op->kind == COLL_OP_RECV);
}

static uccl_status_t batch_add(coll_sched_t *s, coll_op_t *op, start_batch_t *b)
{
    uint64_t tag = coll_tag(s->seq, op->step);
    uccl_status_t st;

    if (op->preq == NULL) {
        uccl_conn_t *conn = uccl_comm_conn(s->cs->comm, op->peer);
        size_t moff;
        uccl_mr_t *mr = uccl_coll_buf_mr(s, op->buf, op->off, op->len, &moff);
        st = op->kind == COLL_OP_SEND ? uccl_send_init(conn, mr, moff, op->len, tag, &op->preq)
                                      : uccl_recv_init(conn, mr, moff, op->len, tag, &op->preq);
        if (st != UCCL_OK)
            return st;
    }
    if (b->n == COLL_START_BATCH && (st = batch_flush(b)) != UCCL_OK)
        return st;
    op->req = op->preq;
    b->reqs[b->n] = op->preq;
    b->tags[b->n++] = tag;
    return UCCL_OK;
}

/* Post the ops of the current phase: transfers first, then the local
 * copies (the peers move data while this rank copies its own block). */
static uccl_status_t phase_post(coll_sched_t *s)
{
    int b = s->cur_phase ? s->phase_end[s->cur_phase - 1] : 0, e = s->phase_end[s->cur_phase];
    start_batch_t batch;
    uint64_t t_phase;
    uccl_status_t st = UCCL_OK;

    batch.n = 0;
    s->phase_xfer = false;
    for (int i = b; i < e; i++)
        s->phase_xfer = s->phase_xfer || s->ops[i].kind != COLL_OP_COPY;
    for (int i = b; i < e; i++)
        if (post_pass(s, &s->ops[i]) == POST_PASSES) {
            s->ops[i].state = COLL_OP_HELD;
            s->held++;
        }
    s->post_round = s->rounds;
    t_phase = uccl_coll_trace_now();
    for (int pass = 0; pass < POST_PASSES && st == UCCL_OK; pass++)
        for (int i = b; i < e && st == UCCL_OK; i++) {
            coll_op_t *op = &s->ops[i];
            uint64_t t0;
            if (post_pass(s, op) != pass)
                continue;
            t0 = uccl_coll_trace_now();
            if (op_persistent(s, op))
                st = batch_add(s, op, &batch);
            else if ((st = batch_flush(&batch)) == UCCL_OK) /* posting order */
                st = op_post(s, op);
            uccl_coll_trace_post(s, op, t0);
        }
    if (st == UCCL_OK)
        st = batch_flush(&batch);
    uccl_coll_trace_phase(s, t_phase);
    s->posted = st == UCCL_OK;
    return st;
}

/* The phase's held GPU copies (UCCL_COLL_GPU_COPY_LATE), posted once that
 * many progress rounds ran since its transfers were posted (they have
 * issued their copies by then), or at once when only they are left. */
static uccl_status_t held_post(coll_sched_t *s, int b, int e, bool only_they_left)
{
    uccl_status_t st = UCCL_OK;

    if (!only_they_left && s->rounds - s->post_round < uccl_coll_gpu_copy_late())
        return UCCL_OK;
    if (only_they_left)
        for (int i = b; i < e; i++)
            if (s->ops[i].state != -1 && s->ops[i].state != COLL_OP_HELD)
                return UCCL_OK;
    uccl_coll_trace_late(s);
    for (int i = b; i < e && st == UCCL_OK; i++)
        if (s->ops[i].state == COLL_OP_HELD) {
            uint64_t t0 = uccl_coll_trace_now();
            s->ops[i].state = 0;
            s->held--;
            st = op_post(s, &s->ops[i]);
            uccl_coll_trace_post(s, &s->ops[i], t0);
        }
    return st;
}

static uccl_status_t phase_step(coll_sched_t *s, bool *phase_done)
{
    int b = s->cur_phase ? s->phase_end[s->cur_phase - 1] : 0, e = s->phase_end[s->cur_phase];
    uccl_status_t st;

    *phase_done = false;
    if (!s->posted && (st = phase_post(s)) != UCCL_OK)
        return st;
    if (s->held > 0 && (st = held_post(s, b, e, false)) != UCCL_OK)
        return st;
    bool all = true;
    for (int i = b; i < e; i++) {
        st = op_advance(s, &s->ops[i]); /* every op: a PUT waits on no other */
        if (st == UCCL_INPROGRESS) {
            all = false;
            continue;
        }
        /* A count mismatch or a refused DIRECT write spoils one block:
         * finish the phase so that the other ranks are not left waiting
         * (each refusal reaches its receiver), and report it at the end. */
        bool soft = st == UCCL_ERR_TRUNCATED ||
                    (st == UCCL_ERR_UNSUPPORTED &&
                     (s->ops[i].kind == COLL_OP_PUT || s->ops[i].kind == COLL_OP_WAITPUT));
        if (soft && s->soft_error == UCCL_OK)
            s->soft_error = st;
        else if (st != UCCL_OK && !soft)
            return st;
    }
    if (!all && s->held > 0) /* the transfers are done: the held copies go now */
        return held_post(s, b, e, true);
    *phase_done = all;
    return UCCL_OK;
}

uccl_status_t uccl_coll_sched_advance(coll_sched_t *s)
{
    bool done = true;
    uccl_status_t st;

    if (s->status == UCCL_INPROGRESS && s->gate != NULL) {
        size_t bytes;
        st = uccl_coll_req_status(s->gate, &bytes);
        if (st == UCCL_INPROGRESS) { /* the caller's stream is still busy: no timeout */
            s->last_event_ms = now_ms();
            return st;
        }
        uccl_req_free(s->gate);
        s->gate = NULL;
        if (st != UCCL_OK) {
            coll_error("collective %u: the event on the caller's stream failed: %s", s->seq,
                       uccl_strerror(st));
            sched_end(s, st);
        }
    }
    while (s->status == UCCL_INPROGRESS && done) {
        if (s->cur_phase == s->nphases) {
            sched_end(s, s->soft_error);
            break;
        }
        st = phase_step(s, &done);
        if (st != UCCL_OK) {
            coll_debug("collective %u failed in phase %d: %s", s->seq, s->cur_phase,
                       uccl_strerror(st));
            sched_end(s, st);
            break;
        }
        if (done) {
            s->cur_phase++;
            s->posted = false;
        } else if (now_ms() - s->last_event_ms > (uint64_t)uccl_coll_timeout_ms()) {
            coll_error("collective %u: no progress for %d ms in phase %d of %d", s->seq,
                       uccl_coll_timeout_ms(), s->cur_phase, s->nphases);
            sched_end(s, UCCL_ERR_TIMEOUT);
        }
    }
    return s->status;
}

/* Blocking fast path for one phase of small two-sided transfers and host
 * copies (linear on one host): everything is posted at once, then the
 * engine's own wait loop runs (one lock, no schedule rounds), and the
 * schedule ends. Small transfers only: uccl_wait_all's deadline counts
 * from the start, not from the last completion. Called with cs->lock held
 * and s started; returns with it released and s ended. */
#define COLL_FAST_OPS 64
#define COLL_FAST_BYTES 65536

static bool sched_fast(const coll_sched_t *s)
{
    int nreq = 0;

    if (s->nphases != 1 || s->gate != NULL || s->hold != NULL || s->nops > COLL_FAST_OPS)
        return false;
    for (int i = 0; i < s->nops; i++) {
        const coll_op_t *op = &s->ops[i];
        if (op->kind == COLL_OP_COPY) {
            if (buf_on_gpu(s, op->buf) || buf_on_gpu(s, op->buf2))
                return false;
            continue;
        }
        if ((op->kind != COLL_OP_SEND && op->kind != COLL_OP_RECV) || op->len > COLL_FAST_BYTES)
            return false;
        nreq++;
    }
    return nreq > 0;
}

/* Every request succeeded (uccl_wait_all said so): check the received
 * counts and finish the ops, with no further call into the engine for
 * a request that is done. */
static void fast_finish(coll_sched_t *s)
{
    for (int i = 0; i < s->nops; i++) {
        coll_op_t *op = &s->ops[i];
        size_t bytes = 0;
        if (op->state == -1)
            continue;
        if (op->kind == COLL_OP_RECV && uccl_req_bytes(op->req, &bytes) == UCCL_OK &&
            bytes != op->len) {
            coll_error("rank %d sent %zu bytes where rank %d expects %zu", op->peer, bytes,
                       s->cs->rank, op->len);
            if (s->soft_error == UCCL_OK)
                s->soft_error = UCCL_ERR_TRUNCATED;
        }
        op_release(s, op);
        op->state = -1;
    }
}

/* uccl_wait_all spins a while before it yields; with more ranks than CPUs
 * here a peer needs this CPU to answer, so then yield after every poll
 * (as uccl_coll_sched_run does). */
static uccl_status_t fast_wait(const coll_state_t *cs, uccl_req_t **reqs, int n)
{
    uint64_t deadline;
    uccl_status_t st;

    if (!cs->oversubscribed)
        return uccl_wait_all(reqs, (size_t)n, uccl_coll_timeout_ms());
    deadline = now_ms() + (uint64_t)uccl_coll_timeout_ms();
    while ((st = uccl_wait_all(reqs, (size_t)n, 0)) == UCCL_ERR_TIMEOUT && now_ms() < deadline)
        sched_yield();
    return st;
}

static uccl_status_t sched_run_fast(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    uccl_req_t *reqs[COLL_FAST_OPS];
    int nreq = 0;
    bool done = false;
    uccl_status_t st = phase_post(s); /* posts all, copies */

    for (int i = 0; st == UCCL_OK && i < s->nops; i++)
        if (s->ops[i].state != -1 && s->ops[i].req != NULL)
            reqs[nreq++] = s->ops[i].req;
    if (st == UCCL_OK && nreq > 0) {
        pthread_mutex_unlock(&cs->lock);
        st = fast_wait(cs, reqs, nreq);
        pthread_mutex_lock(&cs->lock);
        if (st == UCCL_OK)
            fast_finish(s);
        if (st == UCCL_OK || st == UCCL_ERR_TRUNCATED) /* ops finish; counts checked */
            st = phase_step(s, &done);
        else
            coll_debug("collective %u failed: %s", s->seq, uccl_strerror(st));
    } else if (st == UCCL_OK) {
        st = phase_step(s, &done);
    }
    if (st == UCCL_OK && done)
        sched_end(s, s->soft_error);
    else if (s->status == UCCL_INPROGRESS)
        sched_end(s, st != UCCL_OK ? st : UCCL_ERR_TIMEOUT);
    st = s->status;
    pthread_mutex_unlock(&cs->lock);
    return st;
}

uccl_status_t uccl_coll_sched_run_locked(coll_sched_t *s)
{
    uccl_status_t st;

    if (s->cur_phase == 0 && !s->posted && s->nphases == 1 && s->nops == 1 &&
        s->ops[0].kind == COLL_OP_MAPPED && s->gate == NULL && s->hold == NULL) {
        st = uccl_coll_mapped_run(s); /* the flags alone: no request, no schedule round */
        sched_end(s, st);
        pthread_mutex_unlock(&s->cs->lock);
        return st;
    }
    if (s->cur_phase == 0 && !s->posted && sched_fast(s))
        return sched_run_fast(s);
    pthread_mutex_unlock(&s->cs->lock);
    return uccl_coll_sched_run(s);
}

/* Blocking: advance only after progress found something (or the schedule
 * has just started): a round with no event cannot move any op. Empty rounds
 * yield the CPU, at once when the host runs more ranks than it has CPUs
 * (a spinning rank would take the CPU its peer needs to answer), else
 * after a run of them. */
uccl_status_t uccl_coll_sched_run(coll_sched_t *s)
{
    unsigned idle = 0, yield_after = s->cs->oversubscribed ? 1 : 256;
    bool event = true;
    uccl_status_t st = UCCL_INPROGRESS;

    for (;;) {
        /* and now and then: the no-progress deadline; and held copies due */
        if (event || idle % 8 == 0 || (s->held > 0 && s->rounds - s->post_round >=
                                                      uccl_coll_gpu_copy_late())) {
            pthread_mutex_lock(&s->cs->lock);
            st = uccl_coll_sched_advance(s);
            pthread_mutex_unlock(&s->cs->lock);
            if (st != UCCL_INPROGRESS)
                break;
        }
        event = uccl_engine_progress(s->cs->engine) > 0;
        s->rounds++;
        idle = event ? 0 : idle + 1;
        if (idle >= yield_after && idle % yield_after == 0)
            sched_yield();
    }
    return st;
}

static int sched_progress_cb(uccl_req_t *req, void *arg)
{
    coll_sched_t *s = arg;
    uccl_status_t st;
    bool free_it;

    if (pthread_mutex_trylock(&s->cs->lock) != 0)
        return 0; /* the caller is in a collective call: next round */
    s->rounds++;
    st = uccl_coll_sched_advance(s);
    if (st == UCCL_INPROGRESS || s->greq != req) {
        pthread_mutex_unlock(&s->cs->lock);
        return 0;
    }
    s->greq = NULL;
    free_it = s->free_when_done; /* read before the finish: a persistent plan's owner may then free s */
    pthread_mutex_unlock(&s->cs->lock);
    uccl_req_finish(req, st, 0);
    if (free_it)
        uccl_coll_sched_free(s);
    return 1;
}

uccl_status_t uccl_coll_sched_post(coll_sched_t *s, uccl_req_t **req)
{
    uccl_status_t st = uccl_req_create(s->cs->engine, sched_progress_cb, s, &s->greq);

    if (st != UCCL_OK) {
        uccl_coll_sched_abort(s, st);
        return st;
    }
    *req = s->greq;
    return UCCL_OK;
}

/* Ordering a call on GPU objects after their producers' streams (CUDA array
 * interface v3 'stream', DLPack's stream handshake), with libuccl's public
 * stream calls only: uccl_stream_query (whether a stream has run what it
 * queued: asked first, since the producer is usually done), uccl_stream_event
 * (a request done once a stream has run what it queued) and uccl_stream_hold
 * (a stream waits until released). */
#include "upy.h"

#include <stdlib.h>

void upy_order_add(upy_order_t *ord, void *stream)
{
    for (int i = 0; i < ord->n; i++)
        if (ord->after[i] == stream)
            return;
    if (ord->n < UPY_ORDER_MAX)
        ord->after[ord->n++] = stream;
}

void *upy_stream_norm(void *s)
{
    return s == NULL ? (void *)(uintptr_t)1 : s;
}

/* Stream form: the call's stream is held until the producer's event. */
typedef struct {
    uccl_req_t *ev;
    uccl_stream_hold_t *hold;
} chain_t;

/* A generalized request run by engine progress (under the engine lock). */
static int chain_progress(uccl_req_t *req, void *arg)
{
    chain_t *c = arg;
    int done = 0;
    uccl_status_t st = uccl_test(c->ev, &done);
    if (!done && st >= 0)
        return 0;
    uccl_stream_release(c->hold); /* on error too: the stream always goes on */
    uccl_req_free(c->ev);
    free(c);
    uccl_req_finish(req, st, 0);
    return 1;
}

static int chain(upy_engine_t *e, void *producer, void *stream)
{
    chain_t *c = calloc(1, sizeof(*c));
    uccl_req_t *g = NULL;
    uccl_status_t st;
    int done = 0;
    size_t n;
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    /* the event first: on a blocking stream a hold queued before it would
     * hold the legacy default stream's event too */
    /* a producer with nothing left to run (a stream query, no request; or
     * an event complete at once, asked by uccl_req_bytes without progress):
     * nothing to order after, no hold */
    if (uccl_stream_query(e->engine, producer) == UCCL_OK) {
        free(c);
        return 0;
    }
    st = uccl_stream_event(e->engine, producer, &c->ev);
    if (st == UCCL_OK && uccl_req_bytes(c->ev, &n) == UCCL_OK &&
        uccl_test(c->ev, &done) == UCCL_OK && done) {
        uccl_req_free(c->ev);
        free(c);
        return 0;
    }
    if (st == UCCL_OK && (st = uccl_stream_hold(e->engine, stream, &c->hold)) != UCCL_OK)
        uccl_req_free(c->ev);
    if (st == UCCL_OK && (st = uccl_req_create(e->engine, chain_progress, c, &g)) != UCCL_OK) {
        uccl_stream_release(c->hold);
        uccl_req_free(c->ev);
    }
    if (st != UCCL_OK) {
        free(c);
        upy_raise(st, "ordering the stream after a buffer's producer stream");
        return -1;
    }
    uccl_req_free(g); /* detached: progress finishes it */
    return 0;
}

int upy_order_apply(upy_engine_t *e, upy_order_t *ord)
{
    for (int i = 0; i < ord->n; i++) {
        uccl_req_t *r = NULL;
        uccl_status_t st;
        unsigned long long t0;
        if (ord->stream_form) {
            if (chain(e, ord->after[i], ord->stream) < 0)
                return -1;
            continue;
        }
        t0 = UPY_T0();
        /* the usual producer has run everything by now: a stream query
         * says so without a request; work still queued (or an error to
         * report, as before): its event, waited */
        st = uccl_stream_query(e->engine, ord->after[i]);
        if (st != UCCL_OK)
            st = uccl_stream_event(e->engine, ord->after[i], &r);
        upy_prof_add(UPY_P_EVENT, t0);
        if (st == UCCL_OK && r) {
            t0 = UPY_T0();
            /* a producer with nothing left to run: done at once, no wait
             * (upy_wait neither progresses nor releases the GIL then) */
            st = upy_wait(e, r, -2);
            upy_prof_add(UPY_P_WAIT, t0);
            if (st == UPY_WAIT_INTERRUPTED) {
                upy_engine_orphan(e, r, NULL);
                return -1;
            }
            uccl_req_free(r);
        }
        if (st != UCCL_OK) {
            upy_raise(st, "waiting for a buffer's producer stream");
            return -1;
        }
    }
    ord->n = 0;
    return 0;
}

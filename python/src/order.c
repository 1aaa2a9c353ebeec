/* Ordering a call on GPU objects after their producers' streams (CUDA array
 * interface v3 'stream', DLPack's stream handshake), with libuccl's public
 * stream calls only: uccl_stream_event (a request done once a stream has
 * run what it queued) and uccl_stream_hold (a stream waits until released). */
#include "upy.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

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
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    /* the event first: on a blocking stream a hold queued before it would
     * hold the legacy default stream's event too */
    st = uccl_stream_event(e->engine, producer, &c->ev);
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
        if (ord->stream_form) {
            if (chain(e, ord->after[i], ord->stream) < 0)
                return -1;
            continue;
        }
        st = uccl_stream_event(e->engine, ord->after[i], &r);
        if (st == UCCL_OK) {
            st = upy_wait(e, r, -2);
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

/* ---------------------------------------------------------------- the watcher
 * A stream-ordered collective holds its stream until the collective is done,
 * and only engine progress gets it there. Without a progress thread, a host
 * call that waits for the device before Request.wait (cudaDeviceSynchronize,
 * torch.cuda.synchronize, cudaFree, and the module load of a library's first
 * use of a kernel: CuPy's first copy was seen to hang in cuModuleLoadData)
 * would wait forever. So while any stream-ordered call of the engine is in
 * flight, a native thread (no GIL) drives progress; it ends when the last
 * one's stream has passed the collective (an event queued right after it). */
struct upy_watch {
    pthread_mutex_t lock;
    pthread_t thread;
    int active;   /* the thread's loop runs */
    int joinable; /* a thread was started and not joined */
    int stop;
    uccl_engine_t *engine;
    uccl_req_t **evs;
    size_t n, cap;
};

static void *watch_main(void *arg)
{
    struct upy_watch *w = arg;
    unsigned idle = 0;
    for (;;) {
        size_t j = 0;
        int events;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n; i++) {
            int done = 0;
            uccl_status_t st = uccl_test(w->evs[i], &done);
            if (done || st < 0)
                uccl_req_free(w->evs[i]);
            else
                w->evs[j++] = w->evs[i];
        }
        w->n = j;
        if (w->stop || w->n == 0) {
            w->active = 0;
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        pthread_mutex_unlock(&w->lock);
        events = uccl_engine_progress(w->engine);
        idle = events > 0 ? 0 : idle + 1;
        if (idle > 256)
            nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
        else if (idle > 16)
            sched_yield();
    }
}

int upy_watch_stream(upy_engine_t *e, void *stream)
{
    struct upy_watch *w = e->watch;
    uccl_req_t *ev = NULL;
    uccl_status_t st = uccl_stream_event(e->engine, stream, &ev);
    int rc = 0;
    if (st != UCCL_OK) {
        upy_raise(st, "watching the stream of a stream-ordered call");
        return -1;
    }
    if (!w) {
        w = calloc(1, sizeof(*w));
        if (!w) {
            uccl_req_free(ev);
            PyErr_NoMemory();
            return -1;
        }
        pthread_mutex_init(&w->lock, NULL);
        w->engine = e->engine;
        e->watch = w;
    }
    pthread_mutex_lock(&w->lock);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 8;
        uccl_req_t **a = realloc(w->evs, cap * sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&w->lock);
            uccl_req_free(ev); /* detached: it completes in the background */
            PyErr_NoMemory();
            return -1;
        }
        w->evs = a;
        w->cap = cap;
    }
    w->evs[w->n++] = ev;
    if (!w->active) {
        if (w->joinable) /* it left its loop: its end is near */
            pthread_join(w->thread, NULL);
        w->joinable = pthread_create(&w->thread, NULL, watch_main, w) == 0;
        w->active = w->joinable;
        if (!w->active) {
            w->evs[--w->n] = NULL;
            uccl_req_free(ev);
            PyErr_SetString(PyExc_RuntimeError, "cannot start the stream watcher thread");
            rc = -1;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void upy_watch_stop(upy_engine_t *e)
{
    struct upy_watch *w = e->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_mutex_unlock(&w->lock);
    if (w->joinable) {
        Py_BEGIN_ALLOW_THREADS
        pthread_join(w->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    for (size_t i = 0; i < w->n; i++)
        uccl_req_free(w->evs[i]);
    free(w->evs);
    pthread_mutex_destroy(&w->lock);
    free(w);
    e->watch = NULL;
}

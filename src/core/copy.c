/* Local memory and copies of the public API: uccl_mem_query / alloc / free,
 * uccl_copy(_post) between any two memory types, and the stream-ordering
 * calls (uccl_stream_event, uccl_stream_hold / release). GPU work runs on one
 * copy stream per engine, created on first use on the engine's device;
 * completion is an event polled by a generalized request, so nothing here
 * blocks the host on a GPU stream except the blocking uccl_copy.
 * A held stream waits on this engine's progress; without a progress thread
 * a helper thread drives progress while any hold is out (see hold_main). */
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "gpu/gpu.h"

#define COPY_HOLDS_MAX 1024 /* flag words: holds unreleased at once */

/* A copy or a stream event in flight: its generalized request's argument. */
typedef struct copy_op {
    uccl_engine_t *engine;
    uccl_gpu_event_t ev;
    size_t bytes;
    uccl_list_t link; /* ctx->ops */
} copy_op_t;

struct uccl_stream_hold {
    uccl_engine_t *engine;
    int slot;
    uint32_t value;
    uccl_list_t link; /* ctx->holds */
};

struct uccl_copy_ctx {
    int device; /* -1 until the first GPU call */
    uccl_gpu_stream_t stream;
    uccl_gpu_event_t *free_ev;
    int nfree_ev, cap_free_ev;
    uccl_list_t ops;
    /* stream holds: flag word i is released when it reaches seq[i] */
    uint32_t *flags;
    void *flags_dev;
    uint32_t seq[COPY_HOLDS_MAX];
    uint8_t busy[COPY_HOLDS_MAX];
    uccl_list_t holds;
};

static void hold_thread_ensure(uccl_engine_t *engine);

/* ------------------------------------------------------------------ memory */

uccl_status_t uccl_mem_query(const void *ptr, uccl_mem_type_t *type, int *device)
{
    uccl_gpu_ptr_attr_t attr;
    uccl_status_t st;

    if (type == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_gpu_ptr_attr(ptr, &attr);
    if (st != UCCL_OK)
        return st;
    *type = attr.type;
    if (device != NULL)
        *device = attr.device;
    return UCCL_OK;
}

/* The GPU type this build's runtime gives (fake: CUDA, as it reports). */
static uccl_mem_type_t gpu_type(void)
{
    return strcmp(uccl_gpu_backend(), "hip") == 0 ? UCCL_MEM_ROCM : UCCL_MEM_CUDA;
}

/* Make device current for this thread only when it is not already. */
static uccl_status_t use_device(int device)
{
    int cur = -1;

    if (uccl_gpu_get_device(&cur) == UCCL_OK && cur == device)
        return UCCL_OK;
    return uccl_gpu_set_device(device);
}

/* The caller's current device (-1: none), put back after our calls: a
 * public call does not move the caller's thread to another device. */
static int current_device(void)
{
    int dev = -1;

    return uccl_gpu_get_device(&dev) == UCCL_OK ? dev : -1;
}

static void device_restore(int prev)
{
    if (prev >= 0)
        use_device(prev);
}

static int engine_device(const uccl_engine_t *engine)
{
    int dev = 0;

    if (engine->gpu_index >= 0)
        return engine->gpu_index;
    return uccl_gpu_get_device(&dev) == UCCL_OK ? dev : 0;
}

uccl_status_t uccl_mem_alloc(uccl_engine_t *engine, uccl_mem_type_t type, size_t len, void **ptr)
{
    uccl_status_t st = uccl_engine_check(engine);
    int n = 0;

    if (st != UCCL_OK)
        return st;
    if (ptr == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    if (type == UCCL_MEM_HOST) /* shared memory a peer can map (hostmem.c) */
        return uccl_hostmem_alloc(len, ptr);
    if (type != UCCL_MEM_CUDA && type != UCCL_MEM_ROCM)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0)
        return UCCL_ERR_NO_DEVICE;
    if (type != gpu_type()) {
        uccl_error("uccl_mem_alloc: this build runs %s, not %s memory", uccl_gpu_backend(),
                   type == UCCL_MEM_CUDA ? "CUDA" : "ROCm");
        return UCCL_ERR_UNSUPPORTED;
    }
    n = current_device();
    st = use_device(engine_device(engine));
    if (st == UCCL_OK)
        st = uccl_gpu_malloc(ptr, len);
    device_restore(n);
    return st;
}

uccl_status_t uccl_mem_free(uccl_engine_t *engine, void *ptr)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_gpu_ptr_attr_t attr;
    bool shared = false;
    size_t size = 0;

    if (st != UCCL_OK || ptr == NULL)
        return st;
    if ((st = uccl_gpu_ptr_attr(ptr, &attr)) != UCCL_OK)
        return st;
    if (attr.type == UCCL_MEM_HOST && (size = uccl_hostmem_size(ptr, &shared)) == 0)
        size = malloc_usable_size(ptr);
    /* registrations over it go stale (mr.c): none is reused for memory
     * mapped there later */
    uccl_engine_lock(engine);
    if (attr.type == UCCL_MEM_HOST && uccl_mr_range_held(engine, ptr, size)) {
        uccl_engine_unlock(engine);
        uccl_warn("uccl_mem_free: a peer's write or read of %p is still being copied", ptr);
        return UCCL_ERR_BUSY;
    }
    if (attr.type == UCCL_MEM_HOST)
        uccl_mr_release_range(engine, ptr, size);
    else
        uccl_mr_release_range(engine, attr.base ? attr.base : ptr, attr.base ? attr.size : 1);
    uccl_engine_unlock(engine);
    if (attr.type == UCCL_MEM_HOST) {
        if (!shared || !uccl_hostmem_free(ptr))
            free(ptr);
        return UCCL_OK;
    }
    return uccl_gpu_free(ptr);
}

/* ------------------------------------------------------------------ the engine's copy context */

/* The context with its stream on the device (engine lock held). */
static uccl_status_t ctx_get(uccl_engine_t *engine, int device, uccl_copy_ctx_t **out)
{
    uccl_copy_ctx_t *ctx = engine->copy;
    uccl_status_t st;

    if (ctx == NULL) {
        ctx = calloc(1, sizeof(*ctx));
        if (ctx == NULL)
            return UCCL_ERR_NO_MEMORY;
        ctx->device = -1;
        uccl_list_init(&ctx->ops);
        uccl_list_init(&ctx->holds);
        engine->copy = ctx;
    }
    if (ctx->device < 0)
        ctx->device = device >= 0 ? device : engine_device(engine);
    if ((st = use_device(ctx->device)) != UCCL_OK)
        return st;
    if (ctx->stream == NULL && (st = uccl_gpu_stream_create(&ctx->stream)) != UCCL_OK)
        return st;
    *out = ctx;
    return UCCL_OK;
}

static uccl_status_t event_get(uccl_copy_ctx_t *ctx, uccl_gpu_event_t *ev)
{
    if (ctx->nfree_ev > 0) {
        *ev = ctx->free_ev[--ctx->nfree_ev];
        return UCCL_OK;
    }
    return uccl_gpu_event_create(ev, 0);
}

static void event_put(uccl_copy_ctx_t *ctx, uccl_gpu_event_t ev)
{
    if (ctx->nfree_ev == ctx->cap_free_ev) {
        int cap = ctx->cap_free_ev ? 2 * ctx->cap_free_ev : 16;
        uccl_gpu_event_t *a = realloc(ctx->free_ev, (size_t)cap * sizeof(*a));
        if (a == NULL) {
            uccl_gpu_event_destroy(ev);
            return;
        }
        ctx->free_ev = a;
        ctx->cap_free_ev = cap;
    }
    ctx->free_ev[ctx->nfree_ev++] = ev;
}

static void op_drop(copy_op_t *op)
{
    uccl_list_del(&op->link);
    event_put(op->engine->copy, op->ev);
    free(op);
}

/* Progress of a copy's / stream event's request: poll its event. */
static int op_progress(uccl_req_t *req, void *arg)
{
    copy_op_t *op = arg;
    uccl_status_t st;
    size_t bytes;

    if (op == NULL) /* a host copy: finished when posted */
        return 0;
    st = uccl_gpu_event_query(op->ev);
    bytes = op->bytes;
    if (st == UCCL_INPROGRESS)
        return 0;
    op_drop(op);
    uccl_req_finish(req, st, st == UCCL_OK ? bytes : 0);
    return 1;
}

/* Record an event on stream and hand back a request polling it (engine
 * lock held). */
static uccl_status_t op_post(uccl_engine_t *engine, uccl_copy_ctx_t *ctx, uccl_gpu_stream_t stream,
                             size_t bytes, uccl_req_t **req)
{
    copy_op_t *op = calloc(1, sizeof(*op));
    uccl_status_t st;

    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    op->engine = engine;
    op->bytes = bytes;
    if ((st = event_get(ctx, &op->ev)) != UCCL_OK) {
        free(op);
        return st;
    }
    uccl_list_push_back(&ctx->ops, &op->link);
    if ((st = uccl_gpu_event_record(op->ev, stream)) != UCCL_OK ||
        (st = uccl_req_create(engine, op_progress, op, req)) != UCCL_OK) {
        op_drop(op);
        return st;
    }
    return UCCL_OK;
}

/* Device of the GPU side of a copy, -1 when both sides are host memory;
 * *dtod when both are device memory. The type alone is asked, not the
 * allocation range: this runs on every call (a collective's own block). */
static int copy_device(void *dst, const void *src, bool *dtod)
{
    uccl_gpu_ptr_attr_t a, b;

    *dtod = false;
    if (uccl_gpu_ptr_kind(dst, &a) != UCCL_OK || uccl_gpu_ptr_kind(src, &b) != UCCL_OK)
        return -1;
    *dtod = a.type != UCCL_MEM_HOST && b.type != UCCL_MEM_HOST;
    return a.type != UCCL_MEM_HOST ? a.device : b.type != UCCL_MEM_HOST ? b.device : -1;
}

static uccl_status_t copy_start(uccl_engine_t *engine, void *dst, const void *src, size_t len,
                                uccl_req_t **req)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_gpu_stream_t stream;
    uccl_copy_ctx_t *ctx;
    int device, prev;
    bool dtod = false;

    if (st != UCCL_OK)
        return st;
    if (len > 0 && (dst == NULL || src == NULL))
        return UCCL_ERR_INVALID_PARAM;
    device = len > 0 ? copy_device(dst, src, &dtod) : -1;
    if (device < 0) {
        if (len > 0)
            memmove(dst, src, len);
        if (req == NULL)
            return UCCL_OK;
        if ((st = uccl_req_create(engine, op_progress, NULL, req)) != UCCL_OK)
            return st;
        return uccl_req_finish(*req, UCCL_OK, len);
    }
    uccl_engine_lock(engine);
    prev = current_device();
    st = ctx_get(engine, device, &ctx);
    if (st == UCCL_OK) /* GPU to GPU: the driver's call, no unified-addressing lookups (gpu.h) */
        st = dtod ? uccl_gpu_memcpy_dtod_async(dst, src, len, ctx->stream)
                  : uccl_gpu_memcpy_async(dst, src, len, ctx->stream);
    if (st == UCCL_OK && req != NULL)
        st = op_post(engine, ctx, ctx->stream, len, req);
    stream = st == UCCL_OK && req == NULL ? ctx->stream : NULL;
    device_restore(prev);
    uccl_engine_unlock(engine);
    /* blocking: wait outside the lock (the stream lives as long as the engine) */
    return stream != NULL ? uccl_gpu_stream_sync(stream) : st;
}

uccl_status_t uccl_copy(uccl_engine_t *engine, void *dst, const void *src, size_t len)
{
    return copy_start(engine, dst, src, len, NULL);
}

uccl_status_t uccl_copy_post(uccl_engine_t *engine, void *dst, const void *src, size_t len,
                             uccl_req_t **req)
{
    if (req == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return copy_start(engine, dst, src, len, req);
}

/* ------------------------------------------------------------------ stream ordering */

uccl_status_t uccl_stream_event(uccl_engine_t *engine, void *stream, uccl_req_t **req)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_copy_ctx_t *ctx;
    int prev;

    if (st != UCCL_OK)
        return st;
    if (req == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(engine);
    prev = current_device();
    st = ctx_get(engine, -1, &ctx);
    /* a stream with nothing left to run (the usual producer by the time a
     * call reads its buffer): a request complete at once, no event and no
     * round trip through the GPU; anything else (work queued, an error to
     * report) records the event */
    if (st == UCCL_OK && uccl_gpu_stream_query((uccl_gpu_stream_t)stream) == UCCL_OK) {
        st = uccl_req_create(engine, op_progress, NULL, req);
        if (st == UCCL_OK)
            st = uccl_req_finish(*req, UCCL_OK, 0);
    } else if (st == UCCL_OK) {
        st = op_post(engine, ctx, (uccl_gpu_stream_t)stream, 0, req);
    }
    device_restore(prev);
    uccl_engine_unlock(engine);
    return st;
}

/* The query alone: no request, and one device read when the caller's
 * device is already the engine's (the usual case), as it stays. stream
 * NULL: the engine's own stream, whose query reports a sticky fault of
 * the context (uccl_stream.h). */
uccl_status_t uccl_stream_query(uccl_engine_t *engine, void *stream)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_copy_ctx_t *ctx;
    int prev;

    if (st != UCCL_OK)
        return st;
    uccl_engine_lock(engine);
    prev = current_device();
    ctx = engine->copy;
    if (ctx == NULL || ctx->stream == NULL || ctx->device != prev) {
        st = ctx_get(engine, -1, &ctx);
        if (st == UCCL_OK)
            st = uccl_gpu_stream_query(stream != NULL ? (uccl_gpu_stream_t)stream : ctx->stream);
        device_restore(prev);
    } else {
        st = uccl_gpu_stream_query(stream != NULL ? (uccl_gpu_stream_t)stream : ctx->stream);
    }
    uccl_engine_unlock(engine);
    return st;
}

uccl_status_t uccl_stream_hold(uccl_engine_t *engine, void *stream, uccl_stream_hold_t **out)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_stream_hold_t *h;
    uccl_copy_ctx_t *ctx;
    int slot = -1, prev;

    if (st != UCCL_OK)
        return st;
    if (out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(engine);
    prev = current_device();
    st = ctx_get(engine, -1, &ctx);
    if (st == UCCL_OK && ctx->flags == NULL)
        st = uccl_gpu_flags_alloc(COPY_HOLDS_MAX, &ctx->flags, &ctx->flags_dev);
    for (int i = 0; st == UCCL_OK && i < COPY_HOLDS_MAX && slot < 0; i++)
        if (!ctx->busy[i])
            slot = i;
    if (st == UCCL_OK && slot < 0)
        st = UCCL_ERR_BUSY;
    h = st == UCCL_OK ? calloc(1, sizeof(*h)) : NULL;
    if (st == UCCL_OK && h == NULL)
        st = UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK) {
        /* a wait left over from an earlier hold of this word already sees
         * its value reached, so the word is reused with the next one */
        h->engine = engine;
        h->slot = slot;
        h->value = ++ctx->seq[slot];
        st = uccl_gpu_stream_wait_value((uccl_gpu_stream_t)stream,
                                        (uint32_t *)ctx->flags_dev + slot, h->value);
        if (st != UCCL_OK) {
            ctx->seq[slot]--;
            free(h);
        }
    }
    if (st == UCCL_OK) {
        ctx->busy[slot] = 1;
        engine->stream_holds++;
        uccl_list_push_back(&ctx->holds, &h->link);
        *out = h;
        hold_thread_ensure(engine);
    }
    device_restore(prev);
    uccl_engine_unlock(engine);
    return st;
}

/* The hold-progress thread. Only progress releases a hold, and a caller
 * that synchronizes the device before waiting on the request (cudaFree,
 * cudaDeviceSynchronize, a module load on a library's first kernel: all
 * wait for the held stream) would wait forever without it, as an NCCL user
 * would not expect. It runs while holds are out and leaves when the last
 * is released (under the lock, so a new hold sees a consistent state). */
static void *hold_main(void *arg)
{
    uccl_engine_t *engine = arg;
    unsigned idle = 0;

    for (;;) {
        int events;

        uccl_engine_lock(engine);
        if (__atomic_load_n(&engine->hold_stop, __ATOMIC_ACQUIRE) || engine->stream_holds == 0) {
            engine->hold_thread_state = 2;
            uccl_engine_unlock(engine);
            return NULL;
        }
        events = uccl_engine_progress_locked(engine);
        uccl_engine_unlock(engine);
        idle = events > 0 ? 0 : idle + 1;
        if (idle > 256)
            nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
        else if (idle > 16)
            sched_yield();
    }
}

/* A hold was placed (lock held): make sure something drives progress. */
static void hold_thread_ensure(uccl_engine_t *engine)
{
    if (engine->has_progress_thread || engine->hold_thread_state == 1)
        return;
    if (engine->hold_thread_state == 2) /* left its loop, never takes the lock again */
        pthread_join(engine->hold_thread, NULL);
    engine->hold_thread_state = 0;
    if (pthread_create(&engine->hold_thread, NULL, hold_main, engine) == 0)
        engine->hold_thread_state = 1;
    else
        uccl_warn("cannot start the stream-hold progress thread: progress the engine "
                  "(uccl_test/uccl_wait) before synchronizing the held stream");
}

void uccl_copy_hold_thread_stop(uccl_engine_t *engine)
{
    int state;

    uccl_engine_lock(engine);
    __atomic_store_n(&engine->hold_stop, 1, __ATOMIC_RELEASE);
    state = engine->hold_thread_state;
    engine->hold_thread_state = 0;
    uccl_engine_unlock(engine);
    if (state != 0)
        pthread_join(engine->hold_thread, NULL);
}

static void hold_release(uccl_copy_ctx_t *ctx, uccl_stream_hold_t *h)
{
    __atomic_store_n(&ctx->flags[h->slot], h->value, __ATOMIC_RELEASE);
    ctx->busy[h->slot] = 0;
    h->engine->stream_holds--;
    uccl_list_del(&h->link);
    free(h);
}

uccl_status_t uccl_stream_release(uccl_stream_hold_t *hold)
{
    uccl_engine_t *engine;

    if (hold == NULL || uccl_engine_check(hold->engine) != UCCL_OK)
        return UCCL_ERR_INVALID_HANDLE;
    engine = hold->engine;
    uccl_engine_lock(engine);
    hold_release(engine->copy, hold);
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

int uccl_engine_stream_holds(const uccl_engine_t *engine)
{
    return engine->stream_holds;
}

/* Engine teardown (lock held, generalized requests already cancelled):
 * release every hold, wait for the copy stream, free everything. */
void uccl_copy_ctx_destroy(uccl_engine_t *engine)
{
    uccl_copy_ctx_t *ctx = engine->copy;

    if (ctx == NULL)
        return;
    while (!uccl_list_empty(&ctx->holds))
        hold_release(ctx, uccl_list_first(&ctx->holds, uccl_stream_hold_t, link));
    if (ctx->stream != NULL) {
        use_device(ctx->device);
        uccl_gpu_stream_sync(ctx->stream);
    }
    while (!uccl_list_empty(&ctx->ops)) {
        copy_op_t *op = uccl_list_first(&ctx->ops, copy_op_t, link);
        uccl_gpu_event_sync(op->ev);
        op_drop(op);
    }
    for (int i = 0; i < ctx->nfree_ev; i++)
        uccl_gpu_event_destroy(ctx->free_ev[i]);
    free(ctx->free_ev);
    if (ctx->stream != NULL)
        uccl_gpu_stream_destroy(ctx->stream);
    /* the flag words (freeing page-locked memory waits for the device, so
     * a released wait still queued on a user's stream has read its word) */
    if (ctx->flags != NULL)
        uccl_gpu_flags_free(ctx->flags);
    free(ctx);
    engine->copy = NULL;
}

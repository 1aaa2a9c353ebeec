/* Staging of GPU memory through pinned host buffers (see staging.h): the
 * buffer pool, source pipelines, sink copies and deferred completions. */
#include "staging.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

/* Buffers in flight before the pool waits for the oldest one (per depth). */
#define STAGE_BUFS_PER_DEPTH 8

struct uccl_stage_buf {
    uccl_list_t link;     /* stage->free or a source's queue */
    uccl_list_t all_link; /* stage->all */
    uint8_t *ptr;
    void *reg; /* the registration hook's handle */
    uccl_gpu_event_t event; /* recorded after the last copy that touches ptr */
    bool recorded;
    int refs;
    size_t off, len, taken; /* in a source: bytes [off, off+len), taken consumed */
};

typedef struct stage_deferred {
    uccl_list_t link;
    uccl_gpu_event_t event;
    void *key;
    uccl_stage_fn_t fn;
    void *arg;
    uint64_t a, b, c;
} stage_deferred_t;

struct uccl_stage {
    int device;           /* -1 until first use when the engine has no GPU */
    bool ready;           /* stream made (a GPU context exists from then on) */
    size_t chunk;
    int depth;
    int nbufs, max_bufs;
    uccl_gpu_stream_t stream;
    uccl_list_t free;     /* buffers nobody holds, oldest first */
    uccl_list_t all;
    uccl_list_t deferred; /* stage_deferred_t, issue order */
    uccl_stage_buf_t *fill; /* sink buffer being filled */
    size_t fill_off;
    /* A copy of the stream failed, seen by whichever event was recorded
     * first after it: often a pool buffer's (a full sink buffer, a source's
     * chunk), whose pieces may be of any transfer. So it stays: every
     * deferred work item that runs from then on fails with it, as all work
     * does on a GPU whose context a copy fault poisoned. */
    uccl_status_t fault;
    uccl_stage_reg_fn_t reg; /* NIC-registration hook (optional) */
    uccl_stage_dereg_fn_t dereg;
    void *reg_ctx;
};

/* Make the staging device current for object creation; returns the old one. */
static int stage_enter(const uccl_stage_t *stage)
{
    int old = -1;

    if (uccl_gpu_get_device(&old) == UCCL_OK && old != stage->device)
        uccl_gpu_set_device(stage->device);
    return old;
}

static void stage_leave(const uccl_stage_t *stage, int old)
{
    if (old >= 0 && old != stage->device)
        uccl_gpu_set_device(old);
}

uccl_status_t uccl_stage_create(int device, size_t chunk, int depth, uccl_stage_t **out)
{
    uccl_stage_t *stage;
    int count = 0;

    if (uccl_gpu_count(&count) != UCCL_OK || count == 0)
        return UCCL_ERR_NO_DEVICE;
    stage = calloc(1, sizeof(*stage));
    if (stage == NULL)
        return UCCL_ERR_NO_MEMORY;
    stage->device = device;
    stage->chunk = chunk;
    stage->depth = depth < 1 ? 1 : depth;
    stage->max_bufs = stage->depth * STAGE_BUFS_PER_DEPTH;
    uccl_list_init(&stage->free);
    uccl_list_init(&stage->all);
    uccl_list_init(&stage->deferred);
    *out = stage;
    return UCCL_OK;
}

/* The stream (and with it a context on a GPU) is made at the first staged
 * copy, on the engine's GPU or else the GPU that gpu_ptr lives on: an engine
 * that never moves GPU memory never touches a GPU. */
static uccl_status_t stage_ready(uccl_stage_t *stage, const void *gpu_ptr)
{
    uccl_gpu_ptr_attr_t attr;
    uccl_status_t st;
    int old;

    if (stage->ready)
        return UCCL_OK;
    if (stage->device < 0 && gpu_ptr != NULL && uccl_gpu_ptr_attr(gpu_ptr, &attr) == UCCL_OK &&
        attr.device >= 0)
        stage->device = attr.device;
    if (stage->device < 0 && uccl_gpu_get_device(&stage->device) != UCCL_OK)
        return UCCL_ERR_NO_DEVICE;
    old = stage_enter(stage);
    st = uccl_gpu_stream_create(&stage->stream);
    stage_leave(stage, old);
    stage->ready = st == UCCL_OK;
    return st;
}

/* The GPU memory a staged request works on (NULL when none). */
static const void *stage_req_gpu_ptr(const uccl_req_t *req)
{
    for (int i = 0; req != NULL && i < req->iovcnt; i++)
        if (req->iov[i].region != NULL && uccl_region_mem_type(req->iov[i].region) != UCCL_MEM_HOST)
            return req->iov[i].addr;
    return NULL;
}

void uccl_stage_destroy(uccl_stage_t *stage)
{
    uccl_list_t *pos, *tmp;

    if (stage == NULL)
        return;
    if (!stage->ready) { /* never used: nothing was made on a GPU */
        free(stage);
        return;
    }
    uccl_gpu_stream_sync(stage->stream);
    uccl_list_for_each_safe(pos, tmp, &stage->deferred) {
        stage_deferred_t *d = uccl_container_of(pos, stage_deferred_t, link);
        uccl_gpu_event_destroy(d->event);
        free(d);
    }
    uccl_list_for_each_safe(pos, tmp, &stage->all) {
        uccl_stage_buf_t *buf = uccl_container_of(pos, uccl_stage_buf_t, all_link);
        uccl_gpu_event_destroy(buf->event);
        if (stage->dereg != NULL && buf->reg != NULL)
            stage->dereg(stage->reg_ctx, buf->reg);
        uccl_gpu_host_free(buf->ptr);
        free(buf);
    }
    uccl_gpu_stream_destroy(stage->stream);
    free(stage);
}

void uccl_stage_set_reg(uccl_stage_t *stage, uccl_stage_reg_fn_t reg, uccl_stage_dereg_fn_t dereg,
                        void *ctx)
{
    stage->reg = reg;
    stage->dereg = dereg;
    stage->reg_ctx = ctx;
}

void *uccl_stage_buf_reg(const uccl_stage_buf_t *buf)
{
    return buf->reg;
}

size_t uccl_stage_chunk(const uccl_stage_t *stage)
{
    return stage->chunk;
}

bool uccl_stage_req_is_gpu(const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++)
        if (req->iov[i].region != NULL && uccl_region_mem_type(req->iov[i].region) != UCCL_MEM_HOST)
            return true;
    return false;
}

/* ------------------------------------------------------------------ buffer pool */

static void stage_fault(uccl_stage_t *stage, uccl_status_t st)
{
    if (stage->fault != UCCL_OK)
        return;
    uccl_error("staging: a copy between GPU and host memory failed (%s); every staged transfer "
               "completing from now on fails", uccl_strerror(st));
    stage->fault = UCCL_ERR_TRANSPORT;
}

/* Have the copies before buf's event ended (UCCL_OK: buf needs no wait any
 * more; a fault they hit becomes the stage's)? wait: sync, not query. */
static uccl_status_t stage_buf_done(uccl_stage_t *stage, uccl_stage_buf_t *buf, bool wait)
{
    uccl_status_t st;

    if (!buf->recorded)
        return UCCL_OK;
    st = wait ? uccl_gpu_event_sync(buf->event) : uccl_gpu_event_query(buf->event);
    if (st == UCCL_INPROGRESS || st == UCCL_ERR_TIMEOUT)
        return st;
    buf->recorded = false;
    if (st != UCCL_OK)
        stage_fault(stage, st);
    return UCCL_OK;
}

static uccl_stage_buf_t *stage_buf_new(uccl_stage_t *stage)
{
    uccl_stage_buf_t *buf = calloc(1, sizeof(*buf));
    uccl_status_t st;
    int old;

    if (buf == NULL)
        return NULL;
    old = stage_enter(stage);
    st = uccl_gpu_host_alloc((void **)&buf->ptr, stage->chunk);
    if (st == UCCL_OK && stage->reg != NULL) {
        st = stage->reg(stage->reg_ctx, buf->ptr, stage->chunk, &buf->reg);
        if (st != UCCL_OK)
            uccl_gpu_host_free(buf->ptr);
    }
    if (st == UCCL_OK) {
        st = uccl_gpu_event_create(&buf->event, 0);
        if (st != UCCL_OK) {
            if (stage->dereg != NULL && buf->reg != NULL)
                stage->dereg(stage->reg_ctx, buf->reg);
            uccl_gpu_host_free(buf->ptr);
        }
    }
    stage_leave(stage, old);
    if (st != UCCL_OK) {
        free(buf);
        return NULL;
    }
    uccl_list_push_back(&stage->all, &buf->all_link);
    stage->nbufs++;
    return buf;
}

/* A buffer no copy touches any more: the oldest free one when its copies
 * are done, else a new one; at the cap, wait for the oldest (back-pressure
 * when the wire outruns the copy engine). */
static uccl_stage_buf_t *stage_buf_get(uccl_stage_t *stage)
{
    uccl_stage_buf_t *buf = NULL;

    if (!uccl_list_empty(&stage->free)) {
        uccl_stage_buf_t *oldest = uccl_list_first(&stage->free, uccl_stage_buf_t, link);
        if (stage_buf_done(stage, oldest, false) == UCCL_OK ||
            (stage->nbufs >= stage->max_bufs && stage_buf_done(stage, oldest, true) == UCCL_OK))
            buf = oldest;
    }
    if (buf != NULL)
        uccl_list_del(&buf->link);
    else if ((buf = stage_buf_new(stage)) == NULL)
        return NULL;
    buf->refs = 1;
    buf->recorded = false;
    buf->off = buf->len = buf->taken = 0;
    return buf;
}

void uccl_stage_buf_hold(uccl_stage_buf_t *buf) { buf->refs++; }

void uccl_stage_buf_put(uccl_stage_t *stage, uccl_stage_buf_t *buf)
{
    if (--buf->refs == 0)
        uccl_list_push_back(&stage->free, &buf->link);
}

static uccl_status_t stage_record(uccl_stage_t *stage, uccl_stage_buf_t *buf)
{
    uccl_status_t st = uccl_gpu_event_record(buf->event, stage->stream);

    buf->recorded = st == UCCL_OK;
    return st;
}

/* Copy n bytes between host buffer and byte off of req's iov or flat + off
 * on the stage stream (to_host: from the memory into buffer). */
static uccl_status_t stage_copy(uccl_stage_t *stage, const uccl_req_t *req, uint8_t *flat,
                                size_t off, uint8_t *host, size_t n, bool to_host)
{
    if (req == NULL)
        return to_host ? uccl_gpu_memcpy_async(host, flat + off, n, stage->stream)
                       : uccl_gpu_memcpy_async(flat + off, host, n, stage->stream);
    uccl_req_cur_t cur;
    uint8_t *mem;
    size_t take;

    uccl_req_cur_init(&cur, req, off);
    while ((take = uccl_req_cur_next(&cur, n, &mem, NULL)) > 0) {
        uccl_status_t st = to_host ? uccl_gpu_memcpy_async(host, mem, take, stage->stream)
                                   : uccl_gpu_memcpy_async(mem, host, take, stage->stream);
        if (st != UCCL_OK)
            return st;
        host += take;
        n -= take;
    }
    return UCCL_OK;
}

/* ------------------------------------------------------------------ sources */

void uccl_stage_src_init(uccl_stage_src_t *src, uccl_stage_t *stage, const uccl_req_t *req,
                         const void *flat, size_t len)
{
    *src = (uccl_stage_src_t){.stage = stage, .req = req, .flat = flat, .len = len};
    uccl_list_init(&src->queue);
}

static uccl_status_t stage_src_issue(uccl_stage_src_t *src)
{
    uccl_stage_t *stage = src->stage;

    while (src->nqueued < stage->depth && src->issued < src->len) {
        size_t n = src->len - src->issued < stage->chunk ? src->len - src->issued : stage->chunk;
        uccl_stage_buf_t *buf = stage_buf_get(stage);
        uccl_status_t st;

        if (buf == NULL)
            return src->nqueued > 0 ? UCCL_OK : UCCL_ERR_NO_MEMORY;
        st = stage_copy(stage, src->req, (uint8_t *)src->flat, src->issued, buf->ptr, n, true);
        if (st == UCCL_OK)
            st = stage_record(stage, buf);
        if (st != UCCL_OK) {
            uccl_stage_buf_put(stage, buf);
            return st;
        }
        buf->off = src->issued;
        buf->len = n;
        src->issued += n;
        uccl_list_push_back(&src->queue, &buf->link);
        src->nqueued++;
    }
    return UCCL_OK;
}

uccl_status_t uccl_stage_src_peek(uccl_stage_src_t *src, const uint8_t **ptr, size_t *n,
                                  uccl_stage_buf_t **bufp)
{
    uccl_status_t st = stage_ready(src->stage, src->flat ? (const void *)src->flat
                                                         : stage_req_gpu_ptr(src->req));
    uccl_stage_buf_t *buf;

    if (st == UCCL_OK)
        st = stage_src_issue(src);
    if (st != UCCL_OK)
        return st;
    if (uccl_list_empty(&src->queue))
        return UCCL_INPROGRESS;
    buf = uccl_list_first(&src->queue, uccl_stage_buf_t, link);
    st = uccl_gpu_event_query(buf->event);
    if (st != UCCL_OK && st != UCCL_INPROGRESS)
        stage_fault(src->stage, st);
    if (st != UCCL_OK)
        return st;
    *ptr = buf->ptr + buf->taken;
    *n = buf->len - buf->taken;
    if (bufp != NULL)
        *bufp = buf;
    return UCCL_OK;
}

void uccl_stage_src_take(uccl_stage_src_t *src, size_t n)
{
    uccl_stage_buf_t *buf = uccl_list_first(&src->queue, uccl_stage_buf_t, link);

    buf->taken += n;
    if (buf->taken < buf->len)
        return;
    uccl_list_del(&buf->link);
    src->nqueued--;
    uccl_stage_buf_put(src->stage, buf);
}

void uccl_stage_src_fini(uccl_stage_src_t *src)
{
    while (!uccl_list_empty(&src->queue)) {
        uccl_stage_buf_t *buf = uccl_list_first(&src->queue, uccl_stage_buf_t, link);
        uccl_list_del(&buf->link);
        uccl_stage_buf_put(src->stage, buf); /* reused only once its copy is done */
    }
    src->nqueued = 0;
}

/* ------------------------------------------------------------------ sinks */

/* Pieces are packed into the fill buffer; it goes back to the pool (with an
 * event after its last copy) when full. */
uccl_status_t uccl_stage_sink_reserve(uccl_stage_t *stage, const uccl_req_t *req,
                                      const uint8_t *flat, uint8_t **ptr, size_t *n)
{
    uccl_status_t ready = stage_ready(stage, flat != NULL ? (const void *)flat : stage_req_gpu_ptr(req));

    if (ready != UCCL_OK)
        return ready;
    if (stage->fill != NULL && stage->fill_off == stage->chunk) {
        uccl_status_t st = stage_record(stage, stage->fill);

        uccl_stage_buf_put(stage, stage->fill);
        stage->fill = NULL;
        if (st != UCCL_OK)
            return st;
    }
    if (stage->fill == NULL) {
        stage->fill = stage_buf_get(stage);
        if (stage->fill == NULL)
            return UCCL_ERR_NO_MEMORY;
        stage->fill_off = 0;
    }
    *ptr = stage->fill->ptr + stage->fill_off;
    *n = stage->chunk - stage->fill_off;
    return UCCL_OK;
}

uccl_status_t uccl_stage_sink_commit(uccl_stage_t *stage, const uccl_req_t *req, uint8_t *flat,
                                     size_t off, size_t n)
{
    uccl_status_t st = stage_copy(stage, req, flat, off, stage->fill->ptr + stage->fill_off, n,
                                  false);

    if (st == UCCL_OK)
        stage->fill_off += n;
    return st;
}

uccl_stage_buf_t *uccl_stage_buf_take(uccl_stage_t *stage, const uccl_req_t *req)
{
    if (stage_ready(stage, stage_req_gpu_ptr(req)) != UCCL_OK)
        return NULL;
    return stage_buf_get(stage);
}

uint8_t *uccl_stage_buf_ptr(const uccl_stage_buf_t *buf)
{
    return buf->ptr;
}

uccl_status_t uccl_stage_buf_copy_in(uccl_stage_t *stage, uccl_stage_buf_t *buf,
                                     const uccl_req_t *req, size_t off, size_t n)
{
    uccl_status_t st = stage_copy(stage, req, NULL, off, buf->ptr, n, false);

    return st == UCCL_OK ? stage_record(stage, buf) : st;
}

uccl_status_t uccl_stage_copy_in(uccl_stage_t *stage, const uccl_req_t *req, uint8_t *flat,
                                 size_t off, const void *src, size_t n)
{
    const uint8_t *p = src;

    while (n > 0) {
        uint8_t *dst;
        size_t room;
        uccl_status_t st = uccl_stage_sink_reserve(stage, req, flat, &dst, &room);

        if (st != UCCL_OK)
            return st;
        room = room < n ? room : n;
        memcpy(dst, p, room);
        st = uccl_stage_sink_commit(stage, req, flat, off, room);
        if (st != UCCL_OK)
            return st;
        p += room;
        off += room;
        n -= room;
    }
    return UCCL_OK;
}

/* ------------------------------------------------------------------ deferred work */

uccl_status_t uccl_stage_defer(uccl_stage_t *stage, void *key, uccl_stage_fn_t fn, void *arg,
                               uint64_t a, uint64_t b, uint64_t c)
{
    stage_deferred_t *d = calloc(1, sizeof(*d));
    uccl_status_t st;
    int old;

    if (d == NULL)
        return UCCL_ERR_NO_MEMORY;
    if ((st = stage_ready(stage, NULL)) != UCCL_OK) {
        free(d);
        return st;
    }
    old = stage_enter(stage);
    st = uccl_gpu_event_create(&d->event, 0);
    stage_leave(stage, old);
    if (st == UCCL_OK) {
        st = uccl_gpu_event_record(d->event, stage->stream);
        if (st != UCCL_OK)
            uccl_gpu_event_destroy(d->event);
    }
    if (st != UCCL_OK) {
        free(d);
        return st;
    }
    *d = (stage_deferred_t){.event = d->event, .key = key, .fn = fn, .arg = arg, .a = a, .b = b,
                            .c = c};
    uccl_list_push_back(&stage->deferred, &d->link);
    return UCCL_OK;
}

static void stage_complete_req(void *arg, uccl_status_t copy_status, uint64_t status,
                               uint64_t bytes, uint64_t unused)
{
    (void)unused;
    if (copy_status != UCCL_OK)
        uccl_req_complete(arg, copy_status, 0);
    else
        uccl_req_complete(arg, (uccl_status_t)(int64_t)status, (size_t)bytes);
}

uccl_status_t uccl_stage_complete_req(uccl_stage_t *stage, void *key, uccl_req_t *req,
                                      uccl_status_t status, size_t bytes)
{
    return uccl_stage_defer(stage, key, stage_complete_req, req, (uint64_t)(int64_t)status, bytes, 0);
}

void uccl_stage_cancel(uccl_stage_t *stage, void *key)
{
    uccl_list_t *pos, *tmp;
    bool synced = false;

    uccl_list_for_each_safe(pos, tmp, &stage->deferred) {
        stage_deferred_t *d = uccl_container_of(pos, stage_deferred_t, link);
        if (d->key != key)
            continue;
        if (!synced) /* copies into memory the caller may free next */
            uccl_gpu_stream_sync(stage->stream);
        synced = true;
        uccl_list_del(&d->link);
        uccl_gpu_event_destroy(d->event);
        free(d);
    }
}

int uccl_stage_progress(uccl_stage_t *stage)
{
    int events = 0;

    /* one stream: events complete in issue order, so only the head matters */
    while (!uccl_list_empty(&stage->deferred)) {
        stage_deferred_t *d = uccl_list_first(&stage->deferred, stage_deferred_t, link);
        uccl_status_t st = uccl_gpu_event_query(d->event);

        if (st == UCCL_INPROGRESS)
            break;
        if (st != UCCL_OK) {
            stage_fault(stage, st);
        } else { /* the buffers' events before d's, done too: a fault there may be d's */
            uccl_list_t *pos;
            uccl_list_for_each(pos, &stage->all)
                (void)stage_buf_done(stage, uccl_container_of(pos, uccl_stage_buf_t, all_link), false);
        }
        st = stage->fault;
        uccl_list_del(&d->link);
        uccl_gpu_event_destroy(d->event);
        d->fn(d->arg, st, d->a, d->b, d->c);
        free(d);
        events++;
    }
    return events;
}

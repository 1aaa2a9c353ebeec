/* Staged sinks and granted windows of the RDMA message protocol, shared by
 * its users (verbs without GPUDirect RDMA, ofi): see rndv_stage.h. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "rndv_stage.h"

/* ------------------------------------------------------------------ sinks */

uccl_status_t uccl_rndv_sink_new(uccl_rndv_t *r, uccl_stage_t *stage, int depth,
                                 const uccl_rndv_sink_hooks_t *hooks, void *ctx, uccl_req_t *req,
                                 size_t len, uccl_rndv_sink_t **out)
{
    size_t chunk = uccl_stage_chunk(stage);
    size_t want = (len + chunk - 1) / chunk;
    uccl_rndv_sink_t *sink = calloc(1, sizeof(*sink));

    if (sink == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (want > (size_t)depth)
        want = (size_t)depth;
    if (want > UCCL_RNDV_MAX_SLOTS)
        want = UCCL_RNDV_MAX_SLOTS;
    sink->r = r;
    sink->stage = stage;
    sink->hooks = hooks;
    sink->ctx = ctx;
    sink->req = req;
    sink->len = len;
    for (int i = 0; i < (int)want; i++) {
        uccl_rndv_slot_t *s = &sink->slots[i];

        s->sink = sink;
        s->index = i;
        s->buf = uccl_stage_buf_take(stage, req);
        if (s->buf == NULL)
            break;
        sink->nslots++;
    }
    if (sink->nslots == 0) {
        free(sink);
        return UCCL_ERR_NO_MEMORY;
    }
    *out = sink;
    return UCCL_OK;
}

/* Copies still queued on the stream are waited for before the buffers go
 * back (the pool reuses a buffer only after its last copy anyway). */
void uccl_rndv_sink_free(uccl_rndv_sink_t *sink)
{
    uccl_stage_cancel(sink->stage, sink);
    for (int i = 0; i < sink->nslots; i++)
        uccl_stage_buf_put(sink->stage, sink->slots[i].buf);
    free(sink);
}

/* Grant window s of a receive at the next bytes of the message. */
static uccl_status_t rndv_sink_grant(uccl_rndv_sink_t *sink, uccl_rndv_slot_t *s)
{
    size_t chunk = uccl_stage_chunk(sink->stage);
    uccl_rndv_seg_t seg;

    s->off = sink->next;
    s->len = sink->len - s->off < chunk ? sink->len - s->off : chunk;
    s->busy = true;
    sink->next += s->len;
    sink->hooks->buf_seg(sink->ctx, s->buf, &seg);
    seg.len = s->len;
    return uccl_rndv_grant(sink->r, sink->req, s->index, s->off, &seg);
}

uccl_status_t uccl_rndv_sink_start(uccl_rndv_sink_t *sink)
{
    uccl_status_t st = UCCL_OK;

    for (int i = 0; i < sink->nslots && sink->next < sink->len && st == UCCL_OK; i++)
        st = rndv_sink_grant(sink, &sink->slots[i]);
    return st;
}

/* A receive's sink failed: the peer may still write into its windows, so
 * the connection goes too. */
static void rndv_sink_fail(uccl_rndv_sink_t *sink, uccl_status_t st)
{
    uccl_req_t *req = sink->req;

    if (req->op == UCCL_OP_RECV) {
        uccl_conn_fail(sink->r->ep->conn, UCCL_ERR_TRANSPORT);
        uccl_rndv_sink_done(sink->r, req, st);
        return;
    }
    uccl_rndv_req_error(req, st);
    sink->hooks->read_settle(sink->ctx, req);
}

/* The copy of a window is done: the sink is complete, or the window is
 * granted again (a receive; a read posts it from its data path). */
static void rndv_sink_copied(void *arg, uccl_status_t copy_status, uint64_t a, uint64_t b,
                             uint64_t c)
{
    uccl_rndv_slot_t *s = arg;
    uccl_rndv_sink_t *sink = s->sink;
    uccl_req_t *req = sink->req;
    uccl_status_t st;

    (void)a, (void)b, (void)c;
    s->busy = false;
    if (copy_status != UCCL_OK) {
        rndv_sink_fail(sink, copy_status);
        return;
    }
    sink->copied += s->len;
    if (req->op == UCCL_OP_RECV) {
        if (sink->copied == sink->len)
            uccl_rndv_sink_done(sink->r, req, UCCL_OK);
        else if (sink->next < sink->len && (st = rndv_sink_grant(sink, s)) != UCCL_OK)
            rndv_sink_fail(sink, st);
        return;
    }
    if (sink->copied == sink->len) /* a read, all landed and copied */
        sink->hooks->read_settle(sink->ctx, req);
}

void uccl_rndv_sink_landed(uccl_rndv_sink_t *sink, int slot, uccl_status_t st)
{
    uccl_rndv_slot_t *s;

    if (slot < 0 || slot >= sink->nslots || !sink->slots[slot].busy) {
        uccl_error("%s: data for window %d of a staged receive that has none out",
                   sink->r->ep->tp->ops->name, slot);
        uccl_conn_fail(sink->r->ep->conn, UCCL_ERR_TRANSPORT);
        return;
    }
    s = &sink->slots[slot];
    if (st == UCCL_OK)
        st = uccl_stage_buf_copy_in(sink->stage, s->buf, sink->req, s->off, s->len);
    if (st == UCCL_OK)
        st = uccl_stage_defer(sink->stage, sink, rndv_sink_copied, s, 0, 0, 0);
    if (st != UCCL_OK) {
        s->busy = false;
        if (sink->req->op == UCCL_OP_RECV)
            rndv_sink_fail(sink, st);
        else
            uccl_rndv_req_error(sink->req, st); /* the read's completion ends it */
    }
}

uccl_rndv_slot_t *uccl_rndv_sink_free_slot(uccl_rndv_sink_t *sink)
{
    for (int i = 0; i < sink->nslots; i++)
        if (!sink->slots[i].busy)
            return &sink->slots[i];
    return NULL;
}

/* ------------------------------------------------------------------ grants */

uccl_status_t uccl_rndv_grants_push(uccl_rndv_grants_t *g, const uccl_req_t *req, int slot,
                                    uint64_t off, const uccl_rndv_seg_t *seg)
{
    if (g->n == UCCL_RNDV_MAX_SLOTS || seg->len == 0 || off + seg->len > req->len ||
        off + seg->len < off)
        return UCCL_ERR_TRANSPORT;
    g->g[(g->head + g->n) % UCCL_RNDV_MAX_SLOTS] = (uccl_rndv_grant_t){off, *seg, slot};
    g->n++;
    return UCCL_OK;
}

void uccl_rndv_grants_at(const uccl_rndv_grants_t *g, uint64_t off, uint64_t *addr,
                         uint64_t *key, uint64_t *left)
{
    const uccl_rndv_grant_t *w = &g->g[g->head];

    *addr = *key = *left = 0;
    if (g->n > 0 && off >= w->off && off < w->off + w->seg.len) {
        *addr = w->seg.addr + (off - w->off);
        *key = w->seg.key;
        *left = w->off + w->seg.len - off;
    }
}

bool uccl_rndv_grants_advance(uccl_rndv_grants_t *g, uint64_t end, int *slot)
{
    const uccl_rndv_grant_t *w = &g->g[g->head];

    if (g->n == 0 || end != w->off + w->seg.len)
        return false;
    *slot = w->slot;
    g->head = (g->head + 1) % UCCL_RNDV_MAX_SLOTS;
    g->n--;
    return true;
}

/* ------------------------------------------------------------------ staged requests */

uccl_status_t uccl_rndv_staged_stage(uccl_rndv_staged_t *s, uccl_rndv_t *r, uccl_stage_t *stage,
                                     int depth, const uccl_rndv_sink_hooks_t *hooks, void *ctx,
                                     uccl_req_t *req, size_t len, bool gather)
{
    s->r = r;
    if (gather) {
        if (s->src == NULL && (s->src = malloc(sizeof(*s->src))) == NULL)
            return UCCL_ERR_NO_MEMORY;
        uccl_stage_src_init(s->src, stage, req, NULL, len);
        return UCCL_OK;
    }
    if (s->sink != NULL)
        return UCCL_OK;
    return uccl_rndv_sink_new(r, stage, depth, hooks, ctx, req, len, &s->sink);
}

uccl_status_t uccl_rndv_staged_grant(uccl_rndv_staged_t *s, uccl_rndv_t *r, const uccl_req_t *req,
                                     int slot, uint64_t off, const uccl_rndv_seg_t *seg)
{
    if (s->grants == NULL && (s->grants = calloc(1, sizeof(*s->grants))) == NULL)
        return UCCL_ERR_NO_MEMORY;
    s->r = r;
    return uccl_rndv_grants_push(s->grants, req, slot, off, seg);
}

void uccl_rndv_staged_release(uccl_rndv_staged_t *s, uccl_req_t *req)
{
    if (s->src != NULL) {
        uccl_stage_src_fini(s->src);
        free(s->src);
    }
    if (s->sink != NULL)
        uccl_rndv_sink_free(s->sink);
    if (s->grants != NULL) {
        uccl_rndv_forget(s->r, req);
        free(s->grants);
    }
    *s = (uccl_rndv_staged_t){0};
}

/* ------------------------------------------------------------------ copies */

uccl_status_t uccl_rndv_iov_copy(uccl_req_t *req, void *flat, size_t len, bool to_iov)
{
    uint8_t *p = flat, *mem;
    uccl_req_cur_t cur;
    size_t n;
    int i;

    uccl_req_cur_init(&cur, req, 0);
    while ((n = uccl_req_cur_next(&cur, len, &mem, &i)) > 0) {
        bool gpu = req->iov[i].region != NULL &&
                   uccl_region_mem_type(req->iov[i].region) != UCCL_MEM_HOST;
        void *dst = to_iov ? (void *)mem : p;
        const void *src = to_iov ? (const void *)p : mem;
        uccl_status_t st;

        if (gpu) {
            st = uccl_gpu_memcpy(dst, src, n);
            if (st != UCCL_OK)
                return st;
        } else {
            memcpy(dst, src, n);
        }
        p += n;
        len -= n;
    }
    return UCCL_OK;
}

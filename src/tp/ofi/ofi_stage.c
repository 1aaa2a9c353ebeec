/* GPU memory on the ofi transport, through the staging engine (tp/staging.h)
 * whose pinned buffers this file registers with the domain, and the staged
 * sinks and granted windows the RDMA message protocol's users share
 * (tp/common/rndv_stage.h): a send or a write out of GPU memory posts each
 * chunk from the stage buffer its D2H copy filled while the next chunks
 * copy; a receive into GPU memory grants windows of stage buffers to the
 * sender (rndv GRANT), a read posts its reads into them; each window that
 * landed is copied into place on the copy stream and used again after its
 * copy. A GPU region has no key (peers reach it by send/recv only), as with
 * verbs without GPUDirect RDMA. Providers that register GPU memory
 * themselves (FI_HMEM) would skip all this: a later fast path
 * (docs/DESIGN.md). */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* ------------------------------------------------------------------ open */

static uccl_status_t ofi_stage_reg(void *ctx, void *ptr, size_t len, void **handle)
{
    struct fid_mr *mr;
    void *desc;
    uccl_status_t st = uccl_ofi_reg_buf(ctx, ptr, len, &mr, &desc);

    if (st == UCCL_OK)
        *handle = mr;
    return st;
}

static void ofi_stage_dereg(void *ctx, void *handle)
{
    tp_ofi_t *tp = ctx;
    int rc = fi_close(&((struct fid_mr *)handle)->fid);

    if (rc != 0)
        uccl_warn("ofi (%s): closing a staging buffer's memory region: %s", tp->prov,
                  fi_strerror(-rc));
}

/* GPU memory is staged when a GPU is usable here (as tcp and shm do). */
void uccl_ofi_gpu_open(tp_ofi_t *tp, const uccl_tp_open_params_t *params)
{
    if (uccl_stage_create(params->gpu_index, tp->cfg.stage_chunk, tp->cfg.stage_depth,
                          &tp->stage) != UCCL_OK) {
        tp->stage = NULL;
        return;
    }
    uccl_stage_set_reg(tp->stage, ofi_stage_reg, ofi_stage_dereg, tp);
    tp->base.open_caps = UCCL_TP_CAP_CUDA_MEM | UCCL_TP_CAP_ROCM_MEM;
    uccl_info("ofi (%s): GPU memory is staged through registered host buffers of %zu bytes",
              tp->prov, tp->cfg.stage_chunk);
}

void uccl_ofi_gpu_close(tp_ofi_t *tp)
{
    uccl_stage_destroy(tp->stage); /* deregisters its buffers */
    tp->stage = NULL;
}

/* A staged GPU region: a handle without memory region, so that the region
 * is known here (and has no key for peers). */
uccl_status_t uccl_ofi_gpu_mem_reg(tp_ofi_t *tp, uccl_tp_memh_t **out)
{
    *out = NULL;
    if (tp->stage == NULL) {
        uccl_error("ofi (%s): GPU memory needs a usable GPU in this engine (staging through "
                   "registered host buffers); none was opened", tp->prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

bool uccl_ofi_req_staged(const tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        const uccl_tp_memh_t *memh;

        if (req->iov[i].len == 0)
            continue;
        memh = uccl_ofi_iov_memh(ep->tp, req, i);
        if (memh != NULL && memh->mr == NULL)
            return true;
    }
    return false;
}

void *uccl_ofi_stage_desc(const uccl_stage_buf_t *buf)
{
    return fi_mr_desc(uccl_stage_buf_reg(buf));
}

/* ------------------------------------------------------------------ requests */

/* req's transfer state, with room for nseg remote pieces (kept if it has). */
ofi_xfer_t *uccl_ofi_xfer_get(tp_ofi_ep_t *ep, uccl_req_t *req, uint64_t nseg)
{
    ofi_xfer_t *old = req->tp_ptr, *x;

    if (old != NULL && old->nseg >= nseg)
        return old;
    x = calloc(1, sizeof(*x) + nseg * sizeof(uccl_rndv_seg_t));
    if (x == NULL)
        return NULL;
    if (old != NULL) {
        *x = *old;
        free(old);
    }
    x->ep = ep;
    x->nseg = nseg;
    req->tp_ptr = x;
    return x;
}

/* The peer writes a window (or we read into it) by its key, at its address
 * or at offset 0 of it (offset addressing). */
static void ofi_sink_buf_seg(void *ctx, const uccl_stage_buf_t *buf, uccl_rndv_seg_t *seg)
{
    tp_ofi_ep_t *ep = ctx;
    struct fid_mr *mr = uccl_stage_buf_reg(buf);

    seg->addr = (ep->tp->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)uccl_stage_buf_ptr(buf) : 0;
    seg->key = fi_mr_key(mr);
}

/* A read's sink is done or failed: the read ends with its last operation. */
static void ofi_sink_read_settle(void *ctx, uccl_req_t *req)
{
    tp_ofi_ep_t *ep = ctx;

    if (req->tp_data[OFI_RD_OPS] == 0 && !uccl_ofi_req_has_work(req)) {
        uccl_list_del(&req->tp_link);
        uccl_rndv_write_done(&ep->rndv, req);
    }
}

static const uccl_rndv_sink_hooks_t ofi_sink_hooks = {
    .buf_seg = ofi_sink_buf_seg,
    .read_settle = ofi_sink_read_settle,
};

/* Staged req: a source pipeline or a sink (uccl_rndv_staged_stage). */
uccl_status_t uccl_ofi_xfer_stage(tp_ofi_ep_t *ep, uccl_req_t *req, size_t len, bool gather)
{
    ofi_xfer_t *x = uccl_ofi_xfer_get(ep, req, 0);

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    return uccl_rndv_staged_stage(&x->staged, &ep->rndv, ep->tp->stage, ep->tp->cfg.stage_depth,
                                  &ofi_sink_hooks, ep, req, len, gather);
}

/* Finishing req: what staged it goes back (uccl_rndv_staged_release;
 * buffers still posted are held by their operations). */
void uccl_ofi_xfer_release(uccl_req_t *req)
{
    ofi_xfer_t *x = req->tp_ptr;

    if (x == NULL)
        return;
    uccl_rndv_staged_release(&x->staged, req);
    free(x);
    req->tp_ptr = NULL;
}

/* ------------------------------------------------------------------ protocol hooks */

static tp_ofi_ep_t *ofi_ep_of(uccl_rndv_t *r)
{
    return uccl_container_of(r, tp_ofi_ep_t, rndv);
}

uccl_status_t uccl_ofi_sink_start(uccl_rndv_t *r, uccl_req_t *req, size_t len)
{
    ofi_xfer_t *x = req->tp_ptr;

    (void)r;
    (void)len;
    return uccl_rndv_sink_start(x->staged.sink);
}

void uccl_ofi_sink_landed(uccl_rndv_t *r, uccl_req_t *req, int slot)
{
    ofi_xfer_t *x = req->tp_ptr;

    if (x == NULL || x->staged.sink == NULL) {
        uccl_error("ofi: window data for a receive that is not staged");
        uccl_ofi_conn_fail(ofi_ep_of(r), UCCL_ERR_TRANSPORT);
        return;
    }
    uccl_rndv_sink_landed(x->staged.sink, slot, UCCL_OK);
}

/* Sender: window `slot` at byte off of the receiver's message, granted. */
uccl_status_t uccl_ofi_grant(uccl_rndv_t *r, uccl_req_t *req, bool first, int slot, uint64_t off,
                             const uccl_rndv_seg_t *seg)
{
    tp_ofi_ep_t *ep = ofi_ep_of(r);
    ofi_xfer_t *x = uccl_ofi_xfer_get(ep, req, 0);
    uccl_status_t st;

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_rndv_staged_grant(&x->staged, r, req, slot, off, seg);
    if (st != UCCL_OK)
        return st;
    if (first) /* later windows are posted by progress (data_pending) */
        uccl_ofi_data_start(ep, req);
    return UCCL_OK;
}

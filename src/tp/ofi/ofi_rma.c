/* One-sided requests (uccl_write, uccl_read and their vectored forms): the
 * checks every one passes, then either one operation for the whole request
 * posted at once (ofi_post_whole) or the data path of ofi_data.c. */
#include "ofi.h"

/* The request as one fi_readmsg / fi_writemsg, posted here without the data
 * path's general walk (ofi_post_one: windows, staging, packing, remote
 * ranges, immediates): one registered local piece, one remote range, up to
 * UCCL_OFI_CHUNK bytes, no immediate, nothing of ep's waiting to be posted
 * before it. On shm a 64 KiB read is copied inside fi_readmsg, so the
 * instructions before it add to every read (tests/perf/results/ofi/
 * ofi14-H200host/README.md). false: not such a request, or the provider did
 * not take it (the data path posts it, or retries, or reports the error). */
static bool ofi_post_whole(tp_ofi_ep_t *ep, uccl_req_t *req, const uccl_tp_memh_t *memh,
                           uint64_t key, uint64_t rbase)
{
    tp_ofi_t *tp = ep->tp;
    bool is_write = req->op == UCCL_OP_WRITE;
    struct iovec iov;
    struct fi_rma_iov rma;
    struct fi_msg_rma msg;
    void *desc;
    ofi_op_t *op;
    int rc;

    if (memh == NULL || req->len > tp->cfg.chunk || req->nrseg > 1 || req->tp_ptr != NULL ||
        !uccl_list_empty(&ep->data_pending) || (is_write && uccl_rndv_needs_imm(req)) ||
        (tp->pack_below != 0 && req->iovcnt > tp->cfg.max_iov && /* its own first test */
         uccl_ofi_pack_wanted(tp, req, 0, req->len)))
        return false;
    op = uccl_ofi_op_get(tp);
    if (op == NULL)
        return false;
    iov = (struct iovec){req->iov[0].addr, req->len};
    desc = memh->desc;
    rma = (struct fi_rma_iov){.addr = req->remote.addr - rbase, .len = req->len, .key = key};
    msg = (struct fi_msg_rma){.msg_iov = &iov, .desc = &desc, .iov_count = 1,
                              .addr = ep->peer->addr, .rma_iov = &rma, .rma_iov_count = 1,
                              .context = &op->ctx};
    /* a write's completion says it landed (the data path's flags for the
     * last write of a request without an immediate) */
    rc = is_write ? (int)fi_writemsg(tp->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE)
                  : (int)fi_readmsg(tp->ep, &msg, FI_COMPLETION);
    if (rc != 0) {
        uccl_ofi_op_put(tp, op);
        return false;
    }
    op->kind = OFI_OP_DATA;
    op->ep = ep;
    op->req = req;
    op->len = req->len;
    op->read = !is_write;
    op->whole = true;
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_DATA;
    req->tp_data[OFI_RD_OFF] = req->len;
    req->tp_data[OFI_RD_OPS] = 1;
    req->tp_data[OFI_RD_IMM] = 0;
    req->tp_data[OFI_RD_DOPS] = 1;
    tp->rma_posted++;
    tp->rma_whole++;
    ep->posted++;
    uccl_list_push_back(&ep->data_ops, &op->link);
    uccl_list_push_back(&ep->inflight, &req->tp_link);
    return true;
}

static uccl_status_t ofi_post_rma(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tp_ofi_ep_t *ep = tp_ofi_ep(base);
    uint64_t key, rbase;
    /* one piece (nearly every request): its registration looked up once,
     * for the check, the staging question and the post */
    const uccl_tp_memh_t *memh =
        req->iovcnt == 1 && req->iov[0].len > 0 ? uccl_ofi_iov_memh(ep->tp, req, 0) : NULL;
    bool staged;
    uccl_status_t st;

    if (memh == NULL && (st = uccl_ofi_check_local(ep, req)) != UCCL_OK)
        return st;
    if (req->remote.rkey_len == 0) {
        uccl_error("ofi: remote region %llu has no libfabric key: its owner could not register "
                   "it with %s, so only send/recv reach it",
                   (unsigned long long)req->remote.region_id, ep->tp->prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    if (req->remote.rkey_len == ep->rkey_last_len &&
        memcmp(req->remote.rkey, ep->rkey_last, sizeof(ep->rkey_last)) == 0) {
        key = ep->rkey_last_key; /* the same bytes as the last request's: parsed then */
        rbase = ep->rkey_last_base;
    } else if (uccl_ofi_rkey_parse(req->remote.rkey, req->remote.rkey_len, &key, &rbase) ==
               UCCL_OK) {
        memcpy(ep->rkey_last, req->remote.rkey, sizeof(ep->rkey_last));
        ep->rkey_last_len = req->remote.rkey_len;
        ep->rkey_last_key = key;
        ep->rkey_last_base = rbase;
    } else {
        uccl_error("ofi: malformed libfabric key in the remote descriptor (%u bytes)",
                   req->remote.rkey_len);
        return UCCL_ERR_BAD_DESC;
    }
    if (req->tp_ptr != NULL)
        uccl_ofi_xfer_release(req);
    /* local GPU pieces: a write reads them through a source pipeline, a
     * read lands in the windows of a sink */
    staged = memh != NULL ? memh->mr == NULL : uccl_ofi_req_staged(ep, req);
    if (req->len > 0 && staged) {
        st = uccl_ofi_xfer_stage(ep, req, req->len, req->op == UCCL_OP_WRITE);
        if (st != UCCL_OK) {
            uccl_ofi_xfer_release(req);
            return st;
        }
    }
    if (staged || !ofi_post_whole(ep, req, memh, key, rbase))
        uccl_ofi_data_start(ep, req);
    return UCCL_OK;
}

uccl_status_t uccl_ofi_post_write(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return ofi_post_rma(base, req);
}

uccl_status_t uccl_ofi_post_read(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return ofi_post_rma(base, req);
}

/* libfabric data path: requests cut into fi_writemsg / fi_readmsg operations
 * of at most UCCL_OFI_CHUNK bytes and the provider's iov_limit local pieces,
 * each into one contiguous remote range; the last write of a request that
 * needs it carries the immediate as remote CQ data and asks for delivery
 * completion (writes are ordered, so that covers the earlier ones); where
 * the provider carries less than 8 bytes of CQ data, the immediate follows
 * as a message of no bytes with CQ data instead (sends after writes are
 * ordered, FI_ORDER_SAW).
 * -FI_EAGAIN leaves the rest for the next progress, in order; completions
 * and their errors (fi_cq_readerr, the provider's text) end here. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_POLL 32

uccl_status_t uccl_ofi_status_of(int e)
{
    switch (e) {
    case FI_ECANCELED: return UCCL_ERR_CANCELED;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED: return UCCL_ERR_REMOTE_ACCESS;
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_EHOSTUNREACH:
    case FI_ENOTCONN:
    case FI_ETIMEDOUT:
    case FI_ESHUTDOWN: return UCCL_ERR_PEER_FAILED;
    case FI_ETRUNC: return UCCL_ERR_TRUNCATED;
    }
    return UCCL_ERR_TRANSPORT;
}

static ofi_xfer_t *ofi_xfer(const uccl_req_t *req)
{
    return req->tp_ptr;
}

/* A send on granted windows: each window closes with its chunk immediate,
 * the message with none of its own. */
static bool ofi_req_windowed(const uccl_req_t *req)
{
    return ofi_xfer(req) != NULL && ofi_xfer(req)->staged.grants != NULL;
}

bool uccl_ofi_req_has_work(const uccl_req_t *req)
{
    if (req->tp_data[UCCL_RNDV_RD_ERR] != 0)
        return false;
    if (ofi_req_windowed(req))
        return req->tp_data[OFI_RD_OFF] < req->len || ofi_xfer(req)->owed_slot != 0;
    return req->tp_data[OFI_RD_OFF] < req->len ||
           (uccl_rndv_needs_imm(req) && req->tp_data[OFI_RD_IMM] != 2);
}

/* ofi_post_one: req waits (its closing operation for its earlier writes, a
 * send for its next granted window, staged data for its copy or a free
 * window); the requests behind it go on. */
#define OFI_FENCED 1

/* The local side of one operation. */
typedef struct ofi_local {
    struct iovec iov[OFI_IOV_MAX];
    void *desc[OFI_IOV_MAX];
    int n;
    size_t got;
    ofi_bounce_t *bounce;    /* a packed operation's buffer */
    uccl_stage_buf_t *sbuf;  /* staged: the stage buffer read or filled */
    uccl_rndv_slot_t *slot;  /* a read into a window of its sink */
} ofi_local_t;

/* The local side of req's next operation at byte off, want bytes at most:
 * the stage buffer its D2H copy filled, a free window of its sink, a
 * packing bounce, or its own pieces. 0, OFI_FENCED, -FI_EAGAIN, or another
 * negative code (req has its error). */
static int ofi_local(tp_ofi_ep_t *ep, uccl_req_t *req, size_t off, size_t want, ofi_local_t *l)
{
    tp_ofi_t *tp = ep->tp;
    ofi_xfer_t *x = ofi_xfer(req);
    const uint8_t *ptr;
    uccl_status_t st;
    size_t n;

    l->n = 0;
    l->got = 0;
    l->bounce = NULL;
    l->sbuf = NULL;
    l->slot = NULL;
    if (want == 0)
        return 0;
    if (x != NULL && (x->staged.src != NULL || x->staged.sink != NULL)) {
        if (tp->staged_ops >= 2 * tp->cfg.stage_depth)
            return OFI_FENCED; /* the pool stays small: once some complete */
        if (x->staged.src != NULL) {
            st = uccl_stage_src_peek(x->staged.src, &ptr, &n, &l->sbuf);
            if (st == UCCL_INPROGRESS)
                return OFI_FENCED;
            if (st != UCCL_OK) {
                uccl_error("ofi: staging GPU data: %s", uccl_strerror(st));
                uccl_rndv_req_error(req, st);
                return -FI_EIO;
            }
        } else {
            l->slot = uccl_rndv_sink_free_slot(x->staged.sink);
            if (l->slot == NULL)
                return OFI_FENCED;
            l->sbuf = l->slot->buf;
            ptr = uccl_stage_buf_ptr(l->sbuf);
            n = uccl_stage_chunk(tp->stage);
        }
        l->got = want < n ? want : n;
        l->iov[0] = (struct iovec){(void *)(uintptr_t)ptr, l->got};
        l->desc[0] = uccl_ofi_stage_desc(l->sbuf);
        l->n = 1;
        return 0;
    }
    if (uccl_ofi_pack_wanted(tp, req, off, want)) {
        l->bounce = uccl_ofi_bounce_get(tp);
        if (l->bounce == NULL && tp->nbounce > 0)
            return -FI_EAGAIN; /* all in use: once one comes back */
    }
    if (l->bounce != NULL) { /* one piece: the bounce (filled once the post is sure) */
        l->got = want < OFI_BOUNCE_SIZE ? want : OFI_BOUNCE_SIZE;
        l->iov[0] = (struct iovec){uccl_ofi_bounce_ptr(l->bounce), l->got};
        l->desc[0] = uccl_ofi_bounce_desc(l->bounce);
        l->n = 1;
        return 0;
    }
    l->got = uccl_ofi_gather(ep, req, off, want, l->iov, l->desc, tp->cfg.max_iov, &l->n);
    return 0;
}

/* The operation of l was posted: its stage buffer is held until it
 * completes, a source moves on, a window is busy. */
static void ofi_local_posted(tp_ofi_t *tp, uccl_req_t *req, size_t off, ofi_local_t *l,
                             ofi_op_t *op)
{
    if (l->sbuf == NULL)
        return;
    uccl_stage_buf_hold(l->sbuf);
    tp->staged_ops++;
    op->sbuf = l->sbuf;
    if (l->slot != NULL) {
        l->slot->off = off;
        l->slot->len = l->got;
        l->slot->busy = true;
        op->slot = l->slot;
    } else {
        uccl_stage_src_take(ofi_xfer(req)->staged.src, l->got);
    }
}

/* Post req's next operation: 0, -FI_EAGAIN (try again later), OFI_FENCED
 * or another negative code (req has its error). */
static int ofi_post_one(tp_ofi_ep_t *ep, uccl_req_t *req)
{
    tp_ofi_t *tp = ep->tp;
    ofi_xfer_t *x = ofi_xfer(req);
    size_t off = req->tp_data[OFI_RD_OFF], want = req->len - off, got;
    int extra = 0, rc, wslot = -1;
    uint64_t raddr = 0, rkey = 0, rleft = 0, flags = FI_COMPLETION, data = 0;
    struct fi_rma_iov rma[OFI_IOV_MAX] = {{0}};
    size_t nrma = 1;
    struct fi_msg_rma msg;
    /* a receive here reads a pulled message (rndv_pull.c) */
    bool is_write = req->op == UCCL_OP_WRITE || req->op == UCCL_OP_SEND;
    bool windowed = ofi_req_windowed(req), last;
    ofi_local_t l;
    ofi_op_t *op;

    if (req->tp_data[UCCL_RNDV_RD_STATE] == UCCL_RNDV_RS_TMSG)
        return uccl_ofi_tmsg_post(ep, req);
    if (windowed && x->owed_slot != 0) { /* the chunk immediate of a window, as a message */
        if (!tp->rma_ordered && req->tp_data[OFI_RD_DOPS] > 0)
            return OFI_FENCED;
        want = 0;
        flags |= FI_REMOTE_CQ_DATA;
        data = (uint64_t)ep->peer_id << 32 | uccl_rndv_imm_chunk(req, x->owed_slot - 1);
    } else {
        if (uccl_ofi_remote_at(req, off, &raddr, &rkey, &rleft) != UCCL_OK) {
            uccl_rndv_req_error(req, UCCL_ERR_BAD_DESC);
            return -FI_EINVAL;
        }
        if (want > tp->cfg.chunk)
            want = tp->cfg.chunk;
        if (want > rleft)
            want = rleft;
        if (want == 0 && off < req->len) {
            if (windowed)
                return OFI_FENCED; /* until the receiver grants the next window */
            uccl_rndv_req_error(req, UCCL_ERR_TRANSPORT); /* remote pieces shorter than the message */
            return -FI_EINVAL;
        }
        rma[0] = (struct fi_rma_iov){.addr = raddr, .len = want, .key = rkey};
        if (want < req->len - off && want == rleft) /* the range ends: more ranges */
            want = uccl_ofi_remote_more(tp, req, off, req->len - off, rma, &nrma);
    }
    rc = ofi_local(ep, req, off, want, &l);
    if (rc != 0)
        return rc;
    got = l.got;
    uccl_ofi_remote_trim(rma, &nrma, got);
    last = off + got == req->len;
    if (is_write && !tp->rma_ordered)
        flags |= FI_DELIVERY_COMPLETE; /* what the closing write waits for */
    if (windowed && got > 0 && got == rleft) { /* closes the oldest window */
        wslot = x->staged.grants->g[x->staged.grants->head].slot;
        if (!tp->imm_msg) {
            if (!tp->rma_ordered && req->tp_data[OFI_RD_DOPS] > 0) {
                rc = OFI_FENCED;
                goto unpost;
            }
            flags |= FI_REMOTE_CQ_DATA;
            data = (uint64_t)ep->peer_id << 32 | uccl_rndv_imm_chunk(req, wslot);
        }
    } else if (!windowed && is_write && last) {
        flags |= FI_DELIVERY_COMPLETE;
        if (uccl_rndv_needs_imm(req)) {
            if (req->tp_data[OFI_RD_IMM] == 0) {
                if (uccl_rndv_imm_begin(&ep->rndv, req, 1, &extra) != UCCL_OK) {
                    uccl_rndv_req_error(req, UCCL_ERR_NO_MEMORY);
                    rc = -FI_ENOMEM;
                    goto unpost;
                }
                req->tp_data[OFI_RD_OPS] += (uint64_t)extra; /* a NOTIFY is one of req's parts */
                req->tp_data[OFI_RD_IMM] = 1;
            }
            /* with less than 8 bytes of CQ data, the immediate follows the
             * last write as a message of its own (ordered after it: SAW) */
            if (got == 0 || !tp->imm_msg) {
                /* unordered writes: the immediate goes once the rest landed */
                if (!tp->rma_ordered && req->tp_data[OFI_RD_DOPS] > 0) {
                    rc = OFI_FENCED;
                    goto unpost;
                }
                flags |= FI_REMOTE_CQ_DATA;
                data = (uint64_t)ep->peer_id << 32 | uccl_rndv_imm(req, 1);
            }
        }
    }
    op = uccl_ofi_op_get(tp);
    if (op == NULL) {
        uccl_rndv_req_error(req, UCCL_ERR_NO_MEMORY);
        rc = -FI_ENOMEM;
        goto unpost;
    }
    op->kind = OFI_OP_DATA;
    op->ep = ep;
    op->req = req;
    op->bounce = l.bounce;
    op->off = off;
    op->len = got;
    op->read = !is_write;
    if (l.bounce != NULL && is_write)
        uccl_req_iov_copy_out(req, off, l.iov[0].iov_base, got);
    msg = (struct fi_msg_rma){.msg_iov = l.iov, .desc = l.desc, .iov_count = (size_t)l.n,
                              .addr = ep->peer->addr, .rma_iov = rma, .rma_iov_count = nrma,
                              .context = &op->ctx, .data = data};
    if (got == 0 && (flags & FI_REMOTE_CQ_DATA)) /* no bytes: the immediate alone, as a message */
        rc = (int)fi_tsenddata(tp->ep, NULL, 0, NULL, data, ep->peer->addr, ep->peer_id,
                               &op->ctx);
    else if (is_write)
        rc = (int)fi_writemsg(tp->ep, &msg, flags);
    else
        rc = (int)fi_readmsg(tp->ep, &msg, flags);
    tp->rma_posted += rc == 0;
    if (rc != 0) {
        uccl_ofi_op_put(tp, op);
        if (rc != -FI_EAGAIN) {
            uccl_error("ofi (%s): fi_%smsg of %zu bytes: %s", tp->prov, is_write ? "write" : "read",
                       got, fi_strerror(-rc));
            uccl_rndv_req_error(req, UCCL_ERR_TRANSPORT);
        }
        goto unpost;
    }
    ofi_local_posted(tp, req, off, &l, op);
    req->tp_data[OFI_RD_OFF] += got;
    req->tp_data[OFI_RD_OPS]++;
    req->tp_data[OFI_RD_DOPS]++;
    if (windowed && got == 0)
        x->owed_slot = 0;
    else if (wslot >= 0 && uccl_rndv_grants_advance(x->staged.grants, off + got, &wslot) &&
             tp->imm_msg)
        x->owed_slot = wslot + 1;
    if (!windowed && (flags & FI_REMOTE_CQ_DATA))
        req->tp_data[OFI_RD_IMM] = 2;
    ep->posted++;
    uccl_list_push_back(&ep->data_ops, &op->link);
    return 0;
unpost:
    if (l.bounce != NULL)
        uccl_ofi_bounce_put(tp, l.bounce);
    return rc;
}

/* Post the pending requests' operations in order until the provider pushes
 * back; a request whose closing write waits for its earlier ones stays. */
void uccl_ofi_post_pending(tp_ofi_ep_t *ep)
{
    uccl_list_t *pos, *tmp;

    uccl_list_for_each_safe(pos, tmp, &ep->data_pending) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, tp_link);
        int rc = 0;

        while (uccl_ofi_req_has_work(req) && (rc = ofi_post_one(ep, req)) != OFI_FENCED)
            if (rc == -FI_EAGAIN)
                return;
        if (rc == OFI_FENCED)
            continue;
        uccl_list_del(&req->tp_link);
        uccl_list_push_back(&ep->inflight, &req->tp_link);
        if (req->tp_data[OFI_RD_OPS] == 0) /* failed before posting anything */
            uccl_ofi_data_done(ep, req, UCCL_OK);
    }
}

void uccl_ofi_data_start(tp_ofi_ep_t *ep, uccl_req_t *req)
{
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_DATA;
    req->tp_data[OFI_RD_OFF] = 0;
    req->tp_data[OFI_RD_OPS] = 0;
    req->tp_data[OFI_RD_IMM] = 0;
    req->tp_data[OFI_RD_DOPS] = 0;
    if (!uccl_ofi_req_has_work(req)) {
        uccl_rndv_write_done(&ep->rndv, req);
        return;
    }
    uccl_list_push_back(&ep->data_pending, &req->tp_link);
    uccl_ofi_post_pending(ep);
}

/* One of req's operations completed (or req failed with nothing posted). */
void uccl_ofi_data_done(tp_ofi_ep_t *ep, uccl_req_t *req, uccl_status_t st)
{
    if (st != UCCL_OK)
        uccl_rndv_req_error(req, st);
    if (req->tp_data[OFI_RD_OPS] > 0 && --req->tp_data[OFI_RD_OPS] > 0)
        return;
    if (uccl_ofi_req_has_work(req))
        return; /* more operations wait in data_pending */
    if (req->tp_data[UCCL_RNDV_RD_ERR] == 0 && ofi_xfer(req) != NULL &&
        ofi_xfer(req)->staged.sink != NULL &&
        uccl_rndv_sink_copying(ofi_xfer(req)->staged.sink))
        return; /* a read whose last windows still copy: the sink settles it */
    uccl_list_del(&req->tp_link);
    if (req->tp_data[UCCL_RNDV_RD_STATE] == UCCL_RNDV_RS_TMSG)
        uccl_ofi_tmsg_done(ep, req);
    else
        uccl_rndv_write_done(&ep->rndv, req);
}

/* ------------------------------------------------------------------ completions */

/* A control receive completed: a control message, the immediate of a
 * write of no bytes (sent as a message with CQ data), or a direct send's
 * hint. */
static void ofi_ctrl_recv_done(tp_ofi_ep_t *ep, ofi_op_t *op, size_t len, uint64_t flags,
                               uint64_t data)
{
    if (!(flags & FI_REMOTE_CQ_DATA)) {
        uccl_rndv_ctrl_recv(&ep->rndv, op->index, len);
        return;
    }
    if (uccl_ofi_post_ctrl_recv(ep, op->index) != UCCL_OK)
        uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
    if (uccl_ofi_dhint_is(data))
        uccl_ofi_dhint_arrived(ep, data); /* a direct send's tag and run (ofi_dhint.c) */
    else
        uccl_rndv_imm_arrived(&ep->rndv, (uint32_t)data);
}

static void ofi_op_complete(tp_ofi_t *tp, ofi_op_t *op, uccl_status_t st,
                            const struct fi_cq_data_entry *e)
{
    tp_ofi_ep_t *ep = op->ep;
    uccl_req_t *req;

    switch (op->kind) {
    case OFI_OP_CTRL_RECV:
        if (!ep->dead && st == UCCL_OK)
            ofi_ctrl_recv_done(ep, op, e->len, e->flags, e->data);
        else if (!ep->dead && st != UCCL_ERR_CANCELED)
            uccl_ofi_conn_fail(ep, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
        break;
    case OFI_OP_CTRL_SEND:
        ep->ctrl_sends--;
        if (!ep->dead)
            uccl_rndv_ctrl_sent(&ep->rndv, op->index, st);
        if (!ep->dead && st != UCCL_OK)
            uccl_ofi_conn_fail(ep, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
        break;
    case OFI_OP_DATA:
        req = op->req;
        uccl_list_del(&op->link);
        if (op->whole && req != NULL && st == UCCL_OK && req->tp_data[UCCL_RNDV_RD_ERR] == 0) {
            /* ofi_post_whole's request, whole in this operation: done (what
             * uccl_ofi_data_done and the protocol's write_done come to) */
            uccl_ofi_op_put(tp, op);
            tp->rma_whole_done++;
            req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_CTRL;
            uccl_ofi_req_finish(req, UCCL_OK, req->len);
            break;
        }
        if (op->sbuf != NULL) { /* staged */
            if (req != NULL && op->slot != NULL) /* a read into a window: its copy starts */
                uccl_rndv_sink_landed(op->slot->sink, op->slot->index, st);
            uccl_stage_buf_put(tp->stage, op->sbuf);
            tp->staged_ops--;
        }
        if (op->bounce != NULL) { /* a packed read lands in its pieces now */
            if (req != NULL && op->read && st == UCCL_OK)
                uccl_req_iov_copy_in(req, op->off, uccl_ofi_bounce_ptr(op->bounce), op->len);
            uccl_ofi_bounce_put(tp, op->bounce);
        }
        if (op->tmp != NULL) /* a tagged receive's bounce */
            st = uccl_ofi_tmsg_landed(op, st);
        uccl_ofi_op_put(tp, op);
        if (req != NULL) {
            req->tp_data[OFI_RD_DOPS]--;
            uccl_ofi_data_done(ep, req, st);
        }
        if (!ep->dead && (st == UCCL_ERR_PEER_FAILED || st == UCCL_ERR_TRANSPORT))
            uccl_ofi_conn_fail(ep, st);
        break;
    case OFI_OP_DSEND:
    case OFI_OP_DRECV:
        uccl_list_del(&op->link);
        uccl_ofi_direct_complete(ep, op, st, e != NULL ? e->len : 0, e != NULL ? e->flags : 0,
                                 e != NULL ? e->data : 0);
        uccl_ofi_op_put(tp, op);
        break;
    }
    uccl_ofi_ep_op_done(ep);
}

static void ofi_handle(tp_ofi_t *tp, const struct fi_cq_data_entry *e)
{
    if (e->flags & FI_REMOTE_WRITE) { /* a write closed by an immediate landed */
        tp_ofi_ep_t *ep = uccl_ofi_ep_by_id(tp, (uint32_t)(e->data >> 32));

        if (!(e->flags & FI_REMOTE_CQ_DATA))
            return;
        if (ep == NULL) {
            uccl_debug("ofi (%s): immediate for connection %u, gone", tp->prov,
                       (unsigned)(e->data >> 32));
            return;
        }
        uccl_rndv_imm_arrived(&ep->rndv, (uint32_t)e->data);
        return;
    }
    if (e->op_context != NULL)
        ofi_op_complete(tp, e->op_context, UCCL_OK, e);
}

static void ofi_handle_error(tp_ofi_t *tp)
{
    struct fi_cq_err_entry err;
    ofi_op_t *op;
    uccl_status_t st;
    char text[256];

    memset(&err, 0, sizeof(err));
    if (fi_cq_readerr(tp->cq, &err, 0) != 1)
        return;
    op = err.op_context;
    st = uccl_ofi_status_of(err.err);
    /* flushed by the provider, not by us: its link to the peer failed
     * (tcp;ofi_rxm flushes a dead peer's operations so, prov_errno
     * ENOTCONN), which is the peer's failure, as for FI_ENOTCONN */
    if (st == UCCL_ERR_CANCELED && op != NULL && !op->ep->dead && !op->cancelled)
        st = UCCL_ERR_PEER_FAILED;
    if (op == NULL || ((op->ep->dead || op->cancelled) && st == UCCL_ERR_CANCELED)) {
        if (op == NULL) {
            uccl_ofi_cq_error(tp, &err, text, sizeof(text));
            uccl_warn("ofi: completion error without a request: %s", text);
        } else {
            ofi_op_complete(tp, op, st, NULL);
        }
        return;
    }
    if (!op->ep->dead) {
        uccl_ofi_cq_error(tp, &err, text, sizeof(text));
        uccl_error("ofi: %s failed: %s",
                   op->kind == OFI_OP_DATA ? "an RMA operation"
                   : op->kind == OFI_OP_DSEND ? "a direct send"
                   : op->kind == OFI_OP_DRECV ? "a direct receive"
                   : op->kind == OFI_OP_CTRL_SEND ? "a control send" : "a control receive",
                   text);
    }
    ofi_op_complete(tp, op, st, NULL);
}

int uccl_ofi_progress(uccl_tp_t *base)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    struct fi_cq_data_entry ent[OFI_POLL];
    uccl_list_t *pos, *tmp;
    int events = 0;

    if (tp->stage != NULL)
        events += uccl_stage_progress(tp->stage); /* staged copies done: sinks, sources */
    if (tp->direct_max > 0 || tp->direct_peers) /* before the provider moves what came in */
        uccl_list_for_each_safe(pos, tmp, &tp->eps)
            uccl_ofi_direct_progress(uccl_container_of(pos, tp_ofi_ep_t, link));
    for (int round = 0; round < 8; round++) {
        ssize_t n = fi_cq_read(tp->cq, ent, OFI_POLL);

        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            ofi_handle_error(tp);
            events++;
            continue;
        }
        if (n < 0) {
            uccl_error("ofi (%s): fi_cq_read: %s", tp->prov, fi_strerror((int)-n));
            break;
        }
        for (ssize_t i = 0; i < n; i++)
            ofi_handle(tp, &ent[i]);
        events += (int)n;
        if (n < OFI_POLL)
            break;
    }
    uccl_list_for_each_safe(pos, tmp, &tp->eps) {
        tp_ofi_ep_t *ep = uccl_container_of(pos, tp_ofi_ep_t, link);

        if (!ep->connected || !uccl_ofi_conn_ok(ep))
            continue;
        if (ep->nretry_recv > 0 || ep->nretry_send > 0)
            uccl_ofi_retry_ctrl(ep);
        if (!uccl_list_empty(&ep->rndv.ctrl_pending)) /* the flush's own first test */
            uccl_rndv_ctrl_flush(&ep->rndv);
        if (!uccl_list_empty(&ep->data_pending))
            uccl_ofi_post_pending(ep);
    }
    tp->polls++;
    tp->polls_empty += events == 0;
    return events;
}

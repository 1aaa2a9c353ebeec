/* Verbs data path, posting: requests cut into chunks of at most
 * UCCL_VERBS_CHUNK, striped over the data QPs and posted as WR chains (one
 * doorbell per QP and batch), closed by immediates where the target must
 * learn of them. Their completions: verbs_cq.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

#define VERBS_BATCH 32 /* work requests per doorbell batch */

void uccl_verbs_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes)
{
    uccl_list_del(&req->tp_link);
    uccl_verbs_xfer_release(req);
    uccl_req_complete(req, status, status == UCCL_OK ? bytes : 0);
}

static void verbs_wr_init(uccl_req_t *req, struct ibv_send_wr *wr, struct ibv_sge *sge, int nsge,
                          uint64_t raddr, uint32_t rkey)
{
    memset(wr, 0, sizeof(*wr));
    wr->wr_id = (uintptr_t)req | VERBS_WR_DATA;
    wr->sg_list = sge;
    wr->num_sge = nsge;
    wr->opcode = req->op == UCCL_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    wr->send_flags = IBV_SEND_SIGNALED;
    wr->wr.rdma.remote_addr = raddr;
    wr->wr.rdma.rkey = rkey;
}

/* Stage buffers a staged source may have on the wire: its copies ahead
 * (depth) and about as many posted, so that the pool stays small. */
static bool verbs_stage_room(const tp_verbs_t *v)
{
    return v->staged_wrs < 2 * v->cfg.stage_depth;
}

/* The next chunk of a staged source: from the stage buffer its D2H copy
 * filled, registered with the NIC (*buf holds it for the work request).
 * UCCL_INPROGRESS while that copy runs or too many buffers are posted. */
static uccl_status_t verbs_build_staged(const tp_verbs_ep_t *ep, tp_verbs_xfer_t *x, size_t want,
                                        struct ibv_sge *sge, size_t *got, uccl_stage_buf_t **buf)
{
    const uint8_t *ptr;
    size_t n;
    uccl_status_t st;

    if (!verbs_stage_room(ep->tp))
        return UCCL_INPROGRESS;
    st = uccl_stage_src_peek(x->staged.src, &ptr, &n, buf);
    if (st != UCCL_OK)
        return st;
    if (want > n)
        want = n;
    uccl_stage_buf_hold(*buf); /* until the work request completes (uccl_verbs_qp_held_pop) */
    uccl_stage_src_take(x->staged.src, want);
    *sge = (struct ibv_sge){(uintptr_t)ptr, (uint32_t)want,
                            ((struct ibv_mr *)uccl_stage_buf_reg(*buf))->lkey};
    *got = want;
    return UCCL_OK;
}

/* Fill wr and sge for the next chunk of req (*got bytes; *buf: the stage
 * buffer it reads, or NULL). UCCL_INPROGRESS: a staged chunk is not ready. */
static uccl_status_t verbs_build_chunk(const tp_verbs_ep_t *ep, uccl_req_t *req, int rail,
                                       struct ibv_send_wr *wr, struct ibv_sge *sge, size_t *gotp,
                                       uccl_stage_buf_t **buf)
{
    size_t off = req->tp_data[VERBS_RD_OFF], want = req->len - off, got = 0;
    tp_verbs_xfer_t *x = tp_verbs_xfer(req);
    bool staged = x != NULL && (x->staged.src != NULL || x->staged.sink != NULL);
    uint64_t raddr, rleft;
    uint32_t rkey;
    int n = 0;

    *buf = NULL;
    *gotp = 0;
    uccl_verbs_remote_at(req, off, rail, &raddr, &rkey, &rleft);
    if (want > ep->tp->cfg.chunk)
        want = ep->tp->cfg.chunk;
    if (want > rleft)
        want = rleft;
    if (want == 0) /* no window granted yet, or remote pieces shorter than the message */
        return x != NULL && x->staged.grants != NULL && x->staged.grants->n == 0
                   ? UCCL_INPROGRESS
                   : UCCL_ERR_TRANSPORT;
    if (x != NULL && x->staged.src != NULL) {
        uccl_status_t st = verbs_build_staged(ep, x, want, &sge[0], &got, buf);

        if (st != UCCL_OK)
            return st;
        n = 1;
    } else if (x != NULL && x->staged.sink != NULL) { /* a read into a free window of its sink */
        uccl_rndv_slot_t *slot = uccl_rndv_sink_free_slot(x->staged.sink);

        if (slot == NULL)
            return UCCL_INPROGRESS;
        if (want > uccl_stage_chunk(ep->tp->stage))
            want = uccl_stage_chunk(ep->tp->stage);
        *slot = (uccl_rndv_slot_t){x->staged.sink, slot->buf, off, want, slot->index, true};
        sge[0] = (struct ibv_sge){(uintptr_t)uccl_stage_buf_ptr(slot->buf), (uint32_t)want,
                                  ((struct ibv_mr *)uccl_stage_buf_reg(slot->buf))->lkey};
        verbs_wr_init(req, wr, sge, 1, raddr, rkey);
        wr->wr_id = (uintptr_t)slot | VERBS_WR_SINK;
        *gotp = want;
        return UCCL_OK;
    }
    if (!staged) { /* the request's own pieces, up to max_sge of them */
        uccl_req_cur_t cur;
        uint8_t *addr;
        size_t take;
        int i;

        uccl_req_cur_init(&cur, req, off);
        while (n < ep->tp->max_sge && (take = uccl_req_cur_next(&cur, want - got, &addr, &i)) > 0) {
            sge[n++] = (struct ibv_sge){
                (uintptr_t)addr, (uint32_t)take,
                tp_verbs_memh_mr(uccl_region_memh(req->iov[i].region, &ep->tp->base), rail)->lkey};
            got += take;
        }
    }
    verbs_wr_init(req, wr, sge, n, raddr, rkey);
    *gotp = got;
    return UCCL_OK;
}

static bool verbs_req_windowed(const uccl_req_t *req)
{
    const tp_verbs_xfer_t *x = tp_verbs_xfer(req);

    return x != NULL && x->staged.grants != NULL;
}

static bool verbs_qp_room(const tp_verbs_ep_t *ep, const tp_verbs_qp_t *q) /* TX_DEPTH, INFLIGHT */
{
    return q->outstanding < ep->tp->cfg.tx_depth &&
           (ep->tp->cfg.inflight == 0 || q->bytes_out < ep->tp->cfg.inflight);
}

/* UC gives no delivery guarantee (a lost packet drops the message silently,
 * and an immediate that never lands would hang its target), so data closed
 * by immediates (rendezvous, notify) goes on the RC control QP instead. Else
 * the next data QP round robin, of a rail req may use, or when that one is
 * full the next with room: posting stops at a full QP, and one slow QP or
 * rail must not hold back the others (a staged window stays on its QP). */
static tp_verbs_qp_t *verbs_pick_qp(tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    uint64_t rails = req->tp_data[VERBS_RD_RAILS] & ~(uint64_t)ep->dead_rails;

    if (rails == 0) /* its rails died since: the first one left, else a dead one (it flushes, */
        rails = uccl_verbs_req_rails(ep, req); /* then starts over or fails: verbs_rail.c) */
    if (rails == 0)
        rails = 1;
    if (ep->tp->uc && (req->op == UCCL_OP_SEND || req->has_notif))
        return &ep->ctrl;
    for (int k = 0; k < ep->nq && !(rails >> ep->data[ep->next_qp].rail & 1); k++)
        ep->next_qp = (ep->next_qp + 1) % ep->nq;
    if (!verbs_qp_room(ep, &ep->data[ep->next_qp]) && !verbs_req_windowed(req))
        for (int k = 1; k < ep->nq; k++) {
            int i = (ep->next_qp + k) % ep->nq;

            if ((rails >> ep->data[i].rail & 1) && verbs_qp_room(ep, &ep->data[i])) {
                ep->next_qp = i;
                break;
            }
        }
    return &ep->data[ep->next_qp];
}

typedef struct verbs_batch {
    struct ibv_send_wr wr[VERBS_BATCH];
    struct ibv_sge sge[VERBS_BATCH][VERBS_MAX_SGE];
    tp_verbs_qp_t *qp[VERBS_BATCH];
    int n;
} verbs_batch_t;

/* One ibv_post_send per QP for what the batch holds. */
static uccl_status_t verbs_batch_flush(tp_verbs_ep_t *ep, verbs_batch_t *b)
{
    for (int i = 0; i < b->n; i++) {
        struct ibv_send_wr *head = NULL, **tail = &head, *bad;
        tp_verbs_qp_t *q = b->qp[i];
        int rc;

        if (q == NULL)
            continue;
        for (int j = i; j < b->n; j++) {
            if (b->qp[j] != q)
                continue;
            *tail = &b->wr[j];
            tail = &b->wr[j].next;
            b->qp[j] = NULL;
        }
        *tail = NULL;
        rc = ibv_post_send(q->qp, head, &bad);
        if (rc != 0) {
            uccl_error("%s: ibv_post_send on QP %u: %s", ep->tp->dev_name, q->qp->qp_num, strerror(rc));
            uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
            return UCCL_ERR_TRANSPORT;
        }
    }
    b->n = 0;
    return UCCL_OK;
}

static int verbs_qp_bit(const tp_verbs_ep_t *ep, const tp_verbs_qp_t *q)
{
    return q == &ep->ctrl ? VERBS_IMM_CTRL_BIT : (int)(q - ep->data);
}

/* The zero-length WRITE_WITH_IMM that closes req on a QP which carried
 * some of its data but not its last chunk. */
static void verbs_build_imm_only(uccl_req_t *req, int nparts, int rail, struct ibv_send_wr *wr)
{
    memset(wr, 0, sizeof(*wr));
    wr->wr_id = (uintptr_t)req | VERBS_WR_DATA;
    wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->send_flags = IBV_SEND_SIGNALED;
    wr->imm_data = htonl(uccl_rndv_imm(req, nparts));
    uccl_verbs_remote_at(req, 0, rail, &wr->wr.rdma.remote_addr, &wr->wr.rdma.rkey, &(uint64_t){0});
}

/* The QP for req's next work request: round robin for data, then each QP
 * still owed an immediate (req->tp_data[VERBS_RD_QPS] high half). */
static tp_verbs_qp_t *verbs_next_qp(tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    uint32_t owed = (uint32_t)(req->tp_data[VERBS_RD_QPS] >> 32);
    int bit;

    if (req->tp_data[VERBS_RD_OFF] < req->len)
        return verbs_pick_qp(ep, req);
    bit = __builtin_ctz(owed);
    return bit == VERBS_IMM_CTRL_BIT ? &ep->ctrl : &ep->data[bit];
}

/* Build req's next work request for q into the batch: a data chunk (the last
 * one a WRITE_WITH_IMM when req needs immediates) or an owed immediate.
 * UCCL_OK: built (*buf: the stage buffer it reads, or NULL); UCCL_INPROGRESS:
 * its staged data is not ready yet; else req failed. */
static uccl_status_t verbs_build_next(tp_verbs_ep_t *ep, uccl_req_t *req, tp_verbs_qp_t *q,
                                      struct ibv_send_wr *wr, struct ibv_sge *sge,
                                      uccl_stage_buf_t **buf)
{
    uint64_t qps = req->tp_data[VERBS_RD_QPS], bit = 1ull << verbs_qp_bit(ep, q);
    int nparts, extra;
    size_t chunk;
    uccl_status_t st;

    *buf = NULL;
    if (req->tp_data[VERBS_RD_OFF] >= req->len) { /* an owed immediate */
        verbs_build_imm_only(req, __builtin_popcount((uint32_t)qps), q->rail, wr);
        req->tp_data[VERBS_RD_QPS] = qps & ~(bit << 32);
        return UCCL_OK;
    }
    st = verbs_build_chunk(ep, req, q->rail, wr, sge, &chunk, buf);
    if (st == UCCL_INPROGRESS)
        return st;
    if (st != UCCL_OK) { /* remote pieces shorter than the message, a staging copy failed */
        uccl_rndv_req_error(req, st == UCCL_ERR_TRANSPORT || st == UCCL_ERR_NO_MEMORY
                                     ? st : UCCL_ERR_TRANSPORT);
        return st;
    }
    req->tp_data[VERBS_RD_OFF] += chunk;
    if (verbs_req_windowed(req)) { /* the window's last bytes close it */
        int slot;

        if (uccl_rndv_grants_advance(tp_verbs_xfer(req)->staged.grants, req->tp_data[VERBS_RD_OFF],
                                     &slot)) {
            wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr->imm_data = htonl(uccl_rndv_imm_chunk(req, slot));
        }
        return UCCL_OK;
    }
    qps |= bit;
    req->tp_data[VERBS_RD_QPS] = qps;
    if (req->tp_data[VERBS_RD_OFF] < req->len || !uccl_rndv_needs_imm(req) ||
        uccl_verbs_req_noimm(req))
        return UCCL_OK;
    nparts = __builtin_popcount((uint32_t)qps);
    if (uccl_rndv_imm_begin(&ep->rndv, req, nparts, &extra) != UCCL_OK) {
        uccl_rndv_req_error(req, UCCL_ERR_NO_MEMORY);
        req->tp_data[VERBS_RD_OFF] -= chunk;
        if (*buf != NULL) /* not posted after all */
            uccl_stage_buf_put(ep->tp->stage, *buf);
        *buf = NULL;
        return UCCL_ERR_NO_MEMORY;
    }
    req->tp_data[VERBS_RD_WRS] += (uint64_t)extra; /* a NOTIFY counts as one of req's parts */
    wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->imm_data = htonl(uccl_rndv_imm(req, nparts));
    req->tp_data[VERBS_RD_QPS] = qps | (qps & ~bit) << 32;
    return UCCL_OK;
}

static size_t verbs_wr_bytes(const struct ibv_send_wr *wr)
{
    size_t n = 0;

    for (int i = 0; i < wr->num_sge; i++)
        n += wr->sg_list[i].length;
    return n;
}

bool uccl_verbs_req_has_work(const uccl_req_t *req)
{
    return req->tp_data[UCCL_RNDV_RD_ERR] == 0 &&
           !(req->tp_data[VERBS_RD_RAILS] & VERBS_RAILS_RESTART) &&
           (req->tp_data[VERBS_RD_OFF] < req->len || (req->tp_data[VERBS_RD_QPS] >> 32) != 0);
}

/* Post work requests of the pending requests, in order, while the send
 * queues have room; the rest waits for the next progress. */
void uccl_verbs_post_pending(tp_verbs_ep_t *ep)
{
    verbs_batch_t b;
    uccl_list_t *pos, *tmp;
    uccl_stage_buf_t *buf;
    uccl_status_t st;

    b.n = 0;
    uccl_list_for_each_safe(pos, tmp, &ep->data_pending) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, tp_link);

        while (uccl_verbs_req_has_work(req)) {
            tp_verbs_qp_t *q = verbs_next_qp(ep, req);
            bool data = req->tp_data[VERBS_RD_OFF] < req->len;

            /* a bound on the bytes in flight per QP: a lost packet makes an
             * RC QP resend everything posted after it (go-back-N), so what
             * one loss costs stays small (Soft-RoCE under load lost one
             * packet in 260,000 and resent 64 MiB, a quarter of the run) */
            if (q->outstanding >= ep->tp->cfg.tx_depth || (data && !verbs_qp_room(ep, q)))
                goto flush;
            if (b.n == VERBS_BATCH && verbs_batch_flush(ep, &b) != UCCL_OK)
                return;
            st = verbs_build_next(ep, req, q, &b.wr[b.n], b.sge[b.n], &buf);
            if (st == UCCL_INPROGRESS) /* staged data still copying: requests stay in order */
                goto flush;
            if (st != UCCL_OK)
                break;
            req->tp_data[VERBS_RD_WRS]++;
            q->outstanding++;
            uccl_verbs_qp_held_push(ep->tp, q, buf, verbs_wr_bytes(&b.wr[b.n]));
            b.qp[b.n++] = q;
            /* a window stays on its QP: its immediate follows its data there */
            if (data && q != &ep->ctrl &&
                (!verbs_req_windowed(req) || b.wr[b.n - 1].opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
                ep->next_qp = (ep->next_qp + 1) % ep->nq;
        }
        uccl_list_del(&req->tp_link);
        uccl_list_push_back(&ep->inflight, &req->tp_link);
        if (req->tp_data[VERBS_RD_WRS] == 0) /* failed before posting anything */
            uccl_rndv_write_done(&ep->rndv, req);
    }
flush:
    verbs_batch_flush(ep, &b);
}

void uccl_verbs_data_start(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_DATA;
    req->tp_data[VERBS_RD_OFF] = 0;
    req->tp_data[VERBS_RD_WRS] = 0;
    req->tp_data[VERBS_RD_QPS] = 0;
    req->tp_data[VERBS_RD_RAILS] = uccl_verbs_req_rails(ep, req);
    if (req->tp_data[VERBS_RD_RAILS] == 0) /* every rail it may use failed */
        uccl_rndv_req_error(req, UCCL_ERR_PEER_FAILED);
    if ((req->len == 0 && !uccl_rndv_needs_imm(req)) || req->tp_data[VERBS_RD_RAILS] == 0) {
        uccl_rndv_write_done(&ep->rndv, req);
        return;
    }
    if (req->len == 0) { /* a write_notify of no bytes: one bare immediate carries it */
        uint64_t bit = 1ull << verbs_qp_bit(ep, verbs_pick_qp(ep, req));
        int extra;

        if (uccl_rndv_imm_begin(&ep->rndv, req, 1, &extra) != UCCL_OK) {
            uccl_rndv_req_error(req, UCCL_ERR_NO_MEMORY);
            uccl_rndv_write_done(&ep->rndv, req);
            return;
        }
        req->tp_data[VERBS_RD_WRS] = (uint64_t)extra; /* a NOTIFY counts as one part */
        req->tp_data[VERBS_RD_QPS] = bit | bit << 32; /* one lane, owed its immediate */
    }
    uccl_list_push_back(&ep->data_pending, &req->tp_link);
    uccl_verbs_post_pending(ep);
}

static uccl_status_t verbs_post_rma(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    uccl_status_t st = uccl_verbs_check_local(ep, req);

    if (st == UCCL_OK)
        st = uccl_verbs_check_remote(ep, req);
    if (st != UCCL_OK)
        return st;
    /* local GPU pieces without GPUDirect: a write reads them through a
     * source pipeline, a read lands in the windows of a sink */
    if (req->len > 0 && uccl_verbs_req_staged(ep, req)) {
        st = uccl_verbs_xfer_stage(ep, req, req->len, req->op == UCCL_OP_WRITE);
        if (st != UCCL_OK) {
            uccl_verbs_xfer_release(req);
            return st;
        }
    }
    uccl_verbs_data_start(ep, req);
    return UCCL_OK;
}

uccl_status_t uccl_verbs_post_write(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return verbs_post_rma(base, req);
}

uccl_status_t uccl_verbs_post_read(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;

    if (ep->tp->uc) {
        uccl_error("verbs: RDMA READ needs RC QPs; this engine uses UC (UCCL_VERBS_QP_TYPE=uc)");
        return UCCL_ERR_UNSUPPORTED;
    }
    return verbs_post_rma(base, req);
}

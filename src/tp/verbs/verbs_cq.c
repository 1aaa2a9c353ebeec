/* Verbs data path, completions: polling each rail's CQ, mapping a work
 * completion's status to the connection's, finishing the requests whose
 * work requests are all done, and the transport's progress. */
#include <arpa/inet.h>

#include "verbs.h"

#define VERBS_POLL 32

static uccl_status_t verbs_wc_status(tp_verbs_ep_t *ep, const struct ibv_wc *wc)
{
    uccl_conn_t *conn = ep->base.conn;
    uccl_status_t st;

    if (wc->status == IBV_WC_SUCCESS)
        return UCCL_OK;
    if (wc->status == IBV_WC_WR_FLUSH_ERR) { /* the QP already failed; said once */
        uccl_debug("%s: work request flushed on QP %u", ep->tp->dev_name, wc->qp_num);
        if (uccl_conn_status(conn) != UCCL_OK)
            return uccl_conn_status(conn);
        /* our QP went to error without an error of our own: the responder
         * side of a refused access (RC moves both ends of the QP to error
         * on a bad rkey, e.g. a peer writing to a region deregistered here) */
        uccl_error("%s: QP %u went to error with no failed request of ours: a peer's one-sided "
                   "access into this engine was refused (deregistered region?); an RC "
                   "connection cannot go on after it, resetting it", ep->tp->dev_name, wc->qp_num);
        uccl_conn_fail(conn, UCCL_ERR_REMOTE_ACCESS);
        return UCCL_ERR_REMOTE_ACCESS;
    }
    switch (wc->status) {
    case IBV_WC_REM_ACCESS_ERR: st = UCCL_ERR_REMOTE_ACCESS; break;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: st = UCCL_ERR_PEER_FAILED; break;
    default: st = UCCL_ERR_TRANSPORT; break;
    }
    uccl_error("%s: completion error on QP %u (opcode %d): %s (vendor error 0x%x)", ep->tp->dev_name,
               wc->qp_num, (int)wc->opcode, ibv_wc_status_str(wc->status), wc->vendor_err);
    /* the QP is in error now: its connection cannot go on; it reports why
     * (REMOTE_ACCESS: the peer refused our key, PEER_FAILED: no answer) */
    uccl_conn_fail(conn, st);
    return st;
}

/* QP numbers are per device: the one of rail's CQ. */
tp_verbs_qp_t *uccl_verbs_find_qp(tp_verbs_ep_t *ep, int rail, uint32_t qp_num)
{
    if (rail == 0 && ep->ctrl.qp->qp_num == qp_num)
        return &ep->ctrl;
    if (rail == 1 && ep->ctrl2.qp != NULL && ep->ctrl2.qp->qp_num == qp_num)
        return &ep->ctrl2;
    for (int i = 0; i < ep->nq; i++)
        if (ep->data[i].rail == rail && ep->data[i].qp->qp_num == qp_num)
            return &ep->data[i];
    return NULL;
}

/* One of req's work requests completed. */
void uccl_verbs_data_wc(tp_verbs_ep_t *ep, uccl_req_t *req, uccl_status_t st)
{
    if (st != UCCL_OK)
        uccl_rndv_req_error(req, st);
    req->tp_data[VERBS_RD_WRS]--;
    if (req->tp_data[VERBS_RD_WRS] > 0)
        return;
    if (req->tp_data[UCCL_RNDV_RD_ERR] == 0 && (req->tp_data[VERBS_RD_RAILS] & VERBS_RAILS_RESTART) &&
        uccl_verbs_req_restart(ep, req))
        return; /* progress posts it again */
    if (uccl_verbs_req_has_work(req))
        return; /* more work requests wait in data_pending */
    if (req->tp_data[UCCL_RNDV_RD_ERR] == 0 && tp_verbs_xfer(req) != NULL &&
        tp_verbs_xfer(req)->staged.sink != NULL &&
        uccl_rndv_sink_copying(tp_verbs_xfer(req)->staged.sink))
        return; /* a read whose last windows still copy: verbs_sink_copied ends it */
    uccl_list_del(&req->tp_link);
    if (req->tp_data[UCCL_RNDV_RD_ERR] == 0 && uccl_verbs_req_noimm(req))
        uccl_rndv_write_close(&ep->rndv, req); /* its data went again without immediates */
    else
        uccl_rndv_write_done(&ep->rndv, req);
}

static void verbs_handle_wc(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc)
{
    uccl_status_t st;
    int kind = (int)(wc->wr_id & 7);
    tp_verbs_qp_t *q;

    if (wc->status != IBV_WC_SUCCESS && uccl_verbs_rail_failover(ep, rail, wc))
        return;
    st = verbs_wc_status(ep, wc);

    switch (kind) {
    case VERBS_WR_CTRL_RECV:
        if (st != UCCL_OK)
            return;
        if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
            uccl_verbs_ctrl_in(ep, wc); /* numbered: verbs_ctrl.c */
            return;
        }
        if (uccl_verbs_post_ctrl_recv(ep, (int)(wc->wr_id >> 3)) != UCCL_OK)
            uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        uccl_rndv_imm_arrived(&ep->rndv, ntohl(wc->imm_data));
        return;
    case VERBS_WR_IMM_RECV:
        if (st != UCCL_OK)
            return;
        if (uccl_verbs_post_imm_recv(ep, (int)(wc->wr_id >> 3)) != UCCL_OK)
            uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        uccl_rndv_imm_arrived(&ep->rndv, ntohl(wc->imm_data));
        return;
    case VERBS_WR_CTRL_SEND:
        uccl_verbs_ctrl_sent(ep, rail, wc, st);
        return;
    case VERBS_WR_SINK: {
        uccl_rndv_slot_t *slot = (uccl_rndv_slot_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)7);
        uccl_req_t *req = slot->sink->req;

        q = uccl_verbs_find_qp(ep, rail, wc->qp_num);
        if (q != NULL) {
            q->outstanding--;
            uccl_verbs_qp_held_pop(ep->tp, q);
        }
        uccl_rndv_sink_landed(slot->sink, slot->index, st); /* its copy starts */
        uccl_verbs_data_wc(ep, req, st);
        return;
    }
    case VERBS_WR_DATA:
        q = uccl_verbs_find_qp(ep, rail, wc->qp_num);
        if (q != NULL) {
            q->outstanding--;
            uccl_verbs_qp_held_pop(ep->tp, q); /* its stage buffer, if any, is free again */
        }
        uccl_verbs_data_wc(ep, (uccl_req_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)7), st);
        return;
    }
    uccl_error("verbs: completion with unknown wr_id 0x%llx (internal error)",
               (unsigned long long)wc->wr_id);
}

static int verbs_poll_ep(tp_verbs_ep_t *ep)
{
    struct ibv_wc wc[VERBS_POLL];
    int events = 0, n;

    for (int r = 0; r < ep->nrails; r++) {
        for (int round = 0; round < 8; round++) {
            n = ibv_poll_cq(ep->cq[r], VERBS_POLL, wc);
            if (n < 0) {
                uccl_error("%s: ibv_poll_cq failed", ep->tp->rails[r].dev_name);
                uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
                return events;
            }
            for (int i = 0; i < n; i++)
                verbs_handle_wc(ep, r, &wc[i]);
            events += n;
            if (n < VERBS_POLL)
                break;
        }
    }
    return events;
}

int uccl_verbs_progress(uccl_tp_t *tp)
{
    tp_verbs_t *v = (tp_verbs_t *)tp;
    uccl_list_t *pos;
    int events = v->stage != NULL ? uccl_stage_progress(v->stage) : 0;

    uccl_list_for_each(pos, &v->eps) {
        tp_verbs_ep_t *ep = uccl_container_of(pos, tp_verbs_ep_t, link);

        if (!ep->connected)
            continue;
        events += verbs_poll_ep(ep);
        if (uccl_conn_status(ep->base.conn) != UCCL_OK)
            continue;
        uccl_rndv_ctrl_flush(&ep->rndv);
        if (!uccl_list_empty(&ep->data_pending))
            uccl_verbs_post_pending(ep);
    }
    return events;
}

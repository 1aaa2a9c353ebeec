/* Verbs rails: which rails a request may stripe over, and failover when a
 * rail fails under a transfer (one-sided or two-sided; rail 0's control
 * channel moves in verbs_ctrl.c) (the device choice is in verbs.c, the QPs
 * of each rail in verbs_ep.c, the striping in verbs_data.c), and the remote
 * address and rail key of each piece of a request. */
#include <string.h>

#include "verbs.h"

/* The rails req may use, of those alive: every rail of the connection for
 * a large request whose local pieces are registered on them and whose
 * remote side gave their keys; one rail for small ones (rail 0, or the first
 * one left once it failed); rail 0 alone for staged GPU data and granted
 * windows (their buffers are registered on rail 0 only). 0: none left. */
uint64_t uccl_verbs_req_rails(const tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    const tp_verbs_xfer_t *x = tp_verbs_xfer(req);
    uint64_t rails = (1ull << ep->nrails) - 1;

    if (ep->nrails == 1 ||
        (x != NULL && (x->staged.src != NULL || x->staged.sink != NULL || x->staged.grants != NULL)))
        return 1 & ~(uint64_t)ep->dead_rails;
    for (int i = 0; i < req->iovcnt; i++) {
        const uccl_tp_memh_t *memh;

        if (req->iov[i].len == 0)
            continue;
        memh = uccl_region_memh(req->iov[i].region, &ep->tp->base);
        for (int r = 1; r < ep->nrails; r++)
            if (memh == NULL || tp_verbs_memh_mr(memh, r) == NULL)
                rails &= ~(1ull << r);
    }
    if (x != NULL && x->nseg > 0) {
        for (uint64_t i = 0; i < x->nseg; i++)
            if ((x->segs[i].key >> 32) == 0) /* no rail 1 key */
                rails &= 1;
    } else if (req->op == UCCL_OP_WRITE || req->op == UCCL_OP_READ) {
        rails &= (1ull << (req->remote.rkey_len / VERBS_RKEY_SIZE)) - 1;
    }
    rails &= ~(uint64_t)ep->dead_rails;
    if (req->len < ep->tp->cfg.stripe)
        rails &= -rails; /* the first one */
    return rails;
}

/* A request whose rail failed under it starts over on the rails left, once
 * its last work request is back: its bytes are written or read again (the
 * same bytes to the same place). A send or notified write whose immediates
 * were not posted yet (they go with its last chunk) has told the target
 * nothing: it simply starts over. One whose immediates were posted may have
 * had some counted there: it goes again without them (VERBS_RAILS_NOIMM) and
 * a control message on the control QP closes it (uccl_rndv_write_close: FIN
 * with the length, or a closing NOTIFY), sent once every byte is acked.
 * false: no rail it may use is left; req failed (PEER_FAILED). */
bool uccl_verbs_req_restart(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    uint64_t noimm = req->tp_data[VERBS_RD_RAILS] & VERBS_RAILS_NOIMM;
    uint64_t rails = req->tp_data[VERBS_RD_RAILS] & ~(VERBS_RAILS_RESTART | VERBS_RAILS_NOIMM |
                                                      ep->dead_rails);

    if (rails == 0) /* e.g. a small request on rail 0: the first rail left */
        rails = uccl_verbs_req_rails(ep, req);
    if (rails == 0) {
        req->tp_data[VERBS_RD_RAILS] &= ~VERBS_RAILS_RESTART;
        uccl_rndv_req_error(req, UCCL_ERR_PEER_FAILED);
        return false;
    }
    rails |= noimm;
    if (uccl_rndv_needs_imm(req) && req->tp_data[VERBS_RD_OFF] >= req->len)
        rails |= VERBS_RAILS_NOIMM;
    uccl_debug("%s: request %p (%zu bytes) starts over on rails 0x%x%s", ep->tp->dev_name,
               (void *)req, req->len, (unsigned)(rails & 0xffff),
               rails & VERBS_RAILS_NOIMM ? ", closed by a control message" : "");
    req->tp_data[VERBS_RD_RAILS] = rails;
    req->tp_data[VERBS_RD_OFF] = 0;
    req->tp_data[VERBS_RD_QPS] = 0;
    uccl_list_del(&req->tp_link);
    uccl_list_push_back(&ep->data_pending, &req->tp_link);
    return true;
}

bool uccl_verbs_req_noimm(const uccl_req_t *req)
{
    return (req->tp_data[VERBS_RD_RAILS] & VERBS_RAILS_NOIMM) != 0;
}

/* Errors that say the path is gone (no answer, QP broken), not that the
 * request was wrong: those fail over; an access or length error would
 * fail on every rail alike. */
static bool verbs_path_error(enum ibv_wc_status st)
{
    return st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR ||
           st == IBV_WC_WR_FLUSH_ERR || st == IBV_WC_LOC_QP_OP_ERR ||
           st == IBV_WC_RESP_TIMEOUT_ERR || st == IBV_WC_FATAL_ERR || st == IBV_WC_GENERAL_ERR;
}

/* A rail just found dead: its data QPs go to the error state, so every work
 * request still on them comes back flushed now. A request starts over only
 * once all its work requests are back; waiting instead for each QP's own
 * retries took tens of seconds, and rxe sometimes never returned one (a
 * write timed out). The control QPs are left alone: the live one carries
 * on, and a dead one's receives come back as its sends fail. */
static void verbs_rail_flush(tp_verbs_ep_t *ep, int rail)
{
    struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};

    for (int i = 0; i < ep->nq; i++) {
        int rc;

        if (ep->data[i].rail != rail || ep->data[i].qp == NULL)
            continue;
        rc = ibv_modify_qp(ep->data[i].qp, &attr, IBV_QP_STATE);
        uccl_debug("%s: QP %u to the error state, %d work request(s) on it to come back",
                   ep->tp->rails[rail].dev_name, ep->data[i].qp->qp_num, ep->data[i].outstanding);
        if (rc != 0)
            uccl_debug("%s: QP %u to the error state: %s", ep->tp->rails[rail].dev_name,
                       ep->data[i].qp->qp_num, strerror(rc));
    }
}

static void verbs_rail_dead(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc)
{
    if (ep->dead_rails >> rail & 1)
        return;
    uccl_error("%s: rail %d failed (%s on QP %u): its transfers start over on the rails left",
               ep->tp->rails[rail].dev_name, rail, ibv_wc_status_str(wc->status), wc->qp_num);
    ep->dead_rails |= 1u << rail;
    verbs_rail_flush(ep, rail);
}

/* Failover: a path error on a rail's QP marks the rail dead instead of
 * failing the connection, and nothing new goes there. On rail 0 the control
 * channel first moves to rail 1 (uccl_verbs_ctrl_move; with nowhere to go
 * the connection fails, PEER_FAILED, as before). A request that had work on
 * the rail (a write, read, rendezvous send or notified write) starts over
 * on the rails left (uccl_verbs_req_restart); the dead QPs' flushed
 * receives are dropped, their control sends went again on rail 1. Staged
 * GPU data and granted windows live on rail 0 only: a failure there fails
 * the connection. Any error that is not a path's fails it too. true:
 * handled here. */
bool uccl_verbs_rail_failover(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc)
{
    int kind = (int)(wc->wr_id & 7);
    uccl_req_t *req = (uccl_req_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)7);
    tp_verbs_qp_t *q;

    if (!verbs_path_error(wc->status) || uccl_conn_status(ep->base.conn) != UCCL_OK)
        return false;
    /* a dead path shows first as a failed work request of ours (no ack);
     * a flush on a rail still alive is our QP put in error by the peer's
     * refused access (RC): verbs_cq.c resets the connection for it */
    if (wc->status == IBV_WC_WR_FLUSH_ERR && !(ep->dead_rails >> rail & 1))
        return false;
    if (rail == 0 && !uccl_verbs_ctrl_move(ep))
        return false;
    q = uccl_verbs_find_qp(ep, rail, wc->qp_num);
    if (kind == VERBS_WR_CTRL_SEND || kind == VERBS_WR_CTRL_RECV) {
        if (q == NULL || q == ep->ctl) /* the live control QP: nothing left */
            return false;
        verbs_rail_dead(ep, rail, wc);
        if (kind == VERBS_WR_CTRL_SEND)
            q->outstanding--; /* its slot went again on the live control QP */
        return true;
    }
    if (kind == VERBS_WR_IMM_RECV) {
        verbs_rail_dead(ep, rail, wc);
        return true;
    }
    /* granted windows and staged data never leave rail 0 (uccl_verbs_req_rails) */
    if (kind != VERBS_WR_DATA || q == NULL || q == &ep->ctrl || req->tp_data[UCCL_RNDV_RD_ERR] != 0 ||
        (tp_verbs_xfer(req) != NULL && (tp_verbs_xfer(req)->staged.grants != NULL ||
                                        tp_verbs_xfer(req)->staged.src != NULL)))
        return false;
    verbs_rail_dead(ep, rail, wc);
    q->outstanding--;
    uccl_verbs_qp_held_pop(ep->tp, q);
    req->tp_data[VERBS_RD_RAILS] |= VERBS_RAILS_RESTART;
    uccl_verbs_data_wc(ep, req, UCCL_OK);
    return true;
}

/* Remote address, rail's key and bytes left in that remote piece at byte
 * off (a send on granted windows: in the oldest window not written yet; none
 * left: 0 bytes). A rendezvous piece's 64-bit key holds rail 0's rkey low and
 * rail 1's high (verbs_mem_segs); a descriptor one rkey per rail. */
void uccl_verbs_remote_at(const uccl_req_t *req, size_t off, int rail, uint64_t *addr,
                          uint32_t *rkey, uint64_t *left)
{
    const tp_verbs_xfer_t *x = tp_verbs_xfer(req);

    *addr = 0;
    *rkey = 0;
    *left = 0;
    if (x != NULL && x->staged.grants != NULL) {
        uint64_t key;

        uccl_rndv_grants_at(x->staged.grants, off, addr, &key, left);
        *rkey = (uint32_t)key;
        return;
    }
    if (x == NULL || x->nseg == 0) {
        *addr = req->remote.addr + off;
        *rkey = uccl_get_u32(req->remote.rkey + 4 * rail); /* uccl_verbs_check_remote saw it */
        *left = req->len - off;
        return;
    }
    for (uint64_t i = 0; i < x->nseg; i++) {
        if (off < x->segs[i].len) {
            *addr = x->segs[i].addr + off;
            *rkey = (uint32_t)(x->segs[i].key >> (32 * rail));
            *left = x->segs[i].len - off;
            return;
        }
        off -= x->segs[i].len;
    }
}

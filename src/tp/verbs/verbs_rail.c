/* Verbs rails: which rails a request may stripe over, and failover when a
 * rail past the first fails under a transfer (one-sided or two-sided) (the device choice is in
 * verbs.c, the QPs of each rail in verbs_ep.c, the striping in verbs_data.c),
 * and the remote address and rail key of each piece of a request. */
#include "verbs.h"

/* The rails req may use: every rail of the connection for a large request
 * whose local pieces are registered on them and whose remote side gave their
 * keys; rail 0 alone for small ones and for staged GPU data and granted
 * windows (their buffers are registered on rail 0 only). */
uint64_t uccl_verbs_req_rails(const tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    const tp_verbs_xfer_t *x = tp_verbs_xfer(req);
    uint64_t rails = (1ull << ep->nrails) - 1;

    if (ep->nrails == 1 || req->len < ep->tp->cfg.stripe ||
        (x != NULL && (x->staged.src != NULL || x->staged.sink != NULL || x->staged.grants != NULL)))
        return 1;
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
    return rails != 0 ? rails : 1;
}

/* A request whose rail failed under it starts over on the rails left, once
 * its last work request is back: its bytes are written or read again (the
 * same bytes to the same place). A send or notified write whose immediates
 * were not posted yet (they go with its last chunk) has told the target
 * nothing: it simply starts over. One whose immediates were posted may have
 * had some counted there: it goes again without them (VERBS_RAILS_NOIMM) and
 * a control message on the control QP closes it (uccl_rndv_write_close: FIN
 * with the length, or a closing NOTIFY), sent once every byte is acked. */
void uccl_verbs_req_restart(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    uint64_t rails = req->tp_data[VERBS_RD_RAILS] & ~(VERBS_RAILS_RESTART | ep->dead_rails);

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

static void verbs_rail_dead(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc)
{
    if (!(ep->dead_rails >> rail & 1))
        uccl_error("%s: rail %d failed (%s on QP %u): its transfers start over on the rails left",
                   ep->tp->rails[rail].dev_name, rail, ibv_wc_status_str(wc->status), wc->qp_num);
    ep->dead_rails |= 1u << rail;
}

/* Failover: a path error on a data QP of a rail past the first marks the
 * rail dead instead of failing the connection, and nothing new goes there.
 * A request that had work on it (a write, read, rendezvous send or notified
 * write) starts over on the rails left (uccl_verbs_req_restart); the dead
 * QPs' flushed receives are dropped. Rail 0 carries the control QP: its
 * failure fails the connection (PEER_FAILED), as does any error that is not
 * a path's. true: handled here. */
bool uccl_verbs_rail_failover(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc)
{
    int kind = (int)(wc->wr_id & 7);
    uccl_req_t *req = (uccl_req_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)7);
    tp_verbs_qp_t *q;

    if (rail == 0 || !verbs_path_error(wc->status) || uccl_conn_status(ep->base.conn) != UCCL_OK)
        return false;
    if (kind == VERBS_WR_IMM_RECV) {
        verbs_rail_dead(ep, rail, wc);
        return true;
    }
    q = uccl_verbs_find_qp(ep, rail, wc->qp_num);
    /* granted windows and staged data never leave rail 0 (uccl_verbs_req_rails) */
    if (kind != VERBS_WR_DATA || q == NULL || q == &ep->ctrl || req->tp_data[UCCL_RNDV_RD_ERR] != 0 ||
        (tp_verbs_xfer(req) != NULL && tp_verbs_xfer(req)->staged.grants != NULL))
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

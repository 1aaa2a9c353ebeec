/* Verbs endpoints: one RC control QP on rail 0 (and one on rail 1 for the
 * control channel's failover, verbs_ctrl.c) plus N data QPs (RC or UC) on
 * each rail per connection, their wiring info (QPN, PSN, GID, LID, MTU) and
 * teardown. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* ep_pack: version(1) uc(1) nq(1) mtu(1) roce(1) rndv version(1) lid(2) gid(16), then
 * (1 + nq) x { qpn(4) psn(4) }, control QP first, then rails(1) and for each
 * rail past the first { mtu(1) lid(2) gid(16) ctrl qpn(4) psn(4) } (qpn 0: no control QP
 * there). */
#define VERBS_EP_HDR 24
#define VERBS_EP_RAIL 27

static uccl_status_t verbs_create_qp(tp_verbs_ep_t *ep, tp_verbs_qp_t *q, int rail, bool uc,
                                     int recv_depth)
{
    tp_verbs_t *v = ep->tp;
    const tp_verbs_rail_t *r = &v->rails[rail];
    struct ibv_qp_init_attr init = {
        .send_cq = ep->cq[rail],
        .recv_cq = ep->cq[rail],
        .cap = {.max_send_wr = (uint32_t)v->cfg.tx_depth, .max_recv_wr = (uint32_t)(recv_depth ? recv_depth : 1),
                .max_send_sge = (uint32_t)v->max_sge, .max_recv_sge = 1},
        .qp_type = uc ? IBV_QPT_UC : IBV_QPT_RC,
    };
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .port_num = r->port,
        .qp_access_flags = uc ? IBV_ACCESS_REMOTE_WRITE
                              : IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };

    q->rail = rail;
    q->qp = ibv_create_qp(r->pd, &init);
    if (q->qp == NULL) {
        uccl_error("%s: ibv_create_qp: %s", r->dev_name, strerror(errno));
        return UCCL_ERR_TRANSPORT;
    }
    if (ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_ACCESS_FLAGS) != 0) {
        uccl_error("%s: QP to INIT: %s", r->dev_name, strerror(errno));
        ibv_destroy_qp(q->qp);
        q->qp = NULL;
        return UCCL_ERR_TRANSPORT;
    }
    q->psn = (uint32_t)uccl_random_u64() & 0xffffff;
    return UCCL_OK;
}

/* The control buffers, registered here and run by the protocol (rndv.h). */
static uccl_status_t verbs_alloc_bufs(tp_verbs_ep_t *ep)
{
    tp_verbs_t *v = ep->tp;
    int rx = uccl_verbs_ctrl_rx_depth(ep); /* both control QPs' receive buffers */
    size_t nslots = (size_t)rx + (size_t)v->cfg.tx_depth;
    size_t size = nslots * uccl_rndv_slot_size(v->cfg.eager);
    uccl_rndv_params_t params = {.eager = v->cfg.eager, .rx_depth = rx, .tx_depth = v->cfg.tx_depth};

    ep->bufs = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (ep->bufs == NULL)
        return UCCL_ERR_NO_MEMORY;
    params.bufs = ep->bufs;
    if (uccl_rndv_init(&ep->rndv, &uccl_verbs_rndv_ops, &ep->base, &params) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    ep->bufs_mr = ibv_reg_mr(v->pd, ep->bufs, size, IBV_ACCESS_LOCAL_WRITE);
    if (ep->bufs_mr == NULL) {
        uccl_error("%s: registering control buffers: %s", v->dev_name, strerror(errno));
        return UCCL_ERR_TRANSPORT;
    }
    if (rx > v->cfg.rx_depth) { /* rail 1's control QP reads and fills them too */
        ep->bufs_mr2 = ibv_reg_mr(v->rails[1].pd, ep->bufs, size, IBV_ACCESS_LOCAL_WRITE);
        if (ep->bufs_mr2 == NULL) {
            uccl_error("%s: registering control buffers: %s", v->rails[1].dev_name, strerror(errno));
            return UCCL_ERR_TRANSPORT;
        }
    }
    return uccl_verbs_ctrl_init(ep);
}

/* Receive buffer index: the first rx_depth on rail 0's control QP, the
 * others on rail 1's. */
uccl_status_t uccl_verbs_post_ctrl_recv(tp_verbs_ep_t *ep, int index)
{
    bool rail1 = index >= ep->tp->cfg.rx_depth;
    struct ibv_sge sge = {
        .addr = (uintptr_t)uccl_rndv_recv_buf(&ep->rndv, index),
        .length = (uint32_t)ep->rndv.slot_size,
        .lkey = (rail1 ? ep->bufs_mr2 : ep->bufs_mr)->lkey,
    };
    struct ibv_recv_wr wr = {.wr_id = ((uint64_t)index << 3) | VERBS_WR_CTRL_RECV, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int rc = ibv_post_recv((rail1 ? &ep->ctrl2 : &ep->ctrl)->qp, &wr, &bad);

    if (rc != 0) {
        uccl_error("%s: ibv_post_recv: %s", ep->tp->dev_name, strerror(rc));
        return UCCL_ERR_TRANSPORT;
    }
    return UCCL_OK;
}

/* A receive without buffer on a data QP: a WRITE_WITH_IMM consumes it to
 * report its immediate. rx_depth of them per QP, replenished as each
 * completes; a sender that outruns us meets RNR and retries (rnr_retry 7,
 * forever) on RC. Posted on UC QPs too, although today everything closed
 * by an immediate travels on RC (see verbs_pick_qp). */
uccl_status_t uccl_verbs_post_imm_recv(tp_verbs_ep_t *ep, int qp_index)
{
    struct ibv_recv_wr wr = {.wr_id = ((uint64_t)qp_index << 3) | VERBS_WR_IMM_RECV};
    struct ibv_recv_wr *bad;
    int rc;

    if (qp_index < 0 || qp_index >= ep->nq)
        return UCCL_ERR_TRANSPORT;
    rc = ibv_post_recv(ep->data[qp_index].qp, &wr, &bad);
    if (rc != 0) {
        uccl_error("%s: ibv_post_recv (immediates, QP %u): %s", ep->tp->dev_name,
                   ep->data[qp_index].qp->qp_num, strerror(rc));
        return UCCL_ERR_TRANSPORT;
    }
    return UCCL_OK;
}

static void verbs_ep_free(tp_verbs_ep_t *ep)
{
    for (int i = 0; i < ep->nq; i++)
        if (ep->data[i].qp != NULL)
            ibv_destroy_qp(ep->data[i].qp);
    if (ep->ctrl.qp != NULL)
        ibv_destroy_qp(ep->ctrl.qp);
    if (ep->ctrl2.qp != NULL)
        ibv_destroy_qp(ep->ctrl2.qp);
    for (int r = 0; r < VERBS_MAX_RAILS; r++)
        if (ep->cq[r] != NULL)
            ibv_destroy_cq(ep->cq[r]);
    /* the QPs are gone: the stage buffers their work requests read go back */
    uccl_verbs_qp_held_fini(ep->tp, &ep->ctrl);
    uccl_verbs_qp_held_fini(ep->tp, &ep->ctrl2);
    for (int i = 0; i < VERBS_MAX_QPS; i++)
        uccl_verbs_qp_held_fini(ep->tp, &ep->data[i]);
    if (ep->bufs_mr != NULL)
        ibv_dereg_mr(ep->bufs_mr);
    if (ep->bufs_mr2 != NULL)
        ibv_dereg_mr(ep->bufs_mr2);
    uccl_verbs_ctrl_fini(ep);
    free(ep->bufs);
    uccl_rndv_fini(&ep->rndv);
    free(ep);
}

static void verbs_ep_init_lists(tp_verbs_ep_t *ep)
{
    uccl_list_init(&ep->link);
    uccl_list_init(&ep->data_pending);
    uccl_list_init(&ep->inflight);
}

uccl_status_t uccl_verbs_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                 bool is_initiator, uccl_tp_ep_t **out)
{
    tp_verbs_t *v = (tp_verbs_t *)tp;
    tp_verbs_ep_t *ep = calloc(1, sizeof(*ep));
    int nq, cqe;
    uccl_status_t st = UCCL_OK;

    (void)is_initiator;
    if (ep == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->tp = v;
    ep->base.conn = conn;
    verbs_ep_init_lists(ep);
    /* NUM_QPS data QPs on each rail both sides have, VERBS_MAX_QPS in all */
    ep->nrails = uccl_verbs_peer_rails(v, peer);
    nq = v->cfg.num_qps * ep->nrails;
    nq = nq < VERBS_MAX_QPS ? nq : VERBS_MAX_QPS;
    cqe = (2 + nq) * (v->cfg.tx_depth + v->cfg.rx_depth) + 16; /* a control QP per rail */
    for (int r = 0; r < ep->nrails && st == UCCL_OK; r++) {
        ep->cq[r] = ibv_create_cq(v->rails[r].ctx, cqe, NULL, NULL, 0);
        if (ep->cq[r] == NULL) {
            uccl_error("%s: ibv_create_cq(%d): %s", v->rails[r].dev_name, cqe, strerror(errno));
            st = UCCL_ERR_TRANSPORT;
        }
    }
    if (st == UCCL_OK)
        st = verbs_alloc_bufs(ep);
    if (st == UCCL_OK)
        st = uccl_verbs_qp_held_init(v, &ep->ctrl);
    if (st == UCCL_OK)
        st = uccl_verbs_qp_held_init(v, &ep->ctrl2);
    for (int i = 0; i < nq && st == UCCL_OK; i++)
        st = uccl_verbs_qp_held_init(v, &ep->data[i]);
    if (st == UCCL_OK)
        st = verbs_create_qp(ep, &ep->ctrl, 0, false, v->cfg.rx_depth);
    if (st == UCCL_OK && ep->bufs_mr2 != NULL)
        st = verbs_create_qp(ep, &ep->ctrl2, 1, false, v->cfg.rx_depth);
    for (int i = 0; i < nq && st == UCCL_OK; i++, ep->nq++)
        st = verbs_create_qp(ep, &ep->data[i], i % ep->nrails, v->uc, v->cfg.rx_depth);
    for (int i = 0; i < uccl_verbs_ctrl_rx_depth(ep) && st == UCCL_OK; i++)
        st = uccl_verbs_post_ctrl_recv(ep, i);
    for (int q = 0; q < ep->nq && st == UCCL_OK; q++)
        for (int i = 0; i < v->cfg.rx_depth && st == UCCL_OK; i++)
            st = uccl_verbs_post_imm_recv(ep, q);
    if (st != UCCL_OK)
        goto err_free;
    uccl_list_push_back(&v->eps, &ep->link);
    *out = &ep->base;
    return UCCL_OK;

err_free:
    verbs_ep_free(ep);
    return st;
}

uccl_status_t uccl_verbs_ep_pack(uccl_tp_ep_t *base, void *buf, size_t *len)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    tp_verbs_t *v = ep->tp;
    size_t need = VERBS_EP_HDR + 8 * (size_t)(1 + ep->nq) + 1 + VERBS_EP_RAIL * (size_t)(ep->nrails - 1);
    uint8_t *p = buf;

    if (*len < need) {
        *len = need;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    memset(p, 0, VERBS_EP_HDR);
    p[0] = VERBS_WIRE_VERSION;
    p[1] = v->uc;
    p[2] = (uint8_t)ep->nq;
    p[3] = (uint8_t)v->mtu;
    p[4] = v->is_roce;
    p[5] = UCCL_RNDV_WIRE_VERSION;
    uccl_put_u16(p + 6, v->lid);
    memcpy(p + 8, v->gid.raw, 16);
    p += VERBS_EP_HDR;
    for (int i = -1; i < ep->nq; i++, p += 8) {
        const tp_verbs_qp_t *q = i < 0 ? &ep->ctrl : &ep->data[i];
        uccl_put_u32(p, q->qp->qp_num);
        uccl_put_u32(p + 4, q->psn);
    }
    *p++ = (uint8_t)ep->nrails;
    for (int r = 1; r < ep->nrails; r++, p += VERBS_EP_RAIL) {
        p[0] = (uint8_t)v->rails[r].mtu;
        uccl_put_u16(p + 1, v->rails[r].lid);
        memcpy(p + 3, v->rails[r].gid.raw, 16);
        uccl_put_u32(p + 19, r == 1 && ep->ctrl2.qp != NULL ? ep->ctrl2.qp->qp_num : 0);
        uccl_put_u32(p + 23, r == 1 ? ep->ctrl2.psn : 0);
    }
    *len = need;
    return UCCL_OK;
}

typedef struct verbs_peer_info {
    bool uc;
    int nq;
    int nrails;
    bool roce;
    enum ibv_mtu mtu[VERBS_MAX_RAILS]; /* per rail */
    uint16_t lid[VERBS_MAX_RAILS];
    union ibv_gid gid[VERBS_MAX_RAILS];
    const uint8_t *qps;
    const uint8_t *ctrl2; /* rail 1's control QP { qpn(4) psn(4) }, qpn 0: none */
} verbs_peer_info_t;

/* The one parser of a peer's wiring info. */
static uccl_status_t verbs_parse_peer(const tp_verbs_ep_t *ep, const uint8_t *p, size_t len,
                                      verbs_peer_info_t *info)
{
    const tp_verbs_t *v = ep->tp;

    if (len < VERBS_EP_HDR || p[0] != VERBS_WIRE_VERSION || p[5] != UCCL_RNDV_WIRE_VERSION) {
        uccl_error("verbs: malformed wiring info from peer (%zu bytes)", len);
        return UCCL_ERR_VERSION;
    }
    size_t qend;

    info->uc = p[1] != 0;
    info->nq = p[2];
    info->mtu[0] = (enum ibv_mtu)p[3];
    info->roce = p[4] != 0;
    info->lid[0] = uccl_get_u16(p + 6);
    memcpy(info->gid[0].raw, p + 8, 16);
    info->qps = p + VERBS_EP_HDR;
    info->ctrl2 = NULL;
    qend = VERBS_EP_HDR + 8 * (size_t)(1 + info->nq);
    info->nrails = len > qend ? p[qend] : 0;
    if (info->nrails < 1 || info->nrails > VERBS_MAX_RAILS ||
        len != qend + 1 + VERBS_EP_RAIL * (size_t)(info->nrails - 1)) {
        uccl_error("verbs: malformed wiring info from peer (%zu bytes, %d QPs)", len, info->nq);
        return UCCL_ERR_VERSION;
    }
    for (int r = 1; r < info->nrails; r++) {
        const uint8_t *q = p + qend + 1 + VERBS_EP_RAIL * (size_t)(r - 1);

        info->mtu[r] = (enum ibv_mtu)q[0];
        info->lid[r] = uccl_get_u16(q + 1);
        memcpy(info->gid[r].raw, q + 3, 16);
        if (r == 1)
            info->ctrl2 = q + 19;
    }
    for (int r = 0; r < info->nrails; r++) {
        if (info->mtu[r] < IBV_MTU_256 || info->mtu[r] > IBV_MTU_4096) {
            uccl_error("verbs: malformed wiring info from peer (rail %d mtu %d)", r, (int)info->mtu[r]);
            return UCCL_ERR_VERSION;
        }
    }
    if (info->nrails != ep->nrails) {
        uccl_error("verbs: peer wires %d rails, this side %d (both take the smaller of the "
                   "two address entries' counts): internal error", info->nrails, ep->nrails);
        return UCCL_ERR_VERSION;
    }
    if (info->uc != v->uc || info->nq != ep->nq || info->roce != v->is_roce) {
        uccl_error("verbs: peer uses %s x %d%s, this side %s x %d%s: set UCCL_VERBS_QP_TYPE and "
                   "UCCL_VERBS_NUM_QPS alike on both",
                   info->uc ? "UC" : "RC", info->nq, info->roce ? " (RoCE)" : " (IB)",
                   v->uc ? "UC" : "RC", ep->nq, v->is_roce ? " (RoCE)" : " (IB)");
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* INIT -> RTR -> RTS toward the peer's QP. */
static uccl_status_t verbs_connect_qp(tp_verbs_ep_t *ep, tp_verbs_qp_t *q, bool uc,
                                      const verbs_peer_info_t *info, const uint8_t *peer_qp)
{
    tp_verbs_t *v = ep->tp;
    const tp_verbs_rail_t *r = &v->rails[q->rail];
    enum ibv_mtu mtu = info->mtu[q->rail];
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = mtu < r->mtu ? mtu : r->mtu,
        .dest_qp_num = uccl_get_u32(peer_qp),
        .rq_psn = uccl_get_u32(peer_qp + 4),
        .max_dest_rd_atomic = (uint8_t)v->max_rd_atomic,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = info->lid[q->rail], .port_num = r->port, .is_global = r->is_roce},
    };
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

    if (r->is_roce) {
        attr.ah_attr.grh.dgid = info->gid[q->rail];
        attr.ah_attr.grh.sgid_index = (uint8_t)r->gid_index;
        attr.ah_attr.grh.hop_limit = 64;
    }
    if (!uc)
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (ibv_modify_qp(q->qp, &attr, mask) != 0) {
        uccl_error("%s: QP %u to RTR (peer QP %u): %s", r->dev_name, q->qp->qp_num,
                   attr.dest_qp_num, strerror(errno));
        return UCCL_ERR_UNREACHABLE;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = q->psn;
    attr.timeout = (uint8_t)v->cfg.ib_timeout;
    attr.retry_cnt = (uint8_t)v->cfg.retry_cnt;
    attr.rnr_retry = 7; /* infinite: a receiver short of buffers slows us, never fails us */
    attr.max_rd_atomic = (uint8_t)v->max_rd_atomic;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (!uc)
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    if (ibv_modify_qp(q->qp, &attr, mask) != 0) {
        uccl_error("%s: QP %u to RTS: %s", r->dev_name, q->qp->qp_num, strerror(errno));
        return UCCL_ERR_TRANSPORT;
    }
    return UCCL_OK;
}

uccl_status_t uccl_verbs_ep_connect(uccl_tp_ep_t *base, const void *peer_info, size_t len)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    verbs_peer_info_t info;
    uccl_status_t st = verbs_parse_peer(ep, peer_info, len, &info);

    if (st != UCCL_OK)
        return st;
    st = verbs_connect_qp(ep, &ep->ctrl, false, &info, info.qps);
    if (st == UCCL_OK && ep->ctrl2.qp != NULL) { /* both have one, or neither (same QP type, rails) */
        if (info.ctrl2 == NULL || uccl_get_u32(info.ctrl2) == 0) {
            uccl_error("verbs: peer has no control QP on rail 1 (internal error)");
            return UCCL_ERR_VERSION;
        }
        st = verbs_connect_qp(ep, &ep->ctrl2, false, &info, info.ctrl2);
    }
    for (int i = 0; i < ep->nq && st == UCCL_OK; i++)
        st = verbs_connect_qp(ep, &ep->data[i], ep->tp->uc, &info, info.qps + 8 * (size_t)(i + 1));
    if (st == UCCL_OK)
        ep->connected = true;
    return st;
}

void uccl_verbs_ep_destroy(uccl_tp_ep_t *base)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    uccl_conn_t *conn = base->conn;
    uccl_status_t reason = uccl_conn_status(conn) != UCCL_OK ? uccl_conn_status(conn) : UCCL_ERR_CANCELED;

    uccl_list_del(&ep->link);
    uccl_rndv_release(&ep->rndv, reason);
    /* every request still held ends with its own error when it had one (a
     * remote access error stays one), else the connection's, else canceled */
    uccl_rndv_fail_reqs(&ep->rndv, &ep->data_pending, reason);
    uccl_rndv_fail_reqs(&ep->rndv, &ep->inflight, reason);
    verbs_ep_free(ep);
}

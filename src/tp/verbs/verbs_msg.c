/* Verbs two-sided messages and the control channel: eager SENDs into
 * pre-posted buffers, rendezvous (RTS, CTS with the receive buffer, RDMA
 * writes closed by immediates), notifications; arrived messages go to the
 * core's (conn, tag) matching. */
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* A control message waiting for a send slot or a send queue credit. */
typedef struct tp_verbs_out {
    uccl_list_t link;
    uccl_req_t *req;
    size_t len;
    uint8_t buf[];
} tp_verbs_out_t;

/* A message held by the core's matching until a receive takes it. */
typedef struct tp_verbs_unexp {
    uccl_list_t link; /* ep->unexpected, to free at teardown */
    uccl_msg_t msg;
    bool rndv;
    uint64_t send_id;
    uint8_t data[];
} tp_verbs_unexp_t;

/* A notified write whose value or immediates are still on their way. */
typedef struct tp_verbs_notif {
    uccl_list_t link;
    uint32_t id;
    int nparts; /* 0 = no immediate seen yet */
    int got;
    bool have_value;
    uint64_t value;
} tp_verbs_notif_t;

static uint8_t *verbs_slot(tp_verbs_ep_t *ep, int index)
{
    return ep->bufs + (size_t)index * ep->slot_size;
}

static uint8_t *verbs_send_slot(tp_verbs_ep_t *ep, int slot)
{
    return verbs_slot(ep, ep->tp->cfg.rx_depth + slot);
}

static void verbs_put_hdr(uint8_t *p, int type, uccl_status_t status, uint64_t a, uint64_t b,
                          uint64_t c)
{
    memset(p, 0, 4);
    p[0] = (uint8_t)type;
    uccl_put_u32(p + 4, (uint32_t)(int32_t)status);
    uccl_put_u64(p + 8, a);
    uccl_put_u64(p + 16, b);
    uccl_put_u64(p + 24, c);
    uccl_put_u64(p + 32, 0);
}

/* EAGER and RTS carry the message number after the common header fields. */
static void verbs_put_msg_hdr(uint8_t *p, int type, const uccl_req_t *req, uint64_t c)
{
    verbs_put_hdr(p, type, UCCL_OK, req->tag, req->len, c);
    uccl_put_u64(p + 32, req->msg_seq);
}

/* ------------------------------------------------------------------ sending */

static void verbs_ctrl_post(tp_verbs_ep_t *ep, int slot, size_t len, uccl_req_t *req)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)verbs_send_slot(ep, slot),
        .length = (uint32_t)len,
        .lkey = ep->bufs_mr->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = ((uint64_t)slot << 3) | VERBS_WR_CTRL_SEND,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_send_wr *bad;
    int rc;

    ep->slot_req[slot] = req; /* a failed post leaves it to the teardown */
    ep->ctrl.outstanding++;
    rc = ibv_post_send(ep->ctrl.qp, &wr, &bad);
    if (rc != 0) {
        uccl_error("%s: ibv_post_send (control): %s", ep->tp->dev_name, strerror(rc));
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
    }
}

/* Room for one message: a send slot when nothing waits before it, else a
 * queued copy (order on the control QP is the matching order). */
static uint8_t *verbs_ctrl_begin(tp_verbs_ep_t *ep, int *slot, tp_verbs_out_t **out)
{
    *out = NULL;
    if (uccl_list_empty(&ep->ctrl_pending) && ep->nfree > 0 &&
        ep->ctrl.outstanding < ep->tp->cfg.tx_depth && ep->base.conn->state == UCCL_OK) {
        *slot = ep->free_slots[--ep->nfree];
        return verbs_send_slot(ep, *slot);
    }
    *out = malloc(sizeof(**out) + ep->slot_size);
    if (*out == NULL)
        return NULL;
    *slot = -1;
    return (*out)->buf;
}

static void verbs_ctrl_commit(tp_verbs_ep_t *ep, int slot, tp_verbs_out_t *out, size_t len,
                              uccl_req_t *req)
{
    if (out != NULL) {
        out->len = len;
        out->req = req;
        uccl_list_push_back(&ep->ctrl_pending, &out->link);
        return;
    }
    verbs_ctrl_post(ep, slot, len, req);
}

void tp_verbs_ctrl_flush(tp_verbs_ep_t *ep)
{
    while (!uccl_list_empty(&ep->ctrl_pending) && ep->nfree > 0 &&
           ep->ctrl.outstanding < ep->tp->cfg.tx_depth) {
        tp_verbs_out_t *out = uccl_container_of(uccl_list_pop_front(&ep->ctrl_pending),
                                                tp_verbs_out_t, link);
        int slot = ep->free_slots[--ep->nfree];

        memcpy(verbs_send_slot(ep, slot), out->buf, out->len);
        verbs_ctrl_post(ep, slot, out->len, out->req);
        free(out);
    }
}

uccl_status_t tp_verbs_ctrl_send(tp_verbs_ep_t *ep, int type, uccl_status_t status, uint64_t a,
                                 uint64_t b, uint64_t c, uccl_req_t *req)
{
    tp_verbs_out_t *out;
    int slot;
    uint8_t *p = verbs_ctrl_begin(ep, &slot, &out);

    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    verbs_put_hdr(p, type, status, a, b, c);
    verbs_ctrl_commit(ep, slot, out, VERBS_HDR_SIZE, req);
    return UCCL_OK;
}

void tp_verbs_ctrl_send_done(tp_verbs_ep_t *ep, int slot, uccl_status_t st)
{
    uccl_req_t *req;

    if (slot < 0 || slot >= ep->tp->cfg.tx_depth)
        return;
    req = ep->slot_req[slot];
    ep->slot_req[slot] = NULL;
    ep->free_slots[ep->nfree++] = slot;
    if (req == NULL)
        return;
    if (req->tp_data[VERBS_RD_STATE] == VERBS_RS_DATA) { /* a notified write's value */
        tp_verbs_data_wc(ep, req, st);
        return;
    }
    if (st == UCCL_OK)
        st = tp_verbs_req_err(req);
    tp_verbs_req_finish(req, st, st == UCCL_OK ? req->len : 0);
}

/* Data of a request has landed (or failed). Success was already told to the
 * peer by the immediates; a failed rendezvous send still needs a FIN so that
 * the receive does not wait for immediates that will never come. */
void tp_verbs_data_done(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    uccl_status_t err = tp_verbs_req_err(req), st = UCCL_OK;

    req->tp_data[VERBS_RD_STATE] = VERBS_RS_CTRL;
    if (req->op == UCCL_OP_SEND && err != UCCL_OK)
        st = tp_verbs_ctrl_send(ep, VERBS_MSG_FIN, err, req->tp_data[VERBS_RD_PEER_ID], 0, 0, req);
    else
        tp_verbs_req_finish(req, err, err == UCCL_OK ? req->len : 0);
    if (st != UCCL_OK)
        tp_verbs_req_finish(req, st, 0);
}

bool tp_verbs_req_needs_imm(const uccl_req_t *req)
{
    return req->op == UCCL_OP_SEND || (req->op == UCCL_OP_WRITE && req->has_notif);
}

static bool verbs_notif_small(const uccl_req_t *req, int nparts)
{
    return nparts == 1 && req->notif < VERBS_IMM_SMALL_MAX;
}

/* The last chunk of req is being built and will need nparts immediates: a
 * value the immediate cannot carry goes ahead on the control QP, tagged with
 * a notify id that the immediates repeat. Sent only now, when nothing but a
 * failing QP (and with it the connection) can keep the immediates away. The
 * message counts as one of req's work requests, so that req completes only
 * once the value is there too: a write_notify that was waited for is then
 * delivered before any later one. */
uccl_status_t tp_verbs_imm_begin(tp_verbs_ep_t *ep, uccl_req_t *req, int nparts)
{
    uccl_status_t st;

    if (req->op != UCCL_OP_WRITE || verbs_notif_small(req, nparts))
        return UCCL_OK;
    req->tp_data[VERBS_RD_ID] = ep->next_notif_id++ & VERBS_IMM_ID_MASK;
    st = tp_verbs_ctrl_send(ep, VERBS_MSG_NOTIFY, UCCL_OK, req->tp_data[VERBS_RD_ID], req->notif,
                            0, req);
    if (st == UCCL_OK)
        req->tp_data[VERBS_RD_WRS]++;
    return st;
}

uint32_t tp_verbs_req_imm(const uccl_req_t *req, int nparts)
{
    uint32_t kind = VERBS_IMM_RNDV, id = (uint32_t)req->tp_data[VERBS_RD_PEER_ID];

    if (req->op == UCCL_OP_WRITE && verbs_notif_small(req, nparts))
        return (uint32_t)VERBS_IMM_NOTIFY_SMALL << 30 | (uint32_t)req->notif;
    if (req->op == UCCL_OP_WRITE) {
        kind = VERBS_IMM_NOTIFY;
        id = (uint32_t)req->tp_data[VERBS_RD_ID];
    }
    return kind << 30 | (uint32_t)(nparts - 1) << 25 | (id & VERBS_IMM_ID_MASK);
}

/* Give back what verbs_ctrl_begin handed out for a message not sent. */
static void verbs_ctrl_abort(tp_verbs_ep_t *ep, int slot, tp_verbs_out_t *out)
{
    if (out != NULL)
        free(out);
    else
        ep->free_slots[ep->nfree++] = slot;
}

static uccl_status_t verbs_post_rts(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    tp_verbs_out_t *out;
    uint8_t *p;
    int slot;

    req->tp_data[VERBS_RD_ID] = ++ep->next_send_id;
    req->tp_data[VERBS_RD_STATE] = VERBS_RS_WAIT_CTS;
    p = verbs_ctrl_begin(ep, &slot, &out);
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_list_push_back(&ep->rndv_wait, &req->tp_link);
    verbs_put_msg_hdr(p, VERBS_MSG_RTS, req, req->tp_data[VERBS_RD_ID]);
    verbs_ctrl_commit(ep, slot, out, VERBS_HDR_SIZE, NULL);
    return UCCL_OK;
}

/* Rendezvous above the eager limit, and for any GPU memory the NIC reads
 * directly (the eager copy would be a CPU memcpy from the device). Staged
 * GPU memory is copied out first: a bounce for a rendezvous, the control
 * slot through the GPU layer for an eager message. */
uccl_status_t tp_verbs_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    uccl_status_t st = tp_verbs_check_local(ep, req);
    bool staged = tp_verbs_req_staged(ep, req);
    tp_verbs_out_t *out;
    uint8_t *p;
    int slot;

    if (st != UCCL_OK)
        return st;
    if (req->len > ep->tp->cfg.eager || (req->gpu_caps != 0 && !staged && req->len > 0)) {
        if (staged)
            st = tp_verbs_xfer_stage(ep, req, req->len, true);
        if (st == UCCL_OK)
            st = verbs_post_rts(ep, req);
        if (st != UCCL_OK)
            tp_verbs_xfer_release(req, &st, 0);
        return st;
    }
    p = verbs_ctrl_begin(ep, &slot, &out);
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    verbs_put_msg_hdr(p, VERBS_MSG_EAGER, req, 0);
    if (req->gpu_caps != 0)
        st = tp_verbs_iov_copy(req, p + VERBS_HDR_SIZE, req->len, false);
    else
        uccl_req_iov_copy_out(req, 0, p + VERBS_HDR_SIZE, req->len);
    if (st != UCCL_OK) {
        verbs_ctrl_abort(ep, slot, out);
        return st;
    }
    req->tp_data[VERBS_RD_STATE] = VERBS_RS_CTRL;
    verbs_ctrl_commit(ep, slot, out, VERBS_HDR_SIZE + req->len, req);
    return UCCL_OK;
}

/* ------------------------------------------------------------------ receiving */

/* The CTS segments of req: its pieces, or the one bounce it is staged
 * through; returns the end of what was written. */
static uint8_t *verbs_put_cts_segs(const tp_verbs_ep_t *ep, const uccl_req_t *req, uint64_t len,
                                   uint8_t *s, int *nseg)
{
    const tp_verbs_xfer_t *x = tp_verbs_xfer(req);

    *nseg = 0;
    if (x != NULL && x->bounce != NULL) {
        uccl_put_u64(s, (uintptr_t)x->bounce->buf);
        uccl_put_u32(s + 8, x->bounce->mr->rkey);
        uccl_put_u32(s + 12, 0);
        uccl_put_u64(s + 16, len);
        *nseg = 1;
        return s + VERBS_SEG_SIZE;
    }
    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        uccl_put_u64(s, (uintptr_t)req->iov[i].addr);
        uccl_put_u32(s + 8, req->iov[i].region->memh[ep->tp->base.index]->mr->rkey);
        uccl_put_u32(s + 12, 0);
        uccl_put_u64(s + 16, req->iov[i].len);
        s += VERBS_SEG_SIZE;
        (*nseg)++;
    }
    return s;
}

/* Matched a receive to an RTS: advertise the receive buffer (CTS), or a
 * bounce when the receive is in GPU memory the NIC cannot reach. */
static void verbs_recv_match_rts(tp_verbs_ep_t *ep, uccl_req_t *req, uint64_t len, uint64_t send_id)
{
    tp_verbs_out_t *out;
    int slot, nseg = 0;
    uccl_status_t st = tp_verbs_check_local(ep, req);
    uint8_t *p, *s;

    if (st == UCCL_OK && len > 0 && tp_verbs_req_staged(ep, req))
        st = tp_verbs_xfer_stage(ep, req, len, false);
    p = st == UCCL_OK ? verbs_ctrl_begin(ep, &slot, &out) : NULL;
    if (p == NULL) {
        tp_verbs_req_finish(req, st != UCCL_OK ? st : UCCL_ERR_NO_MEMORY, 0);
        return;
    }
    req->tp_data[VERBS_RD_ID] = ++ep->next_recv_id;
    req->tp_data[VERBS_RD_MSG_LEN] = len;
    req->tp_data[VERBS_RD_OFF] = 0; /* immediates counted so far */
    req->tp_data[VERBS_RD_STATE] = VERBS_RS_RECV_WAIT_FIN;
    uccl_list_push_back(&ep->recv_wait_fin, &req->tp_link);
    s = verbs_put_cts_segs(ep, req, len, p + VERBS_HDR_SIZE, &nseg);
    verbs_put_hdr(p, VERBS_MSG_CTS, UCCL_OK, send_id, req->tp_data[VERBS_RD_ID], (uint64_t)nseg);
    verbs_ctrl_commit(ep, slot, out, (size_t)(s - p), NULL);
}

/* Move a matched message into its receive: copy an eager payload (GPU
 * pieces through the GPU layer), or advertise the receive's buffer for a
 * rendezvous. */
static void verbs_msg_start(tp_verbs_ep_t *ep, uccl_req_t *req, uint64_t len, bool rndv,
                            const uint8_t *data, uint64_t send_id)
{
    uccl_status_t st = UCCL_OK;

    if (rndv) {
        verbs_recv_match_rts(ep, req, len, send_id);
        return;
    }
    if (req->gpu_caps != 0)
        st = tp_verbs_iov_copy(req, (void *)(uintptr_t)data, len, true);
    else
        uccl_req_iov_copy_in(req, 0, data, len);
    tp_verbs_req_finish(req, st, len);
}

/* An EAGER or RTS came in: into the receive the core has for it, else held. */
static void verbs_msg_arrived(tp_verbs_ep_t *ep, uint64_t seq, uint64_t tag, uint64_t len,
                              bool rndv, const uint8_t *data, uint64_t send_id)
{
    uccl_conn_t *conn = ep->base.conn;
    tp_verbs_unexp_t *u;
    uccl_req_t *req;

    if (uccl_msg_arrived(conn, &ep->base, seq, tag, len, &req) != UCCL_OK) {
        uccl_conn_fail(conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (req != NULL) {
        verbs_msg_start(ep, req, len, rndv, data, send_id);
        return;
    }
    u = malloc(sizeof(*u) + (rndv ? 0 : len));
    if (u == NULL) {
        uccl_error("verbs: out of memory holding an unexpected message; connection fails");
        uccl_conn_fail(conn, UCCL_ERR_NO_MEMORY);
        return;
    }
    u->msg = (uccl_msg_t){.seq = seq, .tag = tag, .len = len};
    u->rndv = rndv;
    u->send_id = send_id;
    if (!rndv && len > 0)
        memcpy(u->data, data, len);
    uccl_list_push_back(&ep->unexpected, &u->link);
    uccl_msg_hold(conn, &ep->base, &u->msg);
}

void tp_verbs_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    tp_verbs_ep_t *ep = (tp_verbs_ep_t *)base;
    tp_verbs_unexp_t *u = uccl_container_of(msg, tp_verbs_unexp_t, msg);

    uccl_list_del(&u->link);
    verbs_msg_start(ep, req, msg->len, u->rndv, u->data, u->send_id);
    free(u);
}

static uccl_req_t *verbs_find_by_id(uccl_list_t *list, uint64_t id)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, list) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, tp_link);
        if (req->tp_data[VERBS_RD_ID] == id)
            return req;
    }
    return NULL;
}

/* The receiver's buffer for one of our rendezvous sends: write into it. */
static void verbs_cts_arrived(tp_verbs_ep_t *ep, uint64_t send_id, uint64_t recv_id, uint64_t nseg,
                              const uint8_t *p, size_t len)
{
    uccl_req_t *req = verbs_find_by_id(&ep->rndv_wait, send_id);
    tp_verbs_xfer_t *x;
    uint64_t total = 0;

    if (req == NULL || nseg == 0 || nseg > UCCL_IOV_MAX || len < nseg * VERBS_SEG_SIZE) {
        uccl_error("verbs: malformed or unexpected CTS (send id %llu, %llu segments)",
                   (unsigned long long)send_id, (unsigned long long)nseg);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    uccl_list_del(&req->tp_link);
    if (tp_verbs_xfer_segs(req, nseg) != UCCL_OK) {
        tp_verbs_req_finish(req, UCCL_ERR_NO_MEMORY, 0);
        return;
    }
    x = tp_verbs_xfer(req);
    for (uint64_t i = 0; i < nseg; i++, p += VERBS_SEG_SIZE) {
        x->segs[i].addr = uccl_get_u64(p);
        x->segs[i].rkey = uccl_get_u32(p + 8);
        x->segs[i].len = uccl_get_u64(p + 16);
        total += x->segs[i].len;
    }
    req->tp_data[VERBS_RD_PEER_ID] = recv_id;
    if (total < req->len) /* the receiver matched only receives that fit */
        tp_verbs_req_error(req, UCCL_ERR_TRANSPORT);
    tp_verbs_data_start(ep, req);
}

static void verbs_fin_arrived(tp_verbs_ep_t *ep, uint64_t recv_id, uint64_t len, uccl_status_t st)
{
    uccl_req_t *req = verbs_find_by_id(&ep->recv_wait_fin, recv_id);

    if (req == NULL) {
        uccl_error("verbs: FIN for unknown receive %llu", (unsigned long long)recv_id);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (st == UCCL_OK && len != req->tp_data[VERBS_RD_MSG_LEN])
        st = UCCL_ERR_TRANSPORT;
    if (st > 0 || st < -199) /* only statuses we know cross the wire */
        st = UCCL_ERR_TRANSPORT;
    tp_verbs_req_finish(req, st, st == UCCL_OK ? len : 0);
}

static tp_verbs_notif_t *verbs_notif_get(tp_verbs_ep_t *ep, uint32_t id)
{
    uccl_list_t *pos;
    tp_verbs_notif_t *n;

    uccl_list_for_each(pos, &ep->notif_wait) {
        n = uccl_container_of(pos, tp_verbs_notif_t, link);
        if (n->id == id)
            return n;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        uccl_error("verbs: out of memory tracking notification %u; connection fails", id);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_NO_MEMORY);
        return NULL;
    }
    n->id = id;
    uccl_list_push_back(&ep->notif_wait, &n->link);
    return n;
}

static void verbs_notif_push(tp_verbs_ep_t *ep, uint64_t value)
{
    if (uccl_conn_notif_push(ep->base.conn, value) != UCCL_OK)
        uccl_error("verbs: notification %llu lost: out of memory", (unsigned long long)value);
}

/* Value and every immediate of a notified write are here: deliver it. */
static void verbs_notif_check(tp_verbs_ep_t *ep, tp_verbs_notif_t *n)
{
    if (!n->have_value || n->nparts == 0 || n->got < n->nparts)
        return;
    uccl_list_del(&n->link);
    verbs_notif_push(ep, n->value);
    free(n);
}

static void verbs_notif_value(tp_verbs_ep_t *ep, uint64_t id, uint64_t value)
{
    tp_verbs_notif_t *n = verbs_notif_get(ep, (uint32_t)(id & VERBS_IMM_ID_MASK));

    if (n == NULL)
        return;
    n->value = value;
    n->have_value = true;
    verbs_notif_check(ep, n);
}

/* One immediate of a rendezvous send: the receive completes with the last. */
static void verbs_rndv_imm(tp_verbs_ep_t *ep, uint32_t id, int nparts)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &ep->recv_wait_fin) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, tp_link);

        if ((req->tp_data[VERBS_RD_ID] & VERBS_IMM_ID_MASK) != id)
            continue;
        if ((int)++req->tp_data[VERBS_RD_OFF] >= nparts)
            tp_verbs_req_finish(req, UCCL_OK, req->tp_data[VERBS_RD_MSG_LEN]);
        return;
    }
    uccl_error("verbs: immediate for unknown receive %u; connection fails", id);
    uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
}

/* An RDMA_WRITE_WITH_IMM landed (see VERBS_IMM_*). */
void tp_verbs_imm_arrived(tp_verbs_ep_t *ep, uint32_t imm)
{
    uint32_t kind = imm >> 30, id = imm & VERBS_IMM_ID_MASK;
    int nparts = (int)((imm >> 25) & 31) + 1;
    tp_verbs_notif_t *n;

    switch (kind) {
    case VERBS_IMM_NOTIFY_SMALL: verbs_notif_push(ep, imm & (VERBS_IMM_SMALL_MAX - 1)); return;
    case VERBS_IMM_RNDV: verbs_rndv_imm(ep, id, nparts); return;
    case VERBS_IMM_NOTIFY:
        n = verbs_notif_get(ep, id);
        if (n == NULL)
            return;
        n->nparts = nparts;
        n->got++;
        verbs_notif_check(ep, n);
        return;
    }
    uccl_error("verbs: malformed immediate 0x%x; connection fails", imm);
    uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
}

/* The one parser of control messages from the peer. */
void tp_verbs_ctrl_recv_done(tp_verbs_ep_t *ep, int index, size_t len)
{
    const uint8_t *p = verbs_slot(ep, index);
    uccl_status_t status;
    uint64_t a, b, c, seq;

    if (index < 0 || index >= ep->tp->cfg.rx_depth)
        return;
    if (len < VERBS_HDR_SIZE)
        goto bad;
    status = (uccl_status_t)(int32_t)uccl_get_u32(p + 4);
    a = uccl_get_u64(p + 8);
    b = uccl_get_u64(p + 16);
    c = uccl_get_u64(p + 24);
    seq = uccl_get_u64(p + 32);
    switch (p[0]) {
    case VERBS_MSG_EAGER:
        if (b != len - VERBS_HDR_SIZE)
            goto bad;
        verbs_msg_arrived(ep, seq, a, b, false, p + VERBS_HDR_SIZE, 0);
        break;
    case VERBS_MSG_RTS: verbs_msg_arrived(ep, seq, a, b, true, NULL, c); break;
    case VERBS_MSG_CTS: verbs_cts_arrived(ep, a, b, c, p + VERBS_HDR_SIZE, len - VERBS_HDR_SIZE); break;
    case VERBS_MSG_FIN: verbs_fin_arrived(ep, a, b, status); break;
    case VERBS_MSG_NOTIFY: verbs_notif_value(ep, a, b); break;
    default: goto bad;
    }
    tp_verbs_post_ctrl_recv(ep, index);
    return;
bad:
    uccl_error("verbs: malformed control message (type %d, %zu bytes); connection fails", p[0], len);
    uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
}

void tp_verbs_msg_release(tp_verbs_ep_t *ep)
{
    uccl_conn_t *conn = ep->base.conn;
    uccl_status_t reason = conn->state != UCCL_OK ? conn->state : UCCL_ERR_CANCELED;

    while (!uccl_list_empty(&ep->unexpected))
        free(uccl_container_of(uccl_list_pop_front(&ep->unexpected), tp_verbs_unexp_t, link));
    while (!uccl_list_empty(&ep->notif_wait))
        free(uccl_container_of(uccl_list_pop_front(&ep->notif_wait), tp_verbs_notif_t, link));
    while (!uccl_list_empty(&ep->ctrl_pending)) {
        tp_verbs_out_t *out = uccl_container_of(uccl_list_pop_front(&ep->ctrl_pending),
                                                tp_verbs_out_t, link);
        if (out->req != NULL && !out->req->done)
            tp_verbs_req_finish(out->req, reason, 0);
        free(out);
    }
}

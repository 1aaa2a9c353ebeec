/* Verbs control channel: control sends numbered in their immediate, and
 * their move to rail 1's control QP when rail 0 fails (issue 21, part 3).
 * Rail 0's control QP carries the protocol's control messages (RTS, CTS,
 * FIN, NOTIFY, GRANT: src/tp/common/rndv.h). With two rails each side also
 * has a control QP on rail 1, connected at setup, its receive buffers posted
 * from the start (so a peer may move before this side notices anything).
 * When a work request on rail 0 fails with a path error, control sends go
 * to rail 1's QP from then on, and every control send not yet acked on rail
 * 0 goes again there, oldest first: some may have arrived (the ack was lost
 * with the link), so the receiver takes numbers in order, drops a number it
 * took already, and holds one that comes before its predecessors (rail 0's
 * last deliveries may still wait in its completion queue). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* Control receive buffers: rx_depth on rail 0's control QP (indexes
 * 0..rx_depth-1), as many on rail 1's where there is one. */
int uccl_verbs_ctrl_rx_depth(const tp_verbs_ep_t *ep)
{
    return ep->tp->cfg.rx_depth * (ep->nrails > 1 && !ep->tp->uc ? 2 : 1);
}

uccl_status_t uccl_verbs_ctrl_init(tp_verbs_ep_t *ep)
{
    ep->ctl = &ep->ctrl;
    ep->ctrl_slots = calloc((size_t)ep->tp->cfg.tx_depth, sizeof(*ep->ctrl_slots));
    ep->ctrl_early = calloc((size_t)uccl_verbs_ctrl_rx_depth(ep), sizeof(*ep->ctrl_early));
    if (ep->ctrl_slots == NULL || ep->ctrl_early == NULL)
        return UCCL_ERR_NO_MEMORY;
    for (int i = 0; i < ep->tp->cfg.tx_depth; i++)
        ep->ctrl_slots[i].rail = -1;
    return UCCL_OK;
}

void uccl_verbs_ctrl_fini(tp_verbs_ep_t *ep)
{
    free(ep->ctrl_slots);
    free(ep->ctrl_early);
}

/* Post send slot `slot` (its number and length set) on the live control QP. */
static void verbs_ctrl_post(tp_verbs_ep_t *ep, int slot)
{
    struct verbs_ctrl_slot *s = &ep->ctrl_slots[slot];
    tp_verbs_qp_t *q = ep->ctl;
    struct ibv_sge sge = {
        .addr = (uintptr_t)uccl_rndv_send_buf(&ep->rndv, slot),
        .length = s->len,
        .lkey = (q == &ep->ctrl ? ep->bufs_mr : ep->bufs_mr2)->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = ((uint64_t)slot << 3) | VERBS_WR_CTRL_SEND,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl(s->seq),
    };
    struct ibv_send_wr *bad;
    int rc;

    s->rail = (int8_t)q->rail;
    q->outstanding++;
    rc = ibv_post_send(q->qp, &wr, &bad);
    if (rc != 0) {
        uccl_error("%s: ibv_post_send (control): %s", ep->tp->rails[q->rail].dev_name, strerror(rc));
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
    }
}

void uccl_verbs_ctrl_send(tp_verbs_ep_t *ep, int slot, size_t len)
{
    ep->ctrl_slots[slot].seq = ep->ctrl_tx_seq++;
    ep->ctrl_slots[slot].len = (uint32_t)len;
    verbs_ctrl_post(ep, slot);
}

/* A control send completed (or failed, st): the protocol frees its slot,
 * unless the slot went again on the other rail (that completion counts). */
void uccl_verbs_ctrl_sent(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc, uccl_status_t st)
{
    int slot = (int)(wc->wr_id >> 3);
    tp_verbs_qp_t *q = uccl_verbs_find_qp(ep, rail, wc->qp_num);

    if (q != NULL)
        q->outstanding--;
    if (slot < 0 || slot >= ep->tp->cfg.tx_depth || ep->ctrl_slots[slot].rail != rail)
        return;
    ep->ctrl_slots[slot].rail = -1;
    uccl_rndv_ctrl_sent(&ep->rndv, slot, st);
}

static int verbs_seq_cmp(const void *a, const void *b)
{
    int32_t d = (int32_t)(((const struct verbs_ctrl_slot *)a)->seq -
                          ((const struct verbs_ctrl_slot *)b)->seq);

    return (d > 0) - (d < 0);
}

/* Rail 0 failed: control sends go to rail 1's QP, those in flight on rail 0
 * again, oldest first. false: there is nowhere to go (one rail, UC, rail 1
 * dead too), the connection fails as before. */
bool uccl_verbs_ctrl_move(tp_verbs_ep_t *ep)
{
    int n = 0, tx = ep->tp->cfg.tx_depth;
    struct verbs_ctrl_slot *order;

    if (ep->ctl == &ep->ctrl2)
        return true;
    if (ep->ctrl2.qp == NULL || (ep->dead_rails & 2) != 0)
        return false;
    order = calloc((size_t)tx, sizeof(*order));
    if (order == NULL)
        return false;
    ep->ctl = &ep->ctrl2;
    for (int i = 0; i < tx; i++)
        if (ep->ctrl_slots[i].rail == 0) /* len: the slot's index, for the sort */
            order[n++] = (struct verbs_ctrl_slot){.seq = ep->ctrl_slots[i].seq, .len = (uint32_t)i};
    qsort(order, (size_t)n, sizeof(*order), verbs_seq_cmp);
    uccl_error("%s: rail 0 failed: the control channel moves to %s (rail 1), %d control "
               "message(s) not acked there go again", ep->tp->rails[0].dev_name,
               ep->tp->rails[1].dev_name, n);
    for (int i = 0; i < n; i++)
        verbs_ctrl_post(ep, (int)order[i].len);
    free(order);
    return true;
}

/* Take receive buffer index (len bytes, number seq): the protocol's, in order. */
static void verbs_ctrl_take(tp_verbs_ep_t *ep, int index, uint32_t len)
{
    ep->ctrl_rx_seq++;
    uccl_rndv_ctrl_recv(&ep->rndv, index, len);
}

/* A control message arrived (a SEND with its number as immediate). */
void uccl_verbs_ctrl_in(tp_verbs_ep_t *ep, const struct ibv_wc *wc)
{
    int index = (int)(wc->wr_id >> 3);
    uint32_t seq = ntohl(wc->imm_data);
    int32_t d = (int32_t)(seq - ep->ctrl_rx_seq);
    bool found = true;

    if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
        uccl_error("verbs: a control message without its number (peer of another wire version?)");
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    for (int i = 0; d > 0 && i < ep->nearly; i++)
        if (ep->ctrl_early[i].seq == seq)
            d = -1; /* held already: a second copy */
    if (d < 0) { /* taken or held already: a copy sent again after a failover */
        if (uccl_verbs_post_ctrl_recv(ep, index) != UCCL_OK)
            uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (d > 0) { /* its predecessors are still on their way (rail 0's queue) */
        if (ep->nearly == uccl_verbs_ctrl_rx_depth(ep)) {
            uccl_error("verbs: control message %u arrived %d ahead with no buffer left to hold it",
                       seq, d);
            uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
            return;
        }
        ep->ctrl_early[ep->nearly++] = (struct verbs_ctrl_early){.seq = seq, .len = wc->byte_len,
                                                                  .index = index};
        return;
    }
    verbs_ctrl_take(ep, index, wc->byte_len);
    while (found && ep->nearly > 0 && uccl_conn_status(ep->base.conn) == UCCL_OK) {
        found = false;
        for (int i = 0; i < ep->nearly; i++) {
            struct verbs_ctrl_early e = ep->ctrl_early[i];

            if (e.seq != ep->ctrl_rx_seq)
                continue;
            ep->ctrl_early[i] = ep->ctrl_early[--ep->nearly];
            verbs_ctrl_take(ep, e.index, e.len);
            found = true;
            break;
        }
    }
}

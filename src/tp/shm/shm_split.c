/* Split CMA: one process_vm_readv/writev runs on one core and falls well
 * short of memcpy for large copies, so the receiver (or the target of a
 * write/read) copies the first part and the peer the rest at the same time:
 * OFFER tells the peer which of our bytes to fill or take, DONE says it has. */
#include "shm.h"

#include <stdlib.h>
#include <string.h>

/* Bytes the receiver or target copies itself: its configured share,
 * rounded down to a cache line. */
static uint64_t shm_split_point(const shm_ep_t *ep, uint64_t len)
{
    uint64_t split = len / 100 * (uint64_t)ep->tp->cfg.split_pct +
                     len % 100 * (uint64_t)ep->tp->cfg.split_pct / 100;

    return split & ~(uint64_t)63;
}

/* The wire pieces of bytes [off, off + len) of a receive's pieces (the iov
 * cursor), or of a write's or read's target range (req NULL, one piece). */
static uint32_t shm_split_wire_iov(const uccl_req_t *req, const struct iovec *target, uint64_t off,
                                   uint64_t len, shm_wire_iov_t *out)
{
    uccl_req_cur_t cur;
    uint32_t n = 0;
    uint8_t *p;
    size_t got;

    if (req == NULL) {
        if (len > 0)
            out[n++] = (shm_wire_iov_t){(uint64_t)(uintptr_t)target->iov_base + off, len};
        return n;
    }
    uccl_req_cur_init(&cur, req, off);
    while (len > 0 && (got = uccl_req_cur_next(&cur, len, &p, NULL)) > 0) {
        out[n++] = (shm_wire_iov_t){(uint64_t)(uintptr_t)p, got};
        len -= got;
    }
    return n;
}

/* Put the OFFER straight into the ring (after any queued control packet
 * it would overtake it, so then we do not split); false = no room. */
static bool shm_split_offer(shm_ep_t *ep, const shm_split_t *s, uint64_t split,
                            const shm_wire_iov_t *iov, uint32_t iovcnt)
{
    size_t size = sizeof(shm_pkt_offer_t) + iovcnt * sizeof(*iov);
    shm_pkt_offer_t *pkt;

    if (!uccl_list_empty(&ep->ctrlq))
        return false;
    pkt = uccl_spsc_reserve(&ep->tx, size);
    if (pkt == NULL)
        return false;
    *pkt = (shm_pkt_offer_t){.hdr = {SHM_PKT_OFFER, (uint32_t)size}, .id = s->peer_id,
                             .rid = s->rid, .split = split, .iovcnt = iovcnt};
    memcpy(SHM_PKT_IOV(pkt), iov, iovcnt * sizeof(*iov));
    uccl_spsc_commit(&ep->tx, size);
    return true;
}

/* Does the peer copy with CMA, so that it can take an offered part? It said
 * so at connect, before it put in the ring the packet we answer now. */
static bool shm_split_peer_copies(const shm_ep_t *ep)
{
    shm_seg_hdr_t *hdr = ep->seg;

    return atomic_load(&hdr->cma_on[ep->is_initiator ? 1 : 0]) != 0;
}

/* Record s, offer the peer [split, len) of local, copy [0, split) with the
 * peer's remote pieces ourselves. */
static bool shm_split_start(shm_ep_t *ep, const shm_split_t *init, const struct iovec *local,
                            int lcnt, const shm_wire_iov_t *remote, uint32_t rcnt)
{
    uint64_t split = shm_split_point(ep, init->len);
    shm_wire_iov_t offer[UCCL_IOV_MAX];
    uint32_t ocnt = shm_split_wire_iov(init->req, local, split, init->len - split, offer);
    shm_split_t *s = malloc(sizeof(*s));
    uccl_status_t st;

    if (s == NULL)
        return false; /* the caller copies it all */
    *s = *init;
    if (uccl_idmap_insert(&ep->split_ids, s, &s->rid) != UCCL_OK) {
        free(s);
        return false;
    }
    if (!shm_split_offer(ep, s, split, offer, ocnt)) {
        uccl_debug("shm: %llu-byte transfer copied whole (control queue busy or ring full)",
                   (unsigned long long)init->len);
        uccl_idmap_remove(&ep->split_ids, s->rid);
        free(s);
        return false;
    }
    uccl_list_push_back(&ep->splits, &s->link);
    /* the peer copies its part whatever we check: no deregistration meanwhile */
    if (s->held != NULL)
        uccl_region_hold(s->held);
    /* a receive pulls, a write's target pulls, a read's target pushes */
    st = uccl_shm_cma_start(ep, &(shm_cma_job_t){.kind = SHM_CMA_SPLIT,
                                            .write = s->req == NULL && s->is_read, .len = split,
                                            .split = s, .region_id = s->region_id,
                                            .region_addr = (uint64_t)(uintptr_t)local[0].iov_base},
                       local, lcnt, 0, remote, (int)rcnt);
    if (st != UCCL_OK)
        uccl_shm_split_own_done(ep, s, st);
    return true;
}

bool uccl_shm_split_recv(shm_ep_t *ep, uccl_req_t *req, uint64_t len, uint64_t id,
                    const shm_wire_iov_t *iov, uint32_t iovcnt)
{
    struct iovec local[UCCL_IOV_MAX];

    if (ep->tp->cfg.split_min == 0 || len < ep->tp->cfg.split_min || !shm_split_peer_copies(ep))
        return false;
    return shm_split_start(ep, &(shm_split_t){.peer_id = id, .req = req, .len = len}, local,
                           uccl_shm_req_iovec(req, local), iov, iovcnt);
}

bool uccl_shm_split_rma(shm_ep_t *ep, const shm_pkt_rma_t *pkt, const shm_wire_iov_t *iov,
                        uccl_region_t *region)
{
    /* the region was validated for exactly [addr, addr + len) */
    struct iovec local = {(void *)(uintptr_t)pkt->addr, pkt->len};

    if (ep->tp->cfg.split_min == 0 || pkt->len < ep->tp->cfg.split_min ||
        !shm_split_peer_copies(ep))
        return false;
    return shm_split_start(ep, &(shm_split_t){.peer_id = pkt->id, .len = pkt->len,
                                              .region_id = pkt->region_id, .held = region,
                                              .is_read = pkt->is_read != 0,
                                              .has_notif = pkt->has_notif != 0,
                                              .notif = pkt->notif},
                           &local, 1, iov, pkt->iovcnt);
}

static void shm_rx_offer_bad(shm_ep_t *ep)
{
    uccl_error("shm: malformed offer packet from pid %d", ep->peer_pid);
    uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
}

/* Sender or initiator: copy the part the peer offered, then say so. */
/* (pkt and iov as uccl_shm_pkt_parse checked them) */
void uccl_shm_rx_offer(shm_ep_t *ep, const shm_pkt_offer_t *pkt, const shm_wire_iov_t *iov)
{
    struct iovec local[UCCL_IOV_MAX];
    uccl_req_t *req;
    uint64_t sum = 0;
    uccl_status_t st;

    for (uint32_t i = 0; i < pkt->iovcnt; i++)
        sum += iov[i].len;
    req = uccl_shm_find_req(ep, SHM_AT_WAITING, pkt->id);
    /* only a CMA peer offers, and only for host memory we announced */
    if (req == NULL || !ep->cma || uccl_stage_req_is_gpu(req) || pkt->split > req->len ||
        sum != req->len - pkt->split) {
        shm_rx_offer_bad(ep);
        return;
    }
    st = uccl_shm_cma_start(ep, &(shm_cma_job_t){.kind = SHM_CMA_OFFER, .write = req->op != UCCL_OP_READ,
                                            .len = sum, .peer_id = pkt->rid},
                       local, uccl_shm_req_iovec(req, local), pkt->split, iov, (int)pkt->iovcnt);
    if (st != UCCL_OK)
        uccl_shm_ctrl_send(ep, SHM_PKT_DONE, pkt->rid, 0, st);
}

/* Receiver or target: both parts are copied; complete, notify, FIN. */
static void shm_split_complete(shm_ep_t *ep, shm_split_t *s)
{
    uccl_status_t st = s->st != UCCL_OK ? s->st : s->peer_st;

    uccl_list_del(&s->link);
    if (s->req != NULL)
        uccl_req_complete(s->req, st, st == UCCL_OK ? s->len : 0);
    else if (st == UCCL_OK && !s->is_read && s->has_notif)
        st = uccl_conn_notif_push(ep->base.conn, s->notif);
    uccl_shm_ctrl_send(ep, SHM_PKT_FIN, s->peer_id, 0, st);
    free(s);
}

void uccl_shm_split_own_done(shm_ep_t *ep, shm_split_t *s, uccl_status_t st)
{
    s->st = st;
    s->own_done = true;
    if (s->peer_done)
        shm_split_complete(ep, s);
}

/* The peer's part is copied (its DONE). */
void uccl_shm_rx_done(shm_ep_t *ep, const shm_pkt_ctl_t *pkt)
{
    uccl_status_t st = (uccl_status_t)pkt->status;
    shm_split_t *s = uccl_idmap_remove(&ep->split_ids, pkt->id); /* one DONE each */

    if (s == NULL) {
        uccl_error("shm: DONE for unknown transfer %llu from pid %d", (unsigned long long)pkt->id,
                   ep->peer_pid);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (st != UCCL_OK && st != UCCL_ERR_REMOTE_ACCESS && st != UCCL_ERR_STALE &&
        st != UCCL_ERR_TRANSPORT)
        st = UCCL_ERR_TRANSPORT;
    s->peer_st = st;
    s->peer_done = true;
    if (s->held != NULL) {
        uccl_region_unhold(s->held);
        s->held = NULL;
    }
    if (s->own_done)
        shm_split_complete(ep, s);
}

void uccl_shm_splits_free(shm_ep_t *ep)
{
    uccl_list_t *link;

    while ((link = uccl_list_pop_front(&ep->splits)) != NULL) {
        shm_split_t *s = uccl_container_of(link, shm_split_t, link);
        if (s->held != NULL)
            uccl_region_unhold(s->held);
        free(s);
    }
}

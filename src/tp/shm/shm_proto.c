/* The shm protocol, posting side: eager sends copied into the ring,
 * rendezvous offers (RTS) for large sends, RMA requests checked by the
 * target, control packets, streams of chunks when CMA is not usable, and
 * delivery of a matched message into a receive. */
#include "shm.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ request ids */

/* Give req an id (SHM_REQ_ID) that the peer's CTS, FIN and data name. */
uccl_status_t uccl_shm_req_track(shm_ep_t *ep, uccl_req_t *req)
{
    req->tp_data[SHM_REQ_WHERE] = SHM_AT_NONE;
    return uccl_idmap_insert(&ep->ids, req, &req->tp_data[SHM_REQ_ID]);
}

/* req goes on the list `where` names (its tp_link is free). */
void uccl_shm_req_at(shm_ep_t *ep, uccl_req_t *req, int where)
{
    uccl_list_t *list = where == SHM_AT_TXQ ? &ep->txq
                        : where == SHM_AT_WAITING ? &ep->waiting : &ep->recv_active;

    req->tp_data[SHM_REQ_WHERE] = (uint64_t)where;
    uccl_list_push_back(list, &req->tp_link);
}

/* req leaves its list and its id dies. */
void uccl_shm_req_untrack(shm_ep_t *ep, uccl_req_t *req)
{
    uccl_list_del(&req->tp_link);
    req->tp_data[SHM_REQ_WHERE] = SHM_AT_NONE;
    uccl_idmap_remove(&ep->ids, req->tp_data[SHM_REQ_ID]);
}

/* The request id names, if it is on the list `where` names. */
uccl_req_t *uccl_shm_find_req(shm_ep_t *ep, int where, uint64_t id)
{
    uccl_req_t *req = uccl_idmap_lookup(&ep->ids, id);

    return req != NULL && req->tp_data[SHM_REQ_WHERE] == (uint64_t)where ? req : NULL;
}

/* ------------------------------------------------------------------ control */

static bool shm_ctrl_write(shm_ep_t *ep, const shm_pkt_ctl_t *pkt)
{
    void *slot = uccl_spsc_reserve(&ep->tx, sizeof(*pkt));

    if (slot == NULL)
        return false;
    memcpy(slot, pkt, sizeof(*pkt));
    uccl_spsc_commit(&ep->tx, sizeof(*pkt));
    return true;
}

void uccl_shm_ctrl_send(shm_ep_t *ep, uint32_t type, uint64_t id, uint64_t rid, uccl_status_t status)
{
    shm_pkt_ctl_t pkt = {{type, sizeof(pkt)}, id, rid, (int32_t)status, 0};
    shm_ctrl_t *ctrl;

    if (uccl_list_empty(&ep->ctrlq) && shm_ctrl_write(ep, &pkt))
        return;
    ctrl = malloc(sizeof(*ctrl));
    if (ctrl == NULL) {
        uccl_error("shm: no memory to queue a control packet");
        uccl_conn_fail(ep->base.conn, UCCL_ERR_NO_MEMORY);
        return;
    }
    ctrl->pkt = pkt;
    uccl_list_push_back(&ep->ctrlq, &ctrl->link);
}

/* ------------------------------------------------------------------ sends, RMA requests */

static void shm_fill_wire_iov(const uccl_req_t *req, shm_wire_iov_t *iov, uint32_t *cnt)
{
    uint32_t n = 0;

    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        iov[n].addr = (uint64_t)(uintptr_t)req->iov[i].addr;
        iov[n].len = req->iov[i].len;
        n++;
    }
    *cnt = n;
}

/* A send that goes whole into the ring (GPU sources always take the staged
 * stream: rendezvous, then DATA). */
static bool shm_send_is_eager(const shm_ep_t *ep, const uccl_req_t *req)
{
    return req->op == UCCL_OP_SEND && req->len <= ep->tp->cfg.eager_threshold &&
           !uccl_stage_req_is_gpu(req);
}

/* An eager send into the ring, finished at once; false = ring full.
 * tracked: it has an id (it waited in txq), which dies now. */
static bool shm_tx_eager(shm_ep_t *ep, uccl_req_t *req, bool tracked)
{
    size_t size = sizeof(shm_pkt_eager_t) + req->len;
    shm_pkt_eager_t *pkt = uccl_spsc_reserve(&ep->tx, size);

    if (pkt == NULL)
        return false;
    pkt->hdr = (shm_pkt_hdr_t){SHM_PKT_EAGER, (uint32_t)size};
    pkt->tag = req->tag;
    pkt->len = req->len;
    pkt->seq = req->msg_seq;
    uccl_req_iov_copy_out(req, 0, pkt + 1, req->len);
    uccl_spsc_commit(&ep->tx, size);
    if (tracked)
        uccl_shm_req_untrack(ep, req);
    uccl_req_complete(req, UCCL_OK, req->len);
    return true;
}

/* Try to put one send or RMA request into the ring; false = ring full. */
static bool shm_tx_req(shm_ep_t *ep, uccl_req_t *req)
{
    bool gpu;

    if (shm_send_is_eager(ep, req))
        return shm_tx_eager(ep, req, true);
    gpu = uccl_stage_req_is_gpu(req);
    if (req->op == UCCL_OP_SEND) {
        size_t size = sizeof(shm_pkt_rts_t) + (size_t)req->iovcnt * sizeof(shm_wire_iov_t);
        shm_pkt_rts_t *pkt = uccl_spsc_reserve(&ep->tx, size + sizeof(shm_wire_iov_t));

        if (pkt == NULL)
            return false;
        shm_fill_wire_iov(req, SHM_PKT_IOV(pkt), &pkt->iovcnt);
        pkt->reserved = gpu ? SHM_FLAG_GPU : uccl_shm_map_rts_key(ep, SHM_PKT_IOV(pkt), pkt->iovcnt);
        if (pkt->reserved & SHM_FLAG_MAPPED)
            pkt->iovcnt++; /* the key */
        size = sizeof(*pkt) + pkt->iovcnt * sizeof(shm_wire_iov_t);
        pkt->hdr = (shm_pkt_hdr_t){SHM_PKT_RTS, (uint32_t)size};
        pkt->tag = req->tag;
        pkt->len = req->len;
        pkt->seq = req->msg_seq;
        pkt->id = req->tp_data[SHM_REQ_ID];
        uccl_spsc_commit(&ep->tx, size);
    } else {
        size_t size = sizeof(shm_pkt_rma_t) + (size_t)req->iovcnt * sizeof(shm_wire_iov_t);
        shm_pkt_rma_t *pkt = uccl_spsc_reserve(&ep->tx, size);

        if (pkt == NULL)
            return false;
        shm_fill_wire_iov(req, SHM_PKT_IOV(pkt), &pkt->iovcnt);
        size = sizeof(*pkt) + pkt->iovcnt * sizeof(shm_wire_iov_t);
        pkt->hdr = (shm_pkt_hdr_t){SHM_PKT_RMA, (uint32_t)size};
        pkt->is_read = req->op == UCCL_OP_READ;
        pkt->id = req->tp_data[SHM_REQ_ID];
        pkt->region_id = req->remote.region_id;
        pkt->addr = req->remote.addr;
        pkt->len = req->len;
        pkt->notif = req->notif;
        pkt->has_notif = req->has_notif;
        pkt->reserved = gpu ? SHM_FLAG_GPU : 0;
        uccl_spsc_commit(&ep->tx, size);
    }
    uccl_shm_req_at(ep, req, SHM_AT_WAITING);
    return true;
}

/* Posting order is matching order: a request goes straight into the ring
 * only when nothing is queued before it. */
static uccl_status_t shm_post_tx(shm_ep_t *ep, uccl_req_t *req)
{
    /* an eager send that fits now needs no id: it is done before we return */
    if (uccl_list_empty(&ep->txq) && shm_send_is_eager(ep, req) && shm_tx_eager(ep, req, false))
        return UCCL_OK;
    if (uccl_shm_req_track(ep, req) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    if (uccl_list_empty(&ep->txq) && shm_tx_req(ep, req))
        return UCCL_OK;
    uccl_shm_req_at(ep, req, SHM_AT_TXQ);
    return UCCL_OK;
}

uccl_status_t uccl_shm_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return shm_post_tx((shm_ep_t *)base, req);
}

uccl_status_t uccl_shm_post_rma(uccl_tp_ep_t *base, uccl_req_t *req)
{
    shm_ep_t *ep = (shm_ep_t *)base;

    if (req->remote.mem_type != UCCL_MEM_HOST && ep->tp->stage == NULL)
        return UCCL_ERR_UNSUPPORTED;
    return shm_post_tx(ep, req);
}

/* ------------------------------------------------------------------ receives */

void uccl_shm_req_fill(shm_ep_t *ep, uccl_req_t *req, size_t off, const void *src, size_t len,
                  bool last, size_t total)
{
    uccl_stage_t *stage = ep->tp->stage;
    uccl_status_t st;

    if (stage == NULL || !uccl_stage_req_is_gpu(req)) {
        uccl_req_iov_copy_in(req, off, src, len);
        if (last)
            uccl_req_complete(req, UCCL_OK, total);
        return;
    }
    st = uccl_stage_copy_in(stage, req, NULL, off, src, len);
    if (st == UCCL_OK && last)
        st = uccl_stage_complete_req(stage, ep, req, UCCL_OK, total);
    if (st != UCCL_OK) {
        uccl_error("shm: staging %zu bytes into GPU memory failed: %s", len, uccl_strerror(st));
        if (last)
            uccl_req_complete(req, st, 0);
    }
}

/* A message matched req (big enough): copy it (EAGER, data = payload),
 * pull it (RTS with CMA, data = sender iov), or ask for it (RTS without). */
void uccl_shm_deliver(shm_ep_t *ep, uccl_req_t *req, uint32_t type, uint64_t len, uint64_t id,
                 const void *data, uint32_t iovcnt, uint32_t flags)
{
    struct iovec local[UCCL_IOV_MAX];
    const void *src;
    uccl_status_t st;

    if (type == SHM_PKT_EAGER) {
        uccl_shm_req_fill(ep, req, 0, data, len, true, len);
        return;
    }
    /* CMA cannot reach GPU memory on either side: stream through the ring */
    if (!ep->cma || (flags & SHM_FLAG_GPU) || uccl_stage_req_is_gpu(req)) {
        if (uccl_shm_req_track(ep, req) != UCCL_OK) {
            uccl_req_complete(req, UCCL_ERR_NO_MEMORY, 0);
            return;
        }
        req->tp_data[SHM_REQ_MSGLEN] = len;
        uccl_shm_req_at(ep, req, SHM_AT_RECV_ACTIVE);
        uccl_shm_ctrl_send(ep, SHM_PKT_CTS, id, req->tp_data[SHM_REQ_ID], UCCL_OK);
        return;
    }
    /* one piece of the sender's memory of uccl_mem_alloc: memcpy from our mapping of it */
    if ((flags & SHM_FLAG_MAPPED) && !uccl_stage_req_is_gpu(req) && iovcnt == 1 &&
        ((const shm_wire_iov_t *)data)->len == len &&
        (src = uccl_shm_map_piece(ep, data, (const shm_wire_iov_t *)data + 1)) != NULL) {
        uccl_req_iov_copy_in(req, 0, src, len);
        uccl_req_complete(req, UCCL_OK, len);
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, id, 0, UCCL_OK);
        return;
    }
    if (uccl_shm_split_recv(ep, req, len, id, data, iovcnt))
        return;
    st = uccl_shm_cma_start(ep, &(shm_cma_job_t){.kind = SHM_CMA_RECV, .len = len, .req = req, .peer_id = id},
                       local, uccl_shm_req_iovec(req, local), 0, data, (int)iovcnt);
    if (st != UCCL_OK) {
        uccl_req_complete(req, st, 0);
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, id, 0, st);
    }
}

void uccl_shm_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    shm_ep_t *ep = (shm_ep_t *)base;
    shm_unexp_t *u = uccl_container_of(msg, shm_unexp_t, msg);

    uccl_list_del(&u->link);
    uccl_shm_deliver(ep, req, u->type, msg->len, u->id, u->data, u->iovcnt, u->flags);
    free(u);
}

/* ------------------------------------------------------------------ streams */

/* Copy the next piece of a stream's source to dst. */
static uccl_status_t shm_stream_source(shm_ep_t *ep, shm_stream_t *s, void *dst, size_t n)
{
    uccl_region_t *region;

    if (s->staged) {
        const uint8_t *ptr;
        size_t avail;

        /* target memory of a read: the region may have gone meanwhile */
        if (s->req == NULL && uccl_engine_region_find(ep->tp->base.engine, s->region_id,
                                                      s->flat + s->off, n, &region) != UCCL_OK)
            return UCCL_ERR_REMOTE_ACCESS;
        /* shm_stream_ready made sure n bytes are ready in one buffer */
        if (uccl_stage_src_peek(&s->src, &ptr, &avail, NULL) != UCCL_OK || avail < n)
            return UCCL_ERR_TRANSPORT;
        memcpy(dst, ptr, n);
        uccl_stage_src_take(&s->src, n);
        return UCCL_OK;
    }
    if (s->req != NULL) {
        uccl_req_iov_copy_out(s->req, s->off, dst, n);
        return UCCL_OK;
    }
    /* target memory of a read: the region may have gone since the last chunk */
    if (uccl_engine_region_find(ep->tp->base.engine, s->region_id, s->flat + s->off, n, &region) !=
        UCCL_OK)
        return UCCL_ERR_REMOTE_ACCESS;
    memcpy(dst, (const void *)(uintptr_t)(s->flat + s->off), n);
    return UCCL_OK;
}

/* A staged source: clip n to the bytes its next pinned buffer has ready;
 * false while that D2H copy runs (the chunks after it are in flight too). */
static bool shm_stream_ready(shm_stream_t *s, size_t *n, uccl_status_t *st)
{
    const uint8_t *ptr;
    size_t avail;

    *st = UCCL_OK;
    if (!s->staged || *n == 0)
        return true;
    *st = uccl_stage_src_peek(&s->src, &ptr, &avail, NULL);
    if (*st == UCCL_INPROGRESS) {
        *st = UCCL_OK;
        return false;
    }
    if (*st == UCCL_OK && avail < *n)
        *n = avail;
    return true;
}

/* Write as many chunks of s as fit; true when s is finished. */
static bool shm_stream_push(shm_ep_t *ep, shm_stream_t *s)
{
    while (!s->started || s->off < s->len) {
        size_t head = s->type == SHM_PKT_WDATA ? sizeof(shm_pkt_wdata_t) : sizeof(shm_pkt_data_t);
        size_t n = s->len - s->off < ep->tp->chunk - head ? s->len - s->off : ep->tp->chunk - head;
        uccl_status_t st;
        uint8_t *slot;

        if (!shm_stream_ready(s, &n, &st))
            return false;
        slot = st == UCCL_OK ? uccl_spsc_reserve(&ep->tx, head + n) : NULL;
        if (slot == NULL && st == UCCL_OK)
            return false;
        if (st != UCCL_OK && s->req != NULL) {
            /* a failed copy out of our own GPU memory: nothing sane to send */
            uccl_conn_fail(ep->base.conn, st);
            return false;
        }
        if (st != UCCL_OK || shm_stream_source(ep, s, slot + head, n) != UCCL_OK) {
            uccl_shm_ctrl_send(ep, SHM_PKT_FIN, s->id, 0, UCCL_ERR_REMOTE_ACCESS);
            return true; /* nothing committed */
        }
        if (s->type == SHM_PKT_WDATA) {
            shm_pkt_wdata_t *pkt = (shm_pkt_wdata_t *)slot;
            *pkt = (shm_pkt_wdata_t){.hdr = {SHM_PKT_WDATA, (uint32_t)(head + n)}, .id = s->id,
                                     .region_id = s->region_id, .addr = s->raddr + s->off,
                                     .len = n, .notif = s->req->notif,
                                     .has_notif = s->req->has_notif, .last = s->off + n == s->len};
        } else {
            shm_pkt_data_t *pkt = (shm_pkt_data_t *)slot;
            *pkt = (shm_pkt_data_t){.hdr = {SHM_PKT_DATA, (uint32_t)(head + n)}, .id = s->id,
                                    .off = s->off, .len = n};
        }
        uccl_spsc_commit(&ep->tx, head + n);
        s->off += n;
        s->started = true;
    }
    return true;
}

void uccl_shm_stream_free(shm_stream_t *s)
{
    if (s->staged)
        uccl_stage_src_fini(&s->src);
    uccl_list_del(&s->link);
    free(s);
}

static void shm_stream_finished(shm_ep_t *ep, shm_stream_t *s)
{
    /* a streamed send is done once its last byte is in the ring; a write
     * waits for the target's FIN */
    if (s->req != NULL && s->req->op == UCCL_OP_SEND) {
        uccl_shm_req_untrack(ep, s->req);
        uccl_req_complete(s->req, UCCL_OK, s->req->len);
    }
    uccl_shm_stream_free(s);
}

/* ------------------------------------------------------------------ tx progress */

int uccl_shm_tx_progress(shm_ep_t *ep)
{
    uccl_list_t *link;
    int events = 0;

    while (!uccl_list_empty(&ep->ctrlq)) {
        shm_ctrl_t *ctrl = uccl_list_first(&ep->ctrlq, shm_ctrl_t, link);
        if (!shm_ctrl_write(ep, &ctrl->pkt))
            return events;
        uccl_list_del(&ctrl->link);
        free(ctrl);
        events++;
    }
    while (!uccl_list_empty(&ep->txq)) {
        uccl_req_t *req = uccl_list_first(&ep->txq, uccl_req_t, tp_link);
        uccl_list_del(&req->tp_link);
        if (!shm_tx_req(ep, req)) {
            uccl_list_push_front(&ep->txq, &req->tp_link);
            return events;
        }
        events++;
    }
    while ((link = ep->streams.next) != &ep->streams) {
        shm_stream_t *s = uccl_container_of(link, shm_stream_t, link);
        if (!shm_stream_push(ep, s))
            return events;
        shm_stream_finished(ep, s);
        events++;
    }
    return events;
}

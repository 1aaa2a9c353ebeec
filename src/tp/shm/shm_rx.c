/* The shm protocol, receiving side: every packet the peer put in our ring
 * is checked (the ring is shared memory the peer can scribble on) and
 * handled: matching of messages to receives, rendezvous, RMA requests that
 * this side validates against its own regions before touching memory. */
#include "shm.h"

#include <stdlib.h>
#include <string.h>

#define SHM_RX_BUDGET 64 /* packets per progress call and endpoint */

static void shm_rx_bad(shm_ep_t *ep, const char *what)
{
    uccl_error("shm: malformed %s packet from pid %d", what, ep->peer_pid);
    uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
}

/* Keep a message no receive took yet (the core's matching holds it). */
static void shm_rx_unexpected(shm_ep_t *ep, uint32_t type, uint64_t seq, uint64_t tag, uint64_t len,
                              uint64_t id, const void *data, size_t data_len, uint32_t iovcnt,
                              uint32_t flags)
{
    shm_unexp_t *u = malloc(sizeof(*u) + data_len);

    if (u == NULL) {
        uccl_error("shm: no memory for an unexpected message of %zu bytes", data_len);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_NO_MEMORY);
        return;
    }
    u->msg.seq = seq;
    u->msg.tag = tag;
    u->msg.len = len;
    u->msg.complete = type == SHM_PKT_EAGER; /* an RTS still needs the sender */
    u->msg.bytes = data_len;
    u->type = type;
    u->id = id;
    u->iovcnt = iovcnt;
    u->flags = flags;
    memcpy(u->data, data, data_len);
    uccl_list_push_back(&ep->unexp, &u->link);
    uccl_msg_hold(ep->base.conn, &ep->base, &u->msg);
}

/* A message arrived (EAGER with its payload, RTS with the sender's pieces):
 * into the receive the core matches it with, else held. */
static void shm_rx_msg(shm_ep_t *ep, uint32_t type, uint64_t seq, uint64_t tag, uint64_t len,
                       uint64_t id, const void *data, size_t data_len, uint32_t iovcnt,
                       uint32_t flags)
{
    uccl_req_t *req;

    if (uccl_msg_arrived(ep->base.conn, &ep->base, seq, tag, len, &req) != UCCL_OK)
        uccl_conn_fail(ep->base.conn, UCCL_ERR_TRANSPORT);
    else if (req != NULL)
        uccl_shm_deliver(ep, req, type, len, id, data, iovcnt, flags);
    else
        shm_rx_unexpected(ep, type, seq, tag, len, id, data, data_len, iovcnt, flags);
}

/* The handlers below get packets uccl_shm_pkt_parse checked (shm_wire.c). */
static void shm_rx_eager(shm_ep_t *ep, const shm_rx_pkt_t *rx)
{
    const shm_pkt_eager_t *pkt = &rx->u.eager;

    shm_rx_msg(ep, SHM_PKT_EAGER, pkt->seq, pkt->tag, pkt->len, 0, rx->payload, rx->payload_len, 0,
               0);
}

static void shm_rx_rts(shm_ep_t *ep, const shm_rx_pkt_t *rx)
{
    const shm_pkt_rts_t *pkt = &rx->u.rts;
    /* SHM_FLAG_MAPPED: the last wire iov is the key, not a piece */
    uint32_t pieces = pkt->iovcnt - ((pkt->reserved & SHM_FLAG_MAPPED) != 0);

    if ((pkt->reserved & SHM_FLAG_MAPPED) && pkt->iovcnt != 2) {
        shm_rx_bad(ep, "rts");
        return;
    }
    shm_rx_msg(ep, SHM_PKT_RTS, pkt->seq, pkt->tag, pkt->len, pkt->id, rx->iov,
               pkt->iovcnt * sizeof(rx->iov[0]), pieces, pkt->reserved);
}

static void shm_stream_add(shm_ep_t *ep, const shm_stream_t *init)
{
    shm_stream_t *s = malloc(sizeof(*s));

    if (s == NULL) {
        uccl_error("shm: no memory for a stream");
        uccl_conn_fail(ep->base.conn, UCCL_ERR_NO_MEMORY);
        return;
    }
    *s = *init;
    if (s->staged)
        uccl_stage_src_init(&s->src, ep->tp->stage, s->req, (const void *)(uintptr_t)s->flat,
                            s->len);
    uccl_list_push_back(&ep->streams, &s->link);
}

static void shm_rx_cts(shm_ep_t *ep, const shm_pkt_ctl_t *pkt)
{
    uccl_req_t *req = uccl_shm_find_req(ep, SHM_AT_WAITING, pkt->id);

    if (req == NULL || (req->op != UCCL_OP_SEND && req->op != UCCL_OP_WRITE)) {
        shm_rx_bad(ep, "cts");
        return;
    }
    bool staged = ep->tp->stage != NULL && uccl_stage_req_is_gpu(req);

    if (req->op == UCCL_OP_SEND)
        shm_stream_add(ep, &(shm_stream_t){.type = SHM_PKT_DATA, .id = pkt->rid, .req = req,
                                           .len = req->len, .staged = staged});
    else
        shm_stream_add(ep, &(shm_stream_t){.type = SHM_PKT_WDATA, .id = pkt->id, .req = req,
                                           .region_id = req->remote.region_id,
                                           .raddr = req->remote.addr, .len = req->len,
                                           .staged = staged});
}

static void shm_rx_fin(shm_ep_t *ep, const shm_pkt_ctl_t *pkt)
{
    uccl_req_t *req = uccl_shm_find_req(ep, SHM_AT_WAITING, pkt->id);
    uccl_status_t st = (uccl_status_t)pkt->status;
    uccl_list_t *pos, *tmp;

    if (req == NULL)
        return; /* a later chunk of a write already refused */
    uccl_list_for_each_safe(pos, tmp, &ep->streams) {
        shm_stream_t *s = uccl_container_of(pos, shm_stream_t, link);
        if (s->req == req)
            uccl_shm_stream_free(s);
    }
    if (st != UCCL_OK && st != UCCL_ERR_REMOTE_ACCESS && st != UCCL_ERR_STALE &&
        st != UCCL_ERR_TRANSPORT)
        st = UCCL_ERR_TRANSPORT;
    uccl_shm_req_untrack(ep, req);
    uccl_req_complete(req, st, st == UCCL_OK ? req->len : 0);
}

/* A chunk of a streamed message (receive) or of a read's data. */
static void shm_rx_data(shm_ep_t *ep, const shm_rx_pkt_t *rx)
{
    shm_pkt_data_t pkt = rx->u.data;
    uccl_req_t *req;
    uint64_t total;

    req = uccl_shm_find_req(ep, SHM_AT_RECV_ACTIVE, pkt.id);
    if (req == NULL) {
        req = uccl_shm_find_req(ep, SHM_AT_WAITING, pkt.id);
        if (req == NULL || req->op != UCCL_OP_READ) {
            shm_rx_bad(ep, "data");
            return;
        }
    }
    total = req->op == UCCL_OP_RECV ? req->tp_data[SHM_REQ_MSGLEN] : req->len;
    if (pkt.off > total || pkt.len > total - pkt.off) {
        shm_rx_bad(ep, "data");
        return;
    }
    if (pkt.off + pkt.len == total)
        uccl_shm_req_untrack(ep, req);
    uccl_shm_req_fill(ep, req, pkt.off, rx->payload, pkt.len, pkt.off + pkt.len == total, total);
}

/* The region of ours that a peer's write or read names, checked: UCCL_OK,
 * else the status its FIN refuses it with (STALE, or REMOTE_ACCESS: also
 * GPU memory when nothing stages it). */
static uccl_status_t shm_rx_target(shm_ep_t *ep, uint64_t region_id, uint64_t addr, uint64_t len,
                                   uccl_region_t **region)
{
    uccl_status_t st = uccl_engine_region_find(ep->tp->base.engine, region_id, addr, len, region);

    if (st == UCCL_OK && uccl_region_mem_type(*region) != UCCL_MEM_HOST && ep->tp->stage == NULL)
        st = UCCL_ERR_REMOTE_ACCESS;
    return st == UCCL_OK || st == UCCL_ERR_STALE ? st : UCCL_ERR_REMOTE_ACCESS;
}

/* Target side of write/read: check the access against our own regions
 * first; only then copy (CMA) or ask for / send the data through the ring. */
static void shm_rx_rma(shm_ep_t *ep, const shm_rx_pkt_t *rx)
{
    const shm_wire_iov_t *iov = rx->iov;
    shm_pkt_rma_t pkt = rx->u.rma;
    uccl_region_t *region;
    uccl_status_t st;

    st = shm_rx_target(ep, pkt.region_id, pkt.addr, pkt.len, &region);
    if (st != UCCL_OK) {
        uccl_debug("shm: refusing a %s of %llu bytes at region %llu from pid %d",
                   pkt.is_read ? "read" : "write", (unsigned long long)pkt.len,
                   (unsigned long long)pkt.region_id, ep->peer_pid);
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, pkt.id, 0, st);
        return;
    }
    /* CMA cannot reach GPU memory on either side: stream through the ring */
    if (!ep->cma || uccl_region_mem_type(region) != UCCL_MEM_HOST || (pkt.reserved & SHM_FLAG_GPU)) {
        if (pkt.is_read)
            shm_stream_add(ep, &(shm_stream_t){.type = SHM_PKT_DATA, .id = pkt.id, .flat = pkt.addr,
                                               .region_id = pkt.region_id, .len = pkt.len,
                                               .staged = uccl_region_mem_type(region) != UCCL_MEM_HOST});
        else
            uccl_shm_ctrl_send(ep, SHM_PKT_CTS, pkt.id, 0, UCCL_OK);
        return;
    }
    if (uccl_shm_split_rma(ep, &pkt, iov, region))
        return;
    st = uccl_shm_cma_start(ep, &(shm_cma_job_t){.kind = SHM_CMA_RMA, .write = pkt.is_read != 0,
                                            .len = pkt.len, .region_id = pkt.region_id,
                                            .region_addr = pkt.addr, .peer_id = pkt.id,
                                            .has_notif = !pkt.is_read && pkt.has_notif,
                                            .notif = pkt.notif},
                       &(struct iovec){(void *)(uintptr_t)pkt.addr, pkt.len}, 1, 0, iov,
                       (int)pkt.iovcnt);
    if (st != UCCL_OK)
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, pkt.id, 0, st);
}

/* The last chunk of a write is in place: notify, then tell the initiator. */
static void shm_write_done(shm_ep_t *ep, uint64_t id, bool has_notif, uint64_t notif)
{
    uccl_status_t st = has_notif ? uccl_conn_notif_push(ep->base.conn, notif) : UCCL_OK;

    uccl_shm_ctrl_send(ep, SHM_PKT_FIN, id, 0, st);
}

static void shm_write_done_deferred(void *arg, uccl_status_t copy_status, uint64_t id,
                                    uint64_t has_notif, uint64_t notif)
{
    if (copy_status != UCCL_OK) /* the data did not land: no notification, a failed FIN */
        uccl_shm_ctrl_send(arg, SHM_PKT_FIN, id, 0, copy_status);
    else
        shm_write_done(arg, id, has_notif != 0, notif);
}

static void shm_rx_wdata(shm_ep_t *ep, const shm_rx_pkt_t *rx)
{
    shm_pkt_wdata_t pkt = rx->u.wdata;
    const uint8_t *p = rx->payload;
    uccl_region_t *region;
    uccl_status_t st;

    st = shm_rx_target(ep, pkt.region_id, pkt.addr, pkt.len, &region);
    if (st != UCCL_OK) {
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, pkt.id, 0, st);
        return;
    }
    if (uccl_region_mem_type(region) == UCCL_MEM_HOST) {
        memcpy((void *)(uintptr_t)pkt.addr, p, pkt.len);
        if (pkt.last)
            shm_write_done(ep, pkt.id, pkt.has_notif, pkt.notif);
        return;
    }
    st = uccl_stage_copy_in(ep->tp->stage, NULL, (uint8_t *)(uintptr_t)pkt.addr, 0, p, pkt.len);
    if (st == UCCL_OK && pkt.last) /* the FIN waits for the H2D copies */
        st = uccl_stage_defer(ep->tp->stage, ep, shm_write_done_deferred, ep, pkt.id,
                              pkt.has_notif, pkt.notif);
    if (st != UCCL_OK) {
        uccl_error("shm: staging a write into GPU memory failed: %s", uccl_strerror(st));
        uccl_conn_fail(ep->base.conn, st);
    }
}

static void shm_rx_one(shm_ep_t *ep, const uint8_t *p, const shm_pkt_hdr_t *hdr)
{
    shm_rx_pkt_t rx;

    if (uccl_shm_pkt_parse(p, hdr, &rx) != UCCL_OK) {
        shm_rx_bad(ep, uccl_shm_pkt_name(hdr->type));
        return;
    }
    switch (hdr->type) {
    case SHM_PKT_EAGER: shm_rx_eager(ep, &rx); break;
    case SHM_PKT_RTS: shm_rx_rts(ep, &rx); break;
    case SHM_PKT_DATA: shm_rx_data(ep, &rx); break;
    case SHM_PKT_RMA: shm_rx_rma(ep, &rx); break;
    case SHM_PKT_WDATA: shm_rx_wdata(ep, &rx); break;
    case SHM_PKT_OFFER: uccl_shm_rx_offer(ep, &rx.u.offer, rx.iov); break;
    case SHM_PKT_CTS: shm_rx_cts(ep, &rx.u.ctl); break;
    case SHM_PKT_DONE: uccl_shm_rx_done(ep, &rx.u.ctl); break;
    case SHM_PKT_FIN: shm_rx_fin(ep, &rx.u.ctl); break;
    }
}

int uccl_shm_rx_progress(shm_ep_t *ep)
{
    int events = 0;

    while (events < SHM_RX_BUDGET) {
        shm_pkt_hdr_t hdr;
        bool bad;
        const uint8_t *p = uccl_spsc_peek(&ep->rx, &hdr, &bad);

        if (p == NULL) {
            if (bad)
                shm_rx_bad(ep, "ring");
            break;
        }
        shm_rx_one(ep, p, &hdr);
        uccl_spsc_release(&ep->rx, hdr.size);
        events++;
        if (uccl_conn_status(ep->base.conn) != UCCL_OK)
            break;
    }
    return events;
}

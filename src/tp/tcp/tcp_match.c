/* What incoming chunks mean: two-sided messages handed to the core's
 * matching in send order (message ids are dense, a message is presented
 * only after every earlier one), and the target side of one-sided operations.
 * Bytes bound for GPU memory go through staging, and whatever reports them
 * done (completion, write reply, notification) waits for the H2D copies. */
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

/* Ids are the peer's: messages and writes count apart, so each has a map. */
static uccl_hmap_t *tcp_rec_ids(tcp_ep_t *ep, uint8_t type)
{
    return &ep->rx_ids[type == TCP_FRAME_MSG ? 0 : 1];
}

/* rec has all its bytes (or goes): it leaves rx_active. */
static void tcp_rec_deactivate(tcp_ep_t *ep, tcp_rx_rec_t *rec)
{
    if (!rec->in_active)
        return;
    uccl_hmap_del(tcp_rec_ids(ep, rec->type), rec->id);
    uccl_list_del(&rec->link);
    rec->in_active = false;
}

static void tcp_rec_free(tcp_ep_t *ep, tcp_rx_rec_t *rec)
{
    tcp_rec_deactivate(ep, rec);
    uccl_list_del(&rec->link);
    uccl_list_del(&rec->uq_link);
    free(rec->bounce);
    free(rec);
}

static tcp_rx_rec_t *tcp_rec_find(tcp_ep_t *ep, uint8_t type, uint64_t id)
{
    return uccl_hmap_get(tcp_rec_ids(ep, type), id);
}

static tcp_rx_rec_t *tcp_rec_new(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    tcp_rx_rec_t *rec = calloc(1, sizeof(*rec));

    if (rec == NULL)
        return NULL;
    uccl_list_init(&rec->uq_link);
    rec->type = h->type;
    rec->id = h->id;
    rec->total = h->total;
    if (uccl_hmap_put(tcp_rec_ids(ep, rec->type), rec->id, rec) != UCCL_OK) {
        free(rec);
        return NULL;
    }
    rec->in_active = true;
    uccl_list_push_back(&ep->rx_active, &rec->link);
    return rec;
}

static bool tcp_req_staged(tcp_ep_t *ep, const uccl_req_t *req)
{
    return tcp_tp_of(ep)->stage != NULL && uccl_stage_req_is_gpu(req);
}

/* All bytes of a receive or read are in (or their copies issued): complete
 * it, after the H2D copies when staged. */
static void tcp_req_done(tcp_ep_t *ep, uccl_req_t *req, bool staged, size_t total)
{
    uccl_status_t st;

    if (!staged) {
        uccl_req_complete(req, UCCL_OK, total);
        return;
    }
    st = uccl_stage_complete_req(tcp_tp_of(ep)->stage, ep, req, UCCL_OK, total);
    if (st != UCCL_OK) {
        uccl_error("tcp: cannot wait for the copies into GPU memory: %s", uccl_strerror(st));
        uccl_req_complete(req, st, 0);
    }
}

/* A message with all its bytes in and a receive matched: hand it over. */
static void tcp_rec_settle(tcp_ep_t *ep, tcp_rx_rec_t *rec)
{
    bool staged;

    if (!rec->presented || !rec->chunk_seen || rec->received != rec->total)
        return;
    tcp_rec_deactivate(ep, rec);
    if (rec->req == NULL) {
        rec->msg.complete = true; /* stays on the unexpected list, whole */
        return;
    }
    staged = tcp_req_staged(ep, rec->req);
    if (rec->bounce != NULL && staged) {
        uccl_status_t st = uccl_stage_copy_in(tcp_tp_of(ep)->stage, rec->req, NULL, 0, rec->bounce,
                                              rec->total);
        if (st != UCCL_OK) {
            uccl_error("tcp: staging a message into GPU memory failed: %s", uccl_strerror(st));
            uccl_req_complete(rec->req, st, 0);
            tcp_rec_free(ep, rec);
            return;
        }
    } else if (rec->bounce != NULL) {
        uccl_req_iov_copy_in(rec->req, 0, rec->bounce, rec->total);
    }
    tcp_req_done(ep, rec->req, staged, rec->total);
    tcp_rec_free(ep, rec);
}

/* A rendezvous message has its receive: ask the sender for its bytes. */
static void tcp_rndv_cts(tcp_ep_t *ep, tcp_rx_rec_t *rec)
{
    if (!rec->rndv || rec->cts_sent || rec->req == NULL)
        return;
    rec->cts_sent = true;
    if (uccl_tcp_queue_cts(ep, rec->id, rec->total) != UCCL_OK)
        uccl_tcp_ep_fail(ep, "out of memory for a clear to send");
}

/* The next message in send order goes to the core's matching: into the
 * receive it has for it, or held until one comes (uccl_tcp_msg_deliver). */
static void tcp_present(tcp_ep_t *ep, tcp_rx_rec_t *rec)
{
    uccl_conn_t *conn = ep->base.conn;

    rec->presented = true;
    if (uccl_msg_arrived(conn, &ep->base, rec->msg_seq, rec->tag, rec->total, &rec->req) !=
        UCCL_OK) {
        uccl_tcp_ep_fail(ep, "a message number came twice");
        return;
    }
    if (rec->req == NULL) {
        /* the payload comes in whole, or (rendezvous) not before a receive */
        rec->msg = (uccl_msg_t){.seq = rec->msg_seq, .tag = rec->tag, .len = rec->total,
                                .bytes = rec->rndv ? 0 : rec->total};
        uccl_list_push_back(&ep->unexpected, &rec->uq_link);
        uccl_msg_hold(conn, &ep->base, &rec->msg);
    }
    tcp_rndv_cts(ep, rec);
    tcp_rec_settle(ep, rec);
}

static void tcp_present_ready(tcp_ep_t *ep)
{
    tcp_rx_rec_t *rec;

    while ((rec = tcp_rec_find(ep, TCP_FRAME_MSG, ep->next_rx_id)) != NULL && !rec->presented) {
        ep->next_rx_id++;
        tcp_present(ep, rec);
    }
}

void uccl_tcp_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    tcp_rx_rec_t *rec = uccl_container_of(msg, tcp_rx_rec_t, msg);

    uccl_list_del(&rec->uq_link);
    rec->req = req;
    tcp_rndv_cts((tcp_ep_t *)base, rec);
    tcp_rec_settle((tcp_ep_t *)base, rec);
}

/* ------------------------------------------------------------------ chunk starts */

static bool tcp_begin_msg(tcp_stream_t *s, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = s->ep;
    tcp_rx_rec_t *rec = tcp_rec_find(ep, TCP_FRAME_MSG, h->id);
    bool rts = (h->flags & TCP_FLAG_RNDV) != 0;

    if (rec == NULL) {
        if (h->id < ep->next_rx_id) {
            uccl_tcp_ep_fail(ep, "chunk of a message already delivered");
            return false;
        }
        rec = tcp_rec_new(ep, h);
        if (rec == NULL) {
            uccl_tcp_ep_fail(ep, "out of memory for an incoming message");
            return false;
        }
        rec->tag = h->a;
        rec->msg_seq = h->b;
        rec->rndv = rts;
        tcp_present_ready(ep);
        if (uccl_conn_status(ep->base.conn) != UCCL_OK)
            return false;
    } else if (rts || (rec->rndv && !rec->cts_sent)) {
        /* a second RTS, or bytes of a rendezvous message we did not ask for */
        uccl_tcp_ep_fail(ep, "chunk of a rendezvous message before its clear to send");
        return false;
    }
    /* chunks of one message on several streams: they may not add up past
     * its length (the record goes when its bytes are in, while an
     * overlapping chunk could still be arriving into it) */
    if (rec->tag != h->a || rec->msg_seq != h->b || rec->total != h->total ||
        h->clen > rec->total - rec->received - rec->inflight) {
        uccl_tcp_ep_fail(ep, "inconsistent chunk of a message");
        return false;
    }
    rec->inflight += h->clen;
    s->target = rec;
    if (rts)
        return true; /* no bytes: the sink stays DISCARD */
    if (rec->req != NULL && rec->bounce == NULL) {
        s->sink = (tcp_sink_t){.kind = TCP_SINK_REQ, .req = rec->req, .pos = h->off,
                               .staged = tcp_req_staged(ep, rec->req)};
        return true;
    }
    if (rec->bounce == NULL && rec->total > 0 && (rec->bounce = malloc(rec->total)) == NULL) {
        uccl_tcp_ep_fail(ep, "out of memory for an unexpected message");
        return false;
    }
    s->sink = (tcp_sink_t){.kind = TCP_SINK_FLAT, .ptr = rec->bounce, .pos = h->off};
    return true;
}

/* Target of a write: every chunk is checked against the live regions. */
static bool tcp_begin_write(tcp_stream_t *s, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = s->ep;
    uccl_engine_t *engine = ep->base.tp->engine;
    tcp_rx_rec_t *rec = tcp_rec_find(ep, TCP_FRAME_WRITE, h->id);
    uccl_region_t *region;

    if (rec == NULL) {
        rec = tcp_rec_new(ep, h);
        if (rec == NULL) {
            uccl_tcp_ep_fail(ep, "out of memory for an incoming write");
            return false;
        }
        rec->region_id = h->a;
        rec->addr = h->b;
        rec->notif = h->c;
        rec->has_notif = (h->flags & TCP_FLAG_NOTIF) != 0;
        rec->status = uccl_engine_region_find(engine, h->a, h->b, h->total, &region);
    }
    if (rec->region_id != h->a || rec->addr != h->b || rec->total != h->total ||
        h->clen > rec->total - rec->received - rec->inflight) {
        uccl_tcp_ep_fail(ep, "inconsistent chunk of a write");
        return false;
    }
    rec->inflight += h->clen;
    if (rec->status == UCCL_OK)
        rec->status = uccl_engine_region_find(engine, h->a, h->b + h->off, h->clen, &region);
    if (rec->status == UCCL_OK && uccl_region_mem_type(region) != UCCL_MEM_HOST && tcp_tp_of(ep)->stage == NULL)
        rec->status = UCCL_ERR_REMOTE_ACCESS; /* GPU memory, and no GPU staging here */
    if (rec->status != UCCL_OK) {
        s->sink = (tcp_sink_t){.kind = TCP_SINK_DISCARD};
    } else {
        bool staged = uccl_region_mem_type(region) != UCCL_MEM_HOST;
        s->sink = (tcp_sink_t){.kind = TCP_SINK_FLAT, .ptr = (uint8_t *)(uintptr_t)h->b, .pos = h->off,
                               .staged = staged};
        rec->staged = rec->staged || staged;
    }
    s->target = rec;
    return true;
}

static bool tcp_begin_read_req(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    uccl_region_t *region;
    uccl_status_t st = uccl_engine_region_find(ep->base.tp->engine, h->a, h->b, h->total, &region);

    if (st == UCCL_OK && uccl_region_mem_type(region) != UCCL_MEM_HOST && tcp_tp_of(ep)->stage == NULL)
        st = UCCL_ERR_REMOTE_ACCESS; /* GPU memory, and no GPU staging here */
    if (st == UCCL_OK)
        st = uccl_tcp_queue_read_data(ep, h->id, (const uint8_t *)(uintptr_t)h->b, h->total,
                                 uccl_region_mem_type(region) != UCCL_MEM_HOST);
    else
        st = uccl_tcp_queue_ack(ep, h->id, st);
    if (st != UCCL_OK) {
        uccl_tcp_ep_fail(ep, "out of memory for a read response");
        return false;
    }
    return true;
}

static tcp_op_t *tcp_rma_find(tcp_ep_t *ep, uint64_t id)
{
    return uccl_idmap_lookup(&ep->rma_ids, id);
}

static bool tcp_begin_read_data(tcp_stream_t *s, const tcp_hdr_t *h)
{
    tcp_op_t *op = tcp_rma_find(s->ep, h->id);

    if (op == NULL || op->hdr.type != TCP_FRAME_READ_REQ || !op->sent || op->hdr.total != h->total ||
        h->clen > op->hdr.total - op->received - op->rx_inflight) {
        uccl_tcp_ep_fail(s->ep, "read data that matches no read in flight");
        return false;
    }
    op->rx_busy++;
    op->rx_inflight += h->clen;
    s->target = op;
    s->sink = (tcp_sink_t){.kind = TCP_SINK_REQ, .req = op->req, .pos = h->off, .staged = op->gpu};
    return true;
}

/* The peer's verdict on a write (done or refused) or a refused read. */
static bool tcp_handle_ack(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    tcp_op_t *op = tcp_rma_find(ep, h->id);
    uccl_status_t st = (uccl_status_t)(int64_t)h->a;

    if (op == NULL || !op->sent || op->rx_busy > 0 || (st == UCCL_OK && op->hdr.type != TCP_FRAME_WRITE)) {
        uccl_tcp_ep_fail(ep, "reply that matches no operation in flight");
        return false;
    }
    /* the refusals the target sends, and TRANSPORT: its copies into GPU
     * memory failed (bytes did land: not REMOTE_ACCESS, which says none) */
    if (st != UCCL_OK && st != UCCL_ERR_REMOTE_ACCESS && st != UCCL_ERR_STALE && st != UCCL_ERR_TRANSPORT)
        st = UCCL_ERR_REMOTE_ACCESS;
    uccl_req_complete(op->req, st, st == UCCL_OK ? op->hdr.total : 0);
    uccl_tcp_op_free(op);
    return true;
}

bool uccl_tcp_rx_chunk_begin(tcp_stream_t *s)
{
    const tcp_hdr_t *h = &s->cur;

    s->target = NULL;
    s->sink = (tcp_sink_t){.kind = TCP_SINK_DISCARD};
    switch (h->type) {
    case TCP_FRAME_MSG: return tcp_begin_msg(s, h);
    case TCP_FRAME_WRITE: return tcp_begin_write(s, h);
    case TCP_FRAME_READ_REQ: return tcp_begin_read_req(s->ep, h);
    case TCP_FRAME_READ_DATA: return tcp_begin_read_data(s, h);
    case TCP_FRAME_CTS:
        if (uccl_tcp_rndv_go(s->ep, h->id, h->total))
            return true;
        uccl_tcp_ep_fail(s->ep, "clear to send for no message of that number and length waiting for one");
        return false;
    default: return tcp_handle_ack(s->ep, h);
    }
}

/* ------------------------------------------------------------------ chunk ends */

/* A write's bytes are all in place: notify, then reply. */
static void tcp_write_done(tcp_ep_t *ep, uint64_t id, uccl_status_t st, bool has_notif, uint64_t notif)
{
    if (st == UCCL_OK && has_notif)
        st = uccl_conn_notif_push(ep->base.conn, notif);
    if (uccl_tcp_queue_ack(ep, id, st) != UCCL_OK)
        uccl_tcp_ep_fail(ep, "out of memory for a write reply");
}

/* The H2D copies of a staged write are done (or failed: no notification,
 * a failed reply). */
static void tcp_write_done_deferred(void *arg, uccl_status_t copy_status, uint64_t id,
                                    uint64_t has_notif, uint64_t notif)
{
    tcp_write_done(arg, id, copy_status, has_notif != 0, notif);
}

static void tcp_end_write(tcp_ep_t *ep, tcp_rx_rec_t *rec, uint32_t clen)
{
    rec->inflight -= clen;
    rec->received += clen;
    if (rec->received < rec->total)
        return;
    if (rec->status == UCCL_OK && rec->staged) {
        rec->status = uccl_stage_defer(tcp_tp_of(ep)->stage, ep, tcp_write_done_deferred, ep, rec->id,
                                       rec->has_notif, rec->notif);
        if (rec->status == UCCL_OK) {
            tcp_rec_free(ep, rec); /* the reply goes once the copies are done */
            return;
        }
    }
    tcp_write_done(ep, rec->id, rec->status, rec->has_notif, rec->notif);
    tcp_rec_free(ep, rec);
}

void uccl_tcp_rx_chunk_end(tcp_stream_t *s)
{
    const tcp_hdr_t *h = &s->cur;

    if (s->target == NULL)
        return;
    if (h->type == TCP_FRAME_MSG) {
        tcp_rx_rec_t *rec = s->target;
        rec->inflight -= h->clen;
        rec->received += h->clen;
        rec->chunk_seen = true;
        tcp_rec_settle(s->ep, rec);
    } else if (h->type == TCP_FRAME_WRITE) {
        tcp_end_write(s->ep, s->target, h->clen);
    } else if (h->type == TCP_FRAME_READ_DATA) {
        tcp_op_t *op = s->target;
        op->rx_busy--;
        op->rx_inflight -= h->clen;
        op->received += h->clen;
        if (op->received == op->hdr.total) {
            tcp_req_done(s->ep, op->req, op->gpu, op->hdr.total);
            uccl_tcp_op_free(op);
        }
    }
    s->target = NULL;
}

void uccl_tcp_match_release(tcp_ep_t *ep)
{
    uccl_list_t *pos, *tmp;

    uccl_list_for_each_safe(pos, tmp, &ep->rx_active)
        tcp_rec_free(ep, uccl_container_of(pos, tcp_rx_rec_t, link));
    uccl_list_for_each_safe(pos, tmp, &ep->unexpected)
        tcp_rec_free(ep, uccl_container_of(pos, tcp_rx_rec_t, uq_link));
    uccl_hmap_fini(&ep->rx_ids[0]);
    uccl_hmap_fini(&ep->rx_ids[1]);
}

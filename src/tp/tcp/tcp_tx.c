/* Sending side of the tcp transport: operations are cut into chunks that
 * free streams pull in turn, and written with sendmsg straight from the
 * user's buffers (no copy), several frames per call. GPU memory is fed to
 * the sockets from staged sources: pinned buffers filled D2H ahead. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp.h"

#define TCP_TX_IOV 256

static tcp_op_t *tcp_op_new(tcp_ep_t *ep, uint8_t type, uint64_t id, uint64_t total)
{
    tcp_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return NULL;
    uccl_list_init(&op->tx_link);
    uccl_list_init(&op->wait_link);
    op->ep = ep;
    op->hdr.type = type;
    op->hdr.id = id;
    op->hdr.total = total;
    uccl_list_push_back(&ep->ops, &op->all_link);
    uccl_list_push_back(&ep->tx_queue, &op->tx_link);
    return op;
}

/* The payload of op (req or flat) is GPU memory: read it through a source. */
static void tcp_op_stage(tcp_ep_t *ep, tcp_op_t *op, const uint8_t *flat)
{
    const uint8_t *ptr;
    size_t n;

    op->gpu = true;
    if (op->hdr.total == 0)
        return;
    uccl_stage_src_init(&op->src, tcp_tp_of(ep)->stage, flat != NULL ? NULL : op->req, flat,
                        op->hdr.total);
    /* start the first copies now; an error shows again when a frame is cut */
    (void)uccl_stage_src_peek(&op->src, &ptr, &n, NULL);
}

void uccl_tcp_op_free(tcp_op_t *op)
{
    if (op->src.stage != NULL)
        uccl_stage_src_fini(&op->src);
    uccl_list_del(&op->all_link);
    uccl_list_del(&op->tx_link);
    uccl_list_del(&op->wait_link);
    if (op->waiting)
        uccl_idmap_remove(&op->ep->rma_ids, op->hdr.id);
    free(op);
}

int uccl_tcp_req_iovec(const uccl_req_t *req, size_t off, size_t len, struct iovec *out, int max)
{
    uccl_req_cur_t cur;
    uint8_t *addr;
    size_t take;
    int n = 0;

    uccl_req_cur_init(&cur, req, off);
    while (n < max && (take = uccl_req_cur_next(&cur, len, &addr, NULL)) > 0) {
        out[n++] = (struct iovec){addr, take};
        len -= take;
    }
    return n;
}

uccl_status_t uccl_tcp_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tcp_ep_t *ep = (tcp_ep_t *)base;
    tcp_op_t *op = tcp_op_new(ep, TCP_FRAME_MSG, ep->next_msg_id, req->len);

    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->next_msg_id++;
    op->hdr.a = req->tag;
    op->hdr.b = req->msg_seq;
    op->req = req;
    if (tcp_tp_of(ep)->cfg.rndv_min > 0 && req->len >= tcp_tp_of(ep)->cfg.rndv_min)
        op->rndv = TCP_RNDV_RTS;
    /* GPU memory: staged from now, or (rendezvous) from the CTS on, so that
     * a message waiting for its receive holds no pinned buffer */
    if (tcp_tp_of(ep)->stage != NULL && uccl_stage_req_is_gpu(req) && op->rndv == TCP_RNDV_NONE)
        tcp_op_stage(ep, op, NULL);
    else if (tcp_tp_of(ep)->stage != NULL && uccl_stage_req_is_gpu(req))
        op->gpu = true;
    return UCCL_OK;
}

static uccl_status_t tcp_post_rma(tcp_ep_t *ep, uccl_req_t *req, uint8_t type)
{
    tcp_op_t *op = tcp_op_new(ep, type, 0, req->len);

    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (uccl_idmap_insert(&ep->rma_ids, op, &op->hdr.id) != UCCL_OK) {
        uccl_tcp_op_free(op);
        return UCCL_ERR_NO_MEMORY;
    }
    op->hdr.a = req->remote.region_id;
    op->hdr.b = req->remote.addr;
    if (req->has_notif) {
        op->hdr.flags = TCP_FLAG_NOTIF;
        op->hdr.c = req->notif;
    }
    op->req = req;
    if (tcp_tp_of(ep)->stage != NULL && uccl_stage_req_is_gpu(req)) {
        if (type == TCP_FRAME_WRITE)
            tcp_op_stage(ep, op, NULL);
        else
            op->gpu = true; /* the read's data lands through staging */
    }
    op->waiting = true;
    uccl_list_push_back(&ep->rma_wait, &op->wait_link);
    return UCCL_OK;
}

uccl_status_t uccl_tcp_post_write(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return tcp_post_rma((tcp_ep_t *)base, req, TCP_FRAME_WRITE);
}

uccl_status_t uccl_tcp_post_read(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return tcp_post_rma((tcp_ep_t *)base, req, TCP_FRAME_READ_REQ);
}

uccl_status_t uccl_tcp_queue_ack(tcp_ep_t *ep, uint64_t id, uccl_status_t status)
{
    tcp_op_t *op = tcp_op_new(ep, TCP_FRAME_ACK, id, 0);

    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    op->hdr.a = (uint64_t)(int64_t)status;
    return UCCL_OK;
}

uccl_status_t uccl_tcp_queue_cts(tcp_ep_t *ep, uint64_t id, uint64_t len)
{
    return tcp_op_new(ep, TCP_FRAME_CTS, id, len) != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

/* CTSs come in the order the receives took their messages, mostly the send
 * order: the one asked for is nearly always the first that waits. */
bool uccl_tcp_rndv_go(tcp_ep_t *ep, uint64_t id, uint64_t len)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &ep->rndv_wait) {
        tcp_op_t *op = uccl_container_of(pos, tcp_op_t, wait_link);
        if (op->hdr.id == id) {
            if (op->hdr.total != len)
                return false; /* the receiver took another message than this */
            uccl_list_del(&op->wait_link);
            op->rndv = TCP_RNDV_GO;
            uccl_list_push_back(&ep->tx_queue, &op->tx_link);
            if (op->gpu)
                tcp_op_stage(ep, op, NULL);
            return true;
        }
    }
    return false;
}

uccl_status_t uccl_tcp_queue_read_data(tcp_ep_t *ep, uint64_t id, const uint8_t *src, uint64_t len,
                                  bool gpu)
{
    tcp_op_t *op = tcp_op_new(ep, TCP_FRAME_READ_DATA, id, len);

    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    op->flat = src;
    if (gpu)
        tcp_op_stage(ep, op, src);
    return UCCL_OK;
}

static size_t tcp_op_payload(const tcp_op_t *op)
{
    uint8_t t = op->hdr.type;
    return t == TCP_FRAME_MSG || t == TCP_FRAME_WRITE || t == TCP_FRAME_READ_DATA ? op->hdr.total : 0;
}

/* Every chunk of op is in the socket: finish what depends only on that. */
static void tcp_op_sent(tcp_op_t *op)
{
    op->sent = true;
    if (op->hdr.type == TCP_FRAME_MSG)
        uccl_req_complete(op->req, UCCL_OK, op->hdr.total);
    if (!op->waiting)
        uccl_tcp_op_free(op);
}

/* A copy out of our GPU memory failed. An operation of which nothing is on
 * the wire yet fails alone (a read response becomes a refusal); else the
 * peer holds part of it and only failing the connection is sane. */
static void tcp_op_stage_failed(tcp_ep_t *ep, tcp_op_t *op, uccl_status_t st)
{
    uccl_error("tcp: staging %llu bytes out of GPU memory failed: %s",
               (unsigned long long)op->hdr.total, uccl_strerror(st));
    if (op->next_off == 0 && op->hdr.type == TCP_FRAME_WRITE) {
        uccl_req_complete(op->req, st, 0);
        uccl_tcp_op_free(op);
    } else if (op->next_off == 0 && op->hdr.type == TCP_FRAME_READ_DATA) {
        uccl_stage_src_fini(&op->src);
        op->src.stage = NULL;
        op->flat = NULL;
        op->hdr.type = TCP_FRAME_ACK;
        op->hdr.total = 0;
        op->hdr.a = (uint64_t)(int64_t)UCCL_ERR_REMOTE_ACCESS;
    } else {
        uccl_conn_fail(ep->base.conn, st);
    }
}

/* A staged op's next frame takes the pinned bytes that are ready (at most
 * *len) and holds their buffer until sent. UCCL_INPROGRESS while the D2H
 * copy runs; another error when it failed (op is then failed or changed). */
static uccl_status_t tcp_frame_stage(tcp_ep_t *ep, tcp_op_t *op, tcp_frame_t *f, size_t *len)
{
    uccl_stage_buf_t *buf;
    const uint8_t *ptr;
    size_t avail;
    uccl_status_t st;

    f->buf = NULL;
    f->data = NULL;
    if (op->src.stage == NULL || *len == 0)
        return UCCL_OK;
    st = uccl_stage_src_peek(&op->src, &ptr, &avail, &buf);
    if (st != UCCL_OK) {
        if (st != UCCL_INPROGRESS)
            tcp_op_stage_failed(ep, op, st);
        return st;
    }
    *len = avail < *len ? avail : *len;
    uccl_stage_buf_hold(buf);
    uccl_stage_src_take(&op->src, *len);
    f->buf = buf;
    f->data = ptr;
    return UCCL_OK;
}

/* Pull chunks from the endpoint's queue into the stream's ring. */
static void tcp_stream_fill(tcp_stream_t *s, size_t chunk)
{
    tcp_ep_t *ep = s->ep;

    while (s->tx_count < TCP_TX_RING && s->tx_bytes < chunk && !uccl_list_empty(&ep->tx_queue) &&
           uccl_conn_status(ep->base.conn) == UCCL_OK) {
        tcp_op_t *op = uccl_list_first(&ep->tx_queue, tcp_op_t, tx_link);
        tcp_frame_t *f = &s->ring[(s->tx_head + s->tx_count) % TCP_TX_RING];
        bool rts = op->rndv == TCP_RNDV_RTS;
        size_t payload = rts ? 0 : tcp_op_payload(op);
        size_t len = payload - op->next_off < chunk ? payload - op->next_off : chunk;
        uccl_status_t st = tcp_frame_stage(ep, op, f, &len);
        tcp_hdr_t h;

        if (st == UCCL_INPROGRESS)
            break; /* the copy engine runs; the next progress call goes on */
        if (st != UCCL_OK)
            continue; /* op failed, or became a refusal to send next */
        h = op->hdr;
        h.off = op->next_off;
        h.clen = (uint32_t)len;
        if (rts)
            h.flags |= TCP_FLAG_RNDV;
        tcp_hdr_encode(&h, f->hdr);
        f->op = op;
        f->off = op->next_off;
        f->len = len;
        f->sent = 0;
        op->next_off += len;
        op->frames++;
        if (rts) { /* the bytes wait for the receiver's CTS */
            op->rndv = TCP_RNDV_WAIT;
            uccl_list_del(&op->tx_link);
            uccl_list_push_back(&ep->rndv_wait, &op->wait_link);
        } else if (op->next_off == payload) {
            op->cut_done = true;
            uccl_list_del(&op->tx_link);
        }
        s->tx_count++;
        s->tx_bytes += TCP_HDR_LEN + len;
    }
}

static int tcp_frame_iovec(const tcp_frame_t *f, struct iovec *iov, int max)
{
    size_t poff = f->sent > TCP_HDR_LEN ? f->sent - TCP_HDR_LEN : 0;
    int n = 0;

    if (f->sent < TCP_HDR_LEN) {
        iov[n].iov_base = (void *)(f->hdr + f->sent);
        iov[n].iov_len = TCP_HDR_LEN - f->sent;
        n++;
    }
    if (f->len == poff)
        return n;
    if (f->data != NULL) {
        iov[n].iov_base = (void *)(f->data + poff);
        iov[n].iov_len = f->len - poff;
        return n + 1;
    }
    if (f->op->flat != NULL) {
        iov[n].iov_base = (void *)(f->op->flat + f->off + poff);
        iov[n].iov_len = f->len - poff;
        return n + 1;
    }
    return n + uccl_tcp_req_iovec(f->op->req, f->off + poff, f->len - poff, iov + n, max - n);
}

/* Account n written bytes to the hello and the ring's frames, in order. */
static void tcp_stream_consume(tcp_stream_t *s, size_t n)
{
    size_t h = n < s->hello_left ? n : s->hello_left;

    s->hello_left -= h;
    n -= h;
    /* every frame has a header, so a frame is done only when bytes reach it */
    while (s->tx_count > 0) {
        tcp_frame_t *f = &s->ring[s->tx_head];
        size_t rest = TCP_HDR_LEN + f->len - f->sent;
        size_t take = n < rest ? n : rest;

        f->sent += take;
        n -= take;
        if (take < rest)
            break;
        s->tx_head = (s->tx_head + 1) % TCP_TX_RING;
        s->tx_count--;
        s->tx_bytes -= TCP_HDR_LEN + f->len;
        if (f->buf != NULL)
            uccl_stage_buf_put(tcp_tp_of(s->ep)->stage, f->buf);
        if (--f->op->frames == 0 && f->op->cut_done)
            tcp_op_sent(f->op);
    }
}

/* One sendmsg of the hello and as many queued frames as fit one call. */
static size_t tcp_stream_send(tcp_stream_t *s)
{
    struct iovec iov[TCP_TX_IOV];
    struct msghdr msg = {.msg_iov = iov};
    size_t want = 0;
    ssize_t n;
    int cnt = 0;

    if (s->hello_left > 0) {
        iov[cnt].iov_base = s->hello + TCP_HELLO_LEN - s->hello_left;
        iov[cnt++].iov_len = s->hello_left;
    }
    for (int i = 0; i < s->tx_count && cnt < TCP_TX_IOV - UCCL_IOV_MAX - 2; i++)
        cnt += tcp_frame_iovec(&s->ring[(s->tx_head + i) % TCP_TX_RING], iov + cnt, TCP_TX_IOV - cnt);
    for (int i = 0; i < cnt; i++)
        want += iov[i].iov_len;
    msg.msg_iovlen = (size_t)cnt;
    n = cnt > 0 ? sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            s->writable = false;
        else if (errno != EINTR)
            uccl_tcp_stream_lost(s, strerror(errno));
        return 0;
    }
    if ((size_t)n < want)
        s->writable = false; /* the socket is full; epoll says when it drains */
    tcp_stream_consume(s, (size_t)n);
    return (size_t)n;
}

void uccl_tcp_stream_tx_release(tcp_stream_t *s)
{
    for (; s->tx_count > 0; s->tx_count--) {
        tcp_frame_t *f = &s->ring[s->tx_head];

        if (f->buf != NULL)
            uccl_stage_buf_put(tcp_tp_of(s->ep)->stage, f->buf);
        s->tx_head = (s->tx_head + 1) % TCP_TX_RING;
    }
}

int uccl_tcp_ep_tx(tcp_ep_t *ep, size_t budget)
{
    size_t chunk = tcp_tp_of(ep)->cfg.chunk;
    size_t streams = (size_t)ep->nstreams; /* 0 until the peer's wiring info is in */
    size_t total = 0;
    size_t limit = streams > 0 && budget > SIZE_MAX / streams ? SIZE_MAX : budget * streams;
    int events = 0;
    bool moved = true;

    /* rounds over the streams: each takes about one chunk per round, which
     * stripes large messages and lets a slow stream fall behind */
    while (moved && total < limit && !ep->failing && uccl_conn_status(ep->base.conn) == UCCL_OK) {
        moved = false;
        for (int i = 0; i < ep->nstreams && !ep->failing && uccl_conn_status(ep->base.conn) == UCCL_OK; i++) {
            tcp_stream_t *s = &ep->streams[i];
            size_t n;

            if (s->state != TCP_STREAM_UP || !s->writable)
                continue;
            tcp_stream_fill(s, chunk);
            if (s->tx_count == 0 && s->hello_left == 0)
                continue;
            n = tcp_stream_send(s);
            if (n > 0) {
                moved = true;
                total += n;
                events++;
            }
        }
    }
    return events;
}

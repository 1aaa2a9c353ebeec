/* Receiving side of the tcp transport: one state machine per stream that
 * reads headers (and small payloads) through a staging buffer and large
 * payloads straight into their destination with readv, or for GPU memory
 * into pinned buffers that are copied H2D. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp.h"

#define TCP_RX_IOV UCCL_IOV_MAX

/* A copy into our own GPU memory could not be issued: the data is lost. */
static void tcp_rx_stage_failed(tcp_stream_t *s, uccl_status_t st)
{
    uccl_error("tcp: staging received bytes into GPU memory failed: %s", uccl_strerror(st));
    uccl_conn_fail(s->ep->base.conn, st);
}

static uccl_status_t tcp_sink_put(tcp_stream_t *s, const uint8_t *src, size_t n)
{
    tcp_sink_t *sink = &s->sink;
    uccl_status_t st = UCCL_OK;

    if (sink->staged)
        st = uccl_stage_copy_in(tcp_tp_of(s->ep)->stage, sink->kind == TCP_SINK_REQ ? sink->req : NULL,
                                sink->ptr, sink->pos, src, n);
    else if (sink->kind == TCP_SINK_REQ)
        uccl_req_iov_copy_in(sink->req, sink->pos, src, n);
    else if (sink->kind == TCP_SINK_FLAT)
        memcpy(sink->ptr + sink->pos, src, n);
    sink->pos += n;
    return st;
}

/* Read the rest of a payload bound for GPU memory into pinned memory. */
static ssize_t tcp_stream_read_pinned(tcp_stream_t *s, size_t *want, uccl_status_t *st)
{
    tcp_sink_t *sink = &s->sink;
    uint8_t *dst;

    *st = uccl_stage_sink_reserve(tcp_tp_of(s->ep)->stage, sink->kind == TCP_SINK_REQ ? sink->req : NULL,
                                  sink->ptr, &dst, want);
    if (*st != UCCL_OK)
        return -1;
    *want = *want < s->remaining ? *want : s->remaining;
    return recv(s->fd, dst, *want, 0);
}

/* n bytes were read into the reserved pinned memory: copy them H2D. */
static uccl_status_t tcp_stream_commit_pinned(tcp_stream_t *s, size_t n)
{
    tcp_sink_t *sink = &s->sink;

    return uccl_stage_sink_commit(tcp_tp_of(s->ep)->stage,
                                  sink->kind == TCP_SINK_REQ ? sink->req : NULL, sink->ptr, sink->pos, n);
}

static void tcp_chunk_finish(tcp_stream_t *s)
{
    s->in_payload = false;
    /* after a large chunk the next header likely heads another one: read
     * just the header then, so that its payload goes straight to its place */
    s->header_only = s->cur.clen >= tcp_tp_of(s->ep)->cfg.rxbuf / 2;
    uccl_tcp_rx_chunk_end(s);
}

/* Read the rest of a large payload directly into its destination. */
static ssize_t tcp_stream_read_direct(tcp_stream_t *s, size_t *want)
{
    struct iovec iov[TCP_RX_IOV];
    int cnt;

    if (s->sink.kind == TCP_SINK_FLAT) {
        iov[0].iov_base = s->sink.ptr + s->sink.pos;
        iov[0].iov_len = s->remaining;
        cnt = 1;
    } else {
        cnt = uccl_tcp_req_iovec(s->sink.req, s->sink.pos, s->remaining, iov, TCP_RX_IOV);
    }
    *want = 0;
    for (int i = 0; i < cnt; i++)
        *want += iov[i].iov_len;
    return readv(s->fd, iov, cnt);
}

/* Refill the staging buffer. */
static ssize_t tcp_stream_read_staged(tcp_stream_t *s, size_t *want)
{
    size_t cap = tcp_tp_of(s->ep)->cfg.rxbuf;

    if (s->rhead == s->rtail) {
        s->rhead = s->rtail = 0;
    } else if (s->rhead > 0) {
        memmove(s->rbuf, s->rbuf + s->rhead, s->rtail - s->rhead);
        s->rtail -= s->rhead;
        s->rhead = 0;
    }
    *want = cap - s->rtail;
    if (s->header_only && !s->in_payload && s->rtail < TCP_HDR_LEN)
        *want = TCP_HDR_LEN - s->rtail;
    return recv(s->fd, s->rbuf + s->rtail, *want, 0);
}

/* One read; false when the stream has nothing more for now or is gone. */
static bool tcp_stream_read(tcp_stream_t *s, size_t *total)
{
    size_t want;
    /* a large chunk goes to its destination to its last byte: reading its
     * tail through the staging buffer would also pull in (and copy) the
     * start of the chunk behind it */
    bool direct = s->in_payload && s->rhead == s->rtail && s->sink.kind != TCP_SINK_DISCARD &&
                  s->cur.clen >= tcp_tp_of(s->ep)->cfg.rxbuf / 2;
    uccl_status_t st = UCCL_OK;
    ssize_t n;

    if (!s->readable)
        return false;
    if (direct && s->sink.staged)
        n = tcp_stream_read_pinned(s, &want, &st);
    else
        n = direct ? tcp_stream_read_direct(s, &want) : tcp_stream_read_staged(s, &want);
    if (n > 0 && direct && s->sink.staged)
        st = tcp_stream_commit_pinned(s, (size_t)n);
    if (st != UCCL_OK) {
        tcp_rx_stage_failed(s, st);
        return false;
    }
    if (n < 0) {
        if (errno == EINTR)
            return true;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            s->readable = false;
        else
            uccl_tcp_stream_lost(s, strerror(errno));
        return false;
    }
    if (n == 0) {
        uccl_tcp_stream_lost(s, "closed by the peer");
        return false;
    }
    /* drained: edge-triggered epoll reports new data; but an end of file
     * that came with the data we just read has had its edge already */
    if ((size_t)n < want && !s->rdhup)
        s->readable = false;
    *total += (size_t)n;
    if (direct) {
        s->sink.pos += (size_t)n;
        s->remaining -= (size_t)n;
    } else {
        s->rtail += (size_t)n;
    }
    return true;
}

int uccl_tcp_stream_rx(tcp_stream_t *s, size_t budget)
{
    size_t total = 0;
    int events = 0;

    while (s->state == TCP_STREAM_UP && uccl_conn_status(s->ep->base.conn) == UCCL_OK) {
        size_t avail = s->rtail - s->rhead;

        if (s->in_payload && s->remaining == 0) {
            tcp_chunk_finish(s);
            events++;
        } else if (s->in_payload && avail > 0) {
            size_t n = avail < s->remaining ? avail : s->remaining;
            uccl_status_t st = tcp_sink_put(s, s->rbuf + s->rhead, n);
            if (st != UCCL_OK) {
                tcp_rx_stage_failed(s, st);
                break;
            }
            s->rhead += n;
            s->remaining -= n;
        } else if (!s->in_payload && avail >= TCP_HDR_LEN) {
            if (!tcp_hdr_decode(s->rbuf + s->rhead, &s->cur)) {
                uccl_tcp_ep_fail(s->ep, "malformed frame header from the peer");
                break;
            }
            s->rhead += TCP_HDR_LEN;
            s->remaining = s->cur.clen;
            s->in_payload = true;
            if (!uccl_tcp_rx_chunk_begin(s))
                break; /* it failed the connection */
        } else if (total >= budget || !tcp_stream_read(s, &total)) {
            break;
        }
    }
    return events;
}

/* Endpoints of the tcp transport: wiring info, the initiator opening its
 * streams with a hello, the acceptor attaching them by token, teardown. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

uccl_status_t uccl_tcp_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                            bool is_initiator, uccl_tp_ep_t **out)
{
    tcp_ep_t *ep;
    const uint8_t *a = peer->addr;

    if (a == NULL || peer->addr_len != TCP_ADDR_LEN || a[0] != TCP_WIRE_VERSION) {
        uccl_error("tcp: peer address entry malformed (%zu bytes)", peer->addr_len);
        return UCCL_ERR_BAD_ADDRESS;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->base.tp = tp;
    ep->base.conn = conn;
    ep->is_initiator = is_initiator;
    ep->token = uccl_random_u64();
    ep->peer.sin_family = AF_INET;
    memcpy(&ep->peer.sin_port, a + 2, 2);
    memcpy(&ep->peer.sin_addr.s_addr, a + 4, 4);
    uccl_list_init(&ep->ops);
    uccl_list_init(&ep->tx_queue);
    uccl_list_init(&ep->rma_wait);
    uccl_list_init(&ep->rndv_wait);
    uccl_idmap_init(&ep->rma_ids, 64, 20);
    uccl_list_init(&ep->rx_active);
    uccl_hmap_init(&ep->rx_ids[0]);
    uccl_hmap_init(&ep->rx_ids[1]);
    uccl_list_init(&ep->unexpected);
    uccl_list_push_back(&((tcp_tp_t *)tp)->eps, &ep->link);
    *out = &ep->base;
    return UCCL_OK;
}

uccl_status_t uccl_tcp_ep_pack(uccl_tp_ep_t *base, void *buf, size_t *len)
{
    tcp_ep_t *ep = (tcp_ep_t *)base;
    int n = ep->nstreams ? ep->nstreams : tcp_tp_of(ep)->cfg.num_streams;
    uint8_t *p = buf;

    if (*len < TCP_INFO_LEN) {
        *len = TCP_INFO_LEN;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    uccl_put_u32(p, TCP_INFO_MAGIC);
    uccl_put_u16(p + 4, TCP_WIRE_VERSION);
    uccl_put_u16(p + 6, (uint16_t)n);
    uccl_put_u64(p + 8, ep->token);
    *len = TCP_INFO_LEN;
    return UCCL_OK;
}

static void tcp_socket_tune(tcp_tp_t *tp, int fd)
{
    int one = 1;
    int size = tp->cfg.sockbuf > (size_t)(1 << 30) ? 1 << 30 : (int)tp->cfg.sockbuf;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (size > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    }
}

static uccl_status_t tcp_stream_register(tcp_stream_t *s, int op)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.ptr = &s->poll};

    if (epoll_ctl(tcp_tp_of(s->ep)->epfd, op, s->fd, &ev) != 0) {
        uccl_error("tcp: epoll_ctl: %s", strerror(errno));
        return UCCL_ERR_IO;
    }
    return UCCL_OK;
}

/* Initiator: start a non-blocking connect; the hello goes out first. */
static uccl_status_t tcp_stream_open(tcp_ep_t *ep, tcp_stream_t *s)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        uccl_error("tcp: socket: %s", strerror(errno));
        return UCCL_ERR_IO;
    }
    tcp_socket_tune(tcp_tp_of(ep), fd);
    s->fd = fd;
    if (connect(fd, (struct sockaddr *)&ep->peer, sizeof(ep->peer)) == 0) {
        s->state = TCP_STREAM_UP;
    } else if (errno == EINPROGRESS) {
        s->state = TCP_STREAM_CONNECTING;
    } else {
        uccl_error("tcp: connect to %s:%d: %s", inet_ntoa(ep->peer.sin_addr), ntohs(ep->peer.sin_port),
                   strerror(errno));
        return UCCL_ERR_UNREACHABLE;
    }
    uccl_put_u32(s->hello, TCP_HELLO_MAGIC);
    uccl_put_u16(s->hello + 4, (uint16_t)s->index);
    uccl_put_u16(s->hello + 6, (uint16_t)ep->nstreams);
    uccl_put_u64(s->hello + 8, ep->peer_token);
    s->hello_left = TCP_HELLO_LEN;
    return tcp_stream_register(s, EPOLL_CTL_ADD);
}

uccl_status_t uccl_tcp_ep_connect(uccl_tp_ep_t *base, const void *info, size_t len)
{
    tcp_ep_t *ep = (tcp_ep_t *)base;
    tcp_tp_t *tp = tcp_tp_of(ep);
    const uint8_t *p = info;
    int n;

    if (len != TCP_INFO_LEN || uccl_get_u32(p) != TCP_INFO_MAGIC ||
        uccl_get_u16(p + 4) != TCP_WIRE_VERSION || uccl_get_u16(p + 6) == 0) {
        uccl_error("tcp: peer wiring info malformed (%zu bytes)", len);
        return UCCL_ERR_VERSION;
    }
    n = uccl_get_u16(p + 6);
    n = n < tp->cfg.num_streams ? n : tp->cfg.num_streams;
    ep->peer_token = uccl_get_u64(p + 8);
    ep->nstreams = n;
    ep->streams = calloc((size_t)n, sizeof(*ep->streams));
    if (ep->streams == NULL)
        return UCCL_ERR_NO_MEMORY;
    for (int i = 0; i < n; i++) {
        tcp_stream_t *s = &ep->streams[i];
        s->poll.kind = TCP_POLL_STREAM;
        s->ep = ep;
        s->fd = -1;
        s->index = i;
        s->writable = s->readable = true;
        s->rbuf = malloc(tp->cfg.rxbuf);
        if (s->rbuf == NULL)
            return UCCL_ERR_NO_MEMORY; /* ep_destroy frees what was made */
    }
    if (!ep->is_initiator)
        return UCCL_OK; /* the peer's streams arrive at our listener */
    for (int i = 0; i < n; i++) {
        uccl_status_t st = tcp_stream_open(ep, &ep->streams[i]);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

void uccl_tcp_stream_connect_done(tcp_stream_t *s)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        uccl_error("tcp: stream %d to %s:%d: %s", s->index, inet_ntoa(s->ep->peer.sin_addr),
                   ntohs(s->ep->peer.sin_port), strerror(err));
        s->state = TCP_STREAM_DEAD;
        uccl_tcp_ep_fail(s->ep, "a stream could not connect");
        return;
    }
    s->state = TCP_STREAM_UP;
}

bool uccl_tcp_ep_attach_stream(tcp_tp_t *tp, int fd, const uint8_t *hello)
{
    uint64_t token = uccl_get_u64(hello + 8);
    int index = uccl_get_u16(hello + 4);
    uccl_list_t *pos;

    if (uccl_get_u32(hello) != TCP_HELLO_MAGIC) {
        uccl_warn("tcp: incoming stream sent a bad hello; dropped");
        return false;
    }
    uccl_list_for_each(pos, &tp->eps) {
        tcp_ep_t *ep = uccl_container_of(pos, tcp_ep_t, link);
        tcp_stream_t *s;

        if (ep->is_initiator || ep->token != token || ep->streams == NULL)
            continue;
        if (index >= ep->nstreams || uccl_get_u16(hello + 6) != ep->nstreams ||
            ep->streams[index].state != TCP_STREAM_NONE) {
            uccl_warn("tcp: incoming stream %d does not fit its connection; dropped", index);
            return false;
        }
        s = &ep->streams[index];
        s->fd = fd;
        s->state = TCP_STREAM_UP;
        tcp_socket_tune(tp, fd);
        if (tcp_stream_register(s, EPOLL_CTL_MOD) != UCCL_OK) {
            s->fd = -1;
            s->state = TCP_STREAM_NONE;
            return false;
        }
        return true;
    }
    uccl_warn("tcp: incoming stream for an unknown connection; dropped");
    return false;
}

void uccl_tcp_stream_lost(tcp_stream_t *s, const char *why)
{
    if (s->state == TCP_STREAM_DEAD)
        return;
    uccl_debug("tcp: stream %d to %s lost: %s", s->index, uccl_conn_peer_host(s->ep->base.conn), why);
    s->state = TCP_STREAM_DEAD;
    if (!s->ep->failing)
        s->ep->fail_deadline_ms =
            uccl_time_ms() + (uint64_t)tcp_tp_of(s->ep)->base.params->timeout_ms;
    s->ep->failing = true;
}

bool uccl_tcp_ep_drained(uccl_tp_ep_t *base)
{
    tcp_ep_t *ep = (tcp_ep_t *)base;

    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].state == TCP_STREAM_UP || ep->streams[i].state == TCP_STREAM_CONNECTING)
            return false;
    return true;
}

void uccl_tcp_ep_fail(tcp_ep_t *ep, const char *why)
{
    uccl_conn_t *conn = ep->base.conn;

    if (uccl_conn_status(conn) == UCCL_OK)
        uccl_warn("tcp: connection to %s (pid %d): %s", uccl_conn_peer_host(conn), uccl_conn_peer_pid(conn), why);
    ep->failing = false;
    uccl_conn_fail(conn, UCCL_ERR_PEER_FAILED);
}

/* Read and drop what came in on a stream being closed. */
static void tcp_stream_discard_input(int fd)
{
    char scratch[4096];

    while (recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0)
        ;
}

/* Bytes written to a stream being closed that the peer's side has not
 * acknowledged yet. shutdown queued a FIN, which counts one in SIOCOUTQ
 * until acknowledged: the data is what matters. A reset stream has nothing
 * more to deliver. */
static int tcp_stream_unacked(int fd, bool fin_queued)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int outq = 0;

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_state == TCP_CLOSE)
        return 0;
    if (ioctl(fd, SIOCOUTQ, &outq) != 0)
        return 0;
    outq -= fin_queued && outq > 0;
    return outq;
}

/* Graceful close: the sends that completed sit in our socket buffers, and
 * the peer must get every byte of them (a completed send is a promise). A
 * close with unread input would reset the streams and drop them, so: end
 * of file after our data, input read and dropped, and a wait (up to
 * UCCL_TIMEOUT_MS) until the peer's side has taken all we wrote. */
static int tcp_ep_flush(tcp_ep_t *ep)
{
    uint64_t deadline = uccl_time_ms() + (uint64_t)tcp_tp_of(ep)->base.params->timeout_ms;
    bool fin[TCP_STREAMS_MAX] = {false};
    int unacked = 0;

    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].state == TCP_STREAM_UP)
            fin[i] = shutdown(ep->streams[i].fd, SHUT_WR) == 0;
    for (;;) {
        unacked = 0;
        for (int i = 0; i < ep->nstreams; i++) {
            if (ep->streams[i].state != TCP_STREAM_UP)
                continue;
            tcp_stream_discard_input(ep->streams[i].fd);
            unacked += tcp_stream_unacked(ep->streams[i].fd, fin[i]);
        }
        if (unacked == 0 || uccl_time_ms() >= deadline)
            break;
        (void)poll(NULL, 0, 1);
    }
    if (unacked > 0)
        uccl_warn("tcp: closing the connection to %s (pid %d) with %d bytes the peer has not "
                  "taken in UCCL_TIMEOUT_MS: dropped", uccl_conn_peer_host(ep->base.conn),
                  uccl_conn_peer_pid(ep->base.conn), unacked);
    return unacked;
}

void uccl_tcp_ep_destroy(uccl_tp_ep_t *base)
{
    tcp_ep_t *ep = (tcp_ep_t *)base;
    uccl_list_t *pos, *tmp;

    /* what a failed or timed-out flush leaves in the socket buffers is
     * dropped (a reset), never sent later: the kernel would otherwise keep
     * retransmitting it after close, and a write canceled here could land
     * at the peer once the link is back, over newer data */
    bool abort_streams = ep->streams == NULL || uccl_conn_status(ep->base.conn) != UCCL_OK ||
                         tcp_ep_flush(ep) > 0;

    /* completions and write replies still waiting for H2D copies are dropped
     * (after the copies end: their memory may be freed next) */
    if (tcp_tp_of(ep)->stage != NULL)
        uccl_stage_cancel(tcp_tp_of(ep)->stage, ep);
    for (int i = 0; ep->streams != NULL && i < ep->nstreams; i++) {
        if (ep->streams[i].fd >= 0) {
            if (abort_streams)
                setsockopt(ep->streams[i].fd, SOL_SOCKET, SO_LINGER,
                           &(struct linger){.l_onoff = 1, .l_linger = 0}, sizeof(struct linger));
            close(ep->streams[i].fd); /* also leaves the epoll set */
        }
        free(ep->streams[i].rbuf);
        uccl_tcp_stream_tx_release(&ep->streams[i]);
    }
    free(ep->streams);
    /* requests are the core's: forget them, free only our own records */
    uccl_list_for_each_safe(pos, tmp, &ep->ops)
        uccl_tcp_op_free(uccl_container_of(pos, tcp_op_t, all_link));
    uccl_idmap_fini(&ep->rma_ids);
    uccl_tcp_match_release(ep);
    uccl_list_del(&ep->link);
    free(ep);
}

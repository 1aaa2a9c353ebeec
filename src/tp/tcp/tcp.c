/* The tcp transport: configuration, ops table, open/close, the transport's
 * own listener (accepting streams and reading their hello) and progress. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

#define TCP_FIELD(name, dflt, doc, field, type) {name, dflt, doc, offsetof(tcp_config_t, field), type}

static const uccl_cfg_field_t tcp_config_fields[] = {
    TCP_FIELD("NUM_STREAMS", "4", "parallel TCP streams per connection (1..64)", num_streams,
              UCCL_CFG_INT),
    TCP_FIELD("CHUNK", "256K", "striping unit: large messages are cut into chunks of this size",
              chunk, UCCL_CFG_SIZE),
    TCP_FIELD("SOCKBUF", "4M", "SO_SNDBUF and SO_RCVBUF of every stream (0 = system default)",
              sockbuf, UCCL_CFG_SIZE),
    TCP_FIELD("RXBUF", "64K", "per-stream staging buffer for headers and small payloads", rxbuf,
              UCCL_CFG_SIZE),
    TCP_FIELD("PROGRESS_BYTES", "8M", "most bytes one progress call moves per direction and stream",
              progress_bytes, UCCL_CFG_SIZE),
    TCP_FIELD("RNDV_MIN", "256K",
              "messages of at least this size wait for the receive (request to send, clear to "
              "send) and land in place, not in a bounce buffer (0 = never)",
              rndv_min, UCCL_CFG_SIZE),
    TCP_FIELD("STAGE_CHUNK", "1M", "GPU memory is staged through pinned host buffers of this size",
              stage_chunk, UCCL_CFG_SIZE),
    TCP_FIELD("STAGE_DEPTH", "4", "staged chunks a GPU source copies ahead of the sockets",
              stage_depth, UCCL_CFG_INT),
    {NULL, NULL, NULL, 0, 0},
};

static const uccl_cfg_table_t tcp_config_table = {
    .prefix = "TCP_", .fields = tcp_config_fields, .struct_size = sizeof(tcp_config_t)};

#define TCP_EVENTS_MAX 64

static uccl_status_t tcp_config_load(tcp_config_t *cfg)
{
    uccl_status_t st = uccl_cfg_parse(&tcp_config_table, cfg);

    if (st != UCCL_OK)
        return st;
    if (cfg->num_streams < 1 || cfg->num_streams > TCP_STREAMS_MAX) {
        uccl_error("UCCL_TCP_NUM_STREAMS=%d is out of range 1..%d", cfg->num_streams, TCP_STREAMS_MAX);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (cfg->chunk < 4096 || cfg->chunk > (1u << 30)) {
        uccl_error("UCCL_TCP_CHUNK=%zu is out of range 4K..1G", cfg->chunk);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (cfg->rxbuf < 4 * TCP_HDR_LEN || cfg->progress_bytes < 1) {
        uccl_error("UCCL_TCP_RXBUF must be >= %d and UCCL_TCP_PROGRESS_BYTES > 0", 4 * TCP_HDR_LEN);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (cfg->stage_chunk < 4096 || cfg->stage_chunk > (1u << 30) || cfg->stage_depth < 1) {
        uccl_error("UCCL_TCP_STAGE_CHUNK=%zu must be in 4K..1G and UCCL_TCP_STAGE_DEPTH=%d >= 1",
                   cfg->stage_chunk, cfg->stage_depth);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* Listen where the engine's setup listener does: the advertised address
 * only, unless UCCL_OOB_BIND_ANY=1; on a port of UCCL_PORT_RANGE when set. */
static uccl_status_t tcp_open_listener(tcp_tp_t *tp, const uccl_tp_open_params_t *params)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = params->bind_any ? htonl(INADDR_ANY)
                                                                 : params->ifaddr};
    socklen_t salen = sizeof(sa);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = &tp->listen_poll};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        uccl_error("tcp: socket: %s", strerror(errno));
        return UCCL_ERR_IO;
    }
    if (uccl_bind_port_range(fd, &sa, params->port_lo, params->port_hi) != 0 ||
        listen(fd, 512) != 0 || getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 ||
        epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        uccl_error("tcp: listener%s%s: %s", params->port_lo ? " in UCCL_PORT_RANGE" : "",
                   params->port_lo && errno == EADDRINUSE ? " (every port taken)" : "",
                   strerror(errno));
        close(fd);
        return UCCL_ERR_IO;
    }
    tp->listen_fd = fd;
    tp->port = sa.sin_port;
    tp->listen_poll.kind = TCP_POLL_LISTENER;
    return UCCL_OK;
}

static uccl_status_t tcp_open(const uccl_tp_open_params_t *params, uccl_tp_t **out)
{
    tcp_tp_t *tp = calloc(1, sizeof(*tp));
    uccl_status_t st;

    if (tp == NULL)
        return UCCL_ERR_NO_MEMORY;
    tp->listen_fd = -1;
    uccl_list_init(&tp->eps);
    uccl_list_init(&tp->pending);
    st = tcp_config_load(&tp->cfg);
    if (st != UCCL_OK)
        goto err_free;
    tp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (tp->epfd < 0) {
        uccl_error("tcp: epoll_create1: %s", strerror(errno));
        st = UCCL_ERR_IO;
        goto err_free;
    }
    st = tcp_open_listener(tp, params);
    if (st != UCCL_OK)
        goto err_epoll;
    /* GPU memory is moved by staging when a GPU is usable here */
    if (uccl_stage_create(params->gpu_index, tp->cfg.stage_chunk, tp->cfg.stage_depth, &tp->stage) ==
        UCCL_OK)
        tp->base.open_caps = UCCL_TP_CAP_CUDA_MEM | UCCL_TP_CAP_ROCM_MEM;
    *out = &tp->base;
    return UCCL_OK;

err_epoll:
    close(tp->epfd);
err_free:
    free(tp);
    return st;
}

static void tcp_pending_drop(tcp_tp_t *tp, tcp_pending_t *p)
{
    tp->npending--;
    uccl_list_del(&p->link);
    close(p->fd); /* also leaves the epoll set */
    free(p);
}

static void tcp_close(uccl_tp_t *base)
{
    tcp_tp_t *tp = (tcp_tp_t *)base;
    uccl_list_t *pos, *tmp;

    /* the core destroys every connection first; endpoints left are a bug */
    uccl_list_for_each_safe(pos, tmp, &tp->eps)
        uccl_tcp_ep_destroy(&uccl_container_of(pos, tcp_ep_t, link)->base);
    uccl_list_for_each_safe(pos, tmp, &tp->pending)
        tcp_pending_drop(tp, uccl_container_of(pos, tcp_pending_t, link));
    close(tp->listen_fd);
    close(tp->epfd);
    uccl_stage_destroy(tp->stage);
    free(tp);
}

static uccl_status_t tcp_address(uccl_tp_t *base, void *buf, size_t *len)
{
    tcp_tp_t *tp = (tcp_tp_t *)base;
    uint8_t *p = buf;

    if (*len < TCP_ADDR_LEN) {
        *len = TCP_ADDR_LEN;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    p[0] = TCP_WIRE_VERSION;
    p[1] = 0;
    memcpy(p + 2, &tp->port, 2);
    memcpy(p + 4, &base->params->ifaddr, 4);
    *len = TCP_ADDR_LEN;
    return UCCL_OK;
}

static bool tcp_reachable(uccl_tp_t *tp, const uccl_tp_peer_t *peer)
{
    const uint8_t *p = peer->addr;

    (void)tp;
    return p != NULL && peer->addr_len == TCP_ADDR_LEN && p[0] == TCP_WIRE_VERSION;
}

/* ------------------------------------------------------------------ incoming streams */

/* Make room for a real peer's stream: drop the oldest accepted socket that
 * has not sent its hello (the same cap as the core's setup listener). */
static bool tcp_pending_evict(tcp_tp_t *tp, const char *why)
{
    if (uccl_list_empty(&tp->pending))
        return false;
    uccl_debug("tcp: dropping an incoming stream that sent no hello: %s", why);
    tcp_pending_drop(tp, uccl_list_first(&tp->pending, tcp_pending_t, link));
    return true;
}

static void tcp_accept_all(tcp_tp_t *tp)
{
    bool retrying = tp->accept_retry; /* EMFILE said already */
    int fd;

    tp->accept_retry = false;
    for (;;) {
        tcp_pending_t *p;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};

        fd = accept4(tp->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        if (tp->npending >= tp->base.params->setup_max_pending)
            tcp_pending_evict(tp, "too many pending streams");
        p = calloc(1, sizeof(*p));
        if (p == NULL) {
            close(fd);
            continue;
        }
        p->poll.kind = TCP_POLL_PENDING;
        p->fd = fd;
        p->deadline_ms = uccl_time_ms() + (uint64_t)tp->base.params->setup_timeout_ms;
        ev.data.ptr = &p->poll;
        uccl_list_push_back(&tp->pending, &p->link);
        tp->npending++;
        if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            uccl_warn("tcp: epoll_ctl on an accepted socket: %s", strerror(errno));
            tcp_pending_drop(tp, p);
        }
    }
    if (errno == EMFILE || errno == ENFILE) {
        /* the listener's edge is spent: try again from progress */
        tp->accept_retry = true;
        if (tcp_pending_evict(tp, "out of file descriptors (EMFILE)"))
            return;
        if (!retrying) /* every progress round tries again: say it once */
            uccl_warn("tcp: accept: %s, and no idle incoming stream to drop; retrying",
                      strerror(errno));
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        uccl_warn("tcp: accept: %s", strerror(errno));
    }
}

/* Read exactly the hello (never more: what follows belongs to the stream). */
static void tcp_pending_read(tcp_tp_t *tp, tcp_pending_t *p)
{
    ssize_t n = recv(p->fd, p->buf + p->have, TCP_HELLO_LEN - p->have, 0);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        uccl_debug("tcp: incoming stream closed before its hello");
        tcp_pending_drop(tp, p);
        return;
    }
    p->have += (size_t)n;
    if (p->have < TCP_HELLO_LEN)
        return;
    uccl_list_del(&p->link);
    tp->npending--;
    if (!uccl_tcp_ep_attach_stream(tp, p->fd, p->buf))
        close(p->fd);
    free(p);
}

static void tcp_pending_expire(tcp_tp_t *tp)
{
    uccl_list_t *pos, *tmp;
    uint64_t now;

    if (uccl_list_empty(&tp->pending))
        return;
    now = uccl_time_ms();
    uccl_list_for_each_safe(pos, tmp, &tp->pending) {
        tcp_pending_t *p = uccl_container_of(pos, tcp_pending_t, link);
        if (now >= p->deadline_ms) {
            uccl_debug("tcp: an incoming stream sent no hello in UCCL_SETUP_TIMEOUT_MS; dropped");
            tcp_pending_drop(tp, p);
        }
    }
}

/* ------------------------------------------------------------------ progress */

static void tcp_handle_event(tcp_tp_t *tp, const struct epoll_event *ev)
{
    tcp_poll_t *poll = ev->data.ptr;

    if (poll->kind == TCP_POLL_PENDING) {
        tcp_pending_read(tp, uccl_container_of(poll, tcp_pending_t, poll));
    } else {
        tcp_stream_t *s = uccl_container_of(poll, tcp_stream_t, poll);
        if (ev->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            s->readable = true;
        if (ev->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            s->rdhup = true;
        if (ev->events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            s->writable = true;
        if (s->state == TCP_STREAM_CONNECTING && (ev->events & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
            uccl_tcp_stream_connect_done(s);
    }
}

static int tcp_ep_progress(tcp_tp_t *tp, tcp_ep_t *ep)
{
    int events = 0;

    if (uccl_conn_status(ep->base.conn) != UCCL_OK)
        return 0;
    for (int i = 0; i < ep->nstreams; i++) {
        tcp_stream_t *s = &ep->streams[i];
        if (s->state == TCP_STREAM_UP && s->readable)
            events += uccl_tcp_stream_rx(s, tp->cfg.progress_bytes);
    }
    if (!ep->failing)
        events += uccl_tcp_ep_tx(ep, tp->cfg.progress_bytes);
    /* a stream ended: the peer is going; the messages its other streams
     * still carry are read to their end first (a completed send is a promise) */
    if (ep->failing && uccl_conn_status(ep->base.conn) == UCCL_OK &&
        (uccl_tcp_ep_drained(&ep->base) || uccl_time_ms() >= ep->fail_deadline_ms))
        uccl_tcp_ep_fail(ep, "the peer closed its streams");
    return events;
}

static int tcp_progress(uccl_tp_t *base)
{
    tcp_tp_t *tp = (tcp_tp_t *)base;
    struct epoll_event evs[TCP_EVENTS_MAX];
    uccl_list_t *pos;
    int events = tp->stage != NULL ? uccl_stage_progress(tp->stage) : 0;
    bool accept = false;
    int n = 0;

    /* With no connection and no socket being set up, only the listener
     * can have news: look at it every TCP_IDLE_POLL_EVERY rounds, not in
     * every round of progress (an epoll_wait is a system call, and an
     * engine that opened tcp but talks over shm would pay it per round). */
    if (!uccl_list_empty(&tp->eps) || tp->npending > 0 || tp->accept_retry ||
        ++tp->idle_rounds % TCP_IDLE_POLL_EVERY == 0)
        n = epoll_wait(tp->epfd, evs, TCP_EVENTS_MAX, 0);

    /* accepting may evict a socket still waiting for its hello, whose
     * event can be in this batch: accept only once the batch is handled */
    for (int i = 0; i < n; i++) {
        if (((tcp_poll_t *)evs[i].data.ptr)->kind == TCP_POLL_LISTENER)
            accept = true;
        else
            tcp_handle_event(tp, &evs[i]);
    }
    if (accept || tp->accept_retry)
        tcp_accept_all(tp);
    uccl_list_for_each(pos, &tp->eps)
        events += tcp_ep_progress(tp, uccl_container_of(pos, tcp_ep_t, link));
    tcp_pending_expire(tp);
    return events + (n > 0 ? n : 0);
}

const struct uccl_tp_ops uccl_tp_tcp_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "tcp",
    .priority = 10,
    .caps = UCCL_TP_CAP_HOST_MEM | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY,
    .engine_cap = UCCL_CAP_TCP,
    .config_table = &tcp_config_table,
    .open = tcp_open,
    .close = tcp_close,
    .address = tcp_address,
    .reachable = tcp_reachable,
    .ep_create = uccl_tcp_ep_create,
    .ep_pack = uccl_tcp_ep_pack,
    .ep_connect = uccl_tcp_ep_connect,
    .ep_destroy = uccl_tcp_ep_destroy,
    .post_send = uccl_tcp_post_send,
    .msg_deliver = uccl_tcp_msg_deliver,
    .post_write = uccl_tcp_post_write,
    .post_read = uccl_tcp_post_read,
    .progress = tcp_progress,
    .ep_drained = uccl_tcp_ep_drained,
};

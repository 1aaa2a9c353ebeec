/* Setup socket I/O: framing, bounded waits, and body encode/decode. */
#include "oob.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void uccl_oob_buf_init(oob_buf_t *b, size_t cap)
{
    b->data = malloc(cap);
    b->cap = b->data ? cap : 0;
    b->len = 0;
    b->overflow = b->data == NULL;
}

void uccl_oob_buf_free(oob_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->cap = b->len = 0;
}

void uccl_oob_put_bytes(oob_buf_t *b, const void *p, size_t n)
{
    if (b->overflow || n > b->cap - b->len) {
        b->overflow = true;
        return;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void uccl_oob_put_u8(oob_buf_t *b, uint8_t v) { uccl_oob_put_bytes(b, &v, 1); }

void uccl_oob_put_u16(oob_buf_t *b, uint16_t v)
{
    uint8_t t[2];
    uccl_put_u16(t, v);
    uccl_oob_put_bytes(b, t, 2);
}

void uccl_oob_put_u32(oob_buf_t *b, uint32_t v)
{
    uint8_t t[4];
    uccl_put_u32(t, v);
    uccl_oob_put_bytes(b, t, 4);
}

void uccl_oob_put_u64(oob_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    uccl_put_u64(t, v);
    uccl_oob_put_bytes(b, t, 8);
}

const uint8_t *uccl_oob_get_ptr(oob_reader_t *r, size_t n)
{
    const uint8_t *p;

    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        return NULL;
    }
    p = r->p + r->pos;
    r->pos += n;
    return p;
}

bool uccl_oob_get_bytes(oob_reader_t *r, void *dst, size_t n)
{
    const uint8_t *p = uccl_oob_get_ptr(r, n);

    if (p == NULL)
        return false;
    memcpy(dst, p, n);
    return true;
}

uint8_t uccl_oob_get_u8(oob_reader_t *r)
{
    const uint8_t *p = uccl_oob_get_ptr(r, 1);
    return p ? p[0] : 0;
}

uint16_t uccl_oob_get_u16(oob_reader_t *r)
{
    const uint8_t *p = uccl_oob_get_ptr(r, 2);
    return p ? uccl_get_u16(p) : 0;
}

uint32_t uccl_oob_get_u32(oob_reader_t *r)
{
    const uint8_t *p = uccl_oob_get_ptr(r, 4);
    return p ? uccl_get_u32(p) : 0;
}

uint64_t uccl_oob_get_u64(oob_reader_t *r)
{
    const uint8_t *p = uccl_oob_get_ptr(r, 8);
    return p ? uccl_get_u64(p) : 0;
}

int uccl_oob_poll_unlocked(uccl_engine_t *engine, int fd, short events, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    bool release = !engine->in_progress;
    int r;

    if (release)
        uccl_engine_unlock(engine);
    r = poll(&pfd, 1, timeout_ms);
    if (release)
        uccl_engine_lock(engine);
    return r;
}

static bool wait_fd(uccl_engine_t *engine, int fd, short events, uint64_t deadline_ms)
{
    while (uccl_time_ms() < deadline_ms) {
        engine->next_liveness_ms = 0; /* a peer may be connecting to us meanwhile */
        uccl_engine_progress_locked(engine);
        if (uccl_oob_poll_unlocked(engine, fd, events, 1) > 0)
            return true;
    }
    return false;
}

uccl_status_t uccl_oob_connect(uccl_engine_t *engine, const struct sockaddr_in *sa, uint64_t deadline_ms,
                          int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int err = 0;
    socklen_t elen = sizeof(err);

    if (fd < 0)
        return UCCL_ERR_IO;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 && errno != EINPROGRESS) {
        err = errno;
        goto err_close;
    }
    if (!wait_fd(engine, fd, POLLOUT, deadline_ms)) {
        close(fd);
        return UCCL_ERR_TIMEOUT;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)
        goto err_close;
    *fd_out = fd;
    return UCCL_OK;

err_close:
    uccl_error("cannot reach the peer's setup socket: %s", strerror(err ? err : errno));
    close(fd);
    return err == ECONNREFUSED ? UCCL_ERR_CONN_REFUSED : UCCL_ERR_UNREACHABLE;
}

uccl_status_t uccl_oob_send_frame(uccl_engine_t *engine, int fd, const void *body, size_t len,
                             uint64_t deadline_ms)
{
    uint8_t hdr[4];
    struct iovec iov[2] = {{hdr, 4}, {(void *)body, len}};
    size_t total = len + 4, sent = 0;

    uccl_put_u32(hdr, (uint32_t)len);
    while (sent < total) {
        struct msghdr msg = {0};
        struct iovec cur[2];
        int n = 0;
        size_t skip = sent;
        for (int i = 0; i < 2; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            cur[n].iov_base = (char *)iov[i].iov_base + skip;
            cur[n++].iov_len = iov[i].iov_len - skip;
            skip = 0;
        }
        msg.msg_iov = cur;
        msg.msg_iovlen = (size_t)n;
        ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (r > 0) {
            sent += (size_t)r;
            continue;
        }
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            return UCCL_ERR_PEER_FAILED;
        if (!wait_fd(engine, fd, POLLOUT, deadline_ms))
            return UCCL_ERR_TIMEOUT;
    }
    return UCCL_OK;
}

int uccl_oob_frame_read_some(int fd, size_t max, uint8_t **buf, size_t *have, size_t *need)
{
    for (;;) {
        ssize_t r;
        if (*need == 0) { /* still reading the 4-byte length */
            uint8_t hdr[4];
            r = recv(fd, hdr, 4, MSG_PEEK);
            if (r == 4) {
                (void)!recv(fd, hdr, 4, 0);
                *need = uccl_get_u32(hdr);
                if (*need == 0 || *need > max)
                    return -1;
                *buf = malloc(*need);
                if (*buf == NULL)
                    return -1;
                *have = 0;
                continue;
            }
        } else {
            if (*have == *need)
                return 1;
            r = recv(fd, *buf + *have, *need - *have, 0);
            if (r > 0) {
                *have += (size_t)r;
                continue;
            }
        }
        if (r == 0)
            return -1;
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        return 0;
    }
}

uccl_status_t uccl_oob_recv_frame(uccl_engine_t *engine, int fd, size_t max, uint64_t deadline_ms,
                             uint8_t **body, size_t *len)
{
    size_t have = 0, need = 0;
    uint8_t *buf = NULL;

    for (;;) {
        int r = uccl_oob_frame_read_some(fd, max, &buf, &have, &need);
        if (r > 0) {
            *body = buf;
            *len = have;
            return UCCL_OK;
        }
        if (r < 0) {
            free(buf);
            return UCCL_ERR_PEER_FAILED;
        }
        if (!wait_fd(engine, fd, POLLIN, deadline_ms)) {
            free(buf);
            return UCCL_ERR_TIMEOUT;
        }
    }
}

bool uccl_oob_peer_closed(int fd)
{
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);

    if (r == 0)
        return true;
    if (r < 0)
        return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    /* nothing is ever sent after setup: discard stray bytes */
    (void)!recv(fd, &c, 1, MSG_DONTWAIT);
    return false;
}

/* Frames of the tcp wire format (src/tp/tcp/tcp_wire.h) written by hand
 * into a live connection, as a broken or hostile peer would send them: the
 * test finds the two ends of a connection's one stream among this process's
 * sockets and writes whole frames between the engines' own (an idle sender
 * has no frame half written). With UCCL_TCP_NUM_STREAMS=1. */
#ifndef UCCL_TESTS_UNIT_TCP_INJECT_H
#define UCCL_TESTS_UNIT_TCP_INJECT_H

#include <dirent.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tp/tcp/tcp_wire.h"

#define INJECT_MAX_FD 4096

/* The sockets of this process, so that a later look finds only new ones. */
typedef struct inject_fds {
    bool open[INJECT_MAX_FD];
} inject_fds_t;

static inline void inject_fds_snap(inject_fds_t *s)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;

    memset(s, 0, sizeof(*s));
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (fd > 2 && fd < INJECT_MAX_FD)
            s->open[fd] = true;
    }
    closedir(d);
}

static inline bool inject_same(const struct sockaddr_in *x, const struct sockaddr_in *y)
{
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

/* The one connected TCP socket pair opened since before (both ends in this
 * process): *initiator is the end that connected (its peer is a listener),
 * *acceptor the other. False unless exactly one such pair exists. */
static inline bool inject_find_stream(const inject_fds_t *before, int *initiator, int *acceptor)
{
    inject_fds_t now;
    static struct sockaddr_in local[INJECT_MAX_FD], peer[INJECT_MAX_FD];
    static bool conn[INJECT_MAX_FD], listening[INJECT_MAX_FD];
    int pairs = 0;

    inject_fds_snap(&now);
    memset(conn, 0, sizeof(conn));
    memset(listening, 0, sizeof(listening));
    for (int fd = 3; fd < INJECT_MAX_FD; fd++) {
        socklen_t len = sizeof(local[fd]);
        int type = 0, acc = 0;
        socklen_t olen = sizeof(type);

        if (!now.open[fd] || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) != 0 ||
            type != SOCK_STREAM || getsockname(fd, (struct sockaddr *)&local[fd], &len) != 0 ||
            local[fd].sin_family != AF_INET)
            continue;
        olen = sizeof(acc);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &olen) == 0 && acc) {
            listening[fd] = true;
            continue;
        }
        len = sizeof(peer[fd]);
        conn[fd] = !before->open[fd] &&
                   getpeername(fd, (struct sockaddr *)&peer[fd], &len) == 0;
    }
    for (int i = 3; i < INJECT_MAX_FD; i++) {
        for (int j = 3; j < INJECT_MAX_FD && conn[i]; j++) {
            bool to_listener = false;

            if (i == j || !conn[j] || !inject_same(&local[i], &peer[j]) ||
                !inject_same(&local[j], &peer[i]))
                continue;
            for (int l = 3; l < INJECT_MAX_FD; l++)
                to_listener = to_listener || (listening[l] && inject_same(&local[l], &peer[i]));
            if (!to_listener)
                continue;
            *initiator = i;
            *acceptor = j;
            pairs++;
        }
    }
    return pairs == 1;
}

/* Write one frame (header, then clen bytes of payload when given) into fd
 * whole: true when every byte went. */
static inline bool inject_frame(int fd, const tcp_hdr_t *h, const void *payload)
{
    uint8_t buf[TCP_HDR_LEN + 256];
    size_t n = TCP_HDR_LEN + (payload != NULL ? h->clen : 0);

    if (n > sizeof(buf))
        return false;
    tcp_hdr_encode(h, buf);
    buf[0] = h->type; /* unknown types too */
    if (payload != NULL)
        memcpy(buf + TCP_HDR_LEN, payload, h->clen);
    return send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n;
}

/* The bytes waiting to be read on fd, without taking them (0: none). */
static inline size_t inject_peek(int fd, uint8_t *buf, size_t cap)
{
    ssize_t n = recv(fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

#endif

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
#include <sys/stat.h>

#include "core/core.h"
#include "tp/tcp/tcp_wire.h"

#define INJECT_MAX_FD 4096

/* The open files of this process by descriptor (their inode, 0: none), so
 * that a later look finds only new ones, also where a number was reused. */
typedef struct inject_fds {
    ino_t ino[INJECT_MAX_FD];
} inject_fds_t;

static inline void inject_fds_snap(inject_fds_t *s)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    struct stat st;

    memset(s, 0, sizeof(*s));
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (fd > 2 && fd < INJECT_MAX_FD && fd != dirfd(d) && fstat(fd, &st) == 0)
            s->ino[fd] = st.st_ino;
    }
    closedir(d);
}

static inline bool inject_same(const struct sockaddr_in *x, const struct sockaddr_in *y)
{
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

/* The port (network order) of engine's tcp listener, from its address
 * (the tcp entry: version, pad, port, IPv4); 0 when it has none. */
static inline uint16_t inject_tcp_port(uccl_engine_t *engine)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_address_t addr;
    uint16_t port = 0;

    if (uccl_engine_address(engine, blob, &len) != UCCL_OK ||
        uccl_address_parse(blob, len, &addr) != UCCL_OK)
        return 0;
    for (int i = 0; i < addr.ntp; i++)
        if (strcmp(addr.tp[i].name, "tcp") == 0 && addr.tp[i].len == TCP_ADDR_LEN)
            memcpy(&port, (const uint8_t *)addr.tp[i].addr + 2, 2);
    return port;
}

/* The one connected TCP socket pair opened since before with both ends in
 * this process whose initiator connected to the tcp listener at port
 * (network order; not the setup listener, whose connection stays open too):
 * *initiator is that end, *acceptor the other. False unless exactly one. */
static inline bool inject_find_stream(const inject_fds_t *before, uint16_t port, int *initiator,
                                      int *acceptor)
{
    inject_fds_t now;
    static struct sockaddr_in local[INJECT_MAX_FD], peer[INJECT_MAX_FD];
    static bool conn[INJECT_MAX_FD];
    int pairs = 0;

    inject_fds_snap(&now);
    memset(conn, 0, sizeof(conn));
    for (int fd = 3; fd < INJECT_MAX_FD; fd++) {
        socklen_t len = sizeof(local[fd]);
        int type = 0;
        socklen_t olen = sizeof(type);

        if (now.ino[fd] == 0 || before->ino[fd] == now.ino[fd] ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) != 0 || type != SOCK_STREAM ||
            getsockname(fd, (struct sockaddr *)&local[fd], &len) != 0 || local[fd].sin_family != AF_INET)
            continue;
        len = sizeof(peer[fd]);
        conn[fd] = getpeername(fd, (struct sockaddr *)&peer[fd], &len) == 0;
    }
    for (int i = 3; i < INJECT_MAX_FD; i++)
        for (int j = 3; j < INJECT_MAX_FD && conn[i] && peer[i].sin_port == port; j++)
            if (i != j && conn[j] && inject_same(&local[i], &peer[j]) && inject_same(&local[j], &peer[i])) {
                *initiator = i;
                *acceptor = j;
                pairs++;
            }
    return port != 0 && pairs == 1;
}

/* Every connected stream opened since before to the tcp listener at port,
 * as inject_find_stream, for a connection of several streams: up to max of
 * them, their initiator's ends in init[] (and acceptor's in acc[]); how many. */
static inline int inject_find_streams(const inject_fds_t *before, uint16_t port, int *init, int *acc,
                                      int max)
{
    inject_fds_t now;
    int n = 0;

    inject_fds_snap(&now);
    for (int i = 3; i < INJECT_MAX_FD && n < max; i++) {
        struct sockaddr_in li, pi, lj, pj;
        socklen_t len = sizeof(li);

        if (now.ino[i] == 0 || before->ino[i] == now.ino[i] ||
            getsockname(i, (struct sockaddr *)&li, &len) != 0 || li.sin_family != AF_INET ||
            (len = sizeof(pi), getpeername(i, (struct sockaddr *)&pi, &len)) != 0 || pi.sin_port != port)
            continue;
        for (int j = 3; j < INJECT_MAX_FD; j++) {
            len = sizeof(lj);
            if (j == i || now.ino[j] == 0 || before->ino[j] == now.ino[j] ||
                getsockname(j, (struct sockaddr *)&lj, &len) != 0 || lj.sin_family != AF_INET ||
                (len = sizeof(pj), getpeername(j, (struct sockaddr *)&pj, &len)) != 0)
                continue;
            if (inject_same(&li, &pj) && inject_same(&lj, &pi)) {
                init[n] = i;
                acc[n++] = j;
                break;
            }
        }
    }
    return n;
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

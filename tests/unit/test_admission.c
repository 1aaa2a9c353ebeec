/* Admission (issue 20): an engine admits only connections that present its
 * secret (carried in its address blob; one per job when given as an engine
 * parameter). A wrong or missing secret is refused with UCCL_ERR_DENIED
 * before any connection state exists on the listener; a request for an
 * earlier incarnation with UCCL_ERR_STALE; listeners listen on the
 * advertised address only (UCCL_OOB_BIND_ANY=1 for every interface); a
 * slow sender is dropped within UCCL_SETUP_TIMEOUT_MS while real peers get
 * through. Run over shm and tcp. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"
#include "unit_conn.h"

#define REQ_MAGIC 0x51434355u
#define REP_MAGIC 0x50434355u

static const char *transport;

/* Connection objects of an engine in use (allocated and not on the free list). */
static size_t conns_in_use(uccl_engine_t *e)
{
    size_t free_n = 0;
    uccl_list_t *pos;

    uccl_list_for_each(pos, &e->conn_pool.free_list)
        free_n++;
    return e->conn_pool.allocated - free_n;
}

static uccl_status_t ping(unit_pair_t *p)
{
    uint64_t out = 0x0123456789abcdefull, in = 0;
    uccl_mr_t *mo = NULL, *mi = NULL;
    uccl_req_t *r[2] = {NULL, NULL};
    uccl_status_t st = uccl_mr_reg(p->a, &out, sizeof(out), 0, &mo);

    if (st == UCCL_OK)
        st = uccl_mr_reg(p->b, &in, sizeof(in), 0, &mi);
    if (st == UCCL_OK)
        st = uccl_recv(p->ba, mi, 0, sizeof(in), 3, &r[0]);
    if (st == UCCL_OK)
        st = uccl_send(p->ab, mo, 0, sizeof(out), 3, &r[1]);
    if (st == UCCL_OK)
        st = unit_drive(p, r, 2, UNIT_TIMEOUT_MS);
    for (int i = 0; i < 2 && st == UCCL_OK; i++)
        st = uccl_wait(r[i], 0);
    if (st == UCCL_OK && in != out)
        st = UCCL_ERR_IO;
    for (int i = 0; i < 2; i++)
        if (r[i] != NULL)
            uccl_req_free(r[i]);
    if (mi != NULL)
        uccl_mr_dereg(mi);
    if (mo != NULL)
        uccl_mr_dereg(mo);
    return st;
}

/* b's progress while a connects from this thread: an accept that must time out. */
static void *accept_none(void *arg)
{
    uccl_engine_t *b = arg;
    uccl_conn_t *c = NULL;

    return (void *)(uintptr_t)(uccl_accept(b, 700, &c) == UCCL_ERR_TIMEOUT && c == NULL);
}

static void secret_params(uccl_engine_params_t *p, uint8_t fill)
{
    memset(p, 0, sizeof(*p));
    p->field_mask = UCCL_ENGINE_PARAM_TRANSPORTS | UCCL_ENGINE_PARAM_SECRET;
    p->transports = transport;
    memset(p->secret, fill, sizeof(p->secret));
}

/* Engines given the same job secret connect; their blobs carry it. */
static void test_job_secret(void)
{
    uccl_engine_params_t p;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_address_t a;
    unit_pair_t pair;

    secret_params(&p, 0x5a);
    UNIT_ASSERT_STATUS(unit_pair_open_params(&p, &p, &pair), UCCL_OK);
    if (pair.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_engine_address(pair.b, blob, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_address_parse(blob, len, &a), UCCL_OK);
    CU_ASSERT(memcmp(a.secret, p.secret, UCCL_SECRET_SIZE) == 0);
    UNIT_ASSERT_STATUS(ping(&pair), UCCL_OK);
    unit_pair_close(&pair);
    /* an all-zero secret is no secret */
    memset(p.secret, 0, sizeof(p.secret));
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &pair.a), UCCL_ERR_INVALID_PARAM);
}

/* A blob whose secret is not the engine's (tampered, or another job's):
 * refused with DENIED, nothing made on the listener, real peers still in. */
static void test_wrong_secret(void)
{
    uccl_engine_params_t pa, pb;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_engine_t *a = NULL, *b = NULL;
    uccl_conn_t *c = NULL;
    unit_pair_t pair;
    uint64_t t0;

    secret_params(&pa, 0x11);
    secret_params(&pb, 0x22); /* another job */
    UNIT_ASSERT_STATUS(uccl_engine_create(&pa, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_create(&pb, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_engine_address(b, blob, &len), UCCL_OK);
    for (int variant = 0; variant < 2; variant++) {
        /* 0: one bit of the secret flipped; 1: the secret zeroed (a public blob) */
        size_t s = len - 4 - UCCL_SECRET_SIZE;
        uint8_t bad[UCCL_ADDRESS_MAX];
        memcpy(bad, blob, len);
        if (variant == 0)
            bad[s + 7] ^= 0x10;
        else
            memset(bad + s, 0, UCCL_SECRET_SIZE);
        uccl_put_u32(bad + len - 4, uccl_fnv1a32(bad, len - 4));
        pthread_t th;
        void *none = NULL;
        CU_ASSERT_FATAL(pthread_create(&th, NULL, accept_none, b) == 0);
        t0 = unit_now_ms();
        UNIT_ASSERT_STATUS(uccl_connect(a, bad, len, &c), UCCL_ERR_DENIED);
        CU_ASSERT(unit_now_ms() - t0 < 700);
        CU_ASSERT_PTR_NULL(c);
        pthread_join(th, &none);
        CU_ASSERT(none != NULL); /* nothing came out of accept */
        for (int i = 0; i < 20; i++)
            uccl_engine_progress(b);
        CU_ASSERT_EQUAL(conns_in_use(b), 0);
        CU_ASSERT(uccl_list_empty(&b->accept_q));
        UNIT_ASSERT_STATUS(uccl_accept(b, 0, &c), UCCL_ERR_TIMEOUT);
    }
    /* the same engines, the right blob: admitted */
    memset(&pair, 0, sizeof(pair));
    pair.a = a;
    pair.b = b;
    UNIT_ASSERT_STATUS(unit_connect(a, b, &pair.ab, &pair.ba), UCCL_OK);
    if (pair.ab != NULL)
        UNIT_ASSERT_STATUS(ping(&pair), UCCL_OK);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

/* ---- raw setup requests, as a stranger would send them */

static int raw_connect(uccl_engine_t *e)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&e->oob_addr, sizeof(e->oob_addr)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Send a request frame: header fields as given, own blob, no endpoints. */
static int raw_request(uccl_engine_t *target, uccl_engine_t *self, uint16_t version, uint64_t to_id,
                       const uint8_t *secret, size_t cut)
{
    uint8_t m[4 + 4 + 2 + 8 + UCCL_SECRET_SIZE + 2 + UCCL_ADDRESS_MAX + 1];
    size_t blob_len = UCCL_ADDRESS_MAX, n = 4;
    int fd = raw_connect(target);

    if (fd < 0 || uccl_address_pack_public(self, m + 4 + 4 + 2 + 8 + UCCL_SECRET_SIZE + 2,
                                           &blob_len) != UCCL_OK)
        return -1;
    uccl_put_u32(m + n, REQ_MAGIC);
    uccl_put_u16(m + n + 4, version);
    uccl_put_u64(m + n + 6, to_id);
    memcpy(m + n + 14, secret, UCCL_SECRET_SIZE);
    uccl_put_u16(m + n + 14 + UCCL_SECRET_SIZE, (uint16_t)blob_len);
    n += 14 + UCCL_SECRET_SIZE + 2 + blob_len;
    m[n++] = 0; /* no endpoints */
    if (cut > 0 && cut < n)
        n = cut;
    uccl_put_u32(m, (uint32_t)(n - 4));
    if (send(fd, m, n, MSG_NOSIGNAL) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Progress target until the reply frame arrives: its status, or 1 when the
 * socket was closed without one, 2 when nothing came in time. */
static int raw_reply(uccl_engine_t *target, int fd)
{
    uint8_t r[14];
    size_t have = 0;
    uint64_t deadline = unit_now_ms() + 3000;

    while (unit_now_ms() < deadline && have < sizeof(r)) {
        ssize_t k;
        uccl_engine_progress(target);
        k = recv(fd, r + have, sizeof(r) - have, MSG_DONTWAIT);
        if (k == 0)
            return 1;
        if (k > 0)
            have += (size_t)k;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            return 1;
    }
    if (have < sizeof(r))
        return 2;
    if (uccl_get_u32(r + 4) != REP_MAGIC)
        return 3;
    return (int32_t)uccl_get_u32(r + 10);
}

static void test_raw_requests(void)
{
    uccl_engine_t *a = NULL, *b = NULL;
    uint8_t zero[UCCL_SECRET_SIZE] = {0};
    int fd;

    UNIT_ASSERT_STATUS(unit_engine_create(transport, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(transport, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    /* missing secret */
    fd = raw_request(b, a, 2, b->id, zero, 0);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_ERR_DENIED);
    close(fd);
    /* someone else's secret */
    fd = raw_request(b, a, 2, b->id, a->secret, 0);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_ERR_DENIED);
    close(fd);
    /* an earlier incarnation (checked first) */
    fd = raw_request(b, a, 2, b->id ^ 1, b->secret, 0);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_ERR_STALE);
    close(fd);
    /* the version before admission existed (no secret field) */
    fd = raw_request(b, a, 1, b->id, b->secret, 0);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_ERR_VERSION);
    close(fd);
    /* cut inside the secret */
    fd = raw_request(b, a, 2, b->id, b->secret, 4 + 14 + 5);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_ERR_BAD_ADDRESS);
    close(fd);
    for (int i = 0; i < 20; i++)
        uccl_engine_progress(b);
    CU_ASSERT_EQUAL(conns_in_use(b), 0);
    CU_ASSERT(uccl_list_empty(&b->accept_q));
    CU_ASSERT_EQUAL(b->nhandshakes, 0);
    /* the right secret, no endpoints: admitted (the control that the raw
     * request is well formed) */
    fd = raw_request(b, a, 2, b->id, b->secret, 0);
    CU_ASSERT_EQUAL(raw_reply(b, fd), UCCL_OK);
    CU_ASSERT_EQUAL(conns_in_use(b), 1);
    close(fd);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

/* A sender that trickles its request one byte at a time is dropped within
 * UCCL_SETUP_TIMEOUT_MS; a real peer connects meanwhile. */
static void test_slow_sender(void)
{
    uccl_engine_t *a = NULL, *b = NULL;
    unit_pair_t pair;
    uint64_t t0;
    int fd, dropped = 0;

    setenv("UCCL_SETUP_TIMEOUT_MS", "300", 1);
    UNIT_ASSERT_STATUS(unit_engine_create(transport, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(transport, &b), UCCL_OK);
    unsetenv("UCCL_SETUP_TIMEOUT_MS");
    if (a == NULL || b == NULL)
        goto out;
    fd = raw_connect(b);
    CU_ASSERT_FATAL(fd >= 0);
    t0 = unit_now_ms();
    (void)!send(fd, "\0\x10\0\0", 4, MSG_NOSIGNAL); /* a 4 KiB frame follows... slowly */
    while (unit_now_ms() - t0 < 2000 && !dropped) {
        char c = 'x';
        uccl_engine_progress(b);
        if (send(fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
            dropped = 1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) > 0 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0)
            dropped = 1;
    }
    CU_ASSERT(dropped);
    CU_ASSERT(unit_now_ms() - t0 < 700);
    CU_ASSERT_EQUAL(b->nhandshakes, 0);
    close(fd);
    memset(&pair, 0, sizeof(pair));
    pair.a = a;
    pair.b = b;
    UNIT_ASSERT_STATUS(unit_connect(a, b, &pair.ab, &pair.ba), UCCL_OK);
    if (pair.ab != NULL)
        UNIT_ASSERT_STATUS(ping(&pair), UCCL_OK);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

static int connect_to(struct in_addr ip, uint16_t port_net)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = ip, .sin_port = port_net};
    int fd = socket(AF_INET, SOCK_STREAM, 0), rc;

    rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    return rc;
}

/* Listeners listen on the advertised address only: with UCCL_OOB_IFADDR=127.0.0.1
 * another loopback address (127.0.0.2) finds nothing there, unless
 * UCCL_OOB_BIND_ANY=1. Both the setup listener and tcp's. */
static void test_bind_address(void)
{
    struct in_addr lo1 = {htonl(0x7f000001)}, lo2 = {htonl(0x7f000002)};

    for (int any = 0; any < 2; any++) {
        struct sockaddr_in sa;
        socklen_t salen = sizeof(sa);
        uccl_engine_t *e = NULL;
        uint8_t blob[UCCL_ADDRESS_MAX];
        size_t len = sizeof(blob);
        uccl_address_t a;
        int tcp_entry = -1;

        setenv("UCCL_OOB_IFADDR", "127.0.0.1", 1);
        setenv("UCCL_OOB_BIND_ANY", any ? "1" : "0", 1);
        UNIT_ASSERT_STATUS(unit_engine_create(transport, &e), UCCL_OK);
        unsetenv("UCCL_OOB_IFADDR");
        unsetenv("UCCL_OOB_BIND_ANY");
        if (e == NULL)
            return;
        CU_ASSERT_EQUAL(getsockname(e->listen_fd, (struct sockaddr *)&sa, &salen), 0);
        CU_ASSERT_EQUAL(sa.sin_addr.s_addr, any ? htonl(INADDR_ANY) : lo1.s_addr);
        CU_ASSERT_EQUAL(connect_to(lo1, e->oob_addr.sin_port), 0);
        CU_ASSERT_EQUAL(connect_to(lo2, e->oob_addr.sin_port) == 0, any);
        UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_address_parse(blob, len, &a), UCCL_OK);
        for (int i = 0; i < a.ntp; i++)
            if (strcmp(a.tp[i].name, "tcp") == 0)
                tcp_entry = i;
        if (tcp_entry >= 0) { /* tcp's own listener: port at bytes 2..3 of its entry */
            uint16_t port;
            memcpy(&port, (const uint8_t *)a.tp[tcp_entry].addr + 2, 2);
            CU_ASSERT_EQUAL(connect_to(lo1, port), 0);
            CU_ASSERT_EQUAL(connect_to(lo2, port) == 0, any);
        }
        for (int i = 0; i < 20; i++)
            uccl_engine_progress(e);
        uccl_engine_destroy(e);
    }
}

static int init_shm(void) { transport = "shm"; return 0; }
static int init_tcp(void) { transport = "tcp"; return 0; }

static CU_TestInfo cases[] = {
    {"job secret shared: admitted", test_job_secret},
    {"wrong or zero secret: DENIED, nothing allocated", test_wrong_secret},
    {"raw requests: denied, stale, old version, truncated", test_raw_requests},
    {"slow sender dropped, real peer admitted", test_slow_sender},
    {"listeners bind the advertised address", test_bind_address},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    const CU_SuiteInfo per_tp[] = {
        {"admission over shm", init_shm, NULL, NULL, NULL, cases},
        {"admission over tcp", init_tcp, NULL, NULL, NULL, cases},
    };

    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_per_transport(per_tp);
}

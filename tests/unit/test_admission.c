/* Admission (issue 20): an engine admits only connections that present its
 * secret (carried in its address blob; one per job when given as an engine
 * parameter), proved by a challenge-response that never sends it
 * (setup_auth.h). A wrong or missing secret is refused with UCCL_ERR_DENIED
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
#include "core/setup_auth.h"
#include "unit.h"
#include "unit_conn.h"

/* Connection objects of an engine in use (allocated and not on the free list). */
static size_t conns_in_use(uccl_engine_t *e)
{
    return e->conn_pool.allocated - uccl_list_length(&e->conn_pool.free_list);
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
    p->transports = unit_tp;
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
    UNIT_ASSERT_STATUS(unit_ping(&pair, 3), UCCL_OK);
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
        uint64_t denied = b->setup_denied;
        CU_ASSERT_FATAL(pthread_create(&th, NULL, accept_none, b) == 0);
        t0 = unit_now_ms();
        UNIT_ASSERT_STATUS(uccl_connect(a, bad, len, &c), UCCL_ERR_DENIED);
        CU_ASSERT(unit_now_ms() - t0 < 700);
        CU_ASSERT_PTR_NULL(c);
        pthread_join(th, &none);
        CU_ASSERT(none != NULL); /* nothing came out of accept */
        /* the listener refused too: a denial counted (and logged) there */
        CU_ASSERT_EQUAL(b->setup_denied, denied + 1);
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
        UNIT_ASSERT_STATUS(unit_ping(&pair, 3), UCCL_OK);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

/* ---- raw setup messages, as a stranger would send them (setup_auth.h) */

static int raw_connect(uccl_engine_t *e)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&e->oob_addr, sizeof(e->oob_addr)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool send_frame(int fd, const oob_buf_t *b, size_t cut)
{
    uint8_t m[4 + 8192];
    size_t n = b->len;

    if (cut > 0 && cut < n)
        n = cut;
    if (n > sizeof(m) - 4)
        return false;
    uccl_put_u32(m, (uint32_t)n);
    memcpy(m + 4, b->data, n);
    return send(fd, m, n + 4, MSG_NOSIGNAL) == (ssize_t)(n + 4);
}

/* Progress target until a whole answer frame is in m (its body length), or
 * -1 when the socket closed without one, -2 when nothing came in time. */
static int raw_frame(uccl_engine_t *target, int fd, uint8_t *m, size_t cap)
{
    size_t have = 0, need = 4;
    uint64_t deadline = unit_now_ms() + 3000;

    while (unit_now_ms() < deadline && have < need) {
        ssize_t k;
        uccl_engine_progress(target);
        k = recv(fd, m + have, need - have, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        if (k > 0)
            have += (size_t)k;
        if (have == 4 && need == 4) {
            need = 4 + uccl_get_u32(m);
            if (need > cap)
                return -1;
        }
    }
    return have == need && need > 4 ? (int)(need - 4) : -2;
}

/* A hello from self (the version given) to to_id, cut when cut > 0; the
 * challenge's status (nonce and proof into auth/proof), or -1/-2 as raw_frame. */
static int raw_hello(uccl_engine_t *target, uccl_engine_t *self, uint16_t version, uint64_t to_id,
                     size_t cut, int *fd_out, uccl_setup_auth_t *auth, uint8_t proof[UCCL_HMAC_SIZE])
{
    uint8_t m[256];
    oob_buf_t b;
    oob_reader_t r;
    int fd = raw_connect(target), n, st;

    *fd_out = fd;
    if (fd < 0)
        return -1;
    memset(auth, 0, sizeof(*auth));
    auth->to_id = to_id;
    auth->from_id = self->id;
    memset(auth->nonce_c, 0x3c, UCCL_SETUP_NONCE);
    uccl_oob_buf_init(&b, 256);
    uccl_setup_put_hello(&b, auth);
    uccl_put_u16(b.data + 4, version);
    n = send_frame(fd, &b, cut) ? raw_frame(target, fd, m, sizeof(m)) : -1;
    uccl_oob_buf_free(&b);
    if (n < 0)
        return n;
    r = (oob_reader_t){m + 4, (size_t)n, 0, false};
    st = uccl_setup_get_status(&r);
    if (st == UCCL_OK && !uccl_setup_get_challenge(&r, auth->nonce_a, proof))
        st = -3;
    return st;
}

/* The request after a challenge: proof as given, self's public blob (of
 * engine id blob_id), no endpoints; the reply's status. */
static int raw_request(uccl_engine_t *target, uccl_engine_t *self, int fd,
                       const uint8_t proof[UCCL_HMAC_SIZE], size_t cut, uint64_t blob_id)
{
    uint8_t blob[UCCL_ADDRESS_MAX], m[256];
    size_t blob_len = sizeof(blob);
    oob_buf_t b;
    oob_reader_t r;
    int n;

    if (uccl_address_pack_public(self, blob, &blob_len) != UCCL_OK)
        return -1;
    uccl_put_u64(blob + 8, blob_id);
    uccl_put_u32(blob + blob_len - 4, uccl_fnv1a32(blob, blob_len - 4));
    uccl_oob_buf_init(&b, 8192);
    uccl_setup_put_request_head(&b, proof);
    uccl_oob_put_u16(&b, (uint16_t)blob_len);
    uccl_oob_put_bytes(&b, blob, blob_len);
    uccl_oob_put_u8(&b, 0); /* no endpoints */
    n = send_frame(fd, &b, cut) ? raw_frame(target, fd, m, sizeof(m)) : -1;
    uccl_oob_buf_free(&b);
    if (n < 0)
        return n;
    r = (oob_reader_t){m + 4, (size_t)n, 0, false};
    return uccl_setup_get_status(&r);
}

/* A full raw setup with the proof made by key (NULL: all zero proof). */
static int raw_setup(uccl_engine_t *b, uccl_engine_t *a, const uint8_t *key, uint64_t blob_id)
{
    uint8_t proof[UCCL_HMAC_SIZE] = {0};
    uccl_setup_auth_t auth;
    int fd, st = raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 0, &fd, &auth, proof);

    if (st == UCCL_OK) {
        CU_ASSERT(uccl_setup_proof_ok(b->secret, &auth, true, proof)); /* the listener's proof */
        memset(proof, 0, sizeof(proof));
        if (key != NULL)
            CU_ASSERT_FATAL(uccl_setup_proof(key, &auth, false, proof));
        st = raw_request(b, a, fd, proof, 0, blob_id);
    }
    if (fd >= 0)
        close(fd);
    return st;
}

static void test_raw_requests(void)
{
    uccl_engine_t *a = NULL, *b = NULL;
    uint8_t proof[UCCL_HMAC_SIZE], old_proof[UCCL_HMAC_SIZE];
    uccl_setup_auth_t auth, again;
    uint64_t denied;
    int fd;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    denied = b->setup_denied;
    /* no proof; a proof made with someone else's secret */
    CU_ASSERT_EQUAL(raw_setup(b, a, NULL, a->id), UCCL_ERR_DENIED);
    CU_ASSERT_EQUAL(raw_setup(b, a, a->secret, a->id), UCCL_ERR_DENIED);
    CU_ASSERT_EQUAL(b->setup_denied, denied + 2);
    /* an earlier incarnation (checked at the hello) */
    fd = -1;
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id ^ 1, 0, &fd, &auth, proof), UCCL_ERR_STALE);
    close(fd);
    /* a peer of the version that sent the secret in clear (2), and a newer one */
    CU_ASSERT_EQUAL(raw_hello(b, a, 2, b->id, 0, &fd, &auth, proof), UCCL_ERR_VERSION);
    close(fd);
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION + 1, b->id, 0, &fd, &auth, proof), UCCL_ERR_VERSION);
    close(fd);
    /* a hello cut inside the nonce; a request cut inside the proof */
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 23, &fd, &auth, proof),
                    UCCL_ERR_BAD_ADDRESS);
    close(fd);
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 0, &fd, &auth, proof), UCCL_OK);
    CU_ASSERT_FATAL(uccl_setup_proof(b->secret, &auth, false, proof));
    CU_ASSERT_EQUAL(raw_request(b, a, fd, proof, 7 + 12, a->id), UCCL_ERR_BAD_ADDRESS);
    close(fd);
    /* the listener's own proof sent back (reflected) */
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 0, &fd, &auth, proof), UCCL_OK);
    CU_ASSERT_EQUAL(raw_request(b, a, fd, proof, 0, a->id), UCCL_ERR_DENIED);
    close(fd);
    /* the right proof, but a blob of another engine than the hello named */
    CU_ASSERT_EQUAL(raw_setup(b, a, b->secret, a->id ^ 1), UCCL_ERR_BAD_ADDRESS);
    for (int i = 0; i < 20; i++)
        uccl_engine_progress(b);
    CU_ASSERT_EQUAL(conns_in_use(b), 0);
    CU_ASSERT(uccl_list_empty(&b->accept_q));
    CU_ASSERT_EQUAL(b->nhandshakes, 0);
    /* the right proof, no endpoints: admitted (the control that the raw
     * messages are well formed) */
    CU_ASSERT_EQUAL(raw_setup(b, a, b->secret, a->id), UCCL_OK);
    CU_ASSERT_EQUAL(conns_in_use(b), 1);
    /* a good proof replayed: the same hello gets a fresh nonce, so the proof
     * of the earlier setup no longer fits */
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 0, &fd, &auth, proof), UCCL_OK);
    CU_ASSERT_FATAL(uccl_setup_proof(b->secret, &auth, false, old_proof));
    close(fd);
    CU_ASSERT_EQUAL(raw_hello(b, a, UCCL_SETUP_VERSION, b->id, 0, &fd, &again, proof), UCCL_OK);
    CU_ASSERT(memcmp(auth.nonce_a, again.nonce_a, UCCL_SETUP_NONCE) != 0);
    CU_ASSERT_EQUAL(raw_request(b, a, fd, old_proof, 0, a->id), UCCL_ERR_DENIED);
    close(fd);
    CU_ASSERT_EQUAL(conns_in_use(b), 1);
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
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
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
        UNIT_ASSERT_STATUS(unit_ping(&pair, 3), UCCL_OK);
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
        UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &e), UCCL_OK);
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
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_tp("admission", cases, NULL, NULL);
}

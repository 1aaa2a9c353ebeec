/* CUnit tests of the shm transport: two forked processes (rank 0 runs the
 * suite as the parent, rank 1 mirrors it), byte-for-byte checks of two-sided
 * and one-sided transfers, refused remote access and peer death; once with
 * CMA (auto) and once forced through the ring (UCCL_SHM_CMA=0). */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uccl/uccl.h>

#define WAIT_MS 30000
#define NMODES 2

static const char *const modes[NMODES] = {"auto", "0"};
static int rank, sock;
static uccl_engine_t *engine;
static uccl_conn_t *conn;

/* ------------------------------------------------------------------ helpers */

typedef struct buf {
    uint8_t *p;
    size_t len;
    uccl_mr_t *mr;
} buf_t;

static buf_t buf_new(size_t len)
{
    buf_t b = {malloc(len ? len : 1), len, NULL};

    CU_ASSERT_FATAL(b.p != NULL);
    memset(b.p, 0, len ? len : 1);
    CU_ASSERT_FATAL(uccl_mr_reg(engine, b.p, len ? len : 1, 0, &b.mr) == UCCL_OK);
    return b;
}

static void buf_free(buf_t *b)
{
    CU_ASSERT(uccl_mr_dereg(b->mr) == UCCL_OK);
    free(b->p);
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 12));
}

static int check(const uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)(i * 131u + seed * 7u + (i >> 12)))
            return 0;
    return 1;
}

static uccl_status_t wait_req(uccl_req_t *req, size_t *bytes)
{
    uccl_status_t st = uccl_wait(req, WAIT_MS);

    if (bytes != NULL)
        uccl_req_bytes(req, bytes);
    uccl_req_free(req);
    return st;
}

/* Send len bytes of pattern seed with tag, wait. */
static void send_pattern(size_t len, uint64_t tag, unsigned seed)
{
    buf_t b = buf_new(len);
    uccl_req_t *req;

    fill(b.p, len, seed);
    CU_ASSERT_FATAL(uccl_send(conn, b.mr, 0, len, tag, &req) == UCCL_OK);
    CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
    buf_free(&b);
}

static void recv_pattern(size_t len, uint64_t tag, unsigned seed)
{
    buf_t b = buf_new(len + 16);
    uccl_req_t *req;
    size_t got = 0;

    CU_ASSERT_FATAL(uccl_recv(conn, b.mr, 0, len + 16, tag, &req) == UCCL_OK);
    CU_ASSERT(wait_req(req, &got) == UCCL_OK);
    CU_ASSERT(got == len);
    CU_ASSERT(check(b.p, len, seed));
    buf_free(&b);
}

/* ------------------------------------------------------------------ setup */

static int suite_init(void)
{
    char blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);

    if (uccl_engine_create(NULL, &engine) != UCCL_OK)
        return -1;
    if (rank == 0) {
        uccl_conn_attr_t attr;
        if (uccl_engine_address(engine, blob, &len) != UCCL_OK ||
            write(sock, &len, sizeof(len)) != sizeof(len) || write(sock, blob, len) != (ssize_t)len ||
            uccl_accept(engine, WAIT_MS, &conn) != UCCL_OK)
            return -1;
        if (uccl_conn_query(conn, &attr) != UCCL_OK || strcmp(attr.transport, "shm") != 0)
            return -1;
        return 0;
    }
    if (read(sock, &len, sizeof(len)) != sizeof(len) || len > sizeof(blob) ||
        read(sock, blob, len) != (ssize_t)len)
        return -1;
    return uccl_connect(engine, blob, len, &conn) == UCCL_OK ? 0 : -1;
}

static int suite_cleanup(void)
{
    return uccl_engine_destroy(engine) == UCCL_OK ? 0 : -1;
}

/* ------------------------------------------------------------------ two-sided */

static void test_sizes(void)
{
    static const size_t sizes[] = {0, 1, 4095, 65537, (4u << 20) + 3, (64u << 20) + 3};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        for (int dir = 0; dir < 2; dir++) {
            if (rank == dir)
                send_pattern(sizes[i], 100 + i, (unsigned)(i + dir));
            else
                recv_pattern(sizes[i], 100 + i, (unsigned)(i + dir));
        }
    }
}

/* Around UCCL_SHM_SPLIT_MIN (1M here): copied whole by the receiver below
 * it, by both processes at once from it on. */
static void test_split_sizes(void)
{
    static const size_t sizes[] = {(1u << 20) - 1, 1u << 20, (1u << 20) + 1, (1u << 20) + 65,
                                   (3u << 20) + 7};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        for (int dir = 0; dir < 2; dir++) {
            if (rank == dir)
                send_pattern(sizes[i], 200 + i, (unsigned)(i + 3 * dir));
            else
                recv_pattern(sizes[i], 200 + i, (unsigned)(i + 3 * dir));
        }
    }
}

static void test_vectored(void)
{
    /* the last is split, with the split point inside uneven pieces */
    static const size_t sizes[] = {4000, 70000, 700001};

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t total = 3 * sizes[k] + 5;
        buf_t a = buf_new(total), b = buf_new(total);
        uccl_req_t *req;

        if (rank == 0) { /* gather 3 uneven pieces, one of them empty, from two regions */
            uccl_iov_t iov[4] = {{a.mr, 0, sizes[k]}, {NULL, 0, 0}, {b.mr, 10, 2 * sizes[k]},
                                 {a.mr, sizes[k], 5}};
            uint8_t *flat = malloc(total);
            fill(flat, total, 9);
            memcpy(a.p, flat, sizes[k]);
            memcpy(b.p + 10, flat + sizes[k], 2 * sizes[k]);
            memcpy(a.p + sizes[k], flat + 3 * sizes[k], 5);
            CU_ASSERT_FATAL(uccl_sendv(conn, iov, 4, 7, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
            free(flat);
        } else { /* scatter into two pieces with room to spare */
            uccl_iov_t iov[2] = {{b.mr, 1, 1000}, {a.mr, 0, total}};
            uint8_t *flat = malloc(total);
            size_t got = 0;
            CU_ASSERT_FATAL(uccl_recvv(conn, iov, 2, 7, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, &got) == UCCL_OK);
            CU_ASSERT(got == total);
            memcpy(flat, b.p + 1, 1000);
            memcpy(flat + 1000, a.p, total - 1000);
            CU_ASSERT(check(flat, total, 9));
            free(flat);
        }
        buf_free(&a);
        buf_free(&b);
    }
}

/* 64 messages each way in flight at once, small and large mixed. */
static void test_many_in_flight(void)
{
    enum { N = 64 };
    uccl_req_t *reqs[2 * N];
    buf_t sb[N], rb[N];

    for (int i = 0; i < N; i++) {
        size_t len = (size_t)(i * 7919) % 100000 + (i % 3 == 0 ? 200000 : 0);
        sb[i] = buf_new(len);
        rb[i] = buf_new(len);
        fill(sb[i].p, len, (unsigned)(i + rank * N));
        CU_ASSERT_FATAL(uccl_recv(conn, rb[i].mr, 0, len, 1000 + i, &reqs[i]) == UCCL_OK);
    }
    for (int i = 0; i < N; i++)
        CU_ASSERT_FATAL(uccl_send(conn, sb[i].mr, 0, sb[i].len, 1000 + i, &reqs[N + i]) == UCCL_OK);
    CU_ASSERT(uccl_wait_all(reqs, 2 * N, WAIT_MS) == UCCL_OK);
    for (int i = 0; i < N; i++) {
        CU_ASSERT(check(rb[i].p, rb[i].len, (unsigned)(i + (1 - rank) * N)));
        uccl_req_free(reqs[i]);
        uccl_req_free(reqs[N + i]);
        buf_free(&sb[i]);
        buf_free(&rb[i]);
    }
}

static void test_same_tag_order(void)
{
    enum { N = 8 };

    for (int i = 0; i < N; i++) {
        size_t len = i % 2 ? 100 + (size_t)i : 100000 + (size_t)i;
        if (rank == 0)
            send_pattern(len, 55, (unsigned)(40 + i));
    }
    if (rank == 1)
        for (int i = 0; i < N; i++)
            recv_pattern(i % 2 ? 100 + (size_t)i : 100000 + (size_t)i, 55, (unsigned)(40 + i));
}

/* Too small a receive fails with TRUNCATED and the message waits for the next. */
static void test_truncation(void)
{
    static const size_t sizes[] = {1000, 100000, (3u << 20) + 1};

    for (int k = 0; k < 3; k++) {
        if (rank == 0) {
            send_pattern(sizes[k], 77, 3);
        } else {
            buf_t b = buf_new(sizes[k]);
            uccl_req_t *req;
            size_t got = 0;
            CU_ASSERT_FATAL(uccl_recv(conn, b.mr, 0, sizes[k] - 1, 77, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_ERR_TRUNCATED);
            CU_ASSERT_FATAL(uccl_recv(conn, b.mr, 0, sizes[k], 77, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, &got) == UCCL_OK);
            CU_ASSERT(got == sizes[k]);
            CU_ASSERT(check(b.p, sizes[k], 3));
            buf_free(&b);
        }
    }
}

/* ------------------------------------------------------------------ one-sided */

static void exchange_rdesc(uccl_rdesc_t *rd)
{
    buf_t b = buf_new(sizeof(*rd));
    uccl_req_t *req;

    if (rank == 1) {
        memcpy(b.p, rd, sizeof(*rd));
        CU_ASSERT_FATAL(uccl_send(conn, b.mr, 0, sizeof(*rd), 5, &req) == UCCL_OK);
    } else {
        CU_ASSERT_FATAL(uccl_recv(conn, b.mr, 0, sizeof(*rd), 5, &req) == UCCL_OK);
    }
    CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
    memcpy(rd, b.p, sizeof(*rd));
    buf_free(&b);
}

static void test_rma(void)
{
    static const size_t sizes[] = {100, (4u << 20) + 3};

    for (int k = 0; k < 2; k++) {
        size_t len = sizes[k];
        buf_t t = buf_new(len + 64), l = buf_new(len), r = buf_new(len);
        uccl_rdesc_t rd;
        uccl_req_t *req;
        uint64_t v;

        if (rank == 1)
            CU_ASSERT_FATAL(uccl_mr_pack(t.mr, 0, len + 64, &rd) == UCCL_OK);
        exchange_rdesc(&rd);
        if (rank == 0) {
            fill(l.p, len, 21);
            CU_ASSERT_FATAL(uccl_write(conn, l.mr, 0, len, &rd, 64, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
            CU_ASSERT_FATAL(uccl_read(conn, r.mr, 0, len, &rd, 64, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
            CU_ASSERT(check(r.p, len, 21));
            fill(l.p, len, 22);
            CU_ASSERT_FATAL(uccl_write_notify(conn, l.mr, 0, len, &rd, 0, 0xabc0 + k, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
            CU_ASSERT_FATAL(uccl_write_notify(conn, l.mr, 0, 0, &rd, 0, 0xdef0 + k, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_OK);
            send_pattern(1, 6, 0);
        } else {
            recv_pattern(1, 6, 0); /* the peer is done */
            CU_ASSERT(check(t.p, len, 22));
            CU_ASSERT(uccl_notif_poll(conn, &v) == UCCL_OK && v == 0xabc0u + (unsigned)k);
            CU_ASSERT(uccl_notif_poll(conn, &v) == UCCL_OK && v == 0xdef0u + (unsigned)k);
            CU_ASSERT(uccl_notif_poll(conn, &v) == UCCL_ERR_NOT_FOUND);
        }
        buf_free(&t);
        buf_free(&l);
        buf_free(&r);
    }
}

/* A region the target deregistered is never touched: REMOTE_ACCESS. */
static void test_remote_access_refused(void)
{
    static const size_t sizes[] = {100, 1u << 20, (4u << 20) + 3};

    for (int k = 0; k < 3; k++) {
        size_t len = sizes[k];
        buf_t l = buf_new(len);
        uccl_rdesc_t rd;
        uccl_req_t *req;
        uint64_t v;

        if (rank == 1) {
            buf_t t = buf_new(len);
            CU_ASSERT_FATAL(uccl_mr_pack(t.mr, 0, len, &rd) == UCCL_OK);
            buf_free(&t);
        }
        exchange_rdesc(&rd);
        if (rank == 0) {
            fill(l.p, len, 1);
            CU_ASSERT_FATAL(uccl_write(conn, l.mr, 0, len, &rd, 0, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
            CU_ASSERT_FATAL(uccl_read(conn, l.mr, 0, len, &rd, 0, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
            CU_ASSERT(check(l.p, len, 1)); /* nothing landed */
            CU_ASSERT_FATAL(uccl_write_notify(conn, l.mr, 0, len, &rd, 0, 42, &req) == UCCL_OK);
            CU_ASSERT(wait_req(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
            send_pattern(1, 6, 0);
        } else {
            recv_pattern(1, 6, 0);
            CU_ASSERT(uccl_notif_poll(conn, &v) == UCCL_ERR_NOT_FOUND);
        }
        buf_free(&l);
    }
}

/* Last test: rank 1 goes away without a word; rank 0's receive must fail
 * with PEER_FAILED, not hang. */
static void test_peer_death(void)
{
    if (rank == 1) {
        recv_pattern(1, 8, 0);
        _exit(CU_get_number_of_failures() ? 1 : 0);
    } else {
        buf_t b = buf_new(100);
        uccl_req_t *req;

        send_pattern(1, 8, 0);
        CU_ASSERT_FATAL(uccl_recv(conn, b.mr, 0, 100, 9, &req) == UCCL_OK);
        CU_ASSERT(wait_req(req, NULL) == UCCL_ERR_PEER_FAILED);
        CU_ASSERT(uccl_send(conn, b.mr, 0, 1, 9, &req) == UCCL_ERR_PEER_FAILED);
        buf_free(&b);
    }
}

/* ------------------------------------------------------------------ main */

static unsigned run_suite(int mode)
{
    char name[64];
    CU_pSuite suite;
    unsigned failures;

    setenv("UCCL_TRANSPORTS", "shm", 1);
    setenv("UCCL_SHM_CMA", modes[mode], 1);
    setenv("UCCL_SHM_SPLIT_MIN", "1M", 1); /* the split tests are built around it */
    setenv("UCCL_TIMEOUT_MS", "30000", 0);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    snprintf(name, sizeof(name), "tp_shm rank %d UCCL_SHM_CMA=%s", rank, modes[mode]);
    suite = CU_add_suite(name, suite_init, suite_cleanup);
    CU_add_test(suite, "send/recv sizes 0..64MiB+3, both ways", test_sizes);
    CU_add_test(suite, "send/recv around the split threshold, both ways", test_split_sizes);
    CU_add_test(suite, "sendv gathers, recvv scatters", test_vectored);
    CU_add_test(suite, "64 messages in flight each way", test_many_in_flight);
    CU_add_test(suite, "same tag keeps posting order", test_same_tag_order);
    CU_add_test(suite, "truncation loses nothing", test_truncation);
    CU_add_test(suite, "write, read, write_notify", test_rma);
    CU_add_test(suite, "deregistered target region refused", test_remote_access_refused);
    CU_add_test(suite, "peer death fails requests", test_peer_death);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures;
}

int main(void)
{
    int socks[NMODES];
    pid_t pids[NMODES];
    unsigned failures = 0;

    /* fork before anything else: one peer per mode */
    for (int m = 0; m < NMODES; m++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            return 1;
        pids[m] = fork();
        if (pids[m] < 0)
            return 1;
        if (pids[m] == 0) {
            for (int k = 0; k < m; k++)
                close(socks[k]);
            close(sv[0]);
            rank = 1;
            sock = sv[1];
            _exit(run_suite(m) ? 1 : 0);
        }
        close(sv[1]);
        socks[m] = sv[0];
    }
    for (int m = 0; m < NMODES; m++) {
        int status = 0;
        sock = socks[m];
        failures += run_suite(m);
        close(sock);
        if (waitpid(pids[m], &status, 0) != pids[m] || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "peer process of mode UCCL_SHM_CMA=%s failed\n", modes[m]);
            failures++;
        }
    }
    return failures ? 1 : 0;
}

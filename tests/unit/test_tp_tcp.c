/* Two-process tests of the tcp transport: the process forks before anything
 * else, both halves run the same CUnit suite in lockstep (rank 0 = parent,
 * rank 1 = child) over UCCL_TRANSPORTS=tcp, synchronising through a
 * socketpair. TCP_TEST_PERF=1 adds a send/recv throughput table. */
#include <CUnit/Basic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uccl/uccl.h>

static int g_rank;
static int g_sock = -1;
static uccl_engine_t *g_engine;
static uccl_conn_t *g_conn;

static void xread(void *p, size_t n);

/* Barrier with the other rank; keeps progressing the engine meanwhile,
 * since one-sided operations are served by the target's progress. */
static void sync_peer(void)
{
    char c = 's';
    if (write(g_sock, &c, 1) != 1)
        _exit(3);
    xread(&c, 1);
}

static void xwrite(const void *p, size_t n)
{
    if (write(g_sock, p, n) != (ssize_t)n)
        _exit(3);
}

static void xread(void *p, size_t n)
{
    size_t have = 0;
    while (have < n) {
        struct pollfd pfd = {.fd = g_sock, .events = POLLIN};
        ssize_t r;

        if (g_engine != NULL && poll(&pfd, 1, 0) == 0) {
            uccl_engine_progress(g_engine);
            continue;
        }
        r = read(g_sock, (char *)p + have, n - have);
        if (r <= 0)
            _exit(3);
        have += (size_t)r;
    }
}

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(i * 131u + seed * 7u + (i >> 11)); }

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

static size_t mismatches(const unsigned char *p, size_t n, unsigned seed)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += p[i] != pattern(i, seed);
    return bad;
}

static uccl_status_t xfer_wait(uccl_req_t *req, size_t *bytes)
{
    uccl_status_t st = uccl_wait(req, -1);
    if (bytes != NULL)
        uccl_req_bytes(req, bytes);
    uccl_req_free(req);
    return st;
}

/* ------------------------------------------------------------------ setup */

static int setup_connection(void)
{
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t len = sizeof(addr);
    uint32_t n;

    if (uccl_engine_create(NULL, &g_engine) != UCCL_OK || uccl_engine_address(g_engine, addr, &len) != UCCL_OK)
        return -1;
    if (g_rank == 0) {
        n = (uint32_t)len;
        xwrite(&n, sizeof(n));
        xwrite(addr, len);
        return uccl_accept(g_engine, -1, &g_conn) == UCCL_OK ? 0 : -1;
    }
    xread(&n, sizeof(n));
    if (n > sizeof(addr))
        return -1;
    xread(addr, n);
    return uccl_connect(g_engine, addr, n, &g_conn) == UCCL_OK ? 0 : -1;
}

/* ------------------------------------------------------------------ two-sided */

/* One message from `from` to the other rank, received into a larger buffer. */
static void pingpong_one(size_t size, int from, unsigned seed)
{
    size_t cap = size + 16, got = 0;
    unsigned char *buf = malloc(cap);
    uccl_mr_t *mr;
    uccl_req_t *req;

    CU_ASSERT_FATAL(buf != NULL);
    CU_ASSERT_FATAL(uccl_mr_reg(g_engine, buf, cap, 0, &mr) == UCCL_OK);
    if (g_rank == from) {
        fill(buf, size, seed);
        CU_ASSERT_FATAL(uccl_send(g_conn, mr, 0, size, seed, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK);
        CU_ASSERT(got == size);
    } else {
        memset(buf, 0xee, cap);
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, cap, seed, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK);
        CU_ASSERT(got == size);
        CU_ASSERT(mismatches(buf, size, seed) == 0);
        CU_ASSERT(buf[size] == 0xee);
    }
    uccl_mr_dereg(mr);
    free(buf);
}

static void test_sendrecv_sizes(void)
{
    const size_t sizes[] = {0, 1, 4095, 65537, (4u << 20) + 3, (64u << 20) + 3};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        pingpong_one(sizes[i], 0, (unsigned)i + 1);
        pingpong_one(sizes[i], 1, (unsigned)i + 101);
    }
    sync_peer();
}

static void test_sendv_recvv(void)
{
    size_t total = 300000, got = 0;
    unsigned char *buf = malloc(total + 64);
    uccl_mr_t *mr;
    uccl_req_t *req;

    CU_ASSERT_FATAL(buf != NULL && uccl_mr_reg(g_engine, buf, total + 64, 0, &mr) == UCCL_OK);
    if (g_rank == 0) {
        /* gather [0,1000) [1000,250000) [250000,300000) from scattered places */
        unsigned char *flat = malloc(total);
        fill(flat, total, 9);
        memcpy(buf + 40, flat, 1000);
        memcpy(buf + 1040 + 7, flat + 1000, 249000);
        memcpy(buf + 250047 + 3, flat + 250000, 50000);
        uccl_iov_t iov[3] = {{mr, 40, 1000}, {mr, 1047, 249000}, {mr, 250050, 50000}};
        CU_ASSERT_FATAL(uccl_sendv(g_conn, iov, 3, 55, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == total);
        free(flat);
    } else {
        uccl_iov_t iov[4] = {{mr, 0, 1}, {NULL, 0, 0}, {mr, 10, 200000}, {mr, 200020, 100040}};
        unsigned char *flat = malloc(total);
        CU_ASSERT_FATAL(uccl_recvv(g_conn, iov, 4, 55, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == total);
        flat[0] = buf[0];
        memcpy(flat + 1, buf + 10, 200000);
        memcpy(flat + 200001, buf + 200020, total - 200001);
        CU_ASSERT(mismatches(flat, total, 9) == 0);
        free(flat);
    }
    uccl_mr_dereg(mr);
    free(buf);
    sync_peer();
}

/* 64 messages each way in flight at once; 4 tags, so each tag carries 16
 * messages whose order must be kept; sizes cross the chunk size. */
static void test_many_inflight(void)
{
    enum { N = 64 };
    size_t slot = 300 * 1024;
    unsigned char *sbuf = malloc(N * slot), *rbuf = malloc(N * slot);
    uccl_req_t *reqs[2 * N];
    uccl_mr_t *smr, *rmr;

    CU_ASSERT_FATAL(sbuf && rbuf && uccl_mr_reg(g_engine, sbuf, N * slot, 0, &smr) == UCCL_OK &&
                    uccl_mr_reg(g_engine, rbuf, N * slot, 0, &rmr) == UCCL_OK);
    memset(rbuf, 0, N * slot);
    for (int i = 0; i < N; i++) {
        size_t len = ((size_t)i * 4999 + 3) % slot;
        fill(sbuf + i * slot, len, (unsigned)(1000 * g_rank + i));
        CU_ASSERT_FATAL(uccl_recv(g_conn, rmr, i * slot, slot, (uint64_t)(i % 4), &reqs[i]) == UCCL_OK);
        CU_ASSERT_FATAL(uccl_send(g_conn, smr, i * slot, len, (uint64_t)(i % 4), &reqs[N + i]) == UCCL_OK);
    }
    CU_ASSERT(uccl_wait_all(reqs, 2 * N, -1) == UCCL_OK);
    for (int i = 0; i < N; i++) {
        size_t len = ((size_t)i * 4999 + 3) % slot, got = 0;
        uccl_req_bytes(reqs[i], &got);
        CU_ASSERT(got == len);
        CU_ASSERT(mismatches(rbuf + i * slot, len, (unsigned)(1000 * (1 - g_rank) + i)) == 0);
    }
    for (int i = 0; i < 2 * N; i++)
        uccl_req_free(reqs[i]);
    uccl_mr_dereg(smr);
    uccl_mr_dereg(rmr);
    free(sbuf);
    free(rbuf);
    sync_peer();
}

static void test_truncation(void)
{
    unsigned char *buf = malloc(1 << 20);
    uccl_mr_t *mr;
    uccl_req_t *req;
    size_t got = 0;

    CU_ASSERT_FATAL(buf != NULL && uccl_mr_reg(g_engine, buf, 1 << 20, 0, &mr) == UCCL_OK);
    if (g_rank == 0) {
        fill(buf, 1000, 21);
        fill(buf + 4096, 500000, 22);
        sync_peer(); /* rank 1 has posted a too small receive for tag 78 */
        CU_ASSERT_FATAL(uccl_send(g_conn, mr, 0, 1000, 77, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, NULL) == UCCL_OK);
        CU_ASSERT_FATAL(uccl_send(g_conn, mr, 4096, 500000, 78, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, NULL) == UCCL_OK);
    } else {
        uccl_req_t *early;
        memset(buf, 0, 1 << 20);
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, 100, 78, &early) == UCCL_OK);
        sync_peer();
        /* posted before the message came: fails when it arrives */
        CU_ASSERT(xfer_wait(early, NULL) == UCCL_ERR_TRUNCATED);
        /* posted after the message came (unexpected): fails at once */
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, 10, 77, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_TRUNCATED);
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, 999, 77, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_TRUNCATED);
        /* nothing lost: big enough receives still get both messages */
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, 1000, 77, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == 1000);
        CU_ASSERT(mismatches(buf, 1000, 21) == 0);
        CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 4096, 600000, 78, &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == 500000);
        CU_ASSERT(mismatches(buf + 4096, 500000, 22) == 0);
    }
    uccl_mr_dereg(mr);
    free(buf);
    sync_peer();
}

/* ------------------------------------------------------------------ one-sided */

static void test_rma(void)
{
    size_t len = (4u << 20) + 3, cap = len + 4096, got = 0;
    unsigned char *buf = malloc(cap);
    uccl_rdesc_t rdesc;
    uccl_mr_t *mr;
    uccl_req_t *req;
    uint64_t v;

    CU_ASSERT_FATAL(buf != NULL && uccl_mr_reg(g_engine, buf, cap, 0, &mr) == UCCL_OK);
    if (g_rank == 1) { /* target */
        memset(buf, 0, cap);
        fill(buf + 2048, 1000, 33); /* for the read */
        CU_ASSERT_FATAL(uccl_mr_pack(mr, 0, cap, &rdesc) == UCCL_OK);
        xwrite(&rdesc, sizeof(rdesc));
        sync_peer(); /* writes done */
        CU_ASSERT(mismatches(buf + 5, len, 31) == 0);
        for (int i = 0; i < 3; i++) {
            uccl_status_t st;
            while ((st = uccl_notif_poll(g_conn, &v)) == UCCL_ERR_NOT_FOUND)
                ;
            CU_ASSERT(st == UCCL_OK && v == 0x1000u + (unsigned)i);
        }
        CU_ASSERT(uccl_notif_poll(g_conn, &v) == UCCL_ERR_NOT_FOUND);
        uccl_mr_dereg(mr);
        sync_peer(); /* region gone */
        pingpong_one(1234, 0, 77);
        sync_peer();
        free(buf);
        return;
    }
    xread(&rdesc, sizeof(rdesc));
    fill(buf, len, 31);
    CU_ASSERT_FATAL(uccl_write(g_conn, mr, 0, len, &rdesc, 5, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == len);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_FATAL(uccl_write_notify(g_conn, mr, 0, 0 + (size_t)i * 10, &rdesc, 5, 0x1000u + (unsigned)i,
                                          &req) == UCCL_OK);
        CU_ASSERT(xfer_wait(req, NULL) == UCCL_OK);
    }
    memset(buf, 0, cap);
    CU_ASSERT_FATAL(uccl_read(g_conn, mr, 100, len, &rdesc, 5, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == len);
    CU_ASSERT(mismatches(buf + 100, len, 31) == 0);
    CU_ASSERT_FATAL(uccl_read(g_conn, mr, 0, 0, &rdesc, 0, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, &got) == UCCL_OK && got == 0);
    sync_peer();
    sync_peer(); /* the target deregistered its region */
    CU_ASSERT_FATAL(uccl_write(g_conn, mr, 0, 1000, &rdesc, 0, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
    CU_ASSERT_FATAL(uccl_write_notify(g_conn, mr, 0, len, &rdesc, 0, 7, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
    CU_ASSERT_FATAL(uccl_read(g_conn, mr, 0, 1000, &rdesc, 0, &req) == UCCL_OK);
    CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_REMOTE_ACCESS);
    /* the connection still works after refusals */
    pingpong_one(1234, 0, 77);
    sync_peer();
    uccl_mr_dereg(mr);
    free(buf);
}

/* ------------------------------------------------------------------ throughput */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 0 streams `iters` messages of `size` to rank 1 with a window of 16,
 * then one zero-byte ack back; the same shape as the MPI reference loop. */
static double stream_bw(size_t size, int iters)
{
    enum { W = 16 };
    unsigned char *buf = malloc(size * W + 1);
    uccl_req_t *reqs[W];
    uccl_mr_t *mr;
    uccl_req_t *ack;
    double t0;

    if (buf == NULL || uccl_mr_reg(g_engine, buf, size * W + 1, 0, &mr) != UCCL_OK)
        return 0;
    memset(buf, 1, size * W + 1);
    sync_peer();
    t0 = now_s();
    for (int it = 0; it < iters; it += W) {
        for (int w = 0; w < W; w++) {
            if (g_rank == 0)
                uccl_send(g_conn, mr, (size_t)w * size, size, 1, &reqs[w]);
            else
                uccl_recv(g_conn, mr, (size_t)w * size, size, 1, &reqs[w]);
        }
        uccl_wait_all(reqs, W, -1);
        for (int w = 0; w < W; w++)
            uccl_req_free(reqs[w]);
    }
    if (g_rank == 0)
        uccl_recv(g_conn, mr, 0, 1, 2, &ack);
    else
        uccl_send(g_conn, mr, 0, 0, 2, &ack);
    xfer_wait(ack, NULL);
    t0 = now_s() - t0;
    uccl_mr_dereg(mr);
    free(buf);
    return (double)size * iters / t0 / 1e6;
}

static void test_throughput(void)
{
    const size_t sizes[] = {4096, 65536, 262144, 1 << 20, 4 << 20};

    if (getenv("TCP_TEST_PERF") == NULL) {
        sync_peer();
        return;
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int iters = (int)((size_t)(2u << 30) / sizes[i] / 4);
        double mbs;
        iters = iters < 64 ? 64 : iters > 8192 ? 8192 : iters;
        mbs = stream_bw(sizes[i], iters);
        if (g_rank == 0)
            printf("\ntcp send/recv %8zu bytes x %5d: %9.1f MB/s", sizes[i], iters, mbs);
    }
    sync_peer();
}

/* ------------------------------------------------------------------ peer death */

/* Rank 1 reports its own result so far, starts a large send of tag 98 and
 * exits mid-transfer. Rank 0 waits on a receive of tag 99, a message that is
 * never sent: however much of tag 98 got through before the exit, that
 * receive can only end UCCL_ERR_PEER_FAILED (never OK, never a hang). */
static void test_peer_death(void)
{
    size_t len = 64u << 20;
    unsigned char *buf = malloc(len);
    uccl_mr_t *mr;
    uccl_req_t *req, *late;
    uint32_t child_failures = 0;

    CU_ASSERT_FATAL(buf != NULL && uccl_mr_reg(g_engine, buf, len, 0, &mr) == UCCL_OK);
    if (g_rank == 1) {
        child_failures = CU_get_number_of_failures();
        xwrite(&child_failures, sizeof(child_failures));
        memset(buf, 5, len);
        if (uccl_send(g_conn, mr, 0, len, 98, &req) == UCCL_OK)
            for (int i = 0; i < 20; i++)
                uccl_engine_progress(g_engine);
        _exit(0); /* mid-transfer, no goodbye */
    }
    CU_ASSERT_FATAL(uccl_recv(g_conn, mr, 0, len, 99, &req) == UCCL_OK);
    xread(&child_failures, sizeof(child_failures));
    CU_ASSERT(child_failures == 0);
    CU_ASSERT(xfer_wait(req, NULL) == UCCL_ERR_PEER_FAILED);
    CU_ASSERT(uccl_recv(g_conn, mr, 0, len, 100, &late) == UCCL_ERR_PEER_FAILED);
    uccl_mr_dereg(mr);
    free(buf);
}

int main(void)
{
    int sv[2];
    pid_t child;
    CU_pSuite suite;
    unsigned failures;
    int status = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 2;
    child = fork();
    if (child < 0)
        return 2;
    g_rank = child == 0 ? 1 : 0;
    g_sock = sv[g_rank];
    close(sv[1 - g_rank]);
    setenv("UCCL_TRANSPORTS", "tcp", 1);
    setenv("UCCL_TIMEOUT_MS", "30000", 0);
    if (setup_connection() != 0) {
        fprintf(stderr, "rank %d: cannot set up the tcp connection\n", g_rank);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    suite = CU_add_suite(g_rank == 0 ? "tp_tcp" : "tp_tcp (child)", NULL, NULL);
    CU_add_test(suite, "send/recv sizes 0..64M+3", test_sendrecv_sizes);
    CU_add_test(suite, "sendv/recvv", test_sendv_recvv);
    CU_add_test(suite, "64 in flight both ways, tag order", test_many_inflight);
    CU_add_test(suite, "truncation loses nothing", test_truncation);
    CU_add_test(suite, "write/read/write_notify, refused access", test_rma);
    CU_add_test(suite, "throughput (TCP_TEST_PERF=1)", test_throughput);
    CU_add_test(suite, "peer death -> PEER_FAILED", test_peer_death);
    CU_basic_set_mode(g_rank == 0 ? CU_BRM_VERBOSE : CU_BRM_SILENT);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    uccl_conn_close(g_conn);
    uccl_engine_destroy(g_engine);
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child exited abnormally (status %d)\n", status);
        failures++;
    }
    return failures == 0 ? 0 : 1;
}

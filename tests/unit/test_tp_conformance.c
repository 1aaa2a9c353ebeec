/* One conformance suite over every transport: the same scenarios (sizes
 * 0..64 MiB+3 both ways, vectored, 64 in flight, truncation, write/read/
 * notify, refused remote access, peer death) run on a connected pair of
 * engines restricted to one transport (unit_conn.h; both engines in this
 * process, driven together). One CUnit suite per transport; a transport that
 * cannot run here, or a case it cannot offer, is reported SKIP with the reason.
 * Arguments: names of the suites to run (default: all), e.g. "verbs" in the
 * Soft-RoCE VM, where $RXE_DEV and $RXE_DEV2 give each engine its device.
 * Peer death needs a process that dies: this program re-executes itself as
 * that peer (--peer-death-child), so the child inherits no engine state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp_conformance.h"
#include "unit.h"
#include "unit_conn.h"

/* ------------------------------------------------------------------ two-sided */

/* len bytes of s (side from, filled with pattern seed) into r, a receive
 * 16 bytes larger whose tail must stay untouched; the receive is posted
 * before the send, or after it (the message may then arrive unexpected). */
static void message(tc_buf_t *s, tc_buf_t *r, int from, size_t len, uint64_t tag, unsigned seed,
                    int recv_first)
{
    uccl_req_t *reqs[2] = {NULL, NULL};
    size_t got = 0;

    memset(r->p, 0xee, len + 16);
    if (recv_first)
        UNIT_ASSERT_STATUS(uccl_recv(conn_of(1 - from), r->mr, 0, len + 16, tag, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(conn_of(from), s->mr, 0, len, tag, &reqs[0]), UCCL_OK);
    if (!recv_first)
        UNIT_ASSERT_STATUS(uccl_recv(conn_of(1 - from), r->mr, 0, len + 16, tag, &reqs[1]), UCCL_OK);
    drive(reqs, 2);
    UNIT_ASSERT_STATUS(finish(reqs[0], NULL), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(reqs[1], &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, len);
    CU_ASSERT_EQUAL(unit_mismatches(r->p, len, seed), 0);
    CU_ASSERT(r->p[len] == 0xee && r->p[len + 15] == 0xee);
}

static void one_message(int from, size_t len, uint64_t tag, unsigned seed)
{
    tc_buf_t s = buf_new(from, len), r = buf_new(1 - from, len + 16);

    unit_fill(s.p, len, seed);
    message(&s, &r, from, len, tag, seed, 1);
    buf_free(&s);
    buf_free(&r);
}

/* Each size up to the transport's max_size both ways, alternately posted
 * first and unexpected; the buffers are made once, for the largest size. */
static void test_sizes(void)
{
    static const size_t sizes[] = {0,          1,          4095,           4096,
                                   4097,       65535,      65536,          65537,
                                   3 * 65536 + 5, (1u << 20) + 3, (4u << 20) + 3, (64u << 20) + 3};
    const size_t max = tc->max_size;
    tc_buf_t s[2] = {buf_new(0, max), buf_new(1, max)};
    tc_buf_t r[2] = {buf_new(0, max + 16), buf_new(1, max + 16)};

    unit_fill(s[0].p, max, 1);
    unit_fill(s[1].p, max, 2);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max; i++)
        for (int from = 0; from < 2; from++)
            message(&s[from], &r[1 - from], from, sizes[i], 100 + i, (unsigned)from + 1,
                    (int)(i + from) % 2);
    for (int side = 0; side < 2; side++) {
        buf_free(&s[side]);
        buf_free(&r[side]);
    }
}

/* sendv gathers uneven pieces (one empty) from two regions; recvv scatters
 * them into two pieces with room to spare. */
static void test_vectored(void)
{
    static const size_t piece[] = {4000, 70000, 700001};

    for (size_t k = 0; k < sizeof(piece) / sizeof(piece[0]); k++) {
        size_t n = piece[k], total = 3 * n + 5, got = 0;
        tc_buf_t a1 = buf_new(0, total), a2 = buf_new(0, total + 10);
        tc_buf_t b1 = buf_new(1, 1001), b2 = buf_new(1, total);
        uccl_iov_t siov[4] = {{a1.mr, 0, n}, {NULL, 0, 0}, {a2.mr, 10, 2 * n}, {a1.mr, n, 5}};
        uccl_iov_t riov[2] = {{b1.mr, 1, 1000}, {b2.mr, 0, total}};
        uint8_t *flat = malloc(total);
        uccl_req_t *reqs[2];

        CU_ASSERT_FATAL(flat != NULL);
        unit_fill(flat, total, 9);
        memcpy(a1.p, flat, n);
        memcpy(a2.p + 10, flat + n, 2 * n);
        memcpy(a1.p + n, flat + 3 * n, 5);
        UNIT_ASSERT_STATUS(uccl_recvv(P.ba, riov, 2, 7, &reqs[1]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_sendv(P.ab, siov, 4, 7, &reqs[0]), UCCL_OK);
        drive(reqs, 2);
        UNIT_ASSERT_STATUS(finish(reqs[0], NULL), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(reqs[1], &got), UCCL_OK);
        CU_ASSERT_EQUAL(got, total);
        memset(flat, 0, total);
        memcpy(flat, b1.p + 1, 1000);
        memcpy(flat + 1000, b2.p, total - 1000);
        CU_ASSERT_EQUAL(unit_mismatches(flat, total, 9), 0);
        free(flat);
        buf_free(&a1);
        buf_free(&a2);
        buf_free(&b1);
        buf_free(&b2);
    }
}

/* 64 messages each way in flight at once over 4 tags (16 per tag, whose
 * order must hold), sizes from 3 bytes to 300 KiB. */
static void test_many_in_flight(void)
{
    enum { N = 64 };
    const size_t slot = 300 * 1024;
    tc_buf_t sb[2] = {buf_new(0, N * slot), buf_new(1, N * slot)};
    tc_buf_t rb[2] = {buf_new(0, N * slot), buf_new(1, N * slot)};
    uccl_req_t *reqs[4 * N];

    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < N; i++) {
            size_t len = ((size_t)i * 4999 + 3) % slot;
            unit_fill(sb[side].p + i * slot, len, (unsigned)(1000 * side + i));
            UNIT_ASSERT_STATUS(uccl_recv(conn_of(side), rb[side].mr, i * slot, slot, (uint64_t)(i % 4),
                                         &reqs[2 * N * side + i]), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_send(conn_of(side), sb[side].mr, i * slot, len, (uint64_t)(i % 4),
                                         &reqs[2 * N * side + N + i]), UCCL_OK);
        }
    }
    drive(reqs, 4 * N);
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < N; i++) {
            size_t len = ((size_t)i * 4999 + 3) % slot, got = 0;
            UNIT_ASSERT_STATUS(finish(reqs[2 * N * side + i], &got), UCCL_OK);
            UNIT_ASSERT_STATUS(finish(reqs[2 * N * side + N + i], NULL), UCCL_OK);
            CU_ASSERT_EQUAL(got, len);
            CU_ASSERT_EQUAL(unit_mismatches(rb[side].p + i * slot, len, (unsigned)(1000 * (1 - side) + i)), 0);
        }
        buf_free(&sb[side]);
        buf_free(&rb[side]);
    }
}

/* A receive too small fails with TRUNCATED, whether posted before the
 * message came or after (unexpected), and loses nothing: the next receive
 * large enough gets the message. */
static void test_truncation(void)
{
    static const size_t sizes[] = {1000, 100000, (3u << 20) + 1};

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k], got = 0;
        tc_buf_t s = buf_new(0, len), r = buf_new(1, len);
        uccl_req_t *send, *recv;

        unit_fill(s.p, len, (unsigned)k + 20);
        /* posted first: fails when the message arrives */
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, r.mr, 0, len - 1, 77, &recv), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_send(P.ab, s.mr, 0, len, 77, &send), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(recv, NULL), UCCL_ERR_TRUNCATED);
        /* now unexpected: too small again, then right */
        settle(20);
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, r.mr, 0, len / 2, 77, &recv), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(recv, NULL), UCCL_ERR_TRUNCATED);
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, r.mr, 0, len, 77, &recv), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(recv, &got), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(send, NULL), UCCL_OK);
        CU_ASSERT_EQUAL(got, len);
        CU_ASSERT_EQUAL(unit_mismatches(r.p, len, (unsigned)k + 20), 0);
        buf_free(&s);
        buf_free(&r);
    }
}

/* ------------------------------------------------------------------ one-sided */

/* b exposes a region, a writes into it (whole, vectored, with notify: the
 * data is there when the value is) and out of bounds is refused at once. */
static void test_write_notify(void)
{
    const size_t len = (4u << 20) + 3, cap = len + 64;
    tc_buf_t t = buf_new(1, cap), l = buf_new(0, len);
    uccl_iov_t iov[3] = {{l.mr, 0, 5000}, {l.mr, 5000, 70000}, {l.mr, 75000, len - 75000}};
    uccl_rdesc_t rd;
    uccl_req_t *req;
    uint64_t v = 0;
    size_t got = 0;

    UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, cap, &rd), UCCL_OK);
    unit_fill(l.p, len, 21);
    UNIT_ASSERT_STATUS(uccl_write(P.ab, l.mr, 0, len, &rd, 64, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, len);
    CU_ASSERT_EQUAL(unit_mismatches(t.p + 64, len, 21), 0);
    UNIT_ASSERT_STATUS(uccl_write(P.ab, l.mr, 0, 10, &rd, cap - 5, &req), UCCL_ERR_OUT_OF_BOUNDS);
    unit_fill(l.p, len, 22);
    UNIT_ASSERT_STATUS(uccl_writev(P.ab, iov, 3, &rd, 1, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_OK);
    CU_ASSERT_EQUAL(unit_mismatches(t.p + 1, len, 22), 0);
    for (int i = 0; i < 2; i++) { /* a full 64-bit value, then one an immediate can carry */
        uint64_t value = i == 0 ? 0xfedcba9876543210ull : 0x1001u;
        unit_fill(l.p, len, 23u + (unsigned)i);
        UNIT_ASSERT_STATUS(uccl_write_notify(P.ab, l.mr, 0, len, &rd, 0, value, &req), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_OK);
        UNIT_ASSERT_STATUS(notif_wait(1, &v), UCCL_OK);
        CU_ASSERT_EQUAL(v, value);
        CU_ASSERT_EQUAL(unit_mismatches(t.p, len, 23u + (unsigned)i), 0);
    }
    UNIT_ASSERT_STATUS(uccl_notif_poll(P.ba, &v), UCCL_ERR_NOT_FOUND);
    buf_free(&t);
    buf_free(&l);
}

/* A write_notify of no bytes still delivers its value. */
static void test_notify_zero_length(void)
{
    tc_buf_t t = buf_new(1, 64), l = buf_new(0, 64);
    uccl_rdesc_t rd;
    uccl_req_t *req;
    uint64_t v = 0;

    UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, 64, &rd), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_write_notify(P.ab, l.mr, 0, 0, &rd, 64, 0x1002u, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_OK);
    UNIT_ASSERT_STATUS(notif_wait(1, &v), UCCL_OK);
    CU_ASSERT_EQUAL(v, 0x1002u);
    UNIT_ASSERT_STATUS(uccl_notif_poll(P.ba, &v), UCCL_ERR_NOT_FOUND);
    buf_free(&t);
    buf_free(&l);
}

/* a reads b's region back, whole and into three local pieces. */
static void test_read(void)
{
    const size_t len = (4u << 20) + 3;
    tc_buf_t t = buf_new(1, len + 3), l = buf_new(0, len + 100);
    uccl_iov_t iov[3] = {{l.mr, 0, 5000}, {l.mr, 6000, 70000}, {l.mr, 80000, 12345}};
    uccl_rdesc_t rd;
    uccl_req_t *req;
    uccl_status_t st;
    size_t got = 0;

    UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, len + 3, &rd), UCCL_OK);
    unit_fill(t.p + 3, len, 31);
    st = uccl_read(P.ab, l.mr, 100, len, &rd, 3, &req);
    if (st == UCCL_ERR_UNSUPPORTED && tc_uc()) {
        buf_free(&t);
        buf_free(&l);
        UNIT_SKIP("RDMA READ needs RC QPs (UCCL_VERBS_QP_TYPE=uc refuses it: UNSUPPORTED)");
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, len);
    CU_ASSERT_EQUAL(unit_mismatches(l.p + 100, len, 31), 0);
    memset(l.p, 0, len + 100);
    UNIT_ASSERT_STATUS(uccl_readv(P.ab, iov, 3, &rd, 3, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, 5000 + 70000 + 12345);
    CU_ASSERT_EQUAL(unit_mismatches(l.p, 5000, 31), 0);
    CU_ASSERT(memcmp(l.p + 6000, t.p + 3 + 5000, 70000) == 0);
    CU_ASSERT(memcmp(l.p + 80000, t.p + 3 + 75000, 12345) == 0);
    UNIT_ASSERT_STATUS(uccl_read(P.ab, l.mr, 0, 0, &rd, 0, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(finish(req, &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, 0);
    buf_free(&t);
    buf_free(&l);
}

/* A region b deregistered is never touched: every access ends
 * REMOTE_ACCESS, no notification arrives, the connection still works. */
static void test_remote_access_refused(void)
{
    static const size_t sizes[] = {100, 1u << 20, (4u << 20) + 3};
    uint64_t v;

    if (tc_uc())
        UNIT_SKIP("UC QPs report no remote access error to the writer (UCCL_VERBS_QP_TYPE=uc)");
    if (strcmp(tc->transport, "verbs") == 0) {
        tc_buf_t t = buf_new(1, 4096), l = buf_new(0, 4096);
        uccl_rdesc_t rd;
        uccl_req_t *req;

        UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, 4096, &rd), UCCL_OK);
        buf_free(&t);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, l.mr, 0, 4096, &rd, 0, &req), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_ERR_REMOTE_ACCESS);
        buf_free(&l);
        UNIT_SKIP("verbs: the first refused write ended REMOTE_ACCESS, but the RDMA error moves "
                  "the RC QP to error, so the connection is reset there (both ends report "
                  "REMOTE_ACCESS; test_tp_verbs checks that, and that other and new connections "
                  "work): reads, notify and reuse after a refusal not checked");
    }
    if (strncmp(tc->suite, "ofi_shm", 7) == 0)
        UNIT_SKIP("ofi over libfabric's shm provider: a write to a deregistered region never "
                  "completes (the provider reports no error; known limitation, not tried)");
    if (strncmp(tc->suite, "ofi_tcp", 7) == 0) {
        tc_buf_t t = buf_new(1, 4096), l = buf_new(0, 4096);
        uccl_rdesc_t rd;
        uccl_req_t *req;
        uccl_status_t st;

        UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, 4096, &rd), UCCL_OK);
        buf_free(&t);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, l.mr, 0, 4096, &rd, 0, &req), UCCL_OK);
        st = finish(req, NULL);
        CU_ASSERT(st == UCCL_ERR_REMOTE_ACCESS || st == UCCL_ERR_TRANSPORT ||
                  st == UCCL_ERR_PEER_FAILED);
        buf_free(&l);
        UNIT_SKIP("ofi over tcp;ofi_rxm: the first refused write failed, but the target "
                  "provider drops the link on a bad key, so the connection ends there (known "
                  "limitation): reads, notify and reuse after a refusal not checked");
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k];
        tc_buf_t t = buf_new(1, len), l = buf_new(0, len);
        uccl_rdesc_t rd;
        uccl_req_t *req;

        UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, len, &rd), UCCL_OK);
        buf_free(&t);
        unit_fill(l.p, len, 1);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, l.mr, 0, len, &rd, 0, &req), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_ERR_REMOTE_ACCESS);
        UNIT_ASSERT_STATUS(uccl_read(P.ab, l.mr, 0, len, &rd, 0, &req), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_ERR_REMOTE_ACCESS);
        CU_ASSERT_EQUAL(unit_mismatches(l.p, len, 1), 0); /* nothing landed */
        UNIT_ASSERT_STATUS(uccl_write_notify(P.ab, l.mr, 0, len, &rd, 0, 42, &req), UCCL_OK);
        UNIT_ASSERT_STATUS(finish(req, NULL), UCCL_ERR_REMOTE_ACCESS);
        buf_free(&l);
    }
    settle(20);
    UNIT_ASSERT_STATUS(uccl_notif_poll(P.ba, &v), UCCL_ERR_NOT_FOUND);
    one_message(0, 1234, 5, 77);
}

/* ------------------------------------------------------------------ peer death */

/* The peer: connect to the address read from fd, wait for the go, start a
 * 64 MiB send of tag 98 and exit mid-transfer without a goodbye. */
static int peer_death_child(int suite, int fd)
{
    uccl_engine_params_t params = tc_params(&tc_transports[suite], 1);
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = 64u << 20;
    uint8_t *buf = malloc(len);
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_mr_t *mr;
    uccl_req_t *req;
    uint32_t n;
    char go;

    if (buf == NULL || read(fd, &n, sizeof(n)) != sizeof(n) || n > sizeof(blob) ||
        read(fd, blob, n) != (ssize_t)n || uccl_engine_create(&params, &engine) != UCCL_OK ||
        uccl_connect(engine, blob, n, &conn) != UCCL_OK || read(fd, &go, 1) != 1 ||
        uccl_mr_reg(engine, buf, len, 0, &mr) != UCCL_OK)
        _exit(1);
    memset(buf, 5, len);
    if (uccl_send(conn, mr, 0, len, 98, &req) == UCCL_OK)
        for (int i = 0; i < 20; i++)
            uccl_engine_progress(engine);
    _exit(0);
}

/* The child dies while sending tag 98; the receive of tag 99 is for a
 * message never sent, so it can only end PEER_FAILED (never OK, never a
 * hang), and so do later posts on the connection. */
static void test_peer_death(void)
{
    uccl_engine_params_t params = tc_params(tc, 0);
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    char arg_suite[16], arg_fd[16];
    uccl_engine_t *engine;
    uccl_conn_t *conn = NULL;
    size_t cap = 64u << 20;
    uint8_t *buf = malloc(cap);
    uccl_mr_t *mr = NULL;
    uccl_req_t *req;
    int sv[2], status = -1;
    uint32_t n;
    pid_t pid;

    CU_ASSERT_FATAL(buf != NULL);
    UNIT_ASSERT_STATUS(uccl_engine_create(&params, &engine), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_address(engine, blob, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, cap, 0, &mr), UCCL_OK);
    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    snprintf(arg_suite, sizeof(arg_suite), "%d", (int)(tc - tc_transports));
    snprintf(arg_fd, sizeof(arg_fd), "%d", sv[1]);
    fflush(NULL);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        execl("/proc/self/exe", "test_tp_conformance", "--peer-death-child", arg_suite, arg_fd,
              (char *)NULL);
        _exit(2);
    }
    close(sv[1]);
    n = (uint32_t)len;
    CU_ASSERT_FATAL(write(sv[0], &n, sizeof(n)) == sizeof(n) && write(sv[0], blob, len) == (ssize_t)len);
    UNIT_ASSERT_STATUS(uccl_accept(engine, TC_WAIT_MS, &conn), UCCL_OK);
    if (conn != NULL && mr != NULL) {
        UNIT_ASSERT_STATUS(uccl_recv(conn, mr, 0, cap, 99, &req), UCCL_OK);
        CU_ASSERT(write(sv[0], "g", 1) == 1);
        UNIT_ASSERT_STATUS(uccl_wait(req, TC_WAIT_MS), UCCL_ERR_PEER_FAILED);
        uccl_req_free(req);
        UNIT_ASSERT_STATUS(uccl_recv(conn, mr, 0, 100, 100, &req), UCCL_ERR_PEER_FAILED);
        UNIT_ASSERT_STATUS(uccl_send(conn, mr, 0, 1, 100, &req), UCCL_ERR_PEER_FAILED);
    }
    close(sv[0]);
    CU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    uccl_engine_destroy(engine);
    free(buf);
}

/* ------------------------------------------------------------------ main */

static CU_TestInfo tc_tests[] = {
    {"send/recv sizes 0..64MiB+3 (verbs: 4MiB+3), both ways, posted and unexpected", test_sizes},
    {"sendv gathers, recvv scatters", test_vectored},
    {"64 in flight each way, tag order", test_many_in_flight},
    {"truncation loses nothing", test_truncation},
    {"write, writev, write_notify, out of bounds", test_write_notify},
    {"zero-length write_notify", test_notify_zero_length},
    {"read, readv, zero-length read", test_read},
    {"deregistered target region refused (ends a verbs connection)", test_remote_access_refused},
    {"peer death -> PEER_FAILED", test_peer_death},
    CU_TEST_INFO_NULL,
};

/* CUnit's suite callbacks take no argument: the running suite's name says
 * which transport it is for. */
static int tc_init(void)
{
    const char *name = CU_get_current_suite()->pName;

    for (size_t i = 0; i < TC_NTRANSPORTS; i++)
        if (strncmp(name, tc_transports[i].suite, strlen(tc_transports[i].suite)) == 0 &&
            (name[strlen(tc_transports[i].suite)] == '\0' || name[strlen(tc_transports[i].suite)] == ' '))
            tc = &tc_transports[i];
    return suite_init();
}

static int wanted(const char *suite, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], suite) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    CU_SuiteInfo suites[TC_NTRANSPORTS + 1];
    size_t n = 0;

    if (argc == 4 && strcmp(argv[1], "--peer-death-child") == 0)
        return peer_death_child(atoi(argv[2]), atoi(argv[3]));
    setenv("UCCL_TIMEOUT_MS", "30000", 0);
    for (size_t i = 0; i < TC_NTRANSPORTS; i++) {
        if (!wanted(tc_transports[i].suite, argc, argv))
            continue;
        tc = &tc_transports[i];
        tc_env(tc, 1); /* e.g. the libfabric provider the suite is for */
        if (!unit_transport_usable(tc->transport)) {
            tc_env(tc, 0);
            continue;
        }
        tc_env(tc, 0);
        suites[n++] = (CU_SuiteInfo){tc_uc() ? "verbs (UC QPs)" : tc_transports[i].suite, tc_init,
                                     suite_cleanup, NULL, NULL, tc_tests};
    }
    suites[n] = (CU_SuiteInfo)CU_SUITE_INFO_NULL;
    if (n == 0) {
        printf("no transport of this run is usable here\n");
        return UNIT_EXIT_SKIP;
    }
    return unit_main(suites);
}

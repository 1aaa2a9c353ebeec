/* Verbs-only cases (the shared scenarios are in test_tp_conformance.c, suite
 * "verbs"): 1000 operations in flight, striping over several QPs, many
 * write_notify, a deregistered region's key refused (RC). Two processes (fork) over real RDMA devices: in the Soft-RoCE
 * VM the parent uses $RXE_DEV and the child $RXE_DEV2, so traffic crosses the
 * veth pair. Exits 77 (skip) on a host without RDMA devices. */
#include <CUnit/Basic.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uccl/uccl.h>

#include "unit.h"
#include "verbs_pair.h"

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 11));
}

static bool check_fill(const uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != (uint8_t)(seed * 31 + i * 7 + (i >> 11)))
            return false;
    return true;
}

/* 1000 operations in flight at once: writes and small messages. */
#define NOPS 1000
static void side_many(peer_t *p)
{
    size_t cap = NOPS * 512;
    uint8_t *buf = calloc(1, cap);
    uccl_req_t **reqs = calloc(2 * NOPS, sizeof(*reqs));
    uccl_mr_t *mr;
    uccl_rdesc_t rd;

    CHECK(p, uccl_mr_reg(p->engine, buf, cap, 0, &mr) == UCCL_OK);
    CHECK(p, uccl_mr_pack(mr, 0, cap, &rd) == UCCL_OK);
    sock_xfer(p->sock, &rd, sizeof(rd), true);
    sock_xfer(p->sock, &rd, sizeof(rd), false);
    if (p->rank == 0) {
        fill(buf, cap, 4);
        for (int i = 0; i < NOPS; i++) {
            CHECK(p, uccl_write(p->conn, mr, (size_t)i * 512, 256, &rd, (size_t)i * 512, &reqs[i]) == UCCL_OK);
            CHECK(p, uccl_send(p->conn, mr, (size_t)i * 512 + 256, 64, (uint64_t)i, &reqs[NOPS + i]) == UCCL_OK);
        }
        CHECK(p, uccl_wait_all(reqs, 2 * NOPS, -1) == UCCL_OK);
        sync_peers(p);
    } else {
        for (int i = 0; i < NOPS; i++) /* in reverse tag order: every match searches */
            CHECK(p, uccl_recv(p->conn, mr, (size_t)i * 512 + 256, 256, (uint64_t)(NOPS - 1 - i), &reqs[i]) == UCCL_OK);
        CHECK(p, uccl_wait_all(reqs, NOPS, -1) == UCCL_OK);
        sync_peers(p);
        uint8_t *ref = malloc(cap);
        fill(ref, cap, 4);
        bool ok = true;
        for (int i = 0; i < NOPS && ok; i++) {
            size_t b = (size_t)i * 512, src = (size_t)(NOPS - 1 - i) * 512 + 256;
            ok = memcmp(buf + b, ref + b, 256) == 0 && memcmp(buf + b + 256, ref + src, 64) == 0;
        }
        CHECK(p, ok);
        free(ref);
    }
    for (int i = 0; i < 2 * NOPS; i++)
        if (reqs[i] != NULL)
            uccl_req_free(reqs[i]);
    uccl_mr_dereg(mr);
    free(reqs);
    free(buf);
}

static void test_many_in_flight(void) { run_pair(side_many); }

/* Many QPs: a large write and a large message striped over 8 QPs, 16K chunks. */
static void side_many_qps(peer_t *p)
{
    size_t cap = 1 << 20, got = 0;
    uint8_t *buf = calloc(1, cap);
    uccl_mr_t *mr;
    uccl_rdesc_t rd;
    uccl_req_t *req;

    CHECK(p, uccl_mr_reg(p->engine, buf, cap, 0, &mr) == UCCL_OK);
    CHECK(p, uccl_mr_pack(mr, 0, cap, &rd) == UCCL_OK);
    sock_xfer(p->sock, &rd, sizeof(rd), true);
    sock_xfer(p->sock, &rd, sizeof(rd), false);
    if (p->rank == 0) {
        fill(buf, cap, 11);
        CHECK(p, xfer_wait(uccl_write(p->conn, mr, 0, cap - 7, &rd, 7, &req), &req, NULL) == UCCL_OK);
        CHECK(p, xfer_wait(uccl_send(p->conn, mr, 0, cap - 1, 3, &req), &req, NULL) == UCCL_OK);
    } else {
        CHECK(p, xfer_wait(uccl_recv(p->conn, mr, 0, cap, 3, &req), &req, &got) == UCCL_OK);
        CHECK(p, got == cap - 1 && check_fill(buf, cap - 1, 11)); /* the send overwrote the write */
    }
    sync_peers(p);
    uccl_mr_dereg(mr);
    free(buf);
}

/* Run a two-process case with QP count and chunk size set for both sides. */
static void run_pair_striped(const char *qps, const char *chunk, void (*side)(peer_t *))
{
    setenv("UCCL_VERBS_NUM_QPS", qps, 1);
    setenv("UCCL_VERBS_CHUNK", chunk, 1);
    run_pair(side);
    unsetenv("UCCL_VERBS_NUM_QPS");
    unsetenv("UCCL_VERBS_CHUNK");
}

static void test_many_qps(void)
{
    run_pair_striped("8", "16K", side_many_qps);
}

/* Many write_notify over 4 QPs, 16K chunks: one-chunk and striped writes,
 * values that fit the immediate and full 64-bit ones. The child checks each
 * value, that the write it names has fully landed when it arrives, and, for
 * writes the parent waited for one by one, the order. */
#define WN_SERIAL 48
#define WN_BURST 96
#define WN_SLOT (96 * 1024)
static const size_t wn_sizes[] = {100, 16384, 3 * 16384 + 5, 40000, 5 * 16384 + 17, 1};

static uint64_t wn_value(int i)
{
    return i % 2 == 0 ? (uint64_t)i * 4 + 1 : 0xa5a5000000000000ull | (uint64_t)i << 16 | 0x1234;
}

static int wn_index(uint64_t v)
{
    int i = v < (1u << 30) ? (int)(v / 4) : (int)((v >> 16) & 0xffff);
    return i >= 0 && i < WN_SERIAL + WN_BURST && wn_value(i) == v ? i : -1;
}

static void wn_target(peer_t *p, const uint8_t *buf)
{
    bool seen[WN_SERIAL + WN_BURST] = {false};
    int got = 0, misorder = 0, bad = 0, nodata = 0;
    uint64_t v;

    for (int tries = 0; got < WN_SERIAL + WN_BURST && tries < 200000; tries++) {
        uccl_status_t st = uccl_notif_poll(p->conn, &v);
        int i;
        if (st == UCCL_ERR_NOT_FOUND) {
            usleep(100);
            continue;
        }
        if (st != UCCL_OK)
            break;
        i = wn_index(v);
        if (i < 0 || seen[i]) {
            bad++;
            continue;
        }
        seen[i] = true;
        if (got < WN_SERIAL && i != got)
            misorder++;
        if (!check_fill(buf + (size_t)i * WN_SLOT, wn_sizes[i % 6], (unsigned)i))
            nodata++;
        got++;
    }
    CHECK(p, got == WN_SERIAL + WN_BURST);
    CHECK(p, bad == 0 && misorder == 0 && nodata == 0);
}

static void wn_initiator(peer_t *p, uccl_mr_t *mr, uint8_t *buf, const uccl_rdesc_t *rd)
{
    uccl_req_t *reqs[WN_BURST];

    for (int i = 0; i < WN_SERIAL + WN_BURST; i++)
        fill(buf + (size_t)i * WN_SLOT, wn_sizes[i % 6], (unsigned)i);
    for (int i = 0; i < WN_SERIAL; i++)
        CHECK(p, xfer_wait(uccl_write_notify(p->conn, mr, (size_t)i * WN_SLOT, wn_sizes[i % 6], rd,
                                             (size_t)i * WN_SLOT, wn_value(i), &reqs[0]),
                           &reqs[0], NULL) == UCCL_OK);
    for (int k = 0; k < WN_BURST; k++) {
        int i = WN_SERIAL + k;
        CHECK(p, uccl_write_notify(p->conn, mr, (size_t)i * WN_SLOT, wn_sizes[i % 6], rd,
                                   (size_t)i * WN_SLOT, wn_value(i), &reqs[k]) == UCCL_OK);
    }
    CHECK(p, uccl_wait_all(reqs, WN_BURST, -1) == UCCL_OK);
    for (int k = 0; k < WN_BURST; k++)
        uccl_req_free(reqs[k]);
}

static void side_write_notify_many(peer_t *p)
{
    size_t cap = (size_t)(WN_SERIAL + WN_BURST) * WN_SLOT;
    uint8_t *buf = calloc(1, cap);
    uccl_mr_t *mr;
    uccl_rdesc_t rd;

    CHECK(p, uccl_mr_reg(p->engine, buf, cap, 0, &mr) == UCCL_OK);
    CHECK(p, uccl_mr_pack(mr, 0, cap, &rd) == UCCL_OK);
    sock_xfer(p->sock, &rd, sizeof(rd), true);
    sock_xfer(p->sock, &rd, sizeof(rd), false);
    if (p->rank == 0)
        wn_initiator(p, mr, buf, &rd);
    else
        wn_target(p, buf);
    sync_peers(p);
    uccl_mr_dereg(mr);
    free(buf);
}

static void test_write_notify_many(void)
{
    run_pair_striped("4", "16K", side_write_notify_many);
}

/* ---- a deregistered region's rkey (issue 20) */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uccl_conn_t *second_conn(peer_t *p)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_conn_t *conn = NULL;

    if (p->rank == 1) {
        CHECK(p, uccl_engine_address(p->engine, blob, &len) == UCCL_OK);
        sock_xfer(p->sock, &len, sizeof(len), true);
        sock_xfer(p->sock, blob, len, true);
        CHECK(p, uccl_accept(p->engine, -1, &conn) == UCCL_OK);
    } else {
        sock_xfer(p->sock, &len, sizeof(len), false);
        CHECK(p, len <= sizeof(blob));
        sock_xfer(p->sock, blob, len < sizeof(blob) ? len : sizeof(blob), false);
        CHECK(p, uccl_connect(p->engine, blob, len, &conn) == UCCL_OK);
    }
    return conn;
}

/* Rank 1 describes a region, deregisters it; rank 0 writes there over conn
 * 1: REMOTE_ACCESS, no hang. The RDMA error puts the RC QP in error at both
 * ends, so conn 1 is reset: both ends report REMOTE_ACCESS as its state
 * and later operations fail with it at once. conn 2, between the same
 * engines, moves bytes intact; so does a new connection. */
static void side_rkey(peer_t *p)
{
    const size_t len = 1u << 20;
    uint8_t *buf = calloc(1, len), *gone = calloc(1, 65536);
    uccl_mr_t *mr, *gmr;
    uccl_rdesc_t rd, rd_gone;
    uccl_conn_t *conn2 = second_conn(p), *conn3;
    uccl_conn_attr_t attr;
    uccl_req_t *req = NULL;
    uint64_t v = 0;

    CHECK(p, uccl_mr_reg(p->engine, buf, len, 0, &mr) == UCCL_OK);
    if (p->rank == 1) {
        CHECK(p, uccl_mr_reg(p->engine, gone, 65536, 0, &gmr) == UCCL_OK);
        CHECK(p, uccl_mr_pack(gmr, 0, 65536, &rd_gone) == UCCL_OK);
        CHECK(p, uccl_mr_dereg(gmr) == UCCL_OK);
        CHECK(p, uccl_mr_pack(mr, 0, len, &rd) == UCCL_OK);
        sock_xfer(p->sock, &rd_gone, sizeof(rd_gone), true);
        sock_xfer(p->sock, &rd, sizeof(rd), true);
        /* the target: its end of conn 1 fails too, with the same status */
        CHECK(p, uccl_notif_wait(p->conn, &v, -1) == UCCL_ERR_REMOTE_ACCESS);
        CHECK(p, uccl_conn_query(p->conn, &attr) == UCCL_OK && attr.state == UCCL_ERR_REMOTE_ACCESS);
        sync_peers(p);
        CHECK(p, uccl_notif_wait(conn2, &v, -1) == UCCL_OK && v == 0x5151u);
        CHECK(p, check_fill(buf, len, 51));
        conn3 = second_conn(p);
        CHECK(p, uccl_notif_wait(conn3, &v, -1) == UCCL_OK && v == 0x5252u);
        CHECK(p, check_fill(buf, 4096, 52));
        for (size_t i = 0; i < 65536; i++)
            if (gone[i] != 0) {
                CHECK(p, !"the deregistered region was written");
                break;
            }
    } else {
        uint64_t t0;
        sock_xfer(p->sock, &rd_gone, sizeof(rd_gone), false);
        sock_xfer(p->sock, &rd, sizeof(rd), false);
        fill(buf, len, 50);
        t0 = now_ms();
        CHECK(p, xfer_wait(uccl_write(p->conn, mr, 0, 65536, &rd_gone, 0, &req), &req, NULL) ==
                     UCCL_ERR_REMOTE_ACCESS);
        printf("# write to a deregistered region: REMOTE_ACCESS after %llu ms\n",
               (unsigned long long)(now_ms() - t0));
        CHECK(p, uccl_conn_query(p->conn, &attr) == UCCL_OK && attr.state == UCCL_ERR_REMOTE_ACCESS);
        /* the reset connection refuses further work with its status */
        CHECK(p, xfer_wait(uccl_write(p->conn, mr, 0, 4096, &rd, 0, &req), &req, NULL) ==
                     UCCL_ERR_REMOTE_ACCESS);
        sync_peers(p);
        fill(buf, len, 51);
        CHECK(p, xfer_wait(uccl_write_notify(conn2, mr, 0, len, &rd, 0, 0x5151u, &req), &req,
                           NULL) == UCCL_OK);
        conn3 = second_conn(p);
        fill(buf, 4096, 52);
        CHECK(p, xfer_wait(uccl_write_notify(conn3, mr, 0, 4096, &rd, 0, 0x5252u, &req), &req,
                           NULL) == UCCL_OK);
    }
    sync_peers(p);
    uccl_conn_close(p->conn);
    p->conn = NULL;
    uccl_conn_close(conn2);
    if (conn3 != NULL)
        uccl_conn_close(conn3);
    uccl_mr_dereg(mr);
    free(buf);
    free(gone);
}

static void test_rkey_after_dereg(void)
{
    const char *qp_type = getenv("UCCL_VERBS_QP_TYPE");

    if (qp_type != NULL && strcmp(qp_type, "uc") == 0)
        UNIT_SKIP("UC QPs report no remote access error to the writer (UCCL_VERBS_QP_TYPE=uc)");
    run_pair(side_rkey);
}

/* ---- registration beyond RLIMIT_MEMLOCK (issue 20) */

static int memlock_log_hits;

static void memlock_sink(void *arg, uccl_log_level_t level, const char *file, int line,
                         const char *msg)
{
    (void)arg, (void)level, (void)file, (void)line;
    if (strstr(msg, "RLIMIT_MEMLOCK") != NULL)
        memlock_log_hits++;
}

/* In a child: without CAP_IPC_LOCK (root bypasses the limit) and with
 * RLIMIT_MEMLOCK at 1 MiB, registering 8 MiB fails with NO_MEMORY and a log
 * line naming RLIMIT_MEMLOCK; what fits registers; after a deregistration
 * the same room is there again (nothing stays pinned). Exit 0 = as expected,
 * 77 = could not set the stage. */
static int memlock_child(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    struct rlimit rl = {.rlim_cur = 1u << 20, .rlim_max = 1u << 20};
    uint8_t *buf = aligned_alloc(4096, 8u << 20);
    uccl_engine_t *e;
    uccl_mr_t *mr, *mr2;
    int bad = 0;

    memset(data, 0, sizeof(data));
    if (buf == NULL || syscall(SYS_capget, &hdr, data) != 0)
        return 77;
    data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
    if (syscall(SYS_capset, &hdr, data) != 0 || setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return 77;
    memset(buf, 1, 8u << 20);
    if (pair_engine_create(0, &e) != UCCL_OK)
        return 77;
    uccl_log_set_sink(memlock_sink, NULL);
    bad += uccl_mr_reg(e, buf, 8u << 20, 0, &mr) != UCCL_ERR_NO_MEMORY;
    bad += memlock_log_hits == 0;
    bad += uccl_mr_reg(e, buf, 512u << 10, 0, &mr) != UCCL_OK;
    bad += uccl_mr_reg(e, buf + (1u << 20), 768u << 10, 0, &mr2) != UCCL_ERR_NO_MEMORY;
    bad += uccl_mr_dereg(mr) != UCCL_OK;
    bad += uccl_mr_reg(e, buf + (1u << 20), 768u << 10, 0, &mr2) != UCCL_OK; /* room again */
    bad += uccl_mr_dereg(mr2) != UCCL_OK;
    uccl_log_set_sink(NULL, NULL);
    uccl_engine_destroy(e);
    if (bad)
        fprintf(stderr, "memlock child: %d checks failed (log lines naming it: %d)\n", bad,
                memlock_log_hits);
    return bad ? 1 : 0;
}

static void test_memlock(void)
{
    int status = 0;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(memlock_child());
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        UNIT_SKIP("could not drop CAP_IPC_LOCK or lower RLIMIT_MEMLOCK here");
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    const char *qp_type = getenv("UCCL_VERBS_QP_TYPE");
    CU_TestInfo tests[] = {
        {"1000 operations in flight", test_many_in_flight},
        {"8 QPs, 16K chunks", test_many_qps},
        {"write_notify x144 over 4 QPs: values, data, order", test_write_notify_many},
        {"deregistered region: REMOTE_ACCESS, that conn reset, others and new ones work",
         test_rkey_after_dereg},
        {"registration beyond RLIMIT_MEMLOCK: NO_MEMORY, named in the log, nothing stays pinned",
         test_memlock},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"tp_verbs_rc", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    signal(SIGPIPE, SIG_IGN);
    if (!pair_device_present()) {
        printf("SKIP: no usable RDMA device here (run in the Soft-RoCE VM: tests/rxe/check.sh)\n");
        return 77;
    }
    if (qp_type != NULL && strcmp(qp_type, "uc") == 0)
        suites[0].pName = "tp_verbs_uc";
    return unit_main(suites);
}

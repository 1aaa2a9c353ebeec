/* A completed send is a promise (issue 20): two processes (fork); the
 * sender's sends all complete, then it destroys its engine and exits; the
 * receiver posts its receives only afterwards, slowly, and must get every
 * message, byte for byte, before the connection reports PEER_FAILED. Runs
 * over tcp and shm. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "unit_conn.h"

static uint8_t pattern(size_t msg, size_t i) { return (uint8_t)(msg * 31 + i * 7 + 1); }

static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    uint8_t *p = buf;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, timeout_ms) <= 0)
            return -1;
        n = read(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The sender process: connect, send count messages of size bytes, wait for
 * every send, say so, destroy the engine (which flushes what the receiver
 * has not taken yet), say so, exit. Exit status: 0 = all sends completed
 * with UCCL_OK and the engine was destroyed, else the step that failed. */
static int sender_main(int sock, size_t count, size_t size)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    uint64_t blob_len;
    uccl_engine_t *e;
    uccl_conn_t *conn;
    uccl_mr_t *mr;
    uccl_req_t **reqs = calloc(count, sizeof(*reqs));
    uint8_t *buf = malloc(count * size);
    char done = 'd';

    if (reqs == NULL || buf == NULL)
        return 2;
    for (size_t m = 0; m < count; m++)
        for (size_t i = 0; i < size; i++)
            buf[m * size + i] = pattern(m, i);
    if (read_full(sock, &blob_len, sizeof(blob_len), 10000) != 0 || blob_len > sizeof(blob) ||
        read_full(sock, blob, blob_len, 10000) != 0)
        return 3;
    if (unit_engine_create(unit_tp, &e) != UCCL_OK)
        return 4;
    if (uccl_connect(e, blob, blob_len, &conn) != UCCL_OK)
        return 5;
    if (uccl_mr_reg(e, buf, count * size, 0, &mr) != UCCL_OK)
        return 6;
    for (size_t m = 0; m < count; m++)
        if (uccl_send(conn, mr, m * size, size, 7, &reqs[m]) != UCCL_OK)
            return 7;
    if (uccl_wait_all(reqs, count, -1) != UCCL_OK)
        return 8;
    if (write(sock, "s", 1) != 1) /* every send completed */
        return 10;
    for (size_t m = 0; m < count; m++)
        uccl_req_free(reqs[m]);
    uccl_mr_dereg(mr);
    if (uccl_engine_destroy(e) != UCCL_OK)
        return 9;
    if (write(sock, &done, 1) != 1)
        return 11;
    free(buf);
    free(reqs);
    return 0;
}

/* Progress until the connection reports its failure (the peer is gone). */
static uccl_status_t wait_conn_failed(uccl_engine_t *e, uccl_conn_t *conn, int timeout_ms)
{
    uint64_t deadline = unit_now_ms() + (uint64_t)timeout_ms;
    uccl_conn_attr_t attr;

    for (;;) {
        uccl_engine_progress(e);
        if (uccl_conn_query(conn, &attr) != UCCL_OK)
            return UCCL_ERR_INVALID_HANDLE;
        if (attr.state != UCCL_OK)
            return attr.state;
        if (unit_now_ms() >= deadline)
            return UCCL_ERR_TIMEOUT;
        usleep(1000);
    }
}

/* progress_early: progress while the sender works (more than the socket
 * buffers hold: the messages wait in the unexpected queue), else nothing
 * runs here until the sender is gone (they wait in socket buffers / ring). */
static void run_late_receiver(size_t count, size_t size, bool progress_early)
{
    int sv[2];
    pid_t pid;
    uccl_engine_t *e = NULL;
    uccl_conn_t *conn = NULL;
    uccl_mr_t *mr = NULL;
    uccl_req_t *req = NULL;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uint64_t blob_len;
    uint8_t *buf = malloc(size);
    size_t got = 0, bad_bytes = 0, bytes = 0;
    char done = 0;
    int wstatus = 0;

    CU_ASSERT_FATAL(buf != NULL);
    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(sender_main(sv[1], count, size));
    }
    close(sv[1]);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &e), UCCL_OK);
    if (e == NULL)
        goto out_kill;
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_OK);
    blob_len = len;
    CU_ASSERT_FATAL(write(sv[0], &blob_len, sizeof(blob_len)) == sizeof(blob_len));
    CU_ASSERT_FATAL(write(sv[0], blob, len) == (ssize_t)len);
    UNIT_ASSERT_STATUS(uccl_accept(e, 10000, &conn), UCCL_OK);
    if (conn == NULL)
        goto out_kill;
    if (progress_early) {
        uint64_t deadline = unit_now_ms() + 30000;
        while (read_full(sv[0], &done, 1, 0) != 0 && unit_now_ms() < deadline)
            uccl_engine_progress(e);
    } else {
        CU_ASSERT_EQUAL(read_full(sv[0], &done, 1, 30000), 0);
    }
    CU_ASSERT_EQUAL(done, 's');
    usleep(300 * 1000);
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, buf, size, 0, &mr), UCCL_OK);
    for (size_t m = 0; m < count; m++) {
        uccl_status_t st = uccl_recv(conn, mr, 0, size, 7, &req);

        if (st == UCCL_OK)
            st = uccl_wait(req, -1);
        if (req != NULL && st == UCCL_OK)
            uccl_req_bytes(req, &bytes);
        if (req != NULL)
            uccl_req_free(req);
        req = NULL;
        if (st != UCCL_OK || bytes != size) {
            fprintf(stderr, "\n  %s: message %zu of %zu: %s (%zu bytes)\n", unit_tp, m + 1, count,
                    uccl_status_name(st), bytes);
            break;
        }
        for (size_t i = 0; i < size; i++)
            bad_bytes += buf[i] != pattern(m, i);
        got++;
        /* after the first message, let the connection notice that the peer
         * is gone: the rest must still be offered to later receives */
        if (m == 0)
            UNIT_ASSERT_STATUS(wait_conn_failed(e, conn, 10000), UCCL_ERR_PEER_FAILED);
    }
    CU_ASSERT_EQUAL(got, count);
    CU_ASSERT_EQUAL(bad_bytes, 0);
    CU_ASSERT_EQUAL(read_full(sv[0], &done, 1, 30000), 0);
    CU_ASSERT_EQUAL(done, 'd');
    CU_ASSERT_EQUAL(waitpid(pid, &wstatus, 0), pid);
    pid = -1;
    CU_ASSERT(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        fprintf(stderr, "\n  sender exited with status %d\n", WEXITSTATUS(wstatus));
    /* then, and only then, the failure */
    UNIT_ASSERT_STATUS(uccl_recv(conn, mr, 0, size, 7, &req), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
out_kill:
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    if (e != NULL)
        uccl_engine_destroy(e);
    close(sv[0]);
    free(buf);
}

static void test_16_x_64k(void) { run_late_receiver(16, 64 * 1024, false); }
static void test_64_x_1m(void) { run_late_receiver(64, 1024 * 1024, true); }
static void test_200_x_100b(void) { run_late_receiver(200, 100, false); }

static CU_TestInfo tests[] = {
    {"16 x 64 KiB sent, sender gone, received late", test_16_x_64k},
    {"64 x 1 MiB sent, sender gone, received late", test_64_x_1m},
    {"200 x 100 B sent, sender gone, received late", test_200_x_100b},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "10000", 1);
    /* shm: sends up to 1 MiB complete once in the ring (eager), so that the
     * sender is done before the receiver posts anything */
    setenv("UCCL_SHM_EAGER_THRESHOLD", "1M", 1);
    setenv("UCCL_SHM_RING_SIZE", "128M", 1);
    /* tcp: likewise, no rendezvous (it would hold each 1 MiB send until
     * its receive is posted); test_tcp_rndv covers that path */
    setenv("UCCL_TCP_RNDV_MIN", "0", 1);
    return unit_main_tp("close_flush", tests, NULL, NULL);
}

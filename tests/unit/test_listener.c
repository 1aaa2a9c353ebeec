/* The connection-setup listener, and the tcp transport's, under a flood of
 * idle loopback sockets (issue 20): pending setups are capped
 * (UCCL_SETUP_MAX_PENDING) and time out (UCCL_SETUP_TIMEOUT_MS), an engine
 * short of file descriptors gives an idle one up for a real peer, and a
 * real peer connects and exchanges a message meanwhile. The flooded engine runs in a child process with a
 * tight RLIMIT_NOFILE; the flood and the real peer come from this one. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"
#include "unit_conn.h"

#define SETUP_TIMEOUT_MS 500
#define MAX_PENDING 16

static int full_io(int fd, void *buf, size_t len, bool writing)
{
    uint8_t *p = buf;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, 30000) <= 0)
            return -1;
        n = writing ? write(fd, p, len) : read(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int pending_setups(uccl_engine_t *e)
{
    return (int)uccl_list_length(&e->handshakes);
}

/* One 8-byte message each way on conn. */
static uccl_status_t ping(uccl_conn_t *conn, uccl_engine_t *e, bool first)
{
    uint64_t out = 0x1234567890abcdefull, in = 0;
    uccl_mr_t *mo = NULL, *mi = NULL;
    uccl_req_t *r[2] = {NULL, NULL};
    uccl_status_t st = uccl_mr_reg(e, &out, sizeof(out), 0, &mo);

    if (st == UCCL_OK)
        st = uccl_mr_reg(e, &in, sizeof(in), 0, &mi);
    if (st == UCCL_OK)
        st = uccl_recv(conn, mi, 0, sizeof(in), first ? 2 : 1, &r[0]);
    if (st == UCCL_OK)
        st = uccl_send(conn, mo, 0, sizeof(out), first ? 1 : 2, &r[1]);
    if (st == UCCL_OK)
        st = uccl_wait_all(r, 2, -1);
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

/* The flooded engine: fd limit = what it holds after creation + spare,
 * accept one real peer, ping it, then keep the listener going until told
 * to stop. Exit status: 0 = all fine, else the step that failed. */
static int target_main(int sock, const char *transport, int spare)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uint64_t blob_len;
    struct rlimit rl;
    uccl_engine_t *e;
    uccl_conn_t *conn;
    int rc = 0;

    if (unit_engine_create(transport, &e) != UCCL_OK || uccl_engine_address(e, blob, &len) != UCCL_OK)
        return 2;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 3;
    rl.rlim_cur = (rlim_t)(unit_fd_count() + spare);
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 3;
    blob_len = len;
    if (full_io(sock, &blob_len, sizeof(blob_len), true) != 0 || full_io(sock, blob, len, true) != 0)
        return 4;
    if (uccl_accept(e, 20000, &conn) != UCCL_OK)
        return 5;
    if (ping(conn, e, false) != UCCL_OK)
        return 6;
    if (pending_setups(e) > MAX_PENDING)
        rc = 7;
    /* serve the listener (idle setups time out) until the test says stop */
    for (;;) {
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0)
            break;
        uccl_engine_progress(e);
        if (pending_setups(e) > MAX_PENDING)
            rc = 7;
        usleep(1000);
    }
    uccl_conn_close(conn);
    uccl_engine_destroy(e);
    return rc;
}

/* n non-blocking connects to the engine's setup listener that never send. */
static int *flood(const struct sockaddr_in *sa, int n)
{
    int *fds = calloc((size_t)n, sizeof(*fds));

    for (int i = 0; fds != NULL && i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fds[i] >= 0 && connect(fds[i], (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
            errno != EINPROGRESS)
            fprintf(stderr, "\n  flood connect %d: %s\n", i, strerror(errno));
    }
    return fds;
}

/* How many flood sockets the engine has closed (EOF or reset) by deadline. */
static int flood_closed(int *fds, int n, int timeout_ms)
{
    uint64_t deadline = unit_now_ms() + (uint64_t)timeout_ms;
    int closed = 0;

    while (closed < n && unit_now_ms() < deadline) {
        closed = 0;
        for (int i = 0; i < n; i++) {
            char c;
            ssize_t r;

            if (fds[i] < 0) {
                closed++;
                continue;
            }
            r = recv(fds[i], &c, 1, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(fds[i]);
                fds[i] = -1;
                closed++;
            }
        }
        usleep(10000);
    }
    return closed;
}

/* The tcp transport's own listener (its streams' hello), from its entry in
 * the address blob: version, 0, port (network order), ipv4. */
static struct sockaddr_in tcp_listener(const uccl_address_t *addr)
{
    struct sockaddr_in sa = addr->oob;

    for (int i = 0; i < addr->ntp; i++)
        if (strcmp(addr->tp[i].name, "tcp") == 0 && addr->tp[i].len >= 4)
            memcpy(&sa.sin_port, (const uint8_t *)addr->tp[i].addr + 2, 2);
    return sa;
}

/* flood_tp: flood the tcp transport's listener instead of the setup one. */
static void run_flood(const char *transport, int spare, int nflood, bool flood_tp)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    uint64_t blob_len = 0;
    uccl_address_t addr;
    uccl_engine_t *real = NULL;
    uccl_conn_t *conn = NULL;
    int sv[2], *fds = NULL, wstatus = -1;
    uint64_t t0;
    pid_t pid;

    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(target_main(sv[1], transport, spare));
    }
    close(sv[1]);
    CU_ASSERT_FATAL(full_io(sv[0], &blob_len, sizeof(blob_len), false) == 0 &&
                    blob_len <= sizeof(blob) && full_io(sv[0], blob, blob_len, false) == 0);
    UNIT_ASSERT_STATUS(uccl_address_parse(blob, blob_len, &addr), UCCL_OK);
    {
        struct sockaddr_in target = flood_tp ? tcp_listener(&addr) : addr.oob;
        CU_ASSERT(target.sin_port != addr.oob.sin_port || !flood_tp);
        fds = flood(&target, nflood);
    }
    CU_ASSERT_FATAL(fds != NULL);
    usleep(100 * 1000); /* the flood lands first */
    UNIT_ASSERT_STATUS(unit_engine_create(transport, &real), UCCL_OK);
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(uccl_connect(real, blob, blob_len, &conn), UCCL_OK);
    if (conn != NULL) {
        UNIT_ASSERT_STATUS(ping(conn, real, true), UCCL_OK);
        printf(" [%s: real peer served in %llu ms] ", transport,
               (unsigned long long)(unit_now_ms() - t0));
    }
    /* every idle socket is dropped soon after UCCL_SETUP_TIMEOUT_MS (the flood
     * stays within the listen backlog: each of them reaches accept) */
    CU_ASSERT_EQUAL(flood_closed(fds, nflood, SETUP_TIMEOUT_MS * 6), nflood);
    CU_ASSERT(write(sv[0], "x", 1) == 1);
    CU_ASSERT_EQUAL(waitpid(pid, &wstatus, 0), pid);
    CU_ASSERT(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        fprintf(stderr, "\n  flooded engine exited with status %d\n", WEXITSTATUS(wstatus));
    for (int i = 0; i < nflood; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    if (conn != NULL)
        uccl_conn_close(conn);
    if (real != NULL)
        uccl_engine_destroy(real);
    close(sv[0]);
}

/* Room for the capped pending setups and a tcp connection's streams: the
 * flood alone would fill the fd table without the cap. */
static void test_flood_cap_tcp(void) { run_flood("tcp", MAX_PENDING + 24, 120, false); }

/* Fewer fds than the cap: accept meets EMFILE and an idle setup gives up
 * its fd to the real peer (shm needs no more than the setup socket). */
static void test_flood_emfile_shm(void) { run_flood("shm", MAX_PENDING / 2, 100, false); }

/* The tcp transport's listener has the same cap and timeout, and an idle
 * socket gives its fd up to a real stream. */
static void test_flood_tcp_streams(void) { run_flood("tcp", MAX_PENDING + 12, 120, true); }


/* The tcp listener evicts the oldest socket that sent no hello when a new
 * one comes at the cap (UCCL_SETUP_MAX_PENDING=1 here). One epoll batch
 * holds the listener's event (socket b) and then a's (a's first byte):
 * accepting b evicts a, and a's event must not reach a's freed record
 * (a use after free: ASan and valgrind see it). a goes, b stays. */
static void test_tcp_evict_in_batch(void)
{
    char text[16];
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_address_t addr;
    struct sockaddr_in sa;
    uccl_engine_t *e = NULL;
    int a, b;
    char c = 'h';

    setenv("UCCL_SETUP_MAX_PENDING", "1", 1);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &e), UCCL_OK);
    snprintf(text, sizeof(text), "%d", MAX_PENDING);
    setenv("UCCL_SETUP_MAX_PENDING", text, 1);
    CU_ASSERT_FATAL(e != NULL);
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_address_parse(blob, len, &addr), UCCL_OK);
    sa = tcp_listener(&addr);
    a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CU_ASSERT_FATAL(a >= 0 && b >= 0);
    CU_ASSERT_FATAL(connect(a, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    /* an idle engine polls its listener one round in 32: a is accepted */
    for (int i = 0; i < 200; i++) {
        uccl_engine_progress(e);
        usleep(500);
    }
    /* the listener's edge, then a's: one batch, in that order */
    CU_ASSERT_FATAL(connect(b, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    usleep(20 * 1000);
    CU_ASSERT_FATAL(send(a, &c, 1, MSG_NOSIGNAL) == 1);
    usleep(20 * 1000);
    for (int i = 0; i < 50; i++) {
        uccl_engine_progress(e);
        usleep(500);
    }
    /* a was evicted (end of file or reset), b waits for its hello */
    errno = 0;
    CU_ASSERT(recv(a, &c, 1, MSG_DONTWAIT) <= 0 && errno != EAGAIN);
    CU_ASSERT(recv(b, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
    close(a);
    close(b);
    uccl_engine_destroy(e);
}

/* The tcp listener out of file descriptors with no idle socket to drop: a
 * peer's stream waits in the backlog and every progress round tries accept
 * again. That is said once, not once per round (was: a warning per round,
 * thousands a second). Child process: its stderr into a file, its fd table
 * full; exit status = the warnings about accept. */
static int emfile_child(void)
{
    char path[] = "/tmp/uccl_test_emfile_XXXXXX";
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_address_t addr;
    struct sockaddr_in sa;
    struct rlimit rl;
    uccl_engine_t *e;
    char line[512];
    int logfd = mkstemp(path), c, lowest, warnings = 0;
    FILE *log;

    if (logfd < 0 || unit_engine_create("tcp", &e) != UCCL_OK ||
        uccl_engine_address(e, blob, &len) != UCCL_OK || uccl_address_parse(blob, len, &addr) != UCCL_OK)
        return 100;
    unlink(path);
    sa = tcp_listener(&addr);
    c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    lowest = dup(0); /* the lowest free descriptor: the limit leaves none */
    if (c < 0 || lowest < 0 || close(lowest) != 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 101;
    fflush(stderr);
    dup2(logfd, 2);
    rl.rlim_cur = (rlim_t)lowest;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return 102;
    for (int i = 0; i < 2000; i++) {
        uccl_engine_progress(e);
        if (i % 20 == 0)
            usleep(1000);
    }
    fflush(stderr);
    log = fdopen(logfd, "r");
    if (log == NULL || fseek(log, 0, SEEK_SET) != 0)
        return 103;
    while (fgets(line, sizeof(line), log) != NULL)
        warnings += strstr(line, "tcp: accept") != NULL;
    return warnings < 99 ? warnings : 99;
}

static void test_tcp_emfile_quiet(void)
{
    int wstatus = -1;
    pid_t pid = fork();

    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(emfile_child());
    CU_ASSERT_EQUAL(waitpid(pid, &wstatus, 0), pid);
    CU_ASSERT(WIFEXITED(wstatus));
    /* one warning (the first EMFILE), not one per round */
    CU_ASSERT_EQUAL(WEXITSTATUS(wstatus), 1);
    if (WEXITSTATUS(wstatus) != 1)
        fprintf(stderr, "\n  child: %d warnings about accept (100+: setup failed)\n", WEXITSTATUS(wstatus));
}

static CU_TestInfo tests[] = {
    {"120 idle sockets, cap, a real tcp peer", test_flood_cap_tcp},
    {"100 idle sockets, EMFILE, a real shm peer", test_flood_emfile_shm},
    {"120 idle sockets on the tcp transport's listener", test_flood_tcp_streams},
    {"tcp listener: a socket evicted in the batch that has its event", test_tcp_evict_in_batch},
    {"tcp listener out of fds, nothing to drop: warned once", test_tcp_emfile_quiet},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {
        {"listener", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };
    char text[32];

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_OOB_IFADDR", "127.0.0.1", 1);
    setenv("UCCL_TIMEOUT_MS", "20000", 1);
    snprintf(text, sizeof(text), "%d", SETUP_TIMEOUT_MS);
    setenv("UCCL_SETUP_TIMEOUT_MS", text, 1);
    snprintf(text, sizeof(text), "%d", MAX_PENDING);
    setenv("UCCL_SETUP_MAX_PENDING", text, 1);
    signal(SIGPIPE, SIG_IGN);
    return unit_main(suites);
}

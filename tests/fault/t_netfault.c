/* Network fault over tcp (issue 20), driven by netfault.sh, which puts the
 * server in a network namespace behind a veth pair and takes the link down
 * mid-transfer. Files in DIR coordinate the two and the script:
 *   t_netfault server DIR: write DIR/addr, accept connections for as long as
 *     DIR/quit is absent; to each, send a descriptor of a 16 MiB region.
 *   t_netfault client DIR: connect, keep 8 MiB writes and reads going, touch
 *     DIR/go after the first; the script downs the link. The next operation
 *     must fail with TIMEOUT (or PEER_FAILED) within UCCL_TIMEOUT_MS + slack,
 *     the close must return within UCCL_TIMEOUT_MS; touch DIR/failed; once DIR/up exists
 *     (link back up), a new connection must move bytes correctly. The
 *     client's open fds must be back to their count before the connection
 *     once the failed one is closed, and to their count before the engine
 *     once it is destroyed. NETFAULT_EXPECT=timeout: the fault must show as
 *     TIMEOUT (packets dropped: nothing tells the peer is gone).
 *   t_netfault client-lossy DIR (netloss.sh, packets dropped at random):
 *     connect, then NETFAULT_ROUNDS (default 4) rounds of 8 MiB written, read
 *     back and compared, and 1 MiB sent and received back compared: all
 *     must complete intact; fds back to their count after the engine.
 *   t_netfault client-loss DIR DIR2 (node loss, tests/rxe/check-cluster.sh):
 *     connect to the servers of DIR2 (a survivor) and DIR; keep 8 MiB writes
 *     and reads going to DIR's, touch DIR/go after the first; the script
 *     kills that server's host. The next operation must fail with TIMEOUT or
 *     PEER_FAILED within UCCL_TIMEOUT_MS + slack, its close must return in
 *     time, and the connection to DIR2's server must still move bytes intact.
 *     With NETFAULT_OP=allgather (both sides), DIR's server and the client
 *     form a 2-rank comm over their connection and the operations are 4 MiB
 *     allgathers instead of writes and reads (a node lost mid-collective).
 * Exit 0 = all as expected; prints one "# ..." line per step. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uccl/uccl.h>
#include <uccl/uccl_coll.h>

#include "fault_conn.h"
#include "fault_res.h"

#define REGION (16u << 20)
#define MSG (8u << 20)
/* Time allowed past UCCL_TIMEOUT_MS for the fault to show, from the last
 * completed operation's end (the fault comes after it); NETFAULT_SLACK_MS
 * overrides it (the emulated cluster takes seconds to deliver a fault). */
static uint64_t slack_ms = 2500;
#define SLACK_MS slack_ms
#define ECHO (1u << 20)
enum { TAG_DESC = 21, TAG_ECHO = 22 };

static char dir[512];
static bool coll_mode;         /* NETFAULT_OP=allgather */
static bool expect_timeout;    /* NETFAULT_EXPECT=timeout */
static uccl_comm_t *coll_comm; /* the 2-rank comm of coll_mode, over the faulty connection */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static bool exists(const char *name)
{
    char p[600];
    struct stat st;
    path_of(p, sizeof(p), name);
    return stat(p, &st) == 0;
}

static void touch(const char *name)
{
    char p[600];
    FILE *f;
    path_of(p, sizeof(p), name);
    f = fopen(p, "w");
    if (f != NULL)
        fclose(f);
}

static int fail(const char *what, uccl_status_t st)
{
    printf("FAIL: %s: %s\n", what, uccl_status_name(st));
    return 1;
}

/* The server's echo on its newest connection: what a client sends with
 * TAG_ECHO (client-lossy) comes back to it. */
static struct {
    uccl_conn_t *conn;
    uccl_mr_t *mr;
    uccl_req_t *req;
    uint8_t *buf;
} echo;

static void echo_progress(void)
{
    int done = 0;
    uccl_status_t st;
    uccl_req_t *sreq = NULL;

    if (echo.req == NULL) {
        if (echo.conn != NULL &&
            uccl_recv(echo.conn, echo.mr, 0, ECHO, TAG_ECHO, &echo.req) != UCCL_OK)
            echo.conn = NULL;
        return;
    }
    st = uccl_test(echo.req, &done);
    if (!done)
        return;
    uccl_req_free(echo.req);
    echo.req = NULL;
    if (st == UCCL_OK)
        st = uccl_send(echo.conn, echo.mr, 0, ECHO, TAG_ECHO, &sreq);
    if (st == UCCL_OK)
        st = uccl_wait(sreq, -1);
    if (sreq != NULL)
        uccl_req_free(sreq);
    if (st != UCCL_OK)
        echo.conn = NULL; /* this connection failed: no more echo on it */
}

static void echo_on(uccl_conn_t *conn)
{
    if (echo.req != NULL)
        uccl_req_free(echo.req); /* detached: the old connection's close cancels it */
    echo.req = NULL;
    echo.conn = conn;
}

static int server(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX], *buf = calloc(1, REGION);
    size_t len = sizeof(blob);
    uccl_engine_t *e;
    uccl_mr_t *mr;
    uccl_rdesc_t desc;
    char p[600], tmp[620];
    FILE *f;

    if (buf == NULL || uccl_engine_create(NULL, &e) != UCCL_OK ||
        uccl_engine_address(e, blob, &len) != UCCL_OK || uccl_mr_reg(e, buf, REGION, 0, &mr) != UCCL_OK ||
        uccl_mr_pack(mr, 0, REGION, &desc) != UCCL_OK)
        return fail("server setup", UCCL_ERR_IO);
    path_of(p, sizeof(p), "addr");
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(blob, 1, len, f) != len || fclose(f) != 0 || rename(tmp, p) != 0)
        return fail("writing the address", UCCL_ERR_IO);
    echo.buf = malloc(ECHO);
    if (echo.buf == NULL || uccl_mr_reg(e, echo.buf, ECHO, 0, &echo.mr) != UCCL_OK)
        return fail("server setup (echo)", UCCL_ERR_IO);
    while (!exists("quit")) {
        uccl_conn_t *conn = NULL;
        echo_progress();
        if (uccl_accept(e, echo.req != NULL ? 1 : 100, &conn) != UCCL_OK)
            continue;
        if (!coll_mode) { /* old ones stay; they fail in time */
            if (fault_small(e, conn, true, &desc, sizeof(desc), TAG_DESC) == UCCL_OK)
                echo_on(conn);
        } else if (fault_comm(e, conn, 1, &coll_comm) == UCCL_OK) { /* allgathers until one fails */
            while (!exists("quit") && uccl_allgather(coll_comm, buf, buf + MSG, MSG / 2) == UCCL_OK)
                ;
            uccl_comm_destroy(coll_comm);
        }
    }
    echo_on(NULL);
    uccl_engine_destroy(e); /* with whatever connections are left */
    free(echo.buf);
    free(buf);
    return 0;
}

static uccl_status_t rma(uccl_conn_t *conn, uccl_mr_t *mr, const uccl_rdesc_t *d, bool rd, size_t off,
                         size_t n)
{
    uccl_req_t *req = NULL;
    uccl_status_t st = rd ? uccl_read(conn, mr, off, n, d, off, &req)
                          : uccl_write(conn, mr, off, n, d, off, &req);
    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req);
    return st;
}

/* Connect to the server whose address is in D/addr (D NULL: DIR's). */
static uccl_status_t connect_at(uccl_engine_t *e, const char *d, uccl_conn_t **conn, uccl_rdesc_t *desc)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    char p[600];
    FILE *f;
    size_t len;
    uccl_status_t st;

    snprintf(p, sizeof(p), "%s/addr", d != NULL ? d : dir);
    f = fopen(p, "rb");
    if (f == NULL)
        return UCCL_ERR_IO;
    len = fread(blob, 1, sizeof(blob), f);
    fclose(f);
    st = uccl_connect(e, blob, len, conn);
    if (st == UCCL_OK && coll_mode && d == NULL) /* DIR's server makes a comm, sends no descriptor */
        return fault_comm(e, *conn, 0, &coll_comm);
    if (st == UCCL_OK)
        st = fault_small(e, *conn, false, desc, sizeof(*desc), TAG_DESC);
    return st;
}

static uccl_status_t connect_server(uccl_engine_t *e, uccl_conn_t **conn, uccl_rdesc_t *desc)
{
    return connect_at(e, NULL, conn, desc);
}

/* Write MSG bytes of a pattern (seeded by SEED) through CONN, read them back
 * into the second half of the buffer and compare. */
static uccl_status_t round_trip(uccl_conn_t *conn, uccl_mr_t *mr, uint8_t *buf, const uccl_rdesc_t *d,
                                unsigned seed)
{
    uccl_req_t *req = NULL;
    uccl_status_t st;

    for (size_t i = 0; i < MSG; i++)
        buf[i] = (uint8_t)(i * 31 + seed);
    memset(buf + REGION, 0, MSG);
    st = rma(conn, mr, d, false, 0, MSG);
    if (st == UCCL_OK)
        st = uccl_read(conn, mr, REGION, MSG, d, 0, &req);
    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req);
    if (st == UCCL_OK && memcmp(buf, buf + REGION, MSG) != 0)
        st = UCCL_ERR_IO;
    return st;
}

/* Operations on CONN (allgathers on coll_comm in coll_mode, BUF's two halves)
 * until one fails (touching DIR/go after the first); that
 * one must be TIMEOUT or PEER_FAILED, within TIMEOUT_MS + slack of the end of
 * the last operation that completed (the fault came after it), and the
 * close after it must return in time. 0 when so; prints what it saw. */
static int until_fault(uccl_conn_t *conn, uccl_mr_t *mr, uint8_t *buf, const uccl_rdesc_t *desc,
                       int timeout_ms, const char *fault)
{
    uccl_status_t st;
    uint64_t t_go = 0, t_last = 0, t0;
    int n_ok = 0;

    for (;;) {
        if (coll_comm != NULL)
            st = uccl_allgather(coll_comm, buf, buf + MSG, MSG / 2);
        else
            st = rma(conn, mr, desc, n_ok % 2, 0, MSG);
        if (st != UCCL_OK)
            break;
        t_last = now_ms();
        if (n_ok++ == 0) {
            touch("go");
            t_go = now_ms();
        }
        if (n_ok > 100000)
            return fail("the fault never came", st);
    }
    t0 = now_ms();
    printf("# %s: %s %llu ms after the last operation that completed (%llu ms after go, %d "
           "operations before)\n",
           fault, uccl_status_name(st), (unsigned long long)(t0 - t_last),
           (unsigned long long)(t0 - t_go), n_ok);
    if (n_ok == 0)
        return fail("no operation before the fault", st);
    if (st != UCCL_ERR_TIMEOUT && (expect_timeout || st != UCCL_ERR_PEER_FAILED))
        return fail("the fault showed as", st);
    /* from the end of the last operation that completed: the fault came
     * after it (with two clients, one's go may come long before the fault) */
    if (t0 - t_last > (uint64_t)(timeout_ms + SLACK_MS))
        return fail("the fault took too long to show", st);
    st = coll_comm != NULL ? uccl_comm_destroy(coll_comm) : uccl_conn_close(conn);
    coll_comm = NULL;
    printf("# close after the fault: %s in %llu ms\n", uccl_status_name(st),
           (unsigned long long)(now_ms() - t0));
    /* tcp's close flushes what it accepted for up to UCCL_TIMEOUT_MS (a
     * completed send is a promise): with the link down it takes that long */
    if (st != UCCL_OK || now_ms() - t0 > (uint64_t)(timeout_ms + SLACK_MS))
        return fail("close after the fault", st);
    return 0;
}

/* Node loss: DIR's server dies with its host; DIR2's must go on working. */
static int client_loss(int timeout_ms, const char *dir2)
{
    uint8_t *buf = malloc(2 * REGION);
    uccl_engine_t *e;
    uccl_conn_t *conn = NULL, *keep = NULL;
    uccl_rdesc_t desc, desc2;
    uccl_mr_t *mr;
    uccl_status_t st;

    if (buf == NULL || uccl_engine_create(NULL, &e) != UCCL_OK ||
        uccl_mr_reg(e, buf, 2 * REGION, 0, &mr) != UCCL_OK)
        return fail("client setup", UCCL_ERR_IO);
    st = connect_at(e, dir2, &keep, &desc2);
    if (st == UCCL_OK)
        st = round_trip(keep, mr, buf, &desc2, 3);
    if (st != UCCL_OK)
        return fail("connection to the survivor", st);
    st = connect_server(e, &conn, &desc);
    if (st != UCCL_OK)
        return fail("connection to the server that will be lost", st);
    if (until_fault(conn, mr, buf, &desc, timeout_ms, "host lost") != 0)
        return 1;
    st = round_trip(keep, mr, buf, &desc2, 5);
    if (st != UCCL_OK)
        return fail("the survivor's connection after the loss", st);
    printf("# the survivor's connection after the loss: %u bytes written and read back intact\n", MSG);
    uccl_conn_close(keep);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    free(buf);
    return 0;
}

/* The fds must come back to WANT (progressing E while they close, up to
 * MS); 0 when they did. */
static int fds_back(uccl_engine_t *e, int want, uint64_t ms, const char *when)
{
    uint64_t t0 = now_ms();
    int n = unit_fd_count();

    while (n != want && now_ms() - t0 < ms) {
        if (e != NULL)
            uccl_engine_progress(e);
        usleep(10000);
        n = unit_fd_count();
    }
    printf("# open fds %s: %d (before: %d)\n", when, n, want);
    if (n != want) {
        printf("FAIL: %d fds open %s, %d before: %s\n", n, when, want,
               n > want ? "leaked" : "closed twice");
        return 1;
    }
    return 0;
}

static int client(int timeout_ms)
{
    int fds0 = unit_fd_count(), fds1;
    uint8_t *buf = malloc(2 * REGION);
    uccl_engine_t *e;
    uccl_conn_t *conn = NULL;
    uccl_rdesc_t desc;
    uccl_mr_t *mr;
    uccl_status_t st;
    uint64_t t0;

    if (buf == NULL || uccl_engine_create(NULL, &e) != UCCL_OK ||
        uccl_mr_reg(e, buf, 2 * REGION, 0, &mr) != UCCL_OK)
        return fail("client setup", UCCL_ERR_IO);
    fds1 = unit_fd_count();
    st = connect_server(e, &conn, &desc);
    if (st != UCCL_OK)
        return fail("first connection", st);
    if (until_fault(conn, mr, buf, &desc, timeout_ms,
                    expect_timeout ? "packets dropped" : "link down") != 0)
        return 1;
    if (fds_back(e, fds1, 1000, "after the failed connection's close") != 0)
        return 1;
    touch("failed");
    t0 = now_ms();
    while (!exists("up")) {
        if (now_ms() - t0 > 30000)
            return fail("the link did not come back", UCCL_ERR_TIMEOUT);
        uccl_engine_progress(e);
        usleep(10000);
    }
    /* a new connection over the same link: bytes written, read back, compared */
    st = connect_server(e, &conn, &desc);
    if (st != UCCL_OK)
        return fail("connection after the link came back", st);
    st = round_trip(conn, mr, buf, &desc, 7);
    if (st != UCCL_OK)
        return fail("write and read back on the new connection", st);
    printf("# new connection after the link came back: %u bytes written and read back intact\n", MSG);
    uccl_conn_close(conn);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    free(buf);
    return fds_back(NULL, fds0, 0, "after uccl_engine_destroy");
}

/* Random loss: every transfer completes, byte for byte (tcp retransmits). */
static int client_lossy(void)
{
    const char *env = getenv("NETFAULT_ROUNDS");
    int rounds = env != NULL ? atoi(env) : 4, fds0 = unit_fd_count();
    uint8_t *buf = malloc(2 * REGION);
    uccl_engine_t *e;
    uccl_conn_t *conn = NULL;
    uccl_rdesc_t desc;
    uccl_mr_t *mr;
    uccl_status_t st;
    uint64_t t0 = now_ms();

    if (buf == NULL || uccl_engine_create(NULL, &e) != UCCL_OK ||
        uccl_mr_reg(e, buf, 2 * REGION, 0, &mr) != UCCL_OK)
        return fail("client setup", UCCL_ERR_IO);
    st = connect_server(e, &conn, &desc);
    if (st != UCCL_OK)
        return fail("connection under loss", st);
    for (int r = 0; r < rounds; r++) {
        uccl_req_t *req[2] = {NULL, NULL};

        st = round_trip(conn, mr, buf, &desc, 11 + (unsigned)r);
        if (st != UCCL_OK)
            return fail("write and read back under loss", st);
        /* 1 MiB to the server and back: it echoes what it receives */
        for (size_t i = 0; i < ECHO; i++)
            buf[i] = (uint8_t)(i * 7 + (size_t)r);
        memset(buf + REGION, 0, ECHO);
        st = uccl_recv(conn, mr, REGION, ECHO, TAG_ECHO, &req[1]);
        if (st == UCCL_OK)
            st = uccl_send(conn, mr, 0, ECHO, TAG_ECHO, &req[0]);
        if (st == UCCL_OK)
            st = uccl_wait(req[0], -1);
        if (st == UCCL_OK)
            st = uccl_wait(req[1], -1);
        for (int k = 0; k < 2; k++)
            if (req[k] != NULL)
                uccl_req_free(req[k]);
        if (st == UCCL_OK && memcmp(buf, buf + REGION, ECHO) != 0)
            st = UCCL_ERR_IO;
        if (st != UCCL_OK)
            return fail("send and echo back under loss", st);
    }
    printf("# %d rounds under loss (%u bytes written and read back, %u sent and echoed, each "
           "compared) in %llu ms\n", rounds, MSG, ECHO, (unsigned long long)(now_ms() - t0));
    st = uccl_conn_close(conn);
    if (st != UCCL_OK)
        return fail("close under loss", st);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    free(buf);
    return fds_back(NULL, fds0, 0, "after uccl_engine_destroy");
}

int main(int argc, char **argv)
{
    const char *env = getenv("UCCL_TIMEOUT_MS");

    bool loss = argc == 4 && strcmp(argv[1], "client-loss") == 0;
    const char *op = getenv("NETFAULT_OP");

    coll_mode = op != NULL && strcmp(op, "allgather") == 0;
    expect_timeout = getenv("NETFAULT_EXPECT") != NULL &&
                     strcmp(getenv("NETFAULT_EXPECT"), "timeout") == 0;
    if (getenv("NETFAULT_SLACK_MS") != NULL)
        slack_ms = strtoull(getenv("NETFAULT_SLACK_MS"), NULL, 10);

    if ((argc != 3 && !loss) || strlen(argv[2]) >= sizeof(dir)) {
        fprintf(stderr, "usage: t_netfault server|client DIR, t_netfault client-loss DIR DIR2\n");
        return 2;
    }
    snprintf(dir, sizeof(dir), "%s", argv[2]);
    if (strcmp(argv[1], "server") == 0)
        return server();
    if (loss)
        return client_loss(env ? atoi(env) : 60000, argv[3]);
    if (strcmp(argv[1], "client-lossy") == 0)
        return client_lossy();
    return client(env ? atoi(env) : 60000);
}

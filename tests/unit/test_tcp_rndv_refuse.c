/* What the tcp rendezvous (UCCL_TCP_RNDV_MIN) refuses: a clear to send
 * (CTS) for an unknown, finished or already released message, or for
 * another length; a request to send (RTS) no receive can take; a second
 * RTS, bytes before their CTS, a frame of an unknown type; and a peer
 * killed between RTS and CTS or between CTS and payload. Each fails only
 * its own connection, with UCCL_ERR_PEER_FAILED (a receive too small for a
 * message: UCCL_ERR_TRUNCATED), finishes every request on it within
 * UCCL_TIMEOUT_MS, and a second connection of the same engine keeps moving
 * bytes intact. Frames are written by hand into a live stream
 * (tcp_inject.h); a dying peer is a forked process SIGKILLed. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "unit_conn.h"
#include "tcp_inject.h"

#define SIZE ((256u << 10) + 13) /* above UCCL_TCP_RNDV_MIN (64K) */
#define BIG (32u << 20)          /* more than the socket buffers hold */
#define SMALL 100                /* below it: eager */

static uccl_status_t conn_state(uccl_conn_t *conn)
{
    uccl_conn_attr_t attr = {.state = UCCL_ERR_INVALID_HANDLE};

    return uccl_conn_query(conn, &attr) == UCCL_OK ? attr.state : UCCL_ERR_INVALID_HANDLE;
}

/* Engine a connected to b by one stream (a_fd: a's end, b_fd: b's end),
 * engine c connected to b too: the connection that must not suffer. */
typedef struct world {
    uccl_engine_t *a, *b, *c;
    uccl_conn_t *ab, *ba, *cb, *bc;
    int a_fd, b_fd;
    uint8_t *src, *dst, *csrc, *big;
    uccl_mr_t *src_mr, *dst_mr, *csrc_mr, *big_mr;
} world_t;

/* b, c, their connection and regions. */
static bool world_common(world_t *w)
{
    memset(w, 0, sizeof(*w));
    w->a_fd = w->b_fd = -1;
    w->src = malloc(SIZE);
    w->dst = calloc(1, 2 * (size_t)SIZE);
    w->csrc = malloc(SIZE);
    w->big = malloc(BIG);
    CU_ASSERT_FATAL(w->src != NULL && w->dst != NULL && w->csrc != NULL && w->big != NULL);
    unit_fill(w->src, SIZE, 1);
    unit_fill(w->csrc, SIZE, 2);
    unit_fill(w->big, BIG, 4);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &w->b), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &w->c), UCCL_OK);
    if (w->b == NULL || w->c == NULL)
        return false;
    UNIT_ASSERT_STATUS(unit_connect(w->c, w->b, &w->cb, &w->bc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(w->b, w->dst, 2 * (size_t)SIZE, 0, &w->dst_mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(w->b, w->big, BIG, 0, &w->big_mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(w->c, w->csrc, SIZE, 0, &w->csrc_mr), UCCL_OK);
    return w->cb != NULL && w->dst_mr != NULL && w->big_mr != NULL && w->csrc_mr != NULL;
}

/* world_common, and a connected to b by one stream whose ends it finds. */
static bool world_open(world_t *w)
{
    inject_fds_t before;

    if (!world_common(w))
        return false;
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &w->a), UCCL_OK);
    if (w->a == NULL)
        return false;
    inject_fds_snap(&before);
    UNIT_ASSERT_STATUS(unit_connect(w->a, w->b, &w->ab, &w->ba), UCCL_OK);
    CU_ASSERT_FATAL(w->ab != NULL);
    /* the streams open from progress: drive until both ends are up */
    for (uint64_t end = unit_now_ms() + 2000; unit_now_ms() < end;) {
        uccl_engine_progress(w->a);
        uccl_engine_progress(w->b);
        if (inject_find_stream(&before, inject_tcp_port(w->b), &w->a_fd, &w->b_fd))
            break;
    }
    CU_ASSERT_FATAL(inject_find_stream(&before, inject_tcp_port(w->b), &w->a_fd, &w->b_fd));
    UNIT_ASSERT_STATUS(uccl_mr_reg(w->a, w->src, SIZE, 0, &w->src_mr), UCCL_OK);
    return w->src_mr != NULL;
}

static void world_close(world_t *w)
{
    uccl_engine_t *e[3] = {w->a, w->b, w->c};

    for (int i = 0; i < 3; i++)
        if (e[i] != NULL)
            uccl_engine_destroy(e[i]);
    free(w->src);
    free(w->dst);
    free(w->csrc);
    free(w->big);
}

static void world_drive(world_t *w, int ms)
{
    for (uint64_t end = unit_now_ms() + (uint64_t)ms; unit_now_ms() < end;) {
        if (w->a != NULL)
            uccl_engine_progress(w->a);
        uccl_engine_progress(w->b);
        uccl_engine_progress(w->c);
    }
}

/* Drive until conn is no longer OK (or UCCL_TIMEOUT_MS passed); its state. */
static uccl_status_t world_fail_of(world_t *w, uccl_conn_t *conn)
{
    for (uint64_t end = unit_now_ms() + UNIT_TIMEOUT_MS; unit_now_ms() < end;) {
        if (conn_state(conn) != UCCL_OK)
            break;
        world_drive(w, 1);
    }
    return conn_state(conn);
}

/* req is done within UCCL_TIMEOUT_MS: its status (TIMEOUT: still not done). */
static uccl_status_t world_finish(world_t *w, uccl_req_t *req)
{
    for (uint64_t end = unit_now_ms() + UNIT_TIMEOUT_MS; unit_now_ms() < end;) {
        int done = 0;
        uccl_status_t st = uccl_test(req, &done);

        if (done)
            return st;
        world_drive(w, 1);
    }
    return UCCL_ERR_TIMEOUT;
}

/* c -> b moves a rendezvous message and an eager one intact. */
static void check_other_conn(world_t *w)
{
    uccl_req_t *s[2] = {NULL}, *r[2] = {NULL};

    memset(w->dst, 0, 2 * (size_t)SIZE);
    UNIT_ASSERT_STATUS(uccl_recv(w->bc, w->dst_mr, 0, SIZE, 11, &r[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(w->bc, w->dst_mr, SIZE, SMALL, 12, &r[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(w->cb, w->csrc_mr, 0, SIZE, 11, &s[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(w->cb, w->csrc_mr, 0, SMALL, 12, &s[1]), UCCL_OK);
    for (int i = 0; i < 2; i++) {
        UNIT_ASSERT_STATUS(world_finish(w, r[i]), UCCL_OK);
        UNIT_ASSERT_STATUS(world_finish(w, s[i]), UCCL_OK);
        uccl_req_free(r[i]);
        uccl_req_free(s[i]);
    }
    CU_ASSERT_EQUAL(unit_mismatches(w->dst, SIZE, 2), 0);
    CU_ASSERT_EQUAL(unit_mismatches(w->dst + SIZE, SMALL, 2), 0);
    UNIT_ASSERT_STATUS(conn_state(w->bc), UCCL_OK);
}

/* a's send of SIZE (tag 1, message 0) is cut: its RTS is at b, which has
 * no receive for it. */
static uccl_req_t *send_waiting(world_t *w)
{
    uccl_req_t *s = NULL;

    UNIT_ASSERT_STATUS(uccl_send(w->ab, w->src_mr, 0, SIZE, 1, &s), UCCL_OK);
    world_drive(w, 100);
    return s;
}

static tcp_hdr_t cts(uint64_t id, uint64_t total)
{
    return (tcp_hdr_t){.type = TCP_FRAME_CTS, .id = id, .total = total};
}

static tcp_hdr_t rts(uint64_t id, uint64_t total, uint64_t tag)
{
    return (tcp_hdr_t){.type = TCP_FRAME_MSG, .flags = TCP_FLAG_RNDV, .id = id, .total = total,
                       .a = tag, .b = id};
}

/* After a CTS the sender refused: its connection and its send failed, and
 * nothing of the message went out. */
static void check_sender_refused(world_t *w, uccl_req_t *s)
{
    uint8_t peek[TCP_HDR_LEN];

    for (uint64_t end = unit_now_ms() + UNIT_TIMEOUT_MS;
         unit_now_ms() < end && conn_state(w->ab) == UCCL_OK;)
        uccl_engine_progress(w->a); /* not b: what a sent stays in b's socket */
    UNIT_ASSERT_STATUS(conn_state(w->ab), UCCL_ERR_PEER_FAILED);
    CU_ASSERT_EQUAL(inject_peek(w->b_fd, peek, sizeof(peek)), 0);
    UNIT_ASSERT_STATUS(world_finish(w, s), UCCL_ERR_PEER_FAILED);
    uccl_req_free(s);
}

static void test_cts_unknown(void)
{
    world_t w;

    if (!world_open(&w))
        return;
    uccl_req_t *s = send_waiting(&w);
    tcp_hdr_t h = cts(5, SIZE);
    CU_ASSERT(inject_frame(w.b_fd, &h, NULL));
    check_sender_refused(&w, s);
    check_other_conn(&w);
    world_close(&w);
}

/* The CTS names another length than the message's: the sender sends none
 * of it (else the receiver would take bytes it did not ask for). */
static void test_cts_length(void)
{
    world_t w;

    if (!world_open(&w))
        return;
    uccl_req_t *s = send_waiting(&w);
    tcp_hdr_t h = cts(0, SIZE + 1);
    CU_ASSERT(inject_frame(w.b_fd, &h, NULL));
    check_sender_refused(&w, s);
    check_other_conn(&w);
    world_close(&w);
}

/* A CTS carries no payload: one with bytes is a malformed header. */
static void test_cts_payload(void)
{
    world_t w;
    uint8_t junk[8] = {0};

    if (!world_open(&w))
        return;
    uccl_req_t *s = send_waiting(&w);
    tcp_hdr_t h = cts(0, SIZE);
    h.clen = sizeof(junk);
    h.total = SIZE;
    CU_ASSERT(inject_frame(w.b_fd, &h, junk));
    check_sender_refused(&w, s);
    check_other_conn(&w);
    world_close(&w);
}

/* A CTS for a message that is all delivered. */
static void test_cts_finished(void)
{
    world_t w;
    uccl_req_t *s = NULL, *r = NULL;

    if (!world_open(&w))
        return;
    UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.dst_mr, 0, SIZE, 1, &r), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(w.ab, w.src_mr, 0, SIZE, 1, &s), UCCL_OK);
    UNIT_ASSERT_STATUS(world_finish(&w, r), UCCL_OK);
    UNIT_ASSERT_STATUS(world_finish(&w, s), UCCL_OK);
    CU_ASSERT_EQUAL(unit_mismatches(w.dst, SIZE, 1), 0);
    uccl_req_free(r);
    uccl_req_free(s);
    tcp_hdr_t h = cts(0, SIZE);
    CU_ASSERT(inject_frame(w.b_fd, &h, NULL));
    UNIT_ASSERT_STATUS(world_fail_of(&w, w.ab), UCCL_ERR_PEER_FAILED);
    check_other_conn(&w);
    world_close(&w);
}

/* The receiver's own CTS, then the same frame again right behind it: the
 * second finds the message released already. */
static void test_cts_twice(void)
{
    world_t w;
    uccl_req_t *r = NULL;
    uint8_t frame[TCP_HDR_LEN];
    bool seen = false;

    if (!world_open(&w))
        return;
    uccl_req_t *s = send_waiting(&w);
    UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.dst_mr, 0, SIZE, 1, &r), UCCL_OK);
    for (uint64_t end = unit_now_ms() + 2000; unit_now_ms() < end && !seen;) {
        uccl_engine_progress(w.b); /* not a: the CTS stays in a's socket */
        seen = inject_peek(w.a_fd, frame, sizeof(frame)) == TCP_HDR_LEN &&
               frame[0] == TCP_FRAME_CTS;
    }
    CU_ASSERT_FATAL(seen);
    CU_ASSERT(send(w.b_fd, frame, sizeof(frame), MSG_DONTWAIT | MSG_NOSIGNAL) == TCP_HDR_LEN);
    UNIT_ASSERT_STATUS(world_fail_of(&w, w.ab), UCCL_ERR_PEER_FAILED);
    CU_ASSERT_NOT_EQUAL(world_finish(&w, s), UCCL_ERR_TIMEOUT);
    CU_ASSERT_NOT_EQUAL(world_finish(&w, r), UCCL_ERR_TIMEOUT);
    uccl_req_free(s);
    uccl_req_free(r);
    check_other_conn(&w);
    world_close(&w);
}

/* RTSs for more bytes than any receive holds: every receive of them fails
 * TRUNCATED (posted before or after), nothing is allocated for them, no CTS
 * goes, the connection stays up. */
static void test_rts_huge(void)
{
    world_t w;
    uccl_req_t *r[2] = {NULL};
    uint8_t peek[TCP_HDR_LEN];

    if (!world_open(&w))
        return;
    tcp_hdr_t h0 = rts(0, UINT64_MAX, 7), h1 = rts(1, UINT64_C(1) << 62, 8);
    CU_ASSERT(inject_frame(w.a_fd, &h0, NULL));
    world_drive(&w, 50);
    UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.dst_mr, 0, SIZE, 7, &r[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.dst_mr, 0, SIZE, 8, &r[1]), UCCL_OK);
    CU_ASSERT(inject_frame(w.a_fd, &h1, NULL));
    UNIT_ASSERT_STATUS(world_finish(&w, r[0]), UCCL_ERR_TRUNCATED);
    UNIT_ASSERT_STATUS(world_finish(&w, r[1]), UCCL_ERR_TRUNCATED);
    uccl_req_free(r[0]);
    uccl_req_free(r[1]);
    UNIT_ASSERT_STATUS(conn_state(w.ba), UCCL_OK);
    world_drive(&w, 50);
    CU_ASSERT_EQUAL(inject_peek(w.b_fd, peek, sizeof(peek)), 0);
    UNIT_ASSERT_STATUS(conn_state(w.ab), UCCL_OK);
    check_other_conn(&w);
    world_close(&w);
}

/* Frames the receiver refuses: a second RTS of a message, a chunk of a
 * rendezvous message before its CTS, frames of unknown types. */
static void test_receiver_refuses(void)
{
    static const uint8_t payload[16];
    enum { DUP_RTS, EARLY_BYTES, TYPE_0, TYPE_7, TYPE_255, NCASES };

    for (int c = 0; c < NCASES; c++) {
        world_t w;
        tcp_hdr_t h = rts(0, SIZE, 3), bad = h;
        const void *pay = NULL;

        if (!world_open(&w))
            return;
        if (c == EARLY_BYTES) {
            bad.flags = 0;
            bad.clen = sizeof(payload);
            pay = payload;
        } else if (c >= TYPE_0) {
            bad = (tcp_hdr_t){.type = c == TYPE_0 ? 0 : c == TYPE_7 ? 7 : 255};
        }
        if (c <= EARLY_BYTES)
            CU_ASSERT(inject_frame(w.a_fd, &h, NULL));
        CU_ASSERT(inject_frame(w.a_fd, &bad, pay));
        UNIT_ASSERT_STATUS(world_fail_of(&w, w.ba), UCCL_ERR_PEER_FAILED);
        UNIT_ASSERT_STATUS(world_fail_of(&w, w.ab), UCCL_ERR_PEER_FAILED);
        check_other_conn(&w);
        world_close(&w);
    }
}

/* ------------------------------------------------------------ a peer killed */

enum { CHILD_SENDS, CHILD_RECEIVES_NOT, CHILD_RECEIVES };

static bool full_write(int fd, const void *p, size_t n)
{
    return write(fd, p, n) == (ssize_t)n;
}

static bool full_read(int fd, void *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t k = read(fd, (uint8_t *)p + got, n - got);
        if (k <= 0)
            return false;
        got += (size_t)k;
    }
    return true;
}

/* The child: an engine that accepts the parent, then (role) sends a
 * rendezvous message, or takes the parent's RTS and no receive, or posts
 * the receive (its CTS goes) and then reads no more; it tells the parent
 * 'R' and stops progressing until killed. */
static void child_main(int role, int to_parent)
{
    uccl_engine_t *e = NULL;
    uccl_conn_t *conn = NULL;
    uccl_mr_t *mr = NULL;
    uccl_req_t *req = NULL;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uint8_t *buf = malloc(BIG);

    if (buf == NULL || unit_engine_create("tcp", &e) != UCCL_OK ||
        uccl_engine_address(e, blob, &len) != UCCL_OK || !full_write(to_parent, &len, sizeof(len)) ||
        !full_write(to_parent, blob, len) || uccl_accept(e, UNIT_TIMEOUT_MS, &conn) != UCCL_OK ||
        uccl_mr_reg(e, buf, BIG, 0, &mr) != UCCL_OK)
        _exit(1);
    unit_fill(buf, BIG, 3);
    if (role == CHILD_SENDS && uccl_send(conn, mr, 0, SIZE, 1, &req) != UCCL_OK)
        _exit(1);
    for (uint64_t end = unit_now_ms() + 200; unit_now_ms() < end;)
        uccl_engine_progress(e);
    if (role == CHILD_RECEIVES) {
        if (uccl_recv(conn, mr, 0, BIG, 1, &req) != UCCL_OK)
            _exit(1);
        for (int i = 0; i < 5; i++) /* the CTS goes; far from all of BIG comes */
            uccl_engine_progress(e);
    }
    if (!full_write(to_parent, "R", 1))
        _exit(1);
    for (;;)
        pause();
}

/* w's b connected to a forked child in role (w->ba; w->a is NULL), the
 * child's 'R' awaited while b and c progress (it may need b's RTS). With
 * role != CHILD_SENDS, b sends the child BIG bytes first (*send). */
static bool killed_open(world_t *w, int role, pid_t *pid, uccl_req_t **send)
{
    int fds[2];
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = 0;
    bool ready = false;

    *send = NULL;
    CU_ASSERT_FATAL(pipe(fds) == 0);
    *pid = fork();
    CU_ASSERT_FATAL(*pid >= 0);
    if (*pid == 0) {
        close(fds[0]);
        child_main(role, fds[1]);
    }
    close(fds[1]);
    if (!world_common(w))
        return false;
    CU_ASSERT_FATAL(full_read(fds[0], &len, sizeof(len)) && len <= sizeof(blob) &&
                    full_read(fds[0], blob, len));
    UNIT_ASSERT_STATUS(uccl_connect(w->b, blob, len, &w->ba), UCCL_OK);
    if (w->ba != NULL && role != CHILD_SENDS)
        UNIT_ASSERT_STATUS(uccl_send(w->ba, w->big_mr, 0, BIG, 1, send), UCCL_OK);
    for (uint64_t end = unit_now_ms() + UNIT_TIMEOUT_MS; unit_now_ms() < end && !ready;) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        char c = 0;

        world_drive(w, 1);
        ready = poll(&pfd, 1, 0) == 1 && read(fds[0], &c, 1) == 1 && c == 'R';
    }
    close(fds[0]);
    CU_ASSERT(ready);
    return w->ba != NULL && ready;
}

static void killed_close(world_t *w, pid_t pid)
{
    int wst = 0;

    kill(pid, SIGKILL);
    CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
    CU_ASSERT(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL); /* not a child that failed */
    world_close(w);
}

/* A receive of the dead child's message: PEER_FAILED at once or at completion. */
static uccl_status_t recv_status(world_t *w)
{
    uccl_req_t *r = NULL;
    uccl_status_t st = uccl_recv(w->ba, w->big_mr, 0, BIG, 1, &r);

    if (st == UCCL_OK) {
        st = world_finish(w, r);
        uccl_req_free(r);
    }
    return st;
}

/* The sender dies after its RTS, before the receive (no CTS sent). */
static void test_sender_killed_before_cts(void)
{
    world_t w;
    pid_t pid;
    uccl_req_t *s;

    if (killed_open(&w, CHILD_SENDS, &pid, &s)) {
        kill(pid, SIGKILL);
        UNIT_ASSERT_STATUS(world_fail_of(&w, w.ba), UCCL_ERR_PEER_FAILED);
        UNIT_ASSERT_STATUS(recv_status(&w), UCCL_ERR_PEER_FAILED);
        check_other_conn(&w);
    }
    killed_close(&w, pid);
}

/* The sender dies after the receiver's CTS went, before any payload. */
static void test_sender_killed_after_cts(void)
{
    world_t w;
    pid_t pid;
    uccl_req_t *s, *r = NULL;

    if (killed_open(&w, CHILD_SENDS, &pid, &s)) {
        UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.big_mr, 0, BIG, 1, &r), UCCL_OK);
        world_drive(&w, 100); /* the CTS is in the child's socket, never read */
        UNIT_ASSERT_STATUS(conn_state(w.ba), UCCL_OK);
        kill(pid, SIGKILL);
        UNIT_ASSERT_STATUS(world_finish(&w, r), UCCL_ERR_PEER_FAILED);
        uccl_req_free(r);
        check_other_conn(&w);
    }
    killed_close(&w, pid);
}

/* The receiver dies holding the RTS (no receive posted) or after its CTS
 * with part of the payload in: the send fails, never hangs. */
static void test_receiver_killed(void)
{
    for (int role = CHILD_RECEIVES_NOT; role <= CHILD_RECEIVES; role++) {
        world_t w;
        pid_t pid;
        uccl_req_t *s;

        if (killed_open(&w, role, &pid, &s) && s != NULL) {
            world_drive(&w, 100);
            UNIT_ASSERT_STATUS(conn_state(w.ba), UCCL_OK);
            kill(pid, SIGKILL);
            UNIT_ASSERT_STATUS(world_finish(&w, s), UCCL_ERR_PEER_FAILED);
            UNIT_ASSERT_STATUS(conn_state(w.ba), UCCL_ERR_PEER_FAILED);
            check_other_conn(&w);
        }
        if (s != NULL)
            uccl_req_free(s);
        killed_close(&w, pid);
    }
}

static CU_TestInfo tests[] = {
    {"CTS for no message: the sender's connection fails, nothing sent", test_cts_unknown},
    {"CTS naming another length: refused, nothing sent", test_cts_length},
    {"CTS with payload bytes: malformed, nothing sent", test_cts_payload},
    {"CTS for a message delivered already: PEER_FAILED", test_cts_finished},
    {"the receiver's CTS twice: the second fails the connection", test_cts_twice},
    {"RTS larger than any receive: TRUNCATED, no CTS, connection up", test_rts_huge},
    {"second RTS, bytes before CTS, unknown frame types: PEER_FAILED", test_receiver_refuses},
    {"sender killed between RTS and CTS: the receive fails", test_sender_killed_before_cts},
    {"sender killed between CTS and payload: the receive fails", test_sender_killed_after_cts},
    {"receiver killed before or after its CTS: the send fails", test_receiver_killed},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"tcp_rndv_refuse", NULL, NULL, NULL, NULL, tests},
                             CU_SUITE_INFO_NULL};

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    setenv("UCCL_TCP_RNDV_MIN", "64K", 1);
    setenv("UCCL_TCP_NUM_STREAMS", "1", 1);
    return unit_main(suites);
}

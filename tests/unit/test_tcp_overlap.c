/* Chunks of one operation that overlap across two streams, from a broken
 * or hostile tcp peer (frames written by hand, tcp_inject.h): a message's
 * or a write's chunk on stream 1 covers bytes whose chunk on stream 0 is
 * still arriving. The receiver took each as fitting what had landed, so
 * the record was done (and freed) while stream 0 still wrote into it. Now
 * chunks of an operation may not add up past its length: the connection
 * fails with UCCL_ERR_PEER_FAILED, the receive with it, nothing is touched
 * after it. Two engines in one process, UCCL_TCP_NUM_STREAMS=2. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unit.h"
#include "unit_conn.h"
#include "tcp_inject.h"

#define LEN 200

typedef struct world {
    uccl_engine_t *a, *b;
    uccl_conn_t *ab, *ba;
    int a_fd[2], b_fd[2];
    uint8_t *dst;
    uccl_mr_t *dst_mr;
} world_t;

static uccl_status_t conn_state(uccl_conn_t *conn)
{
    uccl_conn_attr_t attr = {.state = UCCL_ERR_INVALID_HANDLE};

    return uccl_conn_query(conn, &attr) == UCCL_OK ? attr.state : UCCL_ERR_INVALID_HANDLE;
}

static void drive(world_t *w, int ms)
{
    for (uint64_t end = unit_now_ms() + (uint64_t)ms; unit_now_ms() < end;) {
        uccl_engine_progress(w->a);
        uccl_engine_progress(w->b);
    }
}

/* Only the receiving engine: the other, whose streams the test writes
 * into, reads no reply (one to a write it never sent would fail its
 * connection first) and sends nothing of its own. */
static void drive_one(uccl_engine_t *e, int ms)
{
    for (uint64_t end = unit_now_ms() + (uint64_t)ms; unit_now_ms() < end;)
        uccl_engine_progress(e);
}

/* a connected to b by two streams whose ends are found, both idle. */
static bool world_open(world_t *w)
{
    inject_fds_t before;
    int n = 0;

    memset(w, 0, sizeof(*w));
    w->dst = calloc(1, LEN);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &w->a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &w->b), UCCL_OK);
    if (w->a == NULL || w->b == NULL || w->dst == NULL)
        return false;
    UNIT_ASSERT_STATUS(uccl_mr_reg(w->b, w->dst, LEN, 0, &w->dst_mr), UCCL_OK);
    inject_fds_snap(&before);
    UNIT_ASSERT_STATUS(unit_connect(w->a, w->b, &w->ab, &w->ba), UCCL_OK);
    for (uint64_t end = unit_now_ms() + 2000; w->ab != NULL && n < 2 && unit_now_ms() < end;) {
        drive(w, 1);
        n = inject_find_streams(&before, inject_tcp_port(w->b), w->a_fd, w->b_fd, 2);
    }
    CU_ASSERT_EQUAL_FATAL(n, 2);
    drive(w, 200); /* every hello out and read */
    return w->dst_mr != NULL;
}

static void world_close(world_t *w)
{
    uccl_engine_destroy(w->a);
    uccl_engine_destroy(w->b);
    free(w->dst);
}

static bool send_all(int fd, const void *p, size_t n)
{
    return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

/* The frame h with LEN bytes of payload, written into the streams' ends
 * fd[]: stream 0 gets the header and half of them, stream 1 all of it, then
 * stream 0 the rest. Only the receiving engine rx runs, and its connection
 * conn must fail. */
static void overlap(const int *fd, uccl_engine_t *rx, uccl_conn_t *conn, const tcp_hdr_t *h)
{
    uint8_t frame[TCP_HDR_LEN + LEN];

    tcp_hdr_encode(h, frame);
    memset(frame + TCP_HDR_LEN, 0x5a, LEN);
    CU_ASSERT(send_all(fd[0], frame, TCP_HDR_LEN + LEN / 2));
    drive_one(rx, 100);
    CU_ASSERT(send_all(fd[1], frame, sizeof(frame)));
    drive_one(rx, 100);
    /* the rest (the stream may be closed already: the connection failed) */
    (void)send_all(fd[0], frame + TCP_HDR_LEN + LEN / 2, LEN - LEN / 2);
    for (uint64_t end = unit_now_ms() + 3000; conn_state(conn) == UCCL_OK && unit_now_ms() < end;)
        drive_one(rx, 1);
    UNIT_ASSERT_STATUS(conn_state(conn), UCCL_ERR_PEER_FAILED);
}

static void test_message(void)
{
    tcp_hdr_t h = {.type = TCP_FRAME_MSG, .id = 0, .total = LEN, .clen = LEN, .a = 3, .b = 0};
    uccl_req_t *r = NULL;
    world_t w;

    if (!world_open(&w))
        return;
    UNIT_ASSERT_STATUS(uccl_recv(w.ba, w.dst_mr, 0, LEN, 3, &r), UCCL_OK);
    overlap(w.a_fd, w.b, w.ba, &h);
    UNIT_ASSERT_STATUS(uccl_wait(r, 1000), UCCL_ERR_PEER_FAILED);
    uccl_req_free(r);
    world_close(&w);
}

static void test_write(void)
{
    world_t w;
    tcp_hdr_t h = {.type = TCP_FRAME_WRITE, .id = 1, .total = LEN, .clen = LEN};

    if (!world_open(&w))
        return;
    h.a = w.dst_mr->region->id;
    h.b = (uint64_t)(uintptr_t)w.dst;
    overlap(w.a_fd, w.b, w.ba, &h);
    world_close(&w);
}

/* b reads LEN bytes of a's memory; a never answers: the data chunks come
 * by hand, overlapping, with the id of b's request (read off the wire). */
static void test_read(void)
{
    uint8_t src[LEN], peek[TCP_HDR_LEN];
    uccl_mr_t *src_mr = NULL;
    uccl_req_t *r = NULL;
    uccl_rdesc_t rd;
    tcp_hdr_t req = {0}, h;
    world_t w;
    bool found = false;

    if (!world_open(&w))
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(w.a, src, LEN, 0, &src_mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(src_mr, 0, LEN, &rd), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_read(w.ba, w.dst_mr, 0, LEN, &rd, 0, &r), UCCL_OK);
    drive_one(w.b, 100);
    for (int i = 0; i < 2 && !found; i++)
        found = inject_peek(w.a_fd[i], peek, sizeof(peek)) == sizeof(peek) && tcp_hdr_decode(peek, &req) &&
                req.type == TCP_FRAME_READ_REQ;
    CU_ASSERT_FATAL(found);
    h = (tcp_hdr_t){.type = TCP_FRAME_READ_DATA, .id = req.id, .total = LEN, .clen = LEN};
    overlap(w.a_fd, w.b, w.ba, &h);
    UNIT_ASSERT_STATUS(uccl_wait(r, 1000), UCCL_ERR_PEER_FAILED);
    uccl_req_free(r);
    uccl_mr_dereg(src_mr);
    world_close(&w);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"a message's chunks overlapping on two streams: PEER_FAILED", test_message},
        {"a write's chunks overlapping on two streams: PEER_FAILED", test_write},
        {"a read's data overlapping on two streams: PEER_FAILED", test_read},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"tcp_overlap", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TCP_NUM_STREAMS", "2", 1);
    setenv("UCCL_TIMEOUT_MS", "3000", 1);
    return unit_main(suites);
}

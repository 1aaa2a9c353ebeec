/* Unit tests of uccl_writemsg / uccl_readmsg (remote pieces, src/core/xfer_msg.c)
 * and of generalized requests (src/core/greq.c) over a live connection
 * between two engines of this process, one suite per transport usable here. */
#include <stdlib.h>
#include <string.h>

#include "core/xfer.h"
#include "unit.h"
#include "unit_conn.h"

#define SRC_SIZE (256 * 1024)
#define DST_SIZE (512 * 1024)

static unit_fixture_t F; /* src on a, dst1 (F.dst) on b */
static uint8_t *dst2; /* on b too */
static uccl_mr_t *dst2_mr;
static uccl_rdesc_t d1, d2;

static int suite_init(void)
{
    if (unit_fixture_open(unit_tp, SRC_SIZE, DST_SIZE, &F) != UCCL_OK ||
        (dst2 = malloc(DST_SIZE)) == NULL)
        return 1;
    if (uccl_mr_reg(F.p.b, dst2, DST_SIZE, 0, &dst2_mr) != UCCL_OK ||
        uccl_mr_pack(F.dst_mr, 0, DST_SIZE, &d1) != UCCL_OK ||
        uccl_mr_pack(dst2_mr, 4096, DST_SIZE - 4096, &d2) != UCCL_OK)
        return 1;
    return 0;
}

static int suite_cleanup(void)
{
    unit_fixture_close(&F);
    free(dst2);
    dst2 = NULL;
    return 0;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 131 + seed + (i >> 9));
}

static void reset(void)
{
    fill(F.src, SRC_SIZE, 3);
    memset(F.dst, 0xee, DST_SIZE);
    memset(dst2, 0xee, DST_SIZE);
}

/* A paged layout: local pieces cut at other places than the remote ones,
 * remote pieces in two regions (d2 starts 4 KiB into dst2), empty pieces on
 * both sides. Local: 3 pieces = 70000 bytes; remote: 6 pieces = 70000. */
static const uccl_iov_t *local_pieces(int *n)
{
    static uccl_iov_t iov[4];
    iov[0] = (uccl_iov_t){F.src_mr, 100, 30000};
    iov[1] = (uccl_iov_t){NULL, 0, 0};
    iov[2] = (uccl_iov_t){F.src_mr, 50000, 25000};
    iov[3] = (uccl_iov_t){F.src_mr, 200000, 15000};
    *n = 4;
    return iov;
}

static const uccl_riov_t *remote_pieces(int *n)
{
    static uccl_riov_t riov[6];
    riov[0] = (uccl_riov_t){&d1, 65536, 10000};
    riov[1] = (uccl_riov_t){&d2, 0, 20000};
    riov[2] = (uccl_riov_t){&d1, 0, 0};
    riov[3] = (uccl_riov_t){&d1, 300000, 12345};
    riov[4] = (uccl_riov_t){&d2, 100000, 27655 - 1};
    riov[5] = (uccl_riov_t){&d1, 500000, 1};
    *n = 6;
    return riov;
}

/* The local pieces must equal the remote pieces, each list read as one
 * stream of bytes in order (70000 of them). */
static void expect_same_stream(const uccl_iov_t *iov, int n, const uccl_riov_t *riov, int rn)
{
    uint8_t *stream = malloc(70000), *p = stream;
    size_t at = 0;

    for (int i = 0; i < n; i++) {
        if (iov[i].len)
            memcpy(p, F.src + iov[i].off, iov[i].len);
        p += iov[i].len;
    }
    for (int k = 0; k < rn; k++) {
        const uint8_t *base = riov[k].rdesc == &d1 ? F.dst : dst2 + 4096;
        CU_ASSERT(memcmp(base + riov[k].roff, stream + at, riov[k].len) == 0);
        at += riov[k].len;
    }
    CU_ASSERT_EQUAL(at, 70000);
    free(stream);
}

/* The bytes the remote pieces must hold, and none around them written. */
static void expect_landed(const uccl_iov_t *iov, int n, const uccl_riov_t *riov, int rn)
{
    expect_same_stream(iov, n, riov, rn);
    /* bytes around the pieces untouched */
    CU_ASSERT_EQUAL(F.dst[65535], 0xee);
    CU_ASSERT_EQUAL(F.dst[65536 + 10000], 0xee);
    CU_ASSERT_EQUAL(dst2[4095], 0xee);
    CU_ASSERT_EQUAL(dst2[4096 + 20000], 0xee);
    CU_ASSERT_EQUAL(F.dst[499999], 0xee);
}

static void test_writemsg_pieces(void)
{
    int n, rn;
    const uccl_iov_t *iov = local_pieces(&n);
    const uccl_riov_t *riov = remote_pieces(&rn);
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = n, .riov = riov, .riovcnt = rn};
    uccl_req_t *req = NULL;
    size_t bytes = 0;

    reset();
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(req, &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 70000);
    expect_landed(iov, n, riov, rn);
    uccl_req_free(req);
}

/* readmsg pulls the same layout back into a cleared source. */
static void test_readmsg_pieces(void)
{
    int n, rn;
    const uccl_iov_t *iov = local_pieces(&n);
    const uccl_riov_t *riov = remote_pieces(&rn);
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = n, .riov = riov, .riovcnt = rn};
    uccl_req_t *req = NULL;

    reset();
    for (int k = 0; k < rn; k++) /* the remote side holds the stream */
        fill((riov[k].rdesc == &d1 ? F.dst : dst2 + 4096) + riov[k].roff, riov[k].len, 9 + k);
    memset(F.src, 0, SRC_SIZE);
    UNIT_ASSERT_STATUS(uccl_readmsg(F.p.ab, &m, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    expect_same_stream(iov, n, riov, rn);
    uccl_req_free(req);
}

/* The notification of a multi-piece write comes after every byte landed:
 * check all pieces the moment it is seen on the target. */
static void test_writemsg_notify_after_all(void)
{
    int n, rn;
    const uccl_iov_t *iov = local_pieces(&n);
    const uccl_riov_t *riov = remote_pieces(&rn);
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = n, .riov = riov, .riovcnt = rn,
                        .flags = UCCL_RMA_NOTIFY, .notif = 0xabcdef12345ull};
    uccl_req_t *req = NULL;
    uint64_t v = 0;
    uccl_status_t st = UCCL_ERR_NOT_FOUND;
    uint64_t deadline = unit_now_ms() + UNIT_TIMEOUT_MS;

    reset();
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_OK);
    while (st == UCCL_ERR_NOT_FOUND && unit_now_ms() < deadline) {
        int done;
        uccl_test(req, &done);
        st = uccl_notif_poll(F.p.ba, &v);
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    CU_ASSERT_EQUAL(v, 0xabcdef12345ull);
    expect_landed(iov, n, riov, rn);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_notif_poll(F.p.ba, &v), UCCL_ERR_NOT_FOUND); /* exactly one */
    uccl_req_free(req);
}

/* KV-cache shape: 1024 blocks of 256 bytes scattered over the remote
 * region in a shuffled order, from one local range; freed in flight. */
static void test_many_remote_pieces_detached(void)
{
    static uccl_riov_t riov[UCCL_RIOV_MAX];
    uccl_iov_t iov = {F.src_mr, 0, UCCL_RIOV_MAX * 256};
    uccl_rma_msg_t m = {.iov = &iov, .iovcnt = 1, .riov = riov, .riovcnt = UCCL_RIOV_MAX,
                        .flags = UCCL_RMA_NOTIFY, .notif = 7};
    uccl_req_t *req = NULL;
    uint64_t v = 0, deadline = unit_now_ms() + UNIT_TIMEOUT_MS;
    uccl_status_t st = UCCL_ERR_NOT_FOUND;

    reset();
    for (int k = 0; k < UCCL_RIOV_MAX; k++)
        riov[k] = (uccl_riov_t){&d1, (size_t)((k * 389) % UCCL_RIOV_MAX) * 256, 256};
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(req), UCCL_OK); /* detached: still completes */
    while (st == UCCL_ERR_NOT_FOUND && unit_now_ms() < deadline) {
        uccl_engine_progress(F.p.a);
        st = uccl_notif_poll(F.p.ba, &v);
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    CU_ASSERT_EQUAL(v, 7);
    for (int k = 0; k < UCCL_RIOV_MAX; k++)
        CU_ASSERT(memcmp(F.dst + riov[k].roff, F.src + (size_t)k * 256, 256) == 0);
}

/* Every bad call fails before anything is sent: the target stays as it was. */
/* A forged descriptor (sound checksum, the peer's engine id, a huge
 * length): remote pieces whose lengths add up past SIZE_MAX to the local
 * total are refused as totals that differ, nothing sent. */
static void test_writemsg_wrapping_total(uccl_iov_t *iov)
{
    uccl_rdesc_fields_t f;
    uccl_rdesc_t big;
    uccl_riov_t riov[5];
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = 1, .riov = riov, .riovcnt = 5};
    uccl_req_t *req = NULL;

    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d1, &f), UCCL_OK);
    f.len = (uint64_t)1 << 62;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&f, &big), UCCL_OK);
    for (int k = 0; k < 4; k++) /* 4 x 2^62: 0 once wrapped */
        riov[k] = (uccl_riov_t){&big, 0, (size_t)1 << 62};
    riov[4] = (uccl_riov_t){&big, 0, iov->len};
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_readmsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    for (int i = 0; i < 100; i++) {
        uccl_engine_progress(F.p.a);
        uccl_engine_progress(F.p.b);
    }
}

static void test_writemsg_refusals(void)
{
    uccl_iov_t iov = {F.src_mr, 0, 1000};
    uccl_riov_t riov[2] = {{&d1, 0, 500}, {&d2, 0, 500}};
    uccl_rma_msg_t m = {.iov = &iov, .iovcnt = 1, .riov = riov, .riovcnt = 2};
    uccl_req_t *req = NULL;
    uccl_rdesc_t own;

    reset();
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, NULL, &req), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_writemsg(NULL, &m, &req), UCCL_ERR_INVALID_HANDLE);
    riov[1].len = 499; /* totals differ */
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    riov[1].len = 500;
    m.riovcnt = 0;
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    m.riovcnt = UCCL_RIOV_MAX + 1;
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    m.riovcnt = 2;
    m.flags = 1u << 7;
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    m.flags = UCCL_RMA_NOTIFY;
    UNIT_ASSERT_STATUS(uccl_readmsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    m.flags = 0;
    riov[1].rdesc = NULL;
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_INVALID_PARAM);
    riov[1] = (uccl_riov_t){&d2, DST_SIZE - 4096 - 100, 500}; /* past d2's range */
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(F.src_mr, 0, 4096, &own), UCCL_OK);
    riov[1] = (uccl_riov_t){&own, 0, 500}; /* a's own region: not the peer's engine */
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_STALE);
    memset(&own, 0x5a, sizeof(own)); /* garbage */
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_ERR_BAD_DESC);
    test_writemsg_wrapping_total(&iov);
    for (size_t i = 0; i < DST_SIZE; i++)
        if (F.dst[i] != 0xee || dst2[i] != 0xee) {
            CU_FAIL("a refused writemsg wrote to the target");
            break;
        }
}

/* ---- generalized requests */

typedef struct greq_state {
    int calls;
    int finish_at;
    uccl_status_t status;
} greq_state_t;

static int greq_cb(uccl_req_t *req, void *arg)
{
    greq_state_t *s = arg;
    if (++s->calls == s->finish_at)
        uccl_req_finish(req, s->status, (size_t)s->calls);
    return 1;
}

static void test_greq_lifecycle(void)
{
    greq_state_t s = {.finish_at = 5, .status = UCCL_OK};
    greq_state_t f = {.finish_at = 2, .status = UCCL_ERR_TRUNCATED};
    uccl_req_t *r = NULL, *q = NULL, *reqs[2];
    size_t bytes = 0;

    UNIT_ASSERT_STATUS(uccl_req_create(F.p.a, NULL, &s, &r), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_req_create(NULL, greq_cb, &s, &r), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_req_create(F.p.a, greq_cb, &s, &r), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_create(F.p.a, greq_cb, &f, &q), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(r, &bytes), UCCL_INPROGRESS);
    reqs[0] = r;
    reqs[1] = q;
    UNIT_ASSERT_STATUS(uccl_wait_all(reqs, 2, UNIT_TIMEOUT_MS), UCCL_ERR_TRUNCATED);
    CU_ASSERT_EQUAL(s.calls, 5); /* never called once finished */
    CU_ASSERT_EQUAL(f.calls, 2);
    UNIT_ASSERT_STATUS(uccl_wait(r, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(r, &bytes), UCCL_OK);
    CU_ASSERT_EQUAL(bytes, 5);
    UNIT_ASSERT_STATUS(uccl_req_finish(r, UCCL_OK, 0), UCCL_ERR_INVALID_PARAM); /* twice */
    uccl_req_free(r);
    uccl_req_free(q);
    /* a transfer request is not a generalized one */
    {
        uccl_req_t *w = NULL;
        uccl_iov_t iov = {F.src_mr, 0, 10};
        UNIT_ASSERT_STATUS(uccl_writev(F.p.ab, &iov, 1, &d1, 0, &w), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_req_finish(w, UCCL_OK, 0), UCCL_ERR_INVALID_PARAM);
        UNIT_ASSERT_STATUS(unit_drive(&F.p, &w, 1, UNIT_TIMEOUT_MS), UCCL_OK);
        uccl_req_free(w);
    }
}

/* Freed by the user while pending, the creator still finishes it (then it
 * is recycled); a pending one on a destroyed engine ends CANCELED without
 * another callback. */
static void test_greq_detached_and_destroy(void)
{
    greq_state_t s = {.finish_at = 3, .status = UCCL_OK};
    greq_state_t never = {.finish_at = -1};
    uccl_engine_t *e = NULL;
    uccl_req_t *r = NULL, *p = NULL;

    UNIT_ASSERT_STATUS(uccl_req_create(F.p.a, greq_cb, &s, &r), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(r), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_test(r, &(int){0}), UCCL_ERR_INVALID_HANDLE);
    for (int i = 0; i < 10; i++)
        uccl_engine_progress(F.p.a);
    CU_ASSERT_EQUAL(s.calls, 3);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &e), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_create(e, greq_cb, &never, &p), UCCL_OK);
    uccl_engine_progress(e);
    CU_ASSERT_EQUAL(never.calls, 1);
    UNIT_ASSERT_STATUS(uccl_engine_destroy(e), UCCL_OK);
    CU_ASSERT_EQUAL(never.calls, 1);
}

/* Write iov -> riov, expecting `pieces` requests (uccl_rma_msg_pieces);
 * every remote piece then holds its bytes of the local stream, and the
 * byte after each piece (where no other piece starts) is untouched. */
static void write_counted(const uccl_iov_t *iov, int n, const uccl_riov_t *riov, int rn,
                          int pieces)
{
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = n, .riov = riov, .riovcnt = rn};
    uint8_t *stream = malloc(SRC_SIZE), *p = stream;
    uccl_req_t *req = NULL;
    size_t at = 0;

    CU_ASSERT_FATAL(stream != NULL);
    reset();
    for (int i = 0; i < n; i++) {
        memcpy(p, F.src + iov[i].off, iov[i].len);
        p += iov[i].len;
    }
    CU_ASSERT_EQUAL(uccl_rma_msg_pieces(F.p.ab, &m), pieces);
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    uccl_req_free(req);
    for (int k = 0; k < rn; k++) {
        const uint8_t *base = riov[k].rdesc == &d1 ? F.dst : dst2 + 4096;
        bool next_starts = false;

        CU_ASSERT(memcmp(base + riov[k].roff, stream + at, riov[k].len) == 0);
        at += riov[k].len;
        for (int j = 0; j < rn; j++)
            next_starts |= riov[j].rdesc == riov[k].rdesc &&
                           riov[j].roff == riov[k].roff + riov[k].len;
        if (!next_starts)
            CU_ASSERT_EQUAL(base[riov[k].roff + riov[k].len], 0xee);
    }
    free(stream);
}

/* Remote pieces that continue each other in one descriptor become one
 * request, and local pieces that continue each other one local piece;
 * pieces with gaps, in another descriptor (even where the memory is
 * adjacent) or going backwards stay apart (one request each where the
 * transport takes one range a request, several where it takes several). */
static void test_writemsg_joins_adjacent(void)
{
    enum { N = 32, PC = 4096 };
    static uccl_riov_t riov[N];
    static uccl_iov_t iov[N];
    uccl_iov_t one = {F.src_mr, 0, N * PC};
    int most = uccl_xfer_rseg_max(F.p.ab), apart = (N + most - 1) / most;

    for (int k = 0; k < N; k++) /* the seed's layout: adjacent remote pieces */
        riov[k] = (uccl_riov_t){&d1, 8192 + (size_t)k * PC, PC};
    write_counted(&one, 1, riov, N, 1);
    for (int k = 0; k < N; k++) /* every other block */
        riov[k] = (uccl_riov_t){&d1, (size_t)k * 2 * PC, PC};
    write_counted(&one, 1, riov, N, apart);
    for (int k = 0; k < N; k++) { /* adjacent remote, local every other block */
        riov[k] = (uccl_riov_t){&d1, 100 + (size_t)k * PC, PC};
        iov[k] = (uccl_iov_t){F.src_mr, (size_t)k * 2 * PC, PC};
    }
    write_counted(iov, N, riov, N, 1);
    for (int k = 0; k < N; k++) /* adjacent local pieces, given as N */
        iov[k] = (uccl_iov_t){F.src_mr, 7 + (size_t)k * PC, PC};
    write_counted(iov, N, riov, N, 1);
    for (int k = 0; k < N; k++) /* alternating descriptors: never one request */
        riov[k] = (uccl_riov_t){k % 2 ? &d2 : &d1, (size_t)k * PC, PC};
    write_counted(&one, 1, riov, N, N);
    for (int k = 0; k < N; k++) /* backwards: each ends where the one before starts */
        riov[k] = (uccl_riov_t){&d1, (size_t)(N - k) * PC, PC};
    write_counted(&one, 1, riov, N, apart);
}

/* A notified writemsg of two pieces (two descriptors) whose second piece
 * reads a region of its own: that piece is posted only once the first
 * finished, but its region is in use from the call on (uccl_mr_dereg: BUSY),
 * and the bytes it sends are that region's. */
static void test_writemsg_notify_tail_region_in_use(void)
{
    enum { LEN = 4096 };
    uint8_t *other = malloc(LEN);
    uccl_mr_t *other_mr = NULL;
    uccl_iov_t iov[2];
    uccl_riov_t riov[2] = {{&d1, 0, LEN}, {&d2, 0, LEN}};
    uccl_rma_msg_t m = {.iov = iov, .iovcnt = 2, .riov = riov, .riovcnt = 2,
                        .flags = UCCL_RMA_NOTIFY, .notif = 99};
    uccl_req_t *req = NULL;
    uint64_t v = 0;

    CU_ASSERT_FATAL(other != NULL);
    reset();
    memset(other, 0x5a, LEN);
    UNIT_ASSERT_STATUS(uccl_mr_reg(F.p.a, other, LEN, 0, &other_mr), UCCL_OK);
    iov[0] = (uccl_iov_t){F.src_mr, 0, LEN};
    iov[1] = (uccl_iov_t){other_mr, 0, LEN};
    UNIT_ASSERT_STATUS(uccl_writemsg(F.p.ab, &m, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(other_mr), UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(unit_drive(&F.p, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    CU_ASSERT(memcmp(F.dst, F.src, LEN) == 0);
    CU_ASSERT(memcmp(dst2 + 4096, other, LEN) == 0);
    UNIT_ASSERT_STATUS(uccl_notif_wait(F.p.ba, &v, UNIT_TIMEOUT_MS), UCCL_OK);
    CU_ASSERT_EQUAL(v, 99);
    uccl_req_free(req);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(other_mr), UCCL_OK);
    free(other);
}

static CU_TestInfo msg_tests[] = {
    {"writemsg: pieces in two regions, empty pieces", test_writemsg_pieces},
    {"readmsg: the same layout back", test_readmsg_pieces},
    {"writemsg notify: after every byte", test_writemsg_notify_after_all},
    {"1024 remote pieces, freed in flight", test_many_remote_pieces_detached},
    {"refusals send nothing", test_writemsg_refusals},
    {"adjacent pieces join, others stay apart", test_writemsg_joins_adjacent},
    {"writemsg notify: the last piece's region in use", test_writemsg_notify_tail_region_in_use},
    {"generalized requests: finish, wait_all, bytes", test_greq_lifecycle},
    {"generalized requests: detached, engine destroyed", test_greq_detached_and_destroy},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    return unit_main_tp("rma_msg", msg_tests, suite_init, suite_cleanup);
}

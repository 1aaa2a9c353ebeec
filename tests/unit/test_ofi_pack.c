/* The ofi transport's packed path (ofi_pack.c): many small local pieces
 * copied through registered bounces, checked byte for byte on tcp;ofi_rxm
 * and shm against the unpacked path: writes and reads of 64 local pieces of
 * odd and mixed sizes into one remote range (crossing bounce and chunk
 * boundaries), into 3 and 512 remote pieces, and a rendezvous sendv/recvv
 * of 64 pieces, pulled and pushed. Whether the bounces were used is
 * checked too. And the
 * seed's 128 remote pieces, adjacent (joined into one operation) and
 * scattered (several remote ranges per operation, up to rma_iov_limit),
 * in one or two regions, with the operations counted; requests posted as
 * one whole operation (ofi_rma.c) and those that are not. */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "core/xfer.h"
#include "unit_conn.h"

extern const struct uccl_tp_ops uccl_tp_ofi_ops;

#define NPIECE 64
#define AREA (4u << 20)

typedef struct side {
    uint8_t *p;
    uccl_mr_t *mr;
} side_t;

static unit_pair_t P;
static side_t A, B;
static const char *cur_prov;

static tp_ofi_t *ofi_of(uccl_engine_t *e)
{
    for (int i = 0; i < e->ntp; i++)
        if (e->tp[i]->ops == &uccl_tp_ofi_ops)
            return (tp_ofi_t *)e->tp[i];
    return NULL;
}

static void side_open(uccl_engine_t *e, side_t *s)
{
    s->p = aligned_alloc(4096, AREA);
    CU_ASSERT_FATAL(s->p != NULL);
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, s->p, AREA, 0, &s->mr), UCCL_OK);
}

static void side_close(side_t *s)
{
    if (s->mr != NULL)
        uccl_mr_dereg(s->mr);
    free(s->p);
    memset(s, 0, sizeof(*s));
}

static bool open_pair(const char *prov, const char *pack, const char *pull)
{
    setenv("UCCL_OFI_PROVIDER", prov, 1);
    setenv("UCCL_OFI_PACK_BELOW", pack, 1);
    setenv("UCCL_OFI_PULL", pull, 1);
    uccl_status_t st = unit_pair_open("ofi", &P);
    unsetenv("UCCL_OFI_PROVIDER");
    unsetenv("UCCL_OFI_PACK_BELOW");
    unsetenv("UCCL_OFI_PULL");
    if (st != UCCL_OK)
        return false;
    side_open(P.a, &A);
    side_open(P.b, &B);
    cur_prov = prov;
    return true;
}

static void close_pair(void)
{
    side_close(&A);
    side_close(&B);
    unit_pair_close(&P);
}

/* NPIECE local pieces of A: odd sizes, a few large ones (past a 256 KiB
 * bounce), gaps between them; returns the total. */
static size_t make_iov(uccl_iov_t *iov, unsigned seed)
{
    size_t off = 3, total = 0;

    for (int i = 0; i < NPIECE; i++) {
        size_t len = (i % 16 == 5) ? 300001 + (size_t)i : 1 + (size_t)((i * 7919u + seed) % 9000u);

        iov[i] = (uccl_iov_t){A.mr, off, len};
        total += len;
        off += len + 1 + (size_t)(i % 5);
    }
    CU_ASSERT_FATAL(off < AREA / 2);
    return total;
}

static void run(uccl_req_t *req)
{
    UNIT_ASSERT_STATUS(unit_drive(&P, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    uccl_req_free(req);
}

/* Bytes of A's pieces, in order, equal to flat (a gather of them). */
static size_t gathered_mismatch(const uccl_iov_t *iov, const uint8_t *flat)
{
    size_t bad = 0, at = 0;

    for (int i = 0; i < NPIECE; i++) {
        bad += memcmp(A.p + iov[i].off, flat + at, iov[i].len) != 0;
        at += iov[i].len;
    }
    return bad;
}

/* One pass over the patterns; nriov remote pieces, spread over B. */
static void check_rma(int nriov)
{
    static uccl_riov_t riov[512];
    uccl_iov_t iov[NPIECE];
    uccl_rdesc_t rd;
    size_t total = make_iov(iov, (unsigned)nriov), each, at = 0, roff = 7;
    uint8_t *flat = malloc(total);
    uccl_rma_msg_t msg = {.iov = iov, .iovcnt = NPIECE, .riov = riov, .riovcnt = nriov};
    uccl_req_t *req;

    CU_ASSERT_FATAL(flat != NULL);
    UNIT_ASSERT_STATUS(uccl_mr_pack(B.mr, 0, AREA, &rd), UCCL_OK);
    each = total / (size_t)nriov;
    for (int k = 0; k < nriov; k++) { /* remote pieces with gaps of 5 bytes */
        size_t len = k + 1 == nriov ? total - at : each;

        riov[k] = (uccl_riov_t){&rd, roff, len};
        at += len;
        roff += len + 5;
    }
    /* write: A's pieces land, gathered, in B's remote pieces */
    unit_fill(A.p, AREA, 11);
    memset(B.p, 0xee, AREA);
    UNIT_ASSERT_STATUS(uccl_writemsg(P.ab, &msg, &req), UCCL_OK);
    run(req);
    at = 0;
    for (int k = 0; k < nriov; k++) {
        memcpy(flat + at, B.p + riov[k].roff, riov[k].len);
        CU_ASSERT_EQUAL(B.p[riov[k].roff + riov[k].len], 0xee); /* nothing past a piece */
        at += riov[k].len;
    }
    CU_ASSERT_EQUAL(B.p[riov[0].roff - 1], 0xee);
    CU_ASSERT_EQUAL(gathered_mismatch(iov, flat), 0);
    /* read: B's remote pieces scattered into A's pieces, the gaps untouched */
    unit_fill(B.p, AREA, 23);
    memset(A.p, 0x5a, AREA);
    UNIT_ASSERT_STATUS(uccl_readmsg(P.ab, &msg, &req), UCCL_OK);
    run(req);
    at = 0;
    for (int k = 0; k < nriov; k++) {
        memcpy(flat + at, B.p + riov[k].roff, riov[k].len);
        at += riov[k].len;
    }
    CU_ASSERT_EQUAL(gathered_mismatch(iov, flat), 0);
    for (int i = 0; i < NPIECE; i++)
        CU_ASSERT_EQUAL(A.p[iov[i].off + iov[i].len], 0x5a);
    CU_ASSERT_EQUAL(A.p[iov[0].off - 1], 0x5a);
    free(flat);
}

/* A rendezvous message from 64 pieces of A into 64 other pieces of B:
 * pulled (B reads it) or pushed (A writes it after B's CTS); the receive
 * posted first, or after the RTS was held as unexpected. */
static void check_sendv(bool pull, bool unexpected)
{
    uint64_t reads = ofi_of(P.b)->rma_posted, writes = ofi_of(P.a)->rma_posted;
    uccl_iov_t iov[NPIECE], riov[NPIECE];
    size_t total = make_iov(iov, 5), at = 0;
    uint8_t *flat = malloc(total);
    uccl_req_t *reqs[2];

    CU_ASSERT_FATAL(flat != NULL);
    for (int i = 0; i < NPIECE; i++) { /* B's pieces: reversed sizes */
        size_t len = iov[NPIECE - 1 - i].len;

        riov[i] = (uccl_iov_t){B.mr, 11 + at + (size_t)i * 3, len};
        at += len;
    }
    unit_fill(A.p, AREA, 31);
    memset(B.p, 0, AREA);
    if (!unexpected)
        UNIT_ASSERT_STATUS(uccl_recvv(P.ba, riov, NPIECE, 9, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_sendv(P.ab, iov, NPIECE, 9, &reqs[0]), UCCL_OK);
    for (int i = 0; i < 200 && unexpected; i++) { /* the RTS reaches B, held */
        uccl_engine_progress(P.a);
        uccl_engine_progress(P.b);
    }
    if (unexpected)
        UNIT_ASSERT_STATUS(uccl_recvv(P.ba, riov, NPIECE, 9, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[1], 0), UCCL_OK);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
    at = 0;
    for (int i = 0; i < NPIECE; i++) {
        memcpy(flat + at, B.p + riov[i].off, riov[i].len);
        at += riov[i].len;
    }
    CU_ASSERT_EQUAL(gathered_mismatch(iov, flat), 0);
    CU_ASSERT_EQUAL(ofi_of(P.b)->rma_posted > reads, pull);
    CU_ASSERT_EQUAL(ofi_of(P.a)->rma_posted > writes, !pull);
    free(flat);
}

#define SEED 1179648u /* the seed's transfer: 128 pieces of 9 KiB */
#define SEED_PC (SEED / 128)

/* One uccl_writemsg of the seed's bytes from A into riov (then a readmsg
 * back into a cleared A): `pieces` requests, ops provider operations for
 * the write; bytes compared both ways, nothing written next to a piece. */
static void seed_check(const uccl_riov_t *riov, int rn, const uint8_t *const *base, int pieces,
                       uint64_t ops)
{
    uccl_iov_t iov = {A.mr, 64, SEED};
    uccl_rma_msg_t msg = {.iov = &iov, .iovcnt = 1, .riov = riov, .riovcnt = rn};
    tp_ofi_t *tp = ofi_of(P.a);
    uint64_t before = tp->rma_posted;
    size_t at = 0;
    uccl_req_t *req;

    unit_fill(A.p, AREA, 41);
    memset(B.p, 0xee, AREA);
    CU_ASSERT_EQUAL(uccl_rma_msg_pieces(P.ab, &msg), pieces);
    UNIT_ASSERT_STATUS(uccl_writemsg(P.ab, &msg, &req), UCCL_OK);
    run(req);
    CU_ASSERT_EQUAL(tp->rma_posted - before, ops);
    for (int k = 0; k < rn; k++, at += riov[k - 1].len) {
        CU_ASSERT(memcmp(base[k] + riov[k].roff, A.p + 64 + at, riov[k].len) == 0);
        if (k + 1 == rn || base[k + 1] + riov[k + 1].roff != base[k] + riov[k].roff + riov[k].len)
            CU_ASSERT_EQUAL(base[k][riov[k].roff + riov[k].len], 0xee);
    }
    memset(A.p, 0x5a, AREA);
    UNIT_ASSERT_STATUS(uccl_readmsg(P.ab, &msg, &req), UCCL_OK);
    run(req);
    at = 0;
    for (int k = 0; k < rn; k++, at += riov[k - 1].len)
        CU_ASSERT(memcmp(base[k] + riov[k].roff, A.p + 64 + at, riov[k].len) == 0);
    CU_ASSERT_EQUAL(A.p[63], 0x5a);
    CU_ASSERT_EQUAL(A.p[64 + SEED], 0x5a);
}

/* The seed's pattern (128 adjacent 9 KiB remote pieces: one request, cut
 * only at UCCL_OFI_CHUNK), the same every other block (one request of 64 ranges per
 * 64 pieces, rma_iov_limit ranges per operation: the limit exceeded is
 * split), and scattered over two descriptors (never in one request). */
static void check_seed(void)
{
    static uccl_riov_t riov[128];
    static const uint8_t *base[128];
    tp_ofi_t *tp = ofi_of(P.a);
    size_t lim = tp->rma_iov_limit < OFI_IOV_MAX ? tp->rma_iov_limit : OFI_IOV_MAX;
    uint64_t per64 = (64 + lim - 1) / lim;
    uccl_rdesc_t rd, rd2;

    UNIT_ASSERT_STATUS(uccl_mr_pack(B.mr, 0, AREA, &rd), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(B.mr, AREA / 2, AREA / 2, &rd2), UCCL_OK);
    CU_ASSERT_FATAL(tp->cfg.chunk >= 64 * SEED_PC && lim >= 1);
    for (int k = 0; k < 128; k++) {
        riov[k] = (uccl_riov_t){&rd, 8 + (size_t)k * SEED_PC, SEED_PC};
        base[k] = B.p;
    }
    seed_check(riov, 128, base, 1, (SEED + tp->cfg.chunk - 1) / tp->cfg.chunk);
    for (int k = 0; k < 128; k++)
        riov[k].roff = 8 + (size_t)k * 2 * SEED_PC;
    seed_check(riov, 128, base, 2, 2 * per64);
    for (int k = 64; k < 128; k++) { /* the second half in the other descriptor */
        riov[k] = (uccl_riov_t){&rd2, 4 + (size_t)(k - 64) * 2 * SEED_PC, SEED_PC};
        base[k] = B.p + AREA / 2;
    }
    seed_check(riov, 128, base, 2, 2 * per64);
    for (int k = 0; k < 128; k++) { /* alternating descriptors: one request a piece */
        riov[k] = (uccl_riov_t){k % 2 ? &rd2 : &rd, (size_t)k * SEED_PC, SEED_PC};
        base[k] = k % 2 ? B.p + AREA / 2 : B.p;
    }
    seed_check(riov, 128, base, 128, 128);
}

/* Requests of one local piece, one remote range, up to UCCL_OFI_CHUNK
 * bytes are posted whole (ofi_rma.c), counted in rma_whole, and finished
 * at their completion without the data path (rma_whole_done); a larger
 * one, a vectored one and a zero-length one take the data path. Bytes
 * compared, the bytes around each range untouched. */
static void check_whole(void)
{
    tp_ofi_t *tp = ofi_of(P.a);
    uint64_t whole = tp->rma_whole, posted = tp->rma_posted, done = tp->rma_whole_done;
    size_t big = tp->cfg.chunk + 4097;
    uccl_iov_t two[2] = {{A.mr, 0, 1000}, {A.mr, 5000, 64535}};
    uccl_rdesc_t rd;
    uccl_req_t *req;

    UNIT_ASSERT_STATUS(uccl_mr_pack(B.mr, 0, AREA, &rd), UCCL_OK);
    unit_fill(A.p, AREA, 21);
    memset(B.p, 0xee, AREA);
    UNIT_ASSERT_STATUS(uccl_write(P.ab, A.mr, 3, 65536, &rd, 11, &req), UCCL_OK);
    run(req);
    CU_ASSERT(memcmp(B.p + 11, A.p + 3, 65536) == 0);
    CU_ASSERT(B.p[10] == 0xee && B.p[11 + 65536] == 0xee);
    CU_ASSERT_EQUAL(tp->rma_whole - whole, 1u);
    memset(A.p, 0x5a, AREA / 2);
    UNIT_ASSERT_STATUS(uccl_read(P.ab, A.mr, 100, 65536, &rd, 11, &req), UCCL_OK);
    run(req);
    CU_ASSERT(memcmp(A.p + 100, B.p + 11, 65536) == 0);
    CU_ASSERT(A.p[99] == 0x5a && A.p[100 + 65536] == 0x5a);
    CU_ASSERT_EQUAL(tp->rma_whole - whole, 2u);
    CU_ASSERT_EQUAL(tp->rma_whole_done - done, 2u);
    CU_ASSERT_EQUAL(tp->rma_posted - posted, 2u);
    unit_fill(A.p, AREA, 22);
    UNIT_ASSERT_STATUS(uccl_write(P.ab, A.mr, 0, big, &rd, 1, &req), UCCL_OK);
    run(req);
    CU_ASSERT(memcmp(B.p + 1, A.p, big) == 0);
    UNIT_ASSERT_STATUS(uccl_writev(P.ab, two, 2, &rd, 0, &req), UCCL_OK);
    run(req);
    CU_ASSERT(memcmp(B.p, A.p, 1000) == 0 && memcmp(B.p + 1000, A.p + 5000, 64535) == 0);
    UNIT_ASSERT_STATUS(uccl_read(P.ab, A.mr, 0, 0, &rd, 0, &req), UCCL_OK);
    run(req);
    CU_ASSERT_EQUAL(tp->rma_whole - whole, 2u); /* none of the three */
    CU_ASSERT_EQUAL(tp->rma_whole_done - done, 2u);
    CU_ASSERT(tp->rma_posted - posted >= 5u);
}

static void check_provider(const char *prov)
{
    static const char *const modes[] = {"1M", "0", "auto"};
    static const char *const pulls[] = {"1", "0", "1"}; /* pull and push on each provider */

    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        tp_ofi_t *tp;

        if (!open_pair(prov, modes[m], pulls[m]))
            UNIT_SKIP("libfabric's %s provider is not usable here", prov);
        tp = ofi_of(P.a);
        CU_ASSERT_FATAL(tp != NULL);
        check_rma(1);
        check_rma(3);
        check_rma(512);
        check_sendv(pulls[m][0] == '1', false);
        check_sendv(pulls[m][0] == '1', true);
        if (strcmp(modes[m], "0") == 0) {
            check_seed();
            check_whole();
        }
        if (strcmp(modes[m], "1M") == 0)
            CU_ASSERT(tp->nbounce > 0); /* the packed path ran */
        if (strcmp(modes[m], "0") == 0)
            CU_ASSERT_EQUAL(tp->nbounce, 0);
        close_pair();
    }
}

static void test_pack_tcp(void)
{
    check_provider("tcp;ofi_rxm");
}

static void test_pack_shm(void)
{
    check_provider("shm");
}

static void test_pack_setting(void)
{
    uccl_engine_t *e = NULL;

    setenv("UCCL_OFI_PROVIDER", "tcp;ofi_rxm", 1);
    setenv("UCCL_OFI_PACK_BELOW", "lots", 1);
    UNIT_ASSERT_STATUS(unit_engine_create("ofi", &e), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(e == NULL);
    unsetenv("UCCL_OFI_PACK_BELOW");
    setenv("UCCL_OFI_PULL", "2", 1);
    UNIT_ASSERT_STATUS(unit_engine_create("ofi", &e), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(e == NULL);
    unsetenv("UCCL_OFI_PULL");
    unsetenv("UCCL_OFI_PROVIDER");
}

static CU_TestInfo pack_tests[] = {
    {"UCCL_OFI_PACK_BELOW malformed, UCCL_OFI_PULL=2 -> INVALID_PARAM", test_pack_setting},
    {"packed pieces, byte-verified: tcp;ofi_rxm", test_pack_tcp},
    {"packed pieces, byte-verified: shm", test_pack_shm},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_pack", NULL, NULL, NULL, NULL, pack_tests}, CU_SUITE_INFO_NULL};

    (void)cur_prov;
    return unit_main(suites);
}

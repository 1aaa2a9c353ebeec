/* The gpu_ipc mailbox records' parser (src/tp/gpu_ipc/ipc_wire.c), which
 * the fuzz harness fuzz_ipc_mbox runs (that needs clang; this runs in every
 * build, with or without a GPU): each record type well formed parses to its
 * fields and segments; short, long, with too many segments, segments that
 * do not cover the length or wrap, unknown statuses, operations and types,
 * a grant outside its allocation are each refused with a reason; and the
 * ring header check refuses sizes and types a peer can forge. */
#include <string.h>

#include "core/tp_api.h"
#include "tp/gpu_ipc/ipc_wire.h"
#include "unit.h"

static _Alignas(8) uint8_t buf[IPC_MSG_MAX + 64];
static ipc_rx_msg_t m;

/* Parse len bytes of buf as type; UCCL_OK, or PEER_FAILED with a reason given. */
static uccl_status_t parse(uint16_t type, size_t len)
{
    const char *why = NULL;
    uccl_status_t st = uccl_gpu_ipc_msg_parse(type, buf, len, &m, &why);

    CU_ASSERT((st == UCCL_OK) == (why == NULL));
    return st;
}

/* fixed then n segments of seglen each into buf; the record's length. */
static size_t with_segs(const void *fixed, size_t flen, uint32_t n, uint64_t seglen)
{
    memcpy(buf, fixed, flen);
    for (uint32_t i = 0; i < n; i++) {
        msg_seg_t s = {0x7f0000000000ull + i * 0x100000ull, i * 64u, seglen};
        memcpy(buf + flen + i * sizeof(s), &s, sizeof(s));
    }
    return flen + n * sizeof(msg_seg_t);
}

static void test_fixed_records(void)
{
    msg_alloc_t a = {0x7f0000000000ull, 1 << 20, {{1, 2, 3}}};
    msg_key_t k = {42};
    msg_grant_req_t gr = {5, 0x1000, 64};
    msg_fin_t f = {.seq = 9, .status = UCCL_OK, .bytes = 100};
    uint16_t keyed[] = {IPC_MSG_ALLOC_GONE, IPC_MSG_REVOKE, IPC_MSG_NOTIF};
    uint16_t fins[] = {IPC_MSG_FIN, IPC_MSG_TGT_DONE, IPC_MSG_PUSH_DONE};

    memcpy(buf, &a, sizeof(a));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_ALLOC, sizeof(a)), UCCL_OK);
    CU_ASSERT(m.type == IPC_MSG_ALLOC && memcmp(&m.u.alloc, &a, sizeof(a)) == 0 && m.nseg == 0);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_ALLOC, sizeof(a) - 1), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_ALLOC, sizeof(a) + 8), UCCL_ERR_PEER_FAILED);
    a.size = UINT64_MAX; /* wraps past the end of the address space */
    memcpy(buf, &a, sizeof(a));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_ALLOC, sizeof(a)), UCCL_ERR_PEER_FAILED);
    for (size_t i = 0; i < 3; i++) {
        memcpy(buf, &k, sizeof(k));
        UNIT_ASSERT_STATUS(parse(keyed[i], sizeof(k)), UCCL_OK);
        CU_ASSERT_EQUAL(m.u.key.key, 42);
        UNIT_ASSERT_STATUS(parse(keyed[i], sizeof(k) + 1), UCCL_ERR_PEER_FAILED);
        UNIT_ASSERT_STATUS(parse(keyed[i], 0), UCCL_ERR_PEER_FAILED);
    }
    memcpy(buf, &gr, sizeof(gr));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT_REQ, sizeof(gr)), UCCL_OK);
    CU_ASSERT(m.u.grant_req.region_id == 5 && m.u.grant_req.len == 64);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT_REQ, sizeof(gr) - 8), UCCL_ERR_PEER_FAILED);
    /* completions: OK and known errors; "in progress", made-up and positive statuses refused */
    for (size_t i = 0; i < 3; i++) {
        int32_t bad[] = {UCCL_INPROGRESS, 7, -9999, INT32_MIN};
        f.status = UCCL_OK;
        memcpy(buf, &f, sizeof(f));
        UNIT_ASSERT_STATUS(parse(fins[i], sizeof(f)), UCCL_OK);
        CU_ASSERT(m.u.fin.seq == 9 && m.u.fin.bytes == 100);
        f.status = UCCL_ERR_TRANSPORT;
        memcpy(buf, &f, sizeof(f));
        UNIT_ASSERT_STATUS(parse(fins[i], sizeof(f)), UCCL_OK);
        for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
            f.status = bad[j];
            memcpy(buf, &f, sizeof(f));
            UNIT_ASSERT_STATUS(parse(fins[i], sizeof(f)), UCCL_ERR_PEER_FAILED);
        }
        UNIT_ASSERT_STATUS(parse(fins[i], sizeof(f) - 4), UCCL_ERR_PEER_FAILED);
    }
    /* unknown types never parse */
    UNIT_ASSERT_STATUS(parse(0, 8), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_PUSH_DONE + 1, sizeof(f)), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(UINT16_MAX, 0), UCCL_ERR_PEER_FAILED);
}

static void test_grant(void)
{
    msg_grant_t g = {.region_id = 3, .status = UCCL_OK, .addr = 0x10000 + 4096, .len = 8192,
                     .alloc = {0x10000, 1 << 16, {{9}}}};

    memcpy(buf, &g, sizeof(g));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g)), UCCL_OK);
    CU_ASSERT(m.u.grant.region_id == 3 && m.u.grant.addr == g.addr && m.u.grant.alloc.size == 1 << 16);
    g.addr = 0x10000 + (1 << 16) - 4096; /* runs past its allocation */
    memcpy(buf, &g, sizeof(g));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g)), UCCL_ERR_PEER_FAILED);
    g.addr = 0x8000; /* before it */
    memcpy(buf, &g, sizeof(g));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g)), UCCL_ERR_PEER_FAILED);
    g.status = UCCL_ERR_REMOTE_ACCESS; /* a refusal carries no range */
    memcpy(buf, &g, sizeof(g));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g)), UCCL_OK);
    g.status = 3;
    memcpy(buf, &g, sizeof(g));
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g)), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_GRANT, sizeof(g) + 8), UCCL_ERR_PEER_FAILED);
}

static void test_segment_records(void)
{
    msg_rts_t r = {.seq = 1, .tag = 2, .len = 300, .msg_seq = 4, .nseg = 3};
    msg_cts_t c = {.seq = 1, .len = 300, .push_len = 200, .nseg = 2};
    msg_tgt_op_t t = {.seq = 5, .region_id = 6, .addr = 0x1000, .len = 256, .notif = 7,
                      .op = UCCL_OP_WRITE, .has_notif = 1, .nseg = 4};
    size_t n;

    n = with_segs(&r, sizeof(r), 3, 100);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_OK);
    CU_ASSERT(m.u.rts.len == 300 && m.u.rts.tag == 2 && m.nseg == 3 && m.seg[2].len == 100 &&
              m.seg[1].off == 64);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n - 1), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n + sizeof(msg_seg_t)), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, sizeof(r) - 8), UCCL_ERR_PEER_FAILED);
    n = with_segs(&r, sizeof(r), 3, 99); /* 297 bytes described, 300 announced */
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_ERR_PEER_FAILED);
    r.done_slot = IPC_DONE_SLOTS; /* the last done word: fine; one more is out of range */
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, with_segs(&r, sizeof(r), 3, 100)), UCCL_OK);
    r.done_slot = IPC_DONE_SLOTS + 1;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, with_segs(&r, sizeof(r), 3, 100)), UCCL_ERR_PEER_FAILED);
    r.done_slot = 0;
    r.len = 0;
    r.nseg = 0; /* an empty message: no segments */
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, with_segs(&r, sizeof(r), 0, 0)), UCCL_OK);
    r.nseg = UCCL_IOV_MAX + 1;
    r.len = 0;
    n = with_segs(&r, sizeof(r), UCCL_IOV_MAX + 1, 0);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_ERR_PEER_FAILED);
    /* a segment whose end wraps, and lengths whose sum wraps to the total */
    r.nseg = 2;
    r.len = 0;
    n = with_segs(&r, sizeof(r), 2, 1ull << 63);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_ERR_PEER_FAILED);
    r.nseg = 1;
    r.len = UINT64_MAX - 10;
    n = with_segs(&r, sizeof(r), 1, UINT64_MAX - 10); /* off 0: fits; then: */
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_OK);
    ((msg_seg_t *)(buf + sizeof(r)))->off = 11;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_RTS, n), UCCL_ERR_PEER_FAILED);

    n = with_segs(&c, sizeof(c), 2, 100);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_CTS, n), UCCL_OK);
    CU_ASSERT(m.u.cts.push_len == 200 && m.nseg == 2);
    c.push_len = 0;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_CTS, with_segs(&c, sizeof(c), 0, 0)), UCCL_ERR_PEER_FAILED);
    c.push_len = 400; /* more than the message */
    c.nseg = 4;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_CTS, with_segs(&c, sizeof(c), 4, 100)), UCCL_ERR_PEER_FAILED);

    n = with_segs(&t, sizeof(t), 4, 64);
    UNIT_ASSERT_STATUS(parse(IPC_MSG_TGT_OP, n), UCCL_OK);
    CU_ASSERT(m.u.tgt.op == UCCL_OP_WRITE && m.u.tgt.has_notif == 1 && m.nseg == 4);
    t.op = UCCL_OP_READ;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_TGT_OP, with_segs(&t, sizeof(t), 4, 64)), UCCL_OK);
    t.op = 77;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_TGT_OP, with_segs(&t, sizeof(t), 4, 64)), UCCL_ERR_PEER_FAILED);
    t.op = UCCL_OP_WRITE;
    t.has_notif = 2;
    UNIT_ASSERT_STATUS(parse(IPC_MSG_TGT_OP, with_segs(&t, sizeof(t), 4, 64)), UCCL_ERR_PEER_FAILED);
    t.has_notif = 0;
    t.addr = UINT64_MAX - 100; /* the target range wraps */
    UNIT_ASSERT_STATUS(parse(IPC_MSG_TGT_OP, with_segs(&t, sizeof(t), 4, 64)), UCCL_ERR_PEER_FAILED);
}

static void test_rec_check(void)
{
    uccl_spsc_hdr_t h = {IPC_MSG_RTS, sizeof(uccl_spsc_hdr_t) + 40};
    uint16_t type = 0;
    size_t len = 0;

    UNIT_ASSERT_STATUS(uccl_gpu_ipc_rec_check(&h, &type, &len), UCCL_OK);
    CU_ASSERT(type == IPC_MSG_RTS && len == 40);
    h.size = sizeof(uccl_spsc_hdr_t) + IPC_MSG_MAX;
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_rec_check(&h, &type, &len), UCCL_OK);
    h.size++;
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_rec_check(&h, &type, &len), UCCL_ERR_PEER_FAILED);
    h.size = sizeof(uccl_spsc_hdr_t) - 1;
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_rec_check(&h, &type, &len), UCCL_ERR_PEER_FAILED);
    h.size = 16;
    h.type = 0x10000 | IPC_MSG_FIN;
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_rec_check(&h, &type, &len), UCCL_ERR_PEER_FAILED);
}

static CU_TestInfo cases[] = {
    {"fixed-size records: exact sizes, known statuses, no wrap", test_fixed_records},
    {"grants: inside their allocation, known status", test_grant},
    {"RTS, CTS, TGT_OP: segments cover the length", test_segment_records},
    {"ring header: size and type bounds", test_rec_check},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"gpu_ipc mailbox records", NULL, NULL, NULL, NULL, cases},
                             CU_SUITE_INFO_NULL};
    return unit_main(suites);
}

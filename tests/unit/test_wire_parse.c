/* Unit tests of the pure parsers of peer bytes that the fuzz harnesses
 * fuzz_shm_rx and fuzz_notif run (those need clang; these run in every
 * build): the shm packet parser (src/tp/shm/shm_wire.c) takes each packet
 * type well formed and refuses it short, long, with too many pieces or a
 * length that disagrees; the rndv control message parser and immediate
 * decoder (src/tp/common/rndv_wire.c) round-trip what the sender encodes
 * and refuse each malformed message. */
#include <string.h>

#include "tp/common/rndv.h"
#include "tp/shm/shm.h"
#include "util/bytes.h"
#include "unit.h"

static _Alignas(64) uint8_t buf[8192];

static uccl_status_t shm_parse(uint32_t type, uint32_t size, shm_rx_pkt_t *pkt)
{
    shm_pkt_hdr_t hdr = {type, size};

    memcpy(buf, &hdr, sizeof(hdr));
    return uccl_shm_pkt_parse(buf, &hdr, pkt);
}

static void test_shm_packets(void)
{
    shm_pkt_eager_t e = {{SHM_PKT_EAGER, sizeof(e) + 5}, 7, 5, 1};
    shm_pkt_rts_t r = {{SHM_PKT_RTS, 0}, 9, 100, 2, 5, 2, 0};
    shm_wire_iov_t iov[2] = {{0x1000, 40}, {0x2000, 60}};
    shm_rx_pkt_t pkt;

    memset(buf, 0, sizeof(buf));
    memcpy(buf, &e, sizeof(e));
    memcpy(buf + sizeof(e), "hello", 5);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_EAGER, sizeof(e) + 5, &pkt), UCCL_OK);
    CU_ASSERT(pkt.u.eager.tag == 7 && pkt.payload == buf + sizeof(e) && pkt.payload_len == 5);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_EAGER, sizeof(e) + 4, &pkt), UCCL_ERR_TRANSPORT);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_EAGER, sizeof(e) - 1, &pkt), UCCL_ERR_TRANSPORT);

    memcpy(buf, &r, sizeof(r));
    memcpy(buf + sizeof(r), iov, sizeof(iov));
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_RTS, sizeof(r) + sizeof(iov), &pkt), UCCL_OK);
    CU_ASSERT(pkt.u.rts.iovcnt == 2 && memcmp(pkt.iov, iov, sizeof(iov)) == 0 && pkt.payload == NULL);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_RTS, sizeof(r) + sizeof(iov) + 16, &pkt), UCCL_ERR_TRANSPORT);
    r.iovcnt = UCCL_IOV_MAX + 1;
    memcpy(buf, &r, sizeof(r));
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_RTS, sizeof(r) + (UCCL_IOV_MAX + 1) * 16, &pkt),
                    UCCL_ERR_TRANSPORT);
    /* control packets: exactly their size; unknown types never parse */
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_FIN, sizeof(shm_pkt_ctl_t), &pkt), UCCL_OK);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_CTS, sizeof(shm_pkt_ctl_t) + 8, &pkt), UCCL_ERR_TRANSPORT);
    CU_ASSERT_EQUAL(shm_parse(0, 64, &pkt), UCCL_ERR_TRANSPORT);
    CU_ASSERT_EQUAL(shm_parse(SHM_PKT_DONE + 1, 64, &pkt), UCCL_ERR_TRANSPORT);
    CU_ASSERT_EQUAL(pkt.u.hdr.type, SHM_PKT_DONE + 1); /* the checked header, kept */
}

static void test_rndv_ctrl(void)
{
    uccl_rndv_ctrl_t m;
    uint8_t *seg = buf + UCCL_RNDV_HDR_SIZE;

    memset(buf, 0, sizeof(buf));
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_NOTIFY, UCCL_OK, 3, 1ull << 40, 0, 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m), UCCL_OK);
    CU_ASSERT(m.type == UCCL_RNDV_MSG_NOTIFY && m.a == 3 && m.b == 1ull << 40 && m.nseg == 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE - 1, &m), UCCL_ERR_TRANSPORT);
    /* a closing NOTIFY (a notified write that failed over, verbs_rail.c) */
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_NOTIFY, UCCL_OK, 5, 9, UCCL_RNDV_NOTIFY_CLOSED, 0);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m) == UCCL_OK && m.a == 5 && m.b == 9 &&
              m.c == UCCL_RNDV_NOTIFY_CLOSED);
    /* a FIN that completes a receive (its sender's immediates were given up) */
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_FIN, UCCL_OK, 4, 1ull << 22, 0, 0);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m) == UCCL_OK && m.status == UCCL_OK &&
              m.b == 1ull << 22);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_FIN, UCCL_ERR_STALE, 4, 0, 0, 0);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m) == UCCL_OK &&
              m.status == UCCL_ERR_STALE);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_EAGER, UCCL_OK, 7, 8, 0, 11);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 8, &m) == UCCL_OK && m.seq == 11 &&
              m.payload == buf + UCCL_RNDV_HDR_SIZE);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 9, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_CTS, UCCL_OK, 12, 4, 2, 0);
    uccl_put_u64(seg, 0x1000);
    uccl_put_u64(seg + 8, 0x55);
    uccl_put_u64(seg + 16, 64);
    uccl_put_u64(seg + 24, 0x9000);
    uccl_put_u64(seg + 32, 0x55);
    uccl_put_u64(seg + 40, 36);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 48, &m), UCCL_OK);
    CU_ASSERT(m.nseg == 2 && m.segs[1].addr == 0x9000 && m.segs[1].len == 36);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 47, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_CTS, UCCL_OK, 12, 4, 0, 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 48, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_CTS, UCCL_OK, 12, 4, UCCL_IOV_MAX + 1, 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, 4096, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_GRANT, UCCL_OK, 12, 4, UCCL_RNDV_MAX_SLOTS - 1, 4096);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 24, &m) == UCCL_OK && m.nseg == 1 &&
              m.segs[0].len == 64);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 23, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_GRANT, UCCL_OK, 12, 4, UCCL_RNDV_MAX_SLOTS, 4096);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 24, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, 0, UCCL_OK, 0, 0, 0, 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_TMSG + 1, UCCL_OK, 0, 0, 0, 0);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m), UCCL_ERR_TRANSPORT);
    /* RTS_TMSG: the header alone {tag, len, message id}, no segments */
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_TMSG, UCCL_OK, 7, 65536, 12345, 3);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE, &m) == UCCL_OK && m.nseg == 0 &&
              m.a == 7 && m.b == 65536 && m.c == 12345 && m.seq == 3 && m.payload == NULL);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE - 1, &m), UCCL_ERR_TRANSPORT);
    /* RTS_PULL: the segment count in the status field, 1..UCCL_IOV_MAX, all present */
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_PULL, (uccl_status_t)2, 5, 100, 9, 3);
    CU_ASSERT(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 48, &m) == UCCL_OK && m.nseg == 2 &&
              m.status == UCCL_OK && m.a == 5 && m.b == 100 && m.c == 9 && m.seq == 3 &&
              m.segs[0].addr == 0x1000 && m.segs[1].len == 36);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 47, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_PULL, UCCL_OK, 5, 100, 9, 3);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, UCCL_RNDV_HDR_SIZE + 48, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_PULL, (uccl_status_t)(UCCL_IOV_MAX + 1), 5, 100, 9, 3);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, 4096, &m), UCCL_ERR_TRANSPORT);
    uccl_rndv_hdr_put(buf, UCCL_RNDV_MSG_RTS_PULL, (uccl_status_t)-1, 5, 100, 9, 3);
    CU_ASSERT_EQUAL(uccl_rndv_ctrl_parse(buf, 4096, &m), UCCL_ERR_TRANSPORT);
}

static void test_rndv_imm(void)
{
    uccl_rndv_imm_fields_t f;
    uint32_t imm = uccl_rndv_imm_pack(UCCL_RNDV_IMM_NOTIFY, 3, 77);

    uccl_rndv_imm_parse(imm, &f);
    CU_ASSERT(f.kind == UCCL_RNDV_IMM_NOTIFY && f.nparts == 4 && f.id == 77);
    uccl_rndv_imm_parse(uccl_rndv_imm_pack(UCCL_RNDV_IMM_CHUNK, UCCL_RNDV_MAX_SLOTS - 1,
                                           UCCL_RNDV_IMM_ID_MASK), &f);
    CU_ASSERT(f.kind == UCCL_RNDV_IMM_CHUNK && f.nparts - 1 == UCCL_RNDV_MAX_SLOTS - 1 &&
              f.id == UCCL_RNDV_IMM_ID_MASK);
    uccl_rndv_imm_parse((uint32_t)UCCL_RNDV_IMM_NOTIFY_SMALL << 30 | (UCCL_RNDV_IMM_SMALL_MAX - 1),
                        &f);
    CU_ASSERT(f.kind == UCCL_RNDV_IMM_NOTIFY_SMALL && f.value == UCCL_RNDV_IMM_SMALL_MAX - 1);
    uccl_rndv_imm_parse(0xffffffffu, &f);
    CU_ASSERT(f.kind == UCCL_RNDV_IMM_RNDV && f.nparts == UCCL_RNDV_MAX_PARTS &&
              f.id == UCCL_RNDV_IMM_ID_MASK);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"shm packets: each type parsed, malformed ones refused", test_shm_packets},
        {"rndv control messages: encoded, parsed, malformed refused", test_rndv_ctrl},
        {"rndv immediates: packed and parsed back", test_rndv_imm},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"wire_parse", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

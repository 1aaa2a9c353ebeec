/* libFuzzer harness: notification records and the rest of the RDMA message
 * protocol's control channel as the receiving side decodes them
 * (src/tp/common/rndv_wire.c; verbs and ofi): the control message parser
 * (NOTIFY {notify id, value}, EAGER, RTS, RTS_PULL, RTS_TMSG, CTS, FIN, GRANT) on the whole
 * input, and the 32-bit immediates that close notified and rendezvous
 * writes on each 4 bytes of it. A message that parses must describe only
 * bytes of its buffer and encode and parse again to the same fields; every
 * immediate decodes to fields in range that pack back to it. */
#include <stdlib.h>
#include <string.h>

#include "tp/common/rndv.h"
#include "util/bytes.h"

#define BUF_MAX (UCCL_RNDV_HDR_SIZE + UCCL_IOV_MAX * UCCL_RNDV_SEG_SIZE + 4096)

static void check_ctrl(const uint8_t *data, size_t size)
{
    static uint8_t again[BUF_MAX];
    uccl_rndv_ctrl_t m, m2;
    size_t len = UCCL_RNDV_HDR_SIZE;

    if (uccl_rndv_ctrl_parse(data, size, &m) != UCCL_OK)
        return;
    switch (m.type) {
    case UCCL_RNDV_MSG_EAGER:
        if (m.payload != data + UCCL_RNDV_HDR_SIZE || m.b != size - UCCL_RNDV_HDR_SIZE)
            abort();
        break;
    case UCCL_RNDV_MSG_CTS:
        if (m.nseg < 1 || m.nseg > UCCL_IOV_MAX || (uint64_t)m.nseg != m.c ||
            UCCL_RNDV_HDR_SIZE + (size_t)m.nseg * UCCL_RNDV_SEG_SIZE > size)
            abort();
        break;
    case UCCL_RNDV_MSG_RTS_PULL: /* the segment count came in the status word */
        if (m.nseg < 1 || m.nseg > UCCL_IOV_MAX || m.status != UCCL_OK ||
            UCCL_RNDV_HDR_SIZE + (size_t)m.nseg * UCCL_RNDV_SEG_SIZE > size)
            abort();
        break;
    case UCCL_RNDV_MSG_GRANT:
        if (m.nseg != 1 || m.c >= UCCL_RNDV_MAX_SLOTS ||
            UCCL_RNDV_HDR_SIZE + UCCL_RNDV_SEG_SIZE > size)
            abort();
        break;
    case UCCL_RNDV_MSG_RTS:
    case UCCL_RNDV_MSG_RTS_TMSG:
    case UCCL_RNDV_MSG_FIN:
    case UCCL_RNDV_MSG_NOTIFY:
        if (m.nseg != 0 || m.payload != NULL)
            abort();
        break;
    default:
        abort(); /* an unknown type never parses */
    }
    /* encode what was parsed, parse it again: the same message */
    uccl_rndv_hdr_put(again, m.type,
                      m.type == UCCL_RNDV_MSG_RTS_PULL ? (uccl_status_t)m.nseg : m.status, m.a,
                      m.b, m.c, m.seq);
    if (m.type == UCCL_RNDV_MSG_EAGER) {
        if (m.b > sizeof(again) - len)
            return;
        memcpy(again + len, m.payload, m.b);
        len += m.b;
    }
    for (int i = 0; i < m.nseg; i++, len += UCCL_RNDV_SEG_SIZE) {
        uccl_put_u64(again + len, m.segs[i].addr);
        uccl_put_u64(again + len + 8, m.segs[i].key);
        uccl_put_u64(again + len + 16, m.segs[i].len);
    }
    if (uccl_rndv_ctrl_parse(again, len, &m2) != UCCL_OK || m2.type != m.type ||
        m2.status != m.status || m2.a != m.a || m2.b != m.b || m2.c != m.c || m2.seq != m.seq ||
        m2.nseg != m.nseg || memcmp(m2.segs, m.segs, (size_t)m.nseg * sizeof(m.segs[0])) != 0 ||
        (m.type == UCCL_RNDV_MSG_EAGER && memcmp(m2.payload, m.payload, m.b) != 0))
        abort();
}

static void check_imm(uint32_t imm)
{
    uccl_rndv_imm_fields_t f;

    uccl_rndv_imm_parse(imm, &f);
    if (f.kind > UCCL_RNDV_IMM_RNDV || f.nparts < 1 || f.nparts > UCCL_RNDV_MAX_PARTS ||
        f.id > UCCL_RNDV_IMM_ID_MASK || f.value >= UCCL_RNDV_IMM_SMALL_MAX)
        abort();
    if (f.kind == UCCL_RNDV_IMM_NOTIFY_SMALL
            ? ((uint32_t)UCCL_RNDV_IMM_NOTIFY_SMALL << 30 | f.value) != imm
            : uccl_rndv_imm_pack(f.kind, (uint32_t)f.nparts - 1, f.id) != imm)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_ctrl(data, size);
    for (size_t i = 0; i + 4 <= size; i += 4)
        check_imm(uccl_get_u32(data + i));
    return 0;
}

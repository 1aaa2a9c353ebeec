/* The wire format of the RDMA message protocol (rndv.h): control message
 * headers and immediates, encoded and parsed without any endpoint state, so
 * that the one parser of what a peer sends is a pure function (the fuzz
 * harness tests/fuzz/fuzz_notif.c runs it). Built whatever transports are:
 * it needs nothing from verbs or libfabric. */
#include <string.h>

#include "rndv.h"
#include "util/bytes.h"

void uccl_rndv_hdr_put(uint8_t *p, int type, uccl_status_t status, uint64_t a, uint64_t b,
                       uint64_t c, uint64_t seq)
{
    memset(p, 0, 4);
    p[0] = (uint8_t)type;
    uccl_put_u32(p + 4, (uint32_t)(int32_t)status);
    uccl_put_u64(p + 8, a);
    uccl_put_u64(p + 16, b);
    uccl_put_u64(p + 24, c);
    uccl_put_u64(p + 32, seq);
}

static void rndv_seg_get(const uint8_t *p, uccl_rndv_seg_t *seg)
{
    seg->addr = uccl_get_u64(p);
    seg->key = uccl_get_u64(p + 8);
    seg->len = uccl_get_u64(p + 16);
}

uccl_status_t uccl_rndv_ctrl_parse(const uint8_t *p, size_t len, uccl_rndv_ctrl_t *m)
{
    size_t body = len - UCCL_RNDV_HDR_SIZE;
    uint64_t n;

    memset(m, 0, offsetof(uccl_rndv_ctrl_t, segs));
    if (len < UCCL_RNDV_HDR_SIZE)
        return UCCL_ERR_TRANSPORT;
    m->type = p[0];
    m->status = (uccl_status_t)(int32_t)uccl_get_u32(p + 4);
    m->a = uccl_get_u64(p + 8);
    m->b = uccl_get_u64(p + 16);
    m->c = uccl_get_u64(p + 24);
    m->seq = uccl_get_u64(p + 32);
    switch (m->type) {
    case UCCL_RNDV_MSG_EAGER: /* b = the payload's length, all of the rest */
        if (m->b != body)
            return UCCL_ERR_TRANSPORT;
        m->payload = p + UCCL_RNDV_HDR_SIZE;
        return UCCL_OK;
    case UCCL_RNDV_MSG_CTS: /* c = segments, 1..UCCL_IOV_MAX, that follow */
    case UCCL_RNDV_MSG_RTS_PULL: /* status = segments, 1..UCCL_IOV_MAX, that follow */
        n = m->type == UCCL_RNDV_MSG_CTS ? m->c : (uint64_t)(uint32_t)m->status;
        if (n == 0 || n > UCCL_IOV_MAX || body < n * UCCL_RNDV_SEG_SIZE)
            return UCCL_ERR_TRANSPORT;
        m->nseg = (int)n;
        m->status = UCCL_OK;
        for (int i = 0; i < m->nseg; i++)
            rndv_seg_get(p + UCCL_RNDV_HDR_SIZE + (size_t)i * UCCL_RNDV_SEG_SIZE, &m->segs[i]);
        return UCCL_OK;
    case UCCL_RNDV_MSG_GRANT: /* c = slot, one segment follows */
        if (m->c >= UCCL_RNDV_MAX_SLOTS || body < UCCL_RNDV_SEG_SIZE)
            return UCCL_ERR_TRANSPORT;
        m->nseg = 1;
        rndv_seg_get(p + UCCL_RNDV_HDR_SIZE, &m->segs[0]);
        return UCCL_OK;
    case UCCL_RNDV_MSG_RTS:
    case UCCL_RNDV_MSG_RTS_TMSG:
    case UCCL_RNDV_MSG_FIN:
    case UCCL_RNDV_MSG_NOTIFY:
        return UCCL_OK;
    default:
        return UCCL_ERR_TRANSPORT;
    }
}

uint32_t uccl_rndv_imm_pack(uint32_t kind, uint32_t parts, uint32_t id)
{
    return kind << 30 | (parts & (UCCL_RNDV_MAX_PARTS - 1)) << 25 | (id & UCCL_RNDV_IMM_ID_MASK);
}

void uccl_rndv_imm_parse(uint32_t imm, uccl_rndv_imm_fields_t *f)
{
    f->kind = imm >> 30;
    f->id = imm & UCCL_RNDV_IMM_ID_MASK;
    f->nparts = (int)((imm >> 25) & (UCCL_RNDV_MAX_PARTS - 1)) + 1;
    f->value = imm & (UCCL_RNDV_IMM_SMALL_MAX - 1);
}

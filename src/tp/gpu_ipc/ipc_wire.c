/* The gpu_ipc mailbox records' parser (ipc_wire.h): pure, no endpoint. */
#include <string.h>

#include "core/tp_api.h"
#include "tp/gpu_ipc/ipc_wire.h"

uccl_status_t uccl_gpu_ipc_rec_check(const uccl_spsc_hdr_t *hdr, uint16_t *type, size_t *len)
{
    if (hdr->size < sizeof(*hdr) || hdr->size - sizeof(*hdr) > IPC_MSG_MAX || hdr->type > UINT16_MAX)
        return UCCL_ERR_PEER_FAILED;
    *type = (uint16_t)hdr->type;
    *len = hdr->size - sizeof(*hdr);
    return UCCL_OK;
}

/* A status a peer may report: success or a known error. */
static bool status_ok(int32_t st)
{
    return st <= 0 && strcmp(uccl_status_name((uccl_status_t)st), "UCCL_UNKNOWN") != 0;
}

/* The fixed part (fixed bytes, into dst), then *nseg segments and nothing
 * else; the segments must cover exactly want bytes, none wrapping. */
static const char *parse_segs(const uint8_t *p, size_t len, size_t fixed, void *dst,
                              const uint32_t *nseg, const uint64_t *want, ipc_rx_msg_t *m)
{
    uint64_t total = 0;

    if (len < fixed)
        return "a record shorter than its type";
    memcpy(dst, p, fixed);
    if (*nseg > UCCL_IOV_MAX || len != fixed + (size_t)*nseg * sizeof(msg_seg_t))
        return "a segment count that does not match the record";
    m->nseg = *nseg;
    memcpy(m->seg, p + fixed, (size_t)*nseg * sizeof(msg_seg_t));
    for (uint32_t i = 0; i < m->nseg; i++) {
        if (m->seg[i].off > UINT64_MAX - m->seg[i].len || m->seg[i].len > UINT64_MAX - total)
            return "a segment range that wraps";
        total += m->seg[i].len;
    }
    return total == *want ? NULL : "segments that do not cover the length";
}

static const char *parse_fixed(const uint8_t *p, size_t len, size_t fixed, void *dst)
{
    if (len != fixed)
        return "a record of the wrong size for its type";
    memcpy(dst, p, fixed);
    return NULL;
}

static const char *parse_body(uint16_t type, const uint8_t *p, size_t len, ipc_rx_msg_t *m)
{
    const char *why;

    switch (type) {
    case IPC_MSG_ALLOC:
        if ((why = parse_fixed(p, len, sizeof(m->u.alloc), &m->u.alloc)) != NULL)
            return why;
        return m->u.alloc.key > UINT64_MAX - m->u.alloc.size ? "an allocation that wraps" : NULL;
    case IPC_MSG_ALLOC_GONE:
    case IPC_MSG_REVOKE:
    case IPC_MSG_NOTIF:
        return parse_fixed(p, len, sizeof(m->u.key), &m->u.key);
    case IPC_MSG_GRANT_REQ:
        return parse_fixed(p, len, sizeof(m->u.grant_req), &m->u.grant_req);
    case IPC_MSG_GRANT: {
        const msg_grant_t *g = &m->u.grant;
        if ((why = parse_fixed(p, len, sizeof(m->u.grant), &m->u.grant)) != NULL)
            return why;
        if (!status_ok(g->status))
            return "a grant with an unknown status";
        if (g->status == UCCL_OK &&
            (g->alloc.key > UINT64_MAX - g->alloc.size || g->addr < g->alloc.key ||
             g->len > g->alloc.size || g->addr - g->alloc.key > g->alloc.size - g->len))
            return "a grant outside its allocation";
        return NULL;
    }
    case IPC_MSG_RTS:
        if ((why = parse_segs(p, len, sizeof(m->u.rts), &m->u.rts, &m->u.rts.nseg, &m->u.rts.len,
                              m)) != NULL)
            return why;
        return m->u.rts.done_slot > IPC_DONE_SLOTS ? "a send naming a done word out of range" : NULL;
    case IPC_MSG_CTS:
        if ((why = parse_segs(p, len, sizeof(m->u.cts), &m->u.cts, &m->u.cts.nseg,
                              &m->u.cts.push_len, m)) != NULL)
            return why;
        return m->u.cts.push_len == 0 || m->u.cts.push_len > m->u.cts.len
                   ? "a clear-to-send whose push is empty or longer than the message"
                   : NULL;
    case IPC_MSG_TGT_OP:
        if ((why = parse_segs(p, len, sizeof(m->u.tgt), &m->u.tgt, &m->u.tgt.nseg, &m->u.tgt.len,
                              m)) != NULL)
            return why;
        if (m->u.tgt.op != UCCL_OP_WRITE && m->u.tgt.op != UCCL_OP_READ)
            return "a target operation that is neither write nor read";
        if (m->u.tgt.has_notif > 1 || m->u.tgt.addr > UINT64_MAX - m->u.tgt.len)
            return "a target operation with a bad flag or a range that wraps";
        return NULL;
    case IPC_MSG_FIN:
    case IPC_MSG_TGT_DONE:
    case IPC_MSG_PUSH_DONE:
        if ((why = parse_fixed(p, len, sizeof(m->u.fin), &m->u.fin)) != NULL)
            return why;
        return status_ok(m->u.fin.status) ? NULL : "a completion with an unknown status";
    default:
        return "an unknown record type";
    }
}

uccl_status_t uccl_gpu_ipc_msg_parse(uint16_t type, const void *p, size_t len, ipc_rx_msg_t *m,
                                     const char **why)
{
    m->type = type;
    m->nseg = 0;
    *why = parse_body(type, p, len, m);
    return *why == NULL ? UCCL_OK : UCCL_ERR_PEER_FAILED;
}

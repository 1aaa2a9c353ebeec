/* libFuzzer harness: what a gpu_ipc peer puts in our mailbox
 * (src/tp/gpu_ipc): the ring's record headers and counter (uccl_spsc_peek,
 * spsc_ring.c), the record header check (uccl_gpu_ipc_rec_check) and every
 * record type (uccl_gpu_ipc_msg_parse, ipc_wire.c), read as the receiving
 * endpoint reads them (a private copy of each payload). Input: a mode
 * byte; with bit 0 clear, one record: a u16 type then its payload; with
 * bit 0 set, the ring's bytes, all of them published (head = their length,
 * aligned), or with bit 1 also set the producer's head counter first (8
 * bytes: a wrapped or bogus counter). A record that parses must have the
 * size of its type plus its segments, segments that sum to the length they
 * describe without wrapping, only known statuses and operations, a grant
 * inside its allocation, and must encode back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/tp_api.h"
#include "tp/gpu_ipc/ipc_wire.h"

#define RING_CAP 8192
#define REC_ALIGN 8

static size_t fixed_size(uint16_t type)
{
    switch (type) {
    case IPC_MSG_ALLOC: return sizeof(msg_alloc_t);
    case IPC_MSG_ALLOC_GONE:
    case IPC_MSG_REVOKE:
    case IPC_MSG_NOTIF: return sizeof(msg_key_t);
    case IPC_MSG_GRANT_REQ: return sizeof(msg_grant_req_t);
    case IPC_MSG_GRANT: return sizeof(msg_grant_t);
    case IPC_MSG_RTS: return sizeof(msg_rts_t);
    case IPC_MSG_CTS: return sizeof(msg_cts_t);
    case IPC_MSG_TGT_OP: return sizeof(msg_tgt_op_t);
    case IPC_MSG_FIN:
    case IPC_MSG_TGT_DONE:
    case IPC_MSG_PUSH_DONE: return sizeof(msg_fin_t);
    default: abort(); /* an unknown type never parses */
    }
}

static bool known_status(int32_t st)
{
    return st <= 0 && strcmp(uccl_status_name((uccl_status_t)st), "UCCL_UNKNOWN") != 0;
}

/* The invariants of a parsed record p[0..len) (see the head comment). */
static void check(uint16_t type, const uint8_t *p, size_t len, const ipc_rx_msg_t *m)
{
    static _Alignas(8) uint8_t again[IPC_MSG_MAX];
    size_t fixed = fixed_size(type);
    uint64_t want = 0, total = 0;

    if (m->type != type || m->nseg > UCCL_IOV_MAX || len != fixed + m->nseg * sizeof(msg_seg_t))
        abort();
    if (type == IPC_MSG_RTS || type == IPC_MSG_CTS || type == IPC_MSG_TGT_OP) {
        want = type == IPC_MSG_RTS ? m->u.rts.len
               : type == IPC_MSG_CTS ? m->u.cts.push_len
                                     : m->u.tgt.len;
        for (uint32_t i = 0; i < m->nseg; i++) {
            if (m->seg[i].off + m->seg[i].len < m->seg[i].off || total + m->seg[i].len < total)
                abort();
            total += m->seg[i].len;
        }
        if (total != want)
            abort();
    } else if (m->nseg != 0) {
        abort();
    }
    if (type == IPC_MSG_CTS && (m->u.cts.push_len == 0 || m->u.cts.push_len > m->u.cts.len))
        abort();
    if (type == IPC_MSG_TGT_OP &&
        ((m->u.tgt.op != UCCL_OP_WRITE && m->u.tgt.op != UCCL_OP_READ) || m->u.tgt.has_notif > 1 ||
         m->u.tgt.addr + m->u.tgt.len < m->u.tgt.addr))
        abort();
    if ((type == IPC_MSG_FIN || type == IPC_MSG_TGT_DONE || type == IPC_MSG_PUSH_DONE) &&
        !known_status(m->u.fin.status))
        abort();
    if (type == IPC_MSG_GRANT) {
        const msg_grant_t *g = &m->u.grant;
        if (!known_status(g->status) ||
            (g->status == UCCL_OK && (g->addr < g->alloc.key || g->addr + g->len < g->addr ||
                                      g->addr + g->len > g->alloc.key + g->alloc.size ||
                                      g->alloc.key + g->alloc.size < g->alloc.key)))
            abort();
    }
    if (type == IPC_MSG_ALLOC && m->u.alloc.key + m->u.alloc.size < m->u.alloc.key)
        abort();
    /* encode what was parsed: the same bytes */
    memcpy(again, &m->u, fixed);
    memcpy(again + fixed, m->seg, m->nseg * sizeof(msg_seg_t));
    if (memcmp(again, p, len) != 0)
        abort();
}

static void parse_one(uint16_t type, const uint8_t *p, size_t len)
{
    static _Alignas(8) uint8_t copy[IPC_MSG_MAX];
    static ipc_rx_msg_t m;
    const char *why = NULL;

    if (len > IPC_MSG_MAX)
        return;
    memcpy(copy, p, len); /* as uccl_gpu_ipc_ep_poll parses: a private copy */
    if (uccl_gpu_ipc_msg_parse(type, copy, len, &m, &why) == UCCL_OK) {
        if (why != NULL)
            abort();
        check(type, copy, len, &m);
    } else if (why == NULL) {
        abort(); /* a refusal always says why */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static _Alignas(64) uint8_t mem[sizeof(uccl_spsc_ctl_t) + RING_CAP];
    uccl_spsc_ctl_t *ctl = (uccl_spsc_ctl_t *)mem;
    uint8_t *ring = mem + sizeof(uccl_spsc_ctl_t);
    uint64_t head;
    uccl_spsc_t rx;
    uint8_t mode;

    if (size < 1)
        return 0;
    mode = data[0];
    data++;
    size--;
    if (!(mode & 1)) {
        if (size >= 2)
            parse_one((uint16_t)(data[0] | data[1] << 8), data + 2, size - 2);
        return 0;
    }
    if ((mode & 2) && size >= 8) {
        memcpy(&head, data, 8);
        data += 8;
        size -= 8;
    } else {
        head = ((size < RING_CAP ? size : RING_CAP) + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
    }
    memset(ring, 0, RING_CAP);
    memcpy(ring, data, size < RING_CAP ? size : RING_CAP);
    uccl_spsc_attach(&rx, mem, RING_CAP, REC_ALIGN, false, true);
    atomic_store(&ctl->head, head);
    for (int n = 0; n < 1024; n++) {
        uccl_spsc_hdr_t hdr;
        bool bad;
        const uint8_t *p = uccl_spsc_peek(&rx, &hdr, &bad);
        uint16_t type;
        size_t len;

        if (p == NULL)
            break;
        if (p < ring || p + hdr.size > ring + RING_CAP) /* a record must lie in the ring */
            abort();
        if (uccl_gpu_ipc_rec_check(&hdr, &type, &len) != UCCL_OK)
            break; /* the endpoint fails the connection here */
        if (len + sizeof(hdr) != hdr.size || len > IPC_MSG_MAX)
            abort();
        parse_one(type, p + sizeof(hdr), len);
        uccl_spsc_release(&rx, hdr.size);
    }
    return 0;
}

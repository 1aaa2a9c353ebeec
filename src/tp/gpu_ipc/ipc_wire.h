/* The gpu_ipc mailbox records (ring.h carries them): their layouts and the
 * transport's one parser of them (ipc_wire.c). The parser is pure: it
 * checks a record's size against its type, the structure of its segments
 * and every field that needs no state (lengths against segments, known
 * statuses and operations, ranges that do not wrap), and copies what it
 * needs out of the bytes, which the peer may still be writing. What an id,
 * key or range names is the endpoint's to check (xfer.c, mem.c). Built in
 * every build, so that the unit test and the fuzzer run without a GPU. */
#ifndef UCCL_TP_GPU_IPC_IPC_WIRE_H
#define UCCL_TP_GPU_IPC_IPC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "gpu/gpu.h"
#include "tp/common/spsc_ring.h"

#define IPC_MSG_MAX 4096 /* largest payload one record carries */
#define IPC_DONE_SLOTS 64 /* done words per mailbox (msg_rts_t.done_slot, done.c) */

/* Mailbox message types. */
enum {
    IPC_MSG_ALLOC = 1,  /* msg_alloc_t: a device allocation of the sender */
    IPC_MSG_ALLOC_GONE, /* msg_key_t: that allocation is no longer registered */
    IPC_MSG_GRANT_REQ,  /* msg_grant_req_t */
    IPC_MSG_GRANT,      /* msg_grant_t */
    IPC_MSG_REVOKE,     /* msg_key_t: region id */
    IPC_MSG_RTS,        /* msg_rts_t + msg_seg_t[nseg]: a send waiting for its receive */
    IPC_MSG_FIN,        /* msg_fin_t: the receiver is done with an RTS */
    IPC_MSG_TGT_OP,     /* msg_tgt_op_t + msg_seg_t[nseg]: copy to/from my host region */
    IPC_MSG_TGT_DONE,   /* msg_fin_t */
    IPC_MSG_NOTIF,      /* msg_key_t: notification value */
    IPC_MSG_CTS,        /* msg_cts_t + msg_seg_t[nseg]: push that RTS into these buffers */
    IPC_MSG_PUSH_DONE,  /* msg_fin_t: the sender's push for that RTS is done */
};

typedef struct msg_alloc {
    uint64_t key; /* the allocation's base address in the sender */
    uint64_t size;
    uccl_gpu_ipc_handle_t handle;
} msg_alloc_t;

typedef struct msg_key {
    uint64_t key;
} msg_key_t;

typedef struct msg_grant_req {
    uint64_t region_id, addr, len;
} msg_grant_req_t;

typedef struct msg_grant {
    uint64_t region_id;
    int32_t status;
    uint32_t pad;
    uint64_t addr, len; /* the live region */
    msg_alloc_t alloc;  /* the allocation that holds it */
} msg_grant_t;

typedef struct msg_seg {
    uint64_t key, off, len; /* off from the allocation's base */
} msg_seg_t;

typedef struct msg_rts {
    uint64_t seq, tag, len;
    uint64_t msg_seq; /* the connection's message number (req->msg_seq) */
    uint32_t nseg;
    uint32_t done_slot; /* 1 + the word of the sender's mailbox that the receiver's GPU may write once
                         * it has pulled the message, instead of a FIN (done.c); 0: none */
} msg_rts_t;

typedef struct msg_cts {
    uint64_t seq, len; /* the RTS answered and its length */
    uint64_t push_len; /* push bytes [0, push_len); the receiver pulls the rest */
    uint32_t nseg, pad; /* the segments cover [0, push_len) of the receive */
} msg_cts_t;

typedef struct msg_fin {
    uint64_t seq;
    int32_t status;
    uint32_t pad;
    uint64_t bytes;
} msg_fin_t;

typedef struct msg_tgt_op {
    uint64_t seq, region_id, addr, len, notif;
    uint32_t op; /* UCCL_OP_WRITE or UCCL_OP_READ, as the initiator sees it */
    uint32_t has_notif;
    uint32_t nseg, pad;
} msg_tgt_op_t;

/* A record parsed: the fixed part of its type in u, its segments (RTS,
 * CTS, TGT_OP) copied into seg. */
typedef struct ipc_rx_msg {
    uint16_t type;
    union {
        msg_alloc_t alloc;         /* ALLOC */
        msg_key_t key;             /* ALLOC_GONE, REVOKE, NOTIF */
        msg_grant_req_t grant_req; /* GRANT_REQ */
        msg_grant_t grant;         /* GRANT */
        msg_rts_t rts;             /* RTS */
        msg_cts_t cts;             /* CTS */
        msg_fin_t fin;             /* FIN, TGT_DONE, PUSH_DONE */
        msg_tgt_op_t tgt;          /* TGT_OP */
    } u;
    uint32_t nseg;
    msg_seg_t seg[UCCL_IOV_MAX];
} ipc_rx_msg_t;

/* The ring header of a record the peer wrote: UCCL_OK with its type and
 * payload length, else UCCL_ERR_PEER_FAILED (a size under the header or
 * over IPC_MSG_MAX, a type over 16 bits). */
uccl_status_t uccl_gpu_ipc_rec_check(const uccl_spsc_hdr_t *hdr, uint16_t *type, size_t *len);
/* Parse the payload p[0..len) of a record of type into m: UCCL_OK, else
 * UCCL_ERR_PEER_FAILED with *why saying what is wrong. */
uccl_status_t uccl_gpu_ipc_msg_parse(uint16_t type, const void *p, size_t len, ipc_rx_msg_t *m,
                                     const char **why);

#endif

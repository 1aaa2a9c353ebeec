/* The RDMA message protocol shared by transports that offer one-sided writes:
 * eager messages, rendezvous (RTS / CTS / FIN), notified writes, over a small
 * set of transport primitives (uccl_rndv_ops_t), with its own wire format.
 *
 * Protocol. A send of at most `eager` bytes (host memory, or GPU memory the
 * NIC cannot reach, copied through the GPU layer) goes whole in one control
 * message (EAGER) into one of the peer's receive buffers. A larger send, or
 * GPU memory the NIC reads directly, sends RTS {tag, len, send id}; the
 * receiver, once the core matched a receive to it, answers CTS {send id,
 * receive id, segments} naming where to write (the receive's pieces, or a
 * bounce it is staged through); the sender RDMA-writes there and closes the
 * write with immediates that name the receive id (UCCL_RNDV_IMM_RNDV), so
 * the receive completes with the last one. Only a send that fails after its
 * CTS sends FIN {receive id, status}. A receive into memory the NIC cannot
 * reach (GPU memory staged through registered host buffers) answers the RTS
 * with GRANTs instead of a CTS, one per window of the message {send id,
 * receive id, slot, offset, one segment}: up to UCCL_RNDV_MAX_SLOTS windows
 * are out at once; the sender writes each window on one lane and closes it
 * with a chunk immediate naming (receive id, slot); the receiver copies the
 * window into place and grants the slot again further on, and the receive
 * completes when the last window's copy is done. Every EAGER and RTS carries the
 * connection's message number; arrived messages go to the core's (conn, tag)
 * matching (uccl_msg_arrived), unexpected ones are held until a receive takes
 * them (uccl_msg_hold / msg_deliver). A notified write closes with an
 * immediate that carries the value (below 2^30, one part) or names a NOTIFY
 * control message {notify id, value} sent ahead of it.
 *
 * Transport primitives: a control send from one of our send slots into the
 * peer's pre-posted receive buffers (ordered, reliable), the reposting of a
 * receive buffer, an RDMA write of a request's data closed by immediates
 * (uccl_rndv_imm(); a transport that stripes one write over several lanes
 * closes it on every lane that carried data, and the immediate says how many
 * parts to count), and hooks for local memory (registration check, staging
 * of GPU memory the NIC cannot reach, the segments of a receive buffer).
 * A transport may also offer a pull rendezvous (r->pull, ops->read,
 * rndv_pull.c): the RTS names the sender's pieces (RTS_PULL), the receiver
 * reads them and answers FIN; ofi has it behind UCCL_OFI_PULL=1.
 * And a tagged rendezvous (r->tmsg, ops->tmsg_*): the RTS_TMSG {tag, len,
 * message id} goes ahead of the data, which the sender posts at once as one
 * tagged message of the transport's own (its provider's rendezvous: on shm
 * one command and the receiver's CMA read); the receiver, once the core
 * matched a receive to the RTS_TMSG, receives that message (by id) into it.
 * No CTS, no FIN: one control message and the provider's own protocol.
 *
 * Users. verbs (src/tp/verbs) is the first: control messages are SENDs on an
 * RC control QP, writes are WRITE / WRITE_WITH_IMM chains striped over data
 * QPs. A libfabric (ofi) transport is meant to be the second user, not a
 * fourth copy of the protocol:
 *   - ctrl_post = fi_send (FI_MSG) from a registered slot into the peer's
 *     fi_recv buffers, recv_repost = fi_recv; write = fi_writemsg chains, the
 *     last one with FI_REMOTE_CQ_DATA carrying uccl_rndv_imm() (providers
 *     with cq_data_size >= 4; others take the NOTIFY path for every write);
 *     its key goes in its own descriptor slot (UCCL_TP_KEY_OFI, rdesc.c) and
 *     in the CTS segments (8-byte key field).
 *   - Matching stays in the core through this protocol: every message header
 *     reaches uccl_msg_arrived before a receive takes its data, so (conn,
 *     tag) order holds across transports (host memory on shm, GPU memory on
 *     ofi, in one connection). Provider-side FI_TAGGED matching would bypass
 *     that; ofi's direct sends (ofi_direct.c) are the fast path that keeps it:
 *     one provider receive for the next message number, the core deciding.
 *   - Ranking: where both reach a peer over the same NIC, verbs ranks above
 *     ofi (ofi's verbs;ofi_rxm adds a layer for nothing); ofi ranks above tcp
 *     and serves fabrics verbs cannot (EFA, Slingshot/cxi, PSM3): priority
 *     verbs 30 > ofi 20 > tcp 10.
 */
#ifndef UCCL_TP_COMMON_RNDV_H
#define UCCL_TP_COMMON_RNDV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tp_api.h"
#include "util/hmap.h"
#include "util/idmap.h"

/* ---- wire format (all little-endian); versioned by UCCL_RNDV_WIRE_VERSION,
 * which the carrying transport exchanges at connection setup */
#define UCCL_RNDV_WIRE_VERSION 4 /* 2: GRANT windows, chunk immediates; 3: RTS_PULL; 4: RTS_TMSG */

/* Control message types. Header: type(1) pad(3) status(4) a(8) b(8) c(8)
 * seq(8); seq is the connection's message number in EAGER and RTS, else 0. */
enum {
    UCCL_RNDV_MSG_EAGER = 1,  /* a = tag, b = len, payload follows */
    UCCL_RNDV_MSG_RTS = 2,    /* a = tag, b = len, c = send id */
    UCCL_RNDV_MSG_CTS = 3,    /* a = send id, b = recv id, c = nseg, segments follow */
    UCCL_RNDV_MSG_FIN = 4,    /* a = recv id, b = len, status; when a rendezvous send failed, or
                               * with UCCL_OK when its immediates were given up (uccl_rndv_write_close);
                               * after an RTS_PULL: a = send id, the receiver read it (or failed) */
    UCCL_RNDV_MSG_NOTIFY = 5, /* a = notify id, b = value; for values UCCL_RNDV_IMM_NOTIFY_SMALL cannot carry;
                               * c = UCCL_RNDV_NOTIFY_CLOSED: the write's data landed, count no
                               * immediates (uccl_rndv_write_close) */
    UCCL_RNDV_MSG_GRANT = 6,  /* a = send id, b = recv id, c = slot, seq = offset, one segment follows */
    /* an RTS with the sender's pieces: status = nseg (1..UCCL_IOV_MAX), the
     * segments follow; the receiver reads them and answers FIN, or answers
     * as to an RTS (CTS, GRANT) */
    UCCL_RNDV_MSG_RTS_PULL = 7,
    /* an RTS whose data follows as one tagged message of the transport's
     * own: a = tag, b = len, c = message id (below 2^31) */
    UCCL_RNDV_MSG_RTS_TMSG = 8,
};
#define UCCL_RNDV_TMSG_ID_MASK ((1ull << 31) - 1)
#define UCCL_RNDV_NOTIFY_CLOSED 1
#define UCCL_RNDV_HDR_SIZE 40
#define UCCL_RNDV_SEG_SIZE 24 /* addr(8) key(8) len(8); a 4-byte key is zero-extended */

/* Immediate data (32 bits) closing a notified write or a rendezvous write:
 *   bits 31..30 kind, then for UCCL_RNDV_IMM_NOTIFY_SMALL a value below 2^30
 *   (one part: the common case, one write and nothing else), else
 *   bits 29..25 parts - 1, bits 24..0 the notify id or the receive id.
 * A write striped over several lanes ends with one immediate on every lane
 * that carried some of it (the lanes are ordered each, not among them): the
 * target acts once it has counted all the parts. */
enum {
    UCCL_RNDV_IMM_CHUNK = 0,        /* granted window `slot` (bits 29..25) of a receive id landed */
    UCCL_RNDV_IMM_NOTIFY_SMALL = 1, /* value in the immediate, one part */
    UCCL_RNDV_IMM_NOTIFY = 2,       /* value in a NOTIFY control message */
    UCCL_RNDV_IMM_RNDV = 3,         /* rendezvous data for a receive id */
};
#define UCCL_RNDV_IMM_SMALL_MAX (1u << 30)
#define UCCL_RNDV_IMM_ID_MASK ((1u << 25) - 1)
#define UCCL_RNDV_MAX_PARTS 32
#define UCCL_RNDV_MAX_SLOTS 32 /* windows a granted receive has out at once */

/* ---- requests: req->tp_data slots the protocol owns */
enum {
    UCCL_RNDV_RD_STATE = 0, /* UCCL_RNDV_RS_* */
    UCCL_RNDV_RD_ERR,       /* first error (uccl_status_t as int64), 0 = none */
    UCCL_RNDV_RD_ID,        /* our id (rendezvous send / receive; a notified write's notify
                             * id | UCCL_RNDV_NOTIF_ID once it has one) */
    UCCL_RNDV_RD_PEER_ID,   /* the peer's receive id (rendezvous send) */
    UCCL_RNDV_RD_TP,        /* first slot free for the transport's data path */
    /* a receive matched to an RTS never reaches the data path; it uses: */
    UCCL_RNDV_RD_MSG_LEN = UCCL_RNDV_RD_TP, /* the message length */
    UCCL_RNDV_RD_PARTS_GOT,                 /* immediates counted */
};
#define UCCL_RNDV_NOTIF_ID (1ull << 62)
/* A receive on granted windows keeps the send id in UCCL_RNDV_RD_PEER_ID. */

enum {
    UCCL_RNDV_RS_DATA = 1,      /* in the transport's write (or read) path */
    UCCL_RNDV_RS_WAIT_CTS,      /* rendezvous send waiting for the receiver's buffer */
    UCCL_RNDV_RS_RECV_WAIT_FIN, /* receive matched to an RTS, data on its way */
    UCCL_RNDV_RS_CTRL,          /* waiting for the completion of its control message */
    UCCL_RNDV_RS_TMSG,          /* its data in the transport's tagged message (RTS_TMSG) */
};

/* A remote piece a rendezvous write targets (from the CTS). */
typedef struct uccl_rndv_seg {
    uint64_t addr;
    uint64_t key;
    uint64_t len;
} uccl_rndv_seg_t;

/* ---- the wire format's encoders and parsers (rndv_wire.c: pure, built
 * whatever transports are; the fuzz harness tests/fuzz/fuzz_notif.c runs
 * them) */
/* A control message from the peer, checked for its structure only: type
 * known, an EAGER's length all of the rest, a CTS's segments present, a
 * GRANT's slot in range and its segment present. */
typedef struct uccl_rndv_ctrl {
    int type;               /* UCCL_RNDV_MSG_* */
    uccl_status_t status;
    uint64_t a, b, c, seq;  /* as the header's comment says per type */
    const uint8_t *payload; /* EAGER: b bytes, in the buffer parsed */
    int nseg;               /* CTS: c segments; GRANT: 1; RTS_PULL: status */
    uccl_rndv_seg_t segs[UCCL_IOV_MAX];
} uccl_rndv_ctrl_t;
/* UCCL_OK or UCCL_ERR_TRANSPORT (malformed); p holds len bytes. */
uccl_status_t uccl_rndv_ctrl_parse(const uint8_t *p, size_t len, uccl_rndv_ctrl_t *m);
/* The UCCL_RNDV_HDR_SIZE bytes of a control message header. */
void uccl_rndv_hdr_put(uint8_t *p, int type, uccl_status_t status, uint64_t a, uint64_t b,
                       uint64_t c, uint64_t seq);

/* An immediate's fields (every 32-bit value is one of the four kinds). */
typedef struct uccl_rndv_imm_fields {
    uint32_t kind;  /* UCCL_RNDV_IMM_* */
    uint32_t id;    /* notify id or receive id (not NOTIFY_SMALL) */
    int nparts;     /* 1..UCCL_RNDV_MAX_PARTS; CHUNK: the slot is nparts - 1 */
    uint32_t value; /* NOTIFY_SMALL: the value, below UCCL_RNDV_IMM_SMALL_MAX */
} uccl_rndv_imm_fields_t;
void uccl_rndv_imm_parse(uint32_t imm, uccl_rndv_imm_fields_t *f);
/* kind, parts - 1 (or a CHUNK's slot), id: the immediate. */
uint32_t uccl_rndv_imm_pack(uint32_t kind, uint32_t parts, uint32_t id);

typedef struct uccl_rndv uccl_rndv_t;

/* The transport primitives. Every call is made under the engine lock from
 * the transport's own post/progress paths. */
typedef struct uccl_rndv_ops {
    /* -- control channel */
    /* A send credit is free (room on the send queue for one message). */
    bool (*ctrl_room)(uccl_rndv_t *r);
    /* Send len bytes of send slot `slot` (uccl_rndv_send_buf) into the
     * peer's next receive buffer; report completion with uccl_rndv_ctrl_sent.
     * A failure is the transport's to log and to fail the connection with. */
    void (*ctrl_post)(uccl_rndv_t *r, int slot, size_t len);
    /* Post receive buffer `index` (uccl_rndv_recv_buf) again. */
    uccl_status_t (*recv_repost)(uccl_rndv_t *r, int index);
    /* -- RDMA write with immediate */
    /* Write req's data to segs[0..nseg) (nseg 0: to req->remote) and close
     * it with uccl_rndv_imm() (uccl_rndv_needs_imm), then call
     * uccl_rndv_write_done. An error now leaves req with the caller. */
    uccl_status_t (*write)(uccl_rndv_t *r, uccl_req_t *req, const uccl_rndv_seg_t *segs,
                           int nseg);
    /* Optional (pull rendezvous, rndv_pull.c): read receive req's req->len
     * bytes from the sender's segs into its pieces, then call
     * uccl_rndv_write_done. An error now leaves req with the caller. */
    uccl_status_t (*read)(uccl_rndv_t *r, uccl_req_t *req, const uccl_rndv_seg_t *segs,
                          int nseg);
    /* A control message sent on behalf of a write in progress completed
     * (the NOTIFY counted by uccl_rndv_imm_begin). */
    void (*write_part_done)(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st);
    /* -- local memory */
    /* Every piece registered with the transport; *staged: some are GPU
     * memory the NIC cannot reach (moved by copies through the GPU layer). */
    uccl_status_t (*mem_check)(uccl_rndv_t *r, const uccl_req_t *req, bool *staged);
    /* A NIC-reachable bounce for len bytes of staged req (gather: copy its
     * data in now); mem_unstage gives it back without completing req. */
    uccl_status_t (*mem_stage)(uccl_rndv_t *r, uccl_req_t *req, size_t len, bool gather);
    void (*mem_unstage)(uccl_rndv_t *r, uccl_req_t *req);
    /* Copy between req's pieces (GPU ones through the GPU layer) and flat;
     * NULL: uccl_rndv_iov_copy (rndv_stage.h). */
    uccl_status_t (*mem_copy)(uccl_rndv_t *r, uccl_req_t *req, void *flat, size_t len,
                              bool to_iov);
    /* Where the peer may write len bytes of receive req (its bounce, or its
     * pieces with their keys); returns the number of segments. */
    int (*mem_segs)(uccl_rndv_t *r, const uccl_req_t *req, size_t len, uccl_rndv_seg_t *segs);
    /* Release what the transport holds for req (staged data lands in its
     * pieces here), unlink req->tp_link, and complete req. */
    void (*finish)(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st, size_t bytes);
    /* -- granted windows (optional; a transport without them stages a
     * receive through mem_stage/mem_segs: one target for the message) */
    /* Staged receive req (its id and state set) takes len bytes through
     * windows: grant the first ones (uccl_rndv_grant). */
    uccl_status_t (*sink_start)(uccl_rndv_t *r, uccl_req_t *req, size_t len);
    /* Window `slot` of receive req landed (its chunk immediate came). */
    void (*sink_landed)(uccl_rndv_t *r, uccl_req_t *req, int slot);
    /* Sender: the receiver granted window `slot` at byte off of send req
     * (first: the first grant; req leaves the wait for a CTS and starts its
     * writes, each window closed by uccl_rndv_imm_chunk()). */
    uccl_status_t (*grant)(uccl_rndv_t *r, uccl_req_t *req, bool first, int slot, uint64_t off,
                           const uccl_rndv_seg_t *seg);
    /* -- tagged rendezvous (optional, r->tmsg; RTS_TMSG) */
    /* Can send req (host memory, above eager) go as one tagged message? */
    bool (*tmsg_ok)(uccl_rndv_t *r, const uccl_req_t *req);
    /* Send req's data as the tagged message `id` (its RTS_TMSG is queued
     * ahead of it) and finish req once it completed; a failure is the
     * transport's to fail the connection with (the receiver waits for it). */
    void (*tmsg_send)(uccl_rndv_t *r, uccl_req_t *req, uint64_t id);
    /* Receive req matched an RTS_TMSG of len bytes: receive the peer's
     * tagged message `id` into it (its pieces, or a bounce copied into them)
     * and finish req; a failure as for tmsg_send. */
    void (*tmsg_recv)(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t id);
} uccl_rndv_ops_t;

/* The protocol state of one endpoint; the transport embeds it. Control
 * buffers: rx_depth receive buffers, then tx_depth send slots, slot_size
 * bytes each, in memory the transport allocated and registered. */
struct uccl_rndv {
    const uccl_rndv_ops_t *ops;
    uccl_tp_ep_t *ep; /* the transport endpoint (conn, owner of held messages) */
    uint8_t *bufs;
    size_t slot_size, eager;
    int rx_depth, tx_depth;
    int *free_slots;
    int nfree;
    uccl_req_t **slot_req;    /* request completed by the send of that slot */
    uccl_list_t ctrl_pending; /* messages waiting for a slot or a credit */
    uccl_list_t rndv_wait;    /* rendezvous sends waiting for CTS */
    uccl_list_t recv_wait_fin;
    uccl_list_t unexpected;   /* messages held by the core's matching */
    uccl_list_t notif_wait;   /* notified writes not all landed yet */
    uccl_hmap_t notif_ids;    /* the same by the peer's notify id */
    /* our ids of rendezvous sends waiting for their CTS and of receives
     * waiting for their data (UCCL_RNDV_RD_ID): what CTS, FIN and the
     * immediates name, found without a scan; UCCL_RNDV_ID_BITS wide in
     * control messages, of which the immediate carries the low 25 */
    uccl_idmap_t ids;
    uint64_t next_notif_id;
    /* sends above eager (host memory) go as RTS_PULL: the receiver reads
     * them (the transport sets it; needs ops->read) */
    bool pull;
    /* sends above eager (host memory that ops->tmsg_ok takes) go as
     * RTS_TMSG and the transport's tagged message (the transport sets it) */
    bool tmsg;
    uint64_t next_tmsg_id;
};
/* An id's slot comes back every 2^17 or so ids at the least: its 32-bit
 * generation keeps a late FIN (or CTS) for the slot's old use from naming
 * the new one (8 bits of it, the most the immediate's 25 can carry, came
 * round after 64 * 255 rendezvous). */
#define UCCL_RNDV_ID_BITS (UCCL_RNDV_ID_INDEX_BITS + 32)
#define UCCL_RNDV_ID_INDEX_BITS 17 /* up to 131072 in flight per endpoint */

typedef struct uccl_rndv_params {
    uint8_t *bufs; /* (rx_depth + tx_depth) * uccl_rndv_slot_size(eager) bytes */
    size_t eager;  /* largest eager payload */
    int rx_depth, tx_depth;
} uccl_rndv_params_t;

/* Size of one control buffer for that eager limit (a CTS of UCCL_IOV_MAX
 * segments fits too), a multiple of 64. */
size_t uccl_rndv_slot_size(size_t eager);
uccl_status_t uccl_rndv_init(uccl_rndv_t *r, const uccl_rndv_ops_t *ops, uccl_tp_ep_t *ep,
                             const uccl_rndv_params_t *params);
/* Finish every request the protocol holds (with its own error, else
 * reason), free held messages and queued control messages. Call it first
 * in the endpoint's teardown, before the transport fails its own lists. */
void uccl_rndv_release(uccl_rndv_t *r, uccl_status_t reason);
/* Finish every request on list (linked by tp_link; the transport's own
 * lists) through ops->finish, with its own error, else reason. */
void uccl_rndv_fail_reqs(uccl_rndv_t *r, uccl_list_t *list, uccl_status_t reason);
void uccl_rndv_fini(uccl_rndv_t *r);

static inline uint8_t *uccl_rndv_recv_buf(const uccl_rndv_t *r, int index)
{
    return r->bufs + (size_t)index * r->slot_size;
}
static inline uint8_t *uccl_rndv_send_buf(const uccl_rndv_t *r, int slot)
{
    return uccl_rndv_recv_buf(r, r->rx_depth + slot);
}

/* ---- the transport's entry points into the protocol */
uccl_status_t uccl_rndv_send(uccl_rndv_t *r, uccl_req_t *req);              /* ops->post_send */
void uccl_rndv_deliver(uccl_rndv_t *r, uccl_msg_t *msg, uccl_req_t *req);   /* ops->msg_deliver */
void uccl_rndv_ctrl_recv(uccl_rndv_t *r, int index, size_t len); /* a receive buffer filled */
void uccl_rndv_ctrl_sent(uccl_rndv_t *r, int slot, uccl_status_t st); /* a control send done */
void uccl_rndv_ctrl_flush(uccl_rndv_t *r); /* send queued control messages (progress) */
void uccl_rndv_imm_arrived(uccl_rndv_t *r, uint32_t imm);
/* A whole message numbered seq arrived outside the control channel (the
 * transport's own direct path), its len bytes at data: into the receive
 * the core has for it (copied, GPU pieces through ops->mem_copy), else held
 * as an EAGER is (copied). */
void uccl_rndv_payload_arrived(uccl_rndv_t *r, uint64_t seq, uint64_t tag, const void *data,
                               uint64_t len);
/* All of req's writes completed (or failed: uccl_rndv_req_error first). */
void uccl_rndv_write_done(uccl_rndv_t *r, uccl_req_t *req);
/* All of req's data landed, but its immediates were given up (a lane failed
 * under them and the data went again without them): a control message tells
 * the peer instead (a rendezvous send: FIN with UCCL_OK and the length; a
 * notified write: a closing NOTIFY); req completes once it is sent. */
void uccl_rndv_write_close(uccl_rndv_t *r, uccl_req_t *req);

/* Building the writes: does req close with immediates; before its last
 * chunk, split over nparts lanes, is built: send what its immediate cannot
 * carry (*extra_parts: control messages now counted as parts of req, whose
 * completion comes to ops->write_part_done); the immediate of each part. */
bool uccl_rndv_needs_imm(const uccl_req_t *req);
/* The immediate closing granted window `slot` of a send. */
uint32_t uccl_rndv_imm_chunk(const uccl_req_t *req, int slot);
/* Receiver, granted windows: offer window slot (seg, at byte off of the
 * message) to the sender; sink_done: every window is in place (or st
 * failed the receive): complete it. Sender: a send that ran on granted
 * windows is finished (its id dies). */
uccl_status_t uccl_rndv_grant(uccl_rndv_t *r, uccl_req_t *req, int slot, uint64_t off,
                              const uccl_rndv_seg_t *seg);
void uccl_rndv_sink_done(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st);
void uccl_rndv_forget(uccl_rndv_t *r, uccl_req_t *req);
uccl_status_t uccl_rndv_imm_begin(uccl_rndv_t *r, uccl_req_t *req, int nparts, int *extra_parts);
uint32_t uccl_rndv_imm(const uccl_req_t *req, int nparts);

/* ---- internal to src/tp/common (rndv_imm.c: the target side of immediates, granted windows) */
/* rndv_ctrl.c: room for one control message (a free send slot when nothing
 * waits before it, else a queued copy: order on the control channel is the
 * matching order; NULL: out of memory); commit it with its length, or give
 * the room back; at teardown fail what is in flight or queued. */
typedef struct uccl_rndv_out uccl_rndv_out_t;
uint8_t *uccl_rndv_ctrl_begin(uccl_rndv_t *r, int *slot, uccl_rndv_out_t **out);
void uccl_rndv_ctrl_commit(uccl_rndv_t *r, int slot, uccl_rndv_out_t *out, size_t len,
                           uccl_req_t *req);
void uccl_rndv_ctrl_abort(uccl_rndv_t *r, int slot, uccl_rndv_out_t *out);
void uccl_rndv_ctrl_release(uccl_rndv_t *r, uccl_status_t reason);
uccl_status_t uccl_rndv_ctrl_send(uccl_rndv_t *r, int type, uccl_status_t status, uint64_t a,
                                  uint64_t b, uint64_t c, uccl_req_t *req);
/* rndv_pull.c: receive req matched an RTS_PULL: true when it reads the
 * message (else the caller answers with a CTS); its reads done; a FIN
 * for send id (true: it was a pulled send, now finished). */
bool uccl_rndv_pull_start(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t send_id,
                          const uccl_rndv_seg_t *segs, int nseg);
void uccl_rndv_pull_done(uccl_rndv_t *r, uccl_req_t *req);
bool uccl_rndv_pull_fin(uccl_rndv_t *r, uint64_t send_id, uint64_t len, uccl_status_t st);
uccl_req_t *uccl_rndv_id_find(uccl_rndv_t *r, uint64_t id, uint64_t state, bool take);
/* The receive in state that the low 25 bits of its id (an immediate's) name. */
uccl_req_t *uccl_rndv_imm_find(uccl_rndv_t *r, uint32_t id, uint64_t state);
/* rndv.c: receive req, matched to send id send_id's RTS, fails with st; a
 * FIN tells the sender (its send fails too) */
void uccl_rndv_recv_refuse(uccl_rndv_t *r, uccl_req_t *req, uint64_t send_id, uccl_status_t st);
void uccl_rndv_notif_value(uccl_rndv_t *r, uint64_t id, uint64_t value, bool closed);
void uccl_rndv_notif_release(uccl_rndv_t *r);
void uccl_rndv_grant_start(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t send_id);
void uccl_rndv_grant_arrived(uccl_rndv_t *r, uint64_t send_id, uint64_t recv_id, uint64_t slot,
                             uint64_t off, const uccl_rndv_seg_t *seg);

static inline uccl_status_t uccl_rndv_req_err(const uccl_req_t *req)
{
    return (uccl_status_t)(int64_t)req->tp_data[UCCL_RNDV_RD_ERR];
}

/* Keep the first error of req. */
static inline void uccl_rndv_req_error(uccl_req_t *req, uccl_status_t status)
{
    if (req->tp_data[UCCL_RNDV_RD_ERR] == 0)
        req->tp_data[UCCL_RNDV_RD_ERR] = (uint64_t)(int64_t)status;
}

#endif

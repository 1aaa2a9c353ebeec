/* Private definitions of the shm transport: configuration, the transport and
 * endpoint objects, the wire packets that travel through the rings. */
#ifndef UCCL_TP_SHM_H
#define UCCL_TP_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/tp_api.h"
#include "util/idmap.h"
#include "tp/common/spsc_ring.h"
#include "tp/staging.h"

/* Packets travel in the shared SPSC ring (tp/common/spsc_ring.h), 64-byte
 * aligned: a packet per cache line at least, payloads stay aligned. */
#define SHM_RING_ALIGN 64
typedef uccl_spsc_hdr_t shm_pkt_hdr_t; /* {type, size}; size counts the header */

/* ------------------------------------------------------------------ config */

typedef enum { SHM_CMA_OFF = 0, SHM_CMA_ON = 1, SHM_CMA_AUTO = 2 } shm_cma_mode_t;

typedef struct shm_config {
    char cma[UCCL_CFG_STRING_MAX];
    int cma_ptracer;
    size_t ring_size;
    size_t chunk;
    size_t eager_threshold;
    size_t stage_chunk;
    int stage_depth;
    size_t split_min;
    int split_pct;
    size_t cma_chunk;
    size_t progress_bytes;
    size_t map_max;
    char cma_helper[UCCL_CFG_STRING_MAX];
    size_t cma_helper_min;
} shm_config_t;

/* ------------------------------------------------------------------ wire */

enum {
    SHM_PKT_EAGER = 2, /* whole message: tag, len, payload */
    SHM_PKT_RTS,       /* rendezvous offer: tag, len, sender id, sender iov */
    SHM_PKT_CTS,       /* no CMA here: stream the data to me */
    SHM_PKT_DATA,      /* a chunk of a streamed message or of a read's data */
    SHM_PKT_FIN,       /* a pulled rendezvous send or an RMA finished (status) */
    SHM_PKT_RMA,       /* write/read request: remote range + initiator iov */
    SHM_PKT_WDATA,     /* a chunk of a streamed write, checked by the target */
    SHM_PKT_OFFER,     /* split CMA: copy your part [split, len) to/from my iov */
    SHM_PKT_DONE,      /* split CMA: the offered part is copied (status) */
};

/* RTS and RMA flags (their reserved word): the sender's pieces include GPU
 * memory, so the peer must not pull or push them with CMA. */
#define SHM_FLAG_GPU 1u
/* RTS: the sender's one piece lies in its memory of uccl_mem_alloc; one
 * more wire iov follows it (counted in iovcnt): {the allocation's base,
 * memfd number | allocation id << 32}, so that the receiver can map the
 * file and copy with memcpy instead of CMA (shm_map.c). */
#define SHM_FLAG_MAPPED 2u

#define SHM_WIRE_MAGIC 0x55434353484d3031ull /* "UCCSHM01" */

typedef struct shm_wire_iov {
    uint64_t addr;
    uint64_t len;
} shm_wire_iov_t;

typedef struct shm_pkt_eager {
    shm_pkt_hdr_t hdr;
    uint64_t tag;
    uint64_t len;
    uint64_t seq; /* the connection's message number (req->msg_seq) */
} shm_pkt_eager_t;

typedef struct shm_pkt_rts {
    shm_pkt_hdr_t hdr;
    uint64_t tag;
    uint64_t len;
    uint64_t seq;
    uint64_t id;
    uint32_t iovcnt;
    uint32_t reserved;
    /* iovcnt shm_wire_iov_t follow */
} shm_pkt_rts_t;

/* CTS and FIN. */
typedef struct shm_pkt_ctl {
    shm_pkt_hdr_t hdr;
    uint64_t id;     /* the peer's request id */
    uint64_t rid;    /* CTS of a send: the receiver's id for the DATA chunks */
    int32_t status;  /* FIN */
    uint32_t reserved;
} shm_pkt_ctl_t;

/* DATA and WDATA headers take one cache line, so that with chunks of a
 * multiple of 64 bytes the payload in the ring keeps the source's alignment:
 * memcpy between buffers misaligned to each other is markedly slower. */
/* The receiver (send/recv) or target (write/read) of a large CMA transfer
 * copies [0, split) itself and offers the peer the rest, so that both
 * processes copy at once; iov covers exactly [split, len) on its side. */
typedef struct shm_pkt_offer {
    shm_pkt_hdr_t hdr;
    uint64_t id;    /* the peer's request id */
    uint64_t rid;   /* our id for the transfer, echoed in DONE */
    uint64_t split;
    uint32_t iovcnt;
    uint32_t reserved;
    /* iovcnt shm_wire_iov_t follow */
} shm_pkt_offer_t;

typedef struct shm_pkt_data {
    shm_pkt_hdr_t hdr;
    uint64_t id;
    uint64_t off;
    uint64_t len;
    uint8_t pad[32];
} shm_pkt_data_t;

typedef struct shm_pkt_rma {
    shm_pkt_hdr_t hdr;
    uint32_t is_read;
    uint32_t iovcnt;
    uint64_t id;
    uint64_t region_id;
    uint64_t addr;
    uint64_t len;
    uint64_t notif;
    uint32_t has_notif;
    uint32_t reserved;
    /* iovcnt shm_wire_iov_t follow */
} shm_pkt_rma_t;

typedef struct shm_pkt_wdata {
    shm_pkt_hdr_t hdr;
    uint64_t id;
    uint64_t region_id;
    uint64_t addr; /* target address of this chunk */
    uint64_t len;
    uint64_t notif;
    uint32_t has_notif;
    uint32_t last;
    uint8_t pad[8];
} shm_pkt_wdata_t;

_Static_assert(sizeof(shm_pkt_data_t) == 64 && sizeof(shm_pkt_wdata_t) == 64,
               "streamed payloads start on a cache line");

/* The pieces that follow an RTS, RMA or OFFER header in the ring. */
#define SHM_PKT_IOV(pkt) ((shm_wire_iov_t *)((pkt) + 1))

/* A packet read from the peer's ring, checked for its structure only (no
 * state consulted): the fixed part of its type, its pieces, its payload. */
typedef struct shm_rx_pkt {
    union {
        shm_pkt_hdr_t hdr; /* = the header uccl_spsc_peek checked */
        shm_pkt_eager_t eager;
        shm_pkt_rts_t rts;
        shm_pkt_ctl_t ctl; /* CTS, FIN, DONE */
        shm_pkt_data_t data;
        shm_pkt_rma_t rma;
        shm_pkt_wdata_t wdata;
        shm_pkt_offer_t offer;
    } u;
    shm_wire_iov_t iov[UCCL_IOV_MAX]; /* RTS, RMA, OFFER: u.*.iovcnt of them, copied */
    const uint8_t *payload;           /* EAGER, DATA, WDATA: payload_len bytes in the ring */
    size_t payload_len;
} shm_rx_pkt_t;

/* Segment: header, ring initiator->acceptor, ring acceptor->initiator.
 * Index 0 = initiator, 1 = acceptor. cma_on: the side decided at connect,
 * before it put anything in its ring, that it copies with CMA, so that it
 * can take the part of a split transfer offered to it (each side probes
 * the other: one may have CMA and the other not, e.g. UCCL_SHM_CMA=0 on
 * one side only). The close fence: a side that closes
 * sets its closed flag, then waits while the other's cma_busy is set; a
 * side sets its cma_busy around every CMA call and makes none once the
 * other's closed is set (sequentially consistent: one of the two sees the
 * other's store), so that once a close returns no copy touches its memory. */
typedef struct shm_seg_hdr {
    uint64_t magic;
    uint64_t ring_size;
    _Atomic uint32_t closed[2];
    _Atomic uint32_t cma_busy[2];
    _Atomic uint32_t cma_on[2];
    char pad[24];
} shm_seg_hdr_t;

_Static_assert(sizeof(shm_seg_hdr_t) == 64, "the rings start on a cache line");

/* ------------------------------------------------------------------ objects */

/* A split transfer on the receiver's or target's side: its own part is
 * copied; it waits for the peer's DONE to complete and send the FIN. */
typedef struct shm_split {
    uccl_list_t link;
    uint64_t rid;       /* our id (OFFER, DONE) */
    uint64_t peer_id;   /* the peer's request id (FIN) */
    uccl_req_t *req;    /* the receive, or NULL: target of a write/read */
    uint64_t region_id; /* target: our region */
    uccl_region_t *held; /* target: that region, held until the peer's DONE */
    uint64_t len;
    uccl_status_t st;   /* of our own part */
    uccl_status_t peer_st; /* of the peer's part (its DONE) */
    bool own_done, peer_done; /* complete when both are */
    bool is_read;
    bool has_notif;
    uint64_t notif;
} shm_split_t;

typedef struct shm_tp {
    uccl_tp_t base;
    shm_config_t cfg;
    shm_cma_mode_t cma_mode;
    size_t chunk;          /* bytes of one streamed packet, header included */
    uccl_list_t eps;
    volatile uint64_t probe; /* peers read it with CMA to see if CMA is allowed */
    uccl_stage_t *stage;   /* GPU memory through pinned buffers; NULL without a GPU */
    struct shm_map *kept;  /* peers' memory mapped through connections that failed:
                            * pointers stay valid until the engine closes (shm_map.c) */
    int nkept;
    int cma_helper_mode;   /* UCCL_SHM_CMA_HELPER: -1 auto, 0 off, 1 on */
    long online_cpus;
    struct shm_cma_helper *cma_helper; /* shm_cma_helper.c; NULL until the first split */
    uint64_t cma_helper_pieces;        /* job halves it took (logged at close) */
} shm_tp_t;

/* A message that arrived before its receive (EAGER: payload follows;
 * RTS: the sender's iov follows). */
/* A message held by the core's matching until a receive takes it. */
typedef struct shm_unexp {
    uccl_list_t link;      /* ep->unexp, to free at teardown */
    uccl_msg_t msg;        /* the core's view: number, tag, length */
    uint32_t type;
    uint64_t id;
    uint32_t iovcnt;
    uint32_t flags;        /* RTS: SHM_FLAG_* */
    _Alignas(8) uint8_t data[];
} shm_unexp_t;

/* A control packet that did not fit in the ring yet. */
typedef struct shm_ctrl {
    uccl_list_t link;
    shm_pkt_ctl_t pkt;
} shm_ctrl_t;

/* Data pushed through the ring chunk by chunk when CMA cannot be used:
 * from a local request (DATA of a send, WDATA of a write) or from target
 * memory (DATA answering a read, re-checked against the region each chunk). */
typedef struct shm_stream {
    uccl_list_t link;
    uint32_t type;       /* SHM_PKT_DATA or SHM_PKT_WDATA */
    uint64_t id;         /* the peer's id for it */
    uccl_req_t *req;     /* source request, or NULL: source is flat */
    uint64_t flat;       /* target memory of a read */
    uint64_t region_id;  /* WDATA: target region; read: our region */
    uint64_t raddr;      /* WDATA: target address of byte 0 */
    uint64_t len, off;
    bool started;
    bool staged;         /* source is GPU memory: read through src */
    uccl_stage_src_t src;
} shm_stream_t;

/* What to do when a CMA copy ends. */
typedef enum {
    SHM_CMA_RECV,  /* a matched rendezvous receive: complete it, FIN to the sender */
    SHM_CMA_RMA,   /* target of a write/read: notify (write), FIN to the initiator */
    SHM_CMA_SPLIT, /* our part of a split transfer: uccl_shm_split_own_done */
    SHM_CMA_OFFER, /* the part a peer offered us: DONE to it */
} shm_cma_kind_t;

/* A CMA copy in progress: each progress call copies a bounded share of the
 * endpoints' copies (UCCL_SHM_PROGRESS_BYTES), oldest first, so that no call
 * runs a large copy to its end and waits keep their deadlines. */
typedef struct shm_cma_job {
    uccl_list_t link;     /* ep->cma_jobs */
    shm_cma_kind_t kind;
    bool write;           /* to the peer (else from it) */
    size_t len, done;     /* done counts the bytes progress copied, of own */
    size_t own;           /* progress copies [0, own), the CMA helper the rest */
    int hslot;            /* the helper's slot for [own, len), -1 = none */
    int lcnt, rcnt;       /* what is left of the pieces, trimmed to own */
    struct iovec local[UCCL_IOV_MAX];
    struct iovec remote[UCCL_IOV_MAX];
    uccl_req_t *req;      /* RECV */
    uint64_t region_id;   /* target of a write/read: [region_addr, +len) of this */
    uint64_t region_addr; /* region is checked before every call (0 = not a target) */
    uccl_region_t *held;  /* that region, held while the CMA helper has a piece */
    uint64_t peer_id;     /* RECV, RMA: the FIN's id; OFFER: the DONE's */
    shm_split_t *split;   /* SPLIT */
    bool has_notif;       /* RMA write */
    uint64_t notif;
} shm_cma_job_t;

/* Work one progress call may still do with CMA. */
typedef struct shm_cma_budget {
    size_t bytes;
    int calls;
} shm_cma_budget_t;

/* A peer's memfd mapped here (shm_map.c), and which of the peer's regions
 * lie in which mapping. */
typedef struct shm_map {
    uint64_t base, size; /* the peer's mapping of the file */
    void *local;         /* ours */
    uint64_t ino, dev;   /* the file */
    uint64_t rts_key;    /* SHM_FLAG_MAPPED key that named it, 0 = none yet */
} shm_map_t;

typedef struct shm_map_region {
    uint64_t region_id;
    int map;
} shm_map_region_t;

typedef struct shm_ep {
    uccl_tp_ep_t base;
    shm_tp_t *tp;
    uccl_list_t link;      /* tp->eps */
    int peer_pid;
    bool is_initiator;
    bool cma;              /* we may read/write the peer's memory */
    bool connected;
    char seg_name[64];
    bool seg_named;        /* still has a name in /dev/shm */
    void *seg;
    size_t seg_len;
    uccl_spsc_t tx, rx;
    uint64_t peer_probe_addr, peer_probe_value;
    uccl_idmap_t split_ids; /* shm_split_t by its rid, until the peer's DONE */
    uccl_idmap_t ids;      /* SHM_REQ_ID -> request in txq, waiting or recv_active */
    uccl_list_t recv_active; /* matched receives waiting for streamed chunks */
    uccl_list_t unexp;     /* shm_unexp_t held by the core's matching */
    uccl_list_t txq;       /* sends and RMA requests not in the ring yet */
    uccl_list_t waiting;   /* in the ring, waiting for CTS/FIN/data */
    uccl_list_t ctrlq;     /* shm_ctrl_t */
    uccl_list_t streams;   /* shm_stream_t */
    uccl_list_t splits;    /* shm_split_t */
    uccl_list_t cma_jobs;  /* shm_cma_job_t, oldest first */
    uccl_list_t cma_spare; /* finished jobs kept for the next (a job is ~2 KiB: malloc's slow path) */
    int ncma_spare;
    int pidfd;             /* the peer's pidfd (shm_map.c), -1 = none yet */
    shm_map_t *maps;       /* the peer's memory mapped here */
    int nmaps, capmaps;
    bool map_failed;       /* mapping a sender's piece failed: CMA from now on */
    shm_map_region_t *regions;
    int nregions, capregions;
} shm_ep_t;

/* request scratch: tp_data[SHM_REQ_ID] is our id for it (in ep->ids),
 * [SHM_REQ_MSGLEN] the matched message's length (streamed receives),
 * [SHM_REQ_WHERE] which of the endpoint's lists holds it (SHM_AT_*) */
enum { SHM_REQ_ID = 0, SHM_REQ_MSGLEN = 1, SHM_REQ_WHERE = 2 };
enum { SHM_AT_NONE = 0, SHM_AT_TXQ, SHM_AT_WAITING, SHM_AT_RECV_ACTIVE };

extern const uccl_cfg_table_t uccl_shm_config_table;

/* shm_proto.c: posting and the send side */
uccl_status_t uccl_shm_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_shm_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
uccl_status_t uccl_shm_post_rma(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_shm_ctrl_send(shm_ep_t *ep, uint32_t type, uint64_t id, uint64_t rid, uccl_status_t status);
int uccl_shm_tx_progress(shm_ep_t *ep);
void uccl_shm_deliver(shm_ep_t *ep, uccl_req_t *req, uint32_t type, uint64_t len, uint64_t id,
                 const void *data, uint32_t iovcnt, uint32_t flags);
/* Copy len bytes into a receive or read (staged when it has GPU pieces);
 * complete it with total bytes when last. */
void uccl_shm_req_fill(shm_ep_t *ep, uccl_req_t *req, size_t off, const void *src, size_t len,
                  bool last, size_t total);
void uccl_shm_stream_free(shm_stream_t *s);
uccl_req_t *uccl_shm_find_req(shm_ep_t *ep, int where, uint64_t id);
uccl_status_t uccl_shm_req_track(shm_ep_t *ep, uccl_req_t *req);
void uccl_shm_req_at(shm_ep_t *ep, uccl_req_t *req, int where);
void uccl_shm_req_untrack(shm_ep_t *ep, uccl_req_t *req);

/* shm_wire.c: the parser of packets from the peer (pure: the fuzz harness
 * tests/fuzz/fuzz_shm_rx.c runs it). p holds hdr->size bytes (hdr as
 * uccl_spsc_peek gave it); UCCL_OK or UCCL_ERR_TRANSPORT (malformed). */
uccl_status_t uccl_shm_pkt_parse(const uint8_t *p, const shm_pkt_hdr_t *hdr, shm_rx_pkt_t *pkt);
const char *uccl_shm_pkt_name(uint32_t type);

/* shm_rx.c: the receive side of the ring */
int uccl_shm_rx_progress(shm_ep_t *ep);

/* shm_cma.c: single copy between processes */
/* Start copying init->len bytes between the local pieces from byte loff on
 * and the remote pieces (init->write = to the peer); progress does the
 * copy and then what init->kind says. An error (no memory) is returned
 * before anything is queued. */
uccl_status_t uccl_shm_cma_start(shm_ep_t *ep, const shm_cma_job_t *init, const struct iovec *local,
                            int lcnt, size_t loff, const shm_wire_iov_t *remote, int rcnt);
/* Copy what the budget allows of ep's copies, finishing those that end. */
int uccl_shm_cma_progress(shm_ep_t *ep, shm_cma_budget_t *budget);
/* Teardown: drop the copies (their requests are the core's). */
void uccl_shm_cma_jobs_free(shm_ep_t *ep);
/* Drop the first done bytes of an iovec array (in place); the count left. */
int uccl_shm_iov_advance(struct iovec *iov, int cnt, size_t done);

/* shm_cma_helper.c: a thread that copies the second half of large CMA jobs */
typedef struct shm_cma_helper shm_cma_helper_t;
uccl_status_t uccl_shm_cma_helper_parse(shm_tp_t *tp);
void uccl_shm_cma_helper_split(shm_ep_t *ep, shm_cma_job_t *job);
bool uccl_shm_cma_helper_done(shm_tp_t *tp, shm_cma_job_t *job, uccl_status_t *st);
void uccl_shm_cma_helper_cancel(shm_tp_t *tp, shm_cma_job_t *job);
void uccl_shm_cma_helper_destroy(shm_tp_t *tp);
/* Local pieces of a request as an iovec array (empty pieces dropped). */
int uccl_shm_req_iovec(const uccl_req_t *req, struct iovec *iov);
/* Under Yama ptrace_scope 1, let peers of this user attach to this process
 * (CMA needs that); called at open, so before any peer probes us. */
void uccl_shm_cma_allow_peers(const shm_tp_t *tp);
/* Can we read the peer's memory? (probe of the word it told us about) */
bool uccl_shm_cma_probe(shm_ep_t *ep);

/* shm_map.c: mapping a peer's memory of uccl_mem_alloc (uccl_rdesc_ptr) */
uccl_status_t uccl_shm_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                               int device, uccl_tp_memh_t **memh);
void uccl_shm_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh);
size_t uccl_shm_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX]);
uccl_status_t uccl_shm_remote_ptr(uccl_tp_ep_t *ep, const uccl_req_remote_t *remote, void **ptr);
/* Sender of an RTS: append the SHM_FLAG_MAPPED key after the cnt pieces at
 * iov when they are one piece of memory of uccl_mem_alloc of at most
 * UCCL_SHM_MAP_MAX bytes; returns the flag, or 0 (nothing appended). */
uint32_t uccl_shm_map_rts_key(const shm_ep_t *ep, shm_wire_iov_t *iov, uint32_t cnt);
/* Receiver: our address of the sender's piece, its file mapped on first
 * use (kept until the connection closes); NULL where it cannot be mapped. */
const void *uccl_shm_map_piece(shm_ep_t *ep, const shm_wire_iov_t *piece,
                               const shm_wire_iov_t *key);
/* Teardown: unmap the peer's memory (the connection closes), or keep it
 * mapped until uccl_shm_map_close when the connection failed (the user
 * may still hold pointers into it until it closes the connection). */
void uccl_shm_map_release(shm_ep_t *ep);
void uccl_shm_map_close(shm_tp_t *tp);

/* shm_split.c: large CMA transfers copied by both processes at once */
/* Receiver of a matched RTS / target of a validated write or read: offer
 * the peer its part and copy ours; false = not split (too small, or no
 * room for the offer), then the caller copies it all as before. */
bool uccl_shm_split_recv(shm_ep_t *ep, uccl_req_t *req, uint64_t len, uint64_t id,
                    const shm_wire_iov_t *iov, uint32_t iovcnt);
bool uccl_shm_split_rma(shm_ep_t *ep, const shm_pkt_rma_t *pkt, const shm_wire_iov_t *iov,
                        uccl_region_t *region);
void uccl_shm_rx_offer(shm_ep_t *ep, const shm_pkt_offer_t *pkt, const shm_wire_iov_t *iov);
void uccl_shm_rx_done(shm_ep_t *ep, const shm_pkt_ctl_t *pkt);
/* Our part of split s is copied (status st). */
void uccl_shm_split_own_done(shm_ep_t *ep, shm_split_t *s, uccl_status_t st);
/* Teardown (after the close fence: the peer copies nothing more): drop the
 * splits (their receives are the core's) and their holds. */
void uccl_shm_splits_free(shm_ep_t *ep);

#endif

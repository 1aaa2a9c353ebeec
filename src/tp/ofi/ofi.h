/* Private definitions of the libfabric (ofi) transport: one FI_EP_RDM
 * endpoint, address vector and completion queue per engine; one uccl
 * endpoint per connection holding the shared RDMA message protocol
 * (src/tp/common/rndv.h) and its control buffers.
 *
 * Wire. Control messages are fi_tsend/fi_trecv whose tag is only the
 * receiving connection's 32-bit id (several connections between the same two
 * engines share one pair of fabric endpoints; the tag tells them apart, user
 * matching stays in the core). Writes closed by an immediate carry it as
 * remote CQ data: receiving connection id << 32 | uccl_rndv_imm(). The
 * provider must keep sends in order (FI_ORDER_SAS). Where it also keeps
 * writes in order (FI_ORDER_WAW) the immediate on a request's last write
 * closes the whole request at once; elsewhere (shm) every write asks for
 * delivery completion and the closing one waits until the request's earlier
 * writes completed. Providers with 4 bytes of CQ data (verbs;ofi_rxm, efa)
 * get the immediate as a tagged message of no bytes after the last write
 * (ordered by FI_ORDER_SAW, or by the same wait).
 * GPU memory is staged through registered stage buffers (ofi_stage.c): a
 * receive into it takes the protocol's granted windows, each closed by a
 * chunk immediate the same way (an unordered provider's closing write, or
 * the immediate message, waits for the request's earlier writes). */
#ifndef UCCL_TP_OFI_H
#define UCCL_TP_OFI_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tp_api.h"
#include "tp/common/rndv.h"
#include "tp/common/rndv_stage.h"
#include "tp/staging.h"
#include "util/idmap.h"

#define OFI_WIRE_VERSION 6 /* 2: GRANT windows; 3: RTS_PULL; 4: RTS_TMSG; 5: direct sends;
                             * 6: direct-send hints (ofi_dhint.c) */
#define OFI_NAME_MAX 128 /* fabric endpoint name */
#define OFI_PROV_MAX 48  /* "tcp;ofi_rxm" */
#define OFI_IOV_MAX 16   /* local pieces of one fi_writemsg / fi_readmsg at most */
#define OFI_API FI_VERSION(1, 10)
#define OFI_EP_ID_BITS 31       /* endpoint ids (ep_ids), before the salt */
#define OFI_EP_ID_INDEX_BITS 20 /* up to 2^20 connections per engine */

typedef struct tp_ofi_config {
    char provider[UCCL_CFG_STRING_MAX];
    size_t chunk;
    size_t eager;
    int tx_depth;
    int rx_depth;
    int max_iov;
    char imm[UCCL_CFG_STRING_MAX];
    char pack_below[UCCL_CFG_STRING_MAX];
    int pull;
    int tagged;
    int direct;
    size_t direct_max;
    int direct_wait_us;
    int direct_depth;
    size_t stage_chunk;
    int stage_depth;
} tp_ofi_config_t;

/* Provider quirks, one table (ofi_fabric.c): how a provider ranks when none
 * is named, and what it needs beyond what fi_getinfo says. */
enum {
    OFI_QUIRK_SAME_HOST = 1u << 0, /* reaches only peers of this host (shm) */
    OFI_QUIRK_SOFTWARE = 1u << 1,  /* no NIC of its own: used only when UCCL_OFI_PROVIDER names it */
    /* names its endpoints after the pid (shm: /dev/shm/PID:UID:N); a killed
     * process leaves the name behind and a later process given the same pid
     * fails fi_enable with EBUSY: name the endpoint ourselves (fi_setname) */
    OFI_QUIRK_PID_NAME = 1u << 2,
    /* sends above UCCL_OFI_EAGER take the tagged rendezvous (ofi_tmsg.c)
     * when UCCL_OFI_TAGGED is left at -1: for a provider where it measures
     * faster than CTS + write (none here: tests/perf/results/ofi/s12-README.md) */
    OFI_QUIRK_TAGGED = 1u << 3,
    /* sends above UCCL_OFI_EAGER up to UCCL_OFI_DIRECT_MAX go as one tagged
     * message straight into the receive (ofi_direct.c) when UCCL_OFI_DIRECT
     * is left at -1 */
    OFI_QUIRK_DIRECT = 1u << 4,
    /* a tagged receive must not use ignore bits: shm (libfabric 1.17)
     * matches a message that came before its receive (the unexpected queue)
     * against a receive posted later with the ignore mask left in the
     * message's receive entry by that entry's previous use, not the
     * receive's own: smr_generic_recv (prov/shm/src/smr_msg.c) searches
     * unexp_tagged_queue with smr_match_tagged (smr_ep.c), which reads
     * recv_entry->ignore, and smr_get_tag (smr_ep.c) takes the entry for an
     * unexpected message from recv_fs without setting it. A receive with
     * ignore bits then misses its message (direct sends stalled:
     * tests/perf/results/ofi/ofi15-H200host/README.md section 5), and a
     * stale mask lets an exact receive take a message of another tag.
     * Direct receives are posted exact; the sender tells a message that
     * waits its tag and run (ofi_dhint.c) */
    OFI_QUIRK_EXACT_TAGS = 1u << 5,
};
typedef struct ofi_quirk {
    const char *prefix; /* provider name or its leading part ("tcp;ofi_rxm", "cxi") */
    int rank;           /* higher is preferred when UCCL_OFI_PROVIDER is unset */
    unsigned flags;
    size_t pack_below;  /* local pieces averaging less are packed (ofi_pack.c); 0 = never */
    int direct_depth;   /* UCCL_OFI_DIRECT_DEPTH left at 0: direct receives posted ahead */
    int rx_depth;       /* UCCL_OFI_RX_DEPTH left at 0: control receives per connection */
} ofi_quirk_t;

#define OFI_BOUNCE_SIZE (256u << 10) /* one packed operation at most */
#define OFI_BOUNCE_MAX 32            /* bounce buffers per engine */
typedef struct ofi_bounce ofi_bounce_t;

/* An address-vector entry shared by the connections to one peer endpoint. */
typedef struct ofi_peer {
    uccl_list_t link;
    fi_addr_t addr;
    int refs;
    size_t len;
    uint8_t name[OFI_NAME_MAX];
} ofi_peer_t;

typedef struct tp_ofi {
    uccl_tp_t base;
    tp_ofi_config_t cfg;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    const ofi_quirk_t *quirk;
    char prov[OFI_PROV_MAX];
    uint8_t name[OFI_NAME_MAX];
    size_t name_len;
    uint32_t addr_format;
    uint64_t host_id;
    int timeout_ms;
    uint64_t mr_mode;
    size_t iov_limit, rma_iov_limit, max_msg, key_size;
    bool imm_msg; /* immediates as messages (less than 8 bytes of CQ data, or UCCL_OFI_IMM=msg) */
    bool rma_ordered; /* FI_ORDER_WAW (and SAW for imm_msg): else a closing write waits (fence) */
    size_t pack_below; /* UCCL_OFI_PACK_BELOW, or the quirk table's */
    bool pull;         /* UCCL_OFI_PULL: rendezvous sends read by the receiver */
    bool tmsg;         /* UCCL_OFI_TAGGED: rendezvous sends as tagged messages (ofi_tmsg.c) */
    size_t direct_max; /* UCCL_OFI_DIRECT on: largest direct message we take (else 0) */
    /* smallest direct message we send, less one: with exact tags the
     * provider's inject_size (ofi_direct.c, uccl_ofi_direct_ok), else 0 */
    size_t direct_min;
    int direct_depth;  /* UCCL_OFI_DIRECT_DEPTH, or the quirk table's */
    bool direct_peers;      /* a connection's peer takes direct sends */
    uint64_t direct_sent;   /* direct sends posted (tests count them) */
    uint64_t direct_placed; /* ...received straight into their receive */
    uint64_t direct_copied; /* ...received through the connection's bounce or another receive */
    uint64_t direct_passes; /* progress calls that looked at every direct receive (tests) */
    bool exact_tags;        /* OFI_QUIRK_EXACT_TAGS: no receive with ignore bits */
    uint64_t direct_hints;  /* hints sent for direct sends that waited (ofi_dhint.c, tests) */
    uint64_t polls, polls_empty; /* progress calls, those that found no completion (debug) */
    uccl_list_t bounce_free;
    int nbounce;
    uccl_list_t op_free; /* data operations' contexts kept for reuse (uccl_ofi_op_get) */
    int nop_free;
    uccl_stage_t *stage; /* GPU memory staged through registered host buffers (ofi_stage.c) */
    int staged_ops;      /* operations posted from or into stage buffers */
    uint64_t rma_posted; /* fi_writemsg / fi_readmsg posted (tests count them) */
    uint64_t rma_whole;  /* of them, whole requests posted at once (ofi_rma.c) */
    uint64_t rma_whole_done; /* ...finished at their completion, past the data path */
    uint64_t tmsg_posted; /* tagged rendezvous sends and receives posted (tests count them) */
    uint64_t next_key;
    /* connections' endpoints by the id their peers tag control messages
     * and immediates with (O(1), generation-checked: a gone endpoint's id
     * finds nothing); on the wire id ^ ep_id_salt (random, top bit set: an
     * id is never 0, and differs between engines) */
    uccl_idmap_t ep_ids;
    uint32_t ep_id_salt;
    uccl_list_t eps;     /* connections' endpoints */
    uccl_list_t zombies; /* destroyed endpoints whose operations are still posted */
    uccl_list_t peers;   /* ofi_peer_t */
} tp_ofi_t;

struct uccl_tp_memh {
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
    uint64_t base; /* the registered address (offset addressing: peers subtract it) */
};

/* Our remote key slot: hdr(1) = key bytes | base bytes << 4, the key, then
 * (offset addressing only) the region base, both little-endian, shortest. */
#define OFI_RKEY_MAX UCCL_TP_RKEY_MAX

/* The context of one posted operation (first member: the provider's
 * FI_CONTEXT / FI_CONTEXT2 scratch). */
enum { OFI_OP_CTRL_RECV = 1, OFI_OP_CTRL_SEND, OFI_OP_DATA, OFI_OP_DSEND, OFI_OP_DRECV };
typedef struct ofi_op {
    struct fi_context2 ctx;
    int kind;
    int index;                /* control slot / buffer index */
    struct tp_ofi_ep *ep;
    uccl_req_t *req;          /* OFI_OP_DATA; NULL once the endpoint forgot it */
    ofi_bounce_t *bounce;     /* a packed operation's buffer */
    uccl_stage_buf_t *sbuf;   /* the stage buffer it reads or fills (held) */
    uccl_rndv_slot_t *slot;   /* a read into a window of its request's sink */
    size_t off, len;          /* ...and the bytes of req it carries */
    bool read;
    bool whole;               /* OFI_OP_DATA: its request's only operation (ofi_rma.c) */
    bool cancelled;           /* OFI_OP_DRECV we cancelled (its FI_ECANCELED is ours) */
    uccl_req_t *dreq;         /* OFI_OP_DRECV into a receive's pieces (NULL: the bounce) */
    void *tmp;                /* a tagged receive's bounce (ofi_tmsg.c) */
    struct fid_mr *tmp_mr;
    uccl_list_t link;         /* ep->data_ops while posted */
    uccl_list_t dlink;        /* OFI_OP_DSEND, exact tags: ep->dsent while posted */
} ofi_op_t;

/* Indexes into req->tp_data past the protocol's. */
enum {
    OFI_RD_OFF = UCCL_RNDV_RD_TP, /* bytes posted */
    OFI_RD_OPS,                   /* operations posted, not completed */
    OFI_RD_IMM,                   /* 1 = the closing immediate is begun (NOTIFY sent), 2 = posted */
    OFI_RD_DOPS,                  /* RMA operations posted, not completed (no NOTIFY) */
    OFI_RD_DRUN = OFI_RD_OFF,     /* a direct send's run (it has no data path) */
};

/* What a request holds beyond tp_data (req->tp_ptr, freed at finish): the
 * staging pipeline its local GPU data is read through (sends, writes), the
 * sink it lands in (receives, reads), a send's granted windows with the
 * chunk immediate it still owes (immediates as messages), and a rendezvous
 * send's remote pieces from the CTS (nseg 0: req->remote or the windows). */
typedef struct ofi_xfer {
    struct tp_ofi_ep *ep;
    uccl_rndv_staged_t staged; /* tp/common/rndv_stage.h */
    int owed_slot; /* window whose chunk immediate is owed, + 1; 0 = none */
    uint64_t nseg;
    uccl_rndv_seg_t segs[];
} ofi_xfer_t;

/* A direct receive posted for message dseq + k (ofi_direct.c): its
 * operation while posted; landed: the message came before an earlier one
 * and waits in req's pieces and its bounce (len bytes, data: its CQ data,
 * tag and run) for its turn. The slots are a ring: message m's is
 * dslot[m % OFI_DDEPTH_MAX] (uccl_ofi_dslot_at); those of numbers outside
 * dseq .. dseq + depth - 1 stay empty. */
#define OFI_DDEPTH_MAX 16 /* a power of two */
_Static_assert((OFI_DDEPTH_MAX & (OFI_DDEPTH_MAX - 1)) == 0, "OFI_DDEPTH_MAX: a power of two");
#define OFI_DTAG_BITS 12 /* direct sends carry tags below 2^12 */
/* A direct send's provider tag (the layout: ofi_direct.c's top). */
#define OFI_DIRECT_BIT (1ull << 62)
#define OFI_DSEQ_SHIFT 49
#define OFI_DSEQ_MASK 0x1fffull
#define OFI_DRUN_SHIFT 44
#define OFI_DRUN_MASK 0x1full
#define OFI_DTAG_SHIFT 32
#define OFI_DTAG_MASK ((1ull << OFI_DTAG_BITS) - 1)
static inline uint64_t uccl_ofi_dtag(uint32_t conn_id, uint64_t seq, uint64_t run, uint64_t tag)
{
    return OFI_DIRECT_BIT | (seq & OFI_DSEQ_MASK) << OFI_DSEQ_SHIFT | run << OFI_DRUN_SHIFT |
           tag << OFI_DTAG_SHIFT | conn_id;
}
/* What the sender told of message seq (ofi_dhint.c): its tag and run. The
 * receiver keeps every hint of a message not taken yet (OFI_DHINTS at
 * first, more as needed): a table indexed by seq % 8 lost the first hint of
 * message n when the late hint of message n - 8 came after it, and on shm
 * the late hint of n cannot go while n's send is out (-FI_EAGAIN): a stall */
#define OFI_DHINTS 8
typedef struct ofi_dhint {
    uint64_t seq; /* UINT64_MAX: none */
    uint64_t tag;
    int run;
} ofi_dhint_t;

typedef struct ofi_dslot {
    ofi_op_t *op;
    bool landed;
    uccl_req_t *req;
    size_t len;
    uint64_t data;
} ofi_dslot_t;

typedef struct tp_ofi_ep {
    uccl_tp_ep_t base;
    tp_ofi_t *tp;
    uccl_list_t link; /* tp->eps, then tp->zombies */
    uint32_t id, peer_id;
    ofi_peer_t *peer;
    bool connected;
    bool dead;
    int posted; /* operations posted and not completed */
    /* the last remote key ofi_post_rma parsed (ofi_rma.c): a request naming
     * the same 16 bytes reuses key and base without parsing them again */
    uint8_t rkey_last[UCCL_TP_RKEY_MAX];
    uint8_t rkey_last_len; /* 0: nothing cached */
    uint64_t rkey_last_key, rkey_last_base;
    uint8_t *bufs;
    struct fid_mr *bufs_mr;
    void *bufs_desc;
    ofi_op_t *ctrl_ops; /* rx_depth receive ops, then tx_depth send ops */
    int ctrl_sends;     /* control sends posted */
    /* posts that met -FI_EAGAIN, retried in order by progress */
    int *retry_send, *retry_recv;
    size_t *retry_len;
    int nretry_send, nretry_recv;
    uccl_rndv_t rndv;
    uccl_list_t data_pending; /* requests with bytes still to post */
    uccl_list_t inflight;     /* requests fully posted */
    uccl_list_t data_ops;     /* ofi_op_t posted for data */
    /* direct sends (ofi_direct.c): the peer's limit (0 = off), sends that
     * met -FI_EAGAIN; receiving: the message number our first receive is
     * posted for, since when (ns), the receives into receives' pieces for
     * it and the next UCCL_OFI_DIRECT_DEPTH - 1, the one into the bounce,
     * and the bounces (direct_max bytes each, one per slot) */
    size_t peer_direct_max;
    uccl_list_t dpending;
    /* runs (ofi_direct.c): the number, tag and run of our last send; of
     * the last message that came directly, in order */
    uint64_t srun_next, srun_tag, drun_seq, drun_tag;
    unsigned srun, drun;
    uint64_t dseq, dsince;
    /* the receives are settled (uccl_ofi_direct_progress has nothing to
     * do) while uccl_msg_gen stays dgen and, ddue not UINT64_MAX, the
     * clock stays below ddue (then the bounce's receive goes in); 0 = not
     * settled */
    uint64_t dgen, ddue;
    ofi_dslot_t dslot[OFI_DDEPTH_MAX]; /* a ring: uccl_ofi_dslot */
    ofi_op_t *dany;
    /* exact tags (ofi_dhint.c): our direct sends posted, oldest first, since
     * when the oldest is (0: not read yet), progress calls since the clock
     * was read, whether its hint went; hints of the peer's */
    uccl_list_t dsent;
    uint64_t dsent_next; /* our last direct send's number + 1 */
    uint64_t dsent_since;
    unsigned dsent_polls;
    bool dsent_hinted;
    ofi_dhint_t *dhint; /* ndhint entries, seq UINT64_MAX: free */
    int ndhint;
    uint8_t *dbuf;
    struct fid_mr *dbuf_mr;
    void *dbuf_desc;
} tp_ofi_ep_t;

/* ---- ofi_glue.c: what the transport reads of the core */
uccl_tp_memh_t *uccl_ofi_iov_memh(const tp_ofi_t *tp, const uccl_req_t *req, int i);
bool uccl_ofi_conn_ok(const tp_ofi_ep_t *ep);
uccl_status_t uccl_ofi_conn_state(const tp_ofi_ep_t *ep);
void uccl_ofi_conn_fail(tp_ofi_ep_t *ep, uccl_status_t st);

/* ---- ofi_fabric.c: provider choice, fabric objects */
extern const uccl_cfg_table_t uccl_ofi_config_table;
/* Candidate infos for the configured provider (caller frees with fi_freeinfo). */
uccl_status_t uccl_ofi_getinfo(tp_ofi_t *tp, struct fi_info **list);
/* Every ';'-separated part of PROV is a libfabric provider name (a name
 * outside the list is refused with UCCL_ERR_INVALID_PARAM, naming it). */
bool uccl_ofi_provider_name_ok(const char *prov);
/* Check one candidate; on refusal write why into buf. */
uccl_status_t uccl_ofi_check_info(const struct fi_info *info, char *why, size_t len);
const ofi_quirk_t *uccl_ofi_quirk(const char *prov);
uccl_status_t uccl_ofi_fabric_open(tp_ofi_t *tp, const struct fi_info *info);
void uccl_ofi_fabric_close(tp_ofi_t *tp);
/* One line naming a libfabric error: fi_strerror and the provider's text. */
void uccl_ofi_cq_error(tp_ofi_t *tp, const struct fi_cq_err_entry *err, char *buf, size_t len);

/* ---- ofi_mr.c */
uccl_status_t uccl_ofi_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                               int device, uccl_tp_memh_t **memh);
void uccl_ofi_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh);
size_t uccl_ofi_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX]);
/* The one parser of our key slot: key, and the base to subtract (0 with
 * virtual addressing). */
uccl_status_t uccl_ofi_rkey_parse(const uint8_t *rkey, size_t len, uint64_t *key, uint64_t *base);
size_t uccl_ofi_rkey_encode(uint64_t key, bool with_base, uint64_t base,
                            uint8_t rkey[UCCL_TP_RKEY_MAX]);
uccl_status_t uccl_ofi_reg_buf(tp_ofi_t *tp, void *addr, size_t len, struct fid_mr **mr,
                               void **desc);

/* ---- ofi_ep.c */
uccl_status_t uccl_ofi_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                 bool is_initiator, uccl_tp_ep_t **ep);
uccl_status_t uccl_ofi_ep_pack(uccl_tp_ep_t *ep, void *buf, size_t *len);
uccl_status_t uccl_ofi_ep_connect(uccl_tp_ep_t *ep, const void *peer_info, size_t len);
void uccl_ofi_ep_destroy(uccl_tp_ep_t *ep);
void uccl_ofi_ep_op_done(tp_ofi_ep_t *ep); /* an operation of ep completed */
void uccl_ofi_zombies_free(tp_ofi_t *tp, bool all);
/* A zeroed data operation's context, from the engine's cache of freed ones
 * (no allocation per message), or NULL; put returns it (the cache keeps up
 * to OFI_OP_CACHE), cache_free empties the cache at close. */
#define OFI_OP_CACHE 256
ofi_op_t *uccl_ofi_op_get(tp_ofi_t *tp);
void uccl_ofi_op_put(tp_ofi_t *tp, ofi_op_t *op);
void uccl_ofi_op_cache_free(tp_ofi_t *tp);
tp_ofi_ep_t *uccl_ofi_ep_by_id(tp_ofi_t *tp, uint32_t id);

/* ---- ofi_msg.c: the protocol's primitives (uccl_rndv_ops_t) */
extern const uccl_rndv_ops_t uccl_ofi_rndv_ops;
uccl_status_t uccl_ofi_post_ctrl_recv(tp_ofi_ep_t *ep, int index);
void uccl_ofi_retry_ctrl(tp_ofi_ep_t *ep);
uccl_status_t uccl_ofi_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_ofi_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
void uccl_ofi_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes);
uccl_status_t uccl_ofi_check_local(const tp_ofi_ep_t *ep, const uccl_req_t *req);

/* ---- ofi_tmsg.c: tagged rendezvous (RTS_TMSG), the protocol's tmsg_* ops */
bool uccl_ofi_tmsg_ok(uccl_rndv_t *r, const uccl_req_t *req);
void uccl_ofi_tmsg_send(uccl_rndv_t *r, uccl_req_t *req, uint64_t id);
void uccl_ofi_tmsg_recv(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t id);
int uccl_ofi_tmsg_post(tp_ofi_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_ofi_tmsg_landed(ofi_op_t *op, uccl_status_t st);
void uccl_ofi_op_free_bounce(ofi_op_t *op);
void uccl_ofi_tmsg_done(tp_ofi_ep_t *ep, uccl_req_t *req);

/* ---- ofi_dsend.c: the sending side of direct sends */
bool uccl_ofi_direct_ok(tp_ofi_ep_t *ep, const uccl_req_t *req);
/* Every send, in message order: the run it carries (messages just before
 * it with its tag, 0-31). */
unsigned uccl_ofi_direct_run(tp_ofi_ep_t *ep, const uccl_req_t *req);
uccl_status_t uccl_ofi_direct_send(tp_ofi_ep_t *ep, uccl_req_t *req, unsigned run);
/* Post the sends that met -FI_EAGAIN, in order (progress). */
void uccl_ofi_direct_retry(tp_ofi_ep_t *ep);

/* ---- ofi_direct.c: direct sends, one tagged message into the receive */
/* req's registered host pieces for one operation: how many, or -1. */
int uccl_ofi_direct_mem_pieces(const tp_ofi_ep_t *ep, const uccl_req_t *req);
uccl_status_t uccl_ofi_direct_setup(tp_ofi_ep_t *ep);
void uccl_ofi_direct_progress(tp_ofi_ep_t *ep);
void uccl_ofi_direct_complete(tp_ofi_ep_t *ep, ofi_op_t *op, uccl_status_t st, size_t len,
                              uint64_t flags, uint64_t data);
void uccl_ofi_direct_cancel(tp_ofi_ep_t *ep, uccl_status_t reason);
void uccl_ofi_direct_free(tp_ofi_ep_t *ep);
/* A receive for message seq into req's pieces (exact tag, or any run:
 * OFI_DRUN_ANY in ofi_direct.c) or, req NULL, into the bounce (the tag
 * and run of hint; NULL: any). NULL: not posted. */
ofi_op_t *uccl_ofi_direct_post_recv(tp_ofi_ep_t *ep, uint64_t seq, uccl_req_t *req, int run,
                                    const ofi_dhint_t *hint);

/* ---- ofi_dhint.c: with exact tags, the sender tells a waiting direct
 * message's tag and run (a control message of no bytes whose CQ data has
 * its top 32 bits 0) */
uccl_status_t uccl_ofi_dhint_init(tp_ofi_ep_t *ep);
void uccl_ofi_dhint_posted(tp_ofi_ep_t *ep, ofi_op_t *op);
void uccl_ofi_dhint_done(tp_ofi_ep_t *ep, ofi_op_t *op);
void uccl_ofi_dhint_progress(tp_ofi_ep_t *ep);
int uccl_ofi_dhint_first(tp_ofi_ep_t *ep, const uccl_req_t *req);
/* Has uccl_ofi_dhint_progress a send to look at? Inline: every progress
 * call asks, and the answer is nearly always no (ofi16b). */
static inline bool uccl_ofi_dhint_pending(const tp_ofi_ep_t *ep)
{
    return ep->tp->exact_tags && !ep->dsent_hinted && !uccl_list_empty(&ep->dsent);
}
bool uccl_ofi_dhint_is(uint64_t data);
void uccl_ofi_dhint_arrived(tp_ofi_ep_t *ep, uint64_t data);
/* The peer's hint for message seq: its tag and run. */
const ofi_dhint_t *uccl_ofi_dhint_of(const tp_ofi_ep_t *ep, uint64_t seq);
void uccl_ofi_dhint_any(tp_ofi_ep_t *ep, uint64_t n);

/* ---- ofi_stage.c: GPU memory through registered stage buffers */
void uccl_ofi_gpu_open(tp_ofi_t *tp, const uccl_tp_open_params_t *params);
void uccl_ofi_gpu_close(tp_ofi_t *tp);
uccl_status_t uccl_ofi_gpu_mem_reg(tp_ofi_t *tp, uccl_tp_memh_t **memh);
bool uccl_ofi_req_staged(const tp_ofi_ep_t *ep, const uccl_req_t *req);
ofi_xfer_t *uccl_ofi_xfer_get(tp_ofi_ep_t *ep, uccl_req_t *req, uint64_t nseg);
uccl_status_t uccl_ofi_xfer_stage(tp_ofi_ep_t *ep, uccl_req_t *req, size_t len, bool gather);
void uccl_ofi_xfer_release(uccl_req_t *req);
void *uccl_ofi_stage_desc(const uccl_stage_buf_t *buf);
uccl_status_t uccl_ofi_sink_start(uccl_rndv_t *r, uccl_req_t *req, size_t len);
void uccl_ofi_sink_landed(uccl_rndv_t *r, uccl_req_t *req, int slot);
uccl_status_t uccl_ofi_grant(uccl_rndv_t *r, uccl_req_t *req, bool first, int slot, uint64_t off,
                             const uccl_rndv_seg_t *seg);

/* ---- ofi_pack.c: many small local pieces through registered bounces */
uccl_status_t uccl_ofi_pack_setup(tp_ofi_t *tp);
void uccl_ofi_pack_close(tp_ofi_t *tp);
bool uccl_ofi_pack_wanted(const tp_ofi_t *tp, const uccl_req_t *req, size_t off, size_t want);
ofi_bounce_t *uccl_ofi_bounce_get(tp_ofi_t *tp);
void uccl_ofi_bounce_put(tp_ofi_t *tp, ofi_bounce_t *b);
uint8_t *uccl_ofi_bounce_ptr(const ofi_bounce_t *b);
void *uccl_ofi_bounce_desc(const ofi_bounce_t *b);

/* ---- ofi_iov.c: one operation's local pieces and remote ranges */
/* Remote address (as the provider addresses it), key and bytes left in
 * that remote range at byte off of req. */
uccl_status_t uccl_ofi_remote_at(const uccl_req_t *req, size_t off, uint64_t *addr, uint64_t *key,
                                 uint64_t *left);
/* Local pieces of req from byte off: up to max pieces and want bytes. */
size_t uccl_ofi_gather(const tp_ofi_ep_t *ep, const uccl_req_t *req, size_t off, size_t want,
                       struct iovec *iov, void **desc, int max, int *n);
/* More remote ranges after rma[0] (*nrma 1) for an operation at byte off:
 * up to rma_iov_limit, cap bytes in all, none for staged requests. Returns
 * the operation's bytes. */
size_t uccl_ofi_remote_more(const tp_ofi_t *tp, const uccl_req_t *req, size_t off, size_t cap,
                            struct fi_rma_iov *rma, size_t *nrma);
/* The remote ranges cut to the got bytes the local side took. */
void uccl_ofi_remote_trim(struct fi_rma_iov *rma, size_t *nrma, size_t got);

/* ---- ofi_data.c: RMA operations, completions, progress */
uccl_status_t uccl_ofi_post_write(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_ofi_post_read(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_ofi_data_start(tp_ofi_ep_t *ep, uccl_req_t *req);
void uccl_ofi_data_done(tp_ofi_ep_t *ep, uccl_req_t *req, uccl_status_t st);
bool uccl_ofi_req_has_work(const uccl_req_t *req);
void uccl_ofi_post_pending(tp_ofi_ep_t *ep);
int uccl_ofi_progress(uccl_tp_t *tp);
uccl_status_t uccl_ofi_status_of(int fi_err);

static inline tp_ofi_ep_t *tp_ofi_ep(uccl_tp_ep_t *base)
{
    return (tp_ofi_ep_t *)base;
}

/* The place in ep->dslot of message number seq's direct-receive slot. */
static inline unsigned uccl_ofi_dslot_at(uint64_t seq)
{
    return (unsigned)(seq & (OFI_DDEPTH_MAX - 1));
}

/* The direct-receive slot of message dseq + k (k below the depth). */
static inline ofi_dslot_t *uccl_ofi_dslot(tp_ofi_ep_t *ep, int k)
{
    return &ep->dslot[uccl_ofi_dslot_at(ep->dseq + (uint64_t)k)];
}

#endif

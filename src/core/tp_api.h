/* The transport SPI: everything a transport (src/tp/NAME/, src/tp/common)
 * sees of the core, and the only core header it may include (core.h is
 * private to src/core; scripts/check-layers.sh enforces it). It holds:
 *   - the ops table and capabilities a transport fills (one per transport,
 *     designated initializers; the core asks capabilities, never names);
 *   - the open parameters the engine passes to ops->open, and the engine's
 *     topology and NIC-choice helpers;
 *   - the request view: struct uccl_req, whose fields say who may touch them;
 *   - the upcalls into the core (completion, matching, notifications,
 *     connection failure, target-side region lookup) and accessors for the
 *     little a transport may read of a connection or a region.
 * Engine, connection and region stay opaque here. Rules: docs/LAYERS.md. */
#ifndef UCCL_CORE_TP_API_H
#define UCCL_CORE_TP_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "util/bytes.h"
#include "util/config.h"
#include "util/list.h"
#include "util/log.h"
#include "util/sys.h"

#define UCCL_TP_MAX 8

/* Capability flags of a transport (uccl_tp_ops.caps). */
enum {
    UCCL_TP_CAP_HOST_MEM = 1u << 0,  /* moves host memory */
    UCCL_TP_CAP_CUDA_MEM = 1u << 1,  /* moves CUDA device memory */
    UCCL_TP_CAP_ROCM_MEM = 1u << 2,  /* moves ROCm device memory */
    UCCL_TP_CAP_SAME_HOST = 1u << 3, /* reaches peers on this host only */
    UCCL_TP_CAP_RMA = 1u << 4,       /* post_write / post_read */
    UCCL_TP_CAP_NOTIFY = 1u << 5,    /* write with notification */
    UCCL_TP_CAP_MEM_REG = 1u << 6,   /* needs mem_reg for every region */
    UCCL_TP_CAP_RKEY = 1u << 7,      /* mem_pack fills a key slot of remote descriptors */
    /* post_write / post_read take requests with several remote ranges of
     * one region (req->nrseg > 1: req->rseg); without it, one range each */
    UCCL_TP_CAP_RSEG = 1u << 8,
};

/* Owners of remote-descriptor key slots (uccl_tp_ops.rkey_owner): one number
 * per transport that needs remote keys, fixed on the wire (rdesc.c). Never
 * reuse a number; 0 marks the end of the slots. */
enum {
    UCCL_TP_KEY_NONE = 0,
    UCCL_TP_KEY_VERBS = 1,
    UCCL_TP_KEY_OFI = 2, /* reserved for the libfabric transport */
    UCCL_TP_KEY_SHM = 3, /* shm: the peer's memfd behind the region (optional: a
                          * same-host key is packed only where it fits) */
};

typedef struct uccl_tp uccl_tp_t;
typedef struct uccl_tp_ep uccl_tp_ep_t;
typedef struct uccl_tp_memh uccl_tp_memh_t;
typedef struct uccl_msg uccl_msg_t;
typedef struct uccl_region uccl_region_t; /* a registered range (opaque; accessors below) */
typedef struct uccl_tp_open_params uccl_tp_open_params_t;

/* Base of a transport instance (one per engine and transport); a transport
 * embeds it as the first member of its own struct. */
struct uccl_tp {
    const struct uccl_tp_ops *ops;
    uccl_engine_t *engine; /* opaque: only for the upcalls that take it */
    const uccl_tp_open_params_t *params; /* what open got; valid until close */
    int index; /* slot in the engine's transport array and in region memh arrays */
    /* Memory caps (UCCL_TP_CAP_*_MEM) this instance gained at open beyond
     * ops->caps, e.g. GPU memory staged through host buffers when a GPU is
     * present; open may set it, the core ORs it with ops->caps. */
    uint64_t open_caps;
};


/* Base of a transport endpoint (one per connection and transport). */
struct uccl_tp_ep {
    uccl_tp_t *tp;
    uccl_conn_t *conn; /* opaque: for the upcalls and the uccl_conn_* accessors below */
};

/* What the engine tells a transport at open (ops->open); the engine owns it
 * and keeps it unchanged until the transport is closed (tp->params). */
struct uccl_tp_open_params {
    int gpu_index;           /* the engine's GPU (runtime ordinal), -1 = host memory only */
    uint64_t engine_id;      /* this engine's random incarnation id */
    uint64_t host_id;        /* equal host_id = same host (UCCL_HOST_ID may override) */
    int pid;                 /* this process */
    uint32_t ifaddr;         /* IPv4 address of the engine's setup interface, network order */
    int bind_any;            /* UCCL_OOB_BIND_ANY: listeners listen on every interface,
                              * else on ifaddr only */
    int port_lo, port_hi;    /* UCCL_PORT_RANGE for listeners; 0, 0 = any free port */
    const char *net_devices; /* UCCL_NET_DEVICES or the engine parameter; "" = by topology */
    int timeout_ms;          /* UCCL_TIMEOUT_MS: the bound of every wait on a peer */
    int setup_max_pending;   /* UCCL_SETUP_MAX_PENDING: incoming setups kept at once */
    int setup_timeout_ms;    /* UCCL_SETUP_TIMEOUT_MS: an incoming setup's time to say hello */
    uccl_engine_t *engine;   /* opaque: for uccl_tp_topo and uccl_tp_nics only */
};

/* What a peer told us about itself, from its address blob. */
typedef struct uccl_tp_peer {
    uint64_t engine_id;
    uint64_t host_id;   /* equal host_id = same host (boot id + hostname) */
    int pid;
    const void *addr;   /* the peer transport's own address entry */
    size_t addr_len;
} uccl_tp_peer_t;

/* Largest remote key a transport may put in a descriptor slot (the slots of
 * all the engine's key-needing transports share UCCL_RDESC_KEY_AREA bytes,
 * see rdesc.c). */
#define UCCL_TP_RKEY_MAX 16

struct uccl_req_remote; /* below */

struct uccl_tp_ops {
    size_t size;        /* sizeof(struct uccl_tp_ops) at build time */
    const char *name;   /* "shm", "tcp", ... as in UCCL_TRANSPORTS */
    int priority;       /* higher wins among transports that can reach a peer */
    uint64_t caps;      /* UCCL_TP_CAP_* */
    uint64_t engine_cap; /* the UCCL_CAP_* bit reported when opened */
    uint8_t rkey_owner; /* UCCL_TP_KEY_* of its descriptor slot (UCCL_TP_CAP_RKEY only) */
    const uccl_cfg_table_t *config_table; /* may be NULL */

    /* Open on an engine: allocate a derived struct; the core then sets
     * base.ops, base.engine, base.params and base.index. params outlives the
     * transport. UCCL_ERR_NO_DEVICE = not usable here (logged at info, the
     * engine goes on); UCCL_ERR_INVALID_PARAM = a malformed setting (the
     * engine is not created). */
    uccl_status_t (*open)(const uccl_tp_open_params_t *params, uccl_tp_t **tp);
    void (*close)(uccl_tp_t *tp);

    /* The entry peers need to reach us, placed in the engine address blob
     * (at most 256 bytes). */
    uccl_status_t (*address)(uccl_tp_t *tp, void *buf, size_t *len);
    /* Can this transport reach the peer? (e.g. shm: same host_id). */
    bool (*reachable)(uccl_tp_t *tp, const uccl_tp_peer_t *peer);

    /* Connection setup. Both sides: ep_create, then ep_pack (wiring info, at
     * most 1024 bytes, sent over the core's setup socket), then ep_connect
     * with the peer's packed info. is_initiator tells the sides apart.
     * ep_destroy drops every reference to the endpoint's requests without
     * completing them (the core then completes each one still on the
     * connection, with the connection's error or UCCL_ERR_CANCELED) and
     * frees everything the endpoint holds, held message records included
     * (the core has forgotten them by then). */
    uccl_status_t (*ep_create)(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                               bool is_initiator, uccl_tp_ep_t **ep);
    uccl_status_t (*ep_pack)(uccl_tp_ep_t *ep, void *buf, size_t *len);
    uccl_status_t (*ep_connect)(uccl_tp_ep_t *ep, const void *peer_info, size_t len);
    void (*ep_destroy)(uccl_tp_ep_t *ep);

    /* Memory registration of one region (called once per region and
     * transport with UCCL_TP_CAP_MEM_REG, may be NULL otherwise). mem_pack
     * (UCCL_TP_CAP_RKEY only) writes the region's remote key and returns its
     * length, at most UCCL_TP_RKEY_MAX; 0 = peers cannot reach this region
     * one-sided through this transport (no slot is written). */
    uccl_status_t (*mem_reg)(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                             int device, uccl_tp_memh_t **memh);
    void (*mem_dereg)(uccl_tp_t *tp, uccl_tp_memh_t *memh);
    size_t (*mem_pack)(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX]);

    /* Data movement: the request (struct uccl_req below) carries everything; the
     * transport completes it later with uccl_req_complete(), or returns an
     * error now (then the request is not queued anywhere and nothing went
     * to the peer). A send carries req->msg_seq to the peer. */
    uccl_status_t (*post_send)(uccl_tp_ep_t *ep, uccl_req_t *req);
    /* Receives are matched by the core (uccl_msg_arrived below): it hands
     * a message the transport held to the receive that takes it (req->len
     * is at least msg->len). The transport moves the data, completes req,
     * and frees its record of the message. */
    void (*msg_deliver)(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
    uccl_status_t (*post_write)(uccl_tp_ep_t *ep, uccl_req_t *req); /* notify too */
    uccl_status_t (*post_read)(uccl_tp_ep_t *ep, uccl_req_t *req);

    /* Make progress; return the number of events handled. Must not block. */
    int (*progress)(uccl_tp_t *tp);

    /* Optional. The peer's setup socket closed (it went away or closed the
     * connection): true once nothing the peer sent before is still on its
     * way in through this endpoint (streams at end of file, ring empty).
     * The core fails the connection only then (or after UCCL_TIMEOUT_MS),
     * so that every message that reached us is offered to receives. */
    bool (*ep_drained)(uccl_tp_ep_t *ep);

    /* Optional (NULL: uccl_rdesc_ptr answers UCCL_ERR_UNSUPPORTED). Direct
     * access to peer memory: set *ptr to an address in this process where
     * the peer's remote->len bytes at remote->addr (remote->rkey: this
     * transport's key slot) can be loaded and stored by the CPU (host
     * memory) or reached by this process's GPU runtime, kernels and stream
     * operations (GPU memory). The mapping stays valid at least until
     * ep_destroy (shm and gpu_ipc keep a failed connection's mappings until
     * the engine closes: the caller may still be using them).
     * UCCL_ERR_UNSUPPORTED: this memory cannot be mapped here (say why at
     * debug level). UCCL_INPROGRESS: the peer must answer first (gpu_ipc
     * asks it for a grant): the core progresses the engine and calls
     * again, up to UCCL_TIMEOUT_MS. Called with the engine lock held. */
    uccl_status_t (*remote_ptr)(uccl_tp_ep_t *ep, const struct uccl_req_remote *remote,
                                void **ptr);
};


/* ================================================================ requests
 * What a transport receives in post_* and completes with uccl_req_complete.
 * Three kinds of fields: those the core sets before the post (read-only for
 * the transport), the transport's scratch (free for the transport holding
 * the request), and the core's own (never touched by a transport). */

typedef enum {
    UCCL_OP_SEND,
    UCCL_OP_RECV,
    UCCL_OP_WRITE,
    UCCL_OP_READ,
    UCCL_OP_USER, /* generalized request (greq.c): no transport, no conn */
    UCCL_OP_MSG,  /* writemsg/readmsg: finishes when its child requests do */
} uccl_op_t;

/* One local piece: addr is the absolute address (region + offset). */
typedef struct uccl_req_iov {
    void *addr;
    size_t len;
    uccl_region_t *region; /* uccl_region_memh(region, tp): the transport's handle */
    uccl_mr_t *mr;         /* core only */
} uccl_req_iov_t;

/* The remote side of a one-sided operation, decoded from its descriptor,
 * already bounds-checked: addr is the absolute remote address; rkey is the
 * descriptor's key slot of the request's transport (rkey_len 0: none, the
 * owner could not give this transport a key for the region). */
typedef struct uccl_req_remote {
    uint64_t addr;
    uint64_t len;
    uint64_t region_id;
    uccl_mem_type_t mem_type;
    int device;
    uint8_t rkey_len;
    uint8_t rkey[UCCL_TP_RKEY_MAX];
} uccl_req_remote_t;

/* One remote range of a request with several (UCCL_TP_CAP_RSEG): absolute
 * address, bytes; all in remote's region, under its key. */
typedef struct uccl_req_rseg {
    uint64_t addr;
    uint64_t len;
} uccl_req_rseg_t;

struct uccl_req {
    /* ---- set by the core; read-only for the transport */
    uint32_t magic;
    bool done;         /* completed (uccl_req_complete ran) */
    bool detached;     /* the user freed it in flight: recycle on completion */
    bool persistent;   /* uccl_send_init / uccl_recv_init: started again and again */
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_tp_ep_t *ep;
    uccl_status_t status;
    size_t bytes;      /* bytes moved (receive: the message length) */
    uccl_op_t op;
    uint64_t tag;
    size_t len;        /* sum of iov lengths */
    uint64_t gpu_caps; /* UCCL_TP_CAP_{CUDA,ROCM}_MEM of the local pieces' memory */
    int iovcnt;        /* pieces in iov[] (at the end of the struct) */
    uccl_req_remote_t remote;
    /* nrseg > 1 (UCCL_TP_CAP_RSEG only): the request's bytes go to these
     * ranges in turn, rseg[] at the end (remote.addr is rseg[0].addr,
     * remote.len the sum); 0: one range, remote.addr / remote.len */
    int nrseg;
    bool has_notif;
    uint64_t notif;
    uint64_t msg_seq;  /* send: the connection's message number; carry it to the peer */
    /* ---- transport scratch: free for the transport that holds the request */
    uccl_list_t tp_link;
    uint64_t tp_data[8];
    void *tp_ptr;
    /* ---- core only */
    uccl_req_progress_fn_t user_progress; /* UCCL_OP_USER */
    void *user_arg;
    struct uccl_req *parent;  /* a piece of a writemsg/readmsg: counts down parent */
    int children;             /* UCCL_OP_MSG: pieces not finished yet */
    uccl_status_t children_status; /* UCCL_OP_MSG: first error of a piece */
    struct uccl_msg_tail *tail; /* UCCL_OP_MSG: the notifying piece, posted last */
    uccl_list_t conn_link;    /* conn->reqs; UCCL_OP_USER: engine->user_reqs */
    uccl_list_t match_link; /* receive: on conn->posted until matched */
    uccl_list_t pool_link;
    /* ---- set by the core; read-only for the transport. Last: 3 KiB of
     * which a message uses the first entries, so that the fields above,
     * touched by every message, share few cache lines. */
    uccl_req_iov_t iov[UCCL_IOV_MAX];
    uccl_req_rseg_t rseg[UCCL_IOV_MAX];
};

/* Finish a request (transports call this exactly once per posted request). */
void uccl_req_complete(uccl_req_t *req, uccl_status_t status, size_t bytes);

/* An iov cursor: a position in a request's local pieces, walked by bytes
 * (the one loop over req->iov[] that transports and core share). */
typedef struct uccl_req_cur {
    const uccl_req_t *req;
    int i;      /* piece at the cursor (req->iovcnt at the end) */
    size_t off; /* bytes into it */
} uccl_req_cur_t;

/* Put cur at byte off of req's pieces (at the end when off >= req->len). */
static inline void uccl_req_cur_init(uccl_req_cur_t *cur, const uccl_req_t *req, size_t off)
{
    cur->req = req;
    cur->i = 0;
    while (cur->i < req->iovcnt && off >= req->iov[cur->i].len)
        off -= req->iov[cur->i++].len;
    cur->off = cur->i < req->iovcnt ? off : 0;
}

/* The contiguous bytes at cur, at most max of them, and move past them:
 * returns how many (0 at the end or for max 0), *addr their address and
 * *index (may be NULL) the piece they are in. Empty pieces are skipped. */
static inline size_t uccl_req_cur_next(uccl_req_cur_t *cur, size_t max, uint8_t **addr, int *index)
{
    const uccl_req_t *req = cur->req;
    size_t n;

    while (cur->i < req->iovcnt && cur->off >= req->iov[cur->i].len) {
        cur->i++;
        cur->off = 0;
    }
    if (cur->i >= req->iovcnt || max == 0)
        return 0;
    n = req->iov[cur->i].len - cur->off;
    if (n > max)
        n = max;
    *addr = (uint8_t *)req->iov[cur->i].addr + cur->off;
    if (index != NULL)
        *index = cur->i;
    cur->off += n;
    return n;
}

/* Copy len bytes starting at byte offset off of the request's local iov
 * from/to a flat buffer; the helpers transports use to scatter/gather. */
void uccl_req_iov_copy_in(uccl_req_t *req, size_t off, const void *src, size_t len);
void uccl_req_iov_copy_out(const uccl_req_t *req, size_t off, void *dst, size_t len);

/* ================================================================ matching
 * Every send gets a per-connection message number (req->msg_seq) that its
 * transport carries to the peer. Messages of one connection may arrive on
 * different transports (host memory on shm, GPU memory on gpu_ipc), so the
 * receiving core, not the transport, pairs them with receives: a message is
 * matched only once every lower-numbered one has arrived, to the oldest
 * receive with its tag, so (conn, tag) keeps posting order whatever the
 * transports. The one rule a sender must keep: once post_send returned OK,
 * the message header reaches the peer (or the connection fails), else every
 * later message of the connection waits for it. */

/* A message that arrived and waits for a receive; a transport embeds it in
 * its own record of the message (payload or rendezvous data). */
struct uccl_msg {
    uint64_t seq, tag, len;
    /* Set by the transport once every byte is here: msg_deliver into a host
     * receive then finishes it at once, without the peer, so the message
     * outlives a failed connection (the core salvages it). */
    bool complete;
    /* What the transport keeps for it while held (a payload copy; 0 for a
     * rendezvous header): counted against UCCL_UNEXPECTED_MAX per connection. */
    size_t bytes;
    uccl_tp_ep_t *ep; /* set by uccl_msg_hold */
    uccl_list_t link; /* core only */
};

/* A message header came in: *req is the receive to deliver it into now, or
 * NULL: then the transport records the message and hands the record to
 * uccl_msg_hold before it handles anything else; the core gives it back
 * through ops->msg_deliver once a receive takes it. Receives met on the way
 * that cannot take it fail: too small with UCCL_ERR_TRUNCATED, GPU memory
 * the transport cannot write with UCCL_ERR_UNSUPPORTED. A number seen before fails
 * with UCCL_ERR_TRANSPORT (the transport fails the connection). */
uccl_status_t uccl_msg_arrived(uccl_conn_t *conn, const uccl_tp_ep_t *ep, uint64_t seq,
                               uint64_t tag, uint64_t len, uccl_req_t **req);
void uccl_msg_hold(uccl_conn_t *conn, uccl_tp_ep_t *ep, uccl_msg_t *msg);
/* For a transport that lets its provider place a message straight into a
 * receive (ofi's direct sends): the number of the next message to arrive
 * on conn (every lower one has), and in *req the receive that message goes
 * to if it has that receive's tag and fits: the oldest posted receive, NULL
 * when none is posted or conn failed. The receive stays the core's: the
 * transport may let the message numbered the return value land in req's
 * pieces, and must then hand it in through uccl_msg_arrived as any other,
 * which gives req back when the tag was req's (else the bytes belong to
 * whatever uccl_msg_arrived says, and req's pieces were only scratch). */
uint64_t uccl_msg_next(uccl_conn_t *conn, uccl_req_t **req);
/* The receive posted on conn after req (req still posted), NULL when none
 * or conn failed: the one message `uccl_msg_next + k` goes to when it and
 * the k messages before it have the tag of req and of the k receives
 * before it (which all take it), for a transport that posts ahead. */
uccl_req_t *uccl_msg_posted_after(uccl_conn_t *conn, uccl_req_t *req);
/* A number that changes whenever conn's posted receives or the next
 * message number (uccl_msg_next) change, or conn fails: a transport that
 * derives state from them (posted-ahead receives) recomputes it only then. */
uint64_t uccl_msg_gen(const uccl_conn_t *conn);

/* ================================================================ connections */

/* Called by transports when a connection cannot go on (peer gone, link
 * error). Marks it failed now; endpoints are torn down and its requests
 * completed with status by the engine's next progress, outside the
 * transport's own progress call. */
void uccl_conn_fail(uccl_conn_t *conn, uccl_status_t status);
/* Deliver a notification that arrived for conn. */
uccl_status_t uccl_conn_notif_push(uccl_conn_t *conn, uint64_t value);
/* UCCL_OK while the connection is usable, else the error that failed it. */
uccl_status_t uccl_conn_status(const uccl_conn_t *conn);
/* The peer's host name and process id, for messages. */
const char *uccl_conn_peer_host(const uccl_conn_t *conn);
int uccl_conn_peer_pid(const uccl_conn_t *conn);

/* ================================================================ regions */

/* Target-side check of a remote access (tcp, shm): region id must be of this
 * engine's incarnation (else UCCL_ERR_STALE: a descriptor from before a
 * restart; hand it back to the initiator as is), live and [addr, addr+len)
 * inside it (else UCCL_ERR_REMOTE_ACCESS). */
uccl_status_t uccl_engine_region_find(uccl_engine_t *engine, uint64_t region_id, uint64_t addr,
                                      uint64_t len, uccl_region_t **region);
/* What a transport may read of a region: its range, memory type, the id
 * remote descriptors carry, and the handle tp's mem_reg returned for it
 * (NULL when tp registers nothing). */
void *uccl_region_addr(const uccl_region_t *region);
size_t uccl_region_len(const uccl_region_t *region);
uccl_mem_type_t uccl_region_mem_type(const uccl_region_t *region);
uint64_t uccl_region_id(const uccl_region_t *region);
uccl_tp_memh_t *uccl_region_memh(const uccl_region_t *region, const uccl_tp_t *tp);
/* A copy into or out of the region goes on outside the target's checks
 * (shm: the peer's part of a split transfer, the CMA helper's piece): while
 * held, uccl_mr_dereg of its last handle fails with UCCL_ERR_BUSY, so that
 * nothing lands in (or is read from) memory the user took back. Every hold
 * is released, at the latest when its connection's endpoint is destroyed. */
void uccl_region_hold(uccl_region_t *region);
void uccl_region_unhold(uccl_region_t *region);
/* Is [addr, addr+len) inside host memory of uccl_mem_alloc that a peer on
 * this host may map? Then *fd is the memfd behind it (owned by the core,
 * open until uccl_mem_free), *base and *size the allocation's mapping, and
 * *id (where not NULL) the allocation's number in this process, which a
 * later allocation reusing the same fd and address does not share. */
bool uccl_tp_host_shared(const void *addr, size_t len, int *fd, uint64_t *base, size_t *size,
                         uint32_t *id);

/* Stream holds of the engine not released yet (uccl_stream_hold): while
 * any is, a caller's GPU stream waits on this engine's progress, so
 * progress must not make a call that synchronizes the device
 * (cudaIpcCloseMemHandle, cudaFree, cudaFreeHost): defer it. */
int uccl_engine_stream_holds(const uccl_engine_t *engine);

/* Have the caller's streams passed every stream-ordered call of this engine
 * enqueued so far? True when each stream word (uccl_stream_word_alloc) has
 * reached the last value a uccl_stream_ops WRITE enqueued for it; false
 * while one has not, or while words are not tracked. A transport that
 * handed out a pointer (rdesc_ptr) for such calls closes its mapping only
 * then: until a failed call's stream is released (by this engine's
 * progress) its copies may still be queued behind a wait. */
bool uccl_engine_streams_passed(uccl_engine_t *engine);

/* ================================================================ topology and NICs
 * The engine loads the machine topology at most once (on first use, with
 * UCCL_TOPO_XML and the GPU runtime's ordinals) and shares it with every
 * transport and its progress thread. Call these from open (or under the
 * engine lock). */
typedef struct uccl_topo uccl_topo_t;

/* The engine's topology (src/topo/topo.h), or NULL with *status saying why:
 * UCCL_ERR_UNSUPPORTED (built without hwloc) or the error of uccl_topo_load.
 * Owned by the engine; never free it. status may be NULL. */
const uccl_topo_t *uccl_tp_topo(const uccl_tp_open_params_t *params, uccl_status_t *status);

#define UCCL_TP_NICS_MAX 16
#define UCCL_TP_NIC_NAME_MAX 64
#define UCCL_TP_NIC_BUSID_MAX 16
#define UCCL_TP_NICS_WHY_MAX 384

/* NICs for a transport, best first. */
typedef struct uccl_tp_nics {
    int n;
    struct {
        char name[UCCL_TP_NIC_NAME_MAX];   /* mlx5_0, rxe0, cxi0, eth0 */
        int port;                          /* 1-based, 0 = any active port */
        char netdev[UCCL_TP_NIC_NAME_MAX]; /* its network interface, "" unknown */
        char busid[UCCL_TP_NIC_BUSID_MAX]; /* its PCI bus id "dddd:bb:dd.f", "" unknown */
    } nic[UCCL_TP_NICS_MAX];
    bool configured;                 /* from params->net_devices, as given (not checked) */
    char why[UCCL_TP_NICS_WHY_MAX];  /* one line to log at info: what and why */
} uccl_tp_nics_t;

/* The NICs a transport of the given kinds (UCCL_TOPO_NIC_* of topo/topo.h,
 * e.g. UCCL_TOPO_NIC_VERBS) should use for this engine, best first:
 *  - configured devices (params->net_devices, "name[:port],...") win: listed
 *    in the order given, configured = true, not checked against the machine
 *    (the transport knows its devices and names the unknown ones; netdev and
 *    busid stay "");
 *  - else the topology's choice: the NICs nearest the engine's GPU (host
 *    memory: this process's NUMA node), equally near ones all listed and
 *    rotated so that GPUs sharing them spread over them; NICs down skipped;
 *    a transport whose devices have other names (libfabric domains) matches
 *    them by name, netdev or busid.
 * Errors: UCCL_ERR_UNSUPPORTED (no topology: built without hwloc), the
 * errors of uccl_topo_load, UCCL_ERR_NOT_FOUND / UCCL_ERR_NO_DEVICE (no
 * usable NIC of those kinds), UCCL_ERR_INVALID_PARAM (a malformed list; the
 * engine refuses those at creation already). out->why says more. A caller
 * falls back to its own default (e.g. the first active device) on error. */
uccl_status_t uccl_tp_nics(const uccl_tp_open_params_t *params, unsigned kinds,
                           uccl_tp_nics_t *out);

/* ================================================================ the registry */

/* Caps of an opened transport instance. */
static inline uint64_t uccl_tp_caps(const uccl_tp_t *tp) { return tp->ops->caps | tp->open_caps; }

/* The transports compiled in, NULL-terminated, in no particular order. */
const struct uccl_tp_ops *const *uccl_tp_list(void);
/* Hand the config tables of the transports compiled in to the registry
 * (util/config.h), and the prefixes of those left out. */
void uccl_tp_config_register(void);

/* Optional ops are checked by table size and non-NULL (libfabric FI_CHECK_OP). */
#define UCCL_TP_HAS_OP(ops, op) \
    ((ops)->size > offsetof(struct uccl_tp_ops, op) && (ops)->op != NULL)

#endif

/* The transport interface: one ops table per transport (src/tp/NAME/), filled
 * with designated initializers. The core asks capabilities, never names. */
#ifndef UCCL_CORE_TP_H
#define UCCL_CORE_TP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "util/config.h"
#include "util/list.h"

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
};

/* Owners of remote-descriptor key slots (uccl_tp_ops.rkey_owner): one number
 * per transport that needs remote keys, fixed on the wire (rdesc.c). Never
 * reuse a number; 0 marks the end of the slots. */
enum {
    UCCL_TP_KEY_NONE = 0,
    UCCL_TP_KEY_VERBS = 1,
    UCCL_TP_KEY_OFI = 2, /* reserved for the libfabric transport */
};

typedef struct uccl_tp uccl_tp_t;
typedef struct uccl_tp_ep uccl_tp_ep_t;
typedef struct uccl_tp_memh uccl_tp_memh_t;
typedef struct uccl_msg uccl_msg_t; /* core.h */

/* Base of a transport instance (one per engine and transport); a transport
 * embeds it as the first member of its own struct. */
struct uccl_tp {
    const struct uccl_tp_ops *ops;
    uccl_engine_t *engine;
    int index; /* slot in the engine's transport array and in region memh arrays */
    /* Memory caps (UCCL_TP_CAP_*_MEM) this instance gained at open beyond
     * ops->caps, e.g. GPU memory staged through host buffers when a GPU is
     * present; open may set it, the core ORs it with ops->caps. */
    uint64_t open_caps;
};


/* Base of a transport endpoint (one per connection and transport). */
struct uccl_tp_ep {
    uccl_tp_t *tp;
    uccl_conn_t *conn;
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

struct uccl_tp_ops {
    size_t size;        /* sizeof(struct uccl_tp_ops) at build time */
    const char *name;   /* "shm", "tcp", ... as in UCCL_TRANSPORTS */
    int priority;       /* higher wins among transports that can reach a peer */
    uint64_t caps;      /* UCCL_TP_CAP_* */
    uint64_t engine_cap; /* the UCCL_CAP_* bit reported when opened */
    uint8_t rkey_owner; /* UCCL_TP_KEY_* of its descriptor slot (UCCL_TP_CAP_RKEY only) */
    const uccl_cfg_table_t *config_table; /* may be NULL */

    /* Open on an engine: allocate a derived struct, fill base.ops; the core
     * sets base.engine and base.index before calling open's caller back.
     * UCCL_ERR_NO_DEVICE = not usable here (logged at info, engine goes on). */
    uccl_status_t (*open)(uccl_engine_t *engine, uccl_tp_t **tp);
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

    /* Data movement: the request (src/core/req.h) carries everything; the
     * transport completes it later with uccl_req_complete(), or returns an
     * error now (then the request is not queued anywhere and nothing went
     * to the peer). A send carries req->msg_seq to the peer. */
    uccl_status_t (*post_send)(uccl_tp_ep_t *ep, uccl_req_t *req);
    /* Receives are matched by the core (core.h, uccl_msg_arrived): it hands
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
};

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

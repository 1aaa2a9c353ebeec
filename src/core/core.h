/* Internal definitions of the core objects: engine, connection, memory
 * region. Private to src/core: transports see the core only through
 * tp_api.h (the transport SPI), which this includes. */
#ifndef UCCL_CORE_CORE_H
#define UCCL_CORE_CORE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "core/core_config.h"
#include "util/bytes.h"
#include "util/config.h"
#include "util/list.h"
#include "util/log.h"
#include "util/pool.h"
#include "util/sys.h"
#include "req.h"
#include "tp_api.h"

#define UCCL_MAGIC_ENGINE 0x454e4743u /* "CGNE" */
#define UCCL_MAGIC_CONN 0x4e4e4f43u
#define UCCL_MAGIC_MR 0x524d4343u
#define UCCL_MAGIC_DEAD 0xdeadbeefu
#define UCCL_ENGINE_SWORDS 64 /* stream words tracked per engine (stream_ops.c) */

#define UCCL_HOSTNAME_MAX 64

/* One registered range shared by every handle that registered it (the
 * registration cache); transports keep their per-region handle in memh. */
struct uccl_region {
    void *addr;
    size_t len;
    uccl_mem_type_t mem_type;
    int device;
    uint64_t id;      /* engine-unique, carried in remote descriptors */
    int refcount;     /* live uccl_mr_t handles */
    uccl_tp_memh_t *memh[UCCL_TP_MAX];
    void *alloc_base; /* GPU allocation holding addr (for IPC), else addr */
    size_t alloc_size;
    bool in_rcache;   /* in engine->rcache_by_range */
    bool released;    /* its memory was freed with uccl_mem_free: stale */
    int held;         /* copies of a peer into or out of it under way that the
                       * target cannot stop (uccl_region_hold) */
};

/* A user's registration handle. */
struct uccl_mr {
    uint32_t magic;
    unsigned flags;
    uccl_engine_t *engine;
    uccl_region_t *region;
    void *addr;
    size_t len;
    int inflight; /* requests that still reference this handle */
    uccl_list_t pool_link;
};

/* Peer's address blob, parsed (pointers point into the parsed buffer). */
typedef struct uccl_address {
    uint16_t version;
    uint64_t engine_id;
    uint64_t host_id;
    uint32_t pid;
    struct sockaddr_in oob;
    char hostname[UCCL_HOSTNAME_MAX];
    uint8_t secret[UCCL_SECRET_SIZE]; /* the engine's admission secret (0s: not given) */
    int ntp;
    struct {
        char name[16];
        const void *addr;
        size_t len;
    } tp[UCCL_TP_MAX];
} uccl_address_t;

/* ---- remote descriptors (rdesc.c): the one parser of untrusted descriptors
 * (layout, version and the key slots are described at the top of rdesc.c) */
#define UCCL_RDESC_VERSION 2
#define UCCL_RDESC_KEY_AREA 20 /* bytes shared by the key slots */
#define UCCL_RDESC_MAX_KEYS (UCCL_RDESC_KEY_AREA / 3) /* a slot takes 2 + at least 1 bytes */

/* One transport's remote key for the region. */
typedef struct uccl_rdesc_key {
    uint8_t owner; /* UCCL_TP_KEY_* (tp_api.h), never 0 */
    uint8_t len;   /* 1..UCCL_TP_RKEY_MAX */
    uint8_t key[UCCL_TP_RKEY_MAX];
} uccl_rdesc_key_t;

typedef struct uccl_rdesc_fields {
    uint64_t engine_id;
    uint64_t region_id;
    uint64_t addr;
    uint64_t len;
    uccl_mem_type_t mem_type;
    int device; /* -1 = none */
    int nkeys;  /* slots in keys[], owners distinct */
    uccl_rdesc_key_t keys[UCCL_RDESC_MAX_KEYS];
} uccl_rdesc_fields_t;

struct uccl_conn {
    uint32_t magic;
    uccl_engine_t *engine;
    uint64_t peer_id;
    uint64_t peer_host_id;
    int peer_pid;
    char peer_host[UCCL_HOSTNAME_MAX];
    bool same_host;
    bool is_initiator;
    uccl_status_t state;  /* UCCL_OK or the error that failed it */
    bool teardown_pending; /* failed: endpoints are released by the next progress */
    int oob_fd;           /* setup socket, kept to notice a peer going away */
    uint64_t peer_gone_ms; /* when that socket closed (0 = still open) */
    uccl_tp_ep_t *ep[UCCL_TP_MAX]; /* indexed by transport slot; NULL = unused */
    int host_tp;          /* slot used for host memory, -1 = none */
    int dev_tp;           /* slot used for GPU memory, -1 = none */
    uccl_list_t reqs;     /* requests in flight on this conn */
    /* Two-sided matching (match.c), common to every transport of the conn. */
    uint64_t tx_msg_seq;  /* number of the next message we send */
    uint64_t rx_msg_next; /* lowest message number not arrived yet */
    uccl_list_t posted;   /* receives not matched yet, in posting order */
    uint64_t match_gen;   /* changes whenever posted or rx_msg_next does (uccl_msg_gen) */
    uccl_list_t held;     /* uccl_msg_t arrived, not matched, by number */
    size_t held_bytes;    /* their msg->bytes, at most cfg.unexpected_max */
    uccl_list_t salvaged; /* failed: messages that fully arrived, for later receives */
    /* the last descriptor a one-range access on conn named, as
     * uccl_rdesc_decode read it (xfer.c): the same bytes again are not
     * decoded again (its checksum was a fifth of a read's own instructions) */
    bool rdesc_cached;
    uccl_rdesc_t rdesc_last;
    uccl_rdesc_fields_t rdesc_last_f;
    uint64_t *notifs;     /* ring of pending notifications */
    size_t notif_head, notif_count, notif_cap;
    uccl_list_t link;     /* engine->conns or engine->accept_q */
    uccl_list_t pool_link;
};

/* What the two proofs of a connection setup cover (setup_auth.h). */
#define UCCL_SETUP_NONCE 16
typedef struct uccl_setup_auth {
    uint64_t to_id, from_id; /* the listening and the connecting engine */
    uint8_t nonce_c[UCCL_SETUP_NONCE], nonce_a[UCCL_SETUP_NONCE];
} uccl_setup_auth_t;

/* An incoming connection whose setup messages are still being read: its
 * hello (challenged: false), then its request (challenged: true). */
typedef struct uccl_handshake {
    int fd;
    bool challenged;
    uccl_setup_auth_t auth;
    uint64_t accepted_ms, deadline_ms;
    uint8_t *buf;
    size_t have, need;
    uccl_list_t link;
} uccl_handshake_t;

struct uccl_engine {
    uint32_t magic;
    /* Serializes every public call; recursive (a transport's progress may
     * call back into the core): a plain mutex plus its holder and depth,
     * cheaper to take and release than a PTHREAD_MUTEX_RECURSIVE one. */
    pthread_mutex_t lock;
    _Atomic uintptr_t lock_owner; /* pthread_self() of the holder; 0: none */
    unsigned lock_depth;          /* the holder's nesting, used by it only */
    uccl_config_t cfg;
    uint64_t id;
    uint64_t host_id;
    int pid;
    char hostname[UCCL_HOSTNAME_MAX];
    uint8_t secret[UCCL_SECRET_SIZE]; /* admission: connects must present it */
    int gpu_index;
    uint64_t caps;
    uccl_tp_t *tp[UCCL_TP_MAX];
    int ntp;
    uccl_tp_open_params_t tp_params; /* what every transport's open got */
    uccl_topo_t *topo;        /* loaded on first use (engine_topo.c), or NULL */
    bool topo_loaded;         /* tried already: topo_status says how it went */
    uccl_status_t topo_status;
    int listen_fd;
    struct sockaddr_in oob_addr;
    uccl_list_t conns;
    uccl_list_t accept_q;
    uccl_list_t handshakes; /* incoming setups not read yet, oldest first */
    int nhandshakes;        /* at most cfg.setup_max_pending */
    uint64_t setup_drops;   /* dropped since the last warning about it */
    uint64_t setup_denied;  /* setups refused for a wrong proof of the secret, ever */
    uint64_t setup_log_ms;  /* no such warning before then */
    uccl_list_t user_reqs; /* generalized requests not finished (greq.c) */
    struct uccl_copy_ctx *copy; /* copy stream, events, stream holds (copy.c) */
    /* Stream holds not released (copy.c): while > 0 a caller's stream waits
     * on this engine's progress, so progress must not make a call that
     * synchronizes the device (cudaIpcCloseMemHandle, cudaFree, ...): it
     * would wait for that stream forever. Transports defer such calls. */
    int stream_holds;
    /* Without a progress thread, a helper thread drives progress while
     * stream_holds > 0 (copy.c), so a caller that synchronizes the device
     * before waiting on the collective does not wait forever.
     * hold_thread_state: 0 none, 1 running, 2 left its loop (joinable). */
    pthread_t hold_thread;
    int hold_thread_state;
    int hold_stop;
    /* Stream words (uccl_stream_word_alloc) and the last value a WRITE op of
     * uccl_stream_ops put on a caller's stream for each (stream_ops.c): the
     * caller's streams have passed every call of the engine enqueued so far
     * once each word reached its value (uccl_engine_streams_passed). Slots
     * are set and cleared under the engine lock, read and written with
     * atomics from the callers' threads; words beyond the table count in
     * sword_untracked (then no stream counts as passed). */
    struct uccl_sword {
        void *dev;
        uint32_t *host;
        uint32_t last;
        int written;
    } sword[UCCL_ENGINE_SWORDS];
    int nsword; /* slots in use so far (a high-water mark) */
    int sword_untracked;
    uccl_list_t msg_tails; /* writemsg requests whose notifying piece is due */
    uccl_pool_t req_pool;
    uccl_pool_t mr_pool;
    uccl_pool_t conn_pool;
    void *rcache_by_range; /* tsearch roots */
    void *region_by_id;
    uint64_t next_region_id;
    uint64_t next_liveness_ms;
    int teardowns_pending; /* failed conns whose endpoints await release */
    bool in_progress; /* progress is not re-entered */
    pthread_t progress_thread;
    volatile int progress_stop;
    bool has_progress_thread;
};

/* ---- writemsg / readmsg (xfer.c) */
/* A piece of a multi-piece request finished (uccl_req_complete calls it). */
void uccl_rma_msg_piece_done(uccl_req_t *parent, uccl_status_t status, size_t bytes);
/* Post the notifying pieces whose other pieces finished; engine teardown
 * cancels them instead. */
int uccl_rma_msg_progress(uccl_engine_t *engine);
void uccl_rma_msg_cancel_all(uccl_engine_t *engine);

/* ---- generalized requests (greq.c) */
/* Run the callback of every generalized request once. */
int uccl_greq_progress(uccl_engine_t *engine);
/* Finish every pending one with UCCL_ERR_CANCELED (engine teardown). */
void uccl_greq_cancel_all(uccl_engine_t *engine);
/* copy.c: release stream holds, drain and free the copy stream (lock held). */
typedef struct uccl_copy_ctx uccl_copy_ctx_t;
void uccl_copy_ctx_destroy(uccl_engine_t *engine);
/* copy.c: stop and join the hold-progress thread (lock NOT held). */
void uccl_copy_hold_thread_stop(uccl_engine_t *engine);

/* ---- engine internals (engine.c) */
/* The engine's topology (engine->cfg.topo_xml or the live machine, with the
 * GPU runtime's ordinals), loaded on the first call (engine_topo.c); NULL
 * with *status (may be NULL) as uccl_topo_load's error. Freed with the
 * engine by uccl_engine_topo_free. */
const uccl_topo_t *uccl_engine_topo(uccl_engine_t *engine, uccl_status_t *status);
void uccl_engine_topo_free(uccl_engine_t *engine);
/* Progress every transport, pending setups, liveness, deferred teardowns. */
int uccl_engine_progress_locked(uccl_engine_t *engine);
uccl_status_t uccl_engine_check(const uccl_engine_t *engine);
/* Refuse malformed settings, naming each (settings.c): every transport's
 * variables, net devices, UCCL_TOPO_XML, the GPU index. */
uccl_status_t uccl_engine_check_settings(const uccl_engine_t *engine, bool net_devices_from_params);
/* Only the holder can find its own id in lock_owner (it stored it, and
 * clears it before the mutex is let go), so a relaxed load decides
 * "mine, nest" without a race; every other thread takes the mutex. */
static inline void uccl_engine_lock(uccl_engine_t *e)
{
    uintptr_t self = (uintptr_t)pthread_self();

    if (atomic_load_explicit(&e->lock_owner, memory_order_relaxed) == self) {
        e->lock_depth++;
        return;
    }
    pthread_mutex_lock(&e->lock);
    atomic_store_explicit(&e->lock_owner, self, memory_order_relaxed);
    e->lock_depth = 1;
}

static inline void uccl_engine_unlock(uccl_engine_t *e)
{
    if (--e->lock_depth > 0)
        return;
    atomic_store_explicit(&e->lock_owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&e->lock);
}

/* ---- address blob (address.c): the one parser of untrusted blobs */
uccl_status_t uccl_address_pack(const uccl_engine_t *engine, void *buf, size_t *len);
/* The same blob without the secret (zeros): what a connecting engine tells
 * the engine it connects to about itself. */
uccl_status_t uccl_address_pack_public(const uccl_engine_t *engine, void *buf, size_t *len);
uccl_status_t uccl_address_parse(const void *buf, size_t len, uccl_address_t *out);

/* ---- connections (conn.c; setup in conn_setup.c) */
/* A fresh connection object of the engine's pool, or NULL. */
uccl_conn_t *uccl_conn_alloc(uccl_engine_t *engine);
uccl_status_t uccl_conn_check(const uccl_conn_t *conn);
void uccl_conn_progress_setup(uccl_engine_t *engine);
/* The setup listener's admission (setup_listen.c): accept within the cap;
 * free a pending setup (its fd is the caller's); note a dropped one. */
void uccl_setup_accept(uccl_engine_t *engine);
void uccl_handshake_free(uccl_engine_t *engine, uccl_handshake_t *hs);
void uccl_setup_drop_note(uccl_engine_t *engine, const char *why);
void uccl_conn_progress_liveness(uccl_engine_t *engine);
void uccl_conn_progress_teardown(uccl_engine_t *engine);
void uccl_conn_destroy(uccl_conn_t *conn, uccl_status_t reason);

/* ---- two-sided matching (match.c; the transports' side is in tp_api.h) */
/* Post a persistent request again, its fields reset (xfer.c; preq.c). */
uccl_status_t uccl_xfer_restart_locked(uccl_req_t *req);

/* A receive was posted (xfer.c). */
void uccl_msg_post_recv(uccl_conn_t *conn, uccl_req_t *req);
/* Forget held messages of a connection going away (their transports free
 * the records in ep_destroy). */
void uccl_msg_forget(uccl_conn_t *conn);
/* The connection failed: before its endpoints go, copy the held messages
 * that fully arrived (in order, up to the first that did not) to the core,
 * so that later receives still get them: a completed send is a promise. */
void uccl_msg_salvage(uccl_conn_t *conn);
/* A receive posted on a failed connection: give it the oldest salvaged
 * message of its tag (host memory only). false = none, req untouched. */
bool uccl_msg_take_salvaged(uccl_conn_t *conn, uccl_req_t *req);
bool uccl_msg_has_salvaged(const uccl_conn_t *conn);
void uccl_msg_salvaged_free(uccl_conn_t *conn);

/* ---- memory (mr.c) */
/* Inline: every transfer checks each of its pieces' regions (ofi16b). */
static inline uccl_status_t uccl_mr_check(const uccl_mr_t *mr)
{
    if (mr == NULL || mr->magic != UCCL_MAGIC_MR)
        return UCCL_ERR_INVALID_HANDLE;
    return UCCL_OK;
}
/* Region ids carry the engine's incarnation in their top 32 bits (those of
 * the engine id) and a counter below, so a target tells a descriptor of an
 * earlier incarnation (a restarted peer at the same address) from one of
 * its own regions without the descriptor's engine id on the wire. */
#define UCCL_REGION_INCARNATION(id) ((uint64_t)(id) >> 32)
static inline uint64_t uccl_region_id_next(uccl_engine_t *engine)
{
    if ((uint32_t)(engine->next_region_id + 1) == 0)
        engine->next_region_id++; /* the counter wrapped: 0 stays unused */
    return (UCCL_REGION_INCARNATION(engine->id) << 32) | (uint32_t)++engine->next_region_id;
}
void uccl_mr_release_all(uccl_engine_t *engine);
/* Mark the regions over [base, base+size) released (stale), out of the
 * range cache (engine lock held; uccl_mem_free). */
void uccl_mr_release_range(uccl_engine_t *engine, const void *base, size_t size);
/* Is a region over [base, base+size) held (uccl_region_hold)? Engine lock held. */
bool uccl_mr_range_held(uccl_engine_t *engine, const void *base, size_t size);
/* Host memory of uccl_mem_alloc (hostmem.c): shared memory peers can map
 * (else a private allocation); uccl_hostmem_size: mapped bytes of the
 * shared allocation starting at ptr (0, *shared false: not one of them);
 * uccl_hostmem_free: false when ptr is not one of them. */
uccl_status_t uccl_hostmem_alloc(size_t len, void **ptr);
size_t uccl_hostmem_size(const void *ptr, bool *shared);
bool uccl_hostmem_free(void *ptr);


/* Errors: UCCL_ERR_INVALID_PARAM (keys that do not fit the key area, a
 * duplicate or zero owner, a key length out of range, a device above 65534). */
uccl_status_t uccl_rdesc_encode(const uccl_rdesc_fields_t *f, uccl_rdesc_t *rdesc);
/* Errors: UCCL_ERR_BAD_DESC (not a descriptor, corrupted or malformed),
 * UCCL_ERR_VERSION (a sound descriptor of another version, e.g. 1). */
uccl_status_t uccl_rdesc_decode(const uccl_rdesc_t *rdesc, uccl_rdesc_fields_t *f);
/* The key slot of owner, or NULL. */
const uccl_rdesc_key_t *uccl_rdesc_key_find(const uccl_rdesc_fields_t *f, uint8_t owner);

/* xfer.c: rdesc's range [roff, roff+len) as the remote side of an access on
 * conn, bounds-checked (UCCL_ERR_BAD_DESC, _VERSION, _STALE: another
 * engine's, _OUT_OF_BOUNDS); then the key slot of ep's transport. */
uccl_status_t uccl_remote_decode(const uccl_conn_t *conn, const uccl_rdesc_t *rdesc, size_t roff,
                                 size_t len, uccl_req_remote_t *remote, uccl_rdesc_fields_t *f);
void uccl_remote_pick_key(const uccl_rdesc_fields_t *f, const uccl_tp_ep_t *ep,
                          uccl_req_remote_t *remote);

#endif

/* Staged GPU memory for the users of the RDMA message protocol (rndv.h):
 * what verbs (without GPUDirect RDMA) and ofi share when GPU memory goes
 * through registered stage buffers (tp/staging.h, whose registration hook
 * each transport sets).
 *
 * A sink (a receive or a read into GPU memory the NIC cannot reach): up to
 * UCCL_RNDV_MAX_SLOTS windows, each a registered stage buffer. A receive
 * grants its windows to the sender (rndv GRANT); a read posts its reads
 * into free windows. Once a window landed it is copied into place on the
 * stage's copy stream and, after that copy, used again further on.
 * The transport supplies two hooks: the segment by which the peer reaches a
 * window (its address as the transport addresses it, and its key), and how a
 * read ends once none of its operations is posted any more.
 *
 * Grants: a send on granted windows keeps the windows not written yet, in
 * order; the data path writes each and closes it with uccl_rndv_imm_chunk. */
#ifndef UCCL_TP_COMMON_RNDV_STAGE_H
#define UCCL_TP_COMMON_RNDV_STAGE_H

#include "tp/common/rndv.h"
#include "tp/staging.h"

typedef struct uccl_rndv_sink uccl_rndv_sink_t;

typedef struct uccl_rndv_slot {
    uccl_rndv_sink_t *sink;
    uccl_stage_buf_t *buf;
    size_t off, len;
    int index;
    bool busy; /* granted or read, or its copy running */
} uccl_rndv_slot_t;

typedef struct uccl_rndv_sink_hooks {
    /* seg->addr and seg->key of window buf as the peer writes or we read
     * it (seg->len is set by the caller) */
    void (*buf_seg)(void *ctx, const uccl_stage_buf_t *buf, uccl_rndv_seg_t *seg);
    /* A read's sink is done (every window copied) or failed (the request
     * has its error): end the read once none of its operations is posted. */
    void (*read_settle)(void *ctx, uccl_req_t *req);
} uccl_rndv_sink_hooks_t;

struct uccl_rndv_sink {
    uccl_rndv_t *r;
    uccl_stage_t *stage;
    const uccl_rndv_sink_hooks_t *hooks;
    void *ctx;
    uccl_req_t *req;
    size_t len, next, copied; /* next: the first byte not granted yet (receive) */
    int nslots;
    uccl_rndv_slot_t slots[UCCL_RNDV_MAX_SLOTS];
};

/* A sink of len bytes for req with up to depth windows of the stage's
 * chunk (at least one: UCCL_ERR_NO_MEMORY without). */
uccl_status_t uccl_rndv_sink_new(uccl_rndv_t *r, uccl_stage_t *stage, int depth,
                                 const uccl_rndv_sink_hooks_t *hooks, void *ctx, uccl_req_t *req,
                                 size_t len, uccl_rndv_sink_t **out);
/* Waits for the sink's queued copies, gives its buffers back. */
void uccl_rndv_sink_free(uccl_rndv_sink_t *sink);
/* A receive: grant the first windows (ops->sink_start). */
uccl_status_t uccl_rndv_sink_start(uccl_rndv_sink_t *sink);
/* Window slot landed (st: how its write or read completed): its copy into
 * place starts; a receive completes, or grants it again, after the copy. */
void uccl_rndv_sink_landed(uccl_rndv_sink_t *sink, int slot, uccl_status_t st);
/* A read: a free window to read the next bytes into (NULL: none now). */
uccl_rndv_slot_t *uccl_rndv_sink_free_slot(uccl_rndv_sink_t *sink);
/* Some window's copy has not finished yet. */
static inline bool uccl_rndv_sink_copying(const uccl_rndv_sink_t *sink)
{
    return sink->copied < sink->len;
}

typedef struct uccl_rndv_grant {
    uint64_t off;
    uccl_rndv_seg_t seg;
    int slot;
} uccl_rndv_grant_t;

typedef struct uccl_rndv_grants {
    int head, n;
    uccl_rndv_grant_t g[UCCL_RNDV_MAX_SLOTS];
} uccl_rndv_grants_t;

/* Queue window slot at byte off of send req: UCCL_ERR_TRANSPORT when the
 * grant is malformed (too many, empty, beyond the message). */
uccl_status_t uccl_rndv_grants_push(uccl_rndv_grants_t *g, const uccl_req_t *req, int slot,
                                    uint64_t off, const uccl_rndv_seg_t *seg);
/* Remote address, key and bytes left at byte off of the oldest window not
 * written yet (0 bytes: none granted that holds off). */
void uccl_rndv_grants_at(const uccl_rndv_grants_t *g, uint64_t off, uint64_t *addr,
                         uint64_t *key, uint64_t *left);
/* The oldest window is written up to byte end of the message: when that
 * closes it, *slot is its slot (to close with uccl_rndv_imm_chunk) and it
 * leaves the queue; returns whether it closed. */
bool uccl_rndv_grants_advance(uccl_rndv_grants_t *g, uint64_t end, int *slot);

/* What a staged request holds, embedded in each transport's per-request
 * record (req->tp_ptr): the pipeline its local GPU data is read through (a
 * send or a write), the sink it lands in (a receive or a read), and a send's
 * granted windows; r is the protocol instance the grants were taken on. */
typedef struct uccl_rndv_staged {
    uccl_rndv_t *r;
    uccl_stage_src_t *src;
    uccl_rndv_sink_t *sink;
    uccl_rndv_grants_t *grants;
} uccl_rndv_staged_t;

/* Staged req reads len bytes of its pieces (gather: a send or a write)
 * through a source pipeline on stage, or lands them (a receive or a read)
 * in a sink of up to depth windows (hooks and ctx: uccl_rndv_sink_new; a
 * sink already made is kept). */
uccl_status_t uccl_rndv_staged_stage(uccl_rndv_staged_t *s, uccl_rndv_t *r, uccl_stage_t *stage,
                                     int depth, const uccl_rndv_sink_hooks_t *hooks, void *ctx,
                                     uccl_req_t *req, size_t len, bool gather);
/* Sender: queue window slot at byte off of send req, granted on r. */
uccl_status_t uccl_rndv_staged_grant(uccl_rndv_staged_t *s, uccl_rndv_t *r, const uccl_req_t *req,
                                     int slot, uint64_t off, const uccl_rndv_seg_t *seg);
/* Finishing req: what staged it goes back (a source's buffers once their
 * copies are done, a sink after its queued copies), a send on granted
 * windows drops its id; s is empty afterwards. */
void uccl_rndv_staged_release(uccl_rndv_staged_t *s, uccl_req_t *req);

/* Copy between req's local pieces and flat[0, len): GPU pieces through the
 * GPU layer (a memcpy on device memory would fault), host pieces by memcpy
 * (ops->mem_copy of a transport that stages). */
uccl_status_t uccl_rndv_iov_copy(uccl_req_t *req, void *flat, size_t len, bool to_iov);

#endif

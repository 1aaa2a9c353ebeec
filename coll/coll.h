/* Private header of the collective layer: per-comm state (buffer cache,
 * scratch pool, notification demultiplexer, sequence), schedules and the
 * algorithm builders. Built on the public API only. */
#ifndef UCCL_COLL_COLL_H
#define UCCL_COLL_COLL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl_coll.h>

/* ------------------------------------------------------------------ log */

/* UCCL_LOG_LEVEL is read once here: coll/ cannot see the config table. */
int uccl_coll_log_enabled(int level); /* 0 error, 1 warn, 2 info, 3 debug */
void uccl_coll_log_emit(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define coll_log(level, ...)                                         \
    do {                                                             \
        if (uccl_coll_log_enabled(level))                                 \
            uccl_coll_log_emit((level), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define coll_error(...) coll_log(0, __VA_ARGS__)
#define coll_debug(...) coll_log(3, __VA_ARGS__)

/* ------------------------------------------------------------------ tags */

/* Top tag byte of collective traffic (inside UCCL_TAG_LIB_MASK), then the
 * collective's sequence number and its step. Notifications carry the same
 * layout plus a code in the low byte. */
#define COLL_TAG_LIB 0x10ull
#define COLL_STEP_TOKEN 0x8000u /* ready tokens of DIRECT, receiver -> sender */

static inline uint64_t coll_tag(uint32_t seq, unsigned step)
{
    return (COLL_TAG_LIB << UCCL_TAG_LIB_SHIFT) | ((uint64_t)seq << 16) | (step & 0xffffu);
}

enum { COLL_NOTIF_OK = 0, COLL_NOTIF_MISMATCH = 1, COLL_NOTIF_REFUSED = 2 };

static inline uint64_t coll_notif(uint32_t seq, unsigned step, unsigned code)
{
    return (COLL_TAG_LIB << UCCL_TAG_LIB_SHIFT) | ((uint64_t)seq << 24) |
           ((uint64_t)(step & 0xffffu) << 8) | (code & 0xffu);
}

/* ------------------------------------------------------------------ per-comm state */

/* A registered user buffer (or the comm's control region, slot 0). Its
 * index in the cache is the slot peers store its descriptor under. */
typedef struct coll_buf_entry {
    char *addr;
    size_t len;
    uccl_mr_t *mr;
    uccl_rdesc_t desc;
    uint32_t gen; /* names this registration among the slot's successive ones */
    uccl_mem_type_t mem_type;
    bool packed;
    int pins;          /* schedules and plans using it */
    uint64_t last_use; /* for LRU eviction */
    uint8_t *sent;     /* [size]: desc already sent to that peer */
} coll_buf_entry_t;

/* A descriptor a peer sent for one of its slots, and which registration. */
typedef struct uccl_coll_peer_desc {
    uccl_rdesc_t desc;
    uint32_t gen; /* 0 = none */
} coll_peer_desc_t;

/* Scratch memory (tokens, Bruck and in-place temporaries), registered once. */
typedef struct coll_scratch {
    char *addr;
    size_t len;
    uccl_mr_t *mr;
    bool busy;
} coll_scratch_t;

/* A plain call's schedule kept for the next call with the same arguments
 * (buffers stay registered and pinned while it is cached). */
#define COLL_PLAN_CACHE 8
typedef struct coll_cached {
    struct coll_sched *sched; /* NULL = empty */
    uccl_coll_args_t key;     /* the caller's arguments; arrays point into vec */
    size_t *vec;              /* [4][size]: the v-variants' arrays as given */
    uint64_t last_use;
} coll_cached_t;

typedef struct coll_mapped coll_mapped_t;         /* coll/mapped.c */
typedef struct coll_mapped_run coll_mapped_run_t; /* a MAPPED schedule's plan */

typedef struct coll_state {
    /* Serializes the comm's collective state between the caller's calls and
     * the progress callbacks of non-blocking ones (which only try it: they
     * run under the engine lock, and the caller may hold this one while it
     * calls into the engine). */
    pthread_mutex_t lock;
    uccl_comm_t *comm;
    uccl_engine_t *engine;
    int rank, size;
    bool oversubscribed; /* this host runs more of the comm's ranks than it has CPUs */
    bool trace;          /* UCCL_COLL_TRACE is on (read once at creation) */
    bool net;            /* some peer is reached over a network transport (not shm) */
    bool net_agreed;     /* net is every rank's (uccl_coll_net_agree), not this engine's */
    bool copy_helper;    /* large host copies go to the copy helper (helper.c) */
    size_t copy_min;     /* from this many bytes */
    struct coll_helper *helper; /* its thread, started on first use */
    uint64_t *host_id; /* [size]: engine host identity of each rank */
    uint32_t seq;
    coll_buf_entry_t *bufs; /* [nbufs]; slot 0 = control region */
    int nbufs;
    uint64_t use_clock;
    coll_scratch_t *scratch;
    int nscratch;
    uint32_t gen_clock;
    coll_peer_desc_t **peer_desc; /* [peer][slot]: descriptors peers sent us */
    int *peer_ndesc;          /* [peer]: slots allocated */
    uint64_t **stash;         /* [peer]: notifications polled for others */
    int *nstash, *capstash;
    struct coll_sched *inflight; /* schedules running (list) */
    uccl_coll_stats_t stats;
    coll_cached_t cache[COLL_PLAN_CACHE];
    int cache_last;           /* the entry of the last hit: looked at first */
    char ctl[64];             /* sink of empty and refused DIRECT writes */
    coll_mapped_t *mapped;    /* MAPPED's segments, made on its first use */
    int mapped_ok;            /* 0 not tried yet, 1 every rank maps every peer, -1 not */
    bool mapped_gpu;          /* every rank reaches every peer by gpu_ipc: AUTO leaves
                               * MAPPED out (GPU buffers would be staged through it) */
    struct uccl_coll_sflags *sf; /* direct stream path (stream.c), NULL until the first stream call */
    struct uccl_coll_plan *plans; /* persistent plans not freed yet (coll.c) */
} coll_state_t;

/* The copy helper (helper.c): a thread per comm that runs large local host
 * copies beside the caller. init decides from the host's CPUs and ranks on
 * it (UCCL_COLL_COPY_THREAD, UCCL_COLL_COPY_MIN); post queues a copy (false:
 * copy inline) in *slot; done says whether it is finished (wait: until it
 * is) and then frees the slot. */
#define COLL_COPY_MIN_DEFAULT (64u << 10)
typedef struct coll_helper coll_helper_t;
void uccl_coll_helper_init(coll_state_t *cs, long cpus, long local);
bool uccl_coll_helper_post(coll_state_t *cs, void *dst, const void *src, size_t len, int *slot);
bool uccl_coll_helper_done(coll_state_t *cs, int slot, bool wait);
void uccl_coll_helper_destroy(coll_state_t *cs);

/* Lazy communicators (boot.c, comm.c): made from the bootstrap's tables
 * with no connection; uccl_comm_conn connects a peer on first use (the
 * lower rank connects, the higher accepts). addr: the peers' address blobs
 * back to back, addr_len[r] bytes each. */
uccl_status_t uccl_comm_create_lazy(uccl_engine_t *engine, bool owns_engine, int rank, int size,
                                    const uint64_t *host_ids, const uint64_t *engine_ids,
                                    const uint8_t *const *addr, const uint32_t *addr_len,
                                    uccl_comm_t **comm);
uint64_t uccl_comm_host_id(const uccl_comm_t *comm, int r);

/* The comm's collective state, created on first use (comm.c keeps it). */
uccl_status_t uccl_coll_state_create(uccl_comm_t *comm, coll_state_t **cs);
uccl_status_t uccl_coll_state_get(uccl_comm_t *comm, coll_state_t **cs);
void uccl_coll_state_destroy(coll_state_t *cs);

/* Plain-call keys (cache.c): args equal to a kept key (same op, buffers,
 * count, root, algo, and v-arrays by content); keep a copy of args in key
 * (v-arrays copied into *vec, to free). */
bool uccl_coll_args_same(const coll_state_t *cs, const uccl_coll_args_t *k, const uccl_coll_args_t *a);
bool uccl_coll_args_keep(const coll_state_t *cs, const uccl_coll_args_t *args, uccl_coll_args_t *key,
                         size_t **vec);

/* Find or register [addr, addr+len) (len > 0); pins the entry. counted:
 * the look-up counts in cs->stats (buf_hits, buf_regs). */
uccl_status_t uccl_coll_buf_get(coll_state_t *cs, const void *addr, size_t len, bool counted,
                                int *slot);
void uccl_coll_buf_unpin(coll_state_t *cs, int slot);
/* Its memory was freed with uccl_mem_free (the registration is stale).
 * Slot 0 and unregistered (-1) never are: inline, so that a plan-cache hit
 * pays no call for them. */
bool uccl_coll_buf_query_stale(coll_state_t *cs, int slot);
static inline bool uccl_coll_buf_stale(coll_state_t *cs, int slot)
{
    return slot > 0 && uccl_coll_buf_query_stale(cs, slot);
}
/* Packs the entry's descriptor once. */
uccl_status_t uccl_coll_buf_desc(coll_state_t *cs, int slot, const uccl_rdesc_t **desc);

uccl_status_t uccl_coll_scratch_get(coll_state_t *cs, size_t len, int *idx);
void uccl_coll_scratch_put(coll_state_t *cs, int idx);

/* Store / look up a descriptor peer sent for registration gen of its slot
 * (NULL until the token carrying it has been read: tokens of concurrent
 * collectives may be read out of order). */
uccl_status_t uccl_coll_peer_desc_set(coll_state_t *cs, int peer, int slot, uint32_t gen,
                                 const uccl_rdesc_t *d);
const uccl_rdesc_t *uccl_coll_peer_desc(const coll_state_t *cs, int peer, int slot, uint32_t gen);

/* Take notification (seq, step, any code) from peer if it arrived: returns
 * UCCL_OK with *code set, UCCL_INPROGRESS when not yet, or the
 * connection's error. Other notifications are kept for their takers. */
uccl_status_t uccl_coll_notif_take(coll_state_t *cs, int peer, uint32_t seq, unsigned step,
                              unsigned *code);

/* ------------------------------------------------------------------ schedules */

typedef enum {
    COLL_BUF_SEND = 0,
    COLL_BUF_RECV,
    COLL_BUF_TMP,
    COLL_BUF_COUNT,
} coll_buf_id_t;

typedef enum {
    COLL_OP_SEND,    /* two-sided: [buf+off, len) to peer, tag step */
    COLL_OP_RECV,    /* two-sided: exactly len bytes from peer into buf+off */
    COLL_OP_COPY,    /* local copy buf2+off2 -> buf+off (memmove, or uccl_copy_post
                      * when GPU memory is involved) */
    COLL_OP_PUT,     /* DIRECT sender: wait for peer's token, write_notify */
    COLL_OP_WAITPUT, /* DIRECT receiver: send token for buf+off/len, wait notif */
    COLL_OP_MAPPED,  /* the whole MAPPED collective (coll/mapped.c, s->mapped) */
} coll_op_kind_t;

typedef struct coll_op {
    uint8_t kind, buf, buf2;
    int peer;
    unsigned step;
    size_t off, off2, len;
    /* runtime */
    int state;
    uccl_req_t *req, *req2;
    uccl_req_t *preq; /* kept schedules' send/recv: persistent request (sched.c) */
    int scratch; /* token memory, -1 = none */
    int helper_slot; /* COPY run by the copy helper: its job, -1 = none */
} coll_op_t;

typedef struct coll_sched {
    coll_state_t *cs;
    uint32_t seq;
    coll_op_t *ops;
    int nops, capops;
    int *phase_end; /* ops of phase p: [phase_end[p-1], phase_end[p]) */
    int nphases, capphases;
    int cur_phase; /* -1 = not started */
    bool posted;   /* ops of cur_phase posted */
    /* buffers: address and registered slot (-1: none/empty) */
    char *addr[COLL_BUF_COUNT];
    size_t len[COLL_BUF_COUNT];
    int slot[COLL_BUF_COUNT];
    int tmp_scratch;
    uccl_status_t status; /* INPROGRESS while running */
    uccl_status_t soft_error; /* a count mismatch seen; the schedule goes on */
    uint64_t last_event_ms; /* last op completion, for the no-progress timeout */
    struct coll_sched *next_inflight;
    bool pinned;
    /* stream form: start once gate (an event on the caller's stream)
     * completes; release hold (later work on that stream) at the end */
    uccl_req_t *gate;
    uccl_stream_hold_t *hold;
    bool keep; /* a plan's or a cached one: stays pinned when it ends */
    /* the library's own call (uccl_coll_internal): the comm's counters
     * (uccl_coll_stats_t) leave it out, at every site that counts */
    bool internal;
    /* generalized request of a non-blocking start */
    uccl_req_t *greq;
    bool free_when_done; /* plain post: the schedule frees itself */
    bool dropped;        /* stream form, req NULL: nobody sees the status, an error is logged */
    struct uccl_coll_plan *plan;
    coll_mapped_run_t *mapped; /* MAPPED: its writes, reads and copies */
    /* UCCL_COLL_GPU_COPY_LATE: the phase's GPU copies held back (state
     * COLL_OP_HELD) until this many progress rounds after its transfers */
    int held;
    bool phase_xfer;    /* the current phase has transfers to or from peers */
    unsigned rounds, post_round; /* engine progress rounds of this call; at the phase's post */
    uint64_t trace_t0;  /* UCCL_COLL_TRACE: the call's start (ns), 0 = off */
} coll_sched_t;

#define COLL_OP_HELD (-2) /* op state: a GPU copy not posted yet (held) */

/* UCCL_COLL_TRACE (coll/trace.c): a host-time profile of the schedules'
 * steps, printed at exit; uccl_coll_trace_now is 0 when it is off. */
bool uccl_coll_trace_on(void);
uint64_t uccl_coll_trace_now(void);
void uccl_coll_trace_post(const coll_sched_t *s, const coll_op_t *op, uint64_t t0);
void uccl_coll_trace_done(const coll_sched_t *s, const coll_op_t *op);
void uccl_coll_trace_late(const coll_sched_t *s);
void uccl_coll_trace_phase(const coll_sched_t *s, uint64_t t0);
void uccl_coll_trace_end(const coll_sched_t *s);
/* UCCL_COLL_GPU_COPY_LATE: progress rounds a phase's local GPU copies wait
 * after its transfers are posted (0 = posted with them). */
unsigned uccl_coll_gpu_copy_late(void);

/* Building (algorithm files). */
/* Tree algorithms number ranks from their root: virtual rank v is real
 * rank (v + root) % n. */
static inline int coll_real_rank(int v, int root, int n)
{
    return (v + root) % n;
}

/* Add op to the open phase. */
uccl_status_t uccl_coll_sched_op(coll_sched_t *s, coll_op_t op);
uccl_status_t uccl_coll_sched_phase(coll_sched_t *s); /* close the current phase */
void uccl_coll_sched_free(coll_sched_t *s);
void uccl_coll_sched_link(coll_sched_t *s);   /* onto the comm's running list */
void uccl_coll_sched_unlink(coll_sched_t *s);

/* A peer op (SEND, RECV, PUT, WAITPUT) on [buf+off, len). */
static inline uccl_status_t coll_peer_op(coll_sched_t *s, coll_op_kind_t kind, int peer, int buf,
                                         size_t off, size_t len)
{
    return uccl_coll_sched_op(s, (coll_op_t){.kind = (uint8_t)kind, .buf = (uint8_t)buf,
                                             .peer = peer, .off = off, .len = len});
}
static inline uccl_status_t coll_send(coll_sched_t *s, int peer, int buf, size_t off, size_t len)
{
    return coll_peer_op(s, COLL_OP_SEND, peer, buf, off, len);
}
static inline uccl_status_t coll_recv(coll_sched_t *s, int peer, int buf, size_t off, size_t len)
{
    return coll_peer_op(s, COLL_OP_RECV, peer, buf, off, len);
}
static inline uccl_status_t coll_copy(coll_sched_t *s, int dbuf, size_t doff, int sbuf,
                                      size_t soff, size_t len)
{
    if (len == 0 || (dbuf == sbuf && doff == soff))
        return UCCL_OK;
    return uccl_coll_sched_op(s, (coll_op_t){.kind = COLL_OP_COPY, .buf = (uint8_t)dbuf,
                                        .buf2 = (uint8_t)sbuf, .off = doff, .off2 = soff,
                                        .len = len});
}
static inline uccl_status_t coll_put(coll_sched_t *s, int peer, int buf, size_t off, size_t len)
{
    return coll_peer_op(s, COLL_OP_PUT, peer, buf, off, len);
}
static inline uccl_status_t coll_waitput(coll_sched_t *s, int peer, int buf, size_t off, size_t len)
{
    return coll_peer_op(s, COLL_OP_WAITPUT, peer, buf, off, len);
}

/* Shared by sched.c and direct.c: where buf+off lies (a region and an
 * offset); a request's status without progressing (INPROGRESS, or its final
 * status with bytes set); DIRECT's ops (PUT, WAITPUT) posted and advanced. */
/* A schedule's buffers registered and pinned, its temporary taken (once
 * for a kept schedule), and released (state.c). */
uccl_status_t uccl_coll_sched_pin(struct coll_sched *s);
void uccl_coll_sched_unpin(struct coll_sched *s);
uccl_mr_t *uccl_coll_buf_mr(const coll_sched_t *s, int buf, size_t off, size_t len, size_t *moff);
uccl_status_t uccl_coll_req_status(uccl_req_t *req, size_t *bytes);
uccl_status_t uccl_coll_direct_post(coll_sched_t *s, coll_op_t *op, uccl_conn_t *conn);
uccl_status_t uccl_coll_direct_advance(coll_sched_t *s, coll_op_t *op);

/* Running. start registers the buffers and takes a sequence number;
 * advance moves the schedule on (never progresses the engine itself) and
 * returns its status (INPROGRESS while running); abort fails it. */
uccl_status_t uccl_coll_sched_start(coll_sched_t *s);
uccl_status_t uccl_coll_sched_advance(coll_sched_t *s);
void uccl_coll_sched_abort(coll_sched_t *s, uccl_status_t st);
/* Blocking: advance and progress until done; a stretch of UCCL_TIMEOUT_MS
 * without any op completing ends it with UCCL_ERR_TIMEOUT. */
uccl_status_t uccl_coll_sched_run(coll_sched_t *s);
/* The same, called with cs->lock held just after start (released on
 * return): one phase of small two-sided transfers takes a fast path. */
uccl_status_t uccl_coll_sched_run_locked(coll_sched_t *s);
/* Non-blocking: a generalized request that advances s from progress. On
 * failure s is aborted and stays the caller's to free. */
uccl_status_t uccl_coll_sched_post(coll_sched_t *s, uccl_req_t **req);
/* Stream form: gate s on the work queued on stream so far and hold the
 * stream's later work until s ends; before uccl_coll_sched_post. */
uccl_status_t uccl_coll_sched_stream(coll_sched_t *s, void *stream);

/* The direct stream path (stream.c): enqueue the whole collective on
 * stream when every rank can (*taken = true: its status is the call's);
 * else *taken = false and the hold path runs. Collective. Without
 * cs->lock. destroy: the comm's part of it (requests in flight keep theirs). */
uccl_status_t uccl_coll_stream_try(uccl_comm_t *comm, const uccl_coll_args_t *args, void *stream,
                                   uccl_req_t **req, bool *taken);
void uccl_coll_stream_destroy(coll_state_t *cs);
/* Under cs->lock: drop the stream form's cached plans (their pins). */
void uccl_coll_stream_flush(coll_state_t *cs);
/* A direct stream call of the comm not passed by this rank's stream yet. */
bool uccl_coll_stream_busy(coll_state_t *cs);

/* ------------------------------------------------------------------ collectives */

/* Checked arguments with the arrays copied (plans keep them). */
typedef struct coll_args {
    uccl_coll_op_t op;
    uccl_coll_algo_t algo; /* resolved, never AUTO */
    const char *sendbuf;   /* NULL when in place */
    char *recvbuf;
    size_t count;
    size_t *sendcounts, *sdispls, *recvcounts, *rdispls; /* [size] or NULL */
    int root;
    bool in_place;
} coll_args_t;

uccl_status_t uccl_coll_args_check(coll_state_t *cs, const uccl_coll_args_t *in, coll_args_t *out);
/* allgather(v), alltoall(v) not in place: UCCL_ERR_INVALID_PARAM when a
 * send block overlaps a receive block other than its own (overlap.c). */
uccl_status_t uccl_coll_args_overlap(const coll_state_t *cs, const coll_args_t *a);
/* uccl_comm_destroy with plans not freed (cs->lock held, none in flight):
 * they let go of the comm; their start fails, their free only frees. */
void uccl_coll_plans_detach(coll_state_t *cs);

/* Cache of plain calls' schedules (cache.c), under cs->lock: a finished
 * schedule built for these arguments, or NULL; keep s for them (true: s is
 * the cache's now, else still the caller's); drop every entry not running. */
coll_sched_t *uccl_coll_cache_find(coll_state_t *cs, const uccl_coll_args_t *args, bool internal);
bool uccl_coll_cache_put(coll_state_t *cs, const uccl_coll_args_t *args, coll_sched_t *s);
void uccl_coll_cache_clear(coll_state_t *cs);
void uccl_coll_args_free(coll_args_t *a);

/* A blocking collective of the library's own (the stream plan cache's
 * agreement, MAPPED's setup): as uccl_coll, but no counter of the comm's
 * uccl_coll_stats_t counts it, while others in flight still count. */
uccl_status_t uccl_coll_internal(uccl_comm_t *comm, const uccl_coll_args_t *args);

/* Extents the schedule registers; then the builder for a.op/a.algo. */
uccl_status_t uccl_coll_build(coll_sched_t *s, const coll_args_t *a);

uccl_status_t uccl_coll_build_allgather(coll_sched_t *s, const coll_args_t *a);
uccl_status_t uccl_coll_build_alltoall(coll_sched_t *s, const coll_args_t *a);
uccl_status_t uccl_coll_build_bcast(coll_sched_t *s, const coll_args_t *a);
uccl_status_t uccl_coll_build_gather(coll_sched_t *s, const coll_args_t *a);
uccl_status_t uccl_coll_build_scatter(coll_sched_t *s, const coll_args_t *a);
/* gather (gather true) or scatter, linear or direct (gather.c). */
uccl_status_t uccl_coll_build_rooted_flat(coll_sched_t *s, const coll_args_t *a, bool direct,
                                          bool gather);

/* MAPPED (coll/mapped.c). ready: set up the comm's segments on first use
 * (collective: every rank calls it at the same call), then UCCL_OK or
 * UCCL_ERR_UNSUPPORTED (some rank cannot map some peer). slot: the largest
 * block that goes through the segments on n ranks. start: number the call
 * (uccl_coll_sched_start); advance: the MAPPED op (INPROGRESS while it
 * waits); run: a blocking schedule of that one op, called and returning
 * with cs->lock held. */
uccl_status_t uccl_coll_mapped_ready(coll_state_t *cs);
size_t uccl_coll_mapped_slot(int n);
uccl_status_t uccl_coll_build_mapped(coll_sched_t *s, const coll_args_t *a);
void uccl_coll_mapped_start(coll_sched_t *s);
uccl_status_t uccl_coll_mapped_advance(coll_sched_t *s, coll_op_t *op);
uccl_status_t uccl_coll_mapped_run(coll_sched_t *s);
/* A blocking call of a finished schedule that is one MAPPED op alone
 * (uccl_coll_mapped_only), without UCCL_COLL_TRACE: numbered, run and
 * ended as uccl_coll_sched_start, _run_locked and their end would, less
 * what such a schedule does not use (ops' requests, phases, the running
 * list, the stream gate). With cs->lock held, as it returns. */
static inline bool uccl_coll_mapped_only(const coll_sched_t *s)
{
    return s->mapped != NULL && s->nphases == 1 && s->nops == 1 &&
           s->ops[0].kind == COLL_OP_MAPPED && s->gate == NULL && s->hold == NULL;
}
uccl_status_t uccl_coll_mapped_call(coll_sched_t *s);
void uccl_coll_mapped_run_free(coll_mapped_run_t *run);
/* s ended with st: a MAPPED call failing midway fails the later ones. */
void uccl_coll_mapped_end(coll_sched_t *s, uccl_status_t st);
void uccl_coll_mapped_destroy(coll_state_t *cs);

/* Whether algo implements op; the table's choice; UCCL_COLL_ALGO. */
bool uccl_coll_algo_supports(uccl_coll_op_t op, uccl_coll_algo_t algo);
uccl_coll_algo_t uccl_coll_select(const coll_state_t *cs, uccl_coll_op_t op, size_t bytes);
/* Collective, before the table first decides on a comm whose ranks share
 * one host: cs->net becomes true on every rank where some rank's engine
 * has no shm (select.c). */
uccl_status_t uccl_coll_net_agree(coll_state_t *cs);
uccl_coll_algo_t uccl_coll_algo_forced(void);
/* UCCL_LAZY_CONNECT: 1 = lazy, 0 = eager, unset = lazy above
 * COLL_LAZY_AUTO_RANKS ranks. */
#define COLL_LAZY_AUTO_RANKS 32
bool uccl_coll_lazy_connect(int size);
/* The rank that speaks for r's host in hierarchical algorithms: root when
 * it shares r's host (root >= 0), else the lowest rank there. */
int uccl_coll_host_leader(const coll_state_t *cs, int r, int root);

/* Deadline of the blocking waits (UCCL_TIMEOUT_MS, read once). */
int uccl_coll_timeout_ms(void);

#endif

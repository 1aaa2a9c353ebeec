/* Internals of the gpu_ipc transport: same-host GPU memory moved by the copy
 * engines through CUDA/HIP IPC mappings, with a shared-memory mailbox per
 * connection for rendezvous, handle exchange and notifications.
 *
 * Who copies: whoever can see both buffers. Device memory is visible to
 * both processes through IPC, host memory only to its owner. So a receive
 * pulls from the sender's device buffers, except that a message of at least
 * PUSH_MIN bytes matched to a receive in device memory is pushed by the
 * sender once the receiver's CTS names the receive's buffers (over NVLink a
 * copy that writes the peer's memory runs faster than one that reads it:
 * 1.18x at 1 MiB on 2x H200), and the receiver pulls the last SPLIT_PCT
 * percent of it at the same time, so both GPUs' copy engines work on one
 * message and each side's request is done when its own copy and the
 * other's report (PUSH_DONE, FIN) are (two processes on one GPU never push:
 * see push_wanted); a write/read to a remote device
 * region is done by the initiator; a write/read to a remote host region is
 * done by the target (it pulls/pushes the initiator's device buffers).
 *
 * Validation: the target checks every access before its memory is touched.
 * Target-side copies are checked per operation with uccl_engine_region_find.
 * Initiator-side copies use a grant: the first access to a region asks the
 * target, which checks the region with uccl_engine_region_find and answers
 * with that live region's exact range and its allocation's IPC handle; the
 * initiator then bounds-checks every later access against the grant, and the
 * target revokes the grant when it deregisters the region. This keeps a
 * round trip off every small write (the 4 KiB latency goal) at the cost that
 * a write already posted when the revoke is in flight can still land, as
 * with RDMA.
 *
 * Batching (cfg.batch_max): between two processes on one GPU, copies below
 * it are not issued when posted but held in ipc_tp_t.batch and issued as
 * one uccl_gpu_memcpy_batch_async when progress records the fence (or the
 * batch is full). A batch has no inner order, so a copy that would write
 * what a held copy reads or writes, or read what one writes, flushes the
 * batch first (the same copy twice does not: either order gives the same
 * bytes); gpu_ipc thus keeps conflicting copies in posting order. (Issuing
 * the first copy of a window at once, so that the GPU starts while the rest
 * is posted, was tried and dropped: tests/gpu/results/1xH200-gpu10.) Every
 * copy of a cudaMemcpyBatchAsync still costs the CPU what a copy alone does,
 * so a batch of 2 or more within one GPU goes as one launch of a copy kernel
 * where the build has one (cfg.batch_sm, batch.c). */
#ifndef UCCL_TP_GPU_IPC_IPC_H
#define UCCL_TP_GPU_IPC_IPC_H

#include "core/tp_api.h"
#include "gpu/gpu.h"
#include "tp/gpu_ipc/ipc_wire.h"
#include "tp/gpu_ipc/prof.h"
#include "tp/gpu_ipc/ring.h"
#include "util/hmap.h"

#define IPC_STREAMS_MAX 16

/* A local device allocation that some registered region lies in. */
typedef struct ipc_alloc {
    void *base;
    size_t size;
    uccl_gpu_ipc_handle_t handle;
    int refs; /* regions registered in it */
    uint64_t gen;
    bool gone; /* freed: another allocation came at its base (mem.c); off tp->allocs */
    uccl_list_t link;
} ipc_alloc_t;

struct uccl_tp_memh {
    void *addr;
    size_t len;
    uccl_mem_type_t type;
    ipc_alloc_t *alloc; /* NULL for host memory */
    uint64_t region_id; /* known once granted */
    bool granted;
    int tgt_inflight;   /* target-side copies touching it */
};

/* A peer allocation mapped here (or, for a peer in this process, used as is). */
typedef struct ipc_map {
    uint64_t key; /* base address in the peer */
    size_t size;
    uccl_gpu_ipc_handle_t handle;
    void *ptr;
    int refs;
    int ptr_refs;    /* of uccl_rdesc_ptr (ep->ptr_maps): until the region's revoke; at
                      * ep_destroy such a mapping moves to tp->orphans */
    bool ptr_used;   /* a pointer into it went out (uccl_rdesc_ptr): once retired, it is
                      * closed only when the caller's streams passed every stream-ordered
                      * call (uccl_engine_streams_passed), or at transport close */
    bool own;        /* orphaned: the peer was this process (nothing to close) */
    int dev;         /* orphaned: the device it was opened on */ /* 1 for the announcement + 1 per grant */
    uccl_list_t link;
} ipc_map_t;

typedef struct ipc_grant {
    uint64_t region_id, addr, len;
    ipc_map_t *map;
    uccl_list_t link;
} ipc_grant_t;

typedef enum { OP_LOCAL, OP_RECV, OP_PUSH, OP_TGT } ipc_op_kind_t;

/* Events recorded on the streams after a run of copies: every op whose
 * copies were issued before them is done when they are. Copies join the
 * engine's open fence (ipc_tp_t.open_fence) as they are issued; progress
 * records it once for all of them, one event per stream used, not one per
 * op, and from then on it is no longer open_fence. On one H200 a
 * cudaMemcpyAsync costs the CPU 3.3 us, the same for 4 KiB and 1 MiB, local
 * or IPC-mapped, and an event recorded after each added up to 0.3 us; below
 * a few MiB that CPU time, not the GPU, bounds a window of copies.
 *
 * Unrecorded fences (cfg.lazy_event): a fence whose copies all went to
 * stream 0 records no event when closed while nothing follows it there:
 * cudaStreamQuery of stream 0 says when it passed (tp->quiet). Its event is
 * recorded only when another copy is about to be queued on stream 0 (before
 * that copy, so that it marks the same point) or when the stream stayed
 * busy for cfg.quiet_polls queries. A window of transfers followed by a wait
 * (and every single transfer waited for) thus costs no cudaEventRecord
 * (0.24-0.6 us of CPU a fence on one H200, 2.5 us once with a busy stream:
 * tests/gpu/results/1xH200-gpu10). The record after that many busy queries
 * is a call of 2.5-4.6 us while the copies run; moving it out of a window
 * (QUIET_POLLS=4096) or to the fence's close (LAZY_EVENT=0) changed no
 * window time by more than noise on one H200 (tests/gpu/results/H200-py17). */
/* flag.c: a fence told by a host word queries its stream every this many
 * reads of a word not there yet */
#define IPC_FLAG_CHECK_POLLS 64
typedef struct ipc_fence {
    int refs;         /* ops waiting on it */
    unsigned streams; /* streams with copies before it */
    bool unrecorded;  /* tp->quiet: no event yet, polled with a stream query */
    bool cross;       /* some copy is with another (or an unknown) GPU's memory */
    bool flagged;     /* told by tp->flag_host reaching flag_seq (flag.c), no event */
    uint32_t flag_seq;
    unsigned flag_polls;
    /* its one op is a pull whose sender waits on a word of its mailbox
     * (done.c): the word, as this GPU and this CPU see it, and its value */
    void *done_dev;
    const uint32_t *done_host;
    uint32_t done_value;
    struct ipc_op *done_op;
    int nev;          /* events recorded and not yet seen done */
    uccl_status_t status;
    uccl_gpu_event_t ev[IPC_STREAMS_MAX];
} ipc_fence_t;

/* Copies in flight on the streams, finished by progress. */
typedef struct ipc_op {
    ipc_op_kind_t kind;
    uccl_req_t *req;           /* OP_LOCAL, OP_RECV, OP_PUSH */
    uccl_tp_memh_t *memh;      /* OP_TGT: the region touched */
    uint64_t seq, notif;
    bool has_notif;
    size_t bytes;
    uccl_status_t status;
    bool batch;                /* may join the held-back batch (see batch_ok in xfer.c) */
    uint32_t done_slot;        /* OP_RECV: the sender's word (done.c), 1-based; 0 none */
    bool done_told;            /* its fence writes that word: no FIN unless it fails */
    ipc_fence_t *fence;        /* NULL when it copies nothing */
    uccl_list_t link;
} ipc_op_t;

typedef struct ipc_cfg {
    int streams;
    size_t stream_split_min;
    size_t push_min;
    int split_pct;
    size_t duplex_pull_max; /* DUPLEX_PULL_MAX: no push up to this size while a send of ours to that peer is in flight */
    size_t batch_max;
    size_t batch_cross; /* BATCH_CROSS: the batch across GPUs is for transfers below this */
    int prof; /* the micro profile (prof.h) */
    int dtod; /* device-to-device copies through the driver's cuMemcpyDtoDAsync */
    int lazy_event; /* unrecorded fences (ipc_fence_t) */
    int quiet_polls; /* QUIET_POLLS: busy stream queries of an unrecorded fence before its event */
    int flag_done;  /* fences of at most this many ops told by a host word (flag.c) */
    int peer_done;  /* PEER_DONE: a pulled send told done by the receiver's GPU (done.c) */
    size_t peer_done_min; /* PEER_DONE_MIN: for sends of at least this many bytes */
    size_t flag_kernel_max; /* FLAG_KERNEL_MAX: a flagged fence's one copy and word by one launch */
    int batch_sm;        /* BATCH_SM: a batch of this many copies or more by kernel (0 = never) */
    int batch_sm_blocks; /* BATCH_SM_BLOCKS */
    size_t batch_sm_max; /* BATCH_SM_MAX: with the batch kernel, copies within the GPU held below this */
    char copy[UCCL_CFG_STRING_MAX]; /* auto | ce | sm (uccl_gpu_ipc_copy_mode) */
    size_t sm_min;
    int sm_pull;
    int sm_streams;
    int sm_blocks;
    int sm_unroll;      /* 16-byte words in flight per kernel thread: 4 or 8 */
    size_t sm_auto_min; /* COPY=auto: the kernel from this size (uccl_gpu_ipc_auto_sm) */
} ipc_cfg_t;

/* COPY=auto uses the kernel where an engine's connections reach at least
 * this many other GPUs (copy.c, uccl_gpu_ipc_copy_setup). */
#define IPC_AUTO_SM_PEERS 2

/* How copies between two GPUs go (UCCL_GPU_IPC_COPY). */
enum { IPC_COPY_AUTO, IPC_COPY_CE, IPC_COPY_SM };

/* Copies held back to go out together (cfg.batch_max): issued as one
 * uccl_gpu_memcpy_batch_async on stream 0 when the open fence is recorded
 * (every progress), when full, or before a copy that must not run
 * unordered with one of them. */
#define IPC_BATCH_MAX 64
typedef struct ipc_batch {
    int n;
    bool cross; /* some copy may involve another GPU: not for the batch kernel (BATCH_SM) */
    void *dst[IPC_BATCH_MAX];
    const void *src[IPC_BATCH_MAX];
    size_t len[IPC_BATCH_MAX];
} ipc_batch_t;

typedef struct ipc_tp {
    uccl_tp_t base;
    ipc_cfg_t cfg;
    int device;          /* -1 until needed on a host-only engine */
    char bus_id[UCCL_GPU_BUS_ID_MAX];
    int nstreams;        /* 0 until created */
    uccl_gpu_stream_t streams[IPC_STREAMS_MAX];
    uccl_gpu_event_t *free_ev;
    int nfree_ev, cap_free_ev;
    ipc_fence_t *open_fence; /* copies issued since the last fence, or NULL */
    ipc_fence_t *quiet;  /* the closed fence without an event (cfg.lazy_event), or NULL */
    int quiet_polls;     /* busy stream queries of it so far */
    ipc_batch_t batch;   /* copies of the open fence not issued yet */
    bool sm_on;          /* the copy kernel is loaded on device: copies to and from other GPUs
                          * of at least cfg.sm_min bytes use it (uccl_gpu_ipc_copy_setup) */
    bool sm_auto;        /* ... only as COPY=auto picks (uccl_gpu_ipc_auto_sm) */
    bool batch_sm_on;    /* the copy kernel is loaded for cfg.batch_sm (batch.c) */
    int peer_gpus;       /* other GPUs the connected eps reach (uccl_gpu_ipc_peers_changed) */
    uccl_list_t allocs;  /* ipc_alloc_t */
    uint64_t next_gen;
    uccl_list_t eps;     /* ipc_ep_t */
    /* mappings uccl_rdesc_ptr handed out whose ep went (the peer failed or
     * closed): a caller's stream may still write there, as into a dead
     * peer's memory, which stays valid while mapped; closed with the tp */
    uccl_list_t orphans;
    /* PEER_DONE word pages (done.c) still registered whose ep went while a
     * caller's streams had not passed this engine's calls: unregistered (and
     * unmapped) once they have, or with the tp */
    uccl_list_t done_orphans;
    ipc_prof_t prof;     /* cfg.prof */
    uint32_t *flag_host; /* cfg.flag_done: IPC_FLAG_SLOTS words stream 0 writes fence numbers to, or NULL */
    void *flag_dev;
    uint32_t *flag_count; /* cfg.flag_kernel_max: the kernel's count of finished blocks (device memory) */
    uint32_t flag_seq;   /* the last number queued */
    int flag_inflight;   /* flagged fences not seen passed (flag.c: one at a time) */
} ipc_tp_t;

typedef struct ipc_txmsg {
    uint16_t type;
    size_t len;
    uccl_list_t link;
    uint8_t data[];
} ipc_txmsg_t;

/* A message held by the core's matching until a receive takes it. */
typedef struct ipc_rts {
    msg_rts_t hdr;
    uccl_list_t link; /* ep->unexp, to free at teardown */
    uccl_msg_t msg;
    msg_seg_t seg[];
} ipc_rts_t;

enum { IPC_WAIT_SEND, IPC_WAIT_PUSH, IPC_WAIT_TGT, IPC_WAIT_N };

typedef struct ipc_ep {
    uccl_tp_ep_t base;
    ipc_tp_t *tp;
    ipc_ring_t rx, tx;
    bool connected, failed;
    int peer_pid;
    int peer_device; /* local ordinal of the peer's GPU, -1 unknown */
    uint64_t next_seq;
    uint64_t *announced; /* gens of local allocations the peer knows */
    int nannounced, cap_announced;
    uccl_list_t txq;     /* ipc_txmsg_t waiting for ring space */
    uccl_list_t maps, zombies; /* ipc_map_t live / to close when no op runs */
    uccl_list_t grants;  /* ipc_grant_t */
    /* live maps by the peer's allocation key, grants by region id: keys
     * the peer chooses, found without a scan */
    uccl_hmap_t map_keys, grant_ids;
    /* uccl_rdesc_ptr: region id -> ipc_map_t kept mapped (a reference of
     * its own) until the peer revokes the region or the ep goes; region ids
     * asked for (PTR_ASKED, or PTR_REFUSED once the peer said no) */
    uccl_hmap_t ptr_maps, ptr_asked;
    uccl_list_t ops;     /* ipc_op_t */
    /* Waiters by sequence number (tp_data[0]; tp_data[4] = IPC_WAIT_* + 1
     * while in one), complete with tp_data[1] bytes: sends waiting for FIN
     * or CTS and write/read requests for TGT_DONE under our numbers,
     * matched receives waiting for PUSH_DONE under the peer's. */
    uccl_hmap_t waits[IPC_WAIT_N];
    uccl_list_t unexp;   /* ipc_rts_t held by the core's matching */
    uccl_list_t grant_wait; /* reqs waiting for a grant */
    /* done.c: the peer's mailbox words (ep->tx) mapped for our GPU, NULL
     * when not; our sends waiting on words of our own mailbox (ep->rx) */
    void *done_dev;
    uint64_t done_busy;  /* a bit per slot held by a send */
    uint64_t done_seq[IPC_DONE_SLOTS];
    unsigned done_next;  /* the slot tried first by the next claim */
    uccl_list_t link;
} ipc_ep_t;

/* One side of a copy plan. */
typedef struct ipc_seg {
    char *ptr;
    size_t len;
} ipc_seg_t;

/* ---- cfg.c */
extern const uccl_cfg_table_t uccl_gpu_ipc_cfg_table;
/* Parse and check the settings: UCCL_ERR_INVALID_PARAM (logged) for a bad one. */
uccl_status_t uccl_gpu_ipc_cfg_load(ipc_cfg_t *cfg);

/* ---- gpu_ipc.c */
uccl_status_t uccl_gpu_ipc_send_msg(ipc_ep_t *ep, uint16_t type, const void *a, size_t alen, const void *b,
                           size_t blen);
void uccl_gpu_ipc_ep_poll(ipc_ep_t *ep);
void uccl_gpu_ipc_ep_fail(ipc_ep_t *ep, const char *why);

/* ---- mem.c */
uccl_status_t uccl_gpu_ipc_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type, int device,
                          uccl_tp_memh_t **memh);
void uccl_gpu_ipc_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh);
uccl_status_t uccl_gpu_ipc_announce(ipc_ep_t *ep, ipc_alloc_t *alloc);
uccl_status_t uccl_gpu_ipc_map_get(ipc_ep_t *ep, const msg_alloc_t *m, ipc_map_t **out);
void uccl_gpu_ipc_map_put(ipc_ep_t *ep, ipc_map_t *map);
ipc_map_t *uccl_gpu_ipc_map_find(ipc_ep_t *ep, uint64_t key);
void uccl_gpu_ipc_maps_release(ipc_ep_t *ep, bool all);
void uccl_gpu_ipc_orphans_close(ipc_tp_t *tp);
void uccl_gpu_ipc_on_grant_req(ipc_ep_t *ep, const msg_grant_req_t *m);
void uccl_gpu_ipc_on_revoke(ipc_ep_t *ep, uint64_t region_id);
ipc_grant_t *uccl_gpu_ipc_grant_find(ipc_ep_t *ep, uint64_t region_id);
uccl_status_t uccl_gpu_ipc_grant_add(ipc_ep_t *ep, const msg_grant_t *m);
/* The local address of a peer's device region (uccl_rdesc_ptr): UCCL_OK
 * with *ptr, UCCL_INPROGRESS while the peer's grant is on its way (asked
 * once), UCCL_ERR_REMOTE_ACCESS when refused or not device memory. */
uccl_status_t uccl_gpu_ipc_remote_ptr(uccl_tp_ep_t *ep, const uccl_req_remote_t *r, void **ptr);
void uccl_gpu_ipc_ptr_refused(ipc_ep_t *ep, uint64_t region_id);

/* ---- copy.c */
uccl_status_t uccl_gpu_ipc_use_device(ipc_tp_t *tp, int hint);
/* IPC_COPY_* of cfg->copy, or -1 (logged, naming the setting). */
int uccl_gpu_ipc_copy_mode(const ipc_cfg_t *cfg);
/* Load the copy kernel on tp->device where cfg.copy asks for it (at open:
 * never in progress); COPY=sm without a kernel fails with
 * UCCL_ERR_UNSUPPORTED; auto loads it where it may use it (copy.c says
 * when). */
uccl_status_t uccl_gpu_ipc_copy_setup(ipc_tp_t *tp);
/* An ep connected or went: recount tp->peer_gpus. */
void uccl_gpu_ipc_peers_changed(ipc_tp_t *tp);
/* Does COPY=auto move a transfer of len bytes with ep's peer by kernel
 * (a message: pulled whole by the receiver)? */
bool uccl_gpu_ipc_auto_sm(const ipc_ep_t *ep, size_t len);
uccl_status_t uccl_gpu_ipc_op_start(ipc_ep_t *ep, ipc_op_t *op, const ipc_seg_t *dst, int nd,
                           const ipc_seg_t *src, int ns, size_t len);
int uccl_gpu_ipc_ops_progress(ipc_ep_t *ep);
void uccl_gpu_ipc_ops_cancel(ipc_ep_t *ep);
void uccl_gpu_ipc_ops_forget_memh(ipc_tp_t *tp, uccl_tp_memh_t *memh);
void uccl_gpu_ipc_streams_destroy(ipc_tp_t *tp);

/* ---- batch.c (held-back copies, see "Batching" above) */
uccl_status_t uccl_gpu_ipc_batch_flush(ipc_tp_t *tp);
/* Copies smaller than this are held back (cfg.batch_max, or with the batch
 * kernel and within the GPU cfg.batch_sm_max when larger; 0: none). */
size_t uccl_gpu_ipc_batch_limit(const ipc_tp_t *tp, bool cross);
/* Hold dst <- src back for the batch; cross: the op's peer is another GPU. */
uccl_status_t uccl_gpu_ipc_batch_add(ipc_tp_t *tp, char *dst, const char *src, size_t len, bool cross);
/* copy.c: the unrecorded fence gets its event before a copy follows it. */
void uccl_gpu_ipc_quiet_record(ipc_tp_t *tp);

/* ---- flag.c (fences told by a host word, cfg.flag_done) */
#define IPC_FLAG_SLOTS 64
/* The word, at open (never in progress); none: fences stay as they were. */
void uccl_gpu_ipc_flag_setup(ipc_tp_t *tp);
void uccl_gpu_ipc_flag_close(ipc_tp_t *tp);
/* Queue the write of f's number after its copies (all on stream 0); false:
 * not done (no word, other streams, the write refused): f is as before. */
bool uccl_gpu_ipc_flag_fence(ipc_tp_t *tp, ipc_fence_t *f);
/* Before the batch goes at f's close: f's one held-back copy and the write
 * of its number as one kernel launch (cfg.flag_kernel_max); true: done, the
 * batch emptied and f flagged; false: nothing queued, f as before. */
bool uccl_gpu_ipc_flag_kernel(ipc_tp_t *tp, ipc_fence_t *f);
/* Has flagged f passed (or failed: f->status)? Clears f->flagged when so. */
bool uccl_gpu_ipc_flag_passed(ipc_tp_t *tp, ipc_fence_t *f);

/* ---- done.c (a pulled send told done by the receiver's GPU, cfg.peer_done) */
/* Map the peer's mailbox words for our GPU (at connect); none: FIN. */
void uccl_gpu_ipc_done_setup(ipc_ep_t *ep);
void uccl_gpu_ipc_done_close(ipc_ep_t *ep);
void uccl_gpu_ipc_done_orphans_close(ipc_tp_t *tp);
/* A slot (1-based) of our mailbox for the send numbered seq of len bytes,
 * or 0 (FIN: PEER_DONE off, len below PEER_DONE_MIN, no slot free). */
uint32_t uccl_gpu_ipc_done_claim(ipc_ep_t *ep, uint64_t seq, size_t len);
/* The send numbered seq no longer waits on a word (FIN, CTS, a failed post). */
void uccl_gpu_ipc_done_release(ipc_ep_t *ep, uint64_t seq);
/* Complete our sends whose words the peer's GPU wrote; returns how many. */
int uccl_gpu_ipc_done_poll(ipc_ep_t *ep);
/* op joined f (f->refs counts it): f writes op's sender's word when op is
 * f's only op and pulls a message that named one; else f's own. */
void uccl_gpu_ipc_done_join(ipc_ep_t *ep, ipc_op_t *op, ipc_fence_t *f);

/* ---- xfer.c */
uccl_status_t uccl_gpu_ipc_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_gpu_ipc_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
void uccl_gpu_ipc_on_rts(ipc_ep_t *ep, const msg_rts_t *m, const msg_seg_t *seg);
void uccl_gpu_ipc_on_cts(ipc_ep_t *ep, const msg_cts_t *m, const msg_seg_t *seg);
void uccl_gpu_ipc_on_fin(ipc_ep_t *ep, int wait, const msg_fin_t *m);
void uccl_gpu_ipc_op_finish(ipc_ep_t *ep, ipc_op_t *op);
/* The send numbered seq was told done by its word (done.c). */
void uccl_gpu_ipc_send_done(ipc_ep_t *ep, uint64_t seq);
/* shared with xfer_rma.c */
uccl_status_t uccl_gpu_ipc_local_segs(ipc_ep_t *ep, const uccl_req_t *req, msg_seg_t *seg,
                                      uint32_t *nseg);
int uccl_gpu_ipc_local_plan(const uccl_req_t *req, size_t off, ipc_seg_t *seg);
uccl_status_t uccl_gpu_ipc_peer_plan(ipc_ep_t *ep, const msg_seg_t *seg, uint32_t nseg, size_t skip,
                                     ipc_seg_t *out, int *nout);
bool uccl_gpu_ipc_batch_ok(const ipc_ep_t *ep, const uccl_req_t *req);
/* Is every byte of req's local side in device memory (ep's peer known)? */
bool uccl_gpu_ipc_req_d2d(const ipc_ep_t *ep, const uccl_req_t *req);
ipc_op_t *uccl_gpu_ipc_op_new(ipc_op_kind_t kind, uccl_req_t *req);
uint64_t uccl_gpu_ipc_prof_post_begin(ipc_tp_t *tp);
uccl_status_t uccl_gpu_ipc_prof_post_end(ipc_tp_t *tp, uint64_t t0, uccl_status_t st);
uccl_status_t uccl_gpu_ipc_post_waiting(ipc_ep_t *ep, int wait, uccl_req_t *req, uint16_t type,
                                        uint64_t seq, const void *m, size_t mlen,
                                        const msg_seg_t *seg, uint32_t nseg);
void uccl_gpu_ipc_fin_send(ipc_ep_t *ep, uint16_t type, uint64_t seq, uccl_status_t st,
                           uint64_t bytes);
void uccl_gpu_ipc_part_done(ipc_ep_t *ep, uccl_req_t *req, uccl_status_t st);

/* ---- xfer_rma.c */
uccl_status_t uccl_gpu_ipc_post_write(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_gpu_ipc_post_read(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_gpu_ipc_on_grant(ipc_ep_t *ep, const msg_grant_t *m);
void uccl_gpu_ipc_on_tgt_op(ipc_ep_t *ep, const msg_tgt_op_t *m, const msg_seg_t *seg);

#endif

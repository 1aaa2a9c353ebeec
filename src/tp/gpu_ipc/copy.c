/* gpu_ipc copies: a few streams per engine, a pool of timing-free events,
 * gather/scatter plans issued as few cudaMemcpyAsync calls as the pieces
 * allow (large pieces split over every stream), completion by fences (events
 * recorded once per progress for every copy issued since the last, or a
 * stream query while no copy follows: unrecorded fences, ipc.h). */
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"

/* Pieces of a split copy are cut at this alignment. */
#define SPLIT_ALIGN (1u << 20)

static uccl_status_t streams_create(ipc_tp_t *tp)
{
    int n = tp->cfg.streams < 1 ? 1 : tp->cfg.streams > IPC_STREAMS_MAX ? IPC_STREAMS_MAX : tp->cfg.streams;

    for (int i = 0; i < n; i++) {
        uccl_status_t st = uccl_gpu_stream_create(&tp->streams[i]);
        if (st != UCCL_OK)
            return st;
        tp->nstreams = i + 1;
    }
    return UCCL_OK;
}

/* Make the engine's device current for this thread (and pick one on a
 * host-only engine: hint, the peer's GPU, else 0); streams on first use. */
uccl_status_t uccl_gpu_ipc_use_device(ipc_tp_t *tp, int hint)
{
    uccl_status_t st;

    int cur = -1;

    if (tp->device < 0)
        tp->device = hint >= 0 ? hint : 0;
    /* cudaGetDevice is a thread-local read; setting it takes the driver's
     * context path, so only when the caller's thread is elsewhere */
    st = uccl_gpu_get_device(&cur) == UCCL_OK && cur == tp->device ? UCCL_OK
                                                                   : uccl_gpu_set_device(tp->device);
    if (st == UCCL_OK && tp->nstreams == 0)
        st = streams_create(tp);
    return st;
}

int uccl_gpu_ipc_copy_mode(const ipc_cfg_t *cfg)
{
    static const char *const names[] = {"auto", "ce", "sm"};

    for (int m = 0; m < 3; m++)
        if (strcmp(cfg->copy, names[m]) == 0)
            return m;
    uccl_error("UCCL_GPU_IPC_COPY=%s: not auto, ce or sm", cfg->copy);
    return -1;
}

/* Copies between GPUs by a kernel (UCCL_GPU_IPC_COPY): loaded here, when
 * the engine starts, because a module load inside progress can wait on a
 * stream a collective holds (uccl_coll.h). A host-only engine picks its
 * device later, in progress: it stays on the copy engines.
 *
 * auto: once the engine's connections reach IPC_AUTO_SM_PEERS other GPUs
 * (a GPU exchanging with several at once), messages of at least
 * SM_AUTO_MIN are pulled whole by the receiver's kernel on a stream per
 * peer GPU (no push), and writes and reads go by kernel too; else the copy
 * engines. 4x H200 (tests/gpu/results/4xH200-s12), np 4, busbw x NCCL
 * sync from 4 MiB received: the copy engines 0.58-1.01 (0.58-0.69 from
 * 64 MiB: about 200 GB/s all-to-all at most), kernel pushes (sender, a
 * stream per peer) 1.01-1.09 at 16-64 MiB but 0.81-0.88 at 128-256 MiB
 * (0.72-0.75x the kernel's own push ceiling: the push path, not the
 * kernel), kernel pulls 1.01-1.20 at every size. On 2 GPUs the copy
 * engines win (kernel pulls 0.74-0.77x the ceiling from 64 MiB against
 * 0.77-0.90). auto alone loads the kernel only where the process sees 3
 * or more GPUs; BATCH_SM (on by default, batch.c) loads it on every GPU
 * engine, for batches within one GPU. */
uccl_status_t uccl_gpu_ipc_copy_setup(ipc_tp_t *tp)
{
    int mode = uccl_gpu_ipc_copy_mode(&tp->cfg), ngpu = 0;
    uccl_status_t st;

    tp->sm_on = tp->sm_auto = false;
    tp->batch_sm_on = tp->cfg.batch_sm > 0 && tp->device >= 0 && uccl_gpu_sm_copy_load(tp->device) == UCCL_OK;
    if (tp->cfg.batch_sm > 0)
        uccl_info("gpu_ipc: BATCH_SM=%d: %s", tp->cfg.batch_sm,
                  tp->batch_sm_on ? "batches within this GPU by one copy-kernel launch"
                                  : "no copy kernel here (or no GPU yet): batches stay on the copy engines");
    if (mode == IPC_COPY_AUTO && tp->device >= 0 && tp->cfg.sm_auto_min > 0 &&
        uccl_gpu_count(&ngpu) == UCCL_OK && ngpu > IPC_AUTO_SM_PEERS) {
        tp->sm_on = tp->sm_auto = uccl_gpu_sm_copy_load(tp->device) == UCCL_OK;
        uccl_info("gpu_ipc: COPY=auto: %s", tp->sm_on ? "the copy kernel for messages to other GPUs "
                                                        "once connected to 2 or more of them"
                                                      : "no copy kernel here: the copy engines");
        return UCCL_OK;
    }
    if (mode != IPC_COPY_SM || tp->device < 0)
        return mode < 0 ? UCCL_ERR_INVALID_PARAM : UCCL_OK;
    st = uccl_gpu_sm_copy_load(tp->device);
    if (st != UCCL_OK) {
        uccl_error("UCCL_GPU_IPC_COPY=sm: no copy kernel on GPU %d (%s): %s; use auto or ce", tp->device,
                   uccl_status_name(st),
                   st == UCCL_ERR_UNSUPPORTED ? "this build has none (configure found no nvcc), or the "
                                                "driver refused it"
                                              : "the load failed");
        return UCCL_ERR_UNSUPPORTED;
    }
    tp->sm_on = true;
    uccl_info("gpu_ipc: copies %s other GPUs from %zu bytes: copy kernel of %d blocks",
              tp->cfg.sm_pull ? "to and from" : "to", tp->cfg.sm_min, tp->cfg.sm_blocks);
    return UCCL_OK;
}

void uccl_gpu_ipc_peers_changed(ipc_tp_t *tp)
{
    uint64_t seen = 0;
    uccl_list_t *e;
    int n = 0;

    uccl_list_for_each(e, &tp->eps) {
        const ipc_ep_t *ep = uccl_container_of(e, ipc_ep_t, link);
        int d = ep->peer_device;

        if (!ep->connected || d < 0 || d == tp->device || d >= 64 || (seen & (1ull << d)))
            continue;
        seen |= 1ull << d;
        n++;
    }
    tp->peer_gpus = n;
}

bool uccl_gpu_ipc_auto_sm(const ipc_ep_t *ep, size_t len)
{
    const ipc_tp_t *tp = ep->tp;

    return tp->sm_auto && tp->peer_gpus >= IPC_AUTO_SM_PEERS && len >= tp->cfg.sm_auto_min &&
           ep->peer_device >= 0 && ep->peer_device != tp->device;
}

void uccl_gpu_ipc_streams_destroy(ipc_tp_t *tp)
{
    if (tp->nstreams > 0) {
        uccl_gpu_set_device(tp->device);
        uccl_gpu_ipc_batch_flush(tp); /* none is left once every op was waited for */
    }
    tp->batch.n = 0;
    for (int i = 0; i < tp->nstreams; i++) {
        uccl_gpu_stream_sync(tp->streams[i]);
        uccl_gpu_stream_destroy(tp->streams[i]);
    }
    tp->nstreams = 0;
    free(tp->open_fence); /* no op is left to wait on it */
    tp->open_fence = NULL;
    tp->quiet = NULL;
    for (int i = 0; i < tp->nfree_ev; i++)
        uccl_gpu_event_destroy(tp->free_ev[i]);
    free(tp->free_ev);
    tp->free_ev = NULL;
    tp->nfree_ev = tp->cap_free_ev = 0;
}

static uccl_status_t event_get(ipc_tp_t *tp, uccl_gpu_event_t *ev)
{
    if (tp->nfree_ev > 0) {
        *ev = tp->free_ev[--tp->nfree_ev];
        return UCCL_OK;
    }
    return uccl_gpu_event_create(ev, 0);
}

static void event_put(ipc_tp_t *tp, uccl_gpu_event_t ev)
{
    if (tp->nfree_ev == tp->cap_free_ev) {
        int cap = tp->cap_free_ev ? tp->cap_free_ev * 2 : 64;
        uccl_gpu_event_t *a = realloc(tp->free_ev, (size_t)cap * sizeof(*a));
        if (a == NULL) {
            uccl_gpu_event_destroy(ev);
            return;
        }
        tp->free_ev = a;
        tp->cap_free_ev = cap;
    }
    tp->free_ev[tp->nfree_ev++] = ev;
}

/* Issue one piece: a copy kernel between two GPUs (sm: tp->sm_on and
 * device memory on both sides) when at least cfg.sm_min bytes and 16-byte
 * aligned; else held back for the next batch when small, else on one
 * stream, or cut over all of them when large (after the held-back copies,
 * so that stream 0 runs copies in the order they were asked for). */
static uccl_status_t issue_piece(ipc_tp_t *tp, char *dst, const char *src, size_t len, int first,
                                 bool batch, bool sm, bool cross, unsigned *used)
{
    size_t chunk;
    int n = tp->nstreams;
    uccl_status_t st;

    if (sm && len >= tp->cfg.sm_min && uccl_gpu_sm_copy_args_ok(dst, src, tp->cfg.sm_blocks, tp->cfg.sm_unroll)) {
        uint64_t t0;

        st = uccl_gpu_ipc_batch_flush(tp); /* the kernel runs after the held-back copies, in order */
        if (st != UCCL_OK)
            return st;
        uccl_gpu_ipc_quiet_record(tp);
        t0 = IPC_PROF_T0(tp->cfg.prof);
        *used |= 1u << first;
        st = uccl_gpu_sm_copy_async(tp->device, dst, src, len, tp->cfg.sm_blocks, tp->cfg.sm_unroll,
                                    tp->streams[first]);
        IPC_PROF_ADD(&tp->prof, IPC_PROF_SM, t0, 1);
        return st;
    }
    if (batch && first == 0 && len < uccl_gpu_ipc_batch_limit(tp, cross)) {
        *used |= 1u;
        return uccl_gpu_ipc_batch_add(tp, dst, src, len, cross);
    }
    st = uccl_gpu_ipc_batch_flush(tp);
    if (st != UCCL_OK)
        return st;
    uccl_gpu_ipc_quiet_record(tp);
    if (tp->cfg.stream_split_min == 0 || len < tp->cfg.stream_split_min || n == 1) {
        uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);
        *used |= 1u << first;
        st = batch && tp->cfg.dtod ? uccl_gpu_memcpy_dtod_async(dst, src, len, tp->streams[first])
                                   : uccl_gpu_memcpy_async(dst, src, len, tp->streams[first]);
        IPC_PROF_ADD(&tp->prof, IPC_PROF_COPY, t0, 1);
        return st;
    }
    chunk = (len / (size_t)n + SPLIT_ALIGN - 1) & ~(size_t)(SPLIT_ALIGN - 1);
    for (int k = 0; len > 0; k++) {
        size_t c = len < chunk ? len : chunk;
        int s = (first + k) % n;

        st = uccl_gpu_memcpy_async(dst, src, c, tp->streams[s]);
        if (st != UCCL_OK)
            return st;
        *used |= 1u << s;
        dst += c;
        src += c;
        len -= c;
    }
    return UCCL_OK;
}

static uccl_status_t issue_plan(ipc_tp_t *tp, const ipc_seg_t *dst, int nd, const ipc_seg_t *src,
                                int ns, size_t len, int first, bool batch, bool sm, bool cross,
                                unsigned *used)
{
    size_t doff = 0, soff = 0;
    int i = 0, j = 0;

    while (len > 0 && i < nd && j < ns) {
        size_t n = dst[i].len - doff;
        uccl_status_t st;

        if (src[j].len - soff < n)
            n = src[j].len - soff;
        if (len < n)
            n = len;
        if (n > 0) {
            st = issue_piece(tp, dst[i].ptr + doff, src[j].ptr + soff, n, first, batch, sm, cross, used);
            if (st != UCCL_OK)
                return st;
        }
        doff += n;
        soff += n;
        len -= n;
        if (doff == dst[i].len) {
            i++;
            doff = 0;
        }
        if (soff == src[j].len) {
            j++;
            soff = 0;
        }
    }
    return len == 0 ? UCCL_OK : UCCL_ERR_OUT_OF_BOUNDS;
}

/* The fence that copies issued now join (made on first use). */
static ipc_fence_t *fence_open(ipc_tp_t *tp)
{
    if (tp->open_fence == NULL)
        tp->open_fence = calloc(1, sizeof(*tp->open_fence));
    return tp->open_fence;
}

/* An event on every stream f's copies went to. A failed record waits for
 * that stream instead and fails the fence's ops. */
static void fence_record(ipc_tp_t *tp, ipc_fence_t *f)
{
    for (int s = 0; s < tp->nstreams; s++) {
        uccl_gpu_event_t ev;

        if (!(f->streams & (1u << s)))
            continue;
        if (event_get(tp, &ev) == UCCL_OK) {
            uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);
            uccl_status_t st = uccl_gpu_event_record(ev, tp->streams[s]);

            IPC_PROF_ADD(&tp->prof, IPC_PROF_RECORD, t0, 1);
            if (st == UCCL_OK) {
                f->ev[f->nev++] = ev;
                continue;
            }
            event_put(tp, ev);
        }
        uccl_gpu_stream_sync(tp->streams[s]);
        f->status = UCCL_ERR_TRANSPORT;
    }
}

/* The unrecorded fence (ipc.h) gets its event: a copy is about to follow it
 * on stream 0, or it stayed busy too long. */
void uccl_gpu_ipc_quiet_record(ipc_tp_t *tp)
{
    ipc_fence_t *f = tp->quiet;

    if (f == NULL)
        return;
    tp->quiet = NULL;
    f->unrecorded = false;
    fence_record(tp, f);
}

/* Close the open fence: its held-back copies go, then its events (or none
 * yet: an unrecorded fence, ipc.h). */
static void fence_close(ipc_tp_t *tp)
{
    ipc_fence_t *f = tp->open_fence;

    if (f == NULL)
        return;
    if (f->refs > 0 && tp->cfg.flag_done && uccl_gpu_ipc_flag_kernel(tp, f)) {
        tp->open_fence = NULL; /* its copy and its word went as one launch */
        return;
    }
    if (uccl_gpu_ipc_batch_flush(tp) != UCCL_OK)
        f->status = UCCL_ERR_TRANSPORT; /* its ops fail; the events still mark the end */
    tp->open_fence = NULL; /* from now on it is recorded */
    if (f->refs == 0) { /* its only ops failed to start, and waited */
        free(f);
        return;
    }
    uccl_gpu_ipc_quiet_record(tp); /* (none: f's copies, issued after it, recorded it) */
    if (tp->cfg.flag_done && uccl_gpu_ipc_flag_fence(tp, f))
        return;
    if (tp->cfg.lazy_event && f->streams == 1u) {
        f->unrecorded = true;
        tp->quiet = f;
        tp->quiet_polls = 0;
        return;
    }
    fence_record(tp, f);
}

static void fence_put(ipc_tp_t *tp, ipc_fence_t *f)
{
    if (f == NULL || --f->refs > 0 || f == tp->open_fence)
        return; /* an open fence with no op left goes at fence_close */
    if (f == tp->quiet)
        tp->quiet = NULL;
    while (f->nev > 0)
        event_put(tp, f->ev[--f->nev]);
    free(f);
}

/* Start the copies of op (len bytes from src to dst) and queue it; an op
 * with nothing to copy finishes at the next progress. On error nothing is
 * queued; copies already issued are waited for. */
uccl_status_t uccl_gpu_ipc_op_start(ipc_ep_t *ep, ipc_op_t *op, const ipc_seg_t *dst, int nd,
                           const ipc_seg_t *src, int ns, size_t len)
{
    ipc_tp_t *tp = ep->tp;
    uccl_status_t st;

    op->fence = NULL;
    op->status = UCCL_OK;
    if (len > 0) {
        unsigned used = 0;
        ipc_fence_t *f;
        bool sm;
        int first = 0;

        st = uccl_gpu_ipc_use_device(tp, ep->peer_device);
        if (st != UCCL_OK)
            return st;
        f = fence_open(tp);
        if (f == NULL)
            return UCCL_ERR_NO_MEMORY;
        /* one stream for everything not split: switching streams between
         * back-to-back copies cost bandwidth on the device */
        /* the copy kernel: only between two GPUs, device memory on both
         * sides (the peer's side is always its device memory, mapped), and
         * unless cfg.sm_pull only where it writes the peer's memory; under
         * COPY=auto as uccl_gpu_ipc_auto_sm says, on the peer's stream */
        sm = tp->sm_on && ep->peer_device >= 0 && ep->peer_device != tp->device && len >= tp->cfg.sm_min &&
             (tp->sm_auto ? uccl_gpu_ipc_auto_sm(ep, len)
                          : tp->cfg.sm_pull || op->kind == OP_PUSH ||
                                (op->kind == OP_LOCAL && op->req->op == UCCL_OP_WRITE)) &&
             uccl_gpu_ipc_req_d2d(ep, op->req);
        if (sm && (tp->cfg.sm_streams || tp->sm_auto) && tp->nstreams > 1) { /* the peer's own stream */
            int idx = ep->peer_device < tp->device ? ep->peer_device : ep->peer_device - 1;
            first = 1 + idx % (tp->nstreams - 1);
        }
        st = issue_plan(tp, dst, nd, src, ns, len, first, op->batch, sm, ep->peer_device != tp->device,
                        &used);
        f->streams |= used;
        f->cross = f->cross || ep->peer_device != tp->device; /* (flag.c: within one GPU only) */
        if (st != UCCL_OK) {
            if (uccl_gpu_ipc_batch_flush(tp) != UCCL_OK) /* the earlier ops' copies go, or their fence fails */
                f->status = UCCL_ERR_TRANSPORT;
            for (int s = 0; s < tp->nstreams; s++)
                if (used & (1u << s))
                    uccl_gpu_stream_sync(tp->streams[s]);
            return st;
        }
        f->refs++;
        op->fence = f;
        uccl_gpu_ipc_done_join(ep, op, f);
    }
    if (op->kind == OP_TGT && op->memh != NULL)
        op->memh->tgt_inflight++;
    uccl_list_push_back(&ep->ops, &op->link);
    return UCCL_OK;
}

/* Is op's fence passed? Drops its events from the back as they complete. */
static bool op_poll(ipc_tp_t *tp, ipc_op_t *op)
{
    ipc_fence_t *f = op->fence;

    if (f == NULL)
        return true;
    if (f == tp->open_fence) /* a copy started while progress finished ops */
        fence_close(tp);
    if (f->flagged && !uccl_gpu_ipc_flag_passed(tp, f))
        return false;
    if (f->unrecorded) { /* nothing follows it on stream 0: the stream's state is its own */
        uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);
        uccl_status_t st = uccl_gpu_stream_query(tp->streams[0]);

        IPC_PROF_ADD(&tp->prof, st == UCCL_INPROGRESS ? IPC_PROF_SQUERY_BUSY : IPC_PROF_SQUERY_DONE, t0, 1);
        if (st == UCCL_INPROGRESS && ++tp->quiet_polls < tp->cfg.quiet_polls)
            return false;
        if (st == UCCL_INPROGRESS) {
            t0 = IPC_PROF_T0(tp->cfg.prof);
            uccl_gpu_ipc_quiet_record(tp); /* long copies: from now on its event is polled */
            IPC_PROF_ADD(&tp->prof, IPC_PROF_QUIET_RECORD, t0, 1);
        } else {
            if (st != UCCL_OK)
                f->status = UCCL_ERR_TRANSPORT;
            f->unrecorded = false;
            tp->quiet = NULL;
        }
    }
    while (f->nev > 0) {
        uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);
        uccl_status_t st = uccl_gpu_event_query(f->ev[f->nev - 1]);

        IPC_PROF_ADD(&tp->prof, st == UCCL_INPROGRESS ? IPC_PROF_QUERY_BUSY : IPC_PROF_QUERY_DONE, t0, 1);
        if (st == UCCL_INPROGRESS)
            return false;
        if (st != UCCL_OK)
            f->status = UCCL_ERR_TRANSPORT;
        event_put(tp, f->ev[--f->nev]);
    }
    if (f->status != UCCL_OK)
        op->status = f->status;
    return true;
}

/* Wait for op's copies (teardown and dereg only: local GPU work, bounded). */
static void op_sync(ipc_tp_t *tp, ipc_op_t *op)
{
    if (op->fence == NULL)
        return;
    if (op->fence == tp->open_fence || op->fence->unrecorded) {
        uccl_gpu_ipc_use_device(tp, -1); /* teardown and dereg may run on another thread */
        fence_close(tp);
        if (op->fence->unrecorded)
            uccl_gpu_ipc_quiet_record(tp);
    }
    if (op->fence->flagged) /* its word comes in stream 0's order */
        uccl_gpu_stream_sync(tp->streams[0]);
    for (int k = 0; k < op->fence->nev; k++)
        uccl_gpu_event_sync(op->fence->ev[k]);
}

/* Take a done op off its list, let go of its region and fence. */
static void op_unlink(ipc_tp_t *tp, ipc_op_t *op)
{
    uccl_list_del(&op->link);
    if (op->kind == OP_TGT && op->memh != NULL)
        op->memh->tgt_inflight--;
    fence_put(tp, op->fence);
}

static void op_release(ipc_tp_t *tp, ipc_ep_t *ep, ipc_op_t *op)
{
    uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);

    op_unlink(tp, op);
    uccl_gpu_ipc_op_finish(ep, op);
    free(op);
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FINISH, t0, 1);
}

int uccl_gpu_ipc_ops_progress(ipc_ep_t *ep)
{
    uccl_list_t *pos, *tmp;
    int events = 0;

    if (uccl_list_empty(&ep->ops))
        return 0;
    if (ep->tp->nstreams > 0)
        uccl_gpu_ipc_use_device(ep->tp, -1);
    fence_close(ep->tp);
    /* Every op with copies has some on stream 0 (but with SM_STREAMS) and
     * fences are recorded in order, so ops finish in the order they were
     * queued: stop at the first one still running instead of querying every
     * fence of a deep window (with SM_STREAMS a later op may wait here for
     * an earlier one on another stream: later, never wrongly). */
    uccl_list_for_each_safe(pos, tmp, &ep->ops) {
        ipc_op_t *op = uccl_container_of(pos, ipc_op_t, link);
        if (!op_poll(ep->tp, op))
            break;
        op_release(ep->tp, ep, op);
        events++;
    }
    return events;
}

/* ep going away: wait for the copies (local GPU work, bounded) and drop
 * them. */
void uccl_gpu_ipc_ops_cancel(ipc_ep_t *ep)
{
    while (!uccl_list_empty(&ep->ops)) {
        ipc_op_t *op = uccl_list_first(&ep->ops, ipc_op_t, link);
        op_sync(ep->tp, op);
        op_poll(ep->tp, op);
        /* not finished: its request is the core's to complete, with the
         * connection's error or CANCELED (tp_api.h, ep_destroy) */
        op_unlink(ep->tp, op);
        free(op);
    }
}

/* A region is being deregistered: let the copies touching it finish first
 * (so nothing writes it once dereg returns) and forget it. */
void uccl_gpu_ipc_ops_forget_memh(ipc_tp_t *tp, uccl_tp_memh_t *memh)
{
    uccl_list_t *e, *o;

    uccl_list_for_each(e, &tp->eps) {
        ipc_ep_t *ep = uccl_container_of(e, ipc_ep_t, link);
        uccl_list_for_each(o, &ep->ops) {
            ipc_op_t *op = uccl_container_of(o, ipc_op_t, link);
            if (op->kind != OP_TGT || op->memh != memh)
                continue;
            op_sync(tp, op);
            op->memh = NULL;
        }
    }
    memh->tgt_inflight = 0;
}

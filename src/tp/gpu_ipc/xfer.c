/* gpu_ipc transfers: send/recv as a rendezvous matched by the receiver and
 * copied by it (pull) or, for large messages, by the sender (push); the
 * copy plans, waiters and completions that write/read (xfer_rma.c) share. */
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"

static uccl_tp_memh_t *iov_memh(const ipc_ep_t *ep, const uccl_req_iov_t *iov)
{
    return iov->region != NULL ? uccl_region_memh(iov->region, &ep->tp->base) : NULL;
}

/* Local iovs as segments of announced device allocations (the peer copies). */
uccl_status_t uccl_gpu_ipc_local_segs(ipc_ep_t *ep, const uccl_req_t *req, msg_seg_t *seg,
                                      uint32_t *nseg)
{
    *nseg = 0;
    for (int i = 0; i < req->iovcnt; i++) {
        uccl_tp_memh_t *memh = iov_memh(ep, &req->iov[i]);
        uccl_status_t st;

        if (req->iov[i].len == 0)
            continue;
        if (memh == NULL || memh->alloc == NULL) {
            uccl_error("gpu_ipc: host memory cannot be read or written by the peer process; "
                       "this operation needs every local piece in GPU memory");
            return UCCL_ERR_UNSUPPORTED;
        }
        st = uccl_gpu_ipc_announce(ep, memh->alloc);
        if (st != UCCL_OK)
            return st;
        seg[*nseg].key = (uint64_t)(uintptr_t)memh->alloc->base;
        seg[*nseg].off = (uint64_t)((char *)req->iov[i].addr - (char *)memh->alloc->base);
        seg[*nseg].len = req->iov[i].len;
        (*nseg)++;
    }
    return UCCL_OK;
}

int uccl_gpu_ipc_local_plan(const uccl_req_t *req, size_t off, ipc_seg_t *seg)
{
    uccl_req_cur_t cur;
    uint8_t *p;
    size_t len;
    int n = 0;

    uccl_req_cur_init(&cur, req, off);
    while ((len = uccl_req_cur_next(&cur, SIZE_MAX, &p, NULL)) > 0) {
        seg[n].ptr = (char *)p;
        seg[n].len = len;
        n++;
    }
    return n;
}

/* Peer segments through our mappings, each checked against its allocation. */
uccl_status_t uccl_gpu_ipc_peer_plan(ipc_ep_t *ep, const msg_seg_t *seg, uint32_t nseg, size_t skip,
                               ipc_seg_t *out, int *nout)
{
    int n = 0;

    for (uint32_t i = 0; i < nseg; i++) {
        ipc_map_t *map = uccl_gpu_ipc_map_find(ep, seg[i].key);
        if (map == NULL || seg[i].off > map->size || seg[i].len > map->size - seg[i].off) {
            uccl_gpu_ipc_ep_fail(ep, "peer named memory it never announced");
            return UCCL_ERR_PEER_FAILED;
        }
        if (skip > 0 && skip >= seg[i].len) { /* before the first byte wanted */
            skip -= seg[i].len;
            continue;
        }
        out[n].ptr = (char *)map->ptr + seg[i].off + skip;
        out[n].len = seg[i].len - skip;
        skip = 0;
        n++;
    }
    *nout = n;
    return UCCL_OK;
}

/* Is every non-empty piece of req GPU memory registered here? */
static bool pieces_on_gpu(const ipc_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        uccl_tp_memh_t *memh = iov_memh(ep, &req->iov[i]);
        if (req->iov[i].len > 0 && (memh == NULL || memh->alloc == NULL))
            return false;
    }
    return true;
}

/* Does req move GPU memory registered here to or from a GPU peer? */
bool uccl_gpu_ipc_req_d2d(const ipc_ep_t *ep, const uccl_req_t *req)
{
    return ep->peer_device >= 0 && req != NULL && pieces_on_gpu(ep, req);
}

/* May req's copies be held back for a batch (cfg.batch_max)? Only
 * device-to-device copies, on one GPU or to another one: the CPU's price
 * per copy (3.5-4.5 us on the H100/H200 machines) is more than NVLink's
 * time for a copy below about 2 MiB, so a window of such copies is bound by
 * the CPU, and the GPU waits little while a batch fills. Between two GPUs
 * only transfers below cfg.batch_cross (2M) wait: on 2x H200 batching 512
 * KiB-1 MiB gave 1.26-1.45x a plain copy (write) where one by one gave
 * 0.98x, and from 2 MiB both reach the link. Host memory on either side is
 * issued at once. */
bool uccl_gpu_ipc_batch_ok(const ipc_ep_t *ep, const uccl_req_t *req)
{
    size_t bytes = 0;

    if (!uccl_gpu_ipc_req_d2d(ep, req))
        return false;
    for (int i = 0; i < req->iovcnt; i++)
        bytes += req->iov[i].len;
    return ep->peer_device == ep->tp->device || bytes < ep->tp->cfg.batch_cross;
}

/* The micro profile around a post (prof.h): the post's own time, and the
 * time since the last post ended when no progress ran in between. */
uint64_t uccl_gpu_ipc_prof_post_begin(ipc_tp_t *tp)
{
    uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);

    if (t0 != 0 && tp->prof.last_post_end != 0 && t0 - tp->prof.last_post_end < 50000) {
        tp->prof.ns[IPC_PROF_GAP] += t0 - tp->prof.last_post_end;
        tp->prof.n[IPC_PROF_GAP]++;
    }
    return t0;
}

uccl_status_t uccl_gpu_ipc_prof_post_end(ipc_tp_t *tp, uint64_t t0, uccl_status_t st)
{
    IPC_PROF_ADD(&tp->prof, IPC_PROF_POST, t0, 1);
    if (t0 != 0)
        tp->prof.last_post_end = uccl_time_ns();
    return st;
}

ipc_op_t *uccl_gpu_ipc_op_new(ipc_op_kind_t kind, uccl_req_t *req)
{
    ipc_op_t *op = calloc(1, sizeof(*op));

    if (op != NULL) {
        op->kind = kind;
        op->req = req;
        uccl_list_init(&op->link);
    }
    return op;
}

/* ------------------------------------------------------------ waiters */

/* req waits in ep->waits[wait] under seq (ipc.h); a sequence number
 * already waiting there gets UCCL_ERR_INVALID_PARAM. */
static uccl_status_t waiter_add(ipc_ep_t *ep, int wait, uccl_req_t *req, uint64_t seq)
{
    uccl_status_t st;

    if (uccl_hmap_get(&ep->waits[wait], seq) != NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_hmap_put(&ep->waits[wait], seq, req);
    if (st == UCCL_OK) {
        req->tp_data[0] = seq;
        req->tp_data[4] = (uint64_t)wait + 1;
    }
    return st;
}

/* req stops waiting (if it was). */
static void waiter_drop(ipc_ep_t *ep, uccl_req_t *req)
{
    if (req->tp_data[4] != 0)
        uccl_hmap_del(&ep->waits[req->tp_data[4] - 1], req->tp_data[0]);
    req->tp_data[4] = 0;
}

/* The request waiting in ep->waits[wait] under seq, taken out; NULL: none. */
static uccl_req_t *waiter_take(ipc_ep_t *ep, int wait, uint64_t seq)
{
    uccl_req_t *req = uccl_hmap_get(&ep->waits[wait], seq);

    if (req != NULL)
        waiter_drop(ep, req);
    return req;
}

/* Send req's message (header m of mlen bytes, numbered seq, then our pieces)
 * and have req wait in ep->waits[wait] (none: wait < 0) for the answer that
 * completes its req->len bytes. */
uccl_status_t uccl_gpu_ipc_post_waiting(ipc_ep_t *ep, int wait, uccl_req_t *req, uint16_t type,
                                        uint64_t seq,
                                  const void *m, size_t mlen, const msg_seg_t *seg, uint32_t nseg)
{
    uccl_status_t st;

    if (wait >= 0 && (st = waiter_add(ep, wait, req, seq)) != UCCL_OK)
        return st;
    st = uccl_gpu_ipc_send_msg(ep, type, m, mlen, seg, nseg * sizeof(seg[0]));
    if (st != UCCL_OK) {
        waiter_drop(ep, req);
        return st;
    }
    req->tp_data[1] = req->len;
    req->tp_data[2] = 1; /* parts: the answer (a send's FIN, or the push + the FIN of a split) */
    return UCCL_OK;
}

/* ------------------------------------------------------------ send / recv */

uccl_status_t uccl_gpu_ipc_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;
    msg_seg_t seg[UCCL_IOV_MAX];
    msg_rts_t m = {0};
    uint64_t t0 = uccl_gpu_ipc_prof_post_begin(ep->tp);
    uccl_status_t st = uccl_gpu_ipc_local_segs(ep, req, seg, &m.nseg);

    if (st != UCCL_OK)
        return uccl_gpu_ipc_prof_post_end(ep->tp, t0, st);
    m.seq = ep->next_seq++;
    m.tag = req->tag;
    m.len = req->len;
    m.msg_seq = req->msg_seq;
    m.done_slot = uccl_gpu_ipc_done_claim(ep, m.seq, req->len);
    /* nothing for the peer to read in an empty message: no FIN comes */
    st = uccl_gpu_ipc_post_waiting(ep, req->len > 0 ? IPC_WAIT_SEND : -1, req, IPC_MSG_RTS, m.seq,
                                   &m, sizeof(m),
                      seg, m.nseg);
    if (st != UCCL_OK)
        uccl_gpu_ipc_done_release(ep, m.seq);
    if (st == UCCL_OK && req->len == 0)
        uccl_req_complete(req, UCCL_OK, 0);
    return uccl_gpu_ipc_prof_post_end(ep->tp, t0, st);
}

void uccl_gpu_ipc_fin_send(ipc_ep_t *ep, uint16_t type, uint64_t seq, uccl_status_t st,
                           uint64_t bytes)
{
    msg_fin_t f = {.seq = seq, .status = st, .bytes = bytes};

    uccl_gpu_ipc_send_msg(ep, type, &f, sizeof(f), NULL, 0);
}

/* A request split in two parts (its own copy and the peer's report of the
 * other) is done when both are: tp_data[2] counts the parts left,
 * tp_data[3] keeps the first error, tp_data[1] the bytes. */
void uccl_gpu_ipc_part_done(ipc_ep_t *ep, uccl_req_t *req, uccl_status_t st)
{
    if (st != UCCL_OK && req->tp_data[3] == 0)
        req->tp_data[3] = (uint64_t)(int64_t)st;
    if (req->tp_data[2] > 1) {
        req->tp_data[2]--;
        return;
    }
    waiter_drop(ep, req);
    st = (uccl_status_t)(int64_t)req->tp_data[3];
    uccl_req_complete(req, st, st == UCCL_OK ? req->tp_data[1] : 0);
}

/* Keep the first len bytes of a segment list; returns the new count. */
static uint32_t msg_segs_cut(msg_seg_t *seg, uint32_t n, size_t len)
{
    for (uint32_t i = 0; i < n; i++) {
        if (seg[i].len >= len) {
            seg[i].len = len;
            return len > 0 ? i + 1 : i;
        }
        len -= seg[i].len;
    }
    return n;
}

/* Bytes of a pushed message of len that the receiver pulls itself. */
static size_t pull_part(const ipc_ep_t *ep, size_t len)
{
    int share = ep->tp->cfg.split_pct;

    if (share <= 0 || share >= 100)
        return 0;
    return (len / 100 * (size_t)share) & ~(size_t)0xffff; /* 64 KiB multiples */
}

/* Push when large enough, the two processes use different GPUs and the
 * sender can map every piece of the receive. On one GPU the receiver pulls
 * it all: a push costs a clear-to-send more, and a split runs both
 * processes' copies on the GPU at once, which time-slices it between their
 * contexts (one H200, window of 16 at 1 MiB: 21.5 us a message split, 6.1
 * pushed, 5.8 pulled; a single 1 MiB message split took 229 us). Nor
 * while a send of ours to the peer is in flight (DUPLEX_PULL_MAX). */
static bool push_wanted(const ipc_ep_t *ep, const uccl_req_t *req, size_t len)
{
    size_t min = ep->tp->cfg.push_min;

    if (len <= ep->tp->cfg.duplex_pull_max && uccl_hmap_count(&ep->waits[IPC_WAIT_SEND]) > 0)
        return false; /* an exchange (DUPLEX_PULL_MAX): the peer's GPU pulls our send meanwhile */
    if (min == 0 || len < min || (ep->peer_device >= 0 && ep->peer_device == ep->tp->device) ||
        uccl_gpu_ipc_auto_sm(ep, len)) /* COPY=auto: pulled whole by kernel */
        return false;
    return pieces_on_gpu(ep, req);
}

static uccl_status_t recv_pull(ipc_ep_t *ep, uccl_req_t *req, const msg_rts_t *rts,
                               const msg_seg_t *seg, size_t off);

/* Ask the sender to push a matched message (all of it, or the head while
 * we pull the tail); false leaves it all to a pull. */
static bool recv_push(ipc_ep_t *ep, uccl_req_t *req, const msg_rts_t *rts, const msg_seg_t *peer)
{
    msg_seg_t seg[UCCL_IOV_MAX];
    msg_cts_t m = {.seq = rts->seq, .len = rts->len};
    uccl_status_t st;

    if (!push_wanted(ep, req, rts->len) || uccl_gpu_ipc_local_segs(ep, req, seg,
                                                                   &m.nseg) != UCCL_OK)
        return false;
    m.push_len = rts->len - pull_part(ep, rts->len);
    m.nseg = msg_segs_cut(seg, m.nseg, m.push_len);
    /* (a number the peer sent twice is pulled instead) */
    if (waiter_add(ep, IPC_WAIT_PUSH, req, m.seq) != UCCL_OK)
        return false;
    if (uccl_gpu_ipc_send_msg(ep, IPC_MSG_CTS, &m, sizeof(m), seg, m.nseg * sizeof(seg[0])) != UCCL_OK) {
        waiter_drop(ep, req);
        return false;
    }
    req->tp_data[1] = m.len;
    req->tp_data[2] = m.push_len < m.len ? 2 : 1; /* PUSH_DONE (+ our pull) */
    if (m.push_len < m.len && (st = recv_pull(ep, req, rts, peer, m.push_len)) != UCCL_OK) {
        uccl_gpu_ipc_fin_send(ep, IPC_MSG_FIN, rts->seq, UCCL_ERR_TRANSPORT, 0);
        uccl_gpu_ipc_part_done(ep, req, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
    }
    return true;
}

/* Pull bytes [off, len) of a matched message into the same bytes of req. */
static uccl_status_t recv_pull(ipc_ep_t *ep, uccl_req_t *req, const msg_rts_t *rts,
                               const msg_seg_t *seg, size_t off)
{
    ipc_seg_t dst[UCCL_IOV_MAX], src[UCCL_IOV_MAX];
    ipc_op_t *op = uccl_gpu_ipc_op_new(OP_RECV, req);
    int ns = 0;
    uccl_status_t st = op ? uccl_gpu_ipc_peer_plan(ep, seg, rts->nseg, off, src,
                                                   &ns) : UCCL_ERR_NO_MEMORY;

    if (st == UCCL_OK) {
        int nd = uccl_gpu_ipc_local_plan(req, off, dst);

        op->seq = rts->seq;
        op->bytes = rts->len - off;
        op->batch = uccl_gpu_ipc_batch_ok(ep, req);
        op->done_slot = off == 0 ? rts->done_slot : 0; /* (a split's tail: FIN, as its CTS says) */
        st = uccl_gpu_ipc_op_start(ep, op, dst, nd, src, ns, rts->len - off);
    }
    if (st != UCCL_OK)
        free(op);
    return st;
}

/* Pull a matched message into the receive, or have the sender push it. An
 * empty message is done at once (its sender did not wait for a FIN). */
static void recv_start(ipc_ep_t *ep, uccl_req_t *req, const msg_rts_t *rts, const msg_seg_t *seg)
{
    uccl_status_t st;

    if (rts->len == 0) {
        uccl_req_complete(req, UCCL_OK, 0);
        return;
    }
    if (recv_push(ep, req, rts, seg))
        return;
    req->tp_data[1] = rts->len;
    req->tp_data[2] = 1;
    st = recv_pull(ep, req, rts, seg, 0);
    if (st != UCCL_OK) {
        uccl_gpu_ipc_fin_send(ep, IPC_MSG_FIN, rts->seq, UCCL_ERR_TRANSPORT, 0);
        uccl_req_complete(req, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT, 0);
    }
}

/* A receive took a held message. */
void uccl_gpu_ipc_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    ipc_rts_t *rts = uccl_container_of(msg, ipc_rts_t, msg);

    uccl_list_del(&rts->link);
    recv_start((ipc_ep_t *)base, req, &rts->hdr, rts->seg);
    free(rts);
}

/* A send arrived: into the receive the core has for it, else held. */
void uccl_gpu_ipc_on_rts(ipc_ep_t *ep, const msg_rts_t *m, const msg_seg_t *seg)
{
    ipc_rts_t *rts;
    uccl_req_t *req;

    if (uccl_msg_arrived(ep->base.conn, &ep->base, m->msg_seq, m->tag, m->len, &req) != UCCL_OK) {
        uccl_gpu_ipc_ep_fail(ep, "a message number came twice");
        return;
    }
    if (req != NULL) {
        recv_start(ep, req, m, seg);
        return;
    }
    rts = malloc(sizeof(*rts) + m->nseg * sizeof(*seg));
    if (rts == NULL) {
        uccl_gpu_ipc_ep_fail(ep, "out of memory for an incoming message");
        return;
    }
    rts->hdr = *m;
    memcpy(rts->seg, seg, m->nseg * sizeof(*seg));
    rts->msg = (uccl_msg_t){.seq = m->msg_seq, .tag = m->tag, .len = m->len};
    uccl_list_push_back(&ep->unexp, &rts->link);
    uccl_msg_hold(ep->base.conn, &ep->base, &rts->msg);
}

/* The receiver's clear-to-send: copy the send into the named buffers; the
 * send completes with its copy, the receive on our PUSH_DONE. */
void uccl_gpu_ipc_on_cts(ipc_ep_t *ep, const msg_cts_t *m, const msg_seg_t *seg)
{
    ipc_seg_t dst[UCCL_IOV_MAX], src[UCCL_IOV_MAX];
    uccl_req_t *req = uccl_hmap_get(&ep->waits[IPC_WAIT_SEND], m->seq);
    ipc_op_t *op;
    uccl_status_t st;
    int nd = 0;

    if (req == NULL || m->len != req->len || m->push_len == 0 || m->push_len > m->len) {
        if (req != NULL) {
            waiter_drop(ep, req);
            uccl_req_complete(req, UCCL_ERR_PEER_FAILED, 0);
        }
        uccl_gpu_ipc_ep_fail(ep, "clear-to-send for an unknown send or with a wrong length");
        return;
    }
    uccl_gpu_ipc_done_release(ep, m->seq); /* the receiver answers a pushed message with FIN */
    if (m->push_len < m->len) /* the receiver pulls the rest: its FIN comes too */
        req->tp_data[2] = 2;
    else
        waiter_drop(ep, req);
    op = uccl_gpu_ipc_op_new(OP_PUSH, req);
    st = op ? uccl_gpu_ipc_peer_plan(ep, seg, m->nseg, 0, dst, &nd) : UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK) {
        op->seq = m->seq;
        op->bytes = m->push_len;
        op->batch = uccl_gpu_ipc_batch_ok(ep, req);
        st = uccl_gpu_ipc_op_start(ep, op, dst, nd, src, uccl_gpu_ipc_local_plan(req, 0, src),
                                                                                 m->push_len);
    }
    if (st != UCCL_OK) {
        free(op);
        uccl_gpu_ipc_fin_send(ep, IPC_MSG_PUSH_DONE, m->seq, UCCL_ERR_TRANSPORT, 0);
        uccl_gpu_ipc_part_done(ep, req, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
    }
}

/* FIN (pulled send done), TGT_DONE (target copy done) and PUSH_DONE (pushed
 * receive done) complete the request waiting under that sequence number. */
void uccl_gpu_ipc_on_fin(ipc_ep_t *ep, int wait, const msg_fin_t *m)
{
    uccl_req_t *req = waiter_take(ep, wait, m->seq);

    if (req == NULL) {
        uccl_gpu_ipc_ep_fail(ep, "completion for an unknown request");
        return;
    }
    if (wait == IPC_WAIT_SEND)
        uccl_gpu_ipc_done_release(ep, m->seq);
    uccl_gpu_ipc_part_done(ep, req, (uccl_status_t)m->status);
}

void uccl_gpu_ipc_send_done(ipc_ep_t *ep, uint64_t seq)
{
    uccl_req_t *req = waiter_take(ep, IPC_WAIT_SEND, seq);

    if (req != NULL) /* (else the connection failed and the core completed it) */
        uccl_gpu_ipc_part_done(ep, req, UCCL_OK);
}

/* ------------------------------------------------------------ completions */

void uccl_gpu_ipc_op_finish(ipc_ep_t *ep, ipc_op_t *op)
{
    uccl_status_t st = op->status;

    switch (op->kind) {
    case OP_LOCAL:
        if (st == UCCL_OK && op->has_notif) {
            msg_key_t n = {op->notif};
            st = uccl_gpu_ipc_send_msg(ep, IPC_MSG_NOTIF, &n, sizeof(n), NULL, 0);
        }
        uccl_req_complete(op->req, st, st == UCCL_OK ? op->bytes : 0);
        break;
    case OP_RECV:
    case OP_PUSH:
        /* a sender told by its word (done.c) waits for no FIN unless the copy failed */
        if (st != UCCL_ERR_CANCELED && !(st == UCCL_OK && op->done_told))
            uccl_gpu_ipc_fin_send(ep, op->kind == OP_RECV ? IPC_MSG_FIN : IPC_MSG_PUSH_DONE,
                                  op->seq, st, op->bytes);
        uccl_gpu_ipc_part_done(ep, op->req, st);
        break;
    case OP_TGT:
        if (st == UCCL_OK && op->has_notif)
            uccl_conn_notif_push(ep->base.conn, op->notif);
        if (st != UCCL_ERR_CANCELED)
            uccl_gpu_ipc_fin_send(ep, IPC_MSG_TGT_DONE, op->seq, st, 0);
        break;
    }
}

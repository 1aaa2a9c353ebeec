/* gpu_ipc ready-to-receive offers (cfg.ready): a receive in GPU memory
 * posted before its message sends its buffers to the sender (READY), so
 * that the send copies into them at once and announces the message when
 * its copy is done (PUSHED): the sender is done with its own copy, the
 * receiver with one message, and no RTS, pull plan or FIN is on the way.
 *
 * Why it is safe without a handshake: the core offers a receive only
 * when it is the first posted receive with its tag and every message
 * numbered below msg_seq has arrived with none of its tag left held
 * (match.c, recv_offer). Until message msg_seq arrives no later message
 * can be matched (matching goes in message-number order), so the receive
 * stays posted, and message msg_seq, if it has the tag and fits, goes to
 * it. An offer therefore names one message number, and only the send of
 * that number may use it: the sender takes an offer only for a send whose
 * req->msg_seq equals it (and tag, size and GPU memory fit); any other
 * send, on this transport or another, leaves it unused, and the receiver
 * then gets message msg_seq as usual (RTS, or another transport), with the
 * receive untouched. A READY that crosses the RTS of its message is stale
 * on arrival (its number is below sent_below) and dropped. The receiver
 * checks that PUSHED lands on the receive it offered (the core hands it
 * back from uccl_msg_arrived); anything else is a peer bug and fails the
 * connection. A receive's memory can be written by the sender's push only
 * between the READY and the PUSHED; a connection that fails in between
 * completes the receive with its error while a live peer's push may still
 * land, as with the existing pushes after a CTS (ipc.h).
 *
 * Off by default (UCCL_GPU_IPC_READY=0; measured in
 * tests/gpu/results/4xH200-gpu12): in a ping-pong (uccl_perf's window 1:
 * send, then a 0-byte ack back) the critical path has two hops either
 * way (RTS then ack, or PUSHED then ack), and the READY's handling moves
 * onto the sender's post; a window's later messages wait for the pushed
 * one's PUSHED (matching is in message order); and on one GPU it is not
 * used at all (slower). What it does give: a send completes on its own
 * copy, without the receiver's progress. */
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"

/* Offers the sender keeps at most (unused ones are dropped by the next
 * send numbered past them; beyond this many, new ones are not kept). */
#define IPC_OFFERS_MAX 64

typedef struct ipc_offer {
    msg_ready_t hdr;
    uccl_list_t link; /* ep->offers */
    msg_seg_t seg[];
} ipc_offer_t;

/* ------------------------------------------------------------ receiver */

/* Is req worth an offer? GPU memory on both sides of two different GPUs
 * (on one GPU the sender's copies and the receiver's pulls interleave two
 * processes on the GPU: measured slower, see cfg READY), and below
 * PUSH_MIN (larger messages go by the clear-to-send push, split with a
 * pull: ipc.h). */
static bool ready_wanted(const ipc_ep_t *ep, const uccl_req_t *req, size_t len)
{
    size_t min = ep->tp->cfg.push_min;

    return ep->tp->cfg.ready && len > 0 && (min == 0 || len < min) &&
           ep->peer_device != ep->tp->device && uccl_gpu_ipc_req_d2d(ep, req);
}

/* Has the peer mapped every allocation req lies in already? An offer never
 * announces memory: the receive may be matched another way and its memory
 * freed before the peer reads an announcement, which it could then not
 * map (a broken connection). Memory the peer knows stays mapped there until
 * our ALLOC_GONE, which follows the READY on the ring. (A clear-to-send
 * push, or a grant, announces it.) */
static bool known_to_peer(ipc_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        uccl_tp_memh_t *memh = req->iov[i].region != NULL
                                   ? uccl_region_memh(req->iov[i].region, &ep->tp->base)
                                   : NULL;
        if (req->iov[i].len > 0 &&
            (memh == NULL || memh->alloc == NULL || !uccl_gpu_ipc_announced(ep, memh->alloc)))
            return false;
    }
    return true;
}

void uccl_gpu_ipc_recv_posted(uccl_tp_ep_t *base, uccl_req_t *req, uint64_t msg_seq)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;
    msg_seg_t seg[UCCL_IOV_MAX];
    msg_ready_t m = {.msg_seq = msg_seq, .tag = req->tag, .len = req->len};

    if (ep->failed || !ep->connected || !ready_wanted(ep, req, req->len) || !known_to_peer(ep, req) ||
        uccl_gpu_ipc_local_segs(ep, req, seg, &m.nseg) != UCCL_OK)
        return;
    m.id = ++ep->ready_ids;
    if (uccl_gpu_ipc_send_msg(ep, IPC_MSG_READY, &m, sizeof(m), seg,
                              m.nseg * sizeof(seg[0])) != UCCL_OK)
        return;
    req->tp_ptr = ep; /* the receive this offer is for, checked at PUSHED */
    req->tp_data[6] = m.id;
}

/* The sender pushed message m->msg_seq into the receive of offer m->id. */
void uccl_gpu_ipc_on_pushed(ipc_ep_t *ep, const msg_pushed_t *m)
{
    uccl_status_t st = (uccl_status_t)m->status;
    uccl_req_t *req;

    if (uccl_msg_arrived(ep->base.conn, &ep->base, m->msg_seq, m->tag, m->len, &req) != UCCL_OK) {
        uccl_gpu_ipc_ep_fail(ep, "a message number came twice");
        return;
    }
    if (req == NULL || req->tp_ptr != ep || req->tp_data[6] != m->id) {
        if (req != NULL)
            uccl_req_complete(req, UCCL_ERR_PEER_FAILED, 0);
        uccl_gpu_ipc_ep_fail(ep, "a pushed message that is not the one its receive was offered for");
        return;
    }
    req->tp_ptr = NULL;
    uccl_req_complete(req, st, st == UCCL_OK ? m->len : 0);
}

/* ------------------------------------------------------------ sender */

static void offer_drop(ipc_ep_t *ep, ipc_offer_t *o)
{
    uccl_list_del(&o->link);
    ep->noffers--;
    free(o);
}

void uccl_gpu_ipc_on_ready(ipc_ep_t *ep, const msg_ready_t *m, const msg_seg_t *seg)
{
    ipc_seg_t chk[UCCL_IOV_MAX];
    ipc_offer_t *o;
    int n;

    if (!ep->tp->cfg.ready)
        return; /* never taken here (ready_wanted) */
    /* every piece inside memory the peer announced (else the peer is broken: ep fails) */
    if (uccl_gpu_ipc_peer_plan(ep, seg, m->nseg, 0, chk, &n) != UCCL_OK)
        return;
    if (m->msg_seq < ep->sent_below || ep->noffers >= IPC_OFFERS_MAX)
        return; /* crossed the send of its number, or too many unused */
    o = malloc(sizeof(*o) + m->nseg * sizeof(*seg));
    if (o == NULL)
        return; /* an offer may always go unused */
    o->hdr = *m;
    memcpy(o->seg, seg, m->nseg * sizeof(*seg));
    uccl_list_push_back(&ep->offers, &o->link);
    ep->noffers++;
}

/* The offer for req's message number and tag, taken out; offers for lower
 * numbers (never usable now) are dropped on the way. */
static ipc_offer_t *offer_take(ipc_ep_t *ep, const uccl_req_t *req)
{
    uccl_list_t *pos, *tmp;
    ipc_offer_t *hit = NULL;

    uccl_list_for_each_safe(pos, tmp, &ep->offers) {
        ipc_offer_t *o = uccl_container_of(pos, ipc_offer_t, link);

        if (o->hdr.msg_seq > req->msg_seq)
            continue;
        if (hit == NULL && o->hdr.msg_seq == req->msg_seq && o->hdr.tag == req->tag) {
            uccl_list_del(&o->link);
            ep->noffers--;
            hit = o;
        } else {
            offer_drop(ep, o);
        }
    }
    return hit;
}

static void pushed_send(ipc_ep_t *ep, uint64_t msg_seq, const uccl_req_t *req, uint64_t id,
                        uccl_status_t st, size_t bytes)
{
    msg_pushed_t p = {.msg_seq = msg_seq, .tag = req->tag, .len = bytes, .id = id, .status = st};

    uccl_gpu_ipc_send_msg(ep, IPC_MSG_PUSHED, &p, sizeof(p), NULL, 0);
}

uccl_status_t uccl_gpu_ipc_ready_send(ipc_ep_t *ep, uccl_req_t *req)
{
    ipc_offer_t *o;
    uccl_status_t st;

    if (ep->noffers == 0) {
        if (req->msg_seq >= ep->sent_below)
            ep->sent_below = req->msg_seq + 1;
        return UCCL_ERR_NOT_FOUND;
    }
    o = offer_take(ep, req);
    if (req->msg_seq >= ep->sent_below)
        ep->sent_below = req->msg_seq + 1;
    if (o == NULL)
        return UCCL_ERR_NOT_FOUND;
    if (req->len > o->hdr.len || !ready_wanted(ep, req, req->len)) {
        free(o); /* the receive gets this message as usual (and fails it if too small) */
        return UCCL_ERR_NOT_FOUND;
    }
    /* From here on message req->msg_seq is this push: the receiver learns
     * its end, good or not, from PUSHED. */
    st = uccl_gpu_ipc_push_start(ep, req, o->seg, o->hdr.nseg, req->msg_seq, req->len, o->hdr.id);
    if (st != UCCL_OK) {
        pushed_send(ep, req->msg_seq, req, o->hdr.id, UCCL_ERR_TRANSPORT, 0);
        uccl_req_complete(req, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT, 0);
    }
    free(o);
    return UCCL_OK;
}

/* A push into an offer finished (op_finish): tell the receiver, done. */
void uccl_gpu_ipc_ready_done(ipc_ep_t *ep, ipc_op_t *op)
{
    uccl_status_t st = op->status;

    if (st != UCCL_ERR_CANCELED)
        pushed_send(ep, op->seq, op->req, op->notif, st, st == UCCL_OK ? op->bytes : 0);
    uccl_req_complete(op->req, st, st == UCCL_OK ? op->bytes : 0);
}

void uccl_gpu_ipc_offers_free(ipc_ep_t *ep)
{
    while (!uccl_list_empty(&ep->offers))
        offer_drop(ep, uccl_list_first(&ep->offers, ipc_offer_t, link));
}

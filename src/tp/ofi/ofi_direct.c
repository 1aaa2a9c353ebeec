/* Direct sends (UCCL_OFI_DIRECT): a send above UCCL_OFI_EAGER and up to the
 * peer's UCCL_OFI_DIRECT_MAX, from registered host memory in up to
 * UCCL_OFI_MAX_IOV pieces (the provider's iov_limit, at most 16),
 * goes as one fi_tsendmsg carrying its uccl tag as remote
 * CQ data: no RTS, no CTS, the provider's own protocol moves the bytes
 * (shm: one command and the receiver's CMA read, as raw fi_tsend).
 *
 * Matching stays the core's. The receiver posts, for the next message
 * number n only (uccl_msg_next), one fi_trecv into the oldest posted
 * receive's pieces with the connection's bounce after them (so that no
 * message is cut short in the provider): its provider tag takes message n
 * only if n is a direct send of that receive's tag (below). The
 * completion hands n to uccl_msg_arrived, which gives it that receive when
 * the tag was its and it fits (tp_api.h, uccl_msg_next). A direct message
 * that finds no such receive (sent before the receive was posted) waits in
 * the provider's unexpected queue, and the fi_trecv posted once its
 * receive is there takes it from there, straight into the receive's
 * pieces. A message the core gives elsewhere (another tag, no receive yet)
 * is taken by a second fi_trecv for n, into the bounce, posted behind the
 * first once n waited UCCL_OFI_DIRECT_WAIT microseconds, and copied (or
 * held as an eager message is). A message longer than the receive lands in
 * the receive's pieces and the bounce: the receive fails as too small, the
 * message is copied out.
 *
 * Posted ahead (UCCL_OFI_DIRECT_DEPTH D, 16 on shm by its quirk row): slot
 * k posts for message n + k into the k-th posted receive while receives
 * 0..k have one tag and one length (uccl_msg_posted_after), so the receive
 * cannot be taken by an earlier message while its fi_trecv is posted. A
 * message landed before an earlier one arrived waits in place and goes to
 * uccl_msg_arrived in order. Message m's bounce is number m mod D of D.
 *
 * No message lands in a receive the core does not give it (a receive's
 * bytes past its message's length must stay as they were, uccl.h), by the
 * provider tag alone: bit 62, n's low 13 bits << 49, the sender's run << 44,
 * the uccl tag << 32 (only tags below 2^12 go directly, both ways: the tag
 * is matched exactly), the receiving connection's id. The run is how many
 * messages just before this one on the connection had its tag (0-31, the
 * sender counts every send in message order, ofi_direct_run). Slot 0 takes
 * message n of the oldest receive's tag: the core gives it that receive
 * (or fails the receive as too short). Slot k > 0 takes message n + k only
 * with the run that says messages n..n+k-1 had that tag too (ofi_direct_want,
 * from message n - 1's tag and run, which came in its CQ data): each of them
 * took the receive before, or, too long for their common length, failed it
 * and all the others up to slot k. Only a receive that failed can hold
 * bytes of a message it did not get. Control messages (the id alone) and
 * the tagged rendezvous (bit 63) take none of these bits. With exact tags
 * (OFI_QUIRK_EXACT_TAGS, shm) every receive has one run and tag: ofi_dhint.c.
 * This file holds the receiving side; the sending side is ofi_dsend.c. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_DRUN_ANY (-1)     /* slot 0: any run */
#define OFI_DRUN_UNKNOWN (-2) /* message n - 1 did not come directly: slot 0 only */
#define OFI_DNO_TAG UINT64_MAX /* not a direct tag: the run before message 0 */

/* The CQ data of a direct send: its run and its tag. */
static uint64_t ofi_dtag_of(uint64_t data)
{
    return data & 0xffffffffull;
}

static unsigned ofi_drun_of(uint64_t data)
{
    return (unsigned)(data >> 32 & OFI_DRUN_MASK);
}

/* Registered host memory, not staged (uccl_ofi_req_staged), in pieces one
 * operation takes: the number of pieces, or -1. One pass, each piece's
 * handle read once (asked of every new receive, ofi16b). A send may have
 * several pieces, up to the provider's iov_limit: session 13 took only one
 * after a 3-piece send stalled shm between two processes in t_p2p
 * (libfabric 1.17). That was shm's unexpected-queue match with a stale
 * ignore mask (t_p2p's 5-piece recvv takes the message through the bounce,
 * whose receive had ignore bits): without OFI_QUIRK_EXACT_TAGS t_p2p stalls
 * there every run, with it 160 of 160 runs (shm, tcp;ofi_rxm) and
 * test_ofi_direct_v passed (tests/perf/results/ofi/ofi16c-local). */
int uccl_ofi_direct_mem_pieces(const tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    int n = 0;

    if (req->gpu_caps != 0)
        return -1;
    for (int i = 0; i < req->iovcnt; i++) {
        const uccl_tp_memh_t *memh;

        if (req->iov[i].len == 0)
            continue;
        memh = uccl_ofi_iov_memh(ep->tp, req, i);
        if (memh == NULL || memh->mr == NULL)
            return -1;
        n++;
    }
    return n <= ep->tp->cfg.max_iov ? n : -1;
}

/* ------------------------------------------------------------------ receiver */

uccl_status_t uccl_ofi_direct_setup(tp_ofi_ep_t *ep)
{
    tp_ofi_t *tp = ep->tp;
    size_t len = tp->direct_max * (size_t)tp->direct_depth;

    ep->srun_next = UINT64_MAX; /* message 0 starts a run */
    ep->drun_seq = UINT64_MAX;  /* "message -1": no direct tag */
    ep->drun_tag = OFI_DNO_TAG;
    if (uccl_ofi_dhint_init(ep) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    if (tp->direct_max == 0)
        return UCCL_OK;
    ep->dbuf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    if (ep->dbuf == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (tp->mr_mode & FI_MR_LOCAL)
        return uccl_ofi_reg_buf(tp, ep->dbuf, len, &ep->dbuf_mr, &ep->dbuf_desc);
    return UCCL_OK;
}

/* Message seq's bounce: the slots cover depth consecutive numbers. */
static uint8_t *ofi_dbounce(const tp_ofi_ep_t *ep, uint64_t seq)
{
    return ep->dbuf + (seq % (uint64_t)ep->tp->direct_depth) * ep->tp->direct_max;
}

/* A receive the provider may fill with message n: registered host memory
 * in pieces that one operation takes with the bounce after them. */
static bool ofi_direct_into_ok(const tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    int n;

    if (req == NULL || req->op != UCCL_OP_RECV || req->tag > OFI_DTAG_MASK)
        return false;
    n = uccl_ofi_direct_mem_pieces(ep, req);
    return n >= 0 && n < ep->tp->cfg.max_iov;
}

/* A receive for message seq (ofi.h): into req's pieces with seq's bounce
 * after them, or into the bounce. Only one of the two can take message
 * seq, so they share the bounce. NULL: not posted (again next progress). */
ofi_op_t *uccl_ofi_direct_post_recv(tp_ofi_ep_t *ep, uint64_t seq, uccl_req_t *req, int run,
                                     const ofi_dhint_t *hint)
{
    tp_ofi_t *tp = ep->tp;
    struct iovec iov[OFI_IOV_MAX];
    void *desc[OFI_IOV_MAX];
    struct fi_msg_tagged msg = {.addr = FI_ADDR_UNSPEC};
    ofi_op_t *op = uccl_ofi_op_get(tp);
    int n = 0, rc;

    if (op == NULL)
        return NULL;
    if (req != NULL) {
        uccl_ofi_gather(ep, req, 0, req->len, iov, desc, tp->cfg.max_iov - 1, &n);
        msg.tag = uccl_ofi_dtag(ep->id, seq, run >= 0 ? (uint64_t)run : 0, req->tag);
        msg.ignore = run >= 0 ? 0 : OFI_DRUN_MASK << OFI_DRUN_SHIFT;
    } else if (hint != NULL) {
        msg.tag = uccl_ofi_dtag(ep->id, seq, (uint64_t)hint->run, hint->tag);
    } else {
        msg.tag = uccl_ofi_dtag(ep->id, seq, 0, 0);
        msg.ignore = OFI_DRUN_MASK << OFI_DRUN_SHIFT | OFI_DTAG_MASK << OFI_DTAG_SHIFT;
    }
    if (req == NULL || req->len < tp->direct_max) {
        iov[n] = (struct iovec){ofi_dbounce(ep, seq), tp->direct_max};
        desc[n++] = ep->dbuf_desc;
    }
    op->kind = OFI_OP_DRECV;
    op->ep = ep;
    op->dreq = req;
    op->off = seq;
    op->index = run; /* exact tags: reposted when the run wanted changes */
    msg.msg_iov = iov;
    msg.desc = desc;
    msg.iov_count = (size_t)n;
    msg.context = &op->ctx;
    rc = (int)fi_trecvmsg(tp->ep, &msg, FI_COMPLETION);
    if (rc != 0) {
        uccl_ofi_op_put(tp, op);
        if (rc != -FI_EAGAIN) {
            uccl_error("ofi (%s): fi_trecvmsg (direct): %s", tp->prov, fi_strerror(-rc));
            uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
        }
        return NULL;
    }
    ep->posted++;
    uccl_list_push_back(&ep->data_ops, &op->link);
    return op;
}

static void ofi_direct_cancel_op(tp_ofi_ep_t *ep, ofi_op_t **slot)
{
    if (*slot == NULL)
        return;
    (*slot)->cancelled = true;
    fi_cancel(&ep->tp->ep->fid, &(*slot)->ctx);
    *slot = NULL;
}

/* Message seq (CQ data: its tag and run; len bytes) landed in req's pieces
 * and seq's bounce (req NULL: the bounce alone), every earlier message
 * having arrived. */
static void ofi_direct_landed(tp_ofi_ep_t *ep, uint64_t seq, uccl_req_t *req, size_t len,
                              uint64_t data)
{
    uint8_t *bounce = ofi_dbounce(ep, seq);
    uint64_t tag = ofi_dtag_of(data);
    uccl_req_t *oldest, *got;
    void *tmp;

    ep->drun_seq = seq;
    ep->drun_tag = tag;
    ep->drun = ofi_drun_of(data);
    if (req == NULL) {
        ep->tp->direct_copied++;
        uccl_rndv_payload_arrived(&ep->rndv, seq, tag, bounce, len);
        return;
    }
    if (uccl_msg_next(ep->base.conn, &oldest) == seq && tag == req->tag && len <= req->len &&
        oldest == req) { /* the core gives it req */
        if (uccl_msg_arrived(ep->base.conn, &ep->base, seq, tag, len, &got) != UCCL_OK ||
            got != req) {
            uccl_error("ofi (%s): direct message %llu not matched to the receive it landed in",
                       ep->tp->prov, (unsigned long long)seq);
            uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
            return;
        }
        ep->tp->direct_placed++;
        uccl_req_complete(req, UCCL_OK, len);
        return;
    }
    /* longer than req, which the core failed as too small: req's pieces
     * and the bounce hold it */
    tmp = malloc(len > 0 ? len : 1);
    if (tmp == NULL) {
        uccl_error("ofi (%s): out of memory moving a direct message", ep->tp->prov);
        uccl_ofi_conn_fail(ep, UCCL_ERR_NO_MEMORY);
        return;
    }
    uccl_req_iov_copy_out(req, 0, tmp, len < req->len ? len : req->len);
    if (len > req->len)
        memcpy((uint8_t *)tmp + req->len, bounce, len - req->len);
    ep->tp->direct_copied++;
    uccl_rndv_payload_arrived(&ep->rndv, seq, tag, tmp, len);
    free(tmp);
}

/* Move the slots to message n: those of earlier numbers are done (the
 * message came another way: their receives are cancelled). The ring turns:
 * slot 0's place, emptied, is the last slot's from now (no copy of the
 * others). */
static void ofi_direct_shift(tp_ofi_ep_t *ep, uint64_t n)
{
    uint64_t depth = (uint64_t)ep->tp->direct_depth;
    uint64_t steps = n - ep->dseq > depth ? depth : n - ep->dseq; /* more: the rest are empty */

    for (uint64_t i = 0; i < steps; i++) {
        ofi_dslot_t *s0 = uccl_ofi_dslot(ep, 0);

        if (s0->landed) { /* handed in when its turn came: cannot be */
            uccl_error("ofi (%s): direct message %llu left behind", ep->tp->prov,
                       (unsigned long long)ep->dseq);
            uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
            return;
        }
        ofi_direct_cancel_op(ep, &s0->op);
        ofi_direct_cancel_op(ep, &ep->dany);
        *s0 = (ofi_dslot_t){0};
        ep->dseq++;
        ep->dsince = 0;
    }
    if (ep->dseq < n) { /* many came another way */
        ep->dseq = n;
        ep->dsince = 0;
    }
}

/* Messages that landed ahead of an earlier one, in order once theirs come. */
static void ofi_direct_drain(tp_ofi_ep_t *ep)
{
    uccl_req_t *oldest;

    while (uccl_ofi_conn_ok(ep)) {
        uint64_t n = uccl_msg_next(ep->base.conn, &oldest);
        ofi_dslot_t s;

        ofi_direct_shift(ep, n);
        if (ep->dseq != n || !uccl_ofi_dslot(ep, 0)->landed)
            return;
        s = *uccl_ofi_dslot(ep, 0);
        *uccl_ofi_dslot(ep, 0) = (ofi_dslot_t){0};
        ofi_direct_landed(ep, n, s.req, s.len, s.data);
    }
}

/* ofi_direct_into_ok for slot k's receive, not asked again while the slot's
 * fi_trecv goes into it or a message landed there: a posted receive's
 * pieces and their memory stay what they were when it was posted. (Asked
 * of every slot in every progress call, it was most of the receiver's own
 * instructions per call at depth 16.) */
static bool ofi_direct_slot_into_ok(const tp_ofi_ep_t *ep, int k, const uccl_req_t *req)
{
    const ofi_dslot_t *s;

    if (req == NULL || k >= ep->tp->direct_depth)
        return ofi_direct_into_ok(ep, req);
    s = &ep->dslot[uccl_ofi_dslot_at(ep->dseq + (uint64_t)k)];
    if ((s->op != NULL && s->op->dreq == req) || (s->landed && s->req == req))
        return true;
    return ofi_direct_into_ok(ep, req);
}

/* The receive message dseq + k goes to if it and the k messages before it
 * have the tag of the oldest posted receive: the k-th posted, while
 * receives 0..k have that tag and that length (so that a message too long
 * for one of them fails all of them, up to the k-th). */
static uccl_req_t *ofi_direct_next_into(tp_ofi_ep_t *ep, int k, uccl_req_t *prev, uint64_t tag,
                                        size_t len)
{
    uccl_req_t *req = uccl_msg_posted_after(ep->base.conn, prev);

    return req != NULL && req->tag == tag && req->len == len && ofi_direct_slot_into_ok(ep, k, req)
               ? req
               : NULL;
}

/* The run message n + k of tag must carry to land in slot k: the one that
 * says messages n..n+k-1 had tag too. Known from message n - 1's tag and
 * run (it came directly, or n is 0) or the sender's hint for n (ofi_dhint.c,
 * OFI_DRUN_UNKNOWN if that names another tag); else OFI_DRUN_UNKNOWN, or
 * with exact tags k, as if n - 1 had another tag (any run >= k is safe). */
static int ofi_direct_want(const tp_ofi_ep_t *ep, uint64_t n, int k, uint64_t tag)
{
    const ofi_dhint_t *hint = uccl_ofi_dhint_of(ep, n);
    uint64_t want;

    if (hint != NULL && hint->tag != tag)
        return OFI_DRUN_UNKNOWN;
    if (hint != NULL)
        want = (uint64_t)hint->run + (uint64_t)k;
    else if (ep->drun_seq == n - 1)
        want = ep->drun_tag == tag ? ep->drun + 1 + (uint64_t)k : (uint64_t)k;
    else if (ep->tp->exact_tags)
        want = (uint64_t)k;
    else
        return OFI_DRUN_UNKNOWN;
    return want < OFI_DRUN_MASK ? (int)want : (int)OFI_DRUN_MASK;
}

/* Every progress call, for every connection. What the receives posted
 * ahead should be follows from the core's posted receives and next message
 * number (uccl_msg_gen), the slots (changed only here and by their
 * completions, uccl_ofi_direct_complete) and, for the bounce's receive, the
 * clock: while none of them changed since a pass left everything posted,
 * there is nothing to do (the pass walks every slot: most of an idle
 * progress call's instructions at depth 16, and on shm the receiver's
 * progress loop is where messages are copied in: tests/perf/results/ofi/
 * ofi15-H200host/README.md). */
void uccl_ofi_direct_progress(tp_ofi_ep_t *ep)
{
    uccl_req_t *req;
    uint64_t n, now, tag;
    size_t len;

    /* settled (below), no retry, no hint: nothing to do, whatever conn's state */
    if (ep->connected && ep->dbuf != NULL && ep->ddue != 0 && uccl_list_empty(&ep->dpending) &&
        !uccl_ofi_dhint_pending(ep) && uccl_msg_gen(ep->base.conn) == ep->dgen &&
        (ep->ddue == UINT64_MAX || uccl_time_ns() < ep->ddue))
        return;
    if (!ep->connected || !uccl_ofi_conn_ok(ep))
        return;
    if (!uccl_list_empty(&ep->dpending))
        uccl_ofi_direct_retry(ep);
    if (uccl_ofi_dhint_pending(ep))
        uccl_ofi_dhint_progress(ep);
    if (ep->dbuf == NULL)
        return;
    if (ep->ddue != 0 && uccl_msg_gen(ep->base.conn) == ep->dgen &&
        (ep->ddue == UINT64_MAX || uccl_time_ns() < ep->ddue))
        return; /* settled */
    ep->ddue = 0; /* an early return below leaves the next call to try again */
    ep->tp->direct_passes++;
    ofi_direct_drain(ep);
    if (!uccl_ofi_conn_ok(ep))
        return;
    ep->dgen = uccl_msg_gen(ep->base.conn);
    n = uccl_msg_next(ep->base.conn, &req);
    if (!ofi_direct_slot_into_ok(ep, 0, req))
        req = NULL;
    tag = req != NULL ? req->tag : 0;
    len = req != NULL ? req->len : 0;
    /* slot k into the k-th receive: the receive into its pieces goes first,
     * the bounce's behind it (slot 0) */
    for (int k = 0; k < ep->tp->direct_depth; k++) {
        ofi_dslot_t *s = uccl_ofi_dslot(ep, k);
        int run = k == 0 && !ep->tp->exact_tags ? OFI_DRUN_ANY : ofi_direct_want(ep, n, k, tag);
        bool rerun = ep->tp->exact_tags && run >= 0 && s->op != NULL && s->op->index != run;

        if (!s->landed && (s->op == NULL ? req != NULL : s->op->dreq != req || rerun)) {
            ofi_direct_cancel_op(ep, &s->op);
            if (k == 0)
                ofi_direct_cancel_op(ep, &ep->dany);
            if (req != NULL && run != OFI_DRUN_UNKNOWN) {
                s->op = uccl_ofi_direct_post_recv(ep, n + (uint64_t)k, req, run, NULL);
                if (s->op == NULL)
                    return; /* the bounce's must not go ahead of it */
            }
        }
        req = req != NULL ? ofi_direct_next_into(ep, k + 1, s->landed ? s->req : req, tag, len)
                          : NULL;
    }
    if (ep->dany != NULL || uccl_ofi_dslot(ep, 0)->landed) {
        ep->ddue = UINT64_MAX;
        return;
    }
    if (ep->tp->exact_tags) {
        uccl_ofi_dhint_any(ep, n);
        return;
    }
    now = uccl_time_ns();
    if (ep->dsince == 0)
        ep->dsince = now;
    if (now - ep->dsince < (uint64_t)ep->tp->cfg.direct_wait_us * 1000u) {
        ep->ddue = ep->dsince + (uint64_t)ep->tp->cfg.direct_wait_us * 1000u;
        return;
    }
    ep->dany = uccl_ofi_direct_post_recv(ep, n, NULL, OFI_DRUN_ANY, NULL);
    ep->ddue = ep->dany != NULL ? UINT64_MAX : 0;
}

void uccl_ofi_direct_complete(tp_ofi_ep_t *ep, ofi_op_t *op, uccl_status_t st, size_t len,
                              uint64_t flags, uint64_t data)
{
    ofi_dslot_t *slot = NULL;
    uccl_req_t *oldest;

    if (op->kind == OFI_OP_DSEND) {
        uccl_ofi_dhint_done(ep, op);
        if (op->req != NULL)
            uccl_ofi_req_finish(op->req, st, op->req->len);
        if (!ep->dead && st != UCCL_OK)
            uccl_ofi_conn_fail(ep, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
        return;
    }
    ep->ddue = 0; /* a slot changed: the next progress looks at them all */
    slot = &ep->dslot[uccl_ofi_dslot_at(op->off)]; /* message off's */
    if (slot->op == op)
        slot->op = NULL;
    else
        slot = NULL;
    if (ep->dany == op)
        ep->dany = NULL;
    if (ep->dead || (st == UCCL_ERR_CANCELED && op->cancelled))
        return;
    if (st != UCCL_OK || !(flags & FI_REMOTE_CQ_DATA)) {
        uccl_error("ofi (%s): direct receive of message %llu: %s", ep->tp->prov,
                   (unsigned long long)op->off,
                   st != UCCL_OK ? uccl_strerror(st) : "no tag in the completion");
        uccl_ofi_conn_fail(ep, st == UCCL_ERR_PEER_FAILED ? st : UCCL_ERR_TRANSPORT);
        return;
    }
    if (op->off != uccl_msg_next(ep->base.conn, &oldest) && slot != NULL) {
        /* an earlier message is still on its way: this one waits in place */
        *slot = (ofi_dslot_t){.landed = true, .req = op->dreq, .len = len, .data = data};
        return;
    }
    ofi_direct_landed(ep, op->off, op->dreq, len, data);
    ofi_direct_drain(ep);
}

/* Teardown (ep_destroy): sends not posted yet fail, our receives are
 * cancelled (their completions come back to the dead endpoint). */
void uccl_ofi_direct_cancel(tp_ofi_ep_t *ep, uccl_status_t reason)
{
    ep->ddue = 0;
    uccl_rndv_fail_reqs(&ep->rndv, &ep->dpending, reason);
    for (int k = 0; k < OFI_DDEPTH_MAX; k++) {
        if (ep->dslot[k].op != NULL)
            ep->dslot[k].op->dreq = NULL;
        ofi_direct_cancel_op(ep, &ep->dslot[k].op);
        ep->dslot[k] = (ofi_dslot_t){0};
    }
    ofi_direct_cancel_op(ep, &ep->dany);
}

void uccl_ofi_direct_free(tp_ofi_ep_t *ep)
{
    if (ep->dbuf_mr != NULL)
        fi_close(&ep->dbuf_mr->fid);
    free(ep->dbuf);
    free(ep->dhint);
}

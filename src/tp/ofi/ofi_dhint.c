/* Direct-send hints, for providers with OFI_QUIRK_EXACT_TAGS (shm, libfabric
 * 1.17: a receive with ignore bits does not find a message that came
 * before it; ofi.h names the provider code). There every direct receive
 * (ofi_direct.c) is posted for one exact provider tag: message n's tag and
 * run must be known. The receiver knows the run a message of a given tag
 * carries when message n - 1 came directly (its CQ data), and the tag only
 * of the receive it posts into. When the oldest of a connection's direct
 * sends has waited UCCL_OFI_DIRECT_WAIT microseconds, the sender tells its
 * tag and run: a tagged message of no bytes on the connection's control
 * tag (fi_tinjectdata), whose CQ data has its top 32 bits 0 (a write's
 * immediate carries the connection id there, never 0): bits 17-31 the
 * message number's low 15 bits, 12-16 the run, 0-11 the uccl tag. The
 * receiver then posts exactly that message's receive: into the receive
 * the core gives it, or into the bounce (the message came with another
 * tag, or no receive is posted for it). */
#include <stdlib.h>

#include "ofi.h"

#define OFI_HINT_SEQ_SHIFT 17
#define OFI_HINT_SEQ_MASK 0x7fffull
#define OFI_HINT_RUN_SHIFT 12
#define OFI_HINT_RUN_MASK 0x1full
#define OFI_HINT_TAG_MASK ((1ull << OFI_DTAG_BITS) - 1)
/* The sender reads the clock once in so many progress calls (it was once a
 * call while a direct send waited: most progress calls of a sender of
 * direct sends) */
#define OFI_HINT_POLLS 16

uccl_status_t uccl_ofi_dhint_init(tp_ofi_ep_t *ep)
{
    uccl_list_init(&ep->dsent);
    ep->dhint = malloc(OFI_DHINTS * sizeof(*ep->dhint));
    if (ep->dhint == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->ndhint = OFI_DHINTS;
    for (int i = 0; i < OFI_DHINTS; i++)
        ep->dhint[i].seq = UINT64_MAX;
    return UCCL_OK;
}

/* ------------------------------------------------------------------ sender */

/* A send is the oldest from now: its wait starts at the next clock read
 * (no clock read per posted or completed send). */
static void ofi_dhint_restart(tp_ofi_ep_t *ep)
{
    ep->dsent_since = 0;
    ep->dsent_polls = 0;
    ep->dsent_hinted = false;
}

void uccl_ofi_dhint_posted(tp_ofi_ep_t *ep, ofi_op_t *op)
{
    if (!ep->tp->exact_tags)
        return;
    if (uccl_list_empty(&ep->dsent))
        ofi_dhint_restart(ep);
    uccl_list_push_back(&ep->dsent, &op->dlink);
}

void uccl_ofi_dhint_done(tp_ofi_ep_t *ep, ofi_op_t *op)
{
    bool oldest;

    if (!ep->tp->exact_tags)
        return;
    oldest = ep->dsent.next == &op->dlink;
    uccl_list_del(&op->dlink);
    if (oldest) /* the next one is the oldest from now */
        ofi_dhint_restart(ep);
}

static int ofi_dhint_send(tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    uint64_t data = (req->msg_seq & OFI_HINT_SEQ_MASK) << OFI_HINT_SEQ_SHIFT |
                    (req->tp_data[OFI_RD_DRUN] & OFI_HINT_RUN_MASK) << OFI_HINT_RUN_SHIFT |
                    (req->tag & OFI_HINT_TAG_MASK);

    return (int)fi_tinjectdata(ep->tp->ep, NULL, 0, data, ep->peer->addr, ep->peer_id);
}

/* Before a direct send whose run its receiver cannot know: message n - 1
 * had its tag but did not come directly (an eager send, say), so the run
 * is not 0 and no direct message told it. Without this hint the message
 * waited UCCL_OFI_DIRECT_WAIT for the late one (ofi19-local). 0 or the
 * provider's error (-FI_EAGAIN: the send waits its turn, in order). */
int uccl_ofi_dhint_first(tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    int rc;

    if (!ep->tp->exact_tags || req->tp_data[OFI_RD_DRUN] == 0 || ep->dsent_next == req->msg_seq)
        return 0;
    rc = ofi_dhint_send(ep, req);
    if (rc == 0)
        ep->tp->direct_hints++;
    return rc;
}

/* Every progress call: once the oldest direct send waited
 * UCCL_OFI_DIRECT_WAIT and a quarter nanosecond per byte (the receiver
 * copying it at 4 GB/s: a message being copied needs no hint), hint it
 * (once; -FI_EAGAIN: again next call). The wait is read on the clock every
 * OFI_HINT_POLLS calls and counts from the first read: a hint goes at most
 * 2 x OFI_HINT_POLLS progress calls later than the wait alone says. */
void uccl_ofi_dhint_progress(tp_ofi_ep_t *ep)
{
    tp_ofi_t *tp = ep->tp;
    ofi_op_t *op;
    uint64_t now;
    int rc;

    if (!uccl_ofi_dhint_pending(ep))
        return;
    op = uccl_container_of(ep->dsent.next, ofi_op_t, dlink);
    if (op->req == NULL) { /* forgotten at teardown */
        ep->dsent_hinted = true;
        return;
    }
    if (++ep->dsent_polls < OFI_HINT_POLLS)
        return;
    ep->dsent_polls = 0;
    now = uccl_time_ns();
    if (ep->dsent_since == 0) {
        ep->dsent_since = now;
        return;
    }
    if (now - ep->dsent_since < (uint64_t)tp->cfg.direct_wait_us * 1000u + op->req->len / 4)
        return;
    rc = ofi_dhint_send(ep, op->req);
    if (rc == -FI_EAGAIN)
        return;
    if (rc != 0) {
        uccl_error("ofi (%s): fi_tinjectdata (direct-send hint): %s", tp->prov, fi_strerror(-rc));
        uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
        return;
    }
    ep->dsent_hinted = true;
    tp->direct_hints++;
}

/* ------------------------------------------------------------------ receiver */

bool uccl_ofi_dhint_is(uint64_t data)
{
    return data >> 32 == 0;
}

/* The entry for message seq's hint: its own, else one free or of a message
 * taken already (below n), else a new one. NULL: out of memory. */
static ofi_dhint_t *ofi_dhint_entry(tp_ofi_ep_t *ep, uint64_t n, uint64_t seq)
{
    ofi_dhint_t *free_h = NULL, *more;
    int old = ep->ndhint, grown = old > 0 ? 2 * old : OFI_DHINTS;

    for (int i = 0; i < old; i++) {
        ofi_dhint_t *h = &ep->dhint[i];

        if (h->seq == seq)
            return h;
        if (free_h == NULL && (h->seq == UINT64_MAX || h->seq < n))
            free_h = h;
    }
    if (free_h != NULL)
        return free_h;
    more = realloc(ep->dhint, (size_t)grown * sizeof(*more));
    if (more == NULL)
        return NULL;
    ep->dhint = more;
    ep->ndhint = grown;
    for (int i = old; i < ep->ndhint; i++)
        more[i].seq = UINT64_MAX;
    return &more[old];
}

void uccl_ofi_dhint_arrived(tp_ofi_ep_t *ep, uint64_t data)
{
    uccl_req_t *oldest;
    uint64_t n = uccl_msg_next(ep->base.conn, &oldest);
    uint64_t ahead = ((data >> OFI_HINT_SEQ_SHIFT) - n) & OFI_HINT_SEQ_MASK;
    ofi_dhint_t *h;

    if (ahead > OFI_HINT_SEQ_MASK / 2)
        return; /* a message already taken */
    h = ofi_dhint_entry(ep, n, n + ahead);
    if (h == NULL) {
        uccl_ofi_conn_fail(ep, UCCL_ERR_NO_MEMORY);
        return;
    }
    h->seq = n + ahead;
    h->tag = data & OFI_HINT_TAG_MASK;
    h->run = (int)(data >> OFI_HINT_RUN_SHIFT & OFI_HINT_RUN_MASK);
    ep->ddue = 0; /* the next progress looks at the receives again */
}

const ofi_dhint_t *uccl_ofi_dhint_of(const tp_ofi_ep_t *ep, uint64_t seq)
{
    for (int i = 0; i < ep->ndhint; i++)
        if (ep->dhint[i].seq == seq)
            return &ep->dhint[i];
    return NULL;
}

/* The bounce's receive for message n once the sender told its tag and run,
 * unless slot 0's receive (of that tag) takes it: a progress pass of
 * ofi_direct.c with nothing else to post. */
void uccl_ofi_dhint_any(tp_ofi_ep_t *ep, uint64_t n)
{
    const ofi_dhint_t *hint = uccl_ofi_dhint_of(ep, n);
    const ofi_op_t *s0 = uccl_ofi_dslot(ep, 0)->op;

    ep->ddue = UINT64_MAX; /* settled until a hint, a completion or the core's change */
    if (hint == NULL || (s0 != NULL && s0->dreq != NULL && s0->dreq->tag == hint->tag))
        return;
    ep->dany = uccl_ofi_direct_post_recv(ep, n, NULL, 0, hint);
    if (ep->dany == NULL)
        ep->ddue = 0;
}

/* DIRECT, the one-sided ops of a schedule (split from coll/sched.c): the
 * receiver sends a ready token naming where to write (with the descriptors
 * the sender has not seen yet), the sender writes with a notification. */
#include <stddef.h>
#include <string.h>

#include "coll.h"

/* Ready token of DIRECT: the receiver names where the sender writes
 * (slot, roff) and how many bytes it expects, and carries the descriptors
 * of those slots the sender has not seen yet (slot 0 = the sink of its
 * control region, for empty and refused writes). */
typedef struct coll_token {
    uint64_t len;
    uint64_t roff;
    uint32_t slot, gen; /* where to write (len > 0) */
    uint32_t sink_gen;  /* of slot 0 */
    uint32_t ndesc;     /* 0..2 entries of desc_slot/desc_gen/desc that follow */
    uint32_t desc_slot[2], desc_gen[2];
    uccl_rdesc_t desc[2];
} coll_token_t;

/* Append slot's descriptor to t unless peer has it already. */
static uccl_status_t token_desc(coll_sched_t *s, coll_token_t *t, int peer, int slot)
{
    coll_buf_entry_t *e = &s->cs->bufs[slot];
    const uccl_rdesc_t *d;
    uccl_status_t st;

    if (e->sent[peer]) {
        s->cs->stats.desc_reused += !s->internal;
        return UCCL_OK;
    }
    if ((st = uccl_coll_buf_desc(s->cs, slot, &d)) != UCCL_OK)
        return st;
    t->desc_slot[t->ndesc] = (uint32_t)slot;
    t->desc_gen[t->ndesc] = e->gen;
    t->desc[t->ndesc++] = *d;
    e->sent[peer] = 1;
    s->cs->stats.desc_sent += !s->internal;
    return UCCL_OK;
}

static uccl_status_t waitput_post(coll_sched_t *s, coll_op_t *op, uccl_conn_t *conn)
{
    coll_token_t *t;
    uccl_status_t st = uccl_coll_scratch_get(s->cs, sizeof(*t), &op->scratch);

    if (st != UCCL_OK)
        return st;
    t = (coll_token_t *)s->cs->scratch[op->scratch].addr;
    memset(t, 0, sizeof(*t));
    t->len = op->len;
    t->sink_gen = s->cs->bufs[0].gen;
    if (op->len > 0) {
        t->slot = (uint32_t)s->slot[op->buf];
        t->gen = s->cs->bufs[t->slot].gen;
        uccl_coll_buf_mr(s, op->buf, op->off, op->len, &op->off2);
        t->roff = op->off2;
        st = token_desc(s, t, op->peer, (int)t->slot);
    }
    if (st == UCCL_OK)
        st = token_desc(s, t, op->peer, 0); /* the sink, for a refused write */
    if (st != UCCL_OK)
        return st;
    return uccl_send(conn, s->cs->scratch[op->scratch].mr, 0, sizeof(*t),
                     coll_tag(s->seq, op->step | COLL_STEP_TOKEN), &op->req);
}

/* The token arrived: store its descriptors, then write (or, for an empty
 * block or a count the receiver does not expect, 1 byte to its sink with
 * the code saying so). INPROGRESS while a descriptor it names is still in
 * another collective's token, not read yet. */
static uccl_status_t put_write(coll_sched_t *s, coll_op_t *op, uccl_conn_t *conn)
{
    const coll_token_t *t = (const coll_token_t *)s->cs->scratch[op->scratch].addr;
    bool fits = t->len == op->len, refused = false;
    const uccl_rdesc_t *d;
    uccl_status_t st;
    size_t moff;

    if (t->ndesc > 2)
        return UCCL_ERR_BAD_DESC;
    for (uint32_t i = 0; i < t->ndesc; i++)
        if ((st = uccl_coll_peer_desc_set(s->cs, op->peer, (int)t->desc_slot[i], t->desc_gen[i],
                                     &t->desc[i])) != UCCL_OK)
            return st;
    if (fits && op->len > 0) {
        uccl_mr_t *mr = uccl_coll_buf_mr(s, op->buf, op->off, op->len, &moff);
        if ((d = uccl_coll_peer_desc(s->cs, op->peer, (int)t->slot, t->gen)) == NULL)
            return UCCL_INPROGRESS;
        st = uccl_write_notify(conn, mr, moff, op->len, d, t->roff,
                               coll_notif(s->seq, op->step, COLL_NOTIF_OK), &op->req2);
        if (st != UCCL_ERR_UNSUPPORTED)
            return st;
        /* no transport writes this memory pairing (GPU memory over verbs
         * without GPUDirect RDMA): tell the receiver through its sink, so
         * that it fails now with the same status instead of timing out */
        refused = true;
    }
    if ((d = uccl_coll_peer_desc(s->cs, op->peer, 0, t->sink_gen)) == NULL)
        return UCCL_INPROGRESS;
    if (refused) {
        coll_error("rank %d cannot write %zu bytes into rank %d's buffer on this connection "
                   "(UCCL_ERR_UNSUPPORTED): use a two-sided algorithm", s->cs->rank, op->len,
                   op->peer);
        op->state = 4; /* fail once the sink write is done */
        return uccl_write_notify(conn, s->cs->bufs[0].mr, 0, 1, d, 0,
                                 coll_notif(s->seq, op->step, COLL_NOTIF_REFUSED), &op->req2);
    }
    if (!fits) {
        coll_error("rank %d expects %llu bytes from rank %d in this collective, rank %d has %zu",
                   op->peer, (unsigned long long)t->len, s->cs->rank, s->cs->rank, op->len);
        op->state = 3; /* fail once the sink write is done */
    }
    return uccl_write_notify(conn, s->cs->bufs[0].mr, 0, 1, d, 0,
                             coll_notif(s->seq, op->step,
                                        fits ? COLL_NOTIF_OK : COLL_NOTIF_MISMATCH),
                             &op->req2);
}

uccl_status_t uccl_coll_direct_post(coll_sched_t *s, coll_op_t *op, uccl_conn_t *conn)
{
    uccl_status_t st;

    if (op->kind == COLL_OP_WAITPUT)
        return waitput_post(s, op, conn);
    st = uccl_coll_scratch_get(s->cs, sizeof(coll_token_t), &op->scratch);
    if (st != UCCL_OK)
        return st;
    return uccl_recv(conn, s->cs->scratch[op->scratch].mr, 0, sizeof(coll_token_t),
                     coll_tag(s->seq, op->step | COLL_STEP_TOKEN), &op->req);
}

uccl_status_t uccl_coll_direct_advance(coll_sched_t *s, coll_op_t *op)
{
    uccl_conn_t *conn = uccl_comm_conn(s->cs->comm, op->peer);
    size_t bytes = 0;
    unsigned code;
    uccl_status_t st;

    if (op->kind == COLL_OP_WAITPUT) {
        if (op->req != NULL) {
            if ((st = uccl_coll_req_status(op->req, &bytes)) != UCCL_OK)
                return st;
            uccl_req_free(op->req);
            op->req = NULL;
        }
        st = uccl_coll_notif_take(s->cs, op->peer, s->seq, op->step, &code);
        if (st != UCCL_OK)
            return st;
        if (code == COLL_NOTIF_REFUSED) {
            coll_error("rank %d cannot write into rank %d's buffer on this connection",
                       op->peer, s->cs->rank);
            return UCCL_ERR_UNSUPPORTED;
        }
        if (code != COLL_NOTIF_OK) {
            coll_error("rank %d sends a count other than the %zu bytes rank %d expects",
                       op->peer, op->len, s->cs->rank);
            return UCCL_ERR_TRUNCATED;
        }
        return UCCL_OK;
    }
    if (op->req != NULL) { /* the token */
        if ((st = uccl_coll_req_status(op->req, &bytes)) != UCCL_OK)
            return st;
        uccl_req_free(op->req);
        op->req = NULL;
        if (bytes < offsetof(coll_token_t, desc_slot))
            return UCCL_ERR_TRUNCATED;
        op->state = 1;
    }
    if (op->state == 1) { /* token in hand, no write yet */
        if ((st = put_write(s, op, conn)) != UCCL_OK)
            return st;
        if (op->state == 1)
            op->state = 2;
    }
    if ((st = uccl_coll_req_status(op->req2, &bytes)) != UCCL_OK)
        return st;
    return op->state == 3 ? UCCL_ERR_TRUNCATED : op->state == 4 ? UCCL_ERR_UNSUPPORTED : UCCL_OK;
}

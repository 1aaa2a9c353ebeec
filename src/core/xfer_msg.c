/* writemsg / readmsg: local pieces to several remote pieces. Remote pieces
 * that continue each other (same descriptor, adjacent offsets) are one
 * range, local pieces that continue each other one piece; consecutive
 * ranges of one descriptor go into one request where the connection's
 * transports take several (UCCL_TP_CAP_RSEG), else one request each; a
 * request is cut where it would need more than UCCL_IOV_MAX local pieces.
 * Each request, a "piece", is posted like a writev (xfer.c); the user's
 * request (UCCL_OP_MSG) finishes when all its pieces did. A notification
 * rides on the last piece, posted only after the others finished: a
 * piece's completion means its bytes landed, so the notification follows
 * every byte whatever the transport's ordering. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "xfer.h"

typedef struct uccl_msg_tail {
    uccl_iov_t iov[UCCL_IOV_MAX];
    int iovcnt;
    uccl_riov_t rseg[UCCL_IOV_MAX];
    int nrseg;
    uccl_rdesc_t rdesc; /* copied: the caller's may be gone by then */
    uint64_t notif;
    uccl_req_t *parent;
    uccl_list_t link; /* engine->msg_tails once due */
} uccl_msg_tail_t;

/* A walk over a message: the next local byte (idx, off), the next remote
 * byte (k, done). */
typedef struct msg_cursor {
    const uccl_rma_msg_t *msg;
    int idx;     /* local piece */
    size_t off;  /* bytes of it already taken */
    int k;       /* remote piece */
    size_t done; /* bytes of it already taken */
    int rseg_max; /* remote ranges one request may take (uccl_xfer_rseg_max) */
} msg_cursor_t;

/* One request's worth of the message: local pieces (adjacent ones joined),
 * remote ranges of one descriptor (adjacent ones joined). */
typedef struct msg_piece {
    uccl_iov_t iov[UCCL_IOV_MAX];
    int iovcnt;
    uccl_riov_t rseg[UCCL_IOV_MAX];
    int nrseg;
    const uccl_rdesc_t *rdesc;
} msg_piece_t;

/* Up to want more local bytes onto p's pieces; a slice that continues the
 * last piece in the same region joins it. Stops when UCCL_IOV_MAX pieces
 * are full. Returns the bytes taken. */
static size_t msg_take(msg_cursor_t *c, size_t want, msg_piece_t *p)
{
    size_t got = 0;

    while (got < want && c->idx < c->msg->iovcnt) {
        const uccl_iov_t *s = &c->msg->iov[c->idx];
        size_t take = s->len - c->off < want - got ? s->len - c->off : want - got;
        uccl_iov_t *last = p->iovcnt > 0 ? &p->iov[p->iovcnt - 1] : NULL;

        if (take > 0 && last != NULL && last->mr == s->mr &&
            last->off + last->len == s->off + c->off)
            last->len += take;
        else if (take > 0 && p->iovcnt == UCCL_IOV_MAX)
            break;
        else if (take > 0)
            p->iov[p->iovcnt++] = (uccl_iov_t){s->mr, s->off + c->off, take};
        got += take;
        c->off += take;
        if (c->off == s->len) {
            c->idx++;
            c->off = 0;
        }
    }
    return got;
}

static bool msg_same_rdesc(const uccl_rdesc_t *a, const uccl_rdesc_t *b)
{
    return a == b || memcmp(a, b, sizeof(*a)) == 0;
}

/* The next piece: remote pieces in order while they name the same
 * descriptor, the request has room for their local pieces, and each either
 * continues the last range (joined: one range) or fits as a new range
 * (at most c->rseg_max). False when no bytes are left. */
static bool msg_next(msg_cursor_t *c, msg_piece_t *p)
{
    const uccl_rma_msg_t *m = c->msg;

    p->iovcnt = 0;
    p->nrseg = 0;
    p->rdesc = NULL;
    while (c->k < m->riovcnt) {
        const uccl_riov_t *r = &m->riov[c->k];
        size_t roff = r->roff + c->done, got;
        uccl_riov_t *last = p->nrseg > 0 ? &p->rseg[p->nrseg - 1] : NULL;
        bool joins;

        if (c->done == r->len) { /* empty remote pieces carry nothing */
            c->k++;
            c->done = 0;
            continue;
        }
        if (p->rdesc != NULL && !msg_same_rdesc(p->rdesc, r->rdesc))
            break;
        joins = last != NULL && last->roff + last->len == roff;
        if (last != NULL && !joins && p->nrseg == c->rseg_max)
            break;
        got = msg_take(c, r->len - c->done, p);
        if (got == 0)
            break; /* no room for another local piece */
        p->rdesc = r->rdesc;
        if (joins)
            last->len += got;
        else
            p->rseg[p->nrseg++] = (uccl_riov_t){NULL, roff, got};
        c->done += got;
        if (c->done < r->len)
            break; /* the request's local pieces are full */
    }
    return p->nrseg > 0;
}

/* Every argument checked before anything is posted: an error returned by
 * uccl_writemsg means nothing went to the peer. *one_run: every remote piece
 * names the same descriptor and continues the one before it (the seed's
 * pattern): the message is one range, no walk over its pieces needed. */
static uccl_status_t msg_check(const uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m,
                               bool *one_run)
{
    size_t total, rtotal = 0;
    uint64_t gpu_caps;
    uccl_rdesc_fields_t fields;
    uccl_status_t st;

    if (m->riov == NULL || m->riovcnt < 1 || m->riovcnt > UCCL_RIOV_MAX ||
        (m->flags & ~(uint64_t)UCCL_RMA_NOTIFY) ||
        (op == UCCL_OP_READ && (m->flags & UCCL_RMA_NOTIFY)))
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_xfer_check_iov(conn, m->iov, m->iovcnt, &total, &gpu_caps);
    for (int k = 0; k < m->riovcnt && st == UCCL_OK; k++) {
        const uccl_riov_t *r = &m->riov[k];
        uccl_req_remote_t remote;

        if (r->rdesc == NULL)
            return UCCL_ERR_INVALID_PARAM;
        if (r->len > SIZE_MAX - rtotal) { /* only (forged) descriptors of huge ranges */
            uccl_error("%s: remote pieces carry more than SIZE_MAX bytes",
                       op == UCCL_OP_WRITE ? "uccl_writemsg" : "uccl_readmsg");
            return UCCL_ERR_INVALID_PARAM;
        }
        if (k == 0 || !msg_same_rdesc(r->rdesc, m->riov[k - 1].rdesc)) { /* decoded once a run */
            st = uccl_remote_decode(conn, r->rdesc, r->roff, r->len, &remote, &fields);
            *one_run = k == 0;
        } else if (r->roff > fields.len || r->len > fields.len - r->roff) {
            st = UCCL_ERR_OUT_OF_BOUNDS;
        } else if (r->roff != m->riov[k - 1].roff + m->riov[k - 1].len) {
            *one_run = false;
        }
        rtotal += r->len;
    }
    if (st == UCCL_OK && rtotal != total) {
        uccl_error("%s: local pieces carry %zu bytes, remote pieces %zu",
                   op == UCCL_OP_WRITE ? "uccl_writemsg" : "uccl_readmsg", total, rtotal);
        return UCCL_ERR_INVALID_PARAM;
    }
    return st;
}

/* The regions of the tail's local pieces stay in use (uccl_mr_dereg: BUSY)
 * from the call until the tail is posted (its request holds them then) or
 * dropped: delta +1 / -1. */
static void tail_hold(uccl_msg_tail_t *tail, int delta)
{
    for (int i = 0; i < tail->iovcnt; i++)
        if (tail->iov[i].mr != NULL)
            tail->iov[i].mr->inflight += delta;
}

/* Drop a tail (NULL: none), releasing its regions. */
static void tail_free(uccl_msg_tail_t *tail)
{
    if (tail == NULL)
        return;
    tail_hold(tail, -1);
    free(tail);
}

/* Walk the pieces; post each (parent != NULL) or just count them. With a
 * tail, the last piece is stored there instead of posted. */
static uccl_status_t msg_walk(uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m,
                              uccl_req_t *parent, uccl_msg_tail_t *tail, int *pieces)
{
    msg_cursor_t c = {.msg = m, .rseg_max = uccl_xfer_rseg_max(conn)};
    msg_piece_t p;
    int total_pieces = *pieces;

    *pieces = 0;
    while (msg_next(&c, &p)) {
        xfer_args_t a = {.op = op, .iov = p.iov, .iovcnt = p.iovcnt, .rdesc = p.rdesc,
                         .roff = p.rseg[0].roff, .rseg = p.rseg, .nrseg = p.nrseg,
                         .parent = parent};
        uccl_req_t *req;
        uccl_status_t st;

        ++*pieces;
        if (parent == NULL)
            continue;
        if (tail != NULL && *pieces == total_pieces) {
            memcpy(tail->iov, p.iov, sizeof(p.iov[0]) * (size_t)p.iovcnt);
            tail->iovcnt = p.iovcnt;
            memcpy(tail->rseg, p.rseg, sizeof(p.rseg[0]) * (size_t)p.nrseg);
            tail->nrseg = p.nrseg;
            tail->rdesc = *p.rdesc;
            tail_hold(tail, 1);
            return UCCL_OK;
        }
        parent->children++;
        st = uccl_xfer_post_locked(conn, &a, &req);
        if (st != UCCL_OK) {
            parent->children--;
            --*pieces;
            return st;
        }
    }
    return UCCL_OK;
}

int uccl_rma_msg_pieces(uccl_conn_t *conn, const uccl_rma_msg_t *m)
{
    int pieces = 0;

    msg_walk(conn, UCCL_OP_WRITE, m, NULL, NULL, &pieces);
    return pieces;
}

static uccl_status_t rma_msg_locked(uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m,
                                    uccl_req_t **out)
{
    bool notify = (m->flags & UCCL_RMA_NOTIFY) != 0;
    uccl_msg_tail_t *tail = NULL;
    uccl_req_t *parent;
    uccl_status_t st;
    int pieces = 0;
    bool one_run = false;

    if (conn->state != UCCL_OK)
        return conn->state;
    st = msg_check(conn, op, m, &one_run);
    if (st == UCCL_OK && !one_run)
        st = msg_walk(conn, op, m, NULL, NULL, &pieces); /* count only */
    if (st != UCCL_OK)
        return st;
    if (one_run || pieces <= 1) { /* the common case needs no parent: a plain writev */
        msg_cursor_t c = {.msg = m, .rseg_max = uccl_xfer_rseg_max(conn)};
        msg_piece_t p = {.iovcnt = 0};
        xfer_args_t a = {.op = op, .iov = m->iov, .iovcnt = m->iovcnt, .rdesc = m->riov[0].rdesc,
                         .roff = m->riov[0].roff, .has_notif = notify, .notif = m->notif};
        size_t got = one_run ? msg_take(&c, SIZE_MAX, &p) : 0;

        if (got > 0) { /* one range: its local pieces joined as msg_next joins them */
            p.rseg[0] = (uccl_riov_t){NULL, m->riov[0].roff, got};
            a.iov = p.iov;
            a.iovcnt = p.iovcnt;
            a.rseg = p.rseg;
            a.nrseg = 1;
        } else if (!one_run && pieces == 1 && msg_next(&c, &p)) {
            /* (pieces 0: no bytes, the notification alone) */
            a.iov = p.iov;
            a.iovcnt = p.iovcnt;
            a.rdesc = p.rdesc;
            a.roff = p.rseg[0].roff;
            a.rseg = p.rseg;
            a.nrseg = p.nrseg;
        }
        return uccl_xfer_post_locked(conn, &a, out);
    }
    parent = uccl_req_alloc(conn->engine);
    if (notify && parent != NULL && (tail = calloc(1, sizeof(*tail))) == NULL) {
        uccl_req_release(parent);
        parent = NULL;
    }
    if (parent == NULL)
        return UCCL_ERR_NO_MEMORY;
    parent->op = UCCL_OP_MSG;
    parent->conn = conn;
    parent->tail = tail;
    if (tail != NULL) {
        tail->notif = m->notif;
        tail->parent = parent;
    }
    parent->children = 1; /* held while posting: no piece can finish it early */
    st = msg_walk(conn, op, m, parent, tail, &pieces);
    if (st != UCCL_OK && pieces == 0) { /* nothing went out: fail the call */
        tail_free(tail);
        uccl_req_release(parent);
        return st;
    }
    if (st != UCCL_OK) { /* pieces in flight: the request reports it */
        parent->children_status = st;
        tail_free(tail);
        parent->tail = NULL;
    }
    *out = parent;
    uccl_rma_msg_piece_done(parent, UCCL_OK, 0); /* drop the posting hold */
    return UCCL_OK;
}

void uccl_rma_msg_piece_done(uccl_req_t *parent, uccl_status_t status, size_t bytes)
{
    if (status != UCCL_OK && parent->children_status == UCCL_OK)
        parent->children_status = status;
    parent->bytes += bytes;
    if (--parent->children > 0)
        return;
    if (parent->tail != NULL && parent->children_status == UCCL_OK) {
        /* not from here: this may run inside a transport's progress */
        uccl_list_push_back(&parent->engine->msg_tails, &parent->tail->link);
        return;
    }
    tail_free(parent->tail);
    parent->tail = NULL;
    uccl_req_complete(parent, parent->children_status, parent->bytes);
}

int uccl_rma_msg_progress(uccl_engine_t *engine)
{
    uccl_list_t *e;
    int events = 0;

    while ((e = uccl_list_pop_front(&engine->msg_tails)) != NULL) {
        uccl_msg_tail_t *tail = uccl_container_of(e, uccl_msg_tail_t, link);
        uccl_req_t *parent = tail->parent, *req;
        uccl_status_t st;
        xfer_args_t a = {.op = UCCL_OP_WRITE, .iov = tail->iov, .iovcnt = tail->iovcnt,
                         .rdesc = &tail->rdesc, .roff = tail->rseg[0].roff,
                         .rseg = tail->rseg, .nrseg = tail->nrseg, .has_notif = true,
                         .notif = tail->notif, .parent = parent};
        parent->tail = NULL;
        parent->children = 1;
        st = uccl_xfer_post_locked(parent->conn, &a, &req); /* copies what it needs of a */
        tail_free(tail); /* the posted piece holds its regions now */
        if (st != UCCL_OK) {
            parent->children = 0;
            uccl_req_complete(parent, st, parent->bytes);
        }
        events++;
    }
    return events;
}

void uccl_rma_msg_cancel_all(uccl_engine_t *engine)
{
    uccl_list_t *e;

    while ((e = uccl_list_pop_front(&engine->msg_tails)) != NULL) {
        uccl_msg_tail_t *tail = uccl_container_of(e, uccl_msg_tail_t, link);
        uccl_req_t *parent = tail->parent;

        parent->tail = NULL;
        tail_free(tail);
        uccl_req_complete(parent, UCCL_ERR_CANCELED, parent->bytes);
    }
}

static uccl_status_t rma_msg(uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *msg,
                             uccl_req_t **out)
{
    uccl_status_t st = uccl_conn_check(conn);

    if (st != UCCL_OK)
        return st;
    if (msg == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(conn->engine);
    st = rma_msg_locked(conn, op, msg, out);
    uccl_engine_unlock(conn->engine);
    return st;
}

uccl_status_t uccl_writemsg(uccl_conn_t *conn, const uccl_rma_msg_t *msg, uccl_req_t **req)
{
    return rma_msg(conn, UCCL_OP_WRITE, msg, req);
}

uccl_status_t uccl_readmsg(uccl_conn_t *conn, const uccl_rma_msg_t *msg, uccl_req_t **req)
{
    return rma_msg(conn, UCCL_OP_READ, msg, req);
}

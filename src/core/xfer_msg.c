/* writemsg / readmsg: local pieces to several remote pieces. Each remote
 * piece (split further where it needs more than UCCL_IOV_MAX local pieces)
 * becomes one request of its own, a "piece", posted like a writev
 * (xfer.c); the user's request (UCCL_OP_MSG) finishes when all its pieces
 * did. A notification rides on the last piece, posted only after the others
 * finished: a piece's completion means its bytes landed, so the
 * notification follows every byte whatever the transport's ordering. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "xfer.h"

typedef struct uccl_msg_tail {
    uccl_iov_t iov[UCCL_IOV_MAX];
    int iovcnt;
    uccl_rdesc_t rdesc; /* copied: the caller's may be gone by then */
    size_t roff;
    uint64_t notif;
    uccl_req_t *parent;
    uccl_list_t link; /* engine->msg_tails once due */
} uccl_msg_tail_t;

typedef struct msg_cursor {
    const uccl_rma_msg_t *msg;
    int idx;    /* local piece */
    size_t off; /* bytes of it already taken */
} msg_cursor_t;

/* The next piece: up to want bytes of local pieces, at most UCCL_IOV_MAX. */
static size_t msg_take(msg_cursor_t *c, size_t want, uccl_iov_t *out, int *n)
{
    size_t got = 0;

    *n = 0;
    while (got < want && c->idx < c->msg->iovcnt && *n < UCCL_IOV_MAX) {
        const uccl_iov_t *p = &c->msg->iov[c->idx];
        size_t take = p->len - c->off < want - got ? p->len - c->off : want - got;
        if (take > 0)
            out[(*n)++] = (uccl_iov_t){p->mr, p->off + c->off, take};
        got += take;
        c->off += take;
        if (c->off == p->len) {
            c->idx++;
            c->off = 0;
        }
    }
    return got;
}

/* Every argument checked before anything is posted: an error returned by
 * uccl_writemsg means nothing went to the peer. */
static uccl_status_t msg_check(const uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m)
{
    size_t total, rtotal = 0;
    uint64_t gpu_caps;
    uccl_status_t st;

    if (m->riov == NULL || m->riovcnt < 1 || m->riovcnt > UCCL_RIOV_MAX ||
        (m->flags & ~(uint64_t)UCCL_RMA_NOTIFY) ||
        (op == UCCL_OP_READ && (m->flags & UCCL_RMA_NOTIFY)))
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_xfer_check_iov(conn, m->iov, m->iovcnt, &total, &gpu_caps);
    for (int k = 0; k < m->riovcnt && st == UCCL_OK; k++) {
        uccl_req_remote_t remote;
        uccl_rdesc_fields_t fields;

        if (m->riov[k].rdesc == NULL)
            return UCCL_ERR_INVALID_PARAM;
        st = uccl_remote_decode(conn, m->riov[k].rdesc, m->riov[k].roff, m->riov[k].len, &remote,
                                &fields);
        rtotal += m->riov[k].len;
    }
    if (st == UCCL_OK && rtotal != total) {
        uccl_error("%s: local pieces carry %zu bytes, remote pieces %zu",
                   op == UCCL_OP_WRITE ? "uccl_writemsg" : "uccl_readmsg", total, rtotal);
        return UCCL_ERR_INVALID_PARAM;
    }
    return st;
}

/* Walk the pieces; post each (parent != NULL) or just count them. With a
 * tail, the last piece is stored there instead of posted. */
static uccl_status_t msg_walk(uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m,
                              uccl_req_t *parent, uccl_msg_tail_t *tail, int *pieces)
{
    msg_cursor_t c = {.msg = m};
    uccl_iov_t iov[UCCL_IOV_MAX];
    int total_pieces = *pieces;

    *pieces = 0;
    for (int k = 0; k < m->riovcnt; k++) {
        size_t done = 0;
        do { /* a zero-length message is still one piece (its notification) */
            xfer_args_t a = {.op = op, .iov = iov, .rdesc = m->riov[k].rdesc,
                             .roff = m->riov[k].roff + done, .parent = parent};
            size_t got = msg_take(&c, m->riov[k].len - done, iov, &a.iovcnt);
            uccl_req_t *req;
            uccl_status_t st;

            if (a.iovcnt == 0) { /* an empty piece: one empty local piece */
                iov[0] = (uccl_iov_t){NULL, 0, 0};
                a.iovcnt = 1;
            }
            done += got;
            if (got == 0 && (k + 1 < m->riovcnt || *pieces > 0))
                break; /* empty remote pieces carry nothing */
            ++*pieces;
            if (parent == NULL)
                continue;
            if (tail != NULL && *pieces == total_pieces) {
                memcpy(tail->iov, a.iov, sizeof(iov[0]) * (size_t)a.iovcnt);
                tail->iovcnt = a.iovcnt;
                tail->rdesc = *a.rdesc;
                tail->roff = a.roff;
                return UCCL_OK;
            }
            parent->children++;
            st = uccl_xfer_post_locked(conn, &a, &req);
            if (st != UCCL_OK) {
                parent->children--;
                --*pieces;
                return st;
            }
        } while (done < m->riov[k].len);
    }
    return UCCL_OK;
}

static uccl_status_t rma_msg_locked(uccl_conn_t *conn, uccl_op_t op, const uccl_rma_msg_t *m,
                                    uccl_req_t **out)
{
    bool notify = (m->flags & UCCL_RMA_NOTIFY) != 0;
    uccl_msg_tail_t *tail = NULL;
    uccl_req_t *parent;
    uccl_status_t st;
    int pieces = 0;

    if (conn->state != UCCL_OK)
        return conn->state;
    st = msg_check(conn, op, m);
    if (st == UCCL_OK)
        st = msg_walk(conn, op, m, NULL, NULL, &pieces); /* count only */
    if (st != UCCL_OK)
        return st;
    if (pieces == 1) { /* the common case needs no parent: a plain writev */
        xfer_args_t a = {.op = op, .iov = m->iov, .iovcnt = m->iovcnt, .rdesc = m->riov[0].rdesc,
                         .roff = m->riov[0].roff, .has_notif = notify, .notif = m->notif};
        for (int k = 1; k < m->riovcnt && m->riov[0].len == 0; k++)
            if (m->riov[k].len > 0) { /* the one remote piece with bytes */
                a.rdesc = m->riov[k].rdesc;
                a.roff = m->riov[k].roff;
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
        free(tail);
        uccl_req_release(parent);
        return st;
    }
    if (st != UCCL_OK) { /* pieces in flight: the request reports it */
        parent->children_status = st;
        free(tail);
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
    free(parent->tail);
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
                         .rdesc = &tail->rdesc, .roff = tail->roff, .has_notif = true,
                         .notif = tail->notif, .parent = parent};
        parent->tail = NULL;
        parent->children = 1;
        st = uccl_xfer_post_locked(parent->conn, &a, &req); /* copies what it needs of a */
        free(tail);
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
        free(tail);
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

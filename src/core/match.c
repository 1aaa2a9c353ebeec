/* Two-sided matching for every transport of a connection: arrived messages
 * wait here, in message-number order, for the receives posted here. */
#include <stdlib.h>

#include "core.h"

/* Messages must arrive close to in order; a number this far ahead of the
 * lowest missing one is a peer bug, not a message in flight. */
#define MSG_SEQ_WINDOW (1ull << 32)

static bool msg_eligible(const uccl_conn_t *conn, const uccl_msg_t *msg)
{
    return msg->seq < conn->rx_msg_next;
}

/* Can a message that came on ep land in req? Every transport writes host
 * memory; GPU memory needs the transport's cap (a host buffer sent to a GPU
 * receive over, say, verbs without GPUDirect). */
static uccl_status_t recv_fits(const uccl_tp_ep_t *ep, const uccl_req_t *req, uint64_t len)
{
    if (req->len < len)
        return UCCL_ERR_TRUNCATED;
    if (req->gpu_caps & ~uccl_tp_caps(ep->tp)) {
        uccl_error("a message for tag %llu arrived over %s, which cannot write the receive's GPU "
                   "memory; the receive fails, the message waits for the next one",
                   (unsigned long long)req->tag, ep->tp->ops->name);
        return UCCL_ERR_UNSUPPORTED;
    }
    return UCCL_OK;
}

/* First posted receive with this tag that can take the message; the ones
 * met on the way that cannot fail (the message stays). */
static uccl_req_t *posted_take(uccl_conn_t *conn, const uccl_tp_ep_t *ep, uint64_t tag,
                               uint64_t len)
{
    uccl_list_t *pos, *tmp;

    uccl_list_for_each_safe(pos, tmp, &conn->posted) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, match_link);
        uccl_status_t st;

        if (req->tag != tag)
            continue;
        uccl_list_del(&req->match_link);
        conn->match_gen++;
        st = recv_fits(ep, req, len);
        if (st == UCCL_OK)
            return req;
        uccl_req_complete(req, st, st == UCCL_ERR_TRUNCATED ? len : 0);
    }
    return NULL;
}

static void msg_deliver(uccl_msg_t *msg, uccl_req_t *req)
{
    uccl_tp_ep_t *ep = msg->ep;
    uccl_conn_t *conn = ep->conn;

    uccl_list_del(&msg->link);
    conn->held_bytes -= msg->bytes < conn->held_bytes ? msg->bytes : conn->held_bytes;
    req->ep = ep;
    ep->tp->ops->msg_deliver(ep, msg, req);
}

/* held is sorted by message number: the first held message numbered from
 * or later (or the list head), found from the newest end. Messages arrive
 * nearly in order, so this stops at once even when many messages wait
 * for their receives (a sender running far ahead). */
static uccl_list_t *held_from(uccl_conn_t *conn, uint64_t from)
{
    uccl_list_t *pos = conn->held.prev;

    while (pos != &conn->held && uccl_container_of(pos, uccl_msg_t, link)->seq >= from)
        pos = pos->prev;
    return pos->next;
}

/* Give the held messages numbered from on that are eligible now, oldest
 * first, the receives waiting for them. The eligible ones before them
 * already met every posted receive (on arrival or at the receive's post),
 * so only these can match. A delivery may fail the connection; stop then. */
static void held_match(uccl_conn_t *conn, uint64_t from)
{
    uccl_list_t *pos = held_from(conn, from);

    while (pos != &conn->held) {
        uccl_msg_t *msg = uccl_container_of(pos, uccl_msg_t, link);
        uccl_req_t *req;

        if (!msg_eligible(conn, msg) || conn->state != UCCL_OK)
            return;
        req = posted_take(conn, msg->ep, msg->tag, msg->len);
        if (req != NULL) {
            uint64_t next = msg->seq + 1;
            msg_deliver(msg, req);
            pos = held_from(conn, next); /* the delivery may have changed the list */
        } else {
            pos = pos->next;
        }
    }
}

static bool held_has(uccl_conn_t *conn, uint64_t seq)
{
    for (uccl_list_t *pos = held_from(conn, seq); pos != &conn->held; pos = pos->next) {
        uint64_t s = uccl_container_of(pos, uccl_msg_t, link)->seq;
        if (s == seq)
            return true;
        if (s > seq)
            break;
    }
    return false;
}

/* Move the arrival mark over the held messages that follow it. */
static void mark_advance(uccl_conn_t *conn)
{
    for (uccl_list_t *pos = held_from(conn, conn->rx_msg_next); pos != &conn->held;
         pos = pos->next) {
        uint64_t seq = uccl_container_of(pos, uccl_msg_t, link)->seq;
        if (seq == conn->rx_msg_next) {
            conn->rx_msg_next++;
            conn->match_gen++;
        }
        else if (seq > conn->rx_msg_next)
            return;
    }
}

uccl_status_t uccl_msg_arrived(uccl_conn_t *conn, const uccl_tp_ep_t *ep, uint64_t seq,
                               uint64_t tag, uint64_t len, uccl_req_t **req)
{
    *req = NULL;
    if (seq < conn->rx_msg_next || seq - conn->rx_msg_next >= MSG_SEQ_WINDOW ||
        held_has(conn, seq)) {
        uccl_error("message number %llu from %s (pid %d) was seen before or is out of range "
                   "(next expected %llu)", (unsigned long long)seq, conn->peer_host, conn->peer_pid,
                   (unsigned long long)conn->rx_msg_next);
        return UCCL_ERR_TRANSPORT;
    }
    if (seq != conn->rx_msg_next)
        return UCCL_OK; /* an earlier message is still on its way: hold this one */
    conn->rx_msg_next++;
    conn->match_gen++;
    mark_advance(conn);
    *req = posted_take(conn, ep, tag, len);
    /* messages behind this one that were only waiting for it */
    held_match(conn, seq + 1);
    return UCCL_OK;
}

void uccl_msg_hold(uccl_conn_t *conn, uccl_tp_ep_t *ep, uccl_msg_t *msg)
{
    uccl_list_t *pos = conn->held.prev;

    msg->ep = ep;
    conn->held_bytes += msg->bytes;
    if (conn->held_bytes > conn->engine->cfg.unexpected_max && conn->state == UCCL_OK) {
        uccl_error("connection to %s (pid %d): %zu bytes of messages arrived that no receive "
                   "took (UCCL_UNEXPECTED_MAX=%zu); the connection fails with NO_MEMORY",
                   conn->peer_host, conn->peer_pid, conn->held_bytes,
                   conn->engine->cfg.unexpected_max);
        uccl_conn_fail(conn, UCCL_ERR_NO_MEMORY);
    }
    /* arrivals come nearly in order: search from the newest */
    while (pos != &conn->held && uccl_container_of(pos, uccl_msg_t, link)->seq > msg->seq)
        pos = pos->prev;
    uccl_list_insert_after(pos, &msg->link);
}

uint64_t uccl_msg_next(uccl_conn_t *conn, uccl_req_t **req)
{
    *req = conn->state == UCCL_OK && !uccl_list_empty(&conn->posted)
               ? uccl_list_first(&conn->posted, uccl_req_t, match_link)
               : NULL;
    return conn->rx_msg_next;
}

uint64_t uccl_msg_gen(const uccl_conn_t *conn)
{
    return conn->match_gen;
}

uccl_req_t *uccl_msg_posted_after(uccl_conn_t *conn, uccl_req_t *req)
{
    uccl_list_t *next = req->match_link.next;

    return conn->state == UCCL_OK && next != &conn->posted
               ? uccl_container_of(next, uccl_req_t, match_link)
               : NULL;
}

void uccl_msg_post_recv(uccl_conn_t *conn, uccl_req_t *req)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &conn->held) {
        uccl_msg_t *msg = uccl_container_of(pos, uccl_msg_t, link);

        if (!msg_eligible(conn, msg))
            break;
        uccl_status_t st;

        if (msg->tag != req->tag)
            continue;
        st = recv_fits(msg->ep, req, msg->len);
        if (st == UCCL_OK)
            msg_deliver(msg, req);
        else /* the message stays */
            uccl_req_complete(req, st, st == UCCL_ERR_TRUNCATED ? msg->len : 0);
        return;
    }
    uccl_list_push_back(&conn->posted, &req->match_link);
    conn->match_gen++;
}

void uccl_msg_forget(uccl_conn_t *conn)
{
    while (uccl_list_pop_front(&conn->held) != NULL)
        ;
}

/* ------------------------------------------------------------------ failed connections */

/* A message kept by the core after its connection failed. */
typedef struct salvaged_msg {
    uccl_list_t link;
    uint64_t tag;
    size_t len;
    uint8_t data[];
} salvaged_msg_t;

/* Copy one complete held message out of its transport, through a request of
 * the core's own whose one piece is the copy. */
static bool msg_salvage_one(uccl_conn_t *conn, uccl_msg_t *msg)
{
    salvaged_msg_t *s = malloc(sizeof(*s) + msg->len);
    uccl_req_t *req = s != NULL ? uccl_req_alloc(conn->engine) : NULL;
    bool ok;

    if (req == NULL) {
        uccl_error("no memory to keep a %llu-byte message of a failed connection",
                   (unsigned long long)msg->len);
        free(s);
        return false;
    }
    s->tag = msg->tag;
    s->len = msg->len;
    req->op = UCCL_OP_RECV;
    req->tag = msg->tag;
    req->len = msg->len;
    req->iovcnt = 1;
    req->iov[0] = (uccl_req_iov_t){.addr = s->data, .len = msg->len};
    msg_deliver(msg, req);
    ok = req->done && req->status == UCCL_OK;
    if (!req->done) /* a transport broke the rule of msg->complete: cannot wait for it */
        uccl_error("message %llu of a failed connection not delivered at once; dropped",
                   (unsigned long long)msg->seq);
    else
        uccl_req_release(req);
    if (ok)
        uccl_list_push_back(&conn->salvaged, &s->link);
    else
        free(s);
    return ok;
}

void uccl_msg_salvage(uccl_conn_t *conn)
{
    size_t n = 0;

    while (!uccl_list_empty(&conn->held)) {
        uccl_msg_t *msg = uccl_list_first(&conn->held, uccl_msg_t, link);

        /* past a message that is missing or incomplete, the order of its
         * tag cannot be kept: stop there */
        if (!msg_eligible(conn, msg) || !msg->complete || !msg_salvage_one(conn, msg))
            break;
        n++;
    }
    uccl_msg_forget(conn);
    if (n > 0)
        uccl_info("%zu messages from %s (pid %d) arrived before the connection failed; later "
                  "receives get them", n, conn->peer_host, conn->peer_pid);
}

bool uccl_msg_has_salvaged(const uccl_conn_t *conn)
{
    return !uccl_list_empty(&conn->salvaged);
}

bool uccl_msg_take_salvaged(uccl_conn_t *conn, uccl_req_t *req)
{
    uccl_list_t *pos;

    if (req->gpu_caps != 0)
        return false;
    uccl_list_for_each(pos, &conn->salvaged) {
        salvaged_msg_t *s = uccl_container_of(pos, salvaged_msg_t, link);

        if (s->tag != req->tag)
            continue;
        if (req->len < s->len) { /* the message stays, as on a live connection */
            uccl_req_complete(req, UCCL_ERR_TRUNCATED, s->len);
            return true;
        }
        uccl_req_iov_copy_in(req, 0, s->data, s->len);
        uccl_req_complete(req, UCCL_OK, s->len);
        uccl_list_del(&s->link);
        free(s);
        return true;
    }
    return false;
}

void uccl_msg_salvaged_free(uccl_conn_t *conn)
{
    uccl_list_t *link;

    while ((link = uccl_list_pop_front(&conn->salvaged)) != NULL)
        free(uccl_container_of(link, salvaged_msg_t, link));
}

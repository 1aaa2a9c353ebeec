/* Two-sided matching for every transport of a connection: arrived messages
 * wait here, in message-number order, for the receives posted here. */
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

    uccl_list_del(&msg->link);
    req->ep = ep;
    ep->tp->ops->msg_deliver(ep, msg, req);
}

/* Give the eligible held messages, oldest first, the receives waiting for
 * them. A delivery may fail the connection; stop then. */
static void held_match(uccl_conn_t *conn)
{
    uccl_list_t *pos, *tmp;

    uccl_list_for_each_safe(pos, tmp, &conn->held) {
        uccl_msg_t *msg = uccl_container_of(pos, uccl_msg_t, link);
        uccl_req_t *req;

        if (!msg_eligible(conn, msg) || conn->state != UCCL_OK)
            return;
        req = posted_take(conn, msg->ep, msg->tag, msg->len);
        if (req != NULL) {
            msg_deliver(msg, req);
            tmp = conn->held.next; /* the delivery may have changed the list */
        }
    }
}

static bool held_has(const uccl_conn_t *conn, uint64_t seq)
{
    const uccl_list_t *pos;

    uccl_list_for_each(pos, &conn->held)
        if (uccl_container_of(pos, uccl_msg_t, link)->seq == seq)
            return true;
    return false;
}

/* Move the arrival mark over the held messages that follow it. */
static void mark_advance(uccl_conn_t *conn)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &conn->held) {
        uint64_t seq = uccl_container_of(pos, uccl_msg_t, link)->seq;
        if (seq == conn->rx_msg_next)
            conn->rx_msg_next++;
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
    mark_advance(conn);
    *req = posted_take(conn, ep, tag, len);
    /* messages behind this one that were only waiting for it */
    held_match(conn);
    return UCCL_OK;
}

void uccl_msg_hold(uccl_conn_t *conn, uccl_tp_ep_t *ep, uccl_msg_t *msg)
{
    uccl_list_t *pos = conn->held.prev;

    msg->ep = ep;
    /* arrivals come nearly in order: search from the newest */
    while (pos != &conn->held && uccl_container_of(pos, uccl_msg_t, link)->seq > msg->seq)
        pos = pos->prev;
    uccl_list_insert_after(pos, &msg->link);
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
}

void uccl_msg_forget(uccl_conn_t *conn)
{
    while (uccl_list_pop_front(&conn->held) != NULL)
        ;
}

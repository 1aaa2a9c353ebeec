/* Transfer entry points: every public send/recv/write/read variant checks
 * its arguments here, builds one request and hands it to the transport
 * chosen for the memory involved (writemsg/readmsg, several requests a call,
 * are in xfer_msg.c). */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "xfer.h"

static uint64_t mem_cap(uccl_mem_type_t type)
{
    switch (type) {
    case UCCL_MEM_CUDA: return UCCL_TP_CAP_CUDA_MEM;
    case UCCL_MEM_ROCM: return UCCL_TP_CAP_ROCM_MEM;
    default: return 0;
    }
}

uccl_status_t uccl_xfer_check_iov(const uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                  size_t *total, uint64_t *gpu_caps)
{
    if (iov == NULL || iovcnt < 1 || iovcnt > UCCL_IOV_MAX)
        return UCCL_ERR_INVALID_PARAM;
    *total = 0;
    *gpu_caps = 0;
    for (int i = 0; i < iovcnt; i++) {
        const uccl_mr_t *mr = iov[i].mr;
        if (mr == NULL) {
            if (iov[i].len != 0) /* only an empty piece needs no region */
                return UCCL_ERR_INVALID_PARAM;
            continue;
        }
        if (uccl_mr_check(mr) != UCCL_OK)
            return UCCL_ERR_INVALID_HANDLE;
        if (mr->engine != conn->engine)
            return UCCL_ERR_INVALID_PARAM;
        if (iov[i].off > mr->len || iov[i].len > mr->len - iov[i].off)
            return UCCL_ERR_OUT_OF_BOUNDS;
        *gpu_caps |= mem_cap(mr->region->mem_type);
        *total += iov[i].len;
    }
    return UCCL_OK;
}

/* rdesc's fields (a version this libuccl does not read is logged). */
static uccl_status_t remote_fields(const uccl_rdesc_t *rdesc, uccl_rdesc_fields_t *f)
{
    uccl_status_t st = uccl_rdesc_decode(rdesc, f);

    if (st == UCCL_ERR_VERSION)
        uccl_error("remote descriptor of version %u; this libuccl reads version %d only "
                   "(the peer runs another release)", rdesc->bytes[4], UCCL_RDESC_VERSION);
    return st;
}

/* Decoded descriptor f against conn and the range [roff, roff+len). */
static uccl_status_t remote_check(const uccl_conn_t *conn, const uccl_rdesc_fields_t *f,
                                  size_t roff, size_t len, uccl_req_remote_t *remote)
{
    if (f->engine_id != conn->peer_id) {
        uccl_error("descriptor of engine %016llx used on a connection to engine %016llx",
                   (unsigned long long)f->engine_id, (unsigned long long)conn->peer_id);
        return UCCL_ERR_STALE;
    }
    if (roff > f->len || len > f->len - roff)
        return UCCL_ERR_OUT_OF_BOUNDS;
    remote->addr = f->addr + roff;
    remote->len = len;
    remote->region_id = f->region_id;
    remote->mem_type = f->mem_type;
    remote->device = f->device;
    return UCCL_OK;
}

uccl_status_t uccl_remote_decode(const uccl_conn_t *conn, const uccl_rdesc_t *rdesc, size_t roff,
                                 size_t len, uccl_req_remote_t *remote, uccl_rdesc_fields_t *fields)
{
    uccl_status_t st = remote_fields(rdesc, fields);

    return st != UCCL_OK ? st : remote_check(conn, fields, roff, len, remote);
}

/* uccl_remote_decode with the engine lock held: the last descriptor read on
 * conn is kept with its fields, and the same 64 bytes are not decoded
 * again. *fields: conn's copy, valid until the next call. */
static uccl_status_t remote_decode_locked(uccl_conn_t *conn, const uccl_rdesc_t *rdesc,
                                          size_t roff, size_t len, uccl_req_remote_t *remote,
                                          const uccl_rdesc_fields_t **fields)
{
    if (!conn->rdesc_cached || memcmp(rdesc, &conn->rdesc_last, sizeof(*rdesc)) != 0) {
        uccl_status_t st = remote_fields(rdesc, &conn->rdesc_last_f);

        conn->rdesc_cached = st == UCCL_OK;
        if (st != UCCL_OK)
            return st;
        conn->rdesc_last = *rdesc;
    }
    *fields = &conn->rdesc_last_f;
    return remote_check(conn, *fields, roff, len, remote);
}

void uccl_remote_pick_key(const uccl_rdesc_fields_t *f, const uccl_tp_ep_t *ep,
                          uccl_req_remote_t *remote)
{
    const uccl_rdesc_key_t *key = NULL;

    if (ep->tp->ops->caps & UCCL_TP_CAP_RKEY)
        key = uccl_rdesc_key_find(f, ep->tp->ops->rkey_owner);
    remote->rkey_len = key != NULL ? key->len : 0;
    if (key != NULL)
        memcpy(remote->rkey, key->key, key->len);
}

static uccl_status_t pick_endpoint(const uccl_conn_t *conn, bool device, uccl_op_t op,
                                   uccl_tp_ep_t **ep)
{
    int slot = device ? conn->dev_tp : conn->host_tp;
    const struct uccl_tp_ops *ops;

    if (slot < 0 || conn->ep[slot] == NULL) {
        uccl_error("no transport on this connection moves %s memory", device ? "GPU" : "host");
        return UCCL_ERR_UNSUPPORTED;
    }
    ops = conn->ep[slot]->tp->ops;
    if ((op == UCCL_OP_WRITE || op == UCCL_OP_READ) && !(ops->caps & UCCL_TP_CAP_RMA))
        return UCCL_ERR_UNSUPPORTED;
    *ep = conn->ep[slot];
    return UCCL_OK;
}

int uccl_xfer_rseg_max(const uccl_conn_t *conn)
{
    const int slots[2] = {conn->host_tp, conn->dev_tp};

    for (int i = 0; i < 2; i++)
        if (slots[i] >= 0 && conn->ep[slots[i]] != NULL &&
            !(conn->ep[slots[i]]->tp->ops->caps & UCCL_TP_CAP_RSEG))
            return 1;
    return UCCL_IOV_MAX;
}

/* a's remote ranges (nrseg > 1) into req: each inside the descriptor's range. */
static uccl_status_t xfer_rsegs(const xfer_args_t *a, const uccl_rdesc_fields_t *f,
                                const uccl_tp_ep_t *ep, uccl_req_t *req)
{
    if (!(ep->tp->ops->caps & UCCL_TP_CAP_RSEG) || a->nrseg > UCCL_IOV_MAX)
        return UCCL_ERR_UNSUPPORTED;
    for (int i = 0; i < a->nrseg; i++) {
        if (a->rseg[i].roff > f->len || a->rseg[i].len > f->len - a->rseg[i].roff)
            return UCCL_ERR_OUT_OF_BOUNDS;
        req->rseg[i] = (uccl_req_rseg_t){f->addr + a->rseg[i].roff, a->rseg[i].len};
    }
    req->nrseg = a->nrseg;
    req->remote.addr = req->rseg[0].addr;
    return UCCL_OK;
}

/* Receives go to the core's matching (match.c), the rest to the transport. */
static uccl_status_t post_to_transport(uccl_conn_t *conn, uccl_tp_ep_t *ep, uccl_req_t *req)
{
    const struct uccl_tp_ops *ops = ep->tp->ops;
    uccl_status_t st;

    switch (req->op) {
    case UCCL_OP_SEND:
        req->msg_seq = conn->tx_msg_seq;
        st = ops->post_send(ep, req);
        if (st == UCCL_OK)
            conn->tx_msg_seq++;
        return st;
    case UCCL_OP_RECV:
        req->ep = NULL; /* the transport the message comes on, once matched */
        uccl_msg_post_recv(conn, req);
        return UCCL_OK;
    case UCCL_OP_WRITE: return ops->post_write(ep, req);
    case UCCL_OP_READ: return ops->post_read(ep, req);
    case UCCL_OP_USER:
    case UCCL_OP_MSG: break; /* never posted to a transport */
    }
    return UCCL_ERR_INVALID_PARAM;
}

/* A request for a, with its pieces taken from their regions (in use from now on). */
static uccl_req_t *xfer_req_new(uccl_conn_t *conn, const xfer_args_t *a, size_t total,
                                uint64_t gpu_caps)
{
    uccl_req_t *req = uccl_req_alloc(conn->engine);

    if (req == NULL)
        return NULL;
    req->conn = conn;
    req->op = a->op;
    req->tag = a->tag;
    req->len = total;
    req->gpu_caps = gpu_caps;
    req->has_notif = a->has_notif;
    req->notif = a->notif;
    req->parent = a->parent;
    req->detached = a->parent != NULL; /* pieces are the core's, recycled when done */
    req->iovcnt = a->iovcnt;
    for (int i = 0; i < a->iovcnt; i++) {
        uccl_mr_t *mr = a->iov[i].mr;
        req->iov[i].mr = mr;
        req->iov[i].region = mr ? mr->region : NULL;
        req->iov[i].addr = mr ? (char *)mr->addr + a->iov[i].off : NULL;
        req->iov[i].len = a->iov[i].len;
        if (mr != NULL)
            mr->inflight++;
    }
    return req;
}

static void xfer_req_drop(uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++)
        if (req->iov[i].mr != NULL)
            req->iov[i].mr->inflight--;
    uccl_list_del(&req->conn_link);
    uccl_req_release(req);
}

/* A receive on a failed connection still gets the messages that fully
 * arrived before the failure; then the failure. */
static uccl_status_t xfer_recv_failed(uccl_conn_t *conn, const xfer_args_t *a, size_t total,
                                      uint64_t gpu_caps, uccl_req_t **out)
{
    uccl_req_t *req = xfer_req_new(conn, a, total, gpu_caps);

    if (req == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (!uccl_msg_take_salvaged(conn, req)) {
        xfer_req_drop(req);
        return conn->state;
    }
    *out = req;
    return UCCL_OK;
}

uccl_status_t uccl_xfer_post_locked(uccl_conn_t *conn, const xfer_args_t *a, uccl_req_t **out)
{
    uccl_req_remote_t remote; /* filled when a->rdesc != NULL, read only then */
    const uccl_rdesc_fields_t *fields = NULL;
    uccl_tp_ep_t *ep;
    uccl_req_t *req;
    uccl_status_t st;
    size_t total;
    uint64_t gpu_caps;
    bool device;

    if (conn->state != UCCL_OK && (a->op != UCCL_OP_RECV || !uccl_msg_has_salvaged(conn)))
        return conn->state;
    st = uccl_xfer_check_iov(conn, a->iov, a->iovcnt, &total, &gpu_caps);
    if (st != UCCL_OK)
        return st;
    if (conn->state != UCCL_OK && a->persistent)
        return conn->state;
    if (conn->state != UCCL_OK)
        return xfer_recv_failed(conn, a, total, gpu_caps, out);
    device = gpu_caps != 0;
    if (a->rdesc != NULL) {
        remote = (uccl_req_remote_t){0};
        /* several ranges: each checked against the descriptor (xfer_rsegs) */
        st = remote_decode_locked(conn, a->rdesc, a->nrseg > 1 ? 0 : a->roff,
                                  a->nrseg > 1 ? 0 : total, &remote, &fields);
        remote.len = total;
        if (st != UCCL_OK)
            return st;
        device = device || remote.mem_type != UCCL_MEM_HOST;
    }
    st = pick_endpoint(conn, device, a->op, &ep);
    if (st != UCCL_OK)
        return st;
    if (a->has_notif && !(ep->tp->ops->caps & UCCL_TP_CAP_NOTIFY))
        return UCCL_ERR_UNSUPPORTED;
    if (a->rdesc != NULL)
        uccl_remote_pick_key(fields, ep, &remote);
    req = xfer_req_new(conn, a, total, gpu_caps);
    if (req == NULL)
        return UCCL_ERR_NO_MEMORY;
    req->ep = ep;
    if (a->rdesc != NULL) /* else uccl_req_alloc's zeros stay */
        req->remote = remote;
    if (a->rdesc != NULL && a->nrseg > 1 && (st = xfer_rsegs(a, fields, ep, req)) != UCCL_OK) {
        xfer_req_drop(req);
        return st;
    }
    if (a->persistent) { /* inactive until uccl_start_all (preq.c) */
        req->persistent = true;
        req->done = true;
        req->status = UCCL_OK;
        *out = req;
        return UCCL_OK;
    }
    uccl_list_push_back(&conn->reqs, &req->conn_link);
    st = post_to_transport(conn, ep, req);
    if (st != UCCL_OK) {
        xfer_req_drop(req);
        return st;
    }
    *out = req;
    return UCCL_OK;
}

static uccl_status_t xfer_post(uccl_conn_t *conn, const xfer_args_t *a, uccl_req_t **out)
{
    uccl_status_t st = uccl_conn_check(conn);

    if (st != UCCL_OK)
        return st;
    if (out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(conn->engine);
    st = uccl_xfer_post_locked(conn, a, out);
    uccl_engine_unlock(conn->engine);
    return st;
}

uccl_status_t uccl_sendv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt, uint64_t tag,
                         uccl_req_t **req)
{
    xfer_args_t a = {.op = UCCL_OP_SEND, .iov = iov, .iovcnt = iovcnt, .tag = tag};
    return xfer_post(conn, &a, req);
}

uccl_status_t uccl_recvv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt, uint64_t tag,
                         uccl_req_t **req)
{
    xfer_args_t a = {.op = UCCL_OP_RECV, .iov = iov, .iovcnt = iovcnt, .tag = tag};
    return xfer_post(conn, &a, req);
}

uccl_status_t uccl_send_init(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                             uint64_t tag, uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    xfer_args_t a = {.op = UCCL_OP_SEND, .iov = &iov, .iovcnt = 1, .tag = tag, .persistent = true};
    return xfer_post(conn, &a, req);
}

uccl_status_t uccl_recv_init(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                             uint64_t tag, uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    xfer_args_t a = {.op = UCCL_OP_RECV, .iov = &iov, .iovcnt = 1, .tag = tag, .persistent = true};
    return xfer_post(conn, &a, req);
}

/* Post a persistent request again, its fields reset (preq.c). */
uccl_status_t uccl_xfer_restart_locked(uccl_req_t *req)
{
    uccl_conn_t *conn = req->conn;
    uccl_tp_ep_t *ep;
    uccl_status_t st;

    if (conn->state != UCCL_OK)
        return conn->state;
    if ((st = pick_endpoint(conn, req->gpu_caps != 0, req->op, &ep)) != UCCL_OK)
        return st;
    req->ep = ep;
    uccl_list_push_back(&conn->reqs, &req->conn_link);
    st = post_to_transport(conn, ep, req);
    if (st != UCCL_OK)
        uccl_list_del(&req->conn_link);
    return st;
}

/* send and recv build their one piece's arguments here and not through
 * sendv/recvv: a call less per message (ofi16b). */
uccl_status_t uccl_send(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len, uint64_t tag,
                        uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    xfer_args_t a = {.op = UCCL_OP_SEND, .iov = &iov, .iovcnt = 1, .tag = tag};
    return xfer_post(conn, &a, req);
}

uccl_status_t uccl_recv(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len, uint64_t tag,
                        uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    xfer_args_t a = {.op = UCCL_OP_RECV, .iov = &iov, .iovcnt = 1, .tag = tag};
    return xfer_post(conn, &a, req);
}

static uccl_status_t rma(uccl_conn_t *conn, uccl_op_t op, const uccl_iov_t *iov, int iovcnt,
                         const uccl_rdesc_t *rdesc, size_t roff, bool has_notif, uint64_t notif,
                         uccl_req_t **req)
{
    xfer_args_t a = {.op = op, .iov = iov, .iovcnt = iovcnt, .rdesc = rdesc, .roff = roff,
                     .has_notif = has_notif, .notif = notif};

    if (rdesc == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return xfer_post(conn, &a, req);
}

uccl_status_t uccl_writev(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                          const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req)
{
    return rma(conn, UCCL_OP_WRITE, iov, iovcnt, rdesc, roff, false, 0, req);
}

uccl_status_t uccl_readv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                         const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req)
{
    return rma(conn, UCCL_OP_READ, iov, iovcnt, rdesc, roff, false, 0, req);
}

uccl_status_t uccl_write(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                         const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    return rma(conn, UCCL_OP_WRITE, &iov, 1, rdesc, roff, false, 0, req);
}

uccl_status_t uccl_read(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                        const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    return rma(conn, UCCL_OP_READ, &iov, 1, rdesc, roff, false, 0, req);
}

uccl_status_t uccl_write_notify(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                const uccl_rdesc_t *rdesc, size_t roff, uint64_t notif,
                                uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    return rma(conn, UCCL_OP_WRITE, &iov, 1, rdesc, roff, true, notif, req);
}

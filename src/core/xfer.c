/* Transfer entry points: every public send/recv/write/read variant checks
 * its arguments here, builds one request and hands it to the transport
 * chosen for the memory involved. */
#include <string.h>

#include "core.h"

typedef struct xfer_args {
    uccl_op_t op;
    const uccl_iov_t *iov;
    int iovcnt;
    uint64_t tag;
    const uccl_rdesc_t *rdesc;
    size_t roff;
    bool has_notif;
    uint64_t notif;
} xfer_args_t;

static uint64_t mem_cap(uccl_mem_type_t type)
{
    switch (type) {
    case UCCL_MEM_CUDA: return UCCL_TP_CAP_CUDA_MEM;
    case UCCL_MEM_ROCM: return UCCL_TP_CAP_ROCM_MEM;
    default: return 0;
    }
}

static uccl_status_t check_iov(const uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
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

static uccl_status_t check_remote(const uccl_conn_t *conn, const xfer_args_t *a, size_t len,
                                  uccl_req_remote_t *remote, uccl_rdesc_fields_t *fields)
{
    uccl_rdesc_fields_t f;
    uccl_status_t st = uccl_rdesc_decode(a->rdesc, &f);

    if (st == UCCL_ERR_VERSION)
        uccl_error("remote descriptor of version %u; this libuccl reads version %d only "
                   "(the peer runs another release)", a->rdesc->bytes[4], UCCL_RDESC_VERSION);
    if (st != UCCL_OK)
        return st;
    if (f.engine_id != conn->peer_id) {
        uccl_error("descriptor of engine %016llx used on a connection to engine %016llx",
                   (unsigned long long)f.engine_id, (unsigned long long)conn->peer_id);
        return UCCL_ERR_STALE;
    }
    if (a->roff > f.len || len > f.len - a->roff)
        return UCCL_ERR_OUT_OF_BOUNDS;
    remote->addr = f.addr + a->roff;
    remote->len = len;
    remote->region_id = f.region_id;
    remote->mem_type = f.mem_type;
    remote->device = f.device;
    *fields = f;
    return UCCL_OK;
}

/* The descriptor's key slot of the transport that carries the request. */
static void remote_pick_key(const uccl_rdesc_fields_t *f, const uccl_tp_ep_t *ep,
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
    }
    return UCCL_ERR_INVALID_PARAM;
}

static uccl_status_t xfer_post_locked(uccl_conn_t *conn, const xfer_args_t *a, uccl_req_t **out)
{
    uccl_req_remote_t remote = {0};
    uccl_rdesc_fields_t fields;
    uccl_tp_ep_t *ep;
    uccl_req_t *req;
    uccl_status_t st;
    size_t total;
    uint64_t gpu_caps;
    bool device;

    if (conn->state != UCCL_OK)
        return conn->state;
    st = check_iov(conn, a->iov, a->iovcnt, &total, &gpu_caps);
    if (st != UCCL_OK)
        return st;
    device = gpu_caps != 0;
    if (a->rdesc != NULL) {
        st = check_remote(conn, a, total, &remote, &fields);
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
        remote_pick_key(&fields, ep, &remote);
    req = uccl_req_alloc(conn->engine);
    if (req == NULL)
        return UCCL_ERR_NO_MEMORY;
    req->conn = conn;
    req->ep = ep;
    req->op = a->op;
    req->tag = a->tag;
    req->len = total;
    req->gpu_caps = gpu_caps;
    req->remote = remote;
    req->has_notif = a->has_notif;
    req->notif = a->notif;
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
    uccl_list_push_back(&conn->reqs, &req->conn_link);
    st = post_to_transport(conn, ep, req);
    if (st != UCCL_OK) {
        for (int i = 0; i < req->iovcnt; i++)
            if (req->iov[i].mr != NULL)
                req->iov[i].mr->inflight--;
        uccl_list_del(&req->conn_link);
        uccl_req_release(req);
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
    st = xfer_post_locked(conn, a, out);
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

uccl_status_t uccl_send(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len, uint64_t tag,
                        uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    return uccl_sendv(conn, &iov, 1, tag, req);
}

uccl_status_t uccl_recv(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len, uint64_t tag,
                        uccl_req_t **req)
{
    uccl_iov_t iov = {mr, off, len};
    return uccl_recvv(conn, &iov, 1, tag, req);
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

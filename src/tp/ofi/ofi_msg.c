/* libfabric two-sided messages: the primitives the shared message protocol
 * (src/tp/common/rndv.h) runs on. Control messages are fi_tsend from the
 * connection's slots into the peer's fi_trecv buffers, tagged with the
 * receiving connection's id; -FI_EAGAIN queues the post, in order, for the
 * next progress. Rendezvous writes go through the data path (ofi_data.c). */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

static tp_ofi_ep_t *ofi_ep_of(uccl_rndv_t *r)
{
    return uccl_container_of(r, tp_ofi_ep_t, rndv);
}

static int ofi_try_recv(tp_ofi_ep_t *ep, int index)
{
    ofi_op_t *op = &ep->ctrl_ops[index];

    return (int)fi_trecv(ep->tp->ep, uccl_rndv_recv_buf(&ep->rndv, index), ep->rndv.slot_size,
                         ep->bufs_desc, FI_ADDR_UNSPEC, ep->id, 0, &op->ctx);
}

uccl_status_t uccl_ofi_post_ctrl_recv(tp_ofi_ep_t *ep, int index)
{
    int rc = ep->nretry_recv > 0 ? -FI_EAGAIN : ofi_try_recv(ep, index);

    if (rc == -FI_EAGAIN) {
        ep->retry_recv[ep->nretry_recv++] = index;
        return UCCL_OK;
    }
    if (rc != 0) {
        uccl_error("ofi (%s): fi_trecv: %s", ep->tp->prov, fi_strerror(-rc));
        return UCCL_ERR_TRANSPORT;
    }
    ep->posted++;
    return UCCL_OK;
}

static int ofi_try_send(tp_ofi_ep_t *ep, int slot, size_t len)
{
    ofi_op_t *op = &ep->ctrl_ops[ep->tp->cfg.rx_depth + slot];

    return (int)fi_tsend(ep->tp->ep, uccl_rndv_send_buf(&ep->rndv, slot), len, ep->bufs_desc,
                         ep->peer->addr, ep->peer_id, &op->ctx);
}

static void ofi_send_posted(tp_ofi_ep_t *ep)
{
    ep->posted++;
    ep->ctrl_sends++;
}

/* Posts that met -FI_EAGAIN, oldest first; stops at the first that meets it again. */
void uccl_ofi_retry_ctrl(tp_ofi_ep_t *ep)
{
    int done = 0, rc = 0;

    while (done < ep->nretry_recv && (rc = ofi_try_recv(ep, ep->retry_recv[done])) == 0) {
        ep->posted++;
        done++;
    }
    if (rc != 0 && rc != -FI_EAGAIN) {
        uccl_error("ofi (%s): fi_trecv: %s", ep->tp->prov, fi_strerror(-rc));
        uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
        return;
    }
    memmove(ep->retry_recv, ep->retry_recv + done, (size_t)(ep->nretry_recv - done) * sizeof(int));
    ep->nretry_recv -= done;
    done = 0;
    rc = 0;
    while (done < ep->nretry_send &&
           (rc = ofi_try_send(ep, ep->retry_send[done], ep->retry_len[done])) == 0) {
        ofi_send_posted(ep);
        done++;
    }
    if (rc != 0 && rc != -FI_EAGAIN) {
        uccl_error("ofi (%s): fi_tsend: %s", ep->tp->prov, fi_strerror(-rc));
        uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
        return;
    }
    memmove(ep->retry_send, ep->retry_send + done, (size_t)(ep->nretry_send - done) * sizeof(int));
    memmove(ep->retry_len, ep->retry_len + done, (size_t)(ep->nretry_send - done) * sizeof(size_t));
    ep->nretry_send -= done;
}

static bool ofi_ctrl_room(uccl_rndv_t *r)
{
    tp_ofi_ep_t *ep = ofi_ep_of(r);

    return ep->connected && ep->nretry_send == 0 && ep->ctrl_sends < ep->tp->cfg.tx_depth;
}

static void ofi_ctrl_post(uccl_rndv_t *r, int slot, size_t len)
{
    tp_ofi_ep_t *ep = ofi_ep_of(r);
    int rc = ofi_try_send(ep, slot, len);

    if (rc == 0) {
        ofi_send_posted(ep);
        return;
    }
    if (rc == -FI_EAGAIN) { /* the provider is short of resources: retried by progress */
        ep->retry_send[ep->nretry_send] = slot;
        ep->retry_len[ep->nretry_send++] = len;
        return;
    }
    uccl_error("ofi (%s): fi_tsend (control): %s", ep->tp->prov, fi_strerror(-rc));
    uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
}

static uccl_status_t ofi_recv_repost(uccl_rndv_t *r, int index)
{
    return uccl_ofi_post_ctrl_recv(ofi_ep_of(r), index);
}

static uccl_status_t ofi_write(uccl_rndv_t *r, uccl_req_t *req, const uccl_rndv_seg_t *segs,
                               int nseg)
{
    ofi_xfer_t *x = uccl_ofi_xfer_get(ofi_ep_of(r), req, (uint64_t)nseg);

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    x->nseg = (uint64_t)nseg;
    memcpy(x->segs, segs, (size_t)nseg * sizeof(*segs));
    uccl_ofi_data_start(ofi_ep_of(r), req);
    return UCCL_OK;
}

/* A pulled message (rndv_pull.c): the data path reads it into the receive. */
static uccl_status_t ofi_read(uccl_rndv_t *r, uccl_req_t *req, const uccl_rndv_seg_t *segs,
                              int nseg)
{
    return ofi_write(r, req, segs, nseg);
}

static void ofi_write_part_done(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st)
{
    uccl_ofi_data_done(ofi_ep_of(r), req, st);
}

uccl_status_t uccl_ofi_check_local(const tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len > 0 && uccl_ofi_iov_memh(ep->tp, req, i) == NULL) {
            uccl_error("ofi: local buffer %p is not registered with this transport",
                       req->iov[i].addr);
            return UCCL_ERR_NOT_REGISTERED;
        }
    }
    return UCCL_OK;
}

static uccl_status_t ofi_mem_check(uccl_rndv_t *r, const uccl_req_t *req, bool *staged)
{
    uccl_status_t st = uccl_ofi_check_local(ofi_ep_of(r), req);

    *staged = st == UCCL_OK && uccl_ofi_req_staged(ofi_ep_of(r), req);
    return st;
}

static uccl_status_t ofi_mem_stage(uccl_rndv_t *r, uccl_req_t *req, size_t len, bool gather)
{
    return uccl_ofi_xfer_stage(ofi_ep_of(r), req, len, gather);
}

static void ofi_mem_unstage(uccl_rndv_t *r, uccl_req_t *req)
{
    (void)r;
    uccl_ofi_xfer_release(req);
}

/* The receive's pieces, addressed as the provider wants them. */
static int ofi_mem_segs(uccl_rndv_t *r, const uccl_req_t *req, size_t len, uccl_rndv_seg_t *segs)
{
    tp_ofi_t *tp = ofi_ep_of(r)->tp;
    bool virt = (tp->mr_mode & FI_MR_VIRT_ADDR) != 0;
    int nseg = 0;

    (void)len;
    for (int i = 0; i < req->iovcnt; i++) {
        const uccl_tp_memh_t *m = uccl_ofi_iov_memh(tp, req, i);
        uint64_t addr = (uint64_t)(uintptr_t)req->iov[i].addr;

        if (req->iov[i].len == 0 || m == NULL)
            continue;
        segs[nseg++] = (uccl_rndv_seg_t){virt ? addr : addr - m->base, m->key, req->iov[i].len};
    }
    return nseg;
}

void uccl_ofi_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes)
{
    uccl_list_del(&req->tp_link);
    uccl_ofi_xfer_release(req);
    uccl_req_complete(req, status, status == UCCL_OK ? bytes : 0);
}

static void ofi_finish(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st, size_t bytes)
{
    (void)r;
    uccl_ofi_req_finish(req, st, bytes);
}

const uccl_rndv_ops_t uccl_ofi_rndv_ops = {
    .ctrl_room = ofi_ctrl_room,
    .ctrl_post = ofi_ctrl_post,
    .recv_repost = ofi_recv_repost,
    .write = ofi_write,
    .read = ofi_read,
    .write_part_done = ofi_write_part_done,
    .mem_check = ofi_mem_check,
    .mem_stage = ofi_mem_stage,
    .mem_unstage = ofi_mem_unstage,
    .mem_segs = ofi_mem_segs,
    .finish = ofi_finish,
    .sink_start = uccl_ofi_sink_start,
    .sink_landed = uccl_ofi_sink_landed,
    .grant = uccl_ofi_grant,
    .tmsg_ok = uccl_ofi_tmsg_ok,
    .tmsg_send = uccl_ofi_tmsg_send,
    .tmsg_recv = uccl_ofi_tmsg_recv,
};

uccl_status_t uccl_ofi_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    tp_ofi_ep_t *ep = tp_ofi_ep(base);
    unsigned run = uccl_ofi_direct_run(ep, req);

    if (uccl_ofi_direct_ok(ep, req))
        return uccl_ofi_direct_send(ep, req, run);
    return uccl_rndv_send(&ep->rndv, req);
}

void uccl_ofi_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    uccl_rndv_deliver(&tp_ofi_ep(base)->rndv, msg, req);
}

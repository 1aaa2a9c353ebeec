/* Tagged rendezvous (rndv.h, RTS_TMSG; UCCL_OFI_TAGGED): a send above
 * UCCL_OFI_EAGER from host memory whose pieces one tagged operation takes
 * goes as its RTS_TMSG and, at once, one fi_tsendv of its data; the
 * receiver, once the core matched a receive to the RTS_TMSG, posts one
 * fi_trecvv for that message into the receive's pieces, or into a bounce
 * copied into them at completion (GPU memory, more pieces than one
 * operation takes, memory not registered: the message is consumed all the
 * same, the receive then fails). The provider's own protocol moves the
 * data: on shm one command and the receiver's CMA read, where CTS + write
 * cost a round trip more; on rxm its eager, segmented or rendezvous path.
 *
 * Tag: bit 63, the message id (31 bits) << 32, the receiving connection's
 * id; a control message's tag is the id alone, so neither takes the other.
 * While a request is in UCCL_RNDV_RS_TMSG its slots hold: UCCL_RNDV_RD_ID
 * the message length, UCCL_RNDV_RD_PEER_ID the message id, OFI_RD_IMM 2 for
 * a send (nothing to close) and, for a receive, the local error it finishes
 * with once the message is consumed; OFI_RD_OFF, OFI_RD_OPS, OFI_RD_DOPS as
 * for any data request (ofi_data.c posts it through ofi_post_one). */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

static uint64_t ofi_tmsg_tag(uint32_t conn_id, uint64_t id)
{
    return 1ull << 63 | (id & UCCL_RNDV_TMSG_ID_MASK) << 32 | conn_id;
}

static tp_ofi_ep_t *ofi_tmsg_ep(uccl_rndv_t *r)
{
    return uccl_container_of(r, tp_ofi_ep_t, rndv);
}

/* Local pieces with bytes, if one operation takes them all. */
static bool ofi_tmsg_fits(const tp_ofi_t *tp, const uccl_req_t *req, size_t len)
{
    int n = 0;

    for (int i = 0; i < req->iovcnt; i++)
        n += req->iov[i].len > 0;
    return n <= tp->cfg.max_iov && len <= tp->max_msg;
}

/* UCCL_OFI_TAGGED, or with exact tags (shm) a send of at most the inject
 * size (tp->direct_min) above UCCL_OFI_EAGER: its push write (or pull
 * read) of so few bytes stalled shm 1.17 while direct sends were out
 * (tests/unit/test_ofi_mix, UCCL_OFI_EAGER below 4 KiB) */
bool uccl_ofi_tmsg_ok(uccl_rndv_t *r, const uccl_req_t *req)
{
    const tp_ofi_t *tp = ofi_tmsg_ep(r)->tp;

    return (tp->tmsg || req->len <= tp->direct_min) && ofi_tmsg_fits(tp, req, req->len);
}

static void ofi_tmsg_start(tp_ofi_ep_t *ep, uccl_req_t *req, uint64_t len, uint64_t id,
                           uccl_status_t local)
{
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_TMSG;
    req->tp_data[UCCL_RNDV_RD_ID] = len;
    req->tp_data[UCCL_RNDV_RD_PEER_ID] = id;
    req->tp_data[OFI_RD_OFF] = 0;
    req->tp_data[OFI_RD_OPS] = 0;
    req->tp_data[OFI_RD_IMM] = req->op == UCCL_OP_SEND ? 2 : (uint64_t)(int64_t)local;
    req->tp_data[OFI_RD_DOPS] = 0;
    uccl_list_push_back(&ep->data_pending, &req->tp_link);
    uccl_ofi_post_pending(ep);
}

void uccl_ofi_tmsg_send(uccl_rndv_t *r, uccl_req_t *req, uint64_t id)
{
    ofi_tmsg_start(ofi_tmsg_ep(r), req, req->len, id, UCCL_OK);
}

void uccl_ofi_tmsg_recv(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t id)
{
    tp_ofi_ep_t *ep = ofi_tmsg_ep(r);

    ofi_tmsg_start(ep, req, len, id, uccl_ofi_check_local(ep, req));
}

/* A receive that cannot take the message in its own pieces takes it in a
 * bounce of len bytes (registered where the provider wants local keys). */
static int ofi_tmsg_bounce(tp_ofi_t *tp, ofi_op_t *op, size_t len, struct iovec *iov, void **desc)
{
    op->tmp = malloc(len > 0 ? len : 1);
    if (op->tmp == NULL)
        return -FI_ENOMEM;
    desc[0] = NULL;
    if ((tp->mr_mode & FI_MR_LOCAL) &&
        uccl_ofi_reg_buf(tp, op->tmp, len > 0 ? len : 1, &op->tmp_mr, &desc[0]) != UCCL_OK) {
        free(op->tmp);
        op->tmp = NULL;
        return -FI_ENOMEM;
    }
    iov[0] = (struct iovec){op->tmp, len};
    return 0;
}

/* Post req's one tagged operation: 0, -FI_EAGAIN (again later) or another
 * negative code (req has its error). */
int uccl_ofi_tmsg_post(tp_ofi_ep_t *ep, uccl_req_t *req)
{
    tp_ofi_t *tp = ep->tp;
    size_t len = req->tp_data[UCCL_RNDV_RD_ID];
    bool recv = req->op == UCCL_OP_RECV;
    uint64_t tag = ofi_tmsg_tag(recv ? ep->id : ep->peer_id, req->tp_data[UCCL_RNDV_RD_PEER_ID]);
    struct iovec iov[OFI_IOV_MAX];
    void *desc[OFI_IOV_MAX];
    ofi_op_t *op = uccl_ofi_op_get(tp);
    int n = 1, rc = 0;

    if (op == NULL) {
        uccl_rndv_req_error(req, UCCL_ERR_NO_MEMORY);
        return -FI_ENOMEM;
    }
    op->kind = OFI_OP_DATA;
    op->ep = ep;
    op->req = req;
    op->len = len;
    op->read = recv;
    if (recv && (req->tp_data[OFI_RD_IMM] != 0 || uccl_ofi_req_staged(ep, req) ||
                 !ofi_tmsg_fits(tp, req, len)))
        rc = ofi_tmsg_bounce(tp, op, len, iov, desc);
    else if (uccl_ofi_gather(ep, req, 0, len, iov, desc, tp->cfg.max_iov, &n) != len)
        rc = -FI_EINVAL; /* tmsg_ok took it: cannot happen */
    if (rc == 0 && recv)
        rc = (int)fi_trecvv(tp->ep, iov, desc, (size_t)n, FI_ADDR_UNSPEC, tag, 0, &op->ctx);
    else if (rc == 0)
        rc = (int)fi_tsendv(tp->ep, iov, desc, (size_t)n, ep->peer->addr, tag, &op->ctx);
    if (rc != 0) {
        uccl_ofi_op_free_bounce(op);
        uccl_ofi_op_put(tp, op);
        if (rc != -FI_EAGAIN) {
            uccl_error("ofi (%s): fi_t%sv of %zu bytes (tagged rendezvous): %s", tp->prov,
                       recv ? "recv" : "send", len, fi_strerror(-rc));
            uccl_rndv_req_error(req, rc == -FI_ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT);
        }
        return rc;
    }
    tp->tmsg_posted++;
    req->tp_data[OFI_RD_OFF] = req->len;
    req->tp_data[OFI_RD_OPS]++;
    req->tp_data[OFI_RD_DOPS]++;
    ep->posted++;
    uccl_list_push_back(&ep->data_ops, &op->link);
    return 0;
}

/* The tagged operation completed (st): a bounce lands in the receive's
 * pieces. Returns st, or the copy's error. */
uccl_status_t uccl_ofi_tmsg_landed(ofi_op_t *op, uccl_status_t st)
{
    if (op->req != NULL && op->tmp != NULL && st == UCCL_OK &&
        op->req->tp_data[OFI_RD_IMM] == 0)
        st = uccl_rndv_iov_copy(op->req, op->tmp, op->len, true);
    uccl_ofi_op_free_bounce(op);
    return st;
}

void uccl_ofi_op_free_bounce(ofi_op_t *op)
{
    if (op->tmp_mr != NULL)
        fi_close(&op->tmp_mr->fid);
    free(op->tmp);
    op->tmp = NULL;
    op->tmp_mr = NULL;
}

/* Every operation of req completed (ofi_data.c). A failure the peer may
 * still wait on fails the connection (the message was not consumed or not
 * sent); a local one (the receive's memory) fails only the receive. */
void uccl_ofi_tmsg_done(tp_ofi_ep_t *ep, uccl_req_t *req)
{
    uccl_status_t err = uccl_rndv_req_err(req), st = err;
    size_t len = req->tp_data[UCCL_RNDV_RD_ID];

    if (st == UCCL_OK && req->op == UCCL_OP_RECV)
        st = (uccl_status_t)(int64_t)req->tp_data[OFI_RD_IMM];
    uccl_ofi_req_finish(req, st, len);
    if (err != UCCL_OK && err != UCCL_ERR_CANCELED)
        uccl_ofi_conn_fail(ep, err == UCCL_ERR_PEER_FAILED ? err : UCCL_ERR_TRANSPORT);
}

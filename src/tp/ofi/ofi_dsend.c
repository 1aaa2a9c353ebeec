/* Direct sends (UCCL_OFI_DIRECT), the sending side: which sends go
 * directly, the run each carries, the fi_tsendmsg with its provider tag and
 * the sends that met -FI_EAGAIN. The protocol, the tag layout and the
 * receiving side: ofi_direct.c. */
#include "ofi.h"

/* Not above tp->direct_min: an injected send completes at once, and its
 * hint (ofi_dhint.c) would never go (tests/perf/results/ofi/ofi19-local). */
bool uccl_ofi_direct_ok(tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    return ep->peer_direct_max > 0 && req->tag <= OFI_DTAG_MASK &&
           req->len > ep->tp->cfg.eager && req->len > ep->tp->direct_min &&
           req->len <= ep->peer_direct_max &&
           uccl_ofi_direct_mem_pieces(ep, req) >= 0;
}

unsigned uccl_ofi_direct_run(tp_ofi_ep_t *ep, const uccl_req_t *req)
{
    unsigned run = 0;

    if (req->msg_seq == ep->srun_next && req->tag == ep->srun_tag)
        run = ep->srun < OFI_DRUN_MASK ? ep->srun + 1 : (unsigned)OFI_DRUN_MASK;
    ep->srun_next = req->msg_seq + 1;
    ep->srun_tag = req->tag;
    ep->srun = run;
    return run;
}

static int ofi_direct_post_send(tp_ofi_ep_t *ep, uccl_req_t *req)
{
    tp_ofi_t *tp = ep->tp;
    struct iovec iov[OFI_IOV_MAX];
    void *desc[OFI_IOV_MAX];
    struct fi_msg_tagged msg;
    ofi_op_t *op = uccl_ofi_op_get(tp);
    int n = 0, rc;

    if (op == NULL)
        return -FI_ENOMEM;
    rc = uccl_ofi_dhint_first(ep, req);
    if (rc != 0) {
        uccl_ofi_op_put(tp, op);
        return rc;
    }
    if (uccl_ofi_gather(ep, req, 0, req->len, iov, desc, tp->cfg.max_iov, &n) != req->len) {
        uccl_ofi_op_put(tp, op);
        return -FI_EINVAL; /* direct_ok took it: cannot happen */
    }
    op->kind = OFI_OP_DSEND;
    op->ep = ep;
    op->req = req;
    msg = (struct fi_msg_tagged){
        .msg_iov = iov,
        .desc = desc,
        .iov_count = (size_t)n,
        .addr = ep->peer->addr,
        .tag = uccl_ofi_dtag(ep->peer_id, req->msg_seq, req->tp_data[OFI_RD_DRUN], req->tag),
        .context = &op->ctx,
        .data = req->tp_data[OFI_RD_DRUN] << 32 | req->tag,
    };
    rc = (int)fi_tsendmsg(tp->ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION);
    if (rc != 0) {
        uccl_ofi_op_put(tp, op);
        return rc;
    }
    tp->direct_sent++;
    ep->dsent_next = req->msg_seq + 1;
    ep->posted++;
    uccl_list_push_back(&ep->data_ops, &op->link);
    uccl_ofi_dhint_posted(ep, op);
    uccl_list_push_back(&ep->inflight, &req->tp_link);
    return 0;
}

uccl_status_t uccl_ofi_direct_send(tp_ofi_ep_t *ep, uccl_req_t *req, unsigned run)
{
    int rc;

    req->tp_data[OFI_RD_DRUN] = run;
    rc = uccl_list_empty(&ep->dpending) ? ofi_direct_post_send(ep, req) : -FI_EAGAIN;

    if (rc == -FI_EAGAIN) { /* in order, by progress */
        uccl_list_push_back(&ep->dpending, &req->tp_link);
        return UCCL_OK;
    }
    if (rc != 0) {
        uccl_error("ofi (%s): fi_tsendmsg of %zu bytes (direct): %s", ep->tp->prov, req->len,
                   fi_strerror(-rc));
        return rc == -FI_ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
    }
    return UCCL_OK;
}

/* Sends that met -FI_EAGAIN, oldest first. A send accepted by post_send
 * must reach the peer: one that cannot fails the connection. */
void uccl_ofi_direct_retry(tp_ofi_ep_t *ep)
{
    while (!uccl_list_empty(&ep->dpending)) {
        uccl_req_t *req = uccl_list_first(&ep->dpending, uccl_req_t, tp_link);
        int rc;

        uccl_list_del(&req->tp_link);
        rc = ofi_direct_post_send(ep, req);
        if (rc == 0)
            continue;
        if (rc == -FI_EAGAIN) {
            uccl_list_push_front(&ep->dpending, &req->tp_link);
            return;
        }
        uccl_error("ofi (%s): fi_tsendmsg (direct): %s", ep->tp->prov, fi_strerror(-rc));
        uccl_req_complete(req, UCCL_ERR_TRANSPORT, 0);
        uccl_ofi_conn_fail(ep, UCCL_ERR_TRANSPORT);
        return;
    }
}

/* Pull rendezvous (rndv.h, UCCL_RNDV_MSG_RTS_PULL): where the transport
 * sets r->pull, a send above the eager limit names its own pieces in the
 * RTS; the receiver, once the core matched a receive of the message's
 * exact length in host memory, reads them (ops->read) and answers FIN
 * {send id, len, status}, which finishes the send: two control messages
 * and the receiver's read, for providers whose reads are cheap or whose
 * writes lack immediates. Any other receive answers as to an RTS (CTS or
 * GRANT windows): the sender waits for either. ofi offers it behind
 * UCCL_OFI_PULL=1 (on shm it measured no faster than CTS + write). */
#include "rndv.h"

bool uccl_rndv_pull_start(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t send_id,
                          const uccl_rndv_seg_t *segs, int nseg)
{
    uint64_t total = 0;

    for (int i = 0; i < nseg; i++)
        total += segs[i].len;
    if (r->ops->read == NULL || req->gpu_caps != 0 || len != req->len || total != len)
        return false;
    req->tp_data[UCCL_RNDV_RD_PEER_ID] = send_id;
    if (r->ops->read(r, req, segs, nseg) != UCCL_OK) { /* the sender hears of it */
        uccl_rndv_req_error(req, UCCL_ERR_TRANSPORT);
        uccl_rndv_pull_done(r, req);
    }
    return true;
}

/* The message is read (or failed): tell the sender, finish the receive. */
void uccl_rndv_pull_done(uccl_rndv_t *r, uccl_req_t *req)
{
    uccl_status_t err = uccl_rndv_req_err(req);
    uccl_status_t st = uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_FIN, err,
                                           req->tp_data[UCCL_RNDV_RD_PEER_ID],
                                           err == UCCL_OK ? req->len : 0, 0, NULL);

    if (st != UCCL_OK) /* the sender would wait for ever */
        uccl_conn_fail(r->ep->conn, st);
    if (err == UCCL_OK)
        err = st;
    r->ops->finish(r, req, err, err == UCCL_OK ? req->len : 0);
}

bool uccl_rndv_pull_fin(uccl_rndv_t *r, uint64_t send_id, uint64_t len, uccl_status_t st)
{
    uccl_req_t *req = uccl_rndv_id_find(r, send_id, UCCL_RNDV_RS_WAIT_CTS, true);

    if (req == NULL)
        return false;
    uccl_list_del(&req->tp_link); /* r->rndv_wait */
    if (st == UCCL_OK && len != req->len)
        st = UCCL_ERR_TRANSPORT;
    if (st > 0 || st < -199) /* only statuses we know cross the wire */
        st = UCCL_ERR_TRANSPORT;
    r->ops->finish(r, req, st, st == UCCL_OK ? len : 0);
    return true;
}

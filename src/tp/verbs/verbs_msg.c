/* Verbs two-sided messages: the primitives the shared message protocol
 * (src/tp/common/rndv.h) runs on. Control messages are SENDs from the
 * endpoint's registered slots on the RC control QP into the peer's posted
 * receive buffers; rendezvous writes go through the data path (verbs_data.c);
 * GPU memory the NIC cannot reach is staged (verbs_stage.c). */
#include <string.h>

#include "verbs.h"

static tp_verbs_ep_t *verbs_ep_of(uccl_rndv_t *r)
{
    return uccl_container_of(r, tp_verbs_ep_t, rndv);
}

static bool verbs_ctrl_room(uccl_rndv_t *r)
{
    tp_verbs_ep_t *ep = verbs_ep_of(r);

    return ep->ctl->outstanding < ep->tp->cfg.tx_depth;
}

static void verbs_ctrl_post(uccl_rndv_t *r, int slot, size_t len)
{
    uccl_verbs_ctrl_send(verbs_ep_of(r), slot, len); /* numbered, on the live control QP */
}

static uccl_status_t verbs_recv_repost(uccl_rndv_t *r, int index)
{
    return uccl_verbs_post_ctrl_recv(verbs_ep_of(r), index);
}

/* A rendezvous send's target from the CTS: the data path takes it. */
static uccl_status_t verbs_write(uccl_rndv_t *r, uccl_req_t *req, const uccl_rndv_seg_t *segs,
                                 int nseg)
{
    uccl_status_t st = uccl_verbs_xfer_segs(req, (uint64_t)nseg);

    if (st != UCCL_OK)
        return st;
    memcpy(tp_verbs_xfer(req)->segs, segs, (size_t)nseg * sizeof(*segs));
    uccl_verbs_data_start(verbs_ep_of(r), req);
    return UCCL_OK;
}

static void verbs_write_part_done(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st)
{
    uccl_verbs_data_wc(verbs_ep_of(r), req, st);
}

static uccl_status_t verbs_mem_check(uccl_rndv_t *r, const uccl_req_t *req, bool *staged)
{
    tp_verbs_ep_t *ep = verbs_ep_of(r);

    *staged = uccl_verbs_req_staged(ep, req);
    return uccl_verbs_check_local(ep, req);
}

static uccl_status_t verbs_mem_stage(uccl_rndv_t *r, uccl_req_t *req, size_t len, bool gather)
{
    return uccl_verbs_xfer_stage(verbs_ep_of(r), req, len, gather);
}

static void verbs_mem_unstage(uccl_rndv_t *r, uccl_req_t *req)
{
    (void)r;
    uccl_verbs_xfer_release(req);
}

/* The receive's pieces with their rkeys (a staged receive takes granted
 * windows instead: verbs_sink_start). */
static int verbs_mem_segs(uccl_rndv_t *r, const uccl_req_t *req, size_t len, uccl_rndv_seg_t *segs)
{
    tp_verbs_ep_t *ep = verbs_ep_of(r);
    int nseg = 0;

    (void)len;
    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        const uccl_tp_memh_t *memh = uccl_region_memh(req->iov[i].region, &ep->tp->base);

        /* rail 0's rkey, and rail 1's in the high half where registered there */
        segs[nseg++] = (uccl_rndv_seg_t){
            .addr = (uintptr_t)req->iov[i].addr,
            .key = memh->mr->rkey | (memh->rail_mr[0] != NULL && ep->nrails > 1
                                         ? (uint64_t)memh->rail_mr[0]->rkey << 32 : 0),
            .len = req->iov[i].len,
        };
    }
    return nseg;
}

static uccl_status_t verbs_sink_start(uccl_rndv_t *r, uccl_req_t *req, size_t len)
{
    (void)len;
    return uccl_verbs_sink_start(verbs_ep_of(r), req);
}

static void verbs_sink_landed(uccl_rndv_t *r, uccl_req_t *req, int slot)
{
    tp_verbs_xfer_t *x = tp_verbs_xfer(req);

    if (x == NULL || x->staged.sink == NULL) {
        uccl_error("verbs: window data for a receive that is not staged");
        uccl_conn_fail(verbs_ep_of(r)->base.conn, UCCL_ERR_TRANSPORT);
        return;
    }
    uccl_rndv_sink_landed(x->staged.sink, slot, UCCL_OK);
}

static uccl_status_t verbs_grant(uccl_rndv_t *r, uccl_req_t *req, bool first, int slot,
                                 uint64_t off, const uccl_rndv_seg_t *seg)
{
    return uccl_verbs_grant(verbs_ep_of(r), req, first, slot, off, seg);
}

static void verbs_finish(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st, size_t bytes)
{
    (void)r;
    uccl_verbs_req_finish(req, st, bytes);
}

const uccl_rndv_ops_t uccl_verbs_rndv_ops = {
    .ctrl_room = verbs_ctrl_room,
    .ctrl_post = verbs_ctrl_post,
    .recv_repost = verbs_recv_repost,
    .write = verbs_write,
    .write_part_done = verbs_write_part_done,
    .mem_check = verbs_mem_check,
    .mem_stage = verbs_mem_stage,
    .mem_unstage = verbs_mem_unstage,
    .mem_segs = verbs_mem_segs,
    .finish = verbs_finish,
    .sink_start = verbs_sink_start,
    .sink_landed = verbs_sink_landed,
    .grant = verbs_grant,
};

uccl_status_t uccl_verbs_post_send(uccl_tp_ep_t *base, uccl_req_t *req)
{
    return uccl_rndv_send(&((tp_verbs_ep_t *)base)->rndv, req);
}

void uccl_verbs_msg_deliver(uccl_tp_ep_t *base, uccl_msg_t *msg, uccl_req_t *req)
{
    uccl_rndv_deliver(&((tp_verbs_ep_t *)base)->rndv, msg, req);
}

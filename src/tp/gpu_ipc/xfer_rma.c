/* gpu_ipc write/read: by the initiator under a grant (remote device
 * memory) or by the target (remote host memory); plans, waiters and
 * completions are xfer.c's. */
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"

/* Initiator-side copy against a grant (remote device memory). */
static uccl_status_t rma_local(ipc_ep_t *ep, uccl_req_t *req, const ipc_grant_t *g)
{
    ipc_seg_t local[UCCL_IOV_MAX], remote;
    const uccl_req_remote_t *r = &req->remote;
    int n = uccl_gpu_ipc_local_plan(req, 0, local);
    ipc_op_t *op;
    uccl_status_t st;

    if (r->addr < g->addr || r->len > g->len || r->addr - g->addr > g->len - r->len)
        return UCCL_ERR_REMOTE_ACCESS;
    op = uccl_gpu_ipc_op_new(OP_LOCAL, req);
    if (op == NULL)
        return UCCL_ERR_NO_MEMORY;
    op->has_notif = req->has_notif;
    op->notif = req->notif;
    op->bytes = req->len;
    op->batch = uccl_gpu_ipc_batch_ok(ep, req);
    remote.ptr = (char *)g->map->ptr + (r->addr - g->map->key);
    remote.len = r->len;
    if (req->op == UCCL_OP_WRITE)
        st = uccl_gpu_ipc_op_start(ep, op, &remote, 1, local, n, req->len);
    else
        st = uccl_gpu_ipc_op_start(ep, op, local, n, &remote, 1, req->len);
    if (st != UCCL_OK)
        free(op);
    return st;
}

/* Target-side copy (remote host memory): ship our device pieces. */
static uccl_status_t rma_remote(ipc_ep_t *ep, uccl_req_t *req)
{
    msg_seg_t seg[UCCL_IOV_MAX];
    msg_tgt_op_t m = {0};
    uccl_status_t st = uccl_gpu_ipc_local_segs(ep, req, seg, &m.nseg);

    if (st != UCCL_OK)
        return st;
    m.seq = ep->next_seq++;
    m.region_id = req->remote.region_id;
    m.addr = req->remote.addr;
    m.len = req->len;
    m.op = req->op;
    m.has_notif = req->has_notif;
    m.notif = req->notif;
    return uccl_gpu_ipc_post_waiting(ep, IPC_WAIT_TGT, req, IPC_MSG_TGT_OP, m.seq, &m, sizeof(m),
                                     seg, m.nseg);
}

static bool grant_requested(ipc_ep_t *ep, uint64_t region_id)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &ep->grant_wait)
        if (uccl_container_of(pos, uccl_req_t, tp_link)->remote.region_id == region_id)
            return true;
    return false;
}

static uccl_status_t post_rma(ipc_ep_t *ep, uccl_req_t *req)
{
    ipc_grant_t *g;

    if (req->remote.mem_type == UCCL_MEM_HOST)
        return rma_remote(ep, req);
    uccl_gpu_ipc_ep_poll(ep); /* see a revoke that already arrived */
    if (ep->failed)
        return UCCL_ERR_PEER_FAILED;
    g = uccl_gpu_ipc_grant_find(ep, req->remote.region_id);
    if (g != NULL)
        return rma_local(ep, req, g);
    if (!grant_requested(ep, req->remote.region_id)) {
        msg_grant_req_t m = {req->remote.region_id, req->remote.addr, req->remote.len};
        uccl_status_t st = uccl_gpu_ipc_send_msg(ep, IPC_MSG_GRANT_REQ, &m, sizeof(m), NULL, 0);
        if (st != UCCL_OK)
            return st;
    }
    uccl_list_push_back(&ep->grant_wait, &req->tp_link);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ipc_post_write(uccl_tp_ep_t *base, uccl_req_t *req)
{
    ipc_tp_t *tp = ((ipc_ep_t *)base)->tp;
    uint64_t t0 = uccl_gpu_ipc_prof_post_begin(tp);

    return uccl_gpu_ipc_prof_post_end(tp, t0, post_rma((ipc_ep_t *)base, req));
}

uccl_status_t uccl_gpu_ipc_post_read(uccl_tp_ep_t *base, uccl_req_t *req)
{
    ipc_tp_t *tp = ((ipc_ep_t *)base)->tp;
    uint64_t t0 = uccl_gpu_ipc_prof_post_begin(tp);

    return uccl_gpu_ipc_prof_post_end(tp, t0, post_rma((ipc_ep_t *)base, req));
}

void uccl_gpu_ipc_on_grant(ipc_ep_t *ep, const msg_grant_t *m)
{
    uccl_status_t st = m->status == UCCL_OK ? uccl_gpu_ipc_grant_add(ep, m) : UCCL_ERR_REMOTE_ACCESS;
    ipc_grant_t *g = st == UCCL_OK ? uccl_gpu_ipc_grant_find(ep, m->region_id) : NULL;
    uccl_list_t *pos, *tmp;

    if (st != UCCL_OK && uccl_hmap_get(&ep->ptr_asked, m->region_id) != NULL)
        uccl_gpu_ipc_ptr_refused(ep, m->region_id);
    uccl_list_for_each_safe(pos, tmp, &ep->grant_wait) {
        uccl_req_t *req = uccl_container_of(pos, uccl_req_t, tp_link);
        uccl_status_t rst = st;

        if (req->remote.region_id != m->region_id)
            continue;
        uccl_list_del(&req->tp_link);
        if (rst == UCCL_OK)
            rst = rma_local(ep, req, g);
        if (rst != UCCL_OK)
            uccl_req_complete(req, rst == UCCL_ERR_PEER_FAILED ? rst : UCCL_ERR_REMOTE_ACCESS, 0);
    }
}

/* Target side of a copy to/from one of our host regions. */
void uccl_gpu_ipc_on_tgt_op(ipc_ep_t *ep, const msg_tgt_op_t *m, const msg_seg_t *seg)
{
    uccl_engine_t *engine = ep->tp->base.engine;
    ipc_seg_t mine, peer[UCCL_IOV_MAX];
    uccl_region_t *region;
    ipc_op_t *op = NULL;
    int npeer = 0;
    uccl_status_t st = uccl_engine_region_find(engine, m->region_id, m->addr, m->len, &region);

    if (st == UCCL_OK)
        st = uccl_gpu_ipc_peer_plan(ep, seg, m->nseg, 0, peer, &npeer);
    if (st == UCCL_OK && (op = uccl_gpu_ipc_op_new(OP_TGT, NULL)) == NULL)
        st = UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK) {
        op->memh = uccl_region_memh(region, &ep->tp->base);
        op->seq = m->seq;
        op->has_notif = m->has_notif != 0;
        op->notif = m->notif;
        mine.ptr = (char *)(uintptr_t)m->addr;
        mine.len = m->len;
        if (m->op == UCCL_OP_WRITE)
            st = uccl_gpu_ipc_op_start(ep, op, &mine, 1, peer, npeer, m->len);
        else
            st = uccl_gpu_ipc_op_start(ep, op, peer, npeer, &mine, 1, m->len);
    }
    if (st != UCCL_OK) {
        free(op);
        if (!ep->failed)
            uccl_gpu_ipc_fin_send(ep, IPC_MSG_TGT_DONE, m->seq,
                     st == UCCL_ERR_REMOTE_ACCESS ? st : UCCL_ERR_TRANSPORT, 0);
    }
}

/* libfabric connections: the peer endpoint in the address vector (shared by
 * the connections to it), the control buffers and their receives, the
 * wiring info (connection ids), and teardown: an endpoint whose operations
 * are still posted waits as a zombie until their completions come back. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* ep_pack: version(1) rndv version(1) pad(2) id(4) */
#define OFI_EP_INFO_LEN 12

static uccl_status_t ofi_peer_get(tp_ofi_t *tp, const uint8_t *name, size_t len, ofi_peer_t **out)
{
    uccl_list_t *pos;
    ofi_peer_t *p;
    int rc;

    uccl_list_for_each(pos, &tp->peers) {
        p = uccl_container_of(pos, ofi_peer_t, link);
        if (p->len == len && memcmp(p->name, name, len) == 0) {
            p->refs++;
            *out = p;
            return UCCL_OK;
        }
    }
    if (len > OFI_NAME_MAX)
        return UCCL_ERR_BAD_ADDRESS;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    memcpy(p->name, name, len);
    p->len = len;
    rc = fi_av_insert(tp->av, p->name, 1, &p->addr, 0, NULL);
    if (rc != 1) {
        uccl_error("ofi (%s): fi_av_insert of the peer's endpoint: %s", tp->prov,
                   rc < 0 ? fi_strerror(-rc) : "address refused");
        free(p);
        return UCCL_ERR_UNREACHABLE;
    }
    p->refs = 1;
    uccl_list_push_back(&tp->peers, &p->link);
    *out = p;
    return UCCL_OK;
}

static void ofi_peer_put(tp_ofi_t *tp, ofi_peer_t *p)
{
    int rc;

    if (p == NULL || --p->refs > 0)
        return;
    uccl_list_del(&p->link);
    rc = fi_av_remove(tp->av, &p->addr, 1, 0);
    if (rc != 0)
        uccl_debug("ofi (%s): fi_av_remove: %s", tp->prov, fi_strerror(-rc));
    free(p);
}

/* The peer's engine address entry: version(1) addr format(1) provider
 * length(1) name length(1) provider name, endpoint name (ofi_glue.c). */
static uccl_status_t ofi_peer_name(const uccl_tp_peer_t *peer, const uint8_t **name, size_t *len)
{
    const uint8_t *p = peer->addr;

    if (p == NULL || peer->addr_len < 4 || p[0] != OFI_WIRE_VERSION ||
        peer->addr_len != 4 + (size_t)p[2] + p[3])
        return UCCL_ERR_BAD_ADDRESS;
    *name = p + 4 + p[2];
    *len = p[3];
    return UCCL_OK;
}

ofi_op_t *uccl_ofi_op_get(tp_ofi_t *tp)
{
    ofi_op_t *op;

    if (uccl_list_empty(&tp->op_free))
        return calloc(1, sizeof(ofi_op_t));
    op = uccl_container_of(uccl_list_pop_front(&tp->op_free), ofi_op_t, link);
    tp->nop_free--;
    memset(op, 0, sizeof(*op));
    return op;
}

void uccl_ofi_op_put(tp_ofi_t *tp, ofi_op_t *op)
{
    if (tp->nop_free >= OFI_OP_CACHE) {
        free(op);
        return;
    }
    uccl_list_push_front(&tp->op_free, &op->link);
    tp->nop_free++;
}

void uccl_ofi_op_cache_free(tp_ofi_t *tp)
{
    while (!uccl_list_empty(&tp->op_free))
        free(uccl_container_of(uccl_list_pop_front(&tp->op_free), ofi_op_t, link));
    tp->nop_free = 0;
}

static void ofi_ep_free(tp_ofi_ep_t *ep)
{
    /* data operations never completed (engine close): their bounces and
     * stage buffers go back */
    while (ep->data_ops.next != NULL && !uccl_list_empty(&ep->data_ops)) {
        ofi_op_t *op = uccl_container_of(ep->data_ops.next, ofi_op_t, link);

        uccl_list_del(&op->link);
        if (op->bounce != NULL)
            uccl_ofi_bounce_put(ep->tp, op->bounce);
        if (op->sbuf != NULL) {
            uccl_stage_buf_put(ep->tp->stage, op->sbuf);
            ep->tp->staged_ops--;
        }
        free(op);
    }
    if (ep->bufs_mr != NULL)
        fi_close(&ep->bufs_mr->fid);
    uccl_ofi_direct_free(ep);
    ofi_peer_put(ep->tp, ep->peer);
    free(ep->bufs);
    free(ep->ctrl_ops);
    free(ep->retry_send);
    free(ep->retry_recv);
    free(ep->retry_len);
    uccl_rndv_fini(&ep->rndv);
    free(ep);
}

static uccl_status_t ofi_ep_alloc_bufs(tp_ofi_ep_t *ep)
{
    tp_ofi_t *tp = ep->tp;
    int rx = tp->cfg.rx_depth, tx = tp->cfg.tx_depth;
    size_t size = (size_t)(rx + tx) * uccl_rndv_slot_size(tp->cfg.eager);
    uccl_rndv_params_t params = {.eager = tp->cfg.eager, .rx_depth = rx, .tx_depth = tx};

    ep->bufs = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    ep->ctrl_ops = calloc((size_t)(rx + tx), sizeof(*ep->ctrl_ops));
    ep->retry_send = calloc((size_t)tx, sizeof(int));
    ep->retry_len = calloc((size_t)tx, sizeof(size_t));
    ep->retry_recv = calloc((size_t)rx, sizeof(int));
    if (ep->bufs == NULL || ep->ctrl_ops == NULL || ep->retry_send == NULL ||
        ep->retry_len == NULL || ep->retry_recv == NULL)
        return UCCL_ERR_NO_MEMORY;
    for (int i = 0; i < rx + tx; i++) {
        ep->ctrl_ops[i].kind = i < rx ? OFI_OP_CTRL_RECV : OFI_OP_CTRL_SEND;
        ep->ctrl_ops[i].index = i < rx ? i : i - rx;
        ep->ctrl_ops[i].ep = ep;
        uccl_list_init(&ep->ctrl_ops[i].link);
    }
    params.bufs = ep->bufs;
    if (uccl_rndv_init(&ep->rndv, &uccl_ofi_rndv_ops, &ep->base, &params) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    ep->rndv.pull = tp->pull;
    /* with exact tags (shm) sends above UCCL_OFI_EAGER up to the inject
     * size take the tagged rendezvous too: ofi_tmsg.c, uccl_ofi_tmsg_ok */
    ep->rndv.tmsg = tp->tmsg || tp->direct_min > tp->cfg.eager;
    if (tp->mr_mode & FI_MR_LOCAL)
        return uccl_ofi_reg_buf(tp, ep->bufs, size, &ep->bufs_mr, &ep->bufs_desc);
    return UCCL_OK;
}

/* ep's id finds nothing from now on (its control messages and immediates
 * still in flight are dropped as for a gone connection). */
static void ofi_ep_forget(tp_ofi_ep_t *ep)
{
    uccl_idmap_remove(&ep->tp->ep_ids, ep->id ^ ep->tp->ep_id_salt);
}

uccl_status_t uccl_ofi_ep_create(uccl_tp_t *base, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                 bool is_initiator, uccl_tp_ep_t **out)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    tp_ofi_ep_t *ep = calloc(1, sizeof(*ep));
    const uint8_t *name;
    size_t name_len;
    uint64_t id;
    uccl_status_t st;

    (void)is_initiator;
    if (ep == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->tp = tp;
    ep->base.conn = conn;
    if (uccl_idmap_insert(&tp->ep_ids, ep, &id) != UCCL_OK) {
        free(ep);
        return UCCL_ERR_NO_MEMORY;
    }
    ep->id = (uint32_t)id ^ tp->ep_id_salt;
    uccl_list_init(&ep->link);
    uccl_list_init(&ep->data_pending);
    uccl_list_init(&ep->inflight);
    uccl_list_init(&ep->data_ops);
    uccl_list_init(&ep->dpending);
    st = ofi_peer_name(peer, &name, &name_len);
    if (st == UCCL_OK)
        st = ofi_peer_get(tp, name, name_len, &ep->peer);
    if (st == UCCL_OK)
        st = ofi_ep_alloc_bufs(ep);
    for (int i = 0; i < tp->cfg.rx_depth && st == UCCL_OK; i++)
        st = uccl_ofi_post_ctrl_recv(ep, i);
    if (st != UCCL_OK) {
        ofi_ep_forget(ep);
        if (ep->posted > 0) { /* receives posted: cancelled, freed once they come back */
            ep->dead = true;
            for (int i = 0; i < tp->cfg.rx_depth; i++)
                fi_cancel(&tp->ep->fid, &ep->ctrl_ops[i].ctx);
            uccl_list_push_back(&tp->zombies, &ep->link);
            return st;
        }
        ofi_ep_free(ep);
        return st;
    }
    uccl_list_push_back(&tp->eps, &ep->link);
    *out = &ep->base;
    return UCCL_OK;
}

uccl_status_t uccl_ofi_ep_pack(uccl_tp_ep_t *base, void *buf, size_t *len)
{
    tp_ofi_ep_t *ep = tp_ofi_ep(base);
    uint8_t *p = buf;

    if (*len < OFI_EP_INFO_LEN) {
        *len = OFI_EP_INFO_LEN;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    memset(p, 0, OFI_EP_INFO_LEN);
    p[0] = OFI_WIRE_VERSION;
    p[1] = UCCL_RNDV_WIRE_VERSION;
    uccl_put_u32(p + 4, ep->id);
    uccl_put_u32(p + 8, (uint32_t)ep->tp->direct_max); /* 0: no direct sends to us */
    *len = OFI_EP_INFO_LEN;
    return UCCL_OK;
}

uccl_status_t uccl_ofi_ep_connect(uccl_tp_ep_t *base, const void *peer_info, size_t len)
{
    tp_ofi_ep_t *ep = tp_ofi_ep(base);
    const uint8_t *p = peer_info;
    uccl_status_t st;

    if (len != OFI_EP_INFO_LEN || p[0] != OFI_WIRE_VERSION || p[1] != UCCL_RNDV_WIRE_VERSION) {
        uccl_error("ofi: malformed wiring info from peer (%zu bytes, version %u)", len,
                   len > 0 ? p[0] : 0);
        return UCCL_ERR_VERSION;
    }
    ep->peer_id = uccl_get_u32(p + 4);
    ep->peer_direct_max = uccl_get_u32(p + 8);
    ep->tp->direct_peers |= ep->peer_direct_max > 0;
    st = uccl_ofi_direct_setup(ep);
    if (st != UCCL_OK)
        return st;
    ep->connected = true;
    return UCCL_OK;
}

tp_ofi_ep_t *uccl_ofi_ep_by_id(tp_ofi_t *tp, uint32_t id)
{
    return uccl_idmap_lookup(&tp->ep_ids, id ^ tp->ep_id_salt);
}

void uccl_ofi_ep_op_done(tp_ofi_ep_t *ep)
{
    if (--ep->posted > 0 || !ep->dead)
        return;
    uccl_list_del(&ep->link);
    ofi_ep_free(ep);
}

/* Engine close (all): the fabric endpoint is closed, nothing comes back. */
void uccl_ofi_zombies_free(tp_ofi_t *tp, bool all)
{
    uccl_list_t *pos, *tmp;

    uccl_list_for_each_safe(pos, tmp, &tp->zombies) {
        tp_ofi_ep_t *ep = uccl_container_of(pos, tp_ofi_ep_t, link);
        if (all || ep->posted == 0) {
            uccl_list_del(&ep->link);
            ofi_ep_free(ep);
        }
    }
}

void uccl_ofi_ep_destroy(uccl_tp_ep_t *base)
{
    tp_ofi_ep_t *ep = tp_ofi_ep(base);
    tp_ofi_t *tp = ep->tp;
    uccl_status_t reason = uccl_ofi_conn_state(ep);
    uccl_list_t *pos;

    if (reason == UCCL_OK)
        reason = UCCL_ERR_CANCELED;
    ofi_ep_forget(ep);
    uccl_list_del(&ep->link);
    uccl_list_for_each(pos, &ep->data_ops) { /* tagged receives (into user memory) */
        ofi_op_t *op = uccl_container_of(pos, ofi_op_t, link);

        if (op->req != NULL && op->req->op == UCCL_OP_RECV &&
            op->req->tp_data[UCCL_RNDV_RD_STATE] == UCCL_RNDV_RS_TMSG)
            fi_cancel(&tp->ep->fid, &op->ctx);
    }
    uccl_rndv_release(&ep->rndv, reason);
    uccl_ofi_direct_cancel(ep, reason);
    uccl_rndv_fail_reqs(&ep->rndv, &ep->data_pending, reason);
    uccl_rndv_fail_reqs(&ep->rndv, &ep->inflight, reason);
    uccl_list_for_each(pos, &ep->data_ops)
        uccl_container_of(pos, ofi_op_t, link)->req = NULL;
    if (ep->posted == 0) {
        ofi_ep_free(ep);
        return;
    }
    /* receives still posted are cancelled (their completions come back as
     * FI_ECANCELED); sends and writes finish on their own */
    ep->dead = true;
    for (int i = 0; i < tp->cfg.rx_depth; i++)
        fi_cancel(&tp->ep->fid, &ep->ctrl_ops[i].ctx);
    uccl_list_push_back(&tp->zombies, &ep->link);
}

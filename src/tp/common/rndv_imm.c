/* The target side of writes closed by immediates (rndv.h): notified writes
 * whose value or parts are still on their way, the parts of a rendezvous
 * write that complete its receive; and granted windows (GRANT, chunk
 * immediates) on both sides; the sender's close of a write whose immediates
 * were given up (uccl_rndv_write_close). */
#include <stdlib.h>

#include "rndv.h"

/* A notified write whose value or immediates are still on their way. */
typedef struct rndv_notif {
    uccl_list_t link;
    uint32_t id;
    int nparts; /* 0 = no immediate seen yet */
    int got;
    bool have_value;
    bool closed; /* its data all landed (a closing NOTIFY): count no immediates */
    uint64_t value;
} rndv_notif_t;

static rndv_notif_t *rndv_notif_get(uccl_rndv_t *r, uint32_t id)
{
    rndv_notif_t *n = uccl_hmap_get(&r->notif_ids, id);

    if (n != NULL)
        return n;
    n = calloc(1, sizeof(*n));
    if (n == NULL || uccl_hmap_put(&r->notif_ids, id, n) != UCCL_OK) {
        free(n);
        uccl_error("%s: out of memory tracking notification %u; connection fails",
                   r->ep->tp->ops->name, id);
        uccl_conn_fail(r->ep->conn, UCCL_ERR_NO_MEMORY);
        return NULL;
    }
    n->id = id;
    uccl_list_push_back(&r->notif_wait, &n->link);
    return n;
}

static void rndv_notif_push(uccl_rndv_t *r, uint64_t value)
{
    if (uccl_conn_notif_push(r->ep->conn, value) != UCCL_OK)
        uccl_error("%s: notification %llu lost: out of memory", r->ep->tp->ops->name,
                   (unsigned long long)value);
}

/* Value and every immediate of a notified write are here: deliver it. */
static void rndv_notif_check(uccl_rndv_t *r, rndv_notif_t *n)
{
    if (!n->have_value || (!n->closed && (n->nparts == 0 || n->got < n->nparts)))
        return;
    uccl_hmap_del(&r->notif_ids, n->id);
    uccl_list_del(&n->link);
    rndv_notif_push(r, n->value);
    free(n);
}

void uccl_rndv_notif_value(uccl_rndv_t *r, uint64_t id, uint64_t value, bool closed)
{
    rndv_notif_t *n = rndv_notif_get(r, (uint32_t)(id & UCCL_RNDV_IMM_ID_MASK));

    if (n == NULL)
        return;
    n->value = value;
    n->have_value = true;
    n->closed |= closed;
    rndv_notif_check(r, n);
}

/* Sender: req's data landed but its immediates were given up (rndv.h). */
void uccl_rndv_write_close(uccl_rndv_t *r, uccl_req_t *req)
{
    uccl_status_t st;

    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_CTRL;
    if (req->op == UCCL_OP_SEND) {
        st = uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_FIN, UCCL_OK, req->tp_data[UCCL_RNDV_RD_PEER_ID],
                                 req->len, 0, req);
    } else {
        /* the notify id its value went ahead with, if it got that far: the
         * target closes that one; else a new one */
        if (!(req->tp_data[UCCL_RNDV_RD_ID] & UCCL_RNDV_NOTIF_ID))
            req->tp_data[UCCL_RNDV_RD_ID] = r->next_notif_id++;
        st = uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_NOTIFY, UCCL_OK,
                                 req->tp_data[UCCL_RNDV_RD_ID] & UCCL_RNDV_IMM_ID_MASK, req->notif,
                                 UCCL_RNDV_NOTIFY_CLOSED, req);
    }
    if (st != UCCL_OK)
        r->ops->finish(r, req, st, 0);
}

/* One immediate of a rendezvous send: the receive completes with the last. */
static void rndv_recv_part(uccl_rndv_t *r, uint32_t id, int nparts)
{
    uccl_req_t *req = uccl_rndv_imm_find(r, id, UCCL_RNDV_RS_RECV_WAIT_FIN);

    if (req == NULL) {
        uccl_error("%s: immediate for unknown receive %u; connection fails", r->ep->tp->ops->name,
                   id);
        uccl_conn_fail(r->ep->conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if ((int)++req->tp_data[UCCL_RNDV_RD_PARTS_GOT] < nparts)
        return;
    uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
    r->ops->finish(r, req, UCCL_OK, req->tp_data[UCCL_RNDV_RD_MSG_LEN]);
}

/* A granted window of a receive landed. */
static void rndv_recv_chunk(uccl_rndv_t *r, uint32_t id, int slot)
{
    uccl_req_t *req = uccl_rndv_imm_find(r, id, UCCL_RNDV_RS_RECV_WAIT_FIN);

    if (req == NULL || r->ops->sink_landed == NULL) {
        uccl_error("%s: chunk immediate for unknown receive %u; connection fails",
                   r->ep->tp->ops->name, id);
        uccl_conn_fail(r->ep->conn, UCCL_ERR_TRANSPORT);
        return;
    }
    r->ops->sink_landed(r, req, slot);
}

void uccl_rndv_imm_arrived(uccl_rndv_t *r, uint32_t imm)
{
    uccl_rndv_imm_fields_t f;
    rndv_notif_t *n;

    uccl_rndv_imm_parse(imm, &f);
    switch (f.kind) {
    case UCCL_RNDV_IMM_NOTIFY_SMALL: rndv_notif_push(r, f.value); return;
    case UCCL_RNDV_IMM_RNDV: rndv_recv_part(r, f.id, f.nparts); return;
    case UCCL_RNDV_IMM_CHUNK: rndv_recv_chunk(r, f.id, f.nparts - 1); return;
    case UCCL_RNDV_IMM_NOTIFY:
        n = rndv_notif_get(r, f.id);
        if (n == NULL)
            return;
        n->nparts = f.nparts;
        n->got++;
        rndv_notif_check(r, n);
        return;
    }
    uccl_error("%s: malformed immediate 0x%x; connection fails", r->ep->tp->ops->name, imm);
    uccl_conn_fail(r->ep->conn, UCCL_ERR_TRANSPORT);
}

/* ------------------------------------------------------------------ granted windows */

/* A staged receive matched to an RTS: its data comes through windows the
 * transport grants (sink_start calls uccl_rndv_grant), no CTS. */
void uccl_rndv_grant_start(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t send_id)
{
    uccl_status_t st = r->ops->mem_stage(r, req, len, false);

    if (st == UCCL_OK)
        st = uccl_idmap_insert(&r->ids, req, &req->tp_data[UCCL_RNDV_RD_ID]);
    if (st != UCCL_OK) {
        uccl_rndv_recv_refuse(r, req, send_id, st);
        return;
    }
    req->tp_data[UCCL_RNDV_RD_MSG_LEN] = len;
    req->tp_data[UCCL_RNDV_RD_PEER_ID] = send_id;
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_RECV_WAIT_FIN;
    uccl_list_push_back(&r->recv_wait_fin, &req->tp_link);
    st = r->ops->sink_start(r, req, len);
    if (st != UCCL_OK) {
        uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
        r->ops->finish(r, req, st, 0);
    }
}

void uccl_rndv_sink_done(uccl_rndv_t *r, uccl_req_t *req, uccl_status_t st)
{
    uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
    r->ops->finish(r, req, st, st == UCCL_OK ? req->tp_data[UCCL_RNDV_RD_MSG_LEN] : 0);
}

void uccl_rndv_forget(uccl_rndv_t *r, uccl_req_t *req)
{
    if (uccl_idmap_lookup(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]) == req)
        uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
}

/* A window the receiver granted for one of our rendezvous sends. A send
 * that already failed (FIN on its way) or finished ignores it. */
/* (slot and seg as uccl_rndv_ctrl_parse checked them) */
void uccl_rndv_grant_arrived(uccl_rndv_t *r, uint64_t send_id, uint64_t recv_id, uint64_t slot,
                               uint64_t off, const uccl_rndv_seg_t *seg)
{
    uccl_req_t *req = uccl_idmap_lookup(&r->ids, send_id);
    bool first;
    uccl_status_t st;

    if (r->ops->grant == NULL) {
        uccl_error("%s: malformed GRANT (send id %llu, slot %llu)", r->ep->tp->ops->name,
                   (unsigned long long)send_id, (unsigned long long)slot);
        uccl_conn_fail(r->ep->conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (req == NULL || req->op != UCCL_OP_SEND)
        return;
    first = req->tp_data[UCCL_RNDV_RD_STATE] == UCCL_RNDV_RS_WAIT_CTS;
    if (!first && (req->tp_data[UCCL_RNDV_RD_STATE] != UCCL_RNDV_RS_DATA ||
                   req->tp_data[UCCL_RNDV_RD_PEER_ID] != recv_id))
        return;
    if (first) {
        uccl_list_del(&req->tp_link);
        req->tp_data[UCCL_RNDV_RD_PEER_ID] = recv_id;
    }
    st = r->ops->grant(r, req, first, (int)slot, off, seg);
    if (st == UCCL_OK)
        return;
    if (first) {
        uccl_idmap_remove(&r->ids, send_id);
        r->ops->finish(r, req, st, 0);
        return;
    }
    uccl_error("%s: GRANT out of order (send id %llu, offset %llu); connection fails",
               r->ep->tp->ops->name, (unsigned long long)send_id, (unsigned long long)off);
    uccl_conn_fail(r->ep->conn, UCCL_ERR_TRANSPORT);
}

uint32_t uccl_rndv_imm_chunk(const uccl_req_t *req, int slot)
{
    return uccl_rndv_imm_pack(UCCL_RNDV_IMM_CHUNK, (uint32_t)slot,
                              (uint32_t)req->tp_data[UCCL_RNDV_RD_PEER_ID]);
}

void uccl_rndv_notif_release(uccl_rndv_t *r)
{
    while (!uccl_list_empty(&r->notif_wait))
        free(uccl_container_of(uccl_list_pop_front(&r->notif_wait), rndv_notif_t, link));
    uccl_hmap_fini(&r->notif_ids);
}

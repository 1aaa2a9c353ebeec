/* The control channel of the shared RDMA message protocol (rndv.h): send
 * slots, the ordered queue of messages waiting for a slot or a credit, and
 * the completion of control sends. */
#include <stdlib.h>
#include <string.h>

#include "rndv.h"

/* A control message waiting for a send slot or a send credit. */
struct uccl_rndv_out {
    uccl_list_t link;
    uccl_req_t *req;
    size_t len;
    uint8_t buf[];
};

static void rndv_ctrl_post(uccl_rndv_t *r, int slot, size_t len, uccl_req_t *req)
{
    r->slot_req[slot] = req; /* a failed post leaves it to the teardown */
    r->ops->ctrl_post(r, slot, len);
}

/* Room for one message: a send slot when nothing waits before it, else a
 * queued copy (order on the control channel is the matching order). */
uint8_t *uccl_rndv_ctrl_begin(uccl_rndv_t *r, int *slot, uccl_rndv_out_t **out)
{
    *out = NULL;
    if (uccl_list_empty(&r->ctrl_pending) && r->nfree > 0 && r->ops->ctrl_room(r) &&
        uccl_conn_status(r->ep->conn) == UCCL_OK) {
        *slot = r->free_slots[--r->nfree];
        return uccl_rndv_send_buf(r, *slot);
    }
    *out = malloc(sizeof(**out) + r->slot_size);
    if (*out == NULL)
        return NULL;
    *slot = -1;
    return (*out)->buf;
}

void uccl_rndv_ctrl_commit(uccl_rndv_t *r, int slot, uccl_rndv_out_t *out, size_t len,
                           uccl_req_t *req)
{
    if (out != NULL) {
        out->len = len;
        out->req = req;
        uccl_list_push_back(&r->ctrl_pending, &out->link);
        return;
    }
    rndv_ctrl_post(r, slot, len, req);
}

/* Give back what uccl_rndv_ctrl_begin handed out for a message not sent. */
void uccl_rndv_ctrl_abort(uccl_rndv_t *r, int slot, uccl_rndv_out_t *out)
{
    if (out != NULL)
        free(out);
    else
        r->free_slots[r->nfree++] = slot;
}

void uccl_rndv_ctrl_flush(uccl_rndv_t *r)
{
    while (!uccl_list_empty(&r->ctrl_pending) && r->nfree > 0 && r->ops->ctrl_room(r)) {
        uccl_rndv_out_t *out =
            uccl_container_of(uccl_list_pop_front(&r->ctrl_pending), uccl_rndv_out_t, link);
        int slot = r->free_slots[--r->nfree];

        memcpy(uccl_rndv_send_buf(r, slot), out->buf, out->len);
        rndv_ctrl_post(r, slot, out->len, out->req);
        free(out);
    }
}

uccl_status_t uccl_rndv_ctrl_send(uccl_rndv_t *r, int type, uccl_status_t status, uint64_t a,
                                  uint64_t b, uint64_t c, uccl_req_t *req)
{
    uccl_rndv_out_t *out;
    int slot;
    uint8_t *p = uccl_rndv_ctrl_begin(r, &slot, &out);

    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_rndv_hdr_put(p, type, status, a, b, c, 0);
    uccl_rndv_ctrl_commit(r, slot, out, UCCL_RNDV_HDR_SIZE, req);
    return UCCL_OK;
}

void uccl_rndv_ctrl_sent(uccl_rndv_t *r, int slot, uccl_status_t st)
{
    uccl_req_t *req;

    if (slot < 0 || slot >= r->tx_depth)
        return;
    req = r->slot_req[slot];
    r->slot_req[slot] = NULL;
    r->free_slots[r->nfree++] = slot;
    if (req == NULL)
        return;
    if (req->tp_data[UCCL_RNDV_RD_STATE] == UCCL_RNDV_RS_DATA) { /* a notified write's value */
        r->ops->write_part_done(r, req, st);
        return;
    }
    if (st == UCCL_OK)
        st = uccl_rndv_req_err(req);
    r->ops->finish(r, req, st, st == UCCL_OK ? req->len : 0);
}

/* Teardown: control sends in flight or queued fail with reason. */
void uccl_rndv_ctrl_release(uccl_rndv_t *r, uccl_status_t reason)
{
    for (int i = 0; r->slot_req != NULL && i < r->tx_depth; i++) {
        uccl_req_t *req = r->slot_req[i];

        r->slot_req[i] = NULL;
        if (req != NULL && !req->done)
            r->ops->finish(r, req, reason, 0);
    }
    while (!uccl_list_empty(&r->ctrl_pending)) {
        uccl_rndv_out_t *out =
            uccl_container_of(uccl_list_pop_front(&r->ctrl_pending), uccl_rndv_out_t, link);

        if (out->req != NULL && !out->req->done)
            r->ops->finish(r, out->req, reason, 0);
        free(out);
    }
}

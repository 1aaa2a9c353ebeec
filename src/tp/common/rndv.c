/* The shared RDMA message protocol (rndv.h): eager sends, rendezvous (RTS, CTS with the
 * receive buffer, writes closed by immediates, FIN on failure), notified
 * writes, the one parser of control messages, and teardown. The control
 * channel itself (send slots, ordered queue) is rndv_ctrl.c. */
#include <stdlib.h>
#include <string.h>

#include "rndv.h"
#include "rndv_stage.h"

/* A message held by the core's matching until a receive takes it. */
typedef struct rndv_unexp {
    uccl_list_t link; /* r->unexpected, to free at teardown */
    uccl_msg_t msg;
    bool rndv;
    uint64_t send_id;
    int nseg; /* RTS_PULL: the sender's segments, in data; RNDV_NSEG_TMSG: an RTS_TMSG */
    _Alignas(uccl_rndv_seg_t) uint8_t data[]; /* EAGER payload or segments */
} rndv_unexp_t;

#define RNDV_NSEG_TMSG (-1) /* an RTS_TMSG: send_id is its tagged message's id */

static uccl_conn_t *rndv_conn(const uccl_rndv_t *r)
{
    return r->ep->conn;
}

/* Segments on the wire; returns the byte after them. */
static uint8_t *rndv_put_segs(uint8_t *s, const uccl_rndv_seg_t *segs, int nseg)
{
    for (int i = 0; i < nseg; i++, s += UCCL_RNDV_SEG_SIZE) {
        uccl_put_u64(s, segs[i].addr);
        uccl_put_u64(s + 8, segs[i].key);
        uccl_put_u64(s + 16, segs[i].len);
    }
    return s;
}

static void rndv_put_hdr(uint8_t *p, int type, uccl_status_t status, uint64_t a, uint64_t b,
                         uint64_t c)
{
    uccl_rndv_hdr_put(p, type, status, a, b, c, 0);
}

/* EAGER and RTS carry the message number after the common header fields. */
static void rndv_put_msg_hdr(uint8_t *p, int type, const uccl_req_t *req, uint64_t c)
{
    uccl_rndv_hdr_put(p, type, UCCL_OK, req->tag, req->len, c, req->msg_seq);
}

/* Copy between req's pieces and flat: the transport's hook, else the
 * common one (GPU pieces through the GPU layer). */
static uccl_status_t rndv_mem_copy(uccl_rndv_t *r, uccl_req_t *req, void *flat, size_t len,
                                   bool to_iov)
{
    if (r->ops->mem_copy != NULL)
        return r->ops->mem_copy(r, req, flat, len, to_iov);
    return uccl_rndv_iov_copy(req, flat, len, to_iov);
}

/* ------------------------------------------------------------------ setup */

size_t uccl_rndv_slot_size(size_t eager)
{
    size_t cts_max = UCCL_RNDV_HDR_SIZE + (size_t)UCCL_IOV_MAX * UCCL_RNDV_SEG_SIZE;
    size_t size = eager + UCCL_RNDV_HDR_SIZE;

    if (size < cts_max)
        size = cts_max;
    return (size + 63) & ~(size_t)63;
}

uccl_status_t uccl_rndv_init(uccl_rndv_t *r, const uccl_rndv_ops_t *ops, uccl_tp_ep_t *ep,
                             const uccl_rndv_params_t *params)
{
    memset(r, 0, sizeof(*r));
    r->ops = ops;
    r->ep = ep;
    r->bufs = params->bufs;
    r->eager = params->eager;
    r->slot_size = uccl_rndv_slot_size(params->eager);
    r->rx_depth = params->rx_depth;
    r->tx_depth = params->tx_depth;
    uccl_list_init(&r->ctrl_pending);
    uccl_list_init(&r->rndv_wait);
    uccl_list_init(&r->recv_wait_fin);
    uccl_list_init(&r->unexpected);
    uccl_list_init(&r->notif_wait);
    uccl_hmap_init(&r->notif_ids);
    uccl_idmap_init(&r->ids, UCCL_RNDV_ID_BITS, UCCL_RNDV_ID_INDEX_BITS);
    r->free_slots = calloc((size_t)r->tx_depth, sizeof(int));
    r->slot_req = calloc((size_t)r->tx_depth, sizeof(uccl_req_t *));
    if (r->free_slots == NULL || r->slot_req == NULL) {
        uccl_rndv_fini(r);
        return UCCL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < r->tx_depth; i++)
        r->free_slots[r->nfree++] = r->tx_depth - 1 - i;
    return UCCL_OK;
}

void uccl_rndv_fini(uccl_rndv_t *r)
{
    free(r->free_slots);
    free(r->slot_req);
    uccl_idmap_fini(&r->ids);
    uccl_hmap_fini(&r->notif_ids);
    r->free_slots = NULL;
    r->slot_req = NULL;
}

/* ------------------------------------------------------------------ writes */

/* Data of a request has landed (or failed). Success was already told to the
 * peer by the immediates; a failed rendezvous send still needs a FIN so that
 * the receive does not wait for immediates that will never come. */
void uccl_rndv_write_done(uccl_rndv_t *r, uccl_req_t *req)
{
    uccl_status_t err = uccl_rndv_req_err(req), st = UCCL_OK;

    if (req->op == UCCL_OP_RECV) { /* a pulled message read */
        uccl_rndv_pull_done(r, req);
        return;
    }
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_CTRL;
    if (req->op == UCCL_OP_SEND && err != UCCL_OK)
        st = uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_FIN, err, req->tp_data[UCCL_RNDV_RD_PEER_ID], 0,
                                 0, req);
    else
        r->ops->finish(r, req, err, err == UCCL_OK ? req->len : 0);
    if (st != UCCL_OK)
        r->ops->finish(r, req, st, 0);
}

bool uccl_rndv_needs_imm(const uccl_req_t *req)
{
    return req->op == UCCL_OP_SEND || (req->op == UCCL_OP_WRITE && req->has_notif);
}

static bool rndv_notif_small(const uccl_req_t *req, int nparts)
{
    return nparts == 1 && req->notif < UCCL_RNDV_IMM_SMALL_MAX;
}

/* The last chunk of req is being built and will need nparts immediates: a
 * value the immediate cannot carry goes ahead on the control channel, tagged
 * with a notify id that the immediates repeat. Sent only now, when nothing
 * but a failing link (and with it the connection) can keep the immediates
 * away. The message counts as one of req's parts, so that req completes only
 * once the value is there too: a write_notify that was waited for is then
 * delivered before any later one. */
uccl_status_t uccl_rndv_imm_begin(uccl_rndv_t *r, uccl_req_t *req, int nparts, int *extra_parts)
{
    uccl_status_t st;

    *extra_parts = 0;
    if (req->op != UCCL_OP_WRITE || rndv_notif_small(req, nparts))
        return UCCL_OK;
    req->tp_data[UCCL_RNDV_RD_ID] = (r->next_notif_id++ & UCCL_RNDV_IMM_ID_MASK) | UCCL_RNDV_NOTIF_ID;
    st = uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_NOTIFY, UCCL_OK,
                             req->tp_data[UCCL_RNDV_RD_ID] & UCCL_RNDV_IMM_ID_MASK, req->notif, 0, req);
    if (st == UCCL_OK)
        *extra_parts = 1;
    return st;
}

uint32_t uccl_rndv_imm(const uccl_req_t *req, int nparts)
{
    uint32_t kind = UCCL_RNDV_IMM_RNDV, id = (uint32_t)req->tp_data[UCCL_RNDV_RD_PEER_ID];

    if (req->op == UCCL_OP_WRITE && rndv_notif_small(req, nparts))
        return (uint32_t)UCCL_RNDV_IMM_NOTIFY_SMALL << 30 | (uint32_t)req->notif;
    if (req->op == UCCL_OP_WRITE) {
        kind = UCCL_RNDV_IMM_NOTIFY;
        id = (uint32_t)req->tp_data[UCCL_RNDV_RD_ID];
    }
    return uccl_rndv_imm_pack(kind, (uint32_t)(nparts - 1), id);
}

/* ------------------------------------------------------------------ sending */

/* An RTS; with r->pull (host memory), an RTS_PULL naming req's pieces. */
static uccl_status_t rndv_post_rts(uccl_rndv_t *r, uccl_req_t *req, bool pull)
{
    uccl_rndv_seg_t segs[UCCL_IOV_MAX];
    int nseg = pull ? r->ops->mem_segs(r, req, req->len, segs) : 0;
    uccl_rndv_out_t *out;
    uint8_t *p;
    int slot;

    if (uccl_idmap_insert(&r->ids, req, &req->tp_data[UCCL_RNDV_RD_ID]) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_WAIT_CTS;
    p = uccl_rndv_ctrl_begin(r, &slot, &out);
    if (p == NULL) {
        uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
        return UCCL_ERR_NO_MEMORY;
    }
    uccl_list_push_back(&r->rndv_wait, &req->tp_link);
    rndv_put_msg_hdr(p, nseg > 0 ? UCCL_RNDV_MSG_RTS_PULL : UCCL_RNDV_MSG_RTS, req,
                     req->tp_data[UCCL_RNDV_RD_ID]);
    uccl_put_u32(p + 4, (uint32_t)nseg);
    rndv_put_segs(p + UCCL_RNDV_HDR_SIZE, segs, nseg);
    uccl_rndv_ctrl_commit(r, slot, out, UCCL_RNDV_HDR_SIZE + (size_t)nseg * UCCL_RNDV_SEG_SIZE,
                          NULL);
    return UCCL_OK;
}

/* An RTS_TMSG, then the data as the transport's tagged message (ordered
 * after it on the control channel's queue only as far as the provider
 * orders them: the receiver takes the message by id whenever it is there). */
static uccl_status_t rndv_post_rts_tmsg(uccl_rndv_t *r, uccl_req_t *req)
{
    uint64_t id = r->next_tmsg_id++ & UCCL_RNDV_TMSG_ID_MASK;
    uccl_rndv_out_t *out;
    int slot;
    uint8_t *p = uccl_rndv_ctrl_begin(r, &slot, &out);

    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    rndv_put_msg_hdr(p, UCCL_RNDV_MSG_RTS_TMSG, req, id);
    uccl_rndv_ctrl_commit(r, slot, out, UCCL_RNDV_HDR_SIZE, NULL);
    r->ops->tmsg_send(r, req, id);
    return UCCL_OK;
}

/* Rendezvous above the eager limit, and for any GPU memory the NIC reads
 * directly (the eager copy would be a CPU memcpy from the device). Staged
 * GPU memory is copied out first: a bounce for a rendezvous, the control
 * slot through the GPU layer for an eager message. */
uccl_status_t uccl_rndv_send(uccl_rndv_t *r, uccl_req_t *req)
{
    bool staged = false;
    uccl_status_t st = r->ops->mem_check(r, req, &staged);
    uccl_rndv_out_t *out;
    uint8_t *p;
    int slot;

    if (st != UCCL_OK)
        return st;
    if (req->len > r->eager || (req->gpu_caps != 0 && !staged && req->len > 0)) {
        if (r->tmsg && !staged && req->gpu_caps == 0 && r->ops->tmsg_ok(r, req))
            return rndv_post_rts_tmsg(r, req);
        if (staged)
            st = r->ops->mem_stage(r, req, req->len, true);
        if (st == UCCL_OK)
            st = rndv_post_rts(r, req, r->pull && !staged && req->gpu_caps == 0);
        if (st != UCCL_OK)
            r->ops->mem_unstage(r, req);
        return st;
    }
    p = uccl_rndv_ctrl_begin(r, &slot, &out);
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    rndv_put_msg_hdr(p, UCCL_RNDV_MSG_EAGER, req, 0);
    if (req->gpu_caps != 0)
        st = rndv_mem_copy(r, req, p + UCCL_RNDV_HDR_SIZE, req->len, false);
    else
        uccl_req_iov_copy_out(req, 0, p + UCCL_RNDV_HDR_SIZE, req->len);
    if (st != UCCL_OK) {
        uccl_rndv_ctrl_abort(r, slot, out);
        return st;
    }
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_CTRL;
    uccl_rndv_ctrl_commit(r, slot, out, UCCL_RNDV_HDR_SIZE + req->len, req);
    return UCCL_OK;
}

/* ------------------------------------------------------------------ receiving */

uccl_status_t uccl_rndv_grant(uccl_rndv_t *r, uccl_req_t *req, int slot, uint64_t off,
                              const uccl_rndv_seg_t *seg)
{
    uccl_rndv_out_t *out;
    int ctrl_slot;
    uint8_t *p = uccl_rndv_ctrl_begin(r, &ctrl_slot, &out);

    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    rndv_put_hdr(p, UCCL_RNDV_MSG_GRANT, UCCL_OK, req->tp_data[UCCL_RNDV_RD_PEER_ID],
                 req->tp_data[UCCL_RNDV_RD_ID], (uint64_t)slot);
    uccl_put_u64(p + 32, off);
    uccl_put_u64(p + UCCL_RNDV_HDR_SIZE, seg->addr);
    uccl_put_u64(p + UCCL_RNDV_HDR_SIZE + 8, seg->key);
    uccl_put_u64(p + UCCL_RNDV_HDR_SIZE + 16, seg->len);
    uccl_rndv_ctrl_commit(r, ctrl_slot, out, UCCL_RNDV_HDR_SIZE + UCCL_RNDV_SEG_SIZE, NULL);
    return UCCL_OK;
}

/* Receive req, matched to the RTS of send id send_id, cannot take the
 * message (st): it fails, and so does the send, which waits for a CTS: a
 * FIN naming its send id finishes it (as after an RTS_PULL,
 * uccl_rndv_pull_fin). Without room for that FIN the sender would wait for
 * ever: the connection fails. */
void uccl_rndv_recv_refuse(uccl_rndv_t *r, uccl_req_t *req, uint64_t send_id, uccl_status_t st)
{
    if (uccl_rndv_ctrl_send(r, UCCL_RNDV_MSG_FIN, st, send_id, 0, 0, NULL) != UCCL_OK)
        uccl_conn_fail(rndv_conn(r), UCCL_ERR_NO_MEMORY);
    r->ops->finish(r, req, st, 0);
}

/* Matched a receive to an RTS: advertise the receive buffer (CTS), or a
 * bounce when the receive is in GPU memory the NIC cannot reach. */
static void rndv_recv_match_rts(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, uint64_t send_id,
                                const uccl_rndv_seg_t *pull, int npull)
{
    uccl_rndv_seg_t segs[UCCL_IOV_MAX];
    bool staged = false;
    uccl_status_t st = r->ops->mem_check(r, req, &staged);
    uccl_rndv_out_t *out;
    int slot, nseg;
    uint8_t *p, *s;

    if (st == UCCL_OK && npull > 0 && !staged &&
        uccl_rndv_pull_start(r, req, len, send_id, pull, npull))
        return;
    if (st == UCCL_OK && len > 0 && staged && r->ops->sink_start != NULL) {
        uccl_rndv_grant_start(r, req, len, send_id);
        return;
    }
    if (st == UCCL_OK && len > 0 && staged)
        st = r->ops->mem_stage(r, req, len, false);
    if (st == UCCL_OK)
        st = uccl_idmap_insert(&r->ids, req, &req->tp_data[UCCL_RNDV_RD_ID]);
    p = st == UCCL_OK ? uccl_rndv_ctrl_begin(r, &slot, &out) : NULL;
    if (p == NULL) {
        if (st == UCCL_OK)
            uccl_idmap_remove(&r->ids, req->tp_data[UCCL_RNDV_RD_ID]);
        uccl_rndv_recv_refuse(r, req, send_id, st != UCCL_OK ? st : UCCL_ERR_NO_MEMORY);
        return;
    }
    req->tp_data[UCCL_RNDV_RD_MSG_LEN] = len;
    req->tp_data[UCCL_RNDV_RD_PARTS_GOT] = 0;
    req->tp_data[UCCL_RNDV_RD_STATE] = UCCL_RNDV_RS_RECV_WAIT_FIN;
    uccl_list_push_back(&r->recv_wait_fin, &req->tp_link);
    nseg = r->ops->mem_segs(r, req, len, segs);
    s = rndv_put_segs(p + UCCL_RNDV_HDR_SIZE, segs, nseg);
    rndv_put_hdr(p, UCCL_RNDV_MSG_CTS, UCCL_OK, send_id, req->tp_data[UCCL_RNDV_RD_ID],
                 (uint64_t)nseg);
    uccl_rndv_ctrl_commit(r, slot, out, (size_t)(s - p), NULL);
}

/* Move a matched message into its receive: copy an eager payload (GPU
 * pieces through the GPU layer), or advertise the receive's buffer for a
 * rendezvous. */
static void rndv_msg_start(uccl_rndv_t *r, uccl_req_t *req, uint64_t len, bool rndv,
                           const uint8_t *data, uint64_t send_id, int nseg)
{
    uccl_status_t st = UCCL_OK;

    if (rndv && nseg == RNDV_NSEG_TMSG) {
        r->ops->tmsg_recv(r, req, len, send_id);
        return;
    }
    if (rndv) { /* RTS_PULL: data holds the sender's nseg segments */
        rndv_recv_match_rts(r, req, len, send_id, (const uccl_rndv_seg_t *)(const void *)data,
                            nseg);
        return;
    }
    if (req->gpu_caps != 0)
        st = rndv_mem_copy(r, req, (void *)(uintptr_t)data, len, true);
    else
        uccl_req_iov_copy_in(req, 0, data, len);
    r->ops->finish(r, req, st, len);
}

/* An EAGER or RTS came in: into the receive the core has for it, else held. */
static void rndv_msg_arrived(uccl_rndv_t *r, uint64_t seq, uint64_t tag, uint64_t len, bool rndv,
                             const uint8_t *data, uint64_t send_id, int nseg)
{
    size_t keep = rndv ? (nseg > 0 ? (size_t)nseg * sizeof(uccl_rndv_seg_t) : 0) : len;
    uccl_conn_t *conn = rndv_conn(r);
    rndv_unexp_t *u;
    uccl_req_t *req;

    if (uccl_msg_arrived(conn, r->ep, seq, tag, len, &req) != UCCL_OK) {
        uccl_conn_fail(conn, UCCL_ERR_TRANSPORT);
        return;
    }
    if (req != NULL) {
        rndv_msg_start(r, req, len, rndv, data, send_id, nseg);
        return;
    }
    u = malloc(sizeof(*u) + keep);
    if (u == NULL) {
        uccl_error("%s: out of memory holding an unexpected message; connection fails",
                   r->ep->tp->ops->name);
        uccl_conn_fail(conn, UCCL_ERR_NO_MEMORY);
        return;
    }
    u->msg = (uccl_msg_t){.seq = seq, .tag = tag, .len = len, .bytes = rndv ? 0 : len};
    u->rndv = rndv;
    u->send_id = send_id;
    u->nseg = nseg;
    if (keep > 0)
        memcpy(u->data, data, keep);
    uccl_list_push_back(&r->unexpected, &u->link);
    uccl_msg_hold(conn, r->ep, &u->msg);
}

void uccl_rndv_payload_arrived(uccl_rndv_t *r, uint64_t seq, uint64_t tag, const void *data,
                               uint64_t len)
{
    rndv_msg_arrived(r, seq, tag, len, false, data, 0, 0);
}

void uccl_rndv_deliver(uccl_rndv_t *r, uccl_msg_t *msg, uccl_req_t *req)
{
    rndv_unexp_t *u = uccl_container_of(msg, rndv_unexp_t, msg);

    uccl_list_del(&u->link);
    rndv_msg_start(r, req, msg->len, u->rndv, u->data, u->send_id, u->nseg);
    free(u);
}

/* The request that id names, if it is in state (our sends wait for a CTS,
 * our receives for data); take: it leaves that state, the id dies. */
uccl_req_t *uccl_rndv_id_find(uccl_rndv_t *r, uint64_t id, uint64_t state, bool take)
{
    uccl_req_t *req = uccl_idmap_lookup(&r->ids, id);

    if (req == NULL || req->tp_data[UCCL_RNDV_RD_STATE] != state)
        return NULL;
    if (take)
        uccl_idmap_remove(&r->ids, id);
    return req;
}

uccl_req_t *uccl_rndv_imm_find(uccl_rndv_t *r, uint32_t id, uint64_t state)
{
    uint64_t full;
    uccl_req_t *req = uccl_idmap_lookup_low(&r->ids, id, 25, &full);

    return req != NULL && req->tp_data[UCCL_RNDV_RD_STATE] == state ? req : NULL;
}

/* The receiver's buffer for one of our rendezvous sends: write into it. */
/* (segs and nseg as uccl_rndv_ctrl_parse checked them) */
static void rndv_cts_arrived(uccl_rndv_t *r, uint64_t send_id, uint64_t recv_id,
                             const uccl_rndv_seg_t *segs, int nseg)
{
    uccl_req_t *req = uccl_rndv_id_find(r, send_id, UCCL_RNDV_RS_WAIT_CTS, true);
    uint64_t total = 0;
    uccl_status_t st;

    if (req == NULL) {
        uccl_error("%s: unexpected CTS (send id %llu, %d segments)", r->ep->tp->ops->name,
                   (unsigned long long)send_id, nseg);
        uccl_conn_fail(rndv_conn(r), UCCL_ERR_TRANSPORT);
        return;
    }
    uccl_list_del(&req->tp_link);
    for (int i = 0; i < nseg; i++)
        total += segs[i].len;
    req->tp_data[UCCL_RNDV_RD_PEER_ID] = recv_id;
    if (total < req->len) /* the receiver matched only receives that fit */
        uccl_rndv_req_error(req, UCCL_ERR_TRANSPORT);
    st = r->ops->write(r, req, segs, nseg);
    if (st != UCCL_OK)
        r->ops->finish(r, req, st, 0);
}

static void rndv_fin_arrived(uccl_rndv_t *r, uint64_t recv_id, uint64_t len, uccl_status_t st)
{
    uccl_req_t *req = uccl_rndv_id_find(r, recv_id, UCCL_RNDV_RS_RECV_WAIT_FIN, true);

    if (req == NULL && uccl_rndv_pull_fin(r, recv_id, len, st))
        return;
    if (req == NULL && uccl_idmap_stale(&r->ids, recv_id)) {
        /* a late one: the receive already ended (its immediates all came
         * before a lane failure made the sender close it with a FIN) */
        uccl_debug("%s: FIN for finished receive %llu ignored", r->ep->tp->ops->name,
                   (unsigned long long)recv_id);
        return;
    }
    if (req == NULL) {
        uccl_error("%s: FIN for unknown receive %llu", r->ep->tp->ops->name,
                   (unsigned long long)recv_id);
        uccl_conn_fail(rndv_conn(r), UCCL_ERR_TRANSPORT);
        return;
    }
    if (st == UCCL_OK && len != req->tp_data[UCCL_RNDV_RD_MSG_LEN])
        st = UCCL_ERR_TRANSPORT;
    if (st > 0 || st < -199) /* only statuses we know cross the wire */
        st = UCCL_ERR_TRANSPORT;
    r->ops->finish(r, req, st, st == UCCL_OK ? len : 0);
}

/* A control message from the peer: parsed (rndv_wire.c), then handled. */
void uccl_rndv_ctrl_recv(uccl_rndv_t *r, int index, size_t len)
{
    const uint8_t *p = uccl_rndv_recv_buf(r, index);
    uccl_rndv_ctrl_t m;

    if (index < 0 || index >= r->rx_depth)
        return;
    if (uccl_rndv_ctrl_parse(p, len, &m) != UCCL_OK) {
        uccl_error("%s: malformed control message (type %d, %zu bytes); connection fails",
                   r->ep->tp->ops->name, len > 0 ? p[0] : -1, len);
        uccl_conn_fail(rndv_conn(r), UCCL_ERR_TRANSPORT);
        return;
    }
    switch (m.type) {
    case UCCL_RNDV_MSG_EAGER: rndv_msg_arrived(r, m.seq, m.a, m.b, false, m.payload, 0, 0); break;
    case UCCL_RNDV_MSG_RTS:
    case UCCL_RNDV_MSG_RTS_PULL:
        rndv_msg_arrived(r, m.seq, m.a, m.b, true, (const uint8_t *)m.segs, m.c, m.nseg);
        break;
    case UCCL_RNDV_MSG_RTS_TMSG:
        if (r->ops->tmsg_recv == NULL) { /* a transport without it never asked for one */
            uccl_error("%s: RTS_TMSG on a transport without tagged rendezvous; connection fails",
                       r->ep->tp->ops->name);
            uccl_conn_fail(rndv_conn(r), UCCL_ERR_TRANSPORT);
            break;
        }
        rndv_msg_arrived(r, m.seq, m.a, m.b, true, NULL, m.c & UCCL_RNDV_TMSG_ID_MASK,
                         RNDV_NSEG_TMSG);
        break;
    case UCCL_RNDV_MSG_CTS: rndv_cts_arrived(r, m.a, m.b, m.segs, m.nseg); break;
    case UCCL_RNDV_MSG_FIN: rndv_fin_arrived(r, m.a, m.b, m.status); break;
    case UCCL_RNDV_MSG_NOTIFY:
        uccl_rndv_notif_value(r, m.a, m.b, m.c == UCCL_RNDV_NOTIFY_CLOSED);
        break;
    case UCCL_RNDV_MSG_GRANT: uccl_rndv_grant_arrived(r, m.a, m.b, m.c, m.seq, &m.segs[0]); break;
    }
    if (r->ops->recv_repost(r, index) != UCCL_OK)
        uccl_conn_fail(rndv_conn(r), UCCL_ERR_TRANSPORT);
}

/* ------------------------------------------------------------------ teardown */

void uccl_rndv_fail_reqs(uccl_rndv_t *r, uccl_list_t *list, uccl_status_t reason)
{
    while (!uccl_list_empty(list)) {
        uccl_req_t *req = uccl_list_first(list, uccl_req_t, tp_link);
        uccl_status_t st = uccl_rndv_req_err(req);

        r->ops->finish(r, req, st != UCCL_OK ? st : reason, 0);
    }
}

/* Requests waiting under an id of ours: the ids die first. */
static void rndv_fail_list(uccl_rndv_t *r, uccl_list_t *list, uccl_status_t reason)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, list)
        uccl_idmap_remove(&r->ids, uccl_container_of(pos, uccl_req_t, tp_link)->tp_data[UCCL_RNDV_RD_ID]);
    uccl_rndv_fail_reqs(r, list, reason);
}

/* Requests referenced from a send slot or a queued message go first: one
 * may also sit on a transport list (a notified write), and is finished once,
 * here, before anything could recycle it. */
void uccl_rndv_release(uccl_rndv_t *r, uccl_status_t reason)
{
    uccl_rndv_ctrl_release(r, reason);
    rndv_fail_list(r, &r->rndv_wait, reason);
    rndv_fail_list(r, &r->recv_wait_fin, reason);
    while (!uccl_list_empty(&r->unexpected))
        free(uccl_container_of(uccl_list_pop_front(&r->unexpected), rndv_unexp_t, link));
    uccl_rndv_notif_release(r);
}

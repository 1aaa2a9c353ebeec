/* Private definitions of the RDMA verbs transport: the transport instance,
 * endpoints with one RC control QP and N data QPs, and the data path's state. */
#ifndef UCCL_TP_VERBS_H
#define UCCL_TP_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tp_api.h"
#include "tp/common/rndv.h"
#include "tp/common/rndv_stage.h"
#include "tp/staging.h"

#define VERBS_MAX_QPS 16
/* Rails: RDMA devices one engine stripes over. Two at most: a descriptor's
 * key slot carries one 4-byte rkey per rail (2 x 4 bytes beside an ofi slot
 * fill the 20-byte key area of descriptor v2), and a rendezvous CTS carries
 * one 64-bit key per piece (rail 0's rkey low, rail 1's high). */
#define VERBS_MAX_RAILS 2
#define VERBS_MAX_SGE 16
#define VERBS_WIRE_VERSION 6 /* 2: writes closed by immediates (UCCL_RNDV_IMM_*); 3: GRANT windows;
                              * 4: rails (address and wiring info name them); 5: a closing
                              * NOTIFY (failover of notified writes, verbs_rail.c); 6: a
                              * control QP per rail, control sends numbered (their immediate) */

/* The message protocol is src/tp/common/rndv.h: control messages are SENDs
 * on the RC control QP (in order), writes WRITE / WRITE_WITH_IMM chains
 * striped over the data QPs; a request striped over several QPs ends with
 * one WRITE_WITH_IMM on every QP that carried its data (the last chunk on one
 * of them, zero-length ones on the others), so its parts are its QPs. */
#define VERBS_IMM_CTRL_BIT VERBS_MAX_QPS /* the control QP in a request's QP mask */

/* wr_id: low 3 bits say what the work request was for. */
enum {
    VERBS_WR_CTRL_SEND = 1, /* index of a control send slot */
    VERBS_WR_CTRL_RECV = 2, /* index of a control receive buffer */
    VERBS_WR_DATA = 3,      /* uccl_req_t pointer */
    VERBS_WR_IMM_RECV = 4,  /* index of the data QP; receives only immediates */
    VERBS_WR_SINK = 5,      /* uccl_rndv_slot_t pointer: an RDMA READ into a stage buffer */
};

/* Indexes into req->tp_data past the protocol's (UCCL_RNDV_RD_*): the data
 * path of writes, reads and rendezvous sends. */
enum {
    VERBS_RD_WRS = UCCL_RNDV_RD_TP, /* work requests posted and not completed */
    VERBS_RD_OFF,                   /* bytes posted so far */
    VERBS_RD_QPS, /* QPs that carried data (low 32 bits), QPs still owed a
                   * zero-length immediate (high 32) */
    VERBS_RD_RAILS, /* rails the request may use (bit r: rail r), set at data start;
                     * VERBS_RAILS_RESTART: a rail failed under it, it starts over */
};
#define VERBS_RAILS_RESTART (1ull << 63)
/* a rail failed under req after its immediates were posted: its data goes
 * again without them and a control message closes it (uccl_rndv_write_close) */
#define VERBS_RAILS_NOIMM (1ull << 62)

typedef struct tp_verbs_config {
    char qp_type[UCCL_CFG_STRING_MAX];
    int num_qps;
    size_t chunk;
    size_t eager;
    int tx_depth;
    int rx_depth;
    int gid_index;
    int ib_timeout;
    int retry_cnt; /* RC transport retries before RETRY_EXC (0..7) */
    char gdr[UCCL_CFG_STRING_MAX]; /* UCCL_VERBS_GDR, see verbs_gdr.h */
    char gdr_sysroot[UCCL_CFG_STRING_MAX]; /* where the peer-memory module check looks */
    size_t inflight;    /* data bytes posted and not completed per QP (0: no bound) */
    size_t stage_chunk; /* staged sources: bytes per registered pinned buffer */
    int stage_depth;    /* chunks a staged source copies ahead */
    int rails;          /* devices opened at most (1..VERBS_MAX_RAILS) */
    size_t stripe;      /* requests from this size on stripe over every rail */
} tp_verbs_config_t;

/* One RDMA device port (a rail) and what the QPs on it need. */
#define VERBS_RAIL_FIELDS           \
    struct ibv_context *ctx;        \
    struct ibv_pd *pd;              \
    char dev_name[64];              \
    uint8_t port;                   \
    int gid_index;                  \
    union ibv_gid gid;              \
    uint16_t lid;                   \
    bool is_roce;                   \
    enum ibv_mtu mtu;               \
    int max_sge; /* the transport's: the least of its rails' */ \
    int max_rd_atomic; /* likewise */

typedef struct tp_verbs_rail {
    VERBS_RAIL_FIELDS
} tp_verbs_rail_t;

/* v->ctx, v->pd, v->dev_name ... name rails[0]'s fields: the primary rail
 * carries the control QP, GPU memory and staging; every rail carries data
 * QPs. */
typedef struct tp_verbs {
    uccl_tp_t base;
    tp_verbs_config_t cfg;
    union {
        tp_verbs_rail_t rails[VERBS_MAX_RAILS];
        struct {
            VERBS_RAIL_FIELDS
        };
    };
    int nrails;
    bool uc;
    int mr_access;
    uccl_list_t eps;
    /* GPU memory of the engine's GPU: HOST = not claimed (no GPU), DMABUF or
     * PEERMEM = registered with the NIC (GPUDirect RDMA), STAGING = moved
     * through host buffers (verbs_stage.c) */
    int gpu_mode; /* verbs_gdr_mode_t */
    uccl_mem_type_t gpu_mem_type;
    /* STAGING: GPU data goes through the pipelined staging engine
     * (tp/staging.h; its buffers registered with our PD): sends and writes
     * post chunks from the buffers their D2H copies filled, receives and
     * reads land in buffers that are copied into place chunk by chunk */
    uccl_stage_t *stage;
    int staged_wrs; /* data work requests posted from stage buffers, not completed */
} tp_verbs_t;

/* mr NULL: GPU memory without a NIC registration, staged. mr is rail 0's
 * registration, rail_mr[r - 1] rail r's (NULL: not registered there, e.g.
 * GPU memory, which only the primary rail registers). */
struct uccl_tp_memh {
    struct ibv_mr *mr;
    struct ibv_mr *rail_mr[VERBS_MAX_RAILS - 1];
};

static inline struct ibv_mr *tp_verbs_memh_mr(const struct uccl_tp_memh *memh, int rail)
{
    return rail == 0 ? memh->mr : memh->rail_mr[rail - 1];
}

/* Our key slot in remote descriptors: one 32-bit rkey per rail the region
 * is registered on, rail 0 first (4 or 8 bytes). */
#define VERBS_RKEY_SIZE 4

typedef struct tp_verbs_qp {
    struct ibv_qp *qp;
    int rail;
    uint32_t psn;
    int outstanding; /* send work requests not yet completed */
    size_t bytes_out; /* data bytes of the data work requests not yet completed */
    /* One entry per data work request posted and not yet completed, in
     * posting order (a send queue completes in order): its bytes and the
     * stage buffer it reads, or NULL; each completion takes one off. */
    struct tp_verbs_held {
        uccl_stage_buf_t *buf;
        size_t len;
    } *held;
    int held_head, held_n, held_cap;
} tp_verbs_qp_t;

/* What a request holds beyond tp_data (req->tp_ptr, freed at finish): the
 * staging pipeline its local GPU data is read through (sends, writes), the
 * sink it lands in (receives, reads), a send's granted windows, and a
 * rendezvous send's remote pieces from the CTS (nseg 0: the target is
 * req->remote or the windows). */
typedef struct tp_verbs_xfer {
    uccl_rndv_staged_t staged; /* tp/common/rndv_stage.h */
    uint64_t nseg;
    uccl_rndv_seg_t segs[]; /* keys are 32-bit rkeys */
} tp_verbs_xfer_t;

typedef struct tp_verbs_ep {
    uccl_tp_ep_t base;
    tp_verbs_t *tp;
    uccl_list_t link; /* tp->eps */
    bool connected;
    struct ibv_cq *cq[VERBS_MAX_RAILS]; /* one per rail: a CQ serves one device */
    int nrails; /* rails of this connection: the first nrails of both sides, by order */
    uint32_t dead_rails; /* rails whose QPs failed: no new work goes there */
    tp_verbs_qp_t ctrl; /* on rail 0 */
    /* Control channel failover (verbs_ctrl.c): with two rails a second RC
     * control QP on rail 1, its receive buffers posted from the start; when
     * rail 0 fails, control sends move there (ctl), those not acked yet
     * sent again. Every control send carries its number in the immediate;
     * the receiver takes them in order, drops a number seen before and
     * holds one that comes early. */
    tp_verbs_qp_t ctrl2;
    tp_verbs_qp_t *ctl; /* where control sends go: &ctrl, or &ctrl2 once rail 0 failed */
    uint32_t ctrl_tx_seq, ctrl_rx_seq; /* next number to send, next one to take */
    struct verbs_ctrl_slot {
        uint32_t seq, len;
        int8_t rail; /* rail of the QP it is in flight on; -1: not in flight */
    } *ctrl_slots; /* per send slot */
    struct verbs_ctrl_early {
        uint32_t seq, len;
        int index;
    } *ctrl_early; /* received ahead of ctrl_rx_seq, not yet taken */
    int nearly;
    tp_verbs_qp_t data[VERBS_MAX_QPS]; /* data[i] on rail i % nrails */
    int nq;
    int next_qp;
    /* control buffers (registered here, run by the protocol) */
    uint8_t *bufs;
    struct ibv_mr *bufs_mr;
    struct ibv_mr *bufs_mr2; /* the same on rail 1, for ctrl2 */
    uccl_rndv_t rndv;
    uccl_list_t data_pending; /* requests with chunks still to post */
    uccl_list_t inflight;     /* requests fully posted, waiting for completions */
} tp_verbs_ep_t;

/* ---- verbs.c */
extern const uccl_cfg_table_t uccl_verbs_config_table;
int uccl_verbs_peer_rails(const tp_verbs_t *v, const uccl_tp_peer_t *peer);

/* ---- verbs_ep.c */
uccl_status_t uccl_verbs_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                 bool is_initiator, uccl_tp_ep_t **ep);
uccl_status_t uccl_verbs_ep_pack(uccl_tp_ep_t *ep, void *buf, size_t *len);
uccl_status_t uccl_verbs_ep_connect(uccl_tp_ep_t *ep, const void *peer_info, size_t len);
void uccl_verbs_ep_destroy(uccl_tp_ep_t *ep);
uccl_status_t uccl_verbs_post_ctrl_recv(tp_verbs_ep_t *ep, int index);
uccl_status_t uccl_verbs_post_imm_recv(tp_verbs_ep_t *ep, int qp_index);

/* ---- verbs_msg.c: the protocol's primitives on verbs (uccl_rndv_ops_t) */
extern const uccl_rndv_ops_t uccl_verbs_rndv_ops;
uccl_status_t uccl_verbs_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_verbs_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);

/* ---- verbs_data.c: RDMA chunks posted as WR chains */
uccl_status_t uccl_verbs_post_write(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_verbs_post_read(uccl_tp_ep_t *ep, uccl_req_t *req);
void uccl_verbs_data_start(tp_verbs_ep_t *ep, uccl_req_t *req);
void uccl_verbs_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes);
/* req has work requests still to post (not failed, not waiting for a restart). */
bool uccl_verbs_req_has_work(const uccl_req_t *req);
/* Post the pending requests' work requests, in order, while the queues have room. */
void uccl_verbs_post_pending(tp_verbs_ep_t *ep);

/* ---- verbs_cq.c: completions and progress */
void uccl_verbs_data_wc(tp_verbs_ep_t *ep, uccl_req_t *req, uccl_status_t st);
tp_verbs_qp_t *uccl_verbs_find_qp(tp_verbs_ep_t *ep, int rail, uint32_t qp_num);
int uccl_verbs_progress(uccl_tp_t *tp);

/* ---- verbs_ctrl.c: the numbered control channel and its failover */
int uccl_verbs_ctrl_rx_depth(const tp_verbs_ep_t *ep);
uccl_status_t uccl_verbs_ctrl_init(tp_verbs_ep_t *ep);
void uccl_verbs_ctrl_fini(tp_verbs_ep_t *ep);
void uccl_verbs_ctrl_send(tp_verbs_ep_t *ep, int slot, size_t len);
void uccl_verbs_ctrl_in(tp_verbs_ep_t *ep, const struct ibv_wc *wc);
void uccl_verbs_ctrl_sent(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc, uccl_status_t st);
bool uccl_verbs_ctrl_move(tp_verbs_ep_t *ep);

/* ---- verbs_rail.c: rails per request, failover */
uint64_t uccl_verbs_req_rails(const tp_verbs_ep_t *ep, const uccl_req_t *req);
/* Remote address, rail's key and bytes left in the remote piece at byte off
 * of req (verbs_rail.c). */
void uccl_verbs_remote_at(const uccl_req_t *req, size_t off, int rail, uint64_t *addr,
                          uint32_t *rkey, uint64_t *left);
bool uccl_verbs_req_restart(tp_verbs_ep_t *ep, uccl_req_t *req);
bool uccl_verbs_req_noimm(const uccl_req_t *req);
bool uccl_verbs_rail_failover(tp_verbs_ep_t *ep, int rail, const struct ibv_wc *wc);

/* ---- verbs_stage.c: GPU memory (GPUDirect decision at open, staging) */
uccl_status_t uccl_verbs_gpu_open(tp_verbs_t *v, const uccl_tp_open_params_t *params);
void uccl_verbs_gpu_close(tp_verbs_t *v);
uccl_status_t uccl_verbs_gpu_mem_reg(tp_verbs_t *v, void *addr, size_t len, uccl_mem_type_t type,
                                   int device, uccl_tp_memh_t **memh);
bool uccl_verbs_req_staged(const tp_verbs_ep_t *ep, const uccl_req_t *req);
uccl_status_t uccl_verbs_qp_held_init(tp_verbs_t *v, tp_verbs_qp_t *q);
void uccl_verbs_qp_held_push(tp_verbs_t *v, tp_verbs_qp_t *q, uccl_stage_buf_t *buf, size_t len);
void uccl_verbs_qp_held_pop(tp_verbs_t *v, tp_verbs_qp_t *q);
void uccl_verbs_qp_held_fini(tp_verbs_t *v, tp_verbs_qp_t *q);
uccl_status_t uccl_verbs_xfer_stage(tp_verbs_ep_t *ep, uccl_req_t *req, size_t len, bool gather);
uccl_status_t uccl_verbs_xfer_segs(uccl_req_t *req, uint64_t nseg);
uccl_status_t uccl_verbs_sink_start(tp_verbs_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_verbs_grant(tp_verbs_ep_t *ep, uccl_req_t *req, bool first, int slot,
                               uint64_t off, const uccl_rndv_seg_t *seg);
void uccl_verbs_xfer_release(uccl_req_t *req);
uccl_status_t uccl_verbs_check_local(const tp_verbs_ep_t *ep, const uccl_req_t *req);
uccl_status_t uccl_verbs_check_remote(const tp_verbs_ep_t *ep, const uccl_req_t *req);

static inline tp_verbs_xfer_t *tp_verbs_xfer(const uccl_req_t *req)
{
    return req->tp_ptr;
}

#endif

/* Private definitions of the RDMA verbs transport: the transport instance,
 * endpoints with one RC control QP and N data QPs, and the control wire format. */
#ifndef UCCL_TP_VERBS_H
#define UCCL_TP_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

#define VERBS_MAX_QPS 16
#define VERBS_MAX_SGE 16
#define VERBS_WIRE_VERSION 2 /* 2: writes closed by immediates (VERBS_IMM_*) */

/* Control message types (always on the RC control QP, in order). */
enum {
    VERBS_MSG_EAGER = 1,  /* a = tag, b = len, payload follows */
    VERBS_MSG_RTS = 2,    /* a = tag, b = len, c = send id */
    VERBS_MSG_CTS = 3,    /* a = send id, b = recv id, c = nseg, segments follow */
    VERBS_MSG_FIN = 4,    /* a = recv id, b = len, status; only when a rendezvous send failed */
    VERBS_MSG_NOTIFY = 5, /* a = notify id, b = value; for values VERBS_IMM_NOTIFY_SMALL cannot carry */
};

/* Immediate data of the RDMA_WRITE_WITH_IMM that closes a notified write or
 * a rendezvous send. A request striped over several QPs ends with one
 * WRITE_WITH_IMM on every QP that carried its data (the last chunk on one of
 * them, zero-length ones on the others): RC orders only within a QP, so the
 * target acts once it has counted all of them, which proves that every chunk
 * has landed. The immediate names the request and how many to count:
 *   bits 31..30 kind, then for VERBS_IMM_NOTIFY_SMALL a value below 2^30
 *   (one part: the common case, one WR and nothing else), else
 *   bits 29..25 parts - 1, bits 24..0 the notify id or the receive id. */
enum {
    VERBS_IMM_NOTIFY_SMALL = 1, /* value in the immediate, one part */
    VERBS_IMM_NOTIFY = 2,       /* value in a VERBS_MSG_NOTIFY on the control QP */
    VERBS_IMM_RNDV = 3,         /* rendezvous data for a receive id */
};
#define VERBS_IMM_SMALL_MAX (1u << 30)
#define VERBS_IMM_ID_MASK ((1u << 25) - 1)
#define VERBS_IMM_CTRL_BIT VERBS_MAX_QPS /* the control QP in a request's QP mask */

/* type(1) pad(3) status(4) a(8) b(8) c(8) seq(8); seq: the connection's
 * message number (req->msg_seq) in EAGER and RTS, else 0 */
#define VERBS_HDR_SIZE 40
#define VERBS_SEG_SIZE 24 /* addr(8) rkey(4) pad(4) len(8) */

/* wr_id: low 3 bits say what the work request was for. */
enum {
    VERBS_WR_CTRL_SEND = 1, /* index of a control send slot */
    VERBS_WR_CTRL_RECV = 2, /* index of a control receive buffer */
    VERBS_WR_DATA = 3,      /* uccl_req_t pointer */
    VERBS_WR_IMM_RECV = 4,  /* index of the data QP; receives only immediates */
};

/* State of a request held by the verbs transport (req->tp_data[VERBS_RD_STATE]). */
enum {
    VERBS_RS_DATA = 1,     /* RDMA chunks to post or in flight */
    VERBS_RS_WAIT_CTS,     /* rendezvous send waiting for the receiver's buffer */
    VERBS_RS_RECV_WAIT_FIN, /* receive matched to an RTS, data on its way */
    VERBS_RS_CTRL,         /* waiting for the completion of its control message */
};

/* Indexes into req->tp_data. */
enum {
    VERBS_RD_WRS = 0,  /* work requests posted and not completed */
    VERBS_RD_OFF,      /* bytes posted so far */
    VERBS_RD_ERR,      /* first error (uccl_status_t as int64), 0 = none */
    VERBS_RD_STATE,
    VERBS_RD_ID,       /* our id (rendezvous send / receive, notified write) */
    VERBS_RD_PEER_ID,  /* peer's receive id (rendezvous send) */
    VERBS_RD_MSG_LEN,  /* message length (receive) */
    VERBS_RD_QPS = VERBS_RD_MSG_LEN, /* data requests: QPs that carried data (low 32 bits),
                                      * QPs still owed a zero-length immediate (high 32) */
};

typedef struct tp_verbs_config {
    char qp_type[UCCL_CFG_STRING_MAX];
    int num_qps;
    size_t chunk;
    size_t eager;
    int tx_depth;
    int rx_depth;
    int gid_index;
    int ib_timeout;
    char gdr[UCCL_CFG_STRING_MAX]; /* UCCL_VERBS_GDR, see verbs_gdr.h */
    char gdr_sysroot[UCCL_CFG_STRING_MAX]; /* where the peer-memory module check looks */
} tp_verbs_config_t;

/* A pinned, NIC-registered host buffer that staged GPU data goes through. */
typedef struct tp_verbs_bounce {
    uccl_list_t link; /* tp->bounce_cache while unused */
    uint8_t *buf;
    size_t size;
    struct ibv_mr *mr;
} tp_verbs_bounce_t;

typedef struct tp_verbs {
    uccl_tp_t base;
    tp_verbs_config_t cfg;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char dev_name[64];
    uint8_t port;
    int gid_index;
    union ibv_gid gid;
    uint16_t lid;
    bool is_roce;
    enum ibv_mtu mtu;
    int max_sge;
    int max_rd_atomic;
    bool uc;
    int mr_access;
    uccl_list_t eps;
    /* GPU memory of the engine's GPU: HOST = not claimed (no GPU), DMABUF or
     * PEERMEM = registered with the NIC (GPUDirect RDMA), STAGING = moved
     * through bounce buffers (verbs_stage.c) */
    int gpu_mode; /* verbs_gdr_mode_t */
    uccl_mem_type_t gpu_mem_type;
    uccl_list_t bounce_cache;
    int nbounce_cached;
} tp_verbs_t;

/* mr NULL: GPU memory without a NIC registration, staged through bounces. */
struct uccl_tp_memh {
    struct ibv_mr *mr;
};

/* Our key slot in remote descriptors: the 32-bit rkey. */
#define VERBS_RKEY_SIZE 4

typedef struct tp_verbs_qp {
    struct ibv_qp *qp;
    uint32_t psn;
    int outstanding; /* send work requests not yet completed */
} tp_verbs_qp_t;

/* A remote piece of memory a chunk may target. */
typedef struct tp_verbs_seg {
    uint64_t addr;
    uint32_t rkey;
    uint64_t len;
} tp_verbs_seg_t;

/* What a request holds beyond tp_data (req->tp_ptr, freed at finish): the
 * bounce its local data is staged through, and a rendezvous send's remote
 * pieces from the CTS (nseg 0: the target is req->remote). */
typedef struct tp_verbs_xfer {
    struct tp_verbs *tp; /* where the bounce goes back to */
    tp_verbs_bounce_t *bounce;
    uint64_t nseg;
    tp_verbs_seg_t segs[];
} tp_verbs_xfer_t;

typedef struct tp_verbs_ep {
    uccl_tp_ep_t base;
    tp_verbs_t *tp;
    uccl_list_t link; /* tp->eps */
    bool connected;
    struct ibv_cq *cq;
    tp_verbs_qp_t ctrl;
    tp_verbs_qp_t data[VERBS_MAX_QPS];
    int nq;
    int next_qp;
    /* control buffers: rx_depth receive buffers, then tx_depth send slots */
    uint8_t *bufs;
    struct ibv_mr *bufs_mr;
    size_t slot_size;
    int *free_slots;
    int nfree;
    uccl_req_t **slot_req; /* request completed by the send of that slot */
    uccl_list_t ctrl_pending; /* tp_verbs_out_t waiting for a slot or a credit */
    uccl_list_t data_pending; /* requests with chunks still to post */
    uccl_list_t inflight;     /* requests fully posted, waiting for completions */
    uccl_list_t rndv_wait;    /* rendezvous sends waiting for CTS */
    uccl_list_t recv_wait_fin;
    uccl_list_t unexpected;   /* tp_verbs_unexp_t held by the core's matching */
    uccl_list_t notif_wait;   /* tp_verbs_notif_t: notified writes not all landed yet */
    uint64_t next_send_id, next_recv_id, next_notif_id;
} tp_verbs_ep_t;

/* ---- verbs_dev.c */
extern const uccl_cfg_table_t tp_verbs_config_table;

/* ---- verbs_ep.c */
uccl_status_t tp_verbs_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                 bool is_initiator, uccl_tp_ep_t **ep);
uccl_status_t tp_verbs_ep_pack(uccl_tp_ep_t *ep, void *buf, size_t *len);
uccl_status_t tp_verbs_ep_connect(uccl_tp_ep_t *ep, const void *peer_info, size_t len);
void tp_verbs_ep_destroy(uccl_tp_ep_t *ep);
uccl_status_t tp_verbs_post_ctrl_recv(tp_verbs_ep_t *ep, int index);
uccl_status_t tp_verbs_post_imm_recv(tp_verbs_ep_t *ep, int qp_index);

/* ---- verbs_msg.c: two-sided messages and the control channel */
uccl_status_t tp_verbs_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
void tp_verbs_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
void tp_verbs_ctrl_recv_done(tp_verbs_ep_t *ep, int index, size_t len);
void tp_verbs_ctrl_send_done(tp_verbs_ep_t *ep, int slot, uccl_status_t st);
void tp_verbs_ctrl_flush(tp_verbs_ep_t *ep);
uccl_status_t tp_verbs_ctrl_send(tp_verbs_ep_t *ep, int type, uccl_status_t status, uint64_t a,
                                 uint64_t b, uint64_t c, uccl_req_t *req);
void tp_verbs_data_done(tp_verbs_ep_t *ep, uccl_req_t *req);
bool tp_verbs_req_needs_imm(const uccl_req_t *req);
uccl_status_t tp_verbs_imm_begin(tp_verbs_ep_t *ep, uccl_req_t *req, int nparts);
uint32_t tp_verbs_req_imm(const uccl_req_t *req, int nparts);
void tp_verbs_imm_arrived(tp_verbs_ep_t *ep, uint32_t imm);
void tp_verbs_msg_release(tp_verbs_ep_t *ep);

/* ---- verbs_data.c: RDMA chunks, completions, progress */
uccl_status_t tp_verbs_post_write(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t tp_verbs_post_read(uccl_tp_ep_t *ep, uccl_req_t *req);
void tp_verbs_data_start(tp_verbs_ep_t *ep, uccl_req_t *req);
void tp_verbs_data_wc(tp_verbs_ep_t *ep, uccl_req_t *req, uccl_status_t st);
void tp_verbs_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes);
void tp_verbs_req_error(uccl_req_t *req, uccl_status_t status);
int tp_verbs_progress(uccl_tp_t *tp);

/* ---- verbs_stage.c: GPU memory (GPUDirect decision at open, staging) */
uccl_status_t tp_verbs_gpu_open(tp_verbs_t *v, const uccl_engine_t *engine);
void tp_verbs_gpu_close(tp_verbs_t *v);
uccl_status_t tp_verbs_gpu_mem_reg(tp_verbs_t *v, void *addr, size_t len, uccl_mem_type_t type,
                                   int device, uccl_tp_memh_t **memh);
bool tp_verbs_req_staged(const tp_verbs_ep_t *ep, const uccl_req_t *req);
uccl_status_t tp_verbs_xfer_stage(tp_verbs_ep_t *ep, uccl_req_t *req, size_t len, bool gather);
uccl_status_t tp_verbs_xfer_segs(uccl_req_t *req, uint64_t nseg);
void tp_verbs_xfer_release(uccl_req_t *req, uccl_status_t *status, size_t bytes);
uccl_status_t tp_verbs_iov_copy(uccl_req_t *req, void *flat, size_t len, bool to_iov);
uccl_status_t tp_verbs_check_local(const tp_verbs_ep_t *ep, const uccl_req_t *req);
uccl_status_t tp_verbs_check_remote(const tp_verbs_ep_t *ep, const uccl_req_t *req);

static inline tp_verbs_xfer_t *tp_verbs_xfer(const uccl_req_t *req)
{
    return req->tp_ptr;
}

static inline uccl_status_t tp_verbs_req_err(const uccl_req_t *req)
{
    return (uccl_status_t)(int64_t)req->tp_data[VERBS_RD_ERR];
}

#endif

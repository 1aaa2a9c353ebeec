/* Requests: what a transport receives in post_* and completes with
 * uccl_req_complete(). Fields above "transport scratch" are set by the core
 * before the post and are read-only for the transport. */
#ifndef UCCL_CORE_REQ_H
#define UCCL_CORE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "util/list.h"
#include "tp.h"

#define UCCL_MAGIC_REQ 0x51455243u
#define UCCL_MAGIC_REQ_FREE 0x45455246u

typedef enum {
    UCCL_OP_SEND,
    UCCL_OP_RECV,
    UCCL_OP_WRITE,
    UCCL_OP_READ,
    UCCL_OP_USER, /* generalized request (greq.c): no transport, no conn */
    UCCL_OP_MSG,  /* writemsg/readmsg: finishes when its child requests do */
} uccl_op_t;

struct uccl_region;

/* One local piece: addr is the absolute address (region + offset). */
typedef struct uccl_req_iov {
    void *addr;
    size_t len;
    struct uccl_region *region; /* region->memh[tp->index] for registering transports */
    uccl_mr_t *mr;
} uccl_req_iov_t;

/* The remote side of a one-sided operation, decoded from its descriptor,
 * already bounds-checked: addr is the absolute remote address; rkey is the
 * descriptor's key slot of the request's transport (rkey_len 0: none, the
 * owner could not give this transport a key for the region). */
typedef struct uccl_req_remote {
    uint64_t addr;
    uint64_t len;
    uint64_t region_id;
    uccl_mem_type_t mem_type;
    int device;
    uint8_t rkey_len;
    uint8_t rkey[UCCL_TP_RKEY_MAX];
} uccl_req_remote_t;

struct uccl_req {
    uint32_t magic;
    bool done;
    bool detached;     /* the user freed it in flight: recycle on completion */
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_tp_ep_t *ep;
    uccl_status_t status;
    size_t bytes;      /* bytes moved (receive: the message length) */
    uccl_op_t op;
    uint64_t tag;
    size_t len;        /* sum of iov lengths */
    uint64_t gpu_caps; /* UCCL_TP_CAP_{CUDA,ROCM}_MEM of the local pieces' memory */
    int iovcnt;
    uccl_req_iov_t iov[UCCL_IOV_MAX];
    uccl_req_remote_t remote;
    bool has_notif;
    uint64_t notif;
    uint64_t msg_seq;  /* send: the connection's message number; carry it to the peer */
    /* transport scratch: free for the transport that holds the request */
    uccl_list_t tp_link;
    uint64_t tp_data[8];
    void *tp_ptr;
    /* core */
    uccl_req_progress_fn_t user_progress; /* UCCL_OP_USER */
    void *user_arg;
    struct uccl_req *parent;  /* a piece of a writemsg/readmsg: counts down parent */
    int children;             /* UCCL_OP_MSG: pieces not finished yet */
    uccl_status_t children_status; /* UCCL_OP_MSG: first error of a piece */
    struct uccl_msg_tail *tail; /* UCCL_OP_MSG: the notifying piece, posted last */
    uccl_list_t conn_link;    /* conn->reqs; UCCL_OP_USER: engine->user_reqs */
    uccl_list_t match_link; /* receive: on conn->posted until matched */
    uccl_list_t pool_link;
};

/* Finish a request (transports call this exactly once per posted request). */
void uccl_req_complete(uccl_req_t *req, uccl_status_t status, size_t bytes);

/* An iov cursor: a position in a request's local pieces, walked by bytes
 * (the one loop over req->iov[] that transports and core share). */
typedef struct uccl_req_cur {
    const uccl_req_t *req;
    int i;      /* piece at the cursor (req->iovcnt at the end) */
    size_t off; /* bytes into it */
} uccl_req_cur_t;

/* Put cur at byte off of req's pieces (at the end when off >= req->len). */
static inline void uccl_req_cur_init(uccl_req_cur_t *cur, const uccl_req_t *req, size_t off)
{
    cur->req = req;
    cur->i = 0;
    while (cur->i < req->iovcnt && off >= req->iov[cur->i].len)
        off -= req->iov[cur->i++].len;
    cur->off = cur->i < req->iovcnt ? off : 0;
}

/* The contiguous bytes at cur, at most max of them, and move past them:
 * returns how many (0 at the end or for max 0), *addr their address and
 * *index (may be NULL) the piece they are in. Empty pieces are skipped. */
static inline size_t uccl_req_cur_next(uccl_req_cur_t *cur, size_t max, uint8_t **addr, int *index)
{
    const uccl_req_t *req = cur->req;
    size_t n;

    while (cur->i < req->iovcnt && cur->off >= req->iov[cur->i].len) {
        cur->i++;
        cur->off = 0;
    }
    if (cur->i >= req->iovcnt || max == 0)
        return 0;
    n = req->iov[cur->i].len - cur->off;
    if (n > max)
        n = max;
    *addr = (uint8_t *)req->iov[cur->i].addr + cur->off;
    if (index != NULL)
        *index = cur->i;
    cur->off += n;
    return n;
}

/* Copy len bytes starting at byte offset off of the request's local iov
 * from/to a flat buffer; the helpers transports use to scatter/gather. */
void uccl_req_iov_copy_in(uccl_req_t *req, size_t off, const void *src, size_t len);
void uccl_req_iov_copy_out(const uccl_req_t *req, size_t off, void *dst, size_t len);

/* core-only */
uccl_req_t *uccl_req_alloc(uccl_engine_t *engine);
void uccl_req_release(uccl_req_t *req);
uccl_status_t uccl_req_check(const uccl_req_t *req);

#endif

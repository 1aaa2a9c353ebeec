/* What xfer.c (one request per call) lends xfer_msg.c (writemsg/readmsg,
 * several requests per call): the call's arguments, the check of its local
 * pieces, the post. */
#ifndef UCCL_CORE_XFER_H
#define UCCL_CORE_XFER_H

#include "core.h"

typedef struct xfer_args {
    uccl_op_t op;
    const uccl_iov_t *iov;
    int iovcnt;
    uint64_t tag;
    const uccl_rdesc_t *rdesc;
    size_t roff;
    bool has_notif;
    uint64_t notif;
    const uccl_riov_t *rseg; /* nrseg > 1: remote ranges of rdesc (roff, len; rdesc unused) */
    int nrseg;
    uccl_req_t *parent; /* a piece of a writemsg/readmsg */
    bool persistent;    /* uccl_send_init / uccl_recv_init: built, not posted */
} xfer_args_t;

/* The local pieces: count, bounds, owner; *total their bytes, *gpu_caps
 * the transport caps their memory needs. */
uccl_status_t uccl_xfer_check_iov(const uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                  size_t *total, uint64_t *gpu_caps);
/* Most remote ranges one request of conn may take (UCCL_TP_CAP_RSEG on
 * every transport the connection moves data with: UCCL_IOV_MAX; else 1). */
int uccl_xfer_rseg_max(const uccl_conn_t *conn);
/* The requests uccl_writemsg would post for m (m checked; tests). */
int uccl_rma_msg_pieces(uccl_conn_t *conn, const uccl_rma_msg_t *m);
/* Check a, build its request and post it (engine lock held). */
uccl_status_t uccl_xfer_post_locked(uccl_conn_t *conn, const xfer_args_t *a, uccl_req_t **out);

#endif

/* perf_ofi's raw libfabric side (perf_ofi_raw.c), shared with perf_ofi.c:
 * one FI_EP_RDM endpoint, CQ and registered buffer per rank, and the timed
 * loops of plain operations and of send's parts (the rendezvous built by
 * hand from raw operations). A benchmark tool: errors abort the job. */
#ifndef UCCL_TOOLS_PERF_OFI_H
#define UCCL_TOOLS_PERF_OFI_H

#include <mpi.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUF_SIZE (8u << 20)
#define SEED_BYTES 1179648u
#define MAX_WINDOW 64

/* OP_SENDV: send's bytes from SENDV_PIECES pieces into as many, each piece
 * SENDV_GAP bytes past the last (raw: fi_tsendmsg / fi_trecvmsg of those
 * pieces; uccl: uccl_sendv / uccl_recvv) */
enum { OP_WRITE, OP_READ, OP_SEND, OP_SENDV };
#define SENDV_PIECES 3
#define SENDV_GAP 4096

/* Piece j of SENDV_PIECES of len bytes: its offset in the buffer and length. */
static inline size_t sendv_piece(size_t len, int j, size_t *piece_len)
{
    size_t base = len / SENDV_PIECES;

    *piece_len = j + 1 < SENDV_PIECES ? base : len - base * (SENDV_PIECES - 1);
    return (size_t)j * (base + SENDV_GAP);
}

typedef struct raw {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    fi_addr_t peer;
    uint64_t peer_key, peer_addr; /* as the provider addresses the peer's buffer */
    uint8_t *buf;
    int rank;
} raw_t;

#define CHECK(r, what, call)                    \
    do {                                        \
        long rc_ = (long)(call);                \
        if (rc_ != 0)                           \
            die((r)->rank, what, rc_);          \
    } while (0)

void die(int rank, const char *what, long rc);
double now_s(void);
void raw_open(raw_t *r, const char *prov);
void raw_close(raw_t *r);
/* Wait for n completions, driving progress. */
void raw_wait(raw_t *r, int n);
/* One timed run of iters windows of op (OP_*); seconds. */
double raw_run(raw_t *r, int op, size_t len, int window, int iters);
/* One fi_writemsg, delivery complete; -FI_EAGAIN: progress, retry. */
void raw_writemsg(raw_t *r, const struct fi_msg_rma *msg);
/* Rank 0 tells rank 1 a one-sided round is over. */
void raw_done(raw_t *r, struct fi_context2 *ctx);

/* send's parts, built from raw operations (perf_ofi_raw.c): */
enum {
    RAW_RTS_SEND = 1, /* a 64-byte tagged message (the RTS), then the data as one fi_tsend */
    RAW_RTS_CTS_WRITE, /* RTS; the receiver answers CTS; the data as fi_writemsg with CQ data */
    /* RTS, then the data as one fi_tsend tagged with the message's number;
     * the receiver posts the data's fi_trecv only when the RTS arrived (as
     * uccl's tagged rendezvous must: the data often waits as unexpected) */
    RAW_RTS_SEND_LATE,
};
double raw_rndv_run(raw_t *r, int mode, size_t len, int window, int iters);
/* Raw send, the receiver keeping `depth` receives posted (perf_ofi_raw.c). */
double raw_depth_run(raw_t *r, size_t len, int window, int depth, int iters);

/* --phases 1 (perf_ofi_phase.c): a window cut at marks, per side (0 raw,
 * 1 uccl): begin, then the end of each phase; reported per row. */
enum { PH_POST, PH_WAIT, PH_TAIL, PH_N };
extern int phase_on;
extern long phase_empty_polls, phase_eagain;
/* raw_wait's fi_cq_read calls, all of them (PERF_OFI_POLLS=1 prints each
 * rank's count at the end: the raw side of "how often does the loop look
 * at the provider"; uccl's side: UCCL_LOG_LEVEL=debug's ofi line) */
extern long raw_cq_reads;
void phase_init(int on);
void phase_begin(int side);
void phase_mark(int side, int ph);
void phase_report(int rank, const char *op, size_t len, int window);

#endif

/* perf_ofi's raw libfabric side (perf_ofi.h): the endpoint, plain
 * operations in windows, and send's parts built from raw operations. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_ofi.h"

void die(int rank, const char *what, long rc)
{
    fprintf(stderr, "perf_ofi rank %d: %s: %s\n", rank, what, rc < 0 ? fi_strerror((int)-rc) : "");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void raw_open(raw_t *r, const char *prov)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_DATA};
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    uint8_t name[256], peer_name[256];
    size_t name_len = sizeof(name);
    uint64_t mine[2], theirs[2];

    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->fabric_attr->prov_name = strdup(prov);
    if (getenv("PERF_OFI_RAW_ORDER") != NULL) { /* experiment: ask for what uccl asks */
        hints->domain_attr->threading = FI_THREAD_DOMAIN;
        hints->tx_attr->msg_order = hints->rx_attr->msg_order =
            FI_ORDER_SAS | (strcmp(getenv("PERF_OFI_RAW_ORDER"), "sas") == 0 ? 0 : FI_ORDER_WAW);
    }
    CHECK(r, "fi_getinfo", fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &r->info));
    fi_freeinfo(hints);
    CHECK(r, "fi_fabric", fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
    CHECK(r, "fi_domain", fi_domain(r->fabric, r->info, &r->domain, NULL));
    CHECK(r, "fi_av_open", fi_av_open(r->domain, &ava, &r->av, NULL));
    CHECK(r, "fi_cq_open", fi_cq_open(r->domain, &cqa, &r->cq, NULL));
    CHECK(r, "fi_endpoint", fi_endpoint(r->domain, r->info, &r->ep, NULL));
    CHECK(r, "fi_ep_bind", fi_ep_bind(r->ep, &r->av->fid, 0));
    CHECK(r, "fi_ep_bind", fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(r, "fi_enable", fi_enable(r->ep));
    CHECK(r, "fi_getname", fi_getname(&r->ep->fid, name, &name_len));
    CHECK(r, "fi_mr_reg", fi_mr_reg(r->domain, r->buf, BUF_SIZE,
                                    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                        FI_REMOTE_WRITE, 0, 1 + (uint64_t)r->rank, 0, &r->mr, NULL));
    if (r->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        CHECK(r, "fi_mr_bind", fi_mr_bind(r->mr, &r->ep->fid, 0));
        CHECK(r, "fi_mr_enable", fi_mr_enable(r->mr));
    }
    r->desc = fi_mr_desc(r->mr);
    MPI_Sendrecv(name, sizeof(name), MPI_BYTE, 1 - r->rank, 0, peer_name, sizeof(peer_name),
                 MPI_BYTE, 1 - r->rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (fi_av_insert(r->av, peer_name, 1, &r->peer, 0, NULL) != 1)
        die(r->rank, "fi_av_insert", 0);
    mine[0] = fi_mr_key(r->mr);
    mine[1] = (r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)r->buf : 0;
    MPI_Sendrecv(mine, 2, MPI_UINT64_T, 1 - r->rank, 1, theirs, 2, MPI_UINT64_T, 1 - r->rank, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    r->peer_key = theirs[0];
    r->peer_addr = theirs[1];
}

void raw_close(raw_t *r)
{
    fi_close(&r->ep->fid);
    fi_close(&r->mr->fid);
    fi_close(&r->av->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
}

/* Wait for n completions (driving progress), yielding after a run of empty
 * polls as uccl_wait does, so that both sides of the comparison behave alike
 * on an oversubscribed host. */
void raw_wait(raw_t *r, int n)
{
    struct fi_cq_data_entry e[16];
    int idle = 0;

    while (n > 0) {
        ssize_t got = fi_cq_read(r->cq, e, 16);

        raw_cq_reads++;
        if (got == -FI_EAGAIN) {
            phase_empty_polls++;
            if (++idle >= 64) {
                sched_yield();
                idle = 0;
            }
            continue;
        }
        idle = 0;
        if (got < 0) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(r->cq, &err, 0);
            die(r->rank, "completion", -(long)err.err);
        }
        n -= (int)got;
    }
}

static void raw_post(raw_t *r, int op, size_t off, size_t len, struct fi_context2 *ctx)
{
    struct iovec iov = {r->buf + off, len};
    struct fi_rma_iov rma = {r->peer_addr + off, len, r->peer_key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &r->desc, .iov_count = 1, .addr = r->peer,
                             .rma_iov = &rma, .rma_iov_count = 1, .context = ctx};
    ssize_t rc;

    do {
        if (op == OP_WRITE)
            rc = fi_writemsg(r->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        else if (op == OP_READ)
            rc = fi_readmsg(r->ep, &msg, FI_COMPLETION);
        else
            rc = fi_tsend(r->ep, r->buf + off, len, r->desc, r->peer, 1, ctx);
        if (rc == -FI_EAGAIN) {
            phase_eagain++;
            fi_cq_read(r->cq, NULL, 0);
        }
    } while (rc == -FI_EAGAIN);
    if (rc != 0)
        die(r->rank, "post", rc);
}

/* OP_SENDV's message: a tagged send (send != 0) or receive of len bytes in
 * SENDV_PIECES pieces (sendv_piece); -FI_EAGAIN: progress, retry. */
static void raw_tagged_v(raw_t *r, int send, size_t len, uint64_t tag, struct fi_context2 *ctx)
{
    struct iovec iov[SENDV_PIECES];
    void *desc[SENDV_PIECES];
    struct fi_msg_tagged msg = {.msg_iov = iov, .desc = desc, .iov_count = SENDV_PIECES,
                                .addr = r->peer, .tag = tag, .context = ctx};
    ssize_t rc;

    for (int j = 0; j < SENDV_PIECES; j++) {
        size_t off = sendv_piece(len, j, &iov[j].iov_len);

        iov[j].iov_base = r->buf + off;
        desc[j] = r->desc;
    }
    do {
        rc = send ? fi_tsendmsg(r->ep, &msg, FI_COMPLETION) : fi_trecvmsg(r->ep, &msg, FI_COMPLETION);
        if (rc == -FI_EAGAIN)
            fi_cq_read(r->cq, NULL, 0);
    } while (rc == -FI_EAGAIN);
    CHECK(r, send ? "fi_tsendmsg" : "fi_trecvmsg", rc);
}

/* A tagged send (send != 0) or receive of len bytes from the start of the
 * buffer; -FI_EAGAIN (the provider short of resources, e.g. shm): progress,
 * retry. */
static void raw_tagged(raw_t *r, int send, size_t len, uint64_t tag, struct fi_context2 *ctx)
{
    ssize_t rc;

    do {
        rc = send ? fi_tsend(r->ep, r->buf, len, r->desc, r->peer, tag, ctx)
                  : fi_trecv(r->ep, r->buf, len, r->desc, r->peer, tag, 0, ctx);
        if (rc == -FI_EAGAIN) {
            phase_eagain++;
            fi_cq_read(r->cq, NULL, 0);
        }
    } while (rc == -FI_EAGAIN);
    CHECK(r, send ? "fi_tsend" : "fi_trecv", rc);
}

/* One-sided rounds end with rank 0 telling the target it is done (a
 * zero-byte tagged message): the target drives progress until then. */
void raw_done(raw_t *r, struct fi_context2 *ctx)
{
    raw_tagged(r, r->rank == 0, 0, 3, ctx);
    raw_wait(r, 1);
}

/* One timed run: iters windows of `window` ops of len bytes (rank 0 initiates;
 * for send, rank 1 receives and acks every window). Returns seconds. */
double raw_run(raw_t *r, int op, size_t len, int window, int iters)
{
    struct fi_context2 ctx[MAX_WINDOW + 1];
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters; it++) {
        bool ph = phase_on && (r->rank == 0 || op >= OP_SEND);

        if (ph)
            phase_begin(0);
        if (r->rank == 0) {
            for (int i = 0; i < window; i++) {
                if (op == OP_SENDV)
                    raw_tagged_v(r, 1, len, 1, &ctx[i]);
                else
                    raw_post(r, op, 0, len, &ctx[i]);
            }
            if (op >= OP_SEND)
                raw_tagged(r, 0, 0, 2, &ctx[window]);
            if (ph)
                phase_mark(0, PH_POST);
            raw_wait(r, window + (op >= OP_SEND));
            if (ph)
                phase_mark(0, PH_WAIT);
        } else if (op >= OP_SEND) {
            for (int i = 0; i < window; i++) {
                if (op == OP_SENDV)
                    raw_tagged_v(r, 0, len, 1, &ctx[i]);
                else
                    raw_tagged(r, 0, len, 1, &ctx[i]);
            }
            if (ph)
                phase_mark(0, PH_POST);
            raw_wait(r, window);
            if (ph)
                phase_mark(0, PH_WAIT);
            raw_tagged(r, 1, 0, 2, &ctx[window]);
            raw_wait(r, 1);
        }
        if (ph)
            phase_mark(0, PH_TAIL);
    }
    if (op < OP_SEND)
        raw_done(r, &ctx[0]);
    return now_s() - t0;
}

/* One fi_writemsg, delivery complete; -FI_EAGAIN: progress, retry. */
void raw_writemsg(raw_t *r, const struct fi_msg_rma *msg)
{
    ssize_t rc;

    while ((rc = fi_writemsg(r->ep, msg, FI_COMPLETION | FI_DELIVERY_COMPLETE)) == -FI_EAGAIN)
        fi_cq_read(r->cq, NULL, 0);
    if (rc != 0)
        die(r->rank, "fi_writemsg", rc);
}

/* Post; -FI_EAGAIN (the provider short of resources): progress, retry. */
#define POST(r, what, call)                                 \
    do {                                                    \
        ssize_t rc_;                                        \
        while ((rc_ = (call)) == -FI_EAGAIN)                \
            fi_cq_read((r)->cq, NULL, 0);                   \
        if (rc_ != 0)                                       \
            die((r)->rank, what, (long)rc_);                \
    } while (0)

/* send's parts by hand, raw (perf_ofi.h), for iters windows of `window`
 * messages of len bytes from rank 0 to rank 1, each window acknowledged as
 * raw_run's sends are. Control messages are 64 bytes from and into the
 * buffer's upper half. RAW_RTS_SEND: RTS then the data, both tagged; the
 * receiver posts its receives ahead. RAW_RTS_SEND_LATE: the same, the data
 * tagged with its index in the window, its receive posted at its RTS.
 * RAW_RTS_CTS_WRITE: the receiver
 * answers each RTS with a CTS; the sender writes the data on the CTS with
 * CQ data and delivery completion (uccl's push rendezvous on shm), the
 * receiver's message done at that CQ data. Returns seconds. */
double raw_rndv_run(raw_t *r, int mode, size_t len, int window, int iters)
{
    enum { RTS = 5, CTS = 6, DATA = 1, ACK = 2, CTRL = 64 };
    const uint64_t late = 1ull << 40; /* RAW_RTS_SEND_LATE's data tags: late + index */
    bool sends = mode == RAW_RTS_SEND || mode == RAW_RTS_SEND_LATE;
    static struct fi_context2 ctx[4][MAX_WINDOW + 1]; /* RTS, CTS, data, ack */
    uint8_t *ctrl = r->buf + BUF_SIZE / 2;
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters; it++) {
        int want = 0, idle = 0;

        if (r->rank == 0) {
            if (mode == RAW_RTS_CTS_WRITE)
                for (int i = 0; i < window; i++)
                    POST(r, "fi_trecv", fi_trecv(r->ep, ctrl + (size_t)(MAX_WINDOW + i) * CTRL,
                                                  CTRL, r->desc, r->peer, CTS, 0, &ctx[1][i]));
            POST(r, "fi_trecv", fi_trecv(r->ep, NULL, 0, NULL, r->peer, ACK, 0, &ctx[3][0]));
            for (int i = 0; i < window; i++) {
                POST(r, "fi_tsend", fi_tsend(r->ep, ctrl + (size_t)i * CTRL, CTRL, r->desc,
                                              r->peer, RTS, &ctx[0][i]));
                if (sends)
                    POST(r, "fi_tsend",
                          fi_tsend(r->ep, r->buf, len, r->desc, r->peer,
                                   mode == RAW_RTS_SEND ? DATA : late + (uint64_t)i, &ctx[2][i]));
            }
            want = 3 * window + 1; /* RTS sent, CTS or nothing, data, ack */
            if (sends)
                want = 2 * window + 1;
        } else {
            for (int i = 0; i < window; i++) {
                POST(r, "fi_trecv", fi_trecv(r->ep, ctrl + (size_t)i * CTRL, CTRL, r->desc,
                                              r->peer, RTS, 0, &ctx[0][i]));
                if (mode == RAW_RTS_SEND)
                    POST(r, "fi_trecv", fi_trecv(r->ep, r->buf, len, r->desc, r->peer, DATA, 0,
                                                  &ctx[2][i]));
            }
            want = 3 * window; /* RTS, CTS sent, data landed; then the ack */
            if (sends)
                want = 2 * window;
        }
        while (want > 0) {
            struct fi_cq_data_entry e[16];
            ssize_t got = fi_cq_read(r->cq, e, 16);

            if (got == -FI_EAGAIN) { /* as raw_wait */
                if (++idle >= 64) {
                    sched_yield();
                    idle = 0;
                }
                continue;
            }
            if (got < 0) {
                struct fi_cq_err_entry err = {0};
                fi_cq_readerr(r->cq, &err, 0);
                die(r->rank, "completion (send's parts)", -(long)err.err);
            }
            idle = 0;
            for (ssize_t k = 0; k < got; k++, want--) {
                struct fi_context2 *c = e[k].op_context;
                int i = (int)(c - ctx[0]);

                if (mode == RAW_RTS_SEND_LATE && r->rank == 1 && c >= ctx[0] &&
                    c < ctx[0] + window) /* RTS: the data's receive */
                    POST(r, "fi_trecv", fi_trecv(r->ep, r->buf, len, r->desc, r->peer,
                                                 late + (uint64_t)i, 0, &ctx[2][i]));
                if (mode != RAW_RTS_CTS_WRITE || (e[k].flags & FI_REMOTE_WRITE))
                    continue;
                if (r->rank == 1 && c >= ctx[0] && c < ctx[0] + window) { /* RTS: answer */
                    POST(r, "fi_tsend",
                          fi_tsend(r->ep, ctrl + (size_t)(MAX_WINDOW + i) * CTRL, CTRL, r->desc,
                                   r->peer, CTS, &ctx[1][i]));
                } else if (r->rank == 0 && c >= ctx[1] && c < ctx[1] + window) { /* CTS: write */
                    struct iovec iov = {r->buf, len};
                    struct fi_rma_iov rma = {r->peer_addr, len, r->peer_key};
                    struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &r->desc, .iov_count = 1,
                                             .addr = r->peer, .rma_iov = &rma,
                                             .rma_iov_count = 1, .context = &ctx[2][c - ctx[1]],
                                             .data = (uint64_t)(c - ctx[1])};
                    POST(r, "fi_writemsg",
                          fi_writemsg(r->ep, &msg,
                                      FI_COMPLETION | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA));
                }
            }
        }
        if (r->rank == 1) {
            POST(r, "fi_tsend", fi_tsend(r->ep, NULL, 0, NULL, r->peer, ACK, &ctx[3][0]));
            raw_wait(r, 1);
        }
    }
    return now_s() - t0;
}

/* Wait for at least one completion; how many came. */
static int raw_wait_some(raw_t *r)
{
    struct fi_cq_data_entry e[16];
    int idle = 0;

    for (;;) {
        ssize_t got = fi_cq_read(r->cq, e, 16);

        if (got > 0)
            return (int)got;
        if (got != -FI_EAGAIN) {
            struct fi_cq_err_entry err = {0};
            fi_cq_readerr(r->cq, &err, 0);
            die(r->rank, "completion", -(long)err.err);
        }
        if (++idle >= 64) { /* as raw_wait */
            sched_yield();
            idle = 0;
        }
    }
}

/* Raw send of `window` messages per round, each tagged with its index in
 * the window, the receiver keeping only `depth` receives posted: the next
 * one goes in when one completes (depth 1: a receive for the next message
 * only, as uccl's direct sends post by default). Acknowledged as raw_run.
 * Returns seconds. */
double raw_depth_run(raw_t *r, size_t len, int window, int depth, int iters)
{
    const uint64_t DATA = 1ull << 41, ACK = 2;
    static struct fi_context2 ctx[MAX_WINDOW + 1];
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int it = 0; it < iters; it++) {
        if (r->rank == 0) {
            POST(r, "fi_trecv", fi_trecv(r->ep, NULL, 0, NULL, r->peer, ACK, 0, &ctx[window]));
            for (int i = 0; i < window; i++)
                POST(r, "fi_tsend", fi_tsend(r->ep, r->buf, len, r->desc, r->peer,
                                              DATA + (uint64_t)i, &ctx[i]));
            raw_wait(r, window + 1);
            continue;
        }
        int posted = 0, done = 0;

        for (; posted < window && posted < depth; posted++)
            POST(r, "fi_trecv", fi_trecv(r->ep, r->buf, len, r->desc, r->peer,
                                          DATA + (uint64_t)posted, 0, &ctx[posted]));
        while (done < window) {
            int got = raw_wait_some(r);

            for (done += got; got > 0 && posted < window; got--) {
                POST(r, "fi_trecv", fi_trecv(r->ep, r->buf, len, r->desc, r->peer,
                                              DATA + (uint64_t)posted, 0, &ctx[posted]));
                posted++;
            }
        }
        POST(r, "fi_tsend", fi_tsend(r->ep, NULL, 0, NULL, r->peer, ACK, &ctx[window]));
        raw_wait(r, 1);
    }
    return now_s() - t0;
}

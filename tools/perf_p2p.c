/* uccl_perf p2p: the timed loops, libuccl's and the MPI reference's, of one
 * pattern: a window of W transfers, then (two-sided) a 0-byte ack; or with
 * --sliding W in flight all along, each completed one replaced at once. */
#include "perf_p2p.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void perf_fail(const perf_ctx_t *c, const char *what, uccl_status_t st)
{
    fprintf(stderr, "uccl_perf rank %d: %s failed: %s (%s)\n", c->rank, what,
            uccl_status_name(st), uccl_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ uccl */

static uccl_status_t uccl_post_data(perf_ctx_t *c, size_t size, uccl_req_t **req)
{
    switch (c->o.op) {
    case PERF_OP_SEND:
        if (c->rank == 0)
            return uccl_send(c->conn, c->mr, 0, size, TAG_DATA, req);
        return uccl_recv(c->conn, c->mr, 0, size, TAG_DATA, req);
    case PERF_OP_WRITE: return uccl_write(c->conn, c->mr, 0, size, &c->peer_desc, 0, req);
    case PERF_OP_READ: return uccl_read(c->conn, c->mr, 0, size, &c->peer_desc, 0, req);
    }
    return UCCL_ERR_INVALID_PARAM;
}

static void uccl_wait_free(perf_ctx_t *c, int n, const char *what)
{
    uccl_status_t st = uccl_wait_all(c->reqs, (size_t)n, -1);

    if (st != UCCL_OK)
        perf_fail(c, what, st);
    for (int i = 0; i < n; i++)
        uccl_req_free(c->reqs[i]);
}

/* How the passive rank waits for the initiator's fin: polling while its
 * engine has work (a transport that needs the target, like tcp, keeps its
 * pace), sleeping once it has had none for a while. A one-sided transfer over
 * verbs needs nothing from the target's CPU; spinning there would take it from
 * whatever moves the data (with Soft-RoCE, the kernel on these same CPUs), and
 * perftest's server sleeps too. */
#define PERF_IDLE_SPIN_S 1e-3 /* busy polling after the last event */
#define PERF_IDLE_PAUSE_MIN_NS 10000L
#define PERF_IDLE_PAUSE_MAX_NS 1000000L
#define PERF_IDLE_LIMIT_S 600.0 /* a peer gone silent this long is stuck */

static uccl_status_t idle_wait(perf_ctx_t *c, uccl_req_t *req)
{
    uccl_engine_t *engine = uccl_comm_engine(c->comm);
    double last_event = now_s(), deadline = last_event + PERF_IDLE_LIMIT_S;
    long pause_ns = 0;

    for (;;) {
        int events = uccl_engine_progress(engine), done = 0;
        uccl_status_t st = uccl_test(req, &done);
        double t = now_s();

        if (done || st < 0)
            return st;
        if (events > 0) {
            last_event = t;
            pause_ns = 0;
            continue;
        }
        /* libfabric's software providers (tcp;ofi_rxm, shm) serve one-sided
         * operations in the target's own calls (manual progress) without an
         * event the engine counts: the target keeps polling there */
        if (t > deadline)
            return UCCL_ERR_TIMEOUT;
        if (t - last_event < PERF_IDLE_SPIN_S || c->target_polls)
            continue;
        pause_ns = pause_ns == 0 ? PERF_IDLE_PAUSE_MIN_NS : pause_ns * 2;
        if (pause_ns > PERF_IDLE_PAUSE_MAX_NS)
            pause_ns = PERF_IDLE_PAUSE_MAX_NS;
        nanosleep(&(struct timespec){.tv_nsec = pause_ns}, NULL);
    }
}

/* 0-byte control messages name the GPU region with --mem cuda, so that they
 * go over the transport that moves the data (--transport gpu_ipc alone has
 * no host path). */
static uccl_mr_t *ctl_mr(const perf_ctx_t *c)
{
    return c->gpu != NULL ? c->mr : NULL;
}

static void uccl_ctl(perf_ctx_t *c, int send, uint64_t tag)
{
    uccl_status_t st = send ? uccl_send(c->conn, ctl_mr(c), 0, 0, tag, &c->reqs[0])
                            : uccl_recv(c->conn, ctl_mr(c), 0, 0, tag, &c->reqs[0]);
    if (st != UCCL_OK)
        perf_fail(c, send ? "sending an ack" : "receiving an ack", st);
    uccl_wait_free(c, 1, "an ack");
}

/* The passive rank of a one-sided phase: idle until the initiator's fin. */
static void uccl_await_fin(perf_ctx_t *c)
{
    uccl_status_t st = uccl_recv(c->conn, ctl_mr(c), 0, 0, TAG_FIN, &c->reqs[0]);

    if (st == UCCL_OK)
        st = idle_wait(c, c->reqs[0]);
    if (st != UCCL_OK)
        perf_fail(c, "waiting for the fin", st);
    uccl_req_free(c->reqs[0]);
}

/* One window of W transfers. Two-sided: rank 0 sends W, rank 1 receives them
 * and acks; rank 0 is done when it has the ack. One-sided: rank 0 only. */
static void uccl_window(perf_ctx_t *c, size_t size)
{
    int w = c->o.window, n = 0;

    if (c->rank == 1 && c->o.op != PERF_OP_SEND)
        return;
    if (c->rank == 0 && c->o.op == PERF_OP_SEND) {
        uccl_status_t st = uccl_recv(c->conn, ctl_mr(c), 0, 0, TAG_ACK, &c->reqs[n++]);
        if (st != UCCL_OK)
            perf_fail(c, "posting the ack receive", st);
    }
    for (int i = 0; i < w; i++) {
        uccl_status_t st = uccl_post_data(c, size, &c->reqs[n++]);
        if (st != UCCL_OK)
            perf_fail(c, "posting a transfer", st);
    }
    uccl_wait_free(c, n, "the window");
    if (c->rank == 1)
        uccl_ctl(c, 1, TAG_ACK);
}

/* --sliding: iters * W transfers, W in flight all the time: the oldest is
 * waited for and a new one posted in its place. Write/read: rank 0 alone.
 * Send: rank 0 so with its sends, rank 1 with its receives (W posted, each
 * reposted as it completes, as perftest's receiver keeps its rx depth); one
 * 0-byte ack after the last, so that rank 0's time covers their arrival. */
static void uccl_sliding(perf_ctx_t *c, size_t size, int iters)
{
    int w = c->o.window;
    long total = (long)iters * w;

    for (long i = 0; i < total; i++) {
        uccl_req_t **slot = &c->reqs[i % w];
        uccl_status_t st;

        if (i >= w) {
            st = uccl_wait(*slot, -1);
            if (st != UCCL_OK)
                perf_fail(c, "a transfer", st);
            uccl_req_free(*slot);
        }
        st = uccl_post_data(c, size, slot);
        if (st != UCCL_OK)
            perf_fail(c, "posting a transfer", st);
    }
    uccl_wait_free(c, (int)(total < w ? total : w), "the last transfers");
    if (c->o.op == PERF_OP_SEND)
        uccl_ctl(c, c->rank == 1, TAG_ACK);
}

/* Runs iters windows; returns rank 0's time. For one-sided ops rank 1 waits
 * for a fin (idle_wait: progressing while its engine has work, else asleep). */
double perf_uccl_phase(perf_ctx_t *c, size_t size, int iters)
{
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    if (c->rank == 1 && c->o.op != PERF_OP_SEND) {
        uccl_await_fin(c);
        return 0;
    }
    if (c->o.sliding)
        uccl_sliding(c, size, iters);
    else
        for (int i = 0; i < iters; i++)
            uccl_window(c, size);
    t0 = now_s() - t0;
    if (c->rank == 0 && c->o.op != PERF_OP_SEND)
        uccl_ctl(c, 1, TAG_FIN);
    return t0;
}

/* ------------------------------------------------------------------ MPI */

static void mpi_window(perf_ctx_t *c, size_t size)
{
    int w = c->o.window, n = (int)size;

    if (c->o.op == PERF_OP_SEND) {
        for (int i = 0; i < w; i++) {
            if (c->rank == 0)
                MPI_Isend(c->buf, n, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &c->mreqs[i]);
            else
                MPI_Irecv(c->buf, n, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &c->mreqs[i]);
        }
        MPI_Waitall(w, c->mreqs, MPI_STATUSES_IGNORE);
        if (c->rank == 1)
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
        else
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return;
    }
    for (int i = 0; i < w; i++) {
        if (c->o.op == PERF_OP_WRITE)
            MPI_Put(c->buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, c->win);
        else
            MPI_Get(c->buf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, c->win);
    }
    MPI_Win_flush(1, c->win);
}

/* --sliding, send: as uccl_sliding, with MPI_Isend / MPI_Irecv. (Write and
 * read keep their windows: MPI_Put and MPI_Get complete only at a flush,
 * which waits for all of them.) */
static void mpi_sliding(perf_ctx_t *c, size_t size, int iters)
{
    int w = c->o.window, n = (int)size;
    long total = (long)iters * w;

    for (long i = 0; i < total; i++) {
        MPI_Request *slot = &c->mreqs[i % w];

        if (i >= w)
            MPI_Wait(slot, MPI_STATUS_IGNORE);
        if (c->rank == 0)
            MPI_Isend(c->buf, n, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, slot);
        else
            MPI_Irecv(c->buf, n, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, slot);
    }
    MPI_Waitall((int)(total < w ? total : w), c->mreqs, MPI_STATUSES_IGNORE);
    if (c->rank == 1)
        MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
    else
        MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Passive target (lock_all + flush): rank 1 makes no call during the loop. */
double perf_mpi_phase(perf_ctx_t *c, size_t size, int iters)
{
    int one_sided = c->o.op != PERF_OP_SEND;
    double t = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == 0 || !one_sided) {
        if (one_sided)
            MPI_Win_lock_all(0, c->win);
        t = now_s();
        if (c->o.sliding && !one_sided)
            mpi_sliding(c, size, iters);
        else
            for (int i = 0; i < iters; i++)
                mpi_window(c, size);
        t = now_s() - t;
        if (one_sided)
            MPI_Win_unlock_all(c->win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return t;
}

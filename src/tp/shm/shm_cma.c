/* Cross Memory Attach: single copy between this process and the peer with
 * process_vm_readv/writev, and the connect-time probe that tells whether
 * the kernel lets us (ptrace access mode; EPERM under Yama or in sandboxes). */
#include "shm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

#define SHM_CMA_IOV_MAX 64 /* == UCCL_IOV_MAX: both sides hold at most this many */

/* Yama's ptrace_scope, or -1 without Yama. */
static int shm_yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &scope) != 1)
        scope = -1;
    fclose(f);
    return scope;
}

void uccl_shm_cma_allow_peers(const shm_tp_t *tp)
{
    /* the setting belongs to the process: say once what we did */
    static atomic_flag logged = ATOMIC_FLAG_INIT;
    int scope;

    if (tp->cma_mode == SHM_CMA_OFF)
        return;
    scope = shm_yama_scope();
    if (scope <= 0)
        return;
    if (scope >= 2) {
        if (!atomic_flag_test_and_set(&logged))
            uccl_info("shm: Yama ptrace_scope is %d: CMA only with CAP_SYS_PTRACE (probed at "
                      "connect), otherwise large transfers pipeline through the ring", scope);
        return;
    }
    if (!tp->cfg.cma_ptracer) {
        if (!atomic_flag_test_and_set(&logged))
            uccl_info("shm: Yama ptrace_scope is 1 and UCCL_SHM_CMA_PTRACER=0: peers cannot use "
                      "CMA with this process");
        return;
    }
    /* Yama 1 lets only ancestors attach, and MPI ranks are siblings; like
     * Open MPI's vader, declare any process of this user an allowed tracer
     * (process_vm_readv/writev need that permission on the peer) */
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0) {
        if (!atomic_flag_test_and_set(&logged))
            uccl_info("shm: prctl(PR_SET_PTRACER) under Yama ptrace_scope 1: %s; CMA with "
                      "peers probably not permitted", strerror(errno));
        return;
    }
    if (!atomic_flag_test_and_set(&logged))
        uccl_info("shm: Yama ptrace_scope is 1: allowed processes of this user to attach "
                  "(PR_SET_PTRACER_ANY) so that peers can copy with CMA; UCCL_SHM_CMA_PTRACER=0 "
                  "turns this off");
}

bool uccl_shm_cma_probe(shm_ep_t *ep)
{
    uint64_t value = 0;
    struct iovec local = {&value, sizeof(value)};
    struct iovec remote = {(void *)(uintptr_t)ep->peer_probe_addr, sizeof(value)};
    ssize_t n = process_vm_readv(ep->peer_pid, &local, 1, &remote, 1, 0);

    if (n == (ssize_t)sizeof(value) && value == ep->peer_probe_value)
        return true;
    if (n < 0 && errno == EPERM)
        uccl_info("shm: CMA to pid %d not permitted (EPERM); pipelining through the ring",
                  ep->peer_pid);
    else
        uccl_warn("shm: CMA probe of pid %d failed (%s); pipelining through the ring", ep->peer_pid,
                  n < 0 ? strerror(errno) : "wrong value read");
    return false;
}

int uccl_shm_req_iovec(const uccl_req_t *req, struct iovec *iov)
{
    int n = 0;

    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        iov[n].iov_base = req->iov[i].addr;
        iov[n].iov_len = req->iov[i].len;
        n++;
    }
    return n;
}

/* Drop the first done bytes of an iovec array (in place). A CMA job walks
 * raw iovec arrays, not the request cursor (uccl_req_cur_*, tp_api.h): its
 * remote side is the peer's addresses from the wire and its local side, when
 * we are the target of a write or read, a range of a region, neither of them
 * a request; and process_vm_readv/writev take the arrays themselves. */
int uccl_shm_iov_advance(struct iovec *iov, int cnt, size_t done)
{
    int i = 0;

    while (i < cnt && done >= iov[i].iov_len)
        done -= iov[i++].iov_len;
    if (i < cnt) {
        iov[i].iov_base = (char *)iov[i].iov_base + done;
        iov[i].iov_len -= done;
    }
    memmove(iov, iov + i, (size_t)(cnt - i) * sizeof(*iov));
    return cnt - i;
}

/* Trim an iovec array to len bytes. */
static int shm_iov_trim(struct iovec *iov, int cnt, size_t len)
{
    int i;

    for (i = 0; i < cnt && len > 0; i++) {
        if (iov[i].iov_len > len)
            iov[i].iov_len = len;
        len -= iov[i].iov_len;
    }
    return i;
}

/* A finished job: kept for the next one (a window's worth), else freed. */
#define SHM_CMA_SPARE_MAX 16

static void shm_cma_job_put(shm_ep_t *ep, shm_cma_job_t *job)
{
    if (ep->ncma_spare >= SHM_CMA_SPARE_MAX) {
        free(job);
        return;
    }
    uccl_list_push_front(&ep->cma_spare, &job->link);
    ep->ncma_spare++;
}

/* A large job's second half to the CMA helper (or none: own = len). The
 * helper copies without the region check progress makes before every call:
 * a target's region is held (no deregistration) until the piece is done. */
static void shm_cma_job_share(shm_ep_t *ep, shm_cma_job_t *job)
{
    uccl_region_t *region = NULL;

    job->held = NULL;
    job->hslot = -1;
    job->own = job->len;
    if (job->region_id != 0 && uccl_engine_region_find(ep->tp->base.engine, job->region_id,
                                                       job->region_addr, job->len,
                                                       &region) != UCCL_OK)
        return; /* gone already: refused at its first step */
    uccl_shm_cma_helper_split(ep, job);
    if (job->hslot >= 0 && region != NULL) {
        uccl_region_hold(region);
        job->held = region;
    }
}

/* The helper let go of the job's piece (done or cancelled). */
static void shm_cma_job_unhold(shm_cma_job_t *job)
{
    if (job->held != NULL)
        uccl_region_unhold(job->held);
    job->held = NULL;
}

uccl_status_t uccl_shm_cma_start(shm_ep_t *ep, const shm_cma_job_t *init, const struct iovec *local,
                            int lcnt, size_t loff, const shm_wire_iov_t *remote, int rcnt)
{
    shm_cma_job_t *job;

    if (lcnt > SHM_CMA_IOV_MAX || rcnt > SHM_CMA_IOV_MAX)
        return UCCL_ERR_INVALID_PARAM;
    if (ep->ncma_spare > 0) {
        job = uccl_container_of(uccl_list_pop_front(&ep->cma_spare), shm_cma_job_t, link);
        ep->ncma_spare--;
    } else {
        job = malloc(sizeof(*job));
    }
    if (job == NULL) {
        uccl_error("shm: no memory for a CMA copy of %zu bytes", init->len);
        return UCCL_ERR_NO_MEMORY;
    }
    *job = *init;
    job->done = 0;
    memcpy(job->local, local, (size_t)lcnt * sizeof(*local));
    for (int i = 0; i < rcnt; i++) {
        job->remote[i].iov_base = (void *)(uintptr_t)remote[i].addr;
        job->remote[i].iov_len = remote[i].len;
    }
    job->lcnt = shm_iov_trim(job->local, uccl_shm_iov_advance(job->local, lcnt, loff), job->len);
    job->rcnt = shm_iov_trim(job->remote, rcnt, job->len);
    shm_cma_job_share(ep, job);
    job->lcnt = shm_iov_trim(job->local, job->lcnt, job->own);
    job->rcnt = shm_iov_trim(job->remote, job->rcnt, job->own);
    uccl_list_push_back(&ep->cma_jobs, &job->link);
    return UCCL_OK;
}

/* One process_vm_readv/writev of at most max bytes (and UCCL_SHM_CMA_CHUNK). */
static uccl_status_t shm_cma_step(shm_ep_t *ep, shm_cma_job_t *job, size_t max)
{
    struct iovec lp[SHM_CMA_IOV_MAX], rp[SHM_CMA_IOV_MAX];
    size_t piece = job->own - job->done;
    shm_seg_hdr_t *hdr = ep->seg;
    int lpcnt, rpcnt, me = ep->is_initiator ? 0 : 1;
    ssize_t n;

    if (ep->tp->cfg.cma_chunk != 0 && piece > ep->tp->cfg.cma_chunk)
        piece = ep->tp->cfg.cma_chunk;
    piece = piece < max ? piece : max;
    memcpy(lp, job->local, (size_t)job->lcnt * sizeof(*lp));
    memcpy(rp, job->remote, (size_t)job->rcnt * sizeof(*rp));
    lpcnt = shm_iov_trim(lp, job->lcnt, piece);
    rpcnt = shm_iov_trim(rp, job->rcnt, piece);
    /* the close fence (shm.h): never into a peer that closed */
    /* a count: the CMA helper's calls on this connection raise it too */
    atomic_fetch_add(&hdr->cma_busy[me], 1);
    if (atomic_load(&hdr->closed[1 - me])) {
        atomic_fetch_sub(&hdr->cma_busy[me], 1);
        uccl_conn_fail(ep->base.conn, UCCL_ERR_PEER_FAILED);
        return UCCL_ERR_PEER_FAILED;
    }
    n = job->write ? process_vm_writev(ep->peer_pid, lp, (unsigned long)lpcnt, rp,
                                       (unsigned long)rpcnt, 0)
                   : process_vm_readv(ep->peer_pid, lp, (unsigned long)lpcnt, rp,
                                      (unsigned long)rpcnt, 0);
    atomic_fetch_sub(&hdr->cma_busy[me], 1);
    if (n <= 0) {
        int err = n < 0 ? errno : EFAULT;
        if (err == EINTR)
            return UCCL_OK;
        if (err == ESRCH) {
            uccl_conn_fail(ep->base.conn, UCCL_ERR_PEER_FAILED);
            return UCCL_ERR_PEER_FAILED;
        }
        uccl_error("shm: process_vm_%s with pid %d: %s", job->write ? "writev" : "readv",
                   ep->peer_pid, strerror(err));
        return UCCL_ERR_TRANSPORT;
    }
    job->done += (size_t)n;
    job->lcnt = uccl_shm_iov_advance(job->local, job->lcnt, (size_t)n);
    job->rcnt = uccl_shm_iov_advance(job->remote, job->rcnt, (size_t)n);
    return UCCL_OK;
}

/* The copy ended (st): what its kind says comes next. */
static void shm_cma_finish(shm_ep_t *ep, shm_cma_job_t *job, uccl_status_t st)
{
    switch (job->kind) {
    case SHM_CMA_RECV:
        uccl_req_complete(job->req, st, st == UCCL_OK ? job->len : 0);
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, job->peer_id, 0, st);
        break;
    case SHM_CMA_RMA:
        if (st == UCCL_OK && job->has_notif)
            st = uccl_conn_notif_push(ep->base.conn, job->notif);
        uccl_shm_ctrl_send(ep, SHM_PKT_FIN, job->peer_id, 0, st);
        break;
    case SHM_CMA_SPLIT:
        uccl_shm_split_own_done(ep, job->split, st);
        break;
    case SHM_CMA_OFFER:
        /* the request completes with the peer's FIN, which reports this too */
        uccl_shm_ctrl_send(ep, SHM_PKT_DONE, job->peer_id, 0, st);
        break;
    }
}

int uccl_shm_cma_progress(shm_ep_t *ep, shm_cma_budget_t *budget)
{
    uccl_list_t *pos = ep->cma_jobs.next;
    int events = 0;

    /* oldest first; a job whose own part is copied but not the helper's
     * waits there while the next ones go on */
    while (pos != &ep->cma_jobs && budget->calls > 0 && budget->bytes > 0) {
        shm_cma_job_t *job = uccl_container_of(pos, shm_cma_job_t, link);
        size_t before = job->done;
        uccl_region_t *region;
        uccl_status_t st = UCCL_OK;
        bool stepped = job->done < job->own;

        /* our region, target of a peer's write or read, may be gone since the last call */
        if (job->region_id != 0 && uccl_engine_region_find(ep->tp->base.engine, job->region_id,
                                                           job->region_addr, job->len, &region) != UCCL_OK)
            st = UCCL_ERR_REMOTE_ACCESS;
        else if (stepped)
            st = shm_cma_step(ep, job, budget->bytes);

        if (st == UCCL_ERR_PEER_FAILED)
            break; /* the connection fails; teardown drops the copies */
        if (st != UCCL_OK || stepped) {
            budget->calls--;
            budget->bytes -= job->done - before < budget->bytes ? job->done - before : budget->bytes;
        }
        if (st == UCCL_OK && job->done < job->own)
            continue;
        if (st != UCCL_OK) {
            uccl_shm_cma_helper_cancel(ep->tp, job); /* its memory goes back to the user */
        } else if (!uccl_shm_cma_helper_done(ep->tp, job, &st)) {
            pos = pos->next;
            continue;
        }
        shm_cma_job_unhold(job);
        if (st == UCCL_ERR_PEER_FAILED) { /* the helper's piece */
            uccl_conn_fail(ep->base.conn, UCCL_ERR_PEER_FAILED);
            break;
        }
        pos = pos->next;
        uccl_list_del(&job->link);
        shm_cma_finish(ep, job, st);
        shm_cma_job_put(ep, job);
        events++;
        if (uccl_conn_status(ep->base.conn) != UCCL_OK)
            break;
    }
    return events;
}

void uccl_shm_cma_jobs_free(shm_ep_t *ep)
{
    uccl_list_t *link;

    while ((link = uccl_list_pop_front(&ep->cma_spare)) != NULL)
        free(uccl_container_of(link, shm_cma_job_t, link));
    ep->ncma_spare = 0;

    while ((link = uccl_list_pop_front(&ep->cma_jobs)) != NULL) {
        shm_cma_job_t *job = uccl_container_of(link, shm_cma_job_t, link);
        uccl_shm_cma_helper_cancel(ep->tp, job);
        shm_cma_job_unhold(job);
        free(job);
    }
}

/* The CMA helper: one thread per shm transport that copies the second half
 * of large CMA jobs (process_vm_readv/writev) while the progress thread
 * copies the first. One process_vm_readv runs on one core and moves about
 * 8 GB/s; on 4 ranks each rank pulls 3 peers' blocks one after the other on
 * its one thread, which is what Open MPI does too. Two threads pulling at
 * once (the kernel pins the peer's pages under its mm's read lock: both
 * proceed) halve that where the host has spare cores.
 *
 * UCCL_SHM_CMA_HELPER auto (the default) uses it when this process has two
 * shm peers or more and the online CPUs number at least twice its shm peers
 * plus one (every local rank and its helper get a core), on always, off
 * never; jobs of at least UCCL_SHM_CMA_HELPER_MIN (512K) bytes are split.
 * Measured on a 64-CPU host (tests/perf/results/coll/coll11-host): on 4
 * ranks alltoall from 1 MiB took 0.45-0.93x main's time; below 512K
 * and on 2 ranks it cost time (64 KiB, 4 ranks: 30 vs 20-25 us), hence
 * the defaults. Its affinity is widened to every
 * CPU (mpirun --bind-to core leaves the process one core, which progress
 * keeps busy); where that leaves it one CPU it is not used.
 *
 * A ring of slots, filled by the progress thread at tail (a slot that is not
 * FREE there: the job is not split), copied by the helper in order. A slot
 * holds its own copies of the iovecs, the peer's pid and the segment header
 * (the close fence, shm.h), so it never touches the job; the job's owner
 * frees the slot once it is DONE, or cancels one still QUEUED (the helper
 * skips it) and waits for one RUNNING, before its memory may go. */
#include "shm.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define HELPER_SLOTS 64
#define HELPER_SPIN_NS 200000 /* spin this long after the last piece, then sleep */

enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE, SLOT_CANCELLED };

typedef struct {
    _Atomic int state;
    bool write;
    int pid, me, lcnt, rcnt;
    shm_seg_hdr_t *hdr;
    size_t len;
    uccl_status_t st;
    struct iovec local[UCCL_IOV_MAX], remote[UCCL_IOV_MAX];
} helper_slot_t;

struct shm_cma_helper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    helper_slot_t slots[HELPER_SLOTS];
    _Atomic unsigned tail; /* next slot the progress thread fills */
    unsigned head;         /* the helper's: next slot it copies */
    _Atomic int sleeping;
    _Atomic int stop;
    uint64_t spin_ns; /* 0 where the host has fewer CPUs than ranks and helpers */
    pid_t pid;        /* a forked child has no helper thread: it copies alone */
};

uccl_status_t uccl_shm_cma_helper_parse(shm_tp_t *tp)
{
    static const char *const on[] = {"1", "on", "yes", "true"};
    static const char *const off[] = {"0", "off", "no", "false"};
    const char *v = tp->cfg.cma_helper;

    tp->cma_helper_mode = -1;
    if (strcasecmp(v, "auto") == 0)
        return UCCL_OK;
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcasecmp(v, on[i]) == 0)
            tp->cma_helper_mode = 1;
        if (strcasecmp(v, off[i]) == 0)
            tp->cma_helper_mode = 0;
    }
    if (tp->cma_helper_mode >= 0)
        return UCCL_OK;
    uccl_error("UCCL_SHM_CMA_HELPER=%s: expected auto, on or off", v);
    return UCCL_ERR_INVALID_PARAM;
}

/* The piece, whole, with the close fence around every call. */
static uccl_status_t helper_copy(helper_slot_t *s)
{
    size_t done = 0;

    while (done < s->len) {
        ssize_t n;
        atomic_fetch_add(&s->hdr->cma_busy[s->me], 1);
        if (atomic_load(&s->hdr->closed[1 - s->me])) {
            atomic_fetch_sub(&s->hdr->cma_busy[s->me], 1);
            return UCCL_ERR_PEER_FAILED;
        }
        n = s->write ? process_vm_writev(s->pid, s->local, (unsigned long)s->lcnt, s->remote,
                                         (unsigned long)s->rcnt, 0)
                     : process_vm_readv(s->pid, s->local, (unsigned long)s->lcnt, s->remote,
                                        (unsigned long)s->rcnt, 0);
        atomic_fetch_sub(&s->hdr->cma_busy[s->me], 1);
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            if (err == EINTR)
                continue;
            if (err == ESRCH)
                return UCCL_ERR_PEER_FAILED;
            uccl_error("shm: CMA helper: process_vm_%s with pid %d: %s",
                       s->write ? "writev" : "readv", s->pid, strerror(err));
            return UCCL_ERR_TRANSPORT;
        }
        done += (size_t)n;
        s->lcnt = uccl_shm_iov_advance(s->local, s->lcnt, (size_t)n);
        s->rcnt = uccl_shm_iov_advance(s->remote, s->rcnt, (size_t)n);
    }
    return UCCL_OK;
}

static void *helper_main(void *arg)
{
    shm_cma_helper_t *h = arg;
    uint64_t idle_since = uccl_time_ns();
    unsigned polls = 0;

    while (!atomic_load(&h->stop)) {
        if (h->head != atomic_load_explicit(&h->tail, memory_order_acquire)) {
            helper_slot_t *s = &h->slots[h->head % HELPER_SLOTS];
            int queued = SLOT_QUEUED;
            if (atomic_compare_exchange_strong(&s->state, &queued, SLOT_RUNNING)) {
                s->st = helper_copy(s);
                atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
            } else { /* cancelled by its owner: ours to free */
                atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
            }
            h->head++;
            idle_since = uccl_time_ns();
            continue;
        }
        if (++polls % 64 != 0 || uccl_time_ns() - idle_since < h->spin_ns)
            continue;
        /* sleep: the producer publishes tail, then reads sleeping; we set
         * sleeping, then read tail (both seq_cst): one of us sees the other */
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->sleeping, 1);
        while (h->head == atomic_load(&h->tail) && !atomic_load(&h->stop))
            pthread_cond_wait(&h->cond, &h->lock);
        atomic_store(&h->sleeping, 0);
        pthread_mutex_unlock(&h->lock);
        idle_since = uccl_time_ns();
    }
    return NULL;
}

void uccl_shm_cma_helper_destroy(shm_tp_t *tp)
{
    shm_cma_helper_t *h = tp->cma_helper;

    tp->cma_helper = NULL;
    if (h == NULL)
        return;
    if (h->pid == getpid()) { /* (in a forked child the thread is the parent's: only freed) */
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->stop, 1);
        pthread_cond_signal(&h->cond);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->thread, NULL);
        pthread_cond_destroy(&h->cond);
        pthread_mutex_destroy(&h->lock);
    }
    free(h);
}

static long shm_peers(shm_tp_t *tp)
{
    return (long)uccl_list_length(&tp->eps);
}

/* First split: start the thread; false when it cannot run beside progress
 * (and then never again on this transport). */
static bool helper_start(shm_tp_t *tp)
{
    shm_cma_helper_t *h = calloc(1, sizeof(*h));
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    cpu_set_t all, got;

    if (h == NULL)
        goto off;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    h->pid = getpid();
    /* forced on an oversubscribed host (CI): sleep at once, do not spin */
    h->spin_ns = tp->online_cpus >= 2 * (shm_peers(tp) + 1) ? HELPER_SPIN_NS : 0;
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
        pthread_cond_destroy(&h->cond);
        pthread_mutex_destroy(&h->lock);
        free(h);
        goto off;
    }
    tp->cma_helper = h;
    CPU_ZERO(&all);
    for (long c = 0; c < ncpu && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    CPU_ZERO(&got);
    if (pthread_setaffinity_np(h->thread, sizeof(all), &all) != 0 ||
        pthread_getaffinity_np(h->thread, sizeof(got), &got) != 0 || CPU_COUNT(&got) < 2) {
        uccl_debug("shm: the CMA helper's affinity leaves it one CPU at most; not used");
        uccl_shm_cma_helper_destroy(tp);
        goto off;
    }
    return true;
off:
    tp->cma_helper_mode = 0;
    return false;
}

/* auto: two shm peers at least (on one peer each rank's one copy already
 * shares the work with the peer's: split CMA, the coll copy helper), and a
 * core for every local rank and its helper */
static bool helper_wanted(shm_tp_t *tp, size_t len)
{
    long peers;

    if (tp->cma_helper_mode == 0 || tp->cfg.cma_helper_min == 0 || len < tp->cfg.cma_helper_min)
        return false;
    if (tp->cma_helper_mode == 1)
        return true;
    peers = shm_peers(tp);
    return peers >= 2 && tp->online_cpus >= 2 * (peers + 1);
}

void uccl_shm_cma_helper_split(shm_ep_t *ep, shm_cma_job_t *job)
{
    shm_tp_t *tp = ep->tp;
    shm_cma_helper_t *h;
    helper_slot_t *s;
    size_t part = (job->len / 2) & ~(size_t)4095, own = job->len - part;
    unsigned t;

    job->hslot = -1;
    job->own = job->len;
    if (part == 0 || !helper_wanted(tp, job->len) || (tp->cma_helper == NULL && !helper_start(tp)))
        return;
    h = tp->cma_helper;
    if (h->pid != getpid())
        return;
    t = atomic_load_explicit(&h->tail, memory_order_relaxed);
    s = &h->slots[t % HELPER_SLOTS];
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FREE)
        return; /* ring full: progress copies it all */
    s->write = job->write;
    s->pid = ep->peer_pid;
    s->me = ep->is_initiator ? 0 : 1;
    s->hdr = ep->seg;
    s->len = part;
    memcpy(s->local, job->local, (size_t)job->lcnt * sizeof(*s->local));
    memcpy(s->remote, job->remote, (size_t)job->rcnt * sizeof(*s->remote));
    s->lcnt = uccl_shm_iov_advance(s->local, job->lcnt, own);
    s->rcnt = uccl_shm_iov_advance(s->remote, job->rcnt, own);
    atomic_store_explicit(&s->state, SLOT_QUEUED, memory_order_relaxed);
    atomic_store(&h->tail, t + 1); /* seq_cst: before reading sleeping */
    if (atomic_load(&h->sleeping)) {
        pthread_mutex_lock(&h->lock);
        pthread_cond_signal(&h->cond);
        pthread_mutex_unlock(&h->lock);
    }
    job->hslot = (int)(t % HELPER_SLOTS);
    job->own = own;
    tp->cma_helper_pieces++;
}

bool uccl_shm_cma_helper_done(shm_tp_t *tp, shm_cma_job_t *job, uccl_status_t *st)
{
    helper_slot_t *s;

    if (job->hslot < 0)
        return true;
    s = &tp->cma_helper->slots[job->hslot];
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_DONE) {
        if (tp->cma_helper->pid == getpid())
            return false;
        /* forked while the parent's helper had it: no thread here copies it */
        job->hslot = -1;
        if (*st == UCCL_OK)
            *st = UCCL_ERR_TRANSPORT;
        return true;
    }
    if (*st == UCCL_OK)
        *st = s->st;
    atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
    job->hslot = -1;
    return true;
}

void uccl_shm_cma_helper_cancel(shm_tp_t *tp, shm_cma_job_t *job)
{
    helper_slot_t *s;
    int queued = SLOT_QUEUED;

    if (job->hslot < 0)
        return;
    s = &tp->cma_helper->slots[job->hslot];
    job->hslot = -1;
    if (atomic_compare_exchange_strong(&s->state, &queued, SLOT_CANCELLED) ||
        tp->cma_helper->pid != getpid())
        return; /* the helper frees it when it gets there (a forked child has none) */
    while (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_DONE)
        sched_yield(); /* one piece: bounded by its length */
    atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
}

/* The copy helper: one thread per comm that runs a schedule's large local
 * host copies (the own block of alltoall and allgather, the in-place
 * temporary) while the calling thread moves the peers' blocks. On two ranks
 * over shm each rank copies its own block and pulls the peer's: one core did
 * both one after the other; with the helper they run at once on two cores.
 *
 * Used only where the host has a spare core for it: UCCL_COLL_COPY_THREAD
 * auto (the default) turns it on when the host's online CPUs number at least
 * twice the comm's ranks on it, 1 always, 0 never; copies of at least
 * UCCL_COLL_COPY_MIN bytes go to it. The thread's affinity is widened to
 * every CPU (mpirun --bind-to core gives the process one core, which the
 * caller's thread keeps busy); where that leaves it one CPU, it is not used.
 *
 * The queue is a ring of job slots: the producer (the comm's caller, under
 * cs->lock) fills the slot at tail and publishes tail; the helper copies the
 * jobs in order and marks each one done; the op that posted a job frees its
 * slot when it sees it done. A full ring means the copy runs inline. The
 * helper spins a while after its last job (calls come back to back), then
 * sleeps on a condition variable. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

#define HELPER_SLOTS 64
#define HELPER_SPIN_NS 200000 /* spin this long after the last job, then sleep */

enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_DONE };

typedef struct {
    void *dst;
    const void *src;
    size_t len;
    _Atomic int state;
} helper_job_t;

struct coll_helper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    helper_job_t jobs[HELPER_SLOTS];
    _Atomic unsigned tail; /* next slot the producer fills */
    unsigned head;         /* the helper's: next slot it copies */
    _Atomic int sleeping;
    _Atomic int stop;
    uint64_t spin_ns; /* 0 where the host runs more ranks than it has CPUs */
    pid_t pid;        /* a forked child has no helper thread: it copies inline */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *helper_main(void *arg)
{
    coll_helper_t *h = arg;
    uint64_t idle_since = now_ns();
    unsigned polls = 0;

    while (!atomic_load(&h->stop)) {
        if (h->head != atomic_load_explicit(&h->tail, memory_order_acquire)) {
            helper_job_t *j = &h->jobs[h->head % HELPER_SLOTS];
            memmove(j->dst, j->src, j->len);
            atomic_store_explicit(&j->state, SLOT_DONE, memory_order_release);
            h->head++;
            idle_since = now_ns();
            continue;
        }
        if (++polls % 64 != 0 || now_ns() - idle_since < h->spin_ns)
            continue;
        /* sleep: producer publishes tail, then reads sleeping; we set
         * sleeping, then read tail (both seq_cst): one of us sees the other */
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->sleeping, 1);
        while (h->head == atomic_load(&h->tail) && !atomic_load(&h->stop))
            pthread_cond_wait(&h->cond, &h->lock);
        atomic_store(&h->sleeping, 0);
        pthread_mutex_unlock(&h->lock);
        idle_since = now_ns();
    }
    return NULL;
}

/* UCCL_COLL_COPY_THREAD and UCCL_COLL_COPY_MIN (checked at engine creation,
 * src/core/core_config.c). */
static int env_mode(void) /* -1 auto, 0 off, 1 on */
{
    const char *v = getenv("UCCL_COLL_COPY_THREAD");

    if (v == NULL || *v == '\0' || strcmp(v, "auto") == 0)
        return -1;
    return strcmp(v, "0") != 0;
}

static size_t env_min(void)
{
    const char *v = getenv("UCCL_COLL_COPY_MIN");
    char *end;
    unsigned long long n;

    if (v == NULL || *v == '\0')
        return COLL_COPY_MIN_DEFAULT;
    n = strtoull(v, &end, 10);
    switch (*end) {
    case 'k': case 'K': n <<= 10; break;
    case 'm': case 'M': n <<= 20; break;
    case 'g': case 'G': n <<= 30; break;
    default: break;
    }
    return (size_t)n;
}

void uccl_coll_helper_init(coll_state_t *cs, long cpus, long local)
{
    int mode = env_mode();

    cs->copy_min = env_min();
    /* one rank alone has no transfer for a copy to overlap */
    cs->copy_helper = mode == 1 || (mode < 0 && cs->size > 1 && cpus > 0 && cpus >= 2 * local);
    cs->helper = NULL;
}

/* Start the thread (first large copy): false when it cannot run beside
 * the caller, and then never again on this comm. */
static bool helper_start(coll_state_t *cs)
{
    coll_helper_t *h = calloc(1, sizeof(*h));
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    cpu_set_t all, got;

    if (h == NULL)
        goto off;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    h->spin_ns = cs->oversubscribed ? 0 : HELPER_SPIN_NS;
    h->pid = getpid();
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) {
        pthread_cond_destroy(&h->cond);
        pthread_mutex_destroy(&h->lock);
        free(h);
        goto off;
    }
    CPU_ZERO(&all);
    for (long c = 0; c < ncpu && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    CPU_ZERO(&got);
    if (pthread_setaffinity_np(h->thread, sizeof(all), &all) != 0 ||
        pthread_getaffinity_np(h->thread, sizeof(got), &got) != 0 || CPU_COUNT(&got) < 2) {
        coll_debug("copy helper: its affinity leaves it one CPU at most; copies stay inline");
        cs->helper = h;
        uccl_coll_helper_destroy(cs);
        goto off;
    }
    cs->helper = h;
    return true;
off:
    cs->copy_helper = false;
    return false;
}

bool uccl_coll_helper_post(coll_state_t *cs, void *dst, const void *src, size_t len, int *slot)
{
    coll_helper_t *h = cs->helper;
    helper_job_t *j;
    unsigned t;

    if (!cs->copy_helper || len < cs->copy_min || (h == NULL && !helper_start(cs)))
        return false;
    h = cs->helper;
    if (h->pid != getpid())
        return false;
    t = atomic_load_explicit(&h->tail, memory_order_relaxed);
    j = &h->jobs[t % HELPER_SLOTS];
    if (atomic_load_explicit(&j->state, memory_order_acquire) != SLOT_FREE)
        return false; /* ring full: copy inline */
    j->dst = dst;
    j->src = src;
    j->len = len;
    atomic_store_explicit(&j->state, SLOT_QUEUED, memory_order_relaxed);
    atomic_store(&h->tail, t + 1); /* seq_cst: before reading sleeping */
    if (atomic_load(&h->sleeping)) {
        pthread_mutex_lock(&h->lock);
        pthread_cond_signal(&h->cond);
        pthread_mutex_unlock(&h->lock);
    }
    *slot = (int)(t % HELPER_SLOTS);
    return true;
}

bool uccl_coll_helper_done(coll_state_t *cs, int slot, bool wait)
{
    helper_job_t *j = &cs->helper->jobs[slot];

    while (atomic_load_explicit(&j->state, memory_order_acquire) != SLOT_DONE) {
        if (!wait)
            return false;
        sched_yield();
    }
    atomic_store_explicit(&j->state, SLOT_FREE, memory_order_relaxed);
    return true;
}

void uccl_coll_helper_destroy(coll_state_t *cs)
{
    coll_helper_t *h = cs->helper;

    if (h == NULL)
        return;
    if (h->pid != getpid()) { /* a forked child: the thread is the parent's */
        free(h);
        cs->helper = NULL;
        return;
    }
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->stop, 1);
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->lock);
    free(h);
    cs->helper = NULL;
}

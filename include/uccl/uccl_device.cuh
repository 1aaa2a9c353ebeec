/* libuccl device API: a kernel starts one-sided writes through a command ring
 * served by a CPU proxy (host side and memory layout: uccl_devq.h).
 *
 *   __global__ void k(uccl_devq_handle_t q, ...) {
 *       uint64_t t;
 *       if (uccl_devq_put(&q, peer, slot, loff, roff, len, 0, 0, &t) == 0)
 *           uccl_devq_wait_done(&q, t + 1);      // this write has landed
 *   }
 *
 * Every call returns 0 or a negative uccl_status_t: the ring's error word
 * (set by the proxy on a failed write or connection, a timeout, a malformed
 * command, or by uccl_devq_stop/uccl_devq_fail), or UCCL_ERR_TIMEOUT when a
 * wait saw no progress for handle.spin_timeout_ns. Nothing spins forever.
 * A put reads no host memory while the ring has room (it learns of a failure
 * when it must wait, or at the next wait); the waits always check the error
 * word. Commands put into a failed ring are never issued.
 *
 * One ring per block (or per warp group): producers of one ring share one
 * ticket counter (an atomic in device memory); each command is published by
 * its own sequence word, so producers may publish out of order and the proxy
 * still takes them in ticket order.
 *
 * Portability: the same code compiles as CUDA (nvcc), HIP (hipcc or
 * clang -x hip) and plain C11/C++ on the host, where host threads stand in
 * for kernels (the CI tests do that; the fake GPU backend's "device" memory
 * is host memory). UCCL_DEVQ_FN, the fence, the atomics, the clock and the
 * pause below are the only things that differ. */
#ifndef UCCL_UCCL_DEVICE_CUH
#define UCCL_UCCL_DEVICE_CUH

#include <uccl/uccl_devq.h>

/* ---------------------------------------------------------------- portability */

#if defined(__CUDACC__) && !defined(__HIP__)
#define UCCL_DEVQ_CUDA 1
#define UCCL_DEVQ_FN static __device__ __forceinline__
#elif defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define UCCL_DEVQ_HIP 1
#define UCCL_DEVQ_FN static __device__ inline
#else
#include <sched.h>
#include <time.h>
#define UCCL_DEVQ_HOSTSIDE 1
#define UCCL_DEVQ_FN static inline
#endif

/* Make this thread's earlier writes visible to the host before its later ones. */
UCCL_DEVQ_FN void uccl_devq_fence(void)
{
#if defined(UCCL_DEVQ_HOSTSIDE)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#else
    __threadfence_system();
#endif
}

/* Nanoseconds of a clock that runs while the thread waits. */
UCCL_DEVQ_FN uint64_t uccl_devq_now_ns(void)
{
#if defined(UCCL_DEVQ_CUDA)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(UCCL_DEVQ_HIP)
    /* s_memrealtime counts a constant 100 MHz clock on the GPUs HIP supports */
    return (uint64_t)__builtin_amdgcn_s_memrealtime() * 10u;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* Back off for about ns (at least a yield). */
UCCL_DEVQ_FN void uccl_devq_pause(uint32_t ns)
{
#if defined(UCCL_DEVQ_CUDA)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
    __nanosleep(ns);
#endif
#elif defined(UCCL_DEVQ_HIP)
    (void)ns;
    __builtin_amdgcn_s_sleep(8);
#else
    if (ns < 2000) {
        sched_yield();
    } else {
        struct timespec ts = {0, (long)ns};
        nanosleep(&ts, NULL);
    }
#endif
}

/* Atomic fetch-add on the ticket counter (device memory). */
UCCL_DEVQ_FN uint64_t uccl_devq_fetch_add(unsigned long long *p, uint64_t n)
{
#if defined(UCCL_DEVQ_HOSTSIDE)
    return __atomic_fetch_add(p, (unsigned long long)n, __ATOMIC_RELAXED);
#else
    return atomicAdd(p, (unsigned long long)n);
#endif
}

/* Load a word the proxy writes (no ordering: see uccl_devq_acquire). */
UCCL_DEVQ_FN uint64_t uccl_devq_load64(const volatile uint64_t *p)
{
#if defined(UCCL_DEVQ_HOSTSIDE)
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
    return *p;
#endif
}

UCCL_DEVQ_FN int32_t uccl_devq_load32(const volatile int32_t *p)
{
#if defined(UCCL_DEVQ_HOSTSIDE)
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
    return *p;
#endif
}

/* Order the loads before it (a word seen reaching its target) before this
 * thread's later reads and writes (the data it announces). */
UCCL_DEVQ_FN void uccl_devq_acquire(void)
{
#if defined(UCCL_DEVQ_HOSTSIDE)
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#else
    __threadfence_system();
#endif
}

/* ---------------------------------------------------------------- waiting */

/* Spin until *word >= target (*seen: the value that did it), the ring fails,
 * or the word makes no progress for spin_timeout_ns. Each poll reads the
 * word (one read of mapped memory); the error word is read every 4th poll;
 * the backoff doubles from 32 ns to 256 ns (a read of mapped memory takes
 * about a microsecond itself, so a waiting thread polls about once a
 * microsecond at most: nothing for the PCIe link; a longer pause only adds
 * to the time a completion takes to be seen). */
UCCL_DEVQ_FN int uccl_devq_wait_seen(const uccl_devq_handle_t *q, const volatile uint64_t *word,
                                     uint64_t target, uint64_t *seen_out)
{
    uint64_t seen = uccl_devq_load64(word), deadline = 0;
    uint32_t backoff = 32, polls = 0;
    int32_t err;

    while ((int64_t)(seen - target) < 0) {
        if ((polls++ & 3u) == 0) {
            err = uccl_devq_load32(&q->ctrl->error);
            if (err != 0)
                return err;
            if (deadline == 0) {
                deadline = uccl_devq_now_ns() + q->spin_timeout_ns;
            } else if (uccl_devq_now_ns() > deadline) {
                return UCCL_ERR_TIMEOUT;
            }
        }
        uccl_devq_pause(backoff);
        if (backoff < 256)
            backoff *= 2;
        uint64_t now = uccl_devq_load64(word);
        if (now != seen) { /* progress: the bound restarts */
            seen = now;
            deadline = 0;
        }
    }
    uccl_devq_acquire();
    if (seen_out)
        *seen_out = seen;
    return 0;
}

UCCL_DEVQ_FN int uccl_devq_wait_word(const uccl_devq_handle_t *q, const volatile uint64_t *word,
                                     uint64_t target)
{
    return uccl_devq_wait_seen(q, word, target, 0);
}

/* The ring's error word (0 while it works). */
UCCL_DEVQ_FN int uccl_devq_error(const uccl_devq_handle_t *q)
{
    return uccl_devq_load32(&q->ctrl->error);
}

/* Wait until the first target commands (tickets below target) completed:
 * their bytes are in the peer's memory. Returns the error word if the ring
 * failed meanwhile (commands put into a failed ring never complete). */
UCCL_DEVQ_FN int uccl_devq_wait_done(const uccl_devq_handle_t *q, uint64_t target)
{
    return uccl_devq_wait_word(q, &q->ctrl->done, target);
}

/* Wait until notification counter index reached target (consumer side). */
UCCL_DEVQ_FN int uccl_devq_wait_counter(const uccl_devq_handle_t *q, uint32_t index, uint64_t target)
{
    if (q->counters == 0 || index >= q->ncounters)
        return UCCL_ERR_INVALID_PARAM;
    return uccl_devq_wait_word(q, &q->counters[index], target);
}

/* ---------------------------------------------------------------- producing */

/* Take n consecutive tickets and wait until their entries are free (the ring
 * full: spin with backoff). *ticket is the first. The fast path reads no
 * mapped memory: the last tail a producer saw is cached in device memory,
 * and the error word is read only when the ring looks full (a put into a
 * failed ring with room succeeds; its wait_done returns the error). */
UCCL_DEVQ_FN int uccl_devq_reserve(const uccl_devq_handle_t *q, uint32_t n, uint64_t *ticket)
{
    volatile unsigned long long *cache = q->tail_cache;
    uint64_t need, seen = 0;
    int err;

    if (n == 0 || n > q->mask + 1u)
        return UCCL_ERR_INVALID_PARAM;
    *ticket = uccl_devq_fetch_add(q->head, n);
    /* entry t is free once the proxy took ticket t - entries */
    need = *ticket + n - (q->mask + 1u);
    if ((int64_t)((uint64_t)*cache - need) >= 0)
        return 0;
    err = uccl_devq_wait_seen(q, &q->ctrl->tail, need, &seen);
    if (err == 0) {
        *cache = seen; /* any tail seen is a safe bound, even if older than the cache */
        return 0;
    }
    /* the tickets taken will never be published: the ring is dead, also
     * for a start after the stop that canceled this put (ctrl->lost) */
    if (err == UCCL_ERR_TIMEOUT && q->ctrl->error == 0)
        q->ctrl->error = UCCL_ERR_TIMEOUT;
    q->ctrl->lost = 1;
    uccl_devq_fence();
    return err;
}

/* Fill the entry of ticket (reserved) without publishing it. */
UCCL_DEVQ_FN void uccl_devq_write(const uccl_devq_handle_t *q, uint64_t ticket, uint32_t peer,
                                  uint32_t slot, uint64_t local_off, uint64_t remote_off,
                                  uint64_t len, uint32_t flags, uint64_t notif)
{
    volatile uccl_devq_cmd_t *e = &q->cmds[ticket & q->mask];

    if (peer > 0xffffu || slot > 0xffffu) /* the ticket is taken: publish it, refused */
        flags |= UCCL_DEVQ_CMD_BAD_INDEX;
    e->local_off = local_off;
    e->remote_off = remote_off;
    e->notif = notif;
    e->len = len;
    e->peer = (uint16_t)peer;
    e->slot = (uint16_t)slot;
    e->flags = flags;
}

/* Publish the entry of ticket: its fields become visible before its
 * sequence word. */
UCCL_DEVQ_FN void uccl_devq_publish(const uccl_devq_handle_t *q, uint64_t ticket)
{
    volatile uccl_devq_cmd_t *e = &q->cmds[ticket & q->mask];

    uccl_devq_fence();
#if defined(UCCL_DEVQ_HOSTSIDE)
    __atomic_store_n(&e->seq, (uint32_t)(ticket + 1), __ATOMIC_RELEASE);
#else
    e->seq = (uint32_t)(ticket + 1);
#endif
}

/* One command from this thread. *ticket (may be NULL) is its ticket: the
 * write has landed when the done word exceeds it. */
UCCL_DEVQ_FN int uccl_devq_put(const uccl_devq_handle_t *q, uint32_t peer, uint32_t slot,
                               uint64_t local_off, uint64_t remote_off, uint64_t len,
                               uint32_t flags, uint64_t notif, uint64_t *ticket)
{
    uint64_t t;
    int err = uccl_devq_reserve(q, 1, &t);

    if (err != 0)
        return err;
    uccl_devq_write(q, t, peer, slot, local_off, remote_off, len, flags, notif);
    uccl_devq_publish(q, t);
    if (ticket)
        *ticket = t;
    return 0;
}

#if defined(UCCL_DEVQ_CUDA)
/* One command per active lane of the warp, with one ticket reservation for
 * all of them (consecutive tickets in lane order, so the proxy can batch
 * them into one vectored write). *ticket is the lane's own. CUDA only; HIP
 * and host code use uccl_devq_put. */
UCCL_DEVQ_FN int uccl_devq_put_warp(const uccl_devq_handle_t *q, uint32_t peer, uint32_t slot,
                                    uint64_t local_off, uint64_t remote_off, uint64_t len,
                                    uint32_t flags, uint64_t notif, uint64_t *ticket)
{
    unsigned active = __activemask();
    int lane = (int)(threadIdx.x & 31u), leader = __ffs(active) - 1;
    unsigned n = (unsigned)__popc(active), rank = (unsigned)__popc(active & ((1u << lane) - 1u));
    uint64_t first = 0;
    int err = 0;

    if (lane == leader)
        err = uccl_devq_reserve(q, n, &first);
    err = __shfl_sync(active, err, leader);
    first = (uint64_t)__shfl_sync(active, (unsigned long long)first, leader);
    if (err != 0)
        return err;
    uccl_devq_write(q, first + rank, peer, slot, local_off, remote_off, len, flags, notif);
    uccl_devq_publish(q, first + rank);
    if (ticket)
        *ticket = first + rank;
    return 0;
}
#endif

#endif /* UCCL_UCCL_DEVICE_CUH */

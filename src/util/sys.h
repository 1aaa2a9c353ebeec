/* Clock, hashing, randomness and host identity (sys.c). */
#ifndef UCCL_UTIL_SYS_H
#define UCCL_UTIL_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Monotonic milliseconds. */
uint64_t uccl_time_ms(void);
/* The same clock in nanoseconds. */
uint64_t uccl_time_ns(void);
/* The same clock at the kernel tick's resolution (1-4 ms late at most), for
 * what runs on every progress round: a memory read, not a TSC read. */
uint64_t uccl_time_ms_coarse(void);
/* A deadline timeout_ms from now on the coarse clock: uccl_time_ms_coarse()
 * >= it only once at least timeout_ms have passed (a tick and a millisecond
 * of margin for the coarse clock's lag), at most about two ticks after. */
uint64_t uccl_deadline_coarse_ms(uint64_t timeout_ms);

/* The deadline of a wait that tests it in a loop. From UCCL_DEADLINE_COARSE_MS
 * on it is kept on the coarse clock: a precise clock_gettime is a system
 * call where the kernel does not trust the TSC (emulated and some virtual
 * CPUs: HPET), the coarse clock a memory read everywhere; a shorter one on
 * the precise clock, so that a wait of a few ms is not 2-20 ms late (at
 * most 1 ms: whole milliseconds). */
#define UCCL_DEADLINE_COARSE_MS 100
typedef struct {
    uint64_t at_ms;
    bool coarse;
} uccl_deadline_t;

static inline uccl_deadline_t uccl_deadline_in(uint64_t timeout_ms)
{
    bool coarse = timeout_ms >= UCCL_DEADLINE_COARSE_MS;

    /* + 1: uccl_time_ms drops up to 1 ms; none for 0, passed at once (a
     * zero timeout polls once) */
    return (uccl_deadline_t){coarse ? uccl_deadline_coarse_ms(timeout_ms)
                                    : uccl_time_ms() + timeout_ms + (timeout_ms > 0),
                             coarse};
}

static inline bool uccl_deadline_passed(const uccl_deadline_t *d)
{
    return (d->coarse ? uccl_time_ms_coarse() : uccl_time_ms()) >= d->at_ms;
}

uint32_t uccl_fnv1a32(const void *data, size_t len);
/* A non-zero random value (getrandom, else time and pid). */
uint64_t uccl_random_u64(void);
/* Hostname into hostname[len] and a 64-bit identity of this host (hostname
 * and boot id): equal values mean the same host and kernel. A non-empty
 * override (UCCL_HOST_ID, test use) names a host of its own instead; the
 * hostname is the real one either way. */
uint64_t uccl_host_id(char *hostname, size_t len, const char *override);

/* Whether process pid can no longer run: it does not exist, or it is a
 * zombie (it exited and its parent has not reaped it yet: kill(pid, 0)
 * still succeeds, but it copies nothing any more). */
bool uccl_pid_gone(int pid);

struct sockaddr_in;
/* bind(fd) to sa's address on the first free port of lo..hi (UCCL_PORT_RANGE),
 * or to sa as it is when lo is 0. 0, else -1 with errno (EADDRINUSE: every
 * port of the range is taken). */
int uccl_bind_port_range(int fd, struct sockaddr_in *sa, int lo, int hi);

#endif

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

/* Clock, hashing, randomness and host identity. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/sys.h"

uint64_t uccl_time_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t uccl_time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t uccl_time_ms_coarse(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t uccl_deadline_coarse_ms(uint64_t timeout_ms)
{
    /* the coarse clock's resolution rounded up, + 1 ms for the whole
     * milliseconds: it lags the precise clock by less than a tick, and
     * uccl_time_ms_coarse drops up to 1 ms more */
    static _Atomic uint64_t tick_ms;
    uint64_t tick = atomic_load_explicit(&tick_ms, memory_order_relaxed);

    if (tick == 0) {
        struct timespec res;

        tick = 10; /* HZ=100, the coarsest Linux has, if the kernel cannot say */
        if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0)
            tick = ((uint64_t)res.tv_nsec + 999999u) / 1000000u + 1;
        atomic_store_explicit(&tick_ms, tick, memory_order_relaxed);
    }
    return uccl_time_ms_coarse() + timeout_ms + tick;
}

uint32_t uccl_fnv1a32(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static uint64_t fnv1a64(const void *data, size_t len, uint64_t h)
{
    const uint8_t *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t uccl_random_u64(void)
{
    uint64_t v = 0;
    struct timespec ts;

    if (getrandom(&v, sizeof(v), 0) == (ssize_t)sizeof(v) && v != 0)
        return v;
    /* getrandom unavailable: time and pid still make restarts distinct */
    clock_gettime(CLOCK_REALTIME, &ts);
    v = fnv1a64(&ts, sizeof(ts), 14695981039346656037ull);
    v = fnv1a64(&(pid_t){getpid()}, sizeof(pid_t), v);
    return v ? v : 1;
}

/* Same hostname and same boot id = same host (and same kernel, so CMA and
 * shared memory can work between the two). An override names a host of its
 * own: the hash is salted so that no override equals a real identity. */
uint64_t uccl_host_id(char *hostname, size_t len, const char *override)
{
    char boot_id[64] = "";
    uint64_t h = 14695981039346656037ull;
    FILE *f;

    if (gethostname(hostname, len - 1) != 0)
        snprintf(hostname, len, "unknown");
    hostname[len - 1] = '\0';
    if (override != NULL && override[0] != '\0') {
        h = fnv1a64("UCCL_HOST_ID=", 13, h);
        return fnv1a64(override, strlen(override), h);
    }
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot_id, sizeof(boot_id), f) == NULL)
            boot_id[0] = '\0';
        fclose(f);
    }
    h = fnv1a64(hostname, strlen(hostname), h);
    h = fnv1a64(boot_id, strlen(boot_id), h);
    return h;
}

int uccl_bind_port_range(int fd, struct sockaddr_in *sa, int lo, int hi)
{
    if (lo == 0)
        return bind(fd, (struct sockaddr *)sa, sizeof(*sa));
    for (int port = lo; port <= hi; port++) {
        sa->sin_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) == 0)
            return 0;
        if (errno != EADDRINUSE)
            return -1;
    }
    errno = EADDRINUSE;
    return -1;
}

bool uccl_pid_gone(int pid)
{
    char path[64], stat[256], *close_paren;
    FILE *f;
    size_t n;

    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    /* /proc/PID/stat: "pid (comm) S ...": comm may hold ')' and spaces,
     * so the state is the letter after the last ')' */
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT;
    n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    close_paren = strrchr(stat, ')');
    return close_paren != NULL && close_paren[1] == ' ' &&
           (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

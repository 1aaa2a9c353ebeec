/* What the device queue tests share (t_devq on host threads, b_devq with
 * CUDA kernels): a forked peer process reached over a socketpair (addresses
 * and descriptors go through it, then the verdict), and the deterministic
 * mixed-size command sequence both sides recompute: command k of producer t
 * copies len bytes from local offset loff of the source pattern to remote
 * offset roff, in t's own stripe of maxlen-byte cells. */
#ifndef UCCL_TESTS_GPU_DEVQ_PAIR_H
#define UCCL_TESTS_GPU_DEVQ_PAIR_H

#include <stdint.h>

#if defined(__CUDACC__)
#define DQ_HD __host__ __device__ inline
#else
#define DQ_HD static inline
#endif

#define DQ_LOCAL (1u << 20) /* source region of the sender */

typedef struct dq_cmd {
    uint64_t loff, roff, len;
} dq_cmd_t;

DQ_HD uint64_t dq_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Byte i of the sender's source region. */
DQ_HD uint8_t dq_pattern(uint64_t i)
{
    return (uint8_t)(i * 131u + (i >> 9) * 7u + 1u);
}

DQ_HD void dq_cmd(uint32_t t, uint32_t k, uint32_t per_thread, uint32_t maxlen, dq_cmd_t *c)
{
    uint64_t r = dq_mix(((uint64_t)t << 32) | k);

    c->len = 1 + r % maxlen;
    c->loff = (r >> 24) % (DQ_LOCAL - c->len + 1);
    c->roff = ((uint64_t)t * per_thread + k) * maxlen;
}

#if !defined(__CUDACC__)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static inline int dq_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static inline int dq_recv(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Check a receiver's stripes: every command's bytes, and zero between them.
 * Returns the number of bad commands (prints the first few). */
static inline long dq_verify(const uint8_t *dst, uint32_t nthreads, uint32_t per_thread, uint32_t maxlen)
{
    long bad = 0;

    for (uint32_t t = 0; t < nthreads; t++)
        for (uint32_t k = 0; k < per_thread; k++) {
            dq_cmd_t c;
            const uint8_t *d;
            int ok = 1;

            dq_cmd(t, k, per_thread, maxlen, &c);
            d = dst + c.roff;
            for (uint64_t i = 0; i < c.len && ok; i++)
                ok = d[i] == dq_pattern(c.loff + i);
            for (uint64_t i = c.len; i < maxlen && ok; i++)
                ok = d[i] == 0;
            if (!ok && bad++ < 5)
                printf("FAIL: producer %u command %u (%llu bytes from %llu to %llu) landed wrong\n", t,
                       k, (unsigned long long)c.len, (unsigned long long)c.loff,
                       (unsigned long long)c.roff);
        }
    return bad;
}
#endif

#endif

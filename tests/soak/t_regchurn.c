/* Registration churn (issue 20): REGCHURN_CALLS (default 10^5) register /
 * deregister pairs of random sizes (1 B .. 1 MiB) at random, overlapping
 * offsets of a 64 MiB buffer, up to 64 registrations alive at once, with
 * the registration cache on and off (UCCL_RCACHE). The cost of a call must
 * stay flat: the median cost per call of the last 10^4 pairs within 1.2x
 * that of the first 10^4 (medians: a loaded machine's scheduling spikes
 * are not the library's). Prints one benchmark row per mode:
 *   regchurn rcache=N calls first10k_med_us last10k_med_us ratio mean_ratio
 * and exits 1 when a ratio is above 1.2 or any call failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl.h>

#define BUF (64u << 20)
#define LIVE 64
#define WINDOW 10000

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return (double)v[n / 2] / 1000.0;
}

static double mean_us(const uint64_t *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i];
    return s / (double)n / 1000.0;
}

/* One mode: returns 0 when flat and every call succeeded. */
static int churn(const char *rcache, long calls, uint8_t *buf)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "shm,tcp"};
    uccl_mr_t *live[LIVE] = {NULL};
    uint64_t *cost = calloc((size_t)calls, sizeof(*cost));
    double first, last, mfirst, mlast;
    uccl_engine_t *e;
    long failed = 0;

    setenv("UCCL_RCACHE", rcache, 1);
    if (cost == NULL || uccl_engine_create(&p, &e) != UCCL_OK) {
        printf("FAIL: regchurn: engine\n");
        return 1;
    }
    for (long i = 0; i < calls; i++) {
        int slot = (int)(rng() % LIVE);
        /* overlapping ranges: offsets on a coarse grid so that the same
         * range comes back now and then (the cache's hits) */
        size_t len = 1 + (size_t)(rng() % (1u << 20));
        size_t off = (size_t)(rng() % 4096) * ((BUF - (1u << 20)) / 4096);
        uint64_t t0 = now_ns();

        if (live[slot] != NULL && uccl_mr_dereg(live[slot]) != UCCL_OK)
            failed++;
        live[slot] = NULL;
        if (uccl_mr_reg(e, buf + off, len, 0, &live[slot]) != UCCL_OK)
            failed++;
        cost[i] = now_ns() - t0;
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i] != NULL && uccl_mr_dereg(live[i]) != UCCL_OK)
            failed++;
    uccl_engine_destroy(e);
    unsetenv("UCCL_RCACHE");
    mfirst = mean_us(cost, WINDOW);
    mlast = mean_us(cost + calls - WINDOW, WINDOW);
    first = median_us(cost, WINDOW);
    last = median_us(cost + calls - WINDOW, WINDOW);
    printf("regchurn rcache=%s calls=%ld first10k_med_us=%.2f last10k_med_us=%.2f ratio=%.2f "
           "(means %.2f / %.2f us, ratio %.2f) failed=%ld\n",
           rcache, calls, first, last, last / first, mfirst, mlast, mlast / mfirst, failed);
    free(cost);
    return failed != 0 || last > 1.2 * first;
}

int main(void)
{
    const char *n = getenv("REGCHURN_CALLS");
    long calls = n ? atol(n) : 100000;
    uint8_t *buf = malloc(BUF);
    int rc;

    if (calls < 2 * WINDOW || buf == NULL) {
        printf("FAIL: regchurn: REGCHURN_CALLS must be >= %d\n", 2 * WINDOW);
        return 1;
    }
    memset(buf, 1, BUF); /* mapped: registration checks the range */
    rc = churn("1", calls, buf);
    rc |= churn("0", calls, buf);
    free(buf);
    printf("%s: registration churn, cost per call flat within 1.2x (cache on and off)\n",
           rc ? "FAIL" : "PASS");
    return rc;
}

/* libuccl's memory under a long loop of windows (session 16, rss16): the
 * request pool grows to the window's high-water mark at the first window and
 * the shm rings' pages become resident over their first lap, then the heap,
 * the pools and RSS stay flat however many windows follow, and connections
 * made and closed again and again leave nothing behind. Windows of 16 writes
 * of 1 KiB (the Python leak tests' loop), bytes compared. Heap from mallinfo2
 * (every arena, mmapped chunks included), pools from their own counters. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_conn.h"

#define LEN 1024u
#define WINDOW 16
#define RING (4u << 20)
/* one lap of both rings: a write takes 128 bytes of one and 64 of the other */
#define WARMUP (RING / (64 * WINDOW) + 500)
#define ROUNDS 10000
#define SLACK_KIB 256 /* stdio, CUnit, the kernel's accounting of a few pages */

/* Bytes malloc handed out and still holds for the program (all arenas). */
static size_t heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* Objects a pool holds and objects of it in use (not on its free list). */
static size_t pool_held(const uccl_pool_t *pool) { return pool->allocated; }
static size_t pool_used(const uccl_pool_t *pool)
{
    return pool->allocated - uccl_list_length(&pool->free_list);
}

/* Requests and connections of both engines, held (f = pool_held) or in use
 * (pool_used): a leak of one object in a thousand shows in the second long
 * before the first grows. */
static long pools(const unit_pair_t *p, size_t (*f)(const uccl_pool_t *))
{
    return (long)(f(&p->a->req_pool) + f(&p->b->req_pool) + f(&p->a->conn_pool) +
                  f(&p->b->conn_pool));
}

/* n windows of WINDOW writes from src to dst's region; the last window's
 * bytes (seed n) compared. */
static bool windows(unit_pair_t *p, uccl_mr_t *ms, const uccl_rdesc_t *desc, uint8_t *src,
                    const uint8_t *dst, int n)
{
    uccl_req_t *reqs[WINDOW];

    for (int w = 0; w < n; w++) {
        if (w == n - 1)
            unit_fill(src, LEN, (unsigned)n);
        for (int i = 0; i < WINDOW; i++)
            if (uccl_write(p->ab, ms, 0, LEN, desc, 0, &reqs[i]) != UCCL_OK)
                return false;
        if (unit_drive(p, reqs, WINDOW, UNIT_TIMEOUT_MS) != UCCL_OK)
            return false;
        for (int i = 0; i < WINDOW; i++) {
            bool ok = uccl_wait(reqs[i], 0) == UCCL_OK;
            uccl_req_free(reqs[i]);
            if (!ok)
                return false;
        }
    }
    return unit_mismatches(dst, LEN, (unsigned)n) == 0;
}

static void test_windows_flat(void)
{
    unit_pair_t p;
    uint8_t *src = calloc(1, LEN), *dst = calloc(1, LEN);
    uccl_mr_t *ms = NULL, *md = NULL;
    uccl_rdesc_t desc;
    size_t heap0;
    long held0, used0, rss_start, rss0, grown;

    CU_ASSERT_FATAL(src != NULL && dst != NULL);
    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, src, LEN, 0, &ms), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, dst, LEN, 0, &md), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(md, 0, LEN, &desc), UCCL_OK);
    rss_start = unit_rss_kib();
    CU_ASSERT_FATAL(windows(&p, ms, &desc, src, dst, WARMUP));
    /* one chunk of 256 requests holds a window of 16 */
    CU_ASSERT_EQUAL(p.a->req_pool.allocated, 256);
    heap0 = heap_bytes();
    held0 = pools(&p, pool_held);
    used0 = pools(&p, pool_used);
    rss0 = unit_rss_kib();
    CU_ASSERT_FATAL(windows(&p, ms, &desc, src, dst, ROUNDS));
    grown = unit_rss_kib() - rss0;
    printf(" [%s: warm-up of %d windows +%ld KiB RSS; then %d windows: heap %+ld B, pooled "
           "objects held %+ld, in use %+ld, RSS %+ld KiB] ", unit_tp, WARMUP, rss0 - rss_start,
           ROUNDS, (long)(heap_bytes() - heap0), pools(&p, pool_held) - held0,
           pools(&p, pool_used) - used0, grown);
    CU_ASSERT_EQUAL(pools(&p, pool_held), held0);
    CU_ASSERT_EQUAL(pools(&p, pool_used), used0);
#ifndef UNIT_SANITIZED /* ASan's allocator: mallinfo2 and RSS measure it, not libuccl */
    CU_ASSERT(heap_bytes() <= heap0 + 4096);
    CU_ASSERT(grown < SLACK_KIB);
    /* both rings, mapped by both engines of this process, and one chunk of
     * requests per engine: the warm-up's growth has that bound */
    CU_ASSERT(rss0 - rss_start < (long)(4 * RING / 1024) + 2 * 1024 + SLACK_KIB);
#endif
out:
    unit_pair_close(&p);
    free(src);
    free(dst);
}

/* 40 connections made, used for 300 windows and closed, one after the
 * other, between the same two engines: the heap, the pools and RSS after
 * the tenth are those after the last. */
static void test_connections_flat(void)
{
    unit_pair_t p = {0};
    uint8_t *src = calloc(1, LEN), *dst = calloc(1, LEN);
    uccl_mr_t *ms = NULL, *md = NULL;
    uccl_rdesc_t desc;
    size_t heap0 = 0;
    long held0 = 0, used0 = 0, rss0 = 0;

    CU_ASSERT_FATAL(src != NULL && dst != NULL);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &p.a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &p.b), UCCL_OK);
    if (p.a == NULL || p.b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, src, LEN, 0, &ms), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, dst, LEN, 0, &md), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(md, 0, LEN, &desc), UCCL_OK);
    for (int round = 0; round < 40; round++) {
        if (round == 10) {
            heap0 = heap_bytes();
            held0 = pools(&p, pool_held);
            used0 = pools(&p, pool_used);
            rss0 = unit_rss_kib();
        }
        UNIT_ASSERT_STATUS(unit_connect(p.a, p.b, &p.ab, &p.ba), UCCL_OK);
        CU_ASSERT_FATAL(windows(&p, ms, &desc, src, dst, 300));
        UNIT_ASSERT_STATUS(uccl_conn_close(p.ab), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_conn_close(p.ba), UCCL_OK);
        for (int i = 0; i < 100; i++) { /* let both ends finish closing */
            uccl_engine_progress(p.a);
            uccl_engine_progress(p.b);
        }
    }
    printf(" [%s: 30 more connections: heap %+ld B, pooled objects held %+ld, in use %+ld, RSS "
           "%+ld KiB] ", unit_tp, (long)(heap_bytes() - heap0), pools(&p, pool_held) - held0,
           pools(&p, pool_used) - used0, unit_rss_kib() - rss0);
    CU_ASSERT_EQUAL(pools(&p, pool_held), held0);
    CU_ASSERT_EQUAL(pools(&p, pool_used), used0);
#ifndef UNIT_SANITIZED
    CU_ASSERT(heap_bytes() <= heap0 + 4096);
    CU_ASSERT(unit_rss_kib() - rss0 < SLACK_KIB);
#endif
out:
    unit_pair_close(&p);
    free(src);
    free(dst);
}

static CU_TestInfo tests[] = {
    {"10^4 windows of 16 writes after one ring lap: heap, pools, RSS flat", test_windows_flat},
    {"connections made, used and closed: heap, pools, RSS flat", test_connections_flat},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_SHM_RING_SIZE", "4M", 1);
    return unit_main_tp("steady_mem", tests, NULL, NULL);
}

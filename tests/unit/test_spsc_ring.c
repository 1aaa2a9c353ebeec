/* Unit tests of the shared SPSC record ring (src/tp/common/spsc_ring.c)
 * that shm and gpu_ipc use: records in order over many wraps at 8- and
 * 64-byte alignment, PAD records never seen, a full ring refusing and then
 * taking more, every kind of garbage the peer can leave refused, and a
 * producer and a consumer thread moving 100000 records with their bytes
 * checked. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tp/common/spsc_ring.h"
#include "unit.h"

#define CAP 4096

static void *ring_mem(void)
{
    void *m = aligned_alloc(64, uccl_spsc_footprint(CAP));

    memset(m, 0xa5, uccl_spsc_footprint(CAP)); /* attach with init must not care */
    return m;
}

static size_t rec_len(unsigned k) { return 8 + (k * 37) % 300; }

static void order(size_t align)
{
    void *mem = ring_mem();
    uccl_spsc_t tx, rx;
    unsigned sent = 0, got = 0;
    bool ok = true;

    uccl_spsc_attach(&tx, mem, CAP, align, true, true);
    uccl_spsc_attach(&rx, mem, CAP, align, false, false);
    while (got < 2000 && ok) {
        uint8_t *p;
        const uint8_t *q;
        uccl_spsc_hdr_t h;
        bool bad;

        while (sent < 2000 && (p = uccl_spsc_reserve(&tx, rec_len(sent))) != NULL) {
            uccl_spsc_hdr_t w = {100 + sent % 5, (uint32_t)rec_len(sent)};
            ok = ok && ((uintptr_t)p % align) == 0;
            memcpy(p, &w, sizeof(w));
            memset(p + 8, (int)(sent & 0xff), rec_len(sent) - 8);
            uccl_spsc_commit(&tx, rec_len(sent));
            sent++;
        }
        while ((q = uccl_spsc_peek(&rx, &h, &bad)) != NULL) {
            ok = ok && h.type == 100 + got % 5 && h.size == rec_len(got);
            for (size_t i = 8; ok && i < h.size; i++)
                ok = q[i] == (uint8_t)(got & 0xff);
            uccl_spsc_release(&rx, h.size);
            got++;
        }
        ok = ok && !bad;
    }
    CU_ASSERT(ok && got == 2000 && uccl_spsc_empty(&rx));
    CU_ASSERT(atomic_load(&tx.ctl->head) > 20 * CAP); /* many wraps */
    free(mem);
}

static void test_order8(void) { order(8); }
static void test_order64(void) { order(64); }

static void test_full(void)
{
    void *mem = ring_mem();
    uccl_spsc_t tx, rx;
    uccl_spsc_hdr_t h, w = {7, 512};
    bool bad;
    int n = 0;
    void *p;

    uccl_spsc_attach(&tx, mem, CAP, 64, true, true);
    uccl_spsc_attach(&rx, mem, CAP, 64, false, false);
    CU_ASSERT_PTR_NULL(uccl_spsc_reserve(&tx, CAP / 2 + 1)); /* over half the ring */
    CU_ASSERT_PTR_NULL(uccl_spsc_reserve(&tx, 4));           /* under a header */
    while ((p = uccl_spsc_reserve(&tx, 512)) != NULL) {
        memcpy(p, &w, sizeof(w));
        uccl_spsc_commit(&tx, 512);
        n++;
    }
    CU_ASSERT_EQUAL(n, CAP / 512);
    CU_ASSERT_PTR_NOT_NULL(uccl_spsc_peek(&rx, &h, &bad));
    uccl_spsc_release(&rx, h.size);
    CU_ASSERT_PTR_NOT_NULL(uccl_spsc_reserve(&tx, 512)); /* room again */
    free(mem);
}

/* Garbage at the consumer: peek refuses it (bad) and reads nothing beyond. */
static void test_garbage(void)
{
    struct {
        const char *what;
        uint32_t size;
        uint64_t adv;
    } cases[] = {
        {"size under a header", 4, 8},
        {"size beyond what head covers", 200, 64},
        {"size beyond the ring's end", CAP + 64, CAP},
        {"head less than a header ahead", 8, 4},
        {"head more than the ring ahead", 8, CAP + 64},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *mem = ring_mem();
        uccl_spsc_t tx, rx;
        uccl_spsc_hdr_t h = {9, cases[i].size};
        bool bad = false;

        uccl_spsc_attach(&tx, mem, CAP, 8, true, true);
        uccl_spsc_attach(&rx, mem, CAP, 8, false, false);
        memcpy(tx.data, &h, sizeof(h));
        atomic_store(&tx.ctl->head, cases[i].adv);
        CU_ASSERT_PTR_NULL(uccl_spsc_peek(&rx, &h, &bad));
        if (!bad)
            printf("\n    not refused: %s ", cases[i].what);
        CU_ASSERT(bad);
        free(mem);
    }
}

/* ---- two threads */

#define NREC 100000

static void *producer(void *arg)
{
    uccl_spsc_t *tx = arg;

    for (unsigned k = 0; k < NREC;) {
        uint8_t *p = uccl_spsc_reserve(tx, rec_len(k));
        uccl_spsc_hdr_t w = {1 + k % 3, (uint32_t)rec_len(k)};

        if (p == NULL)
            continue;
        memcpy(p, &w, sizeof(w));
        for (size_t i = 8; i < w.size; i++)
            p[i] = (uint8_t)(k + i);
        uccl_spsc_commit(tx, w.size);
        k++;
    }
    return NULL;
}

static void test_threads(void)
{
    void *mem = ring_mem();
    uccl_spsc_t tx, rx;
    pthread_t t;
    unsigned got = 0;
    bool ok = true, bad = false;

    uccl_spsc_attach(&tx, mem, CAP, 64, true, true);
    uccl_spsc_attach(&rx, mem, CAP, 64, false, false);
    CU_ASSERT_FATAL(pthread_create(&t, NULL, producer, &tx) == 0);
    while (got < NREC && ok && !bad) {
        uccl_spsc_hdr_t h;
        const uint8_t *q = uccl_spsc_peek(&rx, &h, &bad);

        if (q == NULL)
            continue;
        ok = h.type == 1 + got % 3 && h.size == rec_len(got);
        for (size_t i = 8; ok && i < h.size; i++)
            ok = q[i] == (uint8_t)(got + i);
        uccl_spsc_release(&rx, h.size);
        got++;
    }
    pthread_join(t, NULL);
    CU_ASSERT(ok && !bad && got == NREC);
    free(mem);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"records in order over many wraps (8-aligned)", test_order8},
        {"records in order over many wraps (64-aligned)", test_order64},
        {"a full ring refuses, then takes more", test_full},
        {"garbage sizes and indexes are refused", test_garbage},
        {"producer and consumer threads", test_threads},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"spsc_ring", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

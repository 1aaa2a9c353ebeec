/* Unit tests of the u64 -> object hash map (src/util/hmap.c): put, get,
 * replace and delete are exact for any key (0 and UINT64_MAX included),
 * keys that collide in their low bits (a peer's dense ids, strided keys)
 * stay findable after deletions in the middle of probe runs, and a random
 * workload matches a plain array model step by step. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/hmap.h"
#include "unit.h"

static void test_basic(void)
{
    uccl_hmap_t m;
    int a, b, c;

    uccl_hmap_init(&m);
    CU_ASSERT_PTR_NULL(uccl_hmap_get(&m, 0));
    CU_ASSERT_PTR_NULL(uccl_hmap_del(&m, 0));
    UNIT_ASSERT_STATUS(uccl_hmap_put(&m, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_hmap_put(&m, UINT64_MAX, &b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_hmap_put(&m, 42, &c), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_hmap_put(&m, 43, NULL), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(uccl_hmap_count(&m), 3);
    CU_ASSERT_PTR_EQUAL(uccl_hmap_get(&m, 0), &a);
    CU_ASSERT_PTR_EQUAL(uccl_hmap_get(&m, UINT64_MAX), &b);
    CU_ASSERT_PTR_EQUAL(uccl_hmap_get(&m, 42), &c);
    CU_ASSERT_PTR_NULL(uccl_hmap_get(&m, 43));
    UNIT_ASSERT_STATUS(uccl_hmap_put(&m, 42, &a), UCCL_OK); /* replaces */
    CU_ASSERT_EQUAL(uccl_hmap_count(&m), 3);
    CU_ASSERT_PTR_EQUAL(uccl_hmap_get(&m, 42), &a);
    CU_ASSERT_PTR_EQUAL(uccl_hmap_del(&m, 42), &a);
    CU_ASSERT_PTR_NULL(uccl_hmap_del(&m, 42)); /* twice: nothing */
    CU_ASSERT_PTR_NULL(uccl_hmap_get(&m, 42));
    CU_ASSERT_EQUAL(uccl_hmap_count(&m), 2);
    uccl_hmap_fini(&m);
}

/* Dense and strided keys, every third one deleted, the rest still found. */
static void test_runs(void)
{
    enum { N = 5000 };
    static int objs[N];
    uccl_hmap_t m;
    bool ok = true;

    for (int stride = 1; stride <= 1 << 20; stride <<= 10) {
        uccl_hmap_init(&m);
        for (int i = 0; ok && i < N; i++)
            ok = uccl_hmap_put(&m, (uint64_t)i * (uint64_t)stride, &objs[i]) == UCCL_OK;
        for (int i = 0; ok && i < N; i += 3)
            ok = uccl_hmap_del(&m, (uint64_t)i * (uint64_t)stride) == &objs[i];
        for (int i = 0; ok && i < N; i++)
            ok = uccl_hmap_get(&m, (uint64_t)i * (uint64_t)stride) == (i % 3 ? &objs[i] : NULL);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(uccl_hmap_count(&m), N - (N + 2) / 3);
        uccl_hmap_fini(&m);
    }
}

/* Random puts and deletes over a small key range against an array model. */
static void test_model(void)
{
    enum { KEYS = 300, STEPS = 200000 };
    static int objs[KEYS];
    void *model[KEYS] = {0};
    uccl_hmap_t m;
    uint32_t count = 0, x = 12345;
    bool ok = true;

    uccl_hmap_init(&m);
    for (int s = 0; ok && s < STEPS; s++) {
        uint32_t k;

        x = x * 1103515245u + 12345u;
        k = (x >> 8) % KEYS;
        if ((x >> 4) & 1) {
            ok = uccl_hmap_put(&m, (uint64_t)k << 40, &objs[k]) == UCCL_OK;
            count += model[k] == NULL;
            model[k] = &objs[k];
        } else {
            ok = uccl_hmap_del(&m, (uint64_t)k << 40) == model[k];
            count -= model[k] != NULL;
            model[k] = NULL;
        }
        ok = ok && uccl_hmap_count(&m) == count;
        if (s % 1000 == 0)
            for (int i = 0; ok && i < KEYS; i++)
                ok = uccl_hmap_get(&m, (uint64_t)i << 40) == model[i];
    }
    CU_ASSERT(ok);
    uccl_hmap_fini(&m);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"put, get, replace, delete", test_basic},
        {"dense and strided keys, deletes inside runs", test_runs},
        {"random workload against a model", test_model},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"hmap", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

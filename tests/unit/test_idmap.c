/* Unit tests of the id -> object table (src/util/idmap.c): ids are unique
 * and never 0, lookups and removals are exact, a removed or older id finds
 * nothing even after its slot was reused, narrow ids (the rendezvous
 * immediate's 25 bits) stay within their bits, the table grows and reports
 * when it is full, and thousands of ids in flight are found without a scan;
 * an id's low bits find it, a finished id is told from one never given. */
#include <stdint.h>
#include <stdlib.h>

#include "util/idmap.h"
#include "unit.h"

static void test_basic(void)
{
    uccl_idmap_t m;
    int a, b, c;
    uint64_t ia, ib, ic;

    uccl_idmap_init(&m, 64, 20);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &a, &ia), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &b, &ib), UCCL_OK);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &c, &ic), UCCL_OK);
    CU_ASSERT(ia != 0 && ib != 0 && ic != 0 && ia != ib && ib != ic && ia != ic);
    CU_ASSERT_EQUAL(uccl_idmap_count(&m), 3);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup(&m, ib), &b);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_remove(&m, ib), &b);
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, ib));
    CU_ASSERT_PTR_NULL(uccl_idmap_remove(&m, ib)); /* twice: nothing */
    CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup(&m, ia), &a);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup(&m, ic), &c);
    CU_ASSERT_EQUAL(uccl_idmap_count(&m), 2);
    /* ids never given, id 0, an index past the table */
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, 0));
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, ia + 1000));
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, UINT64_MAX));
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, NULL, &ia), UCCL_ERR_INVALID_PARAM);
    uccl_idmap_fini(&m);
}

/* A slot reused gives a new id; the old one stays dead. */
static void test_stale(void)
{
    uccl_idmap_t m;
    int x, y;
    uint64_t first, id;

    uccl_idmap_init(&m, 25, 1); /* 2 slots, 24-bit generations */
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &x, &first), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_remove(&m, first), &x);
    for (int i = 0; i < 1000; i++) {
        CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &y, &id), UCCL_OK);
        CU_ASSERT(id != first && id != 0 && id < (1u << 25));
        CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, first));
        CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup(&m, id), &y);
        CU_ASSERT_PTR_EQUAL(uccl_idmap_remove(&m, id), &y);
    }
    uccl_idmap_fini(&m);
}

/* Generations wrap within their bits and skip 0. */
static void test_wrap(void)
{
    uccl_idmap_t m;
    int x;
    uint64_t id;
    bool ok = true;

    uccl_idmap_init(&m, 4, 2); /* 4 slots, generations 1..3 */
    for (int i = 0; i < 40; i++) {
        ok = ok && uccl_idmap_insert(&m, &x, &id) == UCCL_OK && id != 0 && id < 16 && (id >> 2) != 0;
        ok = ok && uccl_idmap_remove(&m, id) == &x;
    }
    CU_ASSERT(ok);
    uccl_idmap_fini(&m);
}

/* Full at 2^index_bits; room again after a removal. */
static void test_full(void)
{
    uccl_idmap_t m;
    int objs[300];
    uint64_t ids[300], extra;
    bool ok = true;

    uccl_idmap_init(&m, 32, 8);
    for (int i = 0; i < 256; i++)
        ok = ok && uccl_idmap_insert(&m, &objs[i], &ids[i]) == UCCL_OK;
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &objs[256], &extra), UCCL_ERR_NO_MEMORY);
    for (int i = 0; i < 256; i++)
        ok = ok && uccl_idmap_lookup(&m, ids[i]) == &objs[i];
    CU_ASSERT(ok);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_remove(&m, ids[17]), &objs[17]);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &objs[256], &extra), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup(&m, extra), &objs[256]);
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, ids[17]));
    uccl_idmap_fini(&m);
}

/* Many in flight, removed out of order, every id still exact. */
static void test_depth(void)
{
    enum { N = 20000 };
    uccl_idmap_t m;
    uint64_t *ids = malloc(N * sizeof(*ids));
    int *objs = malloc(N * sizeof(*objs));
    bool ok = ids != NULL && objs != NULL;

    uccl_idmap_init(&m, 25, 17);
    for (int i = 0; ok && i < N; i++)
        ok = uccl_idmap_insert(&m, &objs[i], &ids[i]) == UCCL_OK;
    for (int i = 0; ok && i < N; i += 2) /* every other one goes */
        ok = uccl_idmap_remove(&m, ids[i]) == &objs[i];
    for (int i = 0; ok && i < N; i++)
        ok = uccl_idmap_lookup(&m, ids[i]) == (i % 2 ? &objs[i] : NULL);
    for (int i = 0; ok && i < N; i += 2) /* reused slots, new ids */
        ok = uccl_idmap_insert(&m, &objs[i], &ids[i]) == UCCL_OK;
    for (int i = 0; ok && i < N; i++)
        ok = uccl_idmap_remove(&m, ids[i]) == &objs[i];
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(uccl_idmap_count(&m), 0);
    uccl_idmap_fini(&m);
    free(ids);
    free(objs);
}

/* An id's low bits (what a narrow wire field carries) find it while it is
 * in use; a removed id, or one whose slot was given again, is stale; one
 * never given is not. */
static void test_low_stale(void)
{
    uccl_idmap_t m;
    int a, b;
    uint64_t ia, ib, full = 0;

    uccl_idmap_init(&m, 17 + 32, 17);
    CU_ASSERT_EQUAL(uccl_idmap_insert(&m, &a, &ia), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(uccl_idmap_lookup_low(&m, ia & ((1u << 25) - 1), 25, &full), &a);
    CU_ASSERT_EQUAL(full, ia);
    CU_ASSERT_FALSE(uccl_idmap_stale(&m, ia));
    CU_ASSERT_FALSE(uccl_idmap_stale(&m, ia + (1ull << 17))); /* a generation not given yet */
    CU_ASSERT_FALSE(uccl_idmap_stale(&m, ia | 4000));         /* an index beyond the table */
    uccl_idmap_remove(&m, ia);
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup_low(&m, ia & ((1u << 25) - 1), 25, &full));
    CU_ASSERT(uccl_idmap_stale(&m, ia));
    for (int i = 0; i < 64 * 300; i++) { /* the slot given again and again */
        CU_ASSERT_EQUAL_FATAL(uccl_idmap_insert(&m, &b, &ib), UCCL_OK);
        if (i < 64 * 300 - 1)
            uccl_idmap_remove(&m, ib);
    }
    CU_ASSERT(ib != ia);
    CU_ASSERT_PTR_NULL(uccl_idmap_lookup(&m, ia));
    CU_ASSERT(uccl_idmap_stale(&m, ia));
    CU_ASSERT_FALSE(uccl_idmap_stale(&m, ib));
    uccl_idmap_fini(&m);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"insert, lookup, remove", test_basic},
        {"stale id after reuse", test_stale},
        {"generation wrap skips 0", test_wrap},
        {"full table", test_full},
        {"20000 in flight", test_depth},
        {"low bits, stale ids", test_low_stale},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"idmap", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

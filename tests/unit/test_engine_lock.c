/* Unit tests of the engine lock (uccl_engine_lock in src/core/core.h): it
 * nests within one thread and, nested or not, keeps every other thread out
 * until the holder's outermost release. */
#include <pthread.h>
#include <stdlib.h>

#include "core/core.h"
#include "unit.h"

#define ROUNDS 300

static uccl_engine_t *E;
/* volatile: each store and load happens where written (else the compiler
 * drops the section marker, nothing between the stores reads it) */
static volatile int busy; /* a thread is in its section (written under the lock only) */
static long overlaps; /* a thread found another in its section */
static long entries;

static int suite_init(void)
{
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "tcp"};
    return uccl_engine_create(&params, &E) == UCCL_OK ? 0 : 1;
}

static int suite_cleanup(void)
{
    uccl_engine_destroy(E);
    return 0;
}

/* Each round: take the lock twice, release the inner one, then hold a
 * section long enough (about 0.1 ms) for a thread woken by a wrong release
 * to get in and be seen. */
static void *lock_rounds(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        uccl_engine_lock(E);
        uccl_engine_lock(E);
        uccl_engine_unlock(E);
        if (busy)
            overlaps++;
        busy = 1;
        for (volatile int k = 0; k < 300000; k++)
            ;
        if (busy != 1)
            overlaps++;
        busy = 0;
        entries++;
        uccl_engine_unlock(E);
    }
    return NULL;
}

static void test_nested_excludes_threads(void)
{
    pthread_t t[2];

    overlaps = entries = 0;
    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, lock_rounds, NULL) == 0);
    lock_rounds(NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(overlaps, 0);
    CU_ASSERT_EQUAL(entries, 3 * ROUNDS);
}

/* Public calls from a thread that holds the lock (as a generalized
 * request's callback does) nest, and the lock is free once all returned:
 * another thread gets it. */
static void *progress_once(void *arg)
{
    (void)arg;
    uccl_engine_progress(E);
    return NULL;
}

static void test_public_calls_nest(void)
{
    pthread_t t;

    uccl_engine_lock(E);
    uccl_engine_lock(E);
    CU_ASSERT(uccl_engine_progress(E) >= 0); /* takes it a third time */
    uccl_engine_unlock(E);
    uccl_engine_unlock(E);
    CU_ASSERT_FATAL(pthread_create(&t, NULL, progress_once, NULL) == 0);
    CU_ASSERT_EQUAL(pthread_join(t, NULL), 0);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"nested lock keeps other threads out", test_nested_excludes_threads},
        {"public calls nest under a held lock", test_public_calls_nest},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {
        {"engine_lock", suite_init, suite_cleanup, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };
    return unit_main(suites);
}

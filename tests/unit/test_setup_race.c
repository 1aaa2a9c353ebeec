/* Connection setup between engines that do things at the same moment, over
 * shm and tcp: an accept that polls with a zero timeout, two engines that
 * connect to each other at once, an engine that connects to itself, and
 * several threads connecting to one engine in parallel. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "unit_conn.h"

/* Accepts polled with timeout 0 until one succeeds or the time is up. */
typedef struct poll_arg {
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_status_t status;
    unsigned polls;
} poll_arg_t;

static void *accept_poll_main(void *p)
{
    poll_arg_t *arg = p;
    uint64_t end = unit_now_ms() + UNIT_TIMEOUT_MS;

    do {
        arg->polls++;
        arg->status = uccl_accept(arg->engine, 0, &arg->conn);
    } while (arg->status == UCCL_ERR_TIMEOUT && unit_now_ms() < end);
    return NULL;
}

/* uccl_accept(engine, 0) in a loop is how a caller polls for connections
 * without a progress thread: each call must progress the listener once. */
static void test_accept_poll(void)
{
    unit_pair_t p = {0};
    poll_arg_t arg = {0};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    pthread_t th;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &p.a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &p.b), UCCL_OK);
    if (p.a == NULL || p.b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_engine_address(p.b, blob, &len), UCCL_OK);
    arg.engine = p.b;
    arg.status = UCCL_ERR_IO;
    CU_ASSERT_FATAL(pthread_create(&th, NULL, accept_poll_main, &arg) == 0);
    UNIT_ASSERT_STATUS(uccl_connect(p.a, blob, len, &p.ab), UCCL_OK);
    pthread_join(th, NULL);
    UNIT_ASSERT_STATUS(arg.status, UCCL_OK);
    p.ba = arg.conn;
    if (p.ab != NULL && p.ba != NULL)
        UNIT_ASSERT_STATUS(unit_ping(&p, 7), UCCL_OK);
out:
    unit_pair_close(&p);
}


typedef struct connect_arg {
    uccl_engine_t *engine;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len;
    uccl_conn_t *conn, *in; /* in: the accepted end, when accept_after */
    uccl_status_t status, in_status;
    bool accept_after;
} connect_arg_t;

/* Connect; then (accept_after) accept, which keeps this engine progressing
 * for a peer still connecting to it, as a rank does after its connects. */
static void *connect_main(void *p)
{
    connect_arg_t *arg = p;

    arg->status = uccl_connect(arg->engine, arg->blob, arg->len, &arg->conn);
    if (arg->accept_after)
        arg->in_status = uccl_accept(arg->engine, UNIT_TIMEOUT_MS, &arg->in);
    return NULL;
}

/* a and b connect to each other at the same moment (each progresses its own
 * engine, so each answers the other's setup); then each accepts the other's. */
static void test_cross_connect(void)
{
    uccl_engine_t *a = NULL, *b = NULL;
    connect_arg_t ca = {.accept_after = true}, cb = {.accept_after = true};
    pthread_t ta, tb;
    unit_pair_t p1, p2;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    ca.engine = a;
    cb.engine = b;
    ca.len = sizeof(ca.blob);
    cb.len = sizeof(cb.blob);
    UNIT_ASSERT_STATUS(uccl_engine_address(b, ca.blob, &ca.len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_address(a, cb.blob, &cb.len), UCCL_OK);
    CU_ASSERT_FATAL(pthread_create(&ta, NULL, connect_main, &ca) == 0);
    CU_ASSERT_FATAL(pthread_create(&tb, NULL, connect_main, &cb) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    UNIT_ASSERT_STATUS(ca.status, UCCL_OK);
    UNIT_ASSERT_STATUS(cb.status, UCCL_OK);
    UNIT_ASSERT_STATUS(ca.in_status, UCCL_OK);
    UNIT_ASSERT_STATUS(cb.in_status, UCCL_OK);
    p1 = (unit_pair_t){.a = a, .b = b, .ab = ca.conn, .ba = cb.in};
    p2 = (unit_pair_t){.a = b, .b = a, .ab = cb.conn, .ba = ca.in};
    if (p1.ab != NULL && p1.ba != NULL)
        UNIT_ASSERT_STATUS(unit_ping(&p1, 1), UCCL_OK);
    if (p2.ab != NULL && p2.ba != NULL)
        UNIT_ASSERT_STATUS(unit_ping(&p2, 2), UCCL_OK);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

/* An engine connects to its own address: its connect progresses its own
 * listener, which accepts; a message goes from one end to the other. */
static void test_self_connect(void)
{
    unit_pair_t p = {0};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &p.a), UCCL_OK);
    if (p.a == NULL)
        return;
    p.b = p.a;
    UNIT_ASSERT_STATUS(uccl_engine_address(p.a, blob, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_connect(p.a, blob, len, &p.ab), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_accept(p.a, UNIT_TIMEOUT_MS, &p.ba), UCCL_OK);
    if (p.ab != NULL && p.ba != NULL)
        UNIT_ASSERT_STATUS(unit_ping(&p, 3), UCCL_OK);
    uccl_engine_destroy(p.a);
}

#define NTHREADS 6

/* Threads connect to one engine at once, each from an engine of its own,
 * then all from one engine; the target's accepts take them all. */
static void test_parallel_connects(void)
{
    uccl_engine_t *target = NULL, *src[NTHREADS] = {0};
    connect_arg_t ca[NTHREADS];
    pthread_t th[NTHREADS];
    uccl_conn_t *in[NTHREADS];
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &target), UCCL_OK);
    if (target == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_engine_address(target, blob, &len), UCCL_OK);
    for (int i = 0; i < NTHREADS; i++)
        UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &src[i]), UCCL_OK);
    for (int round = 0; round < 2; round++) {
        int n = 0;

        for (int i = 0; i < NTHREADS; i++) {
            memset(&ca[i], 0, sizeof(ca[i]));
            ca[i].engine = round == 0 ? src[i] : src[0];
            memcpy(ca[i].blob, blob, len);
            ca[i].len = len;
            in[i] = NULL;
            if (ca[i].engine != NULL)
                CU_ASSERT_FATAL(pthread_create(&th[i], NULL, connect_main, &ca[i]) == 0);
        }
        while (n < NTHREADS && uccl_accept(target, UNIT_TIMEOUT_MS, &in[n]) == UCCL_OK)
            n++;
        for (int i = 0; i < NTHREADS; i++) {
            if (ca[i].engine != NULL)
                pthread_join(th[i], NULL);
            UNIT_ASSERT_STATUS(ca[i].status, UCCL_OK);
        }
        CU_ASSERT_EQUAL(n, NTHREADS);
        for (int i = 0; i < NTHREADS && round == 0; i++) {
            /* the accepted end whose peer is this thread's engine */
            unit_pair_t p = {.a = src[i], .b = target, .ab = ca[i].conn};
            uccl_conn_attr_t attr;

            for (int k = 0; k < n && p.ab != NULL && p.ba == NULL; k++)
                if (uccl_conn_query(in[k], &attr) == UCCL_OK && attr.peer_id == uccl_engine_id(p.a))
                    p.ba = in[k];
            CU_ASSERT_PTR_NOT_NULL(p.ba);
            if (p.ba != NULL)
                UNIT_ASSERT_STATUS(unit_ping(&p, 10 + (uint64_t)i), UCCL_OK);
        }
    }
    for (int i = 0; i < NTHREADS; i++)
        if (src[i] != NULL)
            uccl_engine_destroy(src[i]);
    uccl_engine_destroy(target);
}

/* Threads that wait in uccl_connect (to an engine nobody progresses, so no
 * answer comes) and in uccl_accept (nothing comes) sleep without the engine
 * lock (uccl.h): another thread's message over the same engine goes through
 * at once, not after those waits' timeout (each alone held it 0.9 s here). */
#define LONG_WAIT_MS 1000

static void *accept_long_main(void *p)
{
    connect_arg_t *arg = p;
    arg->status = uccl_accept(arg->engine, LONG_WAIT_MS, &arg->conn);
    return NULL;
}

static void test_wait_leaves_lock(void)
{
    unit_pair_t p = {0};
    uccl_engine_t *mute = NULL;
    connect_arg_t ca = {.len = sizeof(ca.blob)}, aa = {0};
    pthread_t tc, ta;
    uint64_t t0, took;

    setenv("UCCL_TIMEOUT_MS", "1000", 1); /* the connect's wait */
    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &mute), UCCL_OK);
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    if (p.a == NULL || mute == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_engine_address(mute, ca.blob, &ca.len), UCCL_OK);
    ca.engine = aa.engine = p.a;
    CU_ASSERT_FATAL(pthread_create(&tc, NULL, connect_main, &ca) == 0);
    CU_ASSERT_FATAL(pthread_create(&ta, NULL, accept_long_main, &aa) == 0);
    usleep(100 * 1000); /* both threads are in their waits */
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(unit_ping(&p, 20), UCCL_OK);
    took = unit_now_ms() - t0;
    if (took >= 500)
        fprintf(stderr, "\n  a ping beside threads in uccl_connect and uccl_accept took %llu ms\n",
                (unsigned long long)took);
    CU_ASSERT(took < 500);
    pthread_join(tc, NULL);
    pthread_join(ta, NULL);
    UNIT_ASSERT_STATUS(ca.status, UCCL_ERR_TIMEOUT);
    UNIT_ASSERT_STATUS(aa.status, UCCL_ERR_TIMEOUT);
out:
    if (mute != NULL)
        uccl_engine_destroy(mute);
    unit_pair_close(&p);
}

/* More peers connect at once than UCCL_SETUP_MAX_PENDING: every one is a
 * real peer (its hello and request come at once), so none is dropped; the
 * cap is for sockets that send nothing. */
#define BURST 12

typedef struct burst_arg {
    connect_arg_t c;
    pthread_barrier_t *start;
} burst_arg_t;

static void *burst_main(void *p)
{
    burst_arg_t *arg = p;

    pthread_barrier_wait(arg->start);
    return connect_main(&arg->c);
}

static void test_burst_over_cap(void)
{
    uccl_engine_t *target = NULL;
    burst_arg_t args[BURST];
    pthread_t th[BURST];
    pthread_barrier_t start;
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    int n = 0, ok = 0;
    uccl_conn_t *in;

    setenv("UCCL_SETUP_MAX_PENDING", "4", 1);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &target), UCCL_OK);
    unsetenv("UCCL_SETUP_MAX_PENDING");
    if (target == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_engine_address(target, blob, &len), UCCL_OK);
    CU_ASSERT_FATAL(pthread_barrier_init(&start, NULL, BURST + 1) == 0);
    for (int i = 0; i < BURST; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].start = &start;
        memcpy(args[i].c.blob, blob, len);
        args[i].c.len = len;
        UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &args[i].c.engine), UCCL_OK);
        CU_ASSERT_FATAL(args[i].c.engine != NULL);
        CU_ASSERT_FATAL(pthread_create(&th[i], NULL, burst_main, &args[i]) == 0);
    }
    pthread_barrier_wait(&start);
    while (n < BURST && uccl_accept(target, UNIT_TIMEOUT_MS, &in) == UCCL_OK)
        n++;
    for (int i = 0; i < BURST; i++) {
        pthread_join(th[i], NULL);
        ok += args[i].c.status == UCCL_OK;
        if (args[i].c.status != UCCL_OK)
            fprintf(stderr, "\n  connect %d of the burst: %s\n", i,
                    uccl_status_name(args[i].c.status));
    }
    CU_ASSERT_EQUAL(ok, BURST);
    CU_ASSERT_EQUAL(n, BURST);
    for (int i = 0; i < BURST; i++)
        uccl_engine_destroy(args[i].c.engine);
    pthread_barrier_destroy(&start);
    uccl_engine_destroy(target);
}

static CU_TestInfo cases[] = {
    {"accept polled with timeout 0", test_accept_poll},
    {"two engines connect to each other at once", test_cross_connect},
    {"an engine connects to itself", test_self_connect},
    {"threads connect to one engine at once", test_parallel_connects},
    {"a thread waiting in connect or accept leaves the engine to others", test_wait_leaves_lock},
    {"a burst of peers past UCCL_SETUP_MAX_PENDING: none dropped", test_burst_over_cap},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_tp("setup_race", cases, NULL, NULL);
}

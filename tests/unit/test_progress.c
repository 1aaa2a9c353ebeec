/* The progress thread (UCCL_PROGRESS_THREAD / params.progress_thread): with it
 * a transfer completes while only the receiving engine is waited on, because
 * the sender's engine makes progress in the background; without it (the
 * control case) the same wait times out. One suite per transport. */
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define BIG (64u << 20) /* far more than socket buffers or an shm ring hold */

static uccl_status_t engine_open(const char *transport, int thread, uccl_engine_t **e)
{
    uccl_engine_params_t params = {
        .field_mask = UCCL_ENGINE_PARAM_TRANSPORTS | UCCL_ENGINE_PARAM_PROGRESS_THREAD,
        .transports = transport,
        .progress_thread = thread,
    };
    return uccl_engine_create(&params, e);
}

/* a sends BIG bytes to b; only b's receive is waited on. Returns that wait's
 * status and checks the bytes when it succeeded. */
static uccl_status_t send_waiting_on_receiver(const char *transport, int thread, int timeout_ms)
{
    unit_pair_t p = {0};
    uint8_t *src = malloc(BIG), *dst = calloc(1, BIG);
    uccl_mr_t *ms = NULL, *md = NULL;
    uccl_req_t *sreq = NULL, *rreq = NULL;
    uccl_status_t st = UCCL_ERR_NO_MEMORY;

    if (src == NULL || dst == NULL)
        goto out;
    for (size_t i = 0; i < BIG; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    UNIT_ASSERT_STATUS(engine_open(transport, thread, &p.a), UCCL_OK);
    UNIT_ASSERT_STATUS(engine_open(transport, thread, &p.b), UCCL_OK);
    if (p.a == NULL || p.b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(unit_connect(p.a, p.b, &p.ab, &p.ba), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, src, BIG, 0, &ms), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, dst, BIG, 0, &md), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(p.ba, md, 0, BIG, 5, &rreq), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, ms, 0, BIG, 5, &sreq), UCCL_OK);
    if (rreq == NULL || sreq == NULL)
        goto out;
    st = uccl_wait(rreq, timeout_ms);
    if (st == UCCL_OK) {
        CU_ASSERT_EQUAL(memcmp(src, dst, BIG), 0);
        UNIT_ASSERT_STATUS(uccl_wait(sreq, UNIT_TIMEOUT_MS), UCCL_OK);
    }
out:
    if (sreq != NULL)
        uccl_req_free(sreq); /* detached if still in flight; the engine cancels it */
    if (rreq != NULL)
        uccl_req_free(rreq);
    unit_pair_close(&p); /* destroys the engines, releasing the regions */
    free(src);
    free(dst);
    return st;
}

static void test_thread_drives_sender(void)
{
    UNIT_ASSERT_STATUS(send_waiting_on_receiver(unit_tp, 1, 10000), UCCL_OK);
}

static void test_without_thread_sender_stalls(void)
{
    UNIT_ASSERT_STATUS(send_waiting_on_receiver(unit_tp, 0, 500), UCCL_ERR_TIMEOUT);
}

static CU_TestInfo tests[] = {
    {"progress thread completes a transfer waited on by the receiver only", test_thread_drives_sender},
    {"control: without it the same wait times out", test_without_thread_sender_stalls},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return unit_main_tp("progress", tests, NULL, NULL);
}

/* Unit tests of the core's two-sided matching (src/core/match.c) on a
 * connection with two fake transports: one that writes host memory only and
 * one that also writes CUDA memory, as shm and gpu_ipc on a GPU engine.
 * Messages are fed in by hand, in and out of order, and every delivery is
 * recorded, so each pairing of message and receive is checked exactly. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"

/* ------------------------------------------------------------ fakes */

#define MAX_DELIVERED 16

typedef struct delivery {
    uccl_tp_ep_t *ep;
    uint64_t seq;
    uccl_req_t *req;
} delivery_t;

static delivery_t delivered[MAX_DELIVERED];
static int ndelivered;

static void fake_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req)
{
    if (ndelivered < MAX_DELIVERED)
        delivered[ndelivered] = (delivery_t){ep, msg->seq, req};
    ndelivered++;
    uccl_req_complete(req, UCCL_OK, msg->len);
    free(msg);
}

static const struct uccl_tp_ops host_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "fake_host",
    .caps = UCCL_TP_CAP_HOST_MEM,
    .msg_deliver = fake_msg_deliver,
};

static const struct uccl_tp_ops gpu_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "fake_gpu",
    .caps = UCCL_TP_CAP_CUDA_MEM,
    .msg_deliver = fake_msg_deliver,
};

static uccl_engine_t *engine; /* for its request pool only */
static uccl_conn_t conn;
static uccl_tp_t host_tp = {.ops = &host_ops}, gpu_tp = {.ops = &gpu_ops};
static uccl_tp_ep_t host_ep = {.tp = &host_tp, .conn = &conn};
static uccl_tp_ep_t gpu_ep = {.tp = &gpu_tp, .conn = &conn};

static int suite_init(void)
{
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "tcp"};
    return uccl_engine_create(&params, &engine) == UCCL_OK ? 0 : 1;
}

static int suite_cleanup(void)
{
    return uccl_engine_destroy(engine) == UCCL_OK ? 0 : 1;
}

/* A fresh connection before every test. */
static void conn_reset(void)
{
    memset(&conn, 0, sizeof(conn));
    conn.engine = engine;
    conn.state = UCCL_OK;
    strcpy(conn.peer_host, "peer");
    uccl_list_init(&conn.reqs);
    uccl_list_init(&conn.posted);
    uccl_list_init(&conn.held);
    ndelivered = 0;
}

static uccl_req_t *recv_new(uint64_t tag, size_t len, uint64_t gpu_caps)
{
    uccl_req_t *req = uccl_req_alloc(engine);

    CU_ASSERT_PTR_NOT_NULL_FATAL(req);
    req->conn = &conn;
    req->op = UCCL_OP_RECV;
    req->tag = tag;
    req->len = len;
    req->gpu_caps = gpu_caps;
    return req;
}

static uccl_req_t *post(uint64_t tag, size_t len, uint64_t gpu_caps)
{
    uccl_req_t *req = recv_new(tag, len, gpu_caps);
    uccl_msg_post_recv(&conn, req);
    return req;
}

/* A message header arrives on ep: returns the receive it went to at once
 * (NULL = the fake transport holds it, as a real one would). */
static uccl_req_t *arrive(uccl_tp_ep_t *ep, uint64_t seq, uint64_t tag, uint64_t len)
{
    uccl_req_t *req = NULL;
    uccl_msg_t *msg;

    UNIT_ASSERT_STATUS(uccl_msg_arrived(&conn, ep, seq, tag, len, &req), UCCL_OK);
    if (req != NULL) {
        uccl_req_complete(req, UCCL_OK, len);
        return req;
    }
    msg = calloc(1, sizeof(*msg));
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    *msg = (uccl_msg_t){.seq = seq, .tag = tag, .len = len};
    uccl_msg_hold(&conn, ep, msg);
    return NULL;
}

static void release(uccl_req_t *req)
{
    if (!req->done)
        uccl_req_complete(req, UCCL_ERR_CANCELED, 0);
    uccl_req_release(req);
}

/* Free what a test left held (a real transport does it in ep_destroy). */
static void held_free(void)
{
    uccl_list_t *l;

    while ((l = uccl_list_pop_front(&conn.held)) != NULL)
        free(uccl_container_of(l, uccl_msg_t, link));
}

/* ------------------------------------------------------------ tests */

/* A receive posted first takes the message as it arrives, no holding. */
static void test_posted_first(void)
{
    conn_reset();
    uccl_req_t *r = post(7, 100, 0);
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 0, 7, 60), r);
    CU_ASSERT_EQUAL(r->status, UCCL_OK);
    CU_ASSERT_EQUAL(r->bytes, 60);
    CU_ASSERT_EQUAL(ndelivered, 0);
    CU_ASSERT_TRUE(uccl_list_empty(&conn.posted));
    release(r);
}

/* A message that came first waits; the receive posted later gets it from
 * the transport it came on. */
static void test_message_first(void)
{
    conn_reset();
    CU_ASSERT_PTR_NULL(arrive(&gpu_ep, 0, 7, 60));
    uccl_req_t *r = post(7, 100, 0);
    CU_ASSERT_EQUAL(ndelivered, 1);
    CU_ASSERT_PTR_EQUAL(delivered[0].ep, &gpu_ep);
    CU_ASSERT_PTR_EQUAL(delivered[0].req, r);
    CU_ASSERT_PTR_EQUAL(r->ep, &gpu_ep);
    CU_ASSERT_EQUAL(r->bytes, 60);
    CU_ASSERT_TRUE(uccl_list_empty(&conn.held));
    release(r);
}

/* Two messages with one tag, sent host then GPU, arrive GPU first: the
 * first receive still gets the first message sent. */
static void test_order_across_transports(void)
{
    conn_reset();
    uccl_req_t *r1 = post(5, 1000, 0), *r2 = post(5, 1000, 0);
    CU_ASSERT_PTR_NULL(arrive(&gpu_ep, 1, 5, 200)); /* waits for message 0 */
    CU_ASSERT_EQUAL(ndelivered, 0);
    CU_ASSERT_FALSE(r1->done);
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 0, 5, 100), r1);
    CU_ASSERT_EQUAL(r1->bytes, 100);
    CU_ASSERT_EQUAL(ndelivered, 1); /* message 1 no longer waits */
    CU_ASSERT_EQUAL(delivered[0].seq, 1);
    CU_ASSERT_PTR_EQUAL(delivered[0].req, r2);
    CU_ASSERT_EQUAL(r2->bytes, 200);
    release(r1);
    release(r2);
}

/* Messages of other tags overtake one nobody receives yet. */
static void test_tags_overtake(void)
{
    conn_reset();
    uccl_req_t *r2 = post(2, 64, 0);
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 0, 1, 10));
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 1, 2, 20), r2);
    uccl_req_t *r1 = post(1, 64, 0);
    CU_ASSERT_EQUAL(ndelivered, 1);
    CU_ASSERT_PTR_EQUAL(delivered[0].req, r1);
    CU_ASSERT_EQUAL(delivered[0].seq, 0);
    release(r1);
    release(r2);
}

/* A message behind a gap is not matched, even with a receive for it, until
 * the gap fills; then every message up to the next gap is. */
static void test_gap_then_burst(void)
{
    conn_reset();
    uccl_req_t *r[4];
    for (int i = 0; i < 4; i++)
        r[i] = post(9, 64, 0);
    CU_ASSERT_PTR_NULL(arrive(&gpu_ep, 2, 9, 3));
    CU_ASSERT_PTR_NULL(arrive(&gpu_ep, 3, 9, 4));
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 5, 9, 6)); /* 4 is missing */
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 1, 9, 2)); /* 0 is missing */
    CU_ASSERT_EQUAL(ndelivered, 0);
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 0, 9, 1), r[0]);
    CU_ASSERT_EQUAL(ndelivered, 3);
    for (int i = 1; i < 4; i++) {
        CU_ASSERT_PTR_EQUAL(r[i]->ep, i == 1 ? &host_ep : &gpu_ep);
        CU_ASSERT_EQUAL(r[i]->bytes, (size_t)i + 1);
    }
    CU_ASSERT_EQUAL(conn.rx_msg_next, 4);
    uccl_req_t *r5 = post(9, 64, 0); /* message 5 still waits for 4 */
    CU_ASSERT_FALSE(r5->done);
    uccl_req_t *r4 = post(9, 64, 0);
    CU_ASSERT_PTR_EQUAL(arrive(&gpu_ep, 4, 9, 5), r5); /* the older receive */
    CU_ASSERT_TRUE(r4->done);
    CU_ASSERT_EQUAL(r4->bytes, 6);
    CU_ASSERT_EQUAL(conn.rx_msg_next, 6);
    for (int i = 0; i < 4; i++)
        release(r[i]);
    release(r4);
    release(r5);
}

/* A sender far ahead: thousands of messages of two tags wait unmatched
 * behind one that is late (held out of order), then receives are posted;
 * every receive gets the oldest message of its tag, in order, and a second
 * arrival of a held number is still refused. (Each arrival used to walk
 * every held message.) */
static void test_backlog(void)
{
    enum { N = 4000, LATE = 1000 };

    conn_reset();
    for (uint64_t seq = 0; seq < N; seq++)
        if (seq != LATE)
            CU_ASSERT_PTR_NULL(arrive(&host_ep, seq, seq % 2, seq + 1));
    CU_ASSERT_EQUAL(conn.rx_msg_next, LATE);
    {
        uccl_req_t *dup = NULL;
        UNIT_ASSERT_STATUS(uccl_msg_arrived(&conn, &host_ep, LATE + 5, 1, 1, &dup),
                           UCCL_ERR_TRANSPORT);
    }
    CU_ASSERT_PTR_NULL(arrive(&host_ep, LATE, LATE % 2, LATE + 1));
    CU_ASSERT_EQUAL(conn.rx_msg_next, N);
    CU_ASSERT_EQUAL(ndelivered, 0);
    for (uint64_t seq = 0; seq < N && !CU_get_number_of_failures(); seq++) {
        uccl_req_t *r = post(seq % 2, 1 << 20, 0);
        CU_ASSERT_TRUE(r->done);
        CU_ASSERT_EQUAL(r->bytes, seq + 1); /* the oldest of its tag */
        release(r);
    }
    CU_ASSERT_TRUE(uccl_list_empty(&conn.held));
    held_free();
}

/* A receive too small fails with the message's length; the message stays
 * for the next receive, both when the receive or the message comes first. */
static void test_truncated(void)
{
    conn_reset();
    uccl_req_t *small = post(3, 10, 0), *big = post(3, 100, 0);
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 0, 3, 50), big);
    CU_ASSERT_EQUAL(small->status, UCCL_ERR_TRUNCATED);
    CU_ASSERT_EQUAL(small->bytes, 50);
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 1, 3, 70));
    uccl_req_t *small2 = post(3, 69, 0);
    CU_ASSERT_EQUAL(small2->status, UCCL_ERR_TRUNCATED);
    CU_ASSERT_EQUAL(ndelivered, 0);
    uccl_req_t *exact = post(3, 70, 0);
    CU_ASSERT_EQUAL(ndelivered, 1);
    CU_ASSERT_EQUAL(exact->bytes, 70);
    release(small);
    release(big);
    release(small2);
    release(exact);
}

/* A GPU receive cannot take a message of a transport that cannot write GPU
 * memory: it fails with UNSUPPORTED and the message waits for a host one. */
static void test_gpu_receive_host_only_transport(void)
{
    conn_reset();
    uccl_req_t *g = post(4, 100, UCCL_TP_CAP_CUDA_MEM), *h = post(4, 100, 0);
    CU_ASSERT_PTR_EQUAL(arrive(&host_ep, 0, 4, 10), h);
    CU_ASSERT_EQUAL(g->status, UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 1, 4, 10));
    uccl_req_t *g2 = post(4, 100, UCCL_TP_CAP_CUDA_MEM);
    CU_ASSERT_EQUAL(g2->status, UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_FALSE(uccl_list_empty(&conn.held)); /* still there */
    uccl_req_t *h2 = post(4, 100, 0);
    CU_ASSERT_EQUAL(ndelivered, 1);
    CU_ASSERT_PTR_EQUAL(delivered[0].req, h2);
    CU_ASSERT_EQUAL(h2->bytes, 10);
    /* one on the GPU-capable transport lands in GPU memory */
    uccl_req_t *g3 = post(4, 100, UCCL_TP_CAP_CUDA_MEM);
    CU_ASSERT_PTR_EQUAL(arrive(&gpu_ep, 2, 4, 20), g3);
    CU_ASSERT_EQUAL(g3->status, UCCL_OK);
    release(g);
    release(h);
    release(g2);
    release(h2);
    release(g3);
}

/* Numbers seen before, or absurdly far ahead, are a broken peer. */
static void test_bad_numbers(void)
{
    uccl_req_t *req = NULL;

    conn_reset();
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 0, 1, 1));
    UNIT_ASSERT_STATUS(uccl_msg_arrived(&conn, &host_ep, 0, 1, 1, &req), UCCL_ERR_TRANSPORT);
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 2, 1, 1));
    UNIT_ASSERT_STATUS(uccl_msg_arrived(&conn, &gpu_ep, 2, 1, 1, &req), UCCL_ERR_TRANSPORT);
    UNIT_ASSERT_STATUS(uccl_msg_arrived(&conn, &gpu_ep, 1ull << 40, 1, 1, &req),
                       UCCL_ERR_TRANSPORT);
    CU_ASSERT_PTR_NULL(req);
    held_free();
}

/* Forgetting the held messages leaves posted receives for the connection's
 * teardown to complete. */
static void test_forget(void)
{
    conn_reset();
    CU_ASSERT_PTR_NULL(arrive(&host_ep, 1, 1, 1)); /* held, owned by the list */
    uccl_req_t *r = post(2, 8, 0);
    uccl_msg_t *held = uccl_container_of(conn.held.next, uccl_msg_t, link);
    uccl_msg_forget(&conn);
    CU_ASSERT_TRUE(uccl_list_empty(&conn.held));
    CU_ASSERT_FALSE(uccl_list_empty(&conn.posted));
    free(held);
    release(r); /* completing it takes it off the posted list */
    CU_ASSERT_TRUE(uccl_list_empty(&conn.posted));
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"posted_first", test_posted_first},
        {"message_first", test_message_first},
        {"order_across_transports", test_order_across_transports},
        {"tags_overtake", test_tags_overtake},
        {"gap_then_burst", test_gap_then_burst},
        {"backlog", test_backlog},
        {"truncated", test_truncated},
        {"gpu_receive_host_only_transport", test_gpu_receive_host_only_transport},
        {"bad_numbers", test_bad_numbers},
        {"forget", test_forget},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {
        {"match", suite_init, suite_cleanup, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };
    return unit_main(suites);
}

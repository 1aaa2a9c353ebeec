/* Unit tests of engines and connections (src/core/engine.c, conn.c,
 * xfer.c argument checks): parameter validation, address buffers, bad
 * address blobs, dead and closed peers, stale descriptors, bounds, NULL
 * arguments. The "engine" suite needs no transport; one "engine/NAME" suite
 * runs per transport that opens here. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "unit_conn.h"

/* ------------------------------------------------------------ no transport needed */

static void test_params_rejected(void)
{
    uccl_engine_params_t p;
    uccl_engine_t *e = (uccl_engine_t *)0x1;
    char long_list[UCCL_ADDRESS_MAX];

    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, NULL), UCCL_ERR_INVALID_PARAM);
    p = (uccl_engine_params_t){.field_mask = 1u << 20};
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "nosuch"};
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p.transports = "shm,nosuch";
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p.transports = "shm,,tcp";
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p.transports = "tcp,";
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    memset(long_list, 'x', sizeof(long_list) - 1);
    long_list[sizeof(long_list) - 1] = '\0';
    p.transports = long_list;
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = -2};
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_NET_DEVICES, .net_devices = long_list};
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_EQUAL(e, (uccl_engine_t *)0x1); /* nothing returned */
}

static void test_env_rejected(void)
{
    uccl_engine_t *e = (uccl_engine_t *)0x1;

    setenv("UCCL_TRANSPORTS", "carrier-pigeon", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "0", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    setenv("UCCL_TIMEOUT_MS", "many", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    setenv("UCCL_RCACHE", "perhaps", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    unsetenv("UCCL_RCACHE");
    CU_ASSERT_PTR_EQUAL(e, (uccl_engine_t *)0x1);
}

static void test_null_handles(void)
{
    uint8_t blob[64] = {0};
    size_t len = sizeof(blob);
    uccl_conn_t *conn;
    uccl_conn_attr_t cattr;
    uccl_mr_t *mr;
    uccl_req_t *req;
    uccl_iov_t iov = {NULL, 0, 0};
    uccl_rdesc_t d = {{0}};
    uint64_t v;

    UNIT_ASSERT_STATUS(uccl_engine_destroy(NULL), UCCL_ERR_INVALID_HANDLE);
    CU_ASSERT_EQUAL(uccl_engine_caps(NULL), 0);
    CU_ASSERT_EQUAL(uccl_engine_id(NULL), 0);
    CU_ASSERT_EQUAL(uccl_engine_progress(NULL), 0);
    UNIT_ASSERT_STATUS(uccl_engine_address(NULL, blob, &len), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_connect(NULL, blob, len, &conn), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_accept(NULL, 0, &conn), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_conn_close(NULL), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_conn_query(NULL, &cattr), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_reg(NULL, blob, len, 0, &mr), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_send(NULL, NULL, 0, 0, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_recv(NULL, NULL, 0, 0, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_sendv(NULL, &iov, 1, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_recvv(NULL, &iov, 1, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_write(NULL, NULL, 0, 0, &d, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_read(NULL, NULL, 0, 0, &d, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_writev(NULL, &iov, 1, &d, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_readv(NULL, &iov, 1, &d, 0, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_write_notify(NULL, NULL, 0, 0, &d, 0, 1, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_notif_poll(NULL, &v), UCCL_ERR_INVALID_HANDLE);
}

/* ------------------------------------------------------------ per transport */


static void test_create_caps_ids(void)
{
    uccl_engine_t *a = NULL, *b = NULL;
    uint64_t bit = strcmp(unit_tp, "shm") == 0 ? UCCL_CAP_SHM : UCCL_CAP_TCP;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    CU_ASSERT(uccl_engine_caps(a) & bit);
    CU_ASSERT_NOT_EQUAL(uccl_engine_id(a), 0);
    CU_ASSERT_NOT_EQUAL(uccl_engine_id(a), uccl_engine_id(b));
    CU_ASSERT(uccl_engine_progress(a) >= 0);
out:
    if (a != NULL)
        UNIT_ASSERT_STATUS(uccl_engine_destroy(a), UCCL_OK);
    if (b != NULL)
        UNIT_ASSERT_STATUS(uccl_engine_destroy(b), UCCL_OK);
}

static void test_address_buffer(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX + 1];
    uccl_engine_t *e = NULL;
    size_t need = 0, len;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &e), UCCL_OK);
    if (e == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_engine_address(e, NULL, &need), UCCL_ERR_BUFFER_TOO_SMALL);
    CU_ASSERT(need > 0 && need <= UCCL_ADDRESS_MAX);
    len = need - 1;
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    CU_ASSERT_EQUAL(len, need);
    len = need;
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_OK);
    CU_ASSERT_EQUAL(len, need);
    len = sizeof(blob);
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, &len), UCCL_OK);
    CU_ASSERT_EQUAL(len, need);
    UNIT_ASSERT_STATUS(uccl_engine_address(e, blob, NULL), UCCL_ERR_INVALID_PARAM);
    uccl_engine_destroy(e);
}

/* A blob that is wrong is refused at once with a specific status. */
static void test_connect_bad_blobs(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX], bad[UCCL_ADDRESS_MAX];
    uccl_engine_t *a = NULL, *b = NULL;
    uccl_conn_t *conn = NULL;
    size_t len = sizeof(blob);
    uint64_t t0;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_engine_address(b, blob, &len), UCCL_OK);
    t0 = unit_now_ms();
    memset(bad, 0x42, sizeof(bad));
    UNIT_ASSERT_STATUS(uccl_connect(a, bad, sizeof(bad), &conn), UCCL_ERR_BAD_ADDRESS);
    UNIT_ASSERT_STATUS(uccl_connect(a, blob, len / 2, &conn), UCCL_ERR_BAD_ADDRESS);
    UNIT_ASSERT_STATUS(uccl_connect(a, blob, 0, &conn), UCCL_ERR_BAD_ADDRESS);
    memcpy(bad, blob, len);
    bad[len / 2] ^= 0x10;
    UNIT_ASSERT_STATUS(uccl_connect(a, bad, len, &conn), UCCL_ERR_BAD_ADDRESS);
    memcpy(bad, blob, len);
    bad[4] = 9; /* version 9 */
    UNIT_ASSERT_STATUS(uccl_connect(a, bad, len, &conn), UCCL_ERR_VERSION);
    UNIT_ASSERT_STATUS(uccl_connect(a, NULL, len, &conn), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_connect(a, blob, len, NULL), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(unit_now_ms() - t0 < 1000); /* nothing waited on a peer */
    CU_ASSERT_PTR_NULL(conn);
    /* b saw nothing: no connection to accept */
    UNIT_ASSERT_STATUS(uccl_accept(b, 50, &conn), UCCL_ERR_TIMEOUT);
    UNIT_ASSERT_STATUS(uccl_accept(b, 0, NULL), UCCL_ERR_INVALID_PARAM);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

/* The blob of an engine that is gone: an error, well within the timeout. */
static void test_connect_destroyed_engine(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    uccl_engine_t *a = NULL, *b = NULL;
    uccl_conn_t *conn = NULL;
    size_t len = sizeof(blob);
    uccl_status_t st;
    uint64_t t0;

    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &b), UCCL_OK);
    if (a == NULL || b == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_engine_address(b, blob, &len), UCCL_OK);
    uccl_engine_destroy(b);
    b = NULL;
    t0 = unit_now_ms();
    st = uccl_connect(a, blob, len, &conn);
    CU_ASSERT(UCCL_STATUS_IS_ERR(st));
    CU_ASSERT(st == UCCL_ERR_CONN_REFUSED || st == UCCL_ERR_UNREACHABLE || st == UCCL_ERR_TIMEOUT ||
              st == UCCL_ERR_STALE);
    CU_ASSERT(unit_now_ms() - t0 <= UNIT_TIMEOUT_MS + 500);
    CU_ASSERT_PTR_NULL(conn);
out:
    if (a != NULL)
        uccl_engine_destroy(a);
    if (b != NULL)
        uccl_engine_destroy(b);
}

static void test_conn_query_close(void)
{
    unit_pair_t p;
    uccl_conn_attr_t attr;
    uint8_t buf[64];
    uccl_mr_t *mr = NULL;
    uccl_req_t *req = NULL;
    uint64_t v;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_conn_query(p.ab, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(attr.peer_id, uccl_engine_id(p.b));
    CU_ASSERT_STRING_EQUAL(attr.transport, unit_tp);
    /* a host-only engine (no gpu_index) has no GPU path on its connections */
    CU_ASSERT_STRING_EQUAL(attr.gpu_transport, "none");
    CU_ASSERT_EQUAL(attr.same_host, 1);
    CU_ASSERT_EQUAL(attr.state, UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_query(p.ba, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(attr.peer_id, uccl_engine_id(p.a));
    UNIT_ASSERT_STATUS(uccl_conn_query(p.ab, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_notif_poll(p.ab, &v), UCCL_ERR_NOT_FOUND);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, buf, sizeof(buf), 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_close(p.ab), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_close(p.ab), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_conn_query(p.ab, &attr), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, mr, 0, 8, 1, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_recv(p.ab, mr, 0, 8, 1, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_notif_poll(p.ab, &v), UCCL_ERR_INVALID_HANDLE);
    CU_ASSERT_PTR_NULL(req);
    unit_pair_close(&p);
}

/* Destroying the peer engine fails the connection with PEER_FAILED: a
 * receive in flight completes with it, new posts are refused with it. */
static void test_peer_destroyed(void)
{
    unit_pair_t p;
    uccl_conn_attr_t attr;
    uint8_t buf[64];
    uccl_mr_t *mr = NULL;
    uccl_req_t *req = NULL, *req2 = NULL;
    uint64_t t0;
    uccl_status_t st;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, buf, sizeof(buf), 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(p.ab, mr, 0, sizeof(buf), 5, &req), UCCL_OK);
    uccl_engine_destroy(p.b);
    p.b = NULL;
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(uccl_wait(req, -1), UCCL_ERR_PEER_FAILED);
    CU_ASSERT(unit_now_ms() - t0 <= UNIT_TIMEOUT_MS + 500);
    UNIT_ASSERT_STATUS(uccl_conn_query(p.ab, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(attr.state, UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, mr, 0, 8, 5, &req2), UCCL_ERR_PEER_FAILED);
    UNIT_ASSERT_STATUS(uccl_recv(p.ab, mr, 0, 8, 5, &req2), UCCL_ERR_PEER_FAILED);
    st = uccl_notif_poll(p.ab, &t0);
    CU_ASSERT_EQUAL(st, UCCL_ERR_PEER_FAILED);
    CU_ASSERT_PTR_NULL(req2);
    UNIT_ASSERT_STATUS(uccl_req_free(req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK); /* nothing in flight any more */
    UNIT_ASSERT_STATUS(uccl_conn_close(p.ab), UCCL_OK);
    unit_pair_close(&p);
}

/* One-sided argument checks, all refused locally before anything moves. */
static void test_rma_checks(void)
{
    static uint8_t abuf[4096], bbuf[4096], cbuf[4096];
    uccl_engine_t *c = NULL;
    uccl_mr_t *amr = NULL, *bmr = NULL, *cmr = NULL;
    uccl_rdesc_t bdesc, adesc, cdesc, junk;
    uccl_req_t *req = NULL;
    unit_pair_t p;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &c), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, abuf, sizeof(abuf), 0, &amr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, bbuf, sizeof(bbuf), 0, &bmr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(c, cbuf, sizeof(cbuf), 0, &cmr), UCCL_OK);
    if (c == NULL || amr == NULL || bmr == NULL || cmr == NULL)
        goto out;
    UNIT_ASSERT_STATUS(uccl_mr_pack(bmr, 0, 100, &bdesc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(amr, 0, 100, &adesc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(cmr, 0, 100, &cdesc), UCCL_OK);
    /* descriptors of other engines */
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 10, &cdesc, 0, &req), UCCL_ERR_STALE);
    UNIT_ASSERT_STATUS(uccl_read(p.ab, amr, 0, 10, &cdesc, 0, &req), UCCL_ERR_STALE);
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 10, &adesc, 0, &req), UCCL_ERR_STALE);
    UNIT_ASSERT_STATUS(uccl_write_notify(p.ab, amr, 0, 10, &cdesc, 0, 9, &req), UCCL_ERR_STALE);
    /* outside the described range */
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 10, &bdesc, 91, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_read(p.ab, amr, 0, 101, &bdesc, 0, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 0, &bdesc, 101, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 10, &bdesc, SIZE_MAX, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_read(p.ab, amr, 0, 2, &bdesc, SIZE_MAX - 1, &req), UCCL_ERR_OUT_OF_BOUNDS);
    /* outside the local region */
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 4090, 10, &bdesc, 0, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, amr, 1, 4096, 1, &req), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_recv(p.ab, amr, SIZE_MAX, 2, 1, &req), UCCL_ERR_OUT_OF_BOUNDS);
    /* descriptors that are not descriptors */
    UNIT_ASSERT_STATUS(uccl_write(p.ab, amr, 0, 10, NULL, 0, &req), UCCL_ERR_INVALID_PARAM);
    memset(&junk, 0x3c, sizeof(junk));
    UNIT_ASSERT_STATUS(uccl_read(p.ab, amr, 0, 10, &junk, 0, &req), UCCL_ERR_BAD_DESC);
    /* a region of another engine, a released region */
    UNIT_ASSERT_STATUS(uccl_send(p.ab, cmr, 0, 10, 1, &req), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(cmr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, cmr, 0, 10, 1, &req), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_send(p.ab, amr, 0, 10, 1, NULL), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_NULL(req);
out:
    if (c != NULL)
        uccl_engine_destroy(c);
    unit_pair_close(&p);
}

static void test_iov_counts(void)
{
    static uint8_t abuf[4096];
    uccl_iov_t iov[UCCL_IOV_MAX + 1];
    uccl_rdesc_t d;
    uccl_req_t *req = NULL;
    uccl_mr_t *amr = NULL;
    unit_pair_t p;
    const int bad[] = {0, -1, UCCL_IOV_MAX + 1};

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, abuf, sizeof(abuf), 0, &amr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, abuf, sizeof(abuf), 0, NULL), UCCL_ERR_INVALID_PARAM);
    {
        uccl_mr_t *bmr = NULL;
        UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, abuf, sizeof(abuf), 0, &bmr), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_pack(bmr, 0, sizeof(abuf), &d), UCCL_OK);
    }
    for (int i = 0; i <= UCCL_IOV_MAX; i++)
        iov[i] = (uccl_iov_t){amr, (size_t)i, 1};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        UNIT_ASSERT_STATUS(uccl_sendv(p.ab, iov, bad[k], 1, &req), UCCL_ERR_INVALID_PARAM);
        UNIT_ASSERT_STATUS(uccl_recvv(p.ab, iov, bad[k], 1, &req), UCCL_ERR_INVALID_PARAM);
        UNIT_ASSERT_STATUS(uccl_writev(p.ab, iov, bad[k], &d, 0, &req), UCCL_ERR_INVALID_PARAM);
        UNIT_ASSERT_STATUS(uccl_readv(p.ab, iov, bad[k], &d, 0, &req), UCCL_ERR_INVALID_PARAM);
    }
    UNIT_ASSERT_STATUS(uccl_sendv(p.ab, NULL, 1, 1, &req), UCCL_ERR_INVALID_PARAM);
    /* a piece without a region must be empty */
    iov[1] = (uccl_iov_t){NULL, 0, 4};
    UNIT_ASSERT_STATUS(uccl_sendv(p.ab, iov, 2, 1, &req), UCCL_ERR_INVALID_PARAM);
    iov[1] = (uccl_iov_t){amr, 4095, 2};
    UNIT_ASSERT_STATUS(uccl_sendv(p.ab, iov, 2, 1, &req), UCCL_ERR_OUT_OF_BOUNDS);
    CU_ASSERT_PTR_NULL(req);
    /* exactly UCCL_IOV_MAX is accepted */
    iov[1] = (uccl_iov_t){amr, 1, 1};
    UNIT_ASSERT_STATUS(uccl_recvv(p.ab, iov, UCCL_IOV_MAX, 1, &req), UCCL_OK);
    if (req != NULL)
        UNIT_ASSERT_STATUS(uccl_req_free(req), UCCL_OK);
    unit_pair_close(&p);
}

/* Engines created under a UCCL_HOST_ID act as hosts of their own: the
 * identity is reported by the engine and by the peer's connection, and two
 * different ones never share memory (tcp, not shm). Equal ones do. */
static uccl_engine_t *engine_on_host(const char *host_id)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS,
                              .transports = "shm,tcp"};
    uccl_engine_t *e = NULL;

    if (host_id != NULL)
        setenv("UCCL_HOST_ID", host_id, 1);
    else
        unsetenv("UCCL_HOST_ID");
    UNIT_ASSERT_STATUS(uccl_engine_create(&p, &e), UCCL_OK);
    unsetenv("UCCL_HOST_ID");
    return e;
}

static void expect_link(uccl_engine_t *a, uccl_engine_t *b, const char *transport, int same)
{
    uccl_conn_t *ab = NULL, *ba = NULL;
    uccl_conn_attr_t attr;

    UNIT_ASSERT_STATUS(unit_connect(a, b, &ab, &ba), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_query(ab, &attr), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(attr.transport, transport);
    CU_ASSERT_EQUAL(attr.same_host, same);
    CU_ASSERT_EQUAL(attr.host_id, uccl_engine_host_id(b));
    UNIT_ASSERT_STATUS(uccl_conn_query(ba, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(attr.host_id, uccl_engine_host_id(a));
    CU_ASSERT_EQUAL(attr.same_host, same);
    uccl_conn_close(ab);
    uccl_conn_close(ba);
}

static void test_host_id_override(void)
{
    uccl_engine_t *real = engine_on_host(NULL), *real2 = engine_on_host(NULL);
    uccl_engine_t *x = engine_on_host("hostX"), *x2 = engine_on_host("hostX");
    uccl_engine_t *y = engine_on_host("hostY");

    CU_ASSERT_NOT_EQUAL(uccl_engine_host_id(real), 0);
    CU_ASSERT_EQUAL(uccl_engine_host_id(real), uccl_engine_host_id(real2));
    CU_ASSERT_EQUAL(uccl_engine_host_id(x), uccl_engine_host_id(x2));
    CU_ASSERT_NOT_EQUAL(uccl_engine_host_id(x), uccl_engine_host_id(y));
    CU_ASSERT_NOT_EQUAL(uccl_engine_host_id(x), uccl_engine_host_id(real));
    CU_ASSERT_EQUAL(uccl_engine_host_id(NULL), 0);
    if (unit_transport_usable("shm")) {
        expect_link(x, x2, "shm", 1);
        expect_link(real, real2, "shm", 1);
    }
    expect_link(x, y, "tcp", 0);
    expect_link(real, x, "tcp", 0);
    uccl_engine_destroy(real);
    uccl_engine_destroy(real2);
    uccl_engine_destroy(x);
    uccl_engine_destroy(x2);
    uccl_engine_destroy(y);
}

/* uccl_notif_wait: a value written later arrives within the wait; nothing
 * pending times out at about the timeout (0 = poll once); values that came
 * before the peer went are popped first, then the peer's failure. */
typedef struct notif_writer {
    unit_pair_t *p;
    uccl_mr_t *mr;
    const uccl_rdesc_t *desc;
    uint64_t value;
    int delay_ms;
    uccl_status_t status;
} notif_writer_t;

static void *notif_writer_main(void *p)
{
    notif_writer_t *w = p;
    uccl_req_t *req = NULL;

    usleep((useconds_t)w->delay_ms * 1000);
    w->status = uccl_write_notify(w->p->ab, w->mr, 0, 8, w->desc, 0, w->value, &req);
    if (w->status == UCCL_OK) {
        w->status = uccl_wait(req, UNIT_TIMEOUT_MS); /* progresses a; the waiter b */
        uccl_req_free(req);
    }
    return NULL;
}

static void test_notif_wait(void)
{
    static uint8_t abuf[64], bbuf[64];
    unit_pair_t p;
    uccl_mr_t *amr = NULL, *bmr = NULL;
    uccl_rdesc_t desc;
    notif_writer_t w;
    pthread_t thread;
    uint64_t v = 0, t0, dt;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, abuf, sizeof(abuf), 0, &amr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, bbuf, sizeof(bbuf), 0, &bmr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(bmr, 0, sizeof(bbuf), &desc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, NULL, 0), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_notif_wait(NULL, &v, 0), UCCL_ERR_INVALID_HANDLE);
    /* nothing pending: poll once, then a bounded wait */
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, 0), UCCL_ERR_TIMEOUT);
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, 200), UCCL_ERR_TIMEOUT);
    dt = unit_now_ms() - t0;
    CU_ASSERT(dt >= 200 && dt < 200 + 1000);
    /* a value written 100 ms into the wait */
    memset(abuf, 0x5a, sizeof(abuf));
    w = (notif_writer_t){.p = &p, .mr = amr, .desc = &desc, .value = 42, .delay_ms = 100};
    CU_ASSERT_FATAL(pthread_create(&thread, NULL, notif_writer_main, &w) == 0);
    v = 0;
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, UNIT_TIMEOUT_MS), UCCL_OK);
    CU_ASSERT_EQUAL(v, 42);
    CU_ASSERT_EQUAL(bbuf[7], 0x5a); /* the data landed before the notification */
    pthread_join(thread, NULL);
    UNIT_ASSERT_STATUS(w.status, UCCL_OK);
    /* two values, then the writer goes: both come out, in order, then the failure */
    {
        uccl_req_t *r[2] = {NULL, NULL};

        UNIT_ASSERT_STATUS(uccl_write_notify(p.ab, amr, 0, 8, &desc, 0, 7, &r[0]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_write_notify(p.ab, amr, 8, 8, &desc, 8, 8, &r[1]), UCCL_OK);
        UNIT_ASSERT_STATUS(unit_drive(&p, r, 2, UNIT_TIMEOUT_MS), UCCL_OK);
        for (int i = 0; i < 2; i++)
            if (r[i] != NULL)
                uccl_req_free(r[i]);
    }
    uccl_engine_destroy(p.a);
    p.a = NULL;
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, -1), UCCL_OK);
    CU_ASSERT_EQUAL(v, 7);
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, -1), UCCL_OK);
    CU_ASSERT_EQUAL(v, 8);
    t0 = unit_now_ms();
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, -1), UCCL_ERR_PEER_FAILED);
    CU_ASSERT(unit_now_ms() - t0 <= UNIT_TIMEOUT_MS + 500);
    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &v, 0), UCCL_ERR_PEER_FAILED);
    unit_pair_close(&p);
}

static CU_TestInfo common_tests[] = {
    {"bad params rejected", test_params_rejected},
    {"bad environment rejected", test_env_rejected},
    {"NULL handles everywhere", test_null_handles},
    {"UCCL_HOST_ID: hosts of their own", test_host_id_override},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo tp_tests[] = {
    {"create, caps, incarnation ids", test_create_caps_ids},
    {"address buffer sizes", test_address_buffer},
    {"connect with bad blobs", test_connect_bad_blobs},
    {"connect to a destroyed engine", test_connect_destroyed_engine},
    {"conn query, close, use after close", test_conn_query_close},
    {"peer engine destroyed", test_peer_destroyed},
    {"one-sided: stale descriptors, bounds", test_rma_checks},
    {"iov counts", test_iov_counts},
    {"notif_wait: value, timeout, dead peer", test_notif_wait},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[UNIT_NTRANSPORTS + 2] = {
        {"engine", NULL, NULL, NULL, NULL, common_tests},
    };
    size_t n;

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 1);
    n = 1 + unit_tp_suites("engine", tp_tests, NULL, NULL, suites + 1);
    suites[n] = (CU_SuiteInfo)CU_SUITE_INFO_NULL;
    return unit_main(suites);
}

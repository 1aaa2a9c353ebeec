/* Device queues in one process (a loopback connection, host ring, host
 * threads for kernels): what the device side may leave behind and write.
 *  - a stop, then a put that waited for room in the stopped ring: it gives
 *    up its ticket (never published), so a restart would wait at that
 *    ticket forever while uccl_devq_status says OK; the start must refuse
 *    (UCCL_ERR_CANCELED), and a ticket given up after the start's check
 *    fails the running ring at once, not at the waiters' timeout;
 *  - a clean stop and restart still runs (bytes compared);
 *  - remote offsets past the descriptor or wrapping 2^64 fail the ring with
 *    UCCL_ERR_OUT_OF_BOUNDS and write nothing;
 *  - tickets across 2^32 (the 32-bit sequence words wrap): bytes compared;
 *  - a peer or slot index past the 16 bits of a command is refused (it
 *    used to be truncated: peer 65536 wrote to peer 0). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uccl/uccl.h>
#include <uccl/uccl_device.cuh>

#include "util/sys.h"
#include "check1.h"

#define N 4096
#define TIMEOUT_MS 3000

static uccl_engine_t *e;
static uccl_conn_t *conn;
static uccl_mr_t *smr;
static uint8_t src[N], dst[2 * N];
static uccl_rdesc_t rd; /* the first N bytes of dst */

static uccl_devq_t *ring(uint32_t entries, uccl_devq_handle_t *h)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_MEM |
                                           UCCL_DEVQ_PARAM_TIMEOUT_MS,
                             .entries = entries, .mem = UCCL_DEVQ_MEM_HOST, .timeout_ms = TIMEOUT_MS};
    uccl_devq_t *q = NULL;

    memset(dst, 0, sizeof(dst));
    if (uccl_devq_create(e, &qp, &q) != UCCL_OK || uccl_devq_bind_local(q, smr) != UCCL_OK ||
        uccl_devq_bind_peer(q, 0, conn) != UCCL_OK || uccl_devq_bind_rdesc(q, 0, &rd) != UCCL_OK) {
        CHECK(0, "ring setup");
        uccl_devq_destroy(q);
        return NULL;
    }
    uccl_devq_handle(q, h);
    return q;
}

static int untouched(void)
{
    for (size_t i = 0; i < sizeof(dst); i++)
        if (dst[i] != 0)
            return 0;
    return 1;
}

static void restart_checks(void)
{
    uccl_devq_handle_t h;
    uccl_devq_t *q = ring(2, &h);
    uint64_t t = 0, t0;
    int rc;

    if (q == NULL)
        return;
    /* stopped: two puts fill the ring, the third waits for room, sees the
     * stop's CANCELED and gives its ticket up */
    CHECK(uccl_devq_start(q) == UCCL_OK && uccl_devq_stop(q) == UCCL_OK, "start, stop");
    CHECK(uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, &t) == 0 && uccl_devq_put(&h, 0, 0, 8, 8, 8, 0, 0, &t) == 0,
          "two puts into the stopped ring with room");
    rc = uccl_devq_put(&h, 0, 0, 16, 16, 8, 0, 0, &t);
    CHECK(rc == UCCL_ERR_CANCELED, "a put waiting for room in the stopped ring: %d", rc);
    rc = uccl_devq_start(q);
    CHECK(rc == UCCL_ERR_CANCELED, "a restart behind a given-up ticket: %s", uccl_status_name((uccl_status_t)rc));
    if (rc == UCCL_OK) { /* what a kernel then sees: a wait that only times out, status OK */
        uccl_devq_put(&h, 0, 0, 24, 24, 8, 0, 0, &t);
        t0 = uccl_time_ms();
        rc = uccl_devq_wait_done(&h, t + 1);
        CHECK(0, "restarted: wait_done %d after %llu ms, status %s", rc,
              (unsigned long long)(uccl_time_ms() - t0), uccl_status_name(uccl_devq_status(q)));
    }
    CHECK(uccl_devq_status(q) == UCCL_ERR_CANCELED, "status after the refused start: %s",
          uccl_status_name(uccl_devq_status(q)));
    uccl_devq_destroy(q);

    /* a ticket given up after the start's check (the put read CANCELED
     * just before the start cleared it): the proxy fails the ring at once */
    if ((q = ring(4, &h)) == NULL)
        return;
    CHECK(uccl_devq_start(q) == UCCL_OK, "start");
    CHECK(uccl_devq_put(&h, 0, 0, 0, 0, 64, 0, 0, &t) == 0 && uccl_devq_wait_done(&h, t + 1) == 0,
          "a write before");
    uccl_devq_fetch_add(h.head, 1); /* a producer's ticket, then its give-up */
    h.ctrl->lost = 1;
    uccl_devq_fence();
    t0 = uccl_time_ms();
    rc = uccl_devq_wait_done(&h, t + 2);
    CHECK(rc == UCCL_ERR_CANCELED && uccl_time_ms() - t0 < TIMEOUT_MS / 2,
          "a given-up ticket in a running ring: wait_done %d after %llu ms (status %s)", rc,
          (unsigned long long)(uccl_time_ms() - t0), uccl_status_name(uccl_devq_status(q)));
    CHECK(uccl_devq_stop(q) == UCCL_ERR_CANCELED, "stop reports it");
    uccl_devq_destroy(q);

    /* a clean stop and restart: commands put meanwhile run */
    if ((q = ring(64, &h)) == NULL)
        return;
    CHECK(uccl_devq_start(q) == UCCL_OK && uccl_devq_stop(q) == UCCL_OK, "start, stop");
    for (int i = 0; i < 10; i++)
        CHECK(uccl_devq_put(&h, 0, 0, (uint64_t)i * 64, (uint64_t)i * 64, 64, 0, 0, &t) == 0, "put %d", i);
    CHECK(uccl_devq_start(q) == UCCL_OK, "a restart after a clean stop");
    rc = uccl_devq_wait_done(&h, t + 1);
    CHECK(rc == 0 && memcmp(dst, src, 640) == 0 && untouched() == 0, "restarted ring: %d, bytes", rc);
    uccl_devq_destroy(q);
    if (failures == 0)
        printf("ok: restart refused behind a given-up ticket; one given up later fails the ring; "
               "a clean restart runs\n");
}

static void remote_bounds_checks(void)
{
    static const uint64_t roff[] = {N - 4, N, UINT64_MAX - 3, UINT64_MAX - 7};
    int before = failures;

    for (int k = 0; k < 4; k++) {
        uccl_devq_handle_t h;
        uccl_devq_t *q = ring(8, &h);
        uint64_t t = 0;
        int rc;

        if (q == NULL)
            return;
        CHECK(uccl_devq_start(q) == UCCL_OK, "start");
        rc = uccl_devq_put(&h, 0, 0, 0, roff[k], 8, 0, 0, &t);
        if (k == 3) /* merges with the one before into [2^64 - 8, 2^64 + 8) */
            rc |= uccl_devq_put(&h, 0, 0, 8, 0, 8, 0, 0, &t);
        CHECK(rc == 0, "put");
        rc = uccl_devq_wait_done(&h, t + 1);
        CHECK(rc == UCCL_ERR_OUT_OF_BOUNDS && uccl_devq_status(q) == UCCL_ERR_OUT_OF_BOUNDS && untouched(),
              "remote offset 0x%llx: wait_done %d, status %s, bytes written: %s", (unsigned long long)roff[k], rc,
              uccl_status_name(uccl_devq_status(q)), untouched() ? "none" : "some");
        uccl_devq_destroy(q);
    }
    if (failures == before)
        printf("ok: remote offsets past the descriptor or wrapping fail the ring, nothing written\n");
}

static void ticket_wrap_check(void)
{
    const uint64_t w = (1ull << 32) - 5; /* the counters of a ring that ran that long */
    const uint32_t entries = 4;
    uccl_devq_handle_t h;
    uccl_devq_t *q = ring(entries, &h);
    uint64_t t = 0;
    int rc = 0;

    if (q == NULL)
        return;
    *h.head = *h.tail_cache = w;
    h.ctrl->tail = h.ctrl->done = w;
    for (uint64_t x = w - entries; x < w; x++) /* the last lap's sequence words */
        h.cmds[x & (entries - 1)].seq = (uint32_t)(x + 1);
    CHECK(uccl_devq_start(q) == UCCL_OK, "start");
    for (int i = 0; i < 64 && rc == 0; i++)
        rc = uccl_devq_put(&h, 0, 0, (uint64_t)i * 8, (uint64_t)i * 8, 8, 0, 0, &t);
    if (rc == 0)
        rc = uccl_devq_wait_done(&h, t + 1);
    CHECK(rc == 0 && t == w + 63 && memcmp(dst, src, 512) == 0, "tickets across 2^32: %d (last ticket 0x%llx)", rc,
          (unsigned long long)t);
    uccl_devq_destroy(q);
    if (rc == 0)
        printf("ok: tickets 0x%llx..0x%llx across 2^32\n", (unsigned long long)w, (unsigned long long)t);
}

static void index_checks(void)
{
    static const uint32_t bad[][2] = {{65536, 0}, {0, 65536}, {0x10001, 0x10000}};
    int before = failures;

    for (int k = 0; k < 3; k++) {
        uccl_devq_handle_t h;
        uccl_devq_t *q = ring(8, &h);
        uint64_t t = 0;
        int rc;

        if (q == NULL)
            return;
        CHECK(uccl_devq_start(q) == UCCL_OK, "start");
        rc = uccl_devq_put(&h, bad[k][0], bad[k][1], 0, 0, 8, 0, 0, &t);
        if (rc == 0)
            rc = uccl_devq_wait_done(&h, t + 1);
        CHECK(rc == UCCL_ERR_INVALID_PARAM && untouched(), "peer %u slot %u: %d, bytes written: %s", bad[k][0],
              bad[k][1], rc, untouched() ? "none" : "some");
        uccl_devq_destroy(q);
    }
    if (failures == before)
        printf("ok: peer and slot indices past 16 bits refused, nothing written\n");
}

int main(void)
{
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t addr_len = sizeof(addr);
    uccl_conn_t *in = NULL;
    uccl_mr_t *dmr = NULL;

    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    for (int i = 0; i < N; i++)
        src[i] = (uint8_t)(i * 7 + 1);
    if (uccl_engine_create(NULL, &e) != UCCL_OK || uccl_engine_address(e, addr, &addr_len) != UCCL_OK ||
        uccl_connect(e, addr, addr_len, &conn) != UCCL_OK || uccl_accept(e, 5000, &in) != UCCL_OK ||
        uccl_mr_reg(e, src, N, 0, &smr) != UCCL_OK || uccl_mr_reg(e, dst, sizeof(dst), 0, &dmr) != UCCL_OK ||
        uccl_mr_pack(dmr, 0, N, &rd) != UCCL_OK) {
        printf("FAIL: setup\n");
        return 1;
    }
    restart_checks();
    remote_bounds_checks();
    ticket_wrap_check();
    index_checks();
    uccl_conn_close(in);
    uccl_conn_close(conn);
    uccl_mr_dereg(dmr);
    uccl_mr_dereg(smr);
    uccl_engine_destroy(e);
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

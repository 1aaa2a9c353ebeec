/* Eager sends followed by direct sends on one connection (issue 23, ofi19):
 * with OFI_QUIRK_EXACT_TAGS (shm) every direct receive is posted for one
 * exact provider tag, which holds the run (how many messages just before
 * this one had its tag; the sender counts eager sends too). A receiver that
 * cannot know a message's run or tag (message n - 1 came eagerly with its
 * tag, or the oldest receive has another tag) waits for the sender's hint,
 * which goes only while the send is not complete: a send shm injects
 * (up to 4 KiB) completes at once, so it must not go directly, or it waits
 * in the provider for good (UCCL_OFI_EAGER=256, 64 B then 1 KiB sends in
 * perf_ofi). Windows of sends with one tag, eager then direct (defaults
 * and a small UCCL_OFI_EAGER), eager and direct interleaved, crossed tags,
 * the receives posted before or after the sends; every message
 * byte-verified, each window bounded (a stalled one never ends). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (4u << 20)
#define WINDOW 16
#define STRIDE (AREA / WINDOW)
/* a stalled window never ends; a sound one well within this on a loaded box */
#define BOUND_MS 2000

#include "ofi_pair.h"

static int bound_ms = BOUND_MS;

static bool open_pair(const char *prov, const char *eager)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, "UCCL_OFI_EAGER", eager, NULL};
    return ofi_pair_open(env);
}

/* n sends of lens[i] bytes, tag, from P.a to P.b; receives posted before
 * (late false) or after the sends; each received whole within BOUND_MS. */
static void window(const size_t *lens, int n, uint64_t tag, bool late)
{
    uccl_req_t *reqs[2 * WINDOW];

    for (int i = 0; i < n; i++)
        unit_fill(pa + (size_t)i * STRIDE, lens[i], 7u + (unsigned)i + (unsigned)lens[i]);
    memset(pb, 0, AREA);
    for (int i = 0; !late && i < n; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, lens[i], tag, &reqs[n + i]),
                           UCCL_OK);
    for (int i = 0; i < n; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, lens[i], tag, &reqs[i]),
                           UCCL_OK);
    if (late) {
        ofi_pair_progress(50);
        for (int i = 0; i < n; i++)
            UNIT_ASSERT_STATUS(
                uccl_recv(P.ba, mb, (size_t)i * STRIDE, lens[i], tag, &reqs[n + i]), UCCL_OK);
    }
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, (size_t)(2 * n), bound_ms), UCCL_OK);
    for (int i = 0; i < 2 * n; i++) {
        size_t got = 0;

        CU_ASSERT_EQUAL(uccl_wait(reqs[i], 0), UCCL_OK);
        if (i >= n) {
            UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[i], &got), UCCL_OK);
            CU_ASSERT_EQUAL(got, lens[i - n]);
            CU_ASSERT(memcmp(pb + (size_t)(i - n) * STRIDE, pa + (size_t)(i - n) * STRIDE,
                             lens[i - n]) == 0);
        }
        uccl_req_free(reqs[i]);
    }
}

static void uniform(size_t len, int n, uint64_t tag, bool late)
{
    size_t lens[WINDOW];

    for (int i = 0; i < n; i++)
        lens[i] = len;
    window(lens, n, tag, late);
}

/* eager windows, then direct ones: the direct path must have run */
static void eager_then_direct(const char *prov, const char *eager, size_t small, size_t big)
{
    tp_ofi_t *ta;
    uint64_t sent;

    if (!open_pair(prov, eager))
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    ta = ofi_of(P.a);
    sent = ta->direct_sent;
    for (int r = 0; r < 3; r++)
        uniform(small, WINDOW, 1, false);
    for (int r = 0; r < 3; r++)
        uniform(big, WINDOW, 1, r == 1);
    /* one eager message, then direct ones again */
    uniform(small, 1, 1, false);
    uniform(big, WINDOW, 1, false);
    /* another tag between: eager tag 2, then direct tag 1 */
    uniform(small, 3, 2, false);
    uniform(big, WINDOW, 1, false);
    /* direct where the size allows it (above the provider's inject size
     * with exact tags), else not at all */
    if (ta->direct_max > 0 && big > ta->direct_min)
        CU_ASSERT(ta->direct_sent - sent >= 5u * WINDOW);
    if (big <= ta->direct_min)
        CU_ASSERT_EQUAL(ta->direct_sent, sent);
    ofi_pair_close();
}

static void test_shm_defaults(void)
{
    eager_then_direct("shm", "8K", 64, 16384);
}

static void test_shm_eager_small(void)
{
    eager_then_direct("shm", "256", 64, 1024);
}

static void test_shm_boundary(void)
{
    eager_then_direct("shm", "8K", 8192, 8193);
}

static void test_tcp(void)
{
    eager_then_direct("tcp;ofi_rxm", "256", 64, 1024);
}

/* eager and direct interleaved in one window, one tag */
static void test_shm_mixed(void)
{
    static const size_t lens[WINDOW] = {64,    16384, 4096, 9000,  8192, 8193, 0,    20000,
                                        16384, 16384, 100,  16384, 16384, 1,   65536, 16384};

    if (!open_pair("shm", "8K"))
        UNIT_SKIP("libfabric's shm provider is not usable here");
    for (int r = 0; r < 4; r++)
        window(lens, WINDOW, 3, r == 2);
    ofi_pair_close();
}

/* the oldest receive of another tag than the message: sends of tag 1 and
 * tag 2 in turn, receives posted for tag 2 first, before the sends */
static void cross(const char *eager, size_t len)
{
    uccl_req_t *reqs[4];

    if (!open_pair("shm", eager))
        UNIT_SKIP("libfabric's shm provider is not usable here");
    for (int r = 0; r < 4; r++) {
        unit_fill(pa, len, 1u + (unsigned)r);
        unit_fill(pa + STRIDE, len, 50u + (unsigned)r);
        memset(pb, 0, 2 * STRIDE);
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, STRIDE, len, 2, &reqs[2]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, len, 1, &reqs[3]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, len, 1, &reqs[0]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, STRIDE, len, 2, &reqs[1]), UCCL_OK);
        UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 4, BOUND_MS), UCCL_OK);
        for (int i = 0; i < 4; i++) {
            CU_ASSERT_EQUAL(uccl_wait(reqs[i], 0), UCCL_OK);
            uccl_req_free(reqs[i]);
        }
        CU_ASSERT(memcmp(pb, pa, len) == 0);
        CU_ASSERT(memcmp(pb + STRIDE, pa + STRIDE, len) == 0);
    }
    ofi_pair_close();
}

static void test_shm_cross(void)
{
    cross("256", 1024);
    cross("8K", 16384);
}

/* The first direct message after eager ones of its tag: hinted with the
 * send, it does not wait UCCL_OFI_DIRECT_WAIT (1 s here) for the late
 * hint; each window well within 400 ms. */
static void test_shm_first_hint(void)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", "shm", "UCCL_OFI_DIRECT_WAIT", "1000000", NULL};
    tp_ofi_t *ta;
    uint64_t hints;

    if (!ofi_pair_open(env))
        UNIT_SKIP("libfabric's shm provider is not usable here");
    ta = ofi_of(P.a);
    hints = ta->direct_hints;
    bound_ms = 400;
    for (int r = 0; r < 2; r++) {
        uniform(64, WINDOW, 1, false);
        uniform(16384, WINDOW, 1, false);
        uniform(16384, WINDOW, 1, false);
    }
    bound_ms = BOUND_MS;
    CU_ASSERT_EQUAL(ta->direct_hints - hints, 2u); /* one per change from eager to direct */
    ofi_pair_close();
}

static CU_TestInfo tests[] = {
    {"shm, defaults: eager (64 B) windows then direct (16 KiB), byte-verified, bounded",
     test_shm_defaults},
    {"shm, UCCL_OFI_EAGER=256: 64 B then 1 KiB (the perf_ofi stall)", test_shm_eager_small},
    {"shm, defaults: 8 KiB then 8 KiB + 1", test_shm_boundary},
    {"shm, defaults: eager and direct interleaved in one window", test_shm_mixed},
    {"shm: the oldest receive of another tag (1 KiB with UCCL_OFI_EAGER=256, 16 KiB)",
     test_shm_cross},
    {"shm: the first direct message after eager ones of its tag is hinted with the send",
     test_shm_first_hint},
    {"tcp;ofi_rxm, UCCL_OFI_EAGER=256: 64 B then 1 KiB", test_tcp},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_eager_direct", NULL, NULL, NULL, NULL, tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

/* How many control receives a connection posts (UCCL_OFI_RX_DEPTH, 0 =
 * the provider's row of the quirk table): 16 on shm, 64 elsewhere
 * (ofi_fabric.c: shm matches tagged messages against its receives in the
 * order they were posted, and the control receives stay ahead of the
 * direct ones; tests/perf/results/ofi/ofi17-H200host). With fewer posted,
 * more control messages than that must still arrive: eager sends three
 * times the depth, sent before their receives were posted (waiting in the
 * provider), then a window of direct sends; bytes compared, all within
 * UNIT_TIMEOUT_MS (a stall fails, never hangs). A depth out of 4-4096 is
 * refused. */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (8u << 20)
#define EAGER_LEN 1000 /* below UCCL_OFI_EAGER: a control message */
#define DIRECT_LEN (64u * 1024)
#define MAXN 64
#define STRIDE (AREA / MAXN)

#include "ofi_pair.h"

/* n eager sends of tag 3 before their receives, then the receives. */
static void check_eager_burst(int n)
{
    uccl_req_t *reqs[2 * MAXN];

    for (int i = 0; i < n; i++)
        unit_fill(pa + (size_t)i * STRIDE, EAGER_LEN, 700u + (unsigned)i);
    memset(pb, 0, AREA);
    for (int i = 0; i < n; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, EAGER_LEN, 3, &reqs[i]),
                           UCCL_OK);
    ofi_pair_progress(2000);
    for (int i = 0; i < n; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, EAGER_LEN, 3, &reqs[n + i]),
                           UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2 * (size_t)n, UNIT_TIMEOUT_MS), UCCL_OK);
    for (int i = 0; i < 2 * n; i++)
        uccl_req_free(reqs[i]);
    for (int i = 0; i < n; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)i * STRIDE, EAGER_LEN) == 0);
}

/* rx_depth: UCCL_OFI_RX_DEPTH's value ("" = unset); want: the depth the
 * connection must post. */
static void check_provider(const char *prov, const char *rx_depth, int want)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, "UCCL_OFI_RX_DEPTH", rx_depth, NULL};
    uccl_req_t *reqs[2 * 16];
    tp_ofi_t *tb;

    if (rx_depth[0] == '\0')
        env[2] = NULL;
    if (!ofi_pair_open(env)) {
        fprintf(stderr, "libfabric's %s provider is not usable here: skipped\n", prov);
        return;
    }
    tb = ofi_of(P.b);
    CU_ASSERT_EQUAL(tb->cfg.rx_depth, want);
    CU_ASSERT_EQUAL(ofi_of(P.a)->cfg.rx_depth, want);
    check_eager_burst(3 * want < MAXN ? 3 * want : MAXN);
    ofi_pair_post_window(reqs, 16, DIRECT_LEN, STRIDE, 4);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 32, UNIT_TIMEOUT_MS), UCCL_OK);
    for (int i = 0; i < 32; i++)
        uccl_req_free(reqs[i]);
    ofi_pair_check_window(16, DIRECT_LEN, STRIDE);
    ofi_pair_close();
}

static void test_shm_default(void)
{
    check_provider("shm", "", 16);
}

static void test_shm_set(void)
{
    check_provider("shm", "64", 64);
}

static void test_tcp_default(void)
{
    check_provider("tcp;ofi_rxm", "", 64);
}

static void test_out_of_range(void)
{
    static const char *const bad[] = {"2", "-1", "5000"};
    uccl_engine_t *e = NULL;

    setenv("UCCL_OFI_PROVIDER", "shm", 1);
    setenv("UCCL_TRANSPORTS", "ofi", 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("UCCL_OFI_RX_DEPTH", bad[i], 1);
        UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    }
    unsetenv("UCCL_OFI_RX_DEPTH");
    unsetenv("UCCL_TRANSPORTS");
    unsetenv("UCCL_OFI_PROVIDER");
}

static CU_TestInfo depth_tests[] = {
    {"shm: 16 control receives, bursts past them arrive", test_shm_default},
    {"shm: UCCL_OFI_RX_DEPTH=64 honoured", test_shm_set},
    {"tcp;ofi_rxm: 64 control receives", test_tcp_default},
    {"UCCL_OFI_RX_DEPTH out of 4-4096 refused", test_out_of_range},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_ctrl_depth", NULL, NULL, NULL, NULL, depth_tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

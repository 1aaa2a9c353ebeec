/* The libfabric (ofi) transport's refusals and parsers: an unknown provider
 * name, a provider without what we need (FI_RMA, ordering, CQ data) judged
 * on a made-up fi_info, memory the transport refuses, malformed settings,
 * and the remote key slot's encoder and one parser. The data path itself
 * is test_tp_conformance's (suites ofi_tcp, ofi_shm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

extern const struct uccl_tp_ops uccl_tp_ofi_ops;

static uccl_status_t engine_with(const char *var, const char *value, uccl_engine_t **e)
{
    uccl_status_t st;

    setenv(var, value, 1);
    st = unit_engine_create("ofi", e);
    unsetenv(var);
    return st;
}

/* A name that is no libfabric provider's (a typo): INVALID_PARAM, the
 * engine is not created, whether ofi is asked for or only allowed (with
 * UCCL_TRANSPORTS unset it used to be skipped silently). A real provider
 * name this host lacks stays NOT_FOUND: not a bad setting. */
static void test_unknown_provider(void)
{
    uccl_engine_t *e = NULL;

    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_PROVIDER", "no_such_provider", &e),
                       UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(e == NULL);
    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_PROVIDER", "tcp;ofi_nosuch", &e),
                       UCCL_ERR_INVALID_PARAM);
    setenv("UCCL_OFI_PROVIDER", "garbage", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_ERR_INVALID_PARAM);
    unsetenv("UCCL_OFI_PROVIDER");
    CU_ASSERT(e == NULL);
    CU_ASSERT(uccl_ofi_provider_name_ok("verbs;ofi_rxm"));
    CU_ASSERT(uccl_ofi_provider_name_ok("psm3"));
    CU_ASSERT(!uccl_ofi_provider_name_ok("tcp;"));
    CU_ASSERT(!uccl_ofi_provider_name_ok(""));
    CU_ASSERT(!uccl_ofi_provider_name_ok("tcpx"));
}

/* Settings out of range are refused whatever the provider. */
/* Left to choose, the transport takes no software provider (tcp and shm
 * serve those paths): NO_DEVICE where only those exist, as here in CI. */
static void test_software_not_by_default(void)
{
    uccl_engine_t *e = NULL;
    uccl_status_t st = unit_engine_create("ofi", &e);

    if (st == UCCL_OK) {
        uccl_engine_destroy(e);
        UNIT_SKIP("a libfabric provider with a NIC of its own is usable here");
    }
    UNIT_ASSERT_STATUS(st, UCCL_ERR_NO_DEVICE);
    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_PROVIDER", "tcp;ofi_rxm", &e), UCCL_OK);
    uccl_engine_destroy(e);
}

static void test_bad_settings(void)
{
    uccl_engine_t *e = NULL;

    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_TX_DEPTH", "1", &e), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_MAX_IOV", "99", &e), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT(e == NULL);
}

/* A made-up provider description that offers everything we need; each case
 * takes one thing away and expects a refusal that names it. */
static struct fi_info *good_info(void)
{
    struct fi_info *i = fi_allocinfo();

    CU_ASSERT_FATAL(i != NULL);
    i->fabric_attr->prov_name = strdup("madeup");
    i->ep_attr->type = FI_EP_RDM;
    i->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    i->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_WAW;
    i->domain_attr->cq_data_size = 8;
    i->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ENDPOINT;
    return i;
}

static void expect_refusal(struct fi_info *i, const char *word)
{
    char why[256];

    UNIT_ASSERT_STATUS(uccl_ofi_check_info(i, why, sizeof(why)), UCCL_ERR_UNSUPPORTED);
    CU_ASSERT(strstr(why, "madeup") != NULL);
    CU_ASSERT(strstr(why, word) != NULL);
    fi_freeinfo(i);
}

static void test_provider_checks(void)
{
    struct fi_info *i = good_info();
    char why[256];

    UNIT_ASSERT_STATUS(uccl_ofi_check_info(i, why, sizeof(why)), UCCL_OK);
    fi_freeinfo(i);
    i = good_info();
    i->caps &= ~(uint64_t)FI_RMA;
    expect_refusal(i, "FI_RMA");
    i = good_info();
    i->caps &= ~(uint64_t)FI_TAGGED;
    expect_refusal(i, "FI_TAGGED");
    /* unordered writes are fine (the closing write waits for the others),
     * so are 4 bytes of CQ data (the immediate then follows as a message) */
    i = good_info();
    i->tx_attr->msg_order = FI_ORDER_SAS;
    i->domain_attr->cq_data_size = 4;
    UNIT_ASSERT_STATUS(uccl_ofi_check_info(i, why, sizeof(why)), UCCL_OK);
    fi_freeinfo(i);
    i = good_info();
    i->tx_attr->msg_order = FI_ORDER_WAW;
    expect_refusal(i, "FI_ORDER_SAS");
    i = good_info();
    i->domain_attr->cq_data_size = 2;
    expect_refusal(i, "CQ data");
    i = good_info();
    i->domain_attr->mr_mode |= FI_MR_RAW;
    expect_refusal(i, "FI_MR_RAW");
    i = good_info();
    i->ep_attr->type = FI_EP_MSG;
    expect_refusal(i, "FI_EP_RDM");
}

/* GPU memory: staged where the engine has a GPU (a handle without key,
 * so peers reach it by send/recv only), else refused with UNSUPPORTED;
 * host memory registers and packs a key. */
static void test_memory_refused(void)
{
    uccl_engine_t *e;
    uccl_tp_t *tp = NULL;
    uccl_tp_memh_t *memh = NULL;
    uint8_t rkey[UCCL_TP_RKEY_MAX], buf[4096];
    uint64_t key, base;

    if (engine_with("UCCL_OFI_PROVIDER", "tcp;ofi_rxm", &e) != UCCL_OK)
        UNIT_SKIP("libfabric's tcp;ofi_rxm provider is not usable here");
    for (int i = 0; i < e->ntp; i++)
        if (e->tp[i]->ops == &uccl_tp_ofi_ops)
            tp = e->tp[i];
    CU_ASSERT_FATAL(tp != NULL);
    if (uccl_tp_caps(tp) & UCCL_TP_CAP_CUDA_MEM) {
        UNIT_ASSERT_STATUS(uccl_tp_ofi_ops.mem_reg(tp, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh),
                           UCCL_OK);
        CU_ASSERT_FATAL(memh != NULL);
        CU_ASSERT_EQUAL(uccl_tp_ofi_ops.mem_pack(tp, memh, rkey), 0);
        uccl_tp_ofi_ops.mem_dereg(tp, memh);
        memh = NULL;
    } else {
        UNIT_ASSERT_STATUS(uccl_tp_ofi_ops.mem_reg(tp, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh),
                           UCCL_ERR_UNSUPPORTED);
    }
    UNIT_ASSERT_STATUS(uccl_tp_ofi_ops.mem_reg(tp, buf, sizeof(buf), UCCL_MEM_HOST, -1, &memh),
                       UCCL_OK);
    CU_ASSERT_FATAL(memh != NULL);
    size_t n = uccl_tp_ofi_ops.mem_pack(tp, memh, rkey);
    CU_ASSERT(n >= 2);
    UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, n, &key, &base), UCCL_OK);
    CU_ASSERT_EQUAL(key, memh->key);
    CU_ASSERT(base == 0 || base == (uint64_t)(uintptr_t)buf);
    uccl_tp_ofi_ops.mem_dereg(tp, memh);
    uccl_engine_destroy(e);
}

/* The key slot: shortest encodings round-trip; malformed slots are refused. */
static void test_rkey_slot(void)
{
    static const uint64_t keys[] = {0, 1, 0xff, 0x100, 0xdeadbeef, UINT64_MAX};
    uint8_t rkey[UCCL_TP_RKEY_MAX];
    uint64_t key, base;
    size_t n;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        n = uccl_ofi_rkey_encode(keys[i], false, 0, rkey);
        CU_ASSERT(n >= 2 && n <= 9);
        UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, n, &key, &base), UCCL_OK);
        CU_ASSERT_EQUAL(key, keys[i]);
        CU_ASSERT_EQUAL(base, 0);
        n = uccl_ofi_rkey_encode(keys[i], true, 0x7f1234567000ull, rkey);
        CU_ASSERT(n > 0);
        UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, n, &key, &base), UCCL_OK);
        CU_ASSERT_EQUAL(key, keys[i]);
        CU_ASSERT_EQUAL(base, 0x7f1234567000ull);
    }
    CU_ASSERT_EQUAL(uccl_ofi_rkey_encode(UINT64_MAX, true, UINT64_MAX, rkey), 0); /* 17 bytes */
    n = uccl_ofi_rkey_encode(0x1234, true, 0x5678, rkey);
    UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, n - 1, &key, &base), UCCL_ERR_BAD_DESC);
    UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, 1, &key, &base), UCCL_ERR_BAD_DESC);
    rkey[0] = 0x09; /* 9 key bytes */
    UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, 10, &key, &base), UCCL_ERR_BAD_DESC);
    rkey[0] = 0x00; /* no key */
    UNIT_ASSERT_STATUS(uccl_ofi_rkey_parse(rkey, 1, &key, &base), UCCL_ERR_BAD_DESC);
}

/* libfabric's shm provider names an endpoint PID:UID:N in /dev/shm; a
 * process killed with its endpoint open leaves the name behind, and a later
 * process given the same pid failed fi_enable with EBUSY (seen in CI). The
 * transport names its shm endpoints itself: with every default name of
 * this process taken, an engine still opens. */
static void test_shm_name_left_behind(void)
{
    char path[64];
    int planted = 0;
    uccl_engine_t *e = NULL;

    for (int i = 0; i < 32; i++) {
        FILE *f;

        snprintf(path, sizeof(path), "/dev/shm/%d:%d:%d", (int)getpid(), (int)getuid(), i);
        if ((f = fopen(path, "wx")) != NULL) {
            fclose(f);
            planted++;
        }
    }
    if (planted == 0)
        UNIT_SKIP("cannot create files in /dev/shm here");
    UNIT_ASSERT_STATUS(engine_with("UCCL_OFI_PROVIDER", "shm", &e), UCCL_OK);
    if (e != NULL)
        uccl_engine_destroy(e);
    for (int i = 0; i < 32; i++) {
        snprintf(path, sizeof(path), "/dev/shm/%d:%d:%d", (int)getpid(), (int)getuid(), i);
        unlink(path);
    }
}

static CU_TestInfo ofi_tests[] = {
    {"shm endpoint names of a dead process with our pid: still opens", test_shm_name_left_behind},
    {"unknown provider name -> INVALID_PARAM", test_unknown_provider},
    {"settings out of range -> INVALID_PARAM", test_bad_settings},
    {"software providers only when named", test_software_not_by_default},
    {"provider without FI_RMA, tags, order, CQ data -> UNSUPPORTED, named", test_provider_checks},
    {"GPU memory staged (no key) or refused, host memory keyed", test_memory_refused},
    {"remote key slot encode/parse", test_rkey_slot},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi", NULL, NULL, NULL, NULL, ofi_tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

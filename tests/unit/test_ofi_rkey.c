/* A connection's one-sided requests use the remote key of their own
 * region, whichever region the request before named: ofi_post_rma keeps
 * the last key it parsed per connection (ofi_rma.c) and must parse a new
 * one when the bytes differ. Writes and reads of 64 KiB (posted whole)
 * alternate between three regions of the target, each its own libfabric
 * key; bytes compared, the byte after each written range untouched; then
 * one region registered again and again at the same address, reached
 * through each new descriptor (the core keeps the last descriptor's key per
 * connection, xfer.c); over shm and tcp;ofi_rxm (where keys are the
 * provider's). */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (1u << 20)
#define LEN (64u * 1024)
#define NREG 3

#include "ofi_pair.h"

static void run(uccl_req_t *req)
{
    UNIT_ASSERT_STATUS(unit_drive(&P, &req, 1, UNIT_TIMEOUT_MS), UCCL_OK);
    uccl_req_free(req);
}

static void check_provider(const char *prov)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, NULL};
    uint8_t *buf[NREG];
    uccl_mr_t *mr[NREG];
    uccl_rdesc_t rd[NREG];
    uccl_req_t *req;
    uint64_t whole;

    if (!ofi_pair_open(env)) {
        fprintf(stderr, "libfabric's %s provider is not usable here: skipped\n", prov);
        return;
    }
    for (int r = 0; r < NREG; r++) {
        buf[r] = aligned_alloc(4096, 2 * LEN);
        CU_ASSERT_FATAL(buf[r] != NULL);
        memset(buf[r], 0xee, 2 * LEN);
        UNIT_ASSERT_STATUS(uccl_mr_reg(P.b, buf[r], 2 * LEN, 0, &mr[r]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_pack(mr[r], 0, 2 * LEN, &rd[r]), UCCL_OK);
    }
    /* the connection's first request takes the data path (its setup may
     * still be under way): one before counting */
    UNIT_ASSERT_STATUS(uccl_write(P.ab, ma, 0, LEN - 16, &rd[0], LEN + 16, &req), UCCL_OK);
    run(req);
    whole = ofi_of(P.a)->rma_whole;
    /* write: region 0, 1, 2, 0, 2, 1 in turn, each range its own bytes */
    static const int order[] = {0, 1, 2, 0, 2, 1};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        int r = order[i];
        size_t off = 1 + i;

        unit_fill(pa, LEN, 300u + (unsigned)i);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, ma, 0, LEN, &rd[r], off, &req), UCCL_OK);
        run(req);
        ofi_pair_progress(4); /* nothing lands late past the range */
        CU_ASSERT(memcmp(buf[r] + off, pa, LEN) == 0);
        CU_ASSERT(buf[r][off + LEN] == 0xee);
        /* read it back through the next region's key first, then its own */
        memset(pa, 0, LEN);
        UNIT_ASSERT_STATUS(uccl_read(P.ab, ma, 0, LEN, &rd[(r + 1) % NREG], LEN, &req),
                           UCCL_OK);
        run(req);
        CU_ASSERT(memcmp(pa, buf[(r + 1) % NREG] + LEN, LEN) == 0);
        UNIT_ASSERT_STATUS(uccl_read(P.ab, ma, 0, LEN, &rd[r], off, &req), UCCL_OK);
        run(req);
        CU_ASSERT(memcmp(pa, buf[r] + off, LEN) == 0);
    }
    CU_ASSERT_EQUAL(ofi_of(P.a)->rma_whole - whole, 18u); /* each posted whole */
    /* region 0 registered again at the same address (another id, another
     * key where the provider picks them): its new descriptor reaches it,
     * right after requests through the old one filled the caches */
    for (int again = 0; again < 3; again++) {
        uccl_rdesc_t old = rd[0];

        unit_fill(pa, LEN, 400u + (unsigned)again);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, ma, 0, LEN, &old, 0, &req), UCCL_OK);
        run(req);
        uccl_mr_dereg(mr[0]);
        UNIT_ASSERT_STATUS(uccl_mr_reg(P.b, buf[0], 2 * LEN, 0, &mr[0]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_pack(mr[0], 0, 2 * LEN, &rd[0]), UCCL_OK);
        CU_ASSERT(memcmp(&old, &rd[0], sizeof(old)) != 0);
        unit_fill(pa, LEN, 500u + (unsigned)again);
        UNIT_ASSERT_STATUS(uccl_write(P.ab, ma, 0, LEN, &rd[0], LEN, &req), UCCL_OK);
        run(req);
        ofi_pair_progress(4);
        CU_ASSERT(memcmp(buf[0] + LEN, pa, LEN) == 0);
        memset(pa, 0, LEN);
        UNIT_ASSERT_STATUS(uccl_read(P.ab, ma, 0, LEN, &rd[0], 0, &req), UCCL_OK);
        run(req);
        CU_ASSERT(unit_mismatches(pa, LEN, 400u + (unsigned)again) == 0);
    }
    for (int r = 0; r < NREG; r++) {
        uccl_mr_dereg(mr[r]);
        free(buf[r]);
    }
    ofi_pair_close();
}

static void test_shm(void)
{
    check_provider("shm");
}

static void test_tcp(void)
{
    check_provider("tcp;ofi_rxm");
}

static CU_TestInfo rkey_tests[] = {
    {"keys of three regions in turn, one registered again, shm", test_shm},
    {"keys of three regions in turn, one registered again, tcp;ofi_rxm", test_tcp},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_rkey", NULL, NULL, NULL, NULL, rkey_tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

/* Unit tests of 64-byte remote descriptors (src/core/rdesc.c): round trip,
 * uccl_rdesc_info, every corruption, wrap-around ranges, and a fuzz loop. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_fuzz.h"

#define FUZZ_ROUNDS 50000

static uccl_rdesc_fields_t sample_fields(void)
{
    uccl_rdesc_fields_t f;

    memset(&f, 0, sizeof(f));
    f.engine_id = 0x1122334455667788ull;
    f.region_id = 99;
    f.addr = 0x7f0000001000ull;
    f.len = 1u << 20;
    f.mem_type = UCCL_MEM_HOST;
    f.device = -1;
    for (int i = 0; i < UCCL_TP_RKEY_SIZE; i++)
        f.rkey[i] = (uint8_t)(0xc0 + i);
    return f;
}

static void reseal(uccl_rdesc_t *d)
{
    uccl_put_u32(d->bytes + 60, uccl_fnv1a32(d->bytes, 60));
}

static void test_round_trip(void)
{
    uccl_rdesc_fields_t in = sample_fields(), out;
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    CU_ASSERT_EQUAL(sizeof(uccl_rdesc_t), UCCL_RDESC_SIZE);
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    CU_ASSERT_EQUAL(out.engine_id, in.engine_id);
    CU_ASSERT_EQUAL(out.region_id, in.region_id);
    CU_ASSERT_EQUAL(out.addr, in.addr);
    CU_ASSERT_EQUAL(out.len, in.len);
    CU_ASSERT_EQUAL(out.mem_type, in.mem_type);
    CU_ASSERT_EQUAL(out.device, -1);
    CU_ASSERT(memcmp(out.rkey, in.rkey, UCCL_TP_RKEY_SIZE) == 0);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    CU_ASSERT_EQUAL(info.engine_id, in.engine_id);
    CU_ASSERT_EQUAL(info.addr, in.addr);
    CU_ASSERT_EQUAL(info.len, in.len);
    CU_ASSERT_EQUAL(info.mem_type, UCCL_MEM_HOST);

    in.mem_type = UCCL_MEM_CUDA;
    in.device = 7;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    CU_ASSERT_EQUAL(out.mem_type, UCCL_MEM_CUDA);
    CU_ASSERT_EQUAL(out.device, 7);
    in.mem_type = UCCL_MEM_ROCM;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    CU_ASSERT_EQUAL(info.mem_type, UCCL_MEM_ROCM);
}

/* A descriptor is position independent: a copy decodes the same. */
static void test_copy_anywhere(void)
{
    uccl_rdesc_fields_t in = sample_fields(), out;
    uccl_rdesc_t d;
    uint8_t *heap = malloc(UCCL_RDESC_SIZE + 1);

    CU_ASSERT_PTR_NOT_NULL_FATAL(heap);
    uccl_rdesc_encode(&in, &d);
    memcpy(heap + 1, &d, UCCL_RDESC_SIZE); /* unaligned on purpose */
    memcpy(&d, heap + 1, UCCL_RDESC_SIZE);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    CU_ASSERT_EQUAL(out.addr, in.addr);
    free(heap);
}

static void test_null_args(void)
{
    uccl_rdesc_fields_t in = sample_fields(), out;
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(NULL, &info), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(NULL, &out), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, NULL), UCCL_ERR_INVALID_PARAM);
}

static void test_garbage(void)
{
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;
    uint64_t seed = 77;

    memset(&d, 0, sizeof(d));
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    memset(&d, 0xff, sizeof(d));
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < UCCL_RDESC_SIZE; i++)
            d.bytes[i] = (uint8_t)unit_rand(&seed);
        UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    }
}

/* The checksum comes first: any single-bit flip is a bad descriptor. */
static void test_flipped_bits(void)
{
    uccl_rdesc_fields_t in = sample_fields();
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    uccl_rdesc_encode(&in, &d);
    for (int pos = 0; pos < UCCL_RDESC_SIZE; pos++) {
        for (int bit = 0; bit < 8; bit++) {
            d.bytes[pos] ^= (uint8_t)(1u << bit);
            UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
            d.bytes[pos] ^= (uint8_t)(1u << bit);
        }
    }
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
}

/* Well sealed but wrong in content (a buggy or hostile peer). */
static void test_bad_fields(void)
{
    uccl_rdesc_fields_t in = sample_fields();
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    uccl_rdesc_encode(&in, &d);
    d.bytes[4] = 2;
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_VERSION);
    d.bytes[4] = 0;
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_VERSION);

    uccl_rdesc_encode(&in, &d);
    d.bytes[0] ^= 1;
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);

    uccl_rdesc_encode(&in, &d);
    d.bytes[5] = UCCL_MEM_ROCM + 1;
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);

    uccl_rdesc_encode(&in, &d);
    d.bytes[6] = 1; /* reserved flags */
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
}

static void test_wrap_around(void)
{
    uccl_rdesc_fields_t in = sample_fields();
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    in.addr = UINT64_MAX - 9;
    in.len = 10; /* ends at 2^64: wraps to 0 */
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    in.len = UINT64_MAX;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    in.addr = 1;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    /* the last representable byte and an empty range are fine */
    in.addr = UINT64_MAX - 10;
    in.len = 10;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    in.addr = UINT64_MAX;
    in.len = 0;
    uccl_rdesc_encode(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
}

static void test_fuzz(void)
{
    uccl_rdesc_fields_t in = sample_fields(), out;
    uccl_rdesc_t orig, d;
    uint64_t seed = 0x5eed0002;
    unsigned accepted_changed = 0;

    uccl_rdesc_encode(&in, &orig);
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        uccl_status_t st;

        d = orig;
        for (int n = 1 + (int)(unit_rand(&seed) % 4); n > 0; n--)
            d.bytes[unit_rand(&seed) % UCCL_RDESC_SIZE] = (uint8_t)unit_rand(&seed);
        st = uccl_rdesc_decode(&d, &out);
        if (memcmp(&d, &orig, sizeof(d)) == 0) {
            CU_ASSERT_EQUAL(st, UCCL_OK);
            continue;
        }
        if (st == UCCL_OK)
            accepted_changed++;
        else
            CU_ASSERT(st == UCCL_ERR_BAD_DESC || st == UCCL_ERR_VERSION);
    }
    if (accepted_changed != 0)
        fprintf(stderr, "\n  %u changed descriptors accepted\n", accepted_changed);
    CU_ASSERT_EQUAL(accepted_changed, 0);
}

static CU_TestInfo rdesc_tests[] = {
    {"encode/decode round trip and info", test_round_trip},
    {"copied to an unaligned place", test_copy_anywhere},
    {"NULL arguments", test_null_args},
    {"garbage", test_garbage},
    {"every single-bit flip", test_flipped_bits},
    {"wrong version, magic, mem type, flags", test_bad_fields},
    {"addr+len wrapping around", test_wrap_around},
    {"fuzz", test_fuzz},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"rdesc", NULL, NULL, NULL, NULL, rdesc_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

/* Unit tests of 64-byte remote descriptors, version 2 (src/core/rdesc.c):
 * round trip with 0..n key slots, uccl_rdesc_info, a version-1 descriptor,
 * every single-bit flip, every truncation, every malformed key area, and
 * fuzz loops over sealed and unsealed random bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_fuzz.h"

#define FUZZ_ROUNDS 50000
#define KEYS_OFF 40

static uccl_rdesc_fields_t sample_fields(int nkeys)
{
    uccl_rdesc_fields_t f;

    memset(&f, 0, sizeof(f));
    f.engine_id = 0x1122334455667788ull;
    f.region_id = 99;
    f.addr = 0x7f0000001000ull;
    f.len = 1u << 20;
    f.mem_type = UCCL_MEM_HOST;
    f.device = -1;
    f.nkeys = nkeys;
    for (int k = 0; k < nkeys; k++) {
        f.keys[k].owner = (uint8_t)(k + 1);
        f.keys[k].len = (uint8_t)(k == 0 ? 4 : 8); /* verbs-like, then ofi-like */
        for (int i = 0; i < f.keys[k].len; i++)
            f.keys[k].key[i] = (uint8_t)(0xc0 + 16 * k + i);
    }
    return f;
}

static void reseal(uccl_rdesc_t *d)
{
    uccl_put_u32(d->bytes + 60, uccl_fnv1a32(d->bytes, 60));
}

static void encode_ok(const uccl_rdesc_fields_t *f, uccl_rdesc_t *d)
{
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(f, d), UCCL_OK);
}

static void assert_same(const uccl_rdesc_fields_t *a, const uccl_rdesc_fields_t *b)
{
    CU_ASSERT_EQUAL(a->engine_id, b->engine_id);
    CU_ASSERT_EQUAL(a->region_id, b->region_id);
    CU_ASSERT_EQUAL(a->addr, b->addr);
    CU_ASSERT_EQUAL(a->len, b->len);
    CU_ASSERT_EQUAL(a->mem_type, b->mem_type);
    CU_ASSERT_EQUAL(a->device, b->device);
    CU_ASSERT_EQUAL_FATAL(a->nkeys, b->nkeys);
    for (int k = 0; k < a->nkeys; k++) {
        CU_ASSERT_EQUAL(a->keys[k].owner, b->keys[k].owner);
        CU_ASSERT_EQUAL_FATAL(a->keys[k].len, b->keys[k].len);
        CU_ASSERT(memcmp(a->keys[k].key, b->keys[k].key, a->keys[k].len) == 0);
    }
}

static void test_round_trip(void)
{
    uccl_rdesc_fields_t in, out;
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    CU_ASSERT_EQUAL(sizeof(uccl_rdesc_t), UCCL_RDESC_SIZE);
    for (int nkeys = 0; nkeys <= 2; nkeys++) {
        in = sample_fields(nkeys);
        encode_ok(&in, &d);
        CU_ASSERT_EQUAL(d.bytes[4], UCCL_RDESC_VERSION);
        UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
        assert_same(&in, &out);
    }
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    CU_ASSERT_EQUAL(info.engine_id, in.engine_id);
    CU_ASSERT_EQUAL(info.addr, in.addr);
    CU_ASSERT_EQUAL(info.len, in.len);
    CU_ASSERT_EQUAL(info.mem_type, UCCL_MEM_HOST);

    in.mem_type = UCCL_MEM_CUDA;
    in.device = 7;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    assert_same(&in, &out);
    in.mem_type = UCCL_MEM_ROCM;
    in.device = 0xfffe; /* the largest device index */
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    assert_same(&in, &out);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    CU_ASSERT_EQUAL(info.mem_type, UCCL_MEM_ROCM);
}

/* Slots are found by owner, whatever their order; a missing owner is NULL. */
static void test_key_find(void)
{
    uccl_rdesc_fields_t in = sample_fields(2), out;
    const uccl_rdesc_key_t *k;
    uccl_rdesc_t d;

    in.keys[0].owner = UCCL_TP_KEY_OFI;
    in.keys[1].owner = UCCL_TP_KEY_VERBS;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    k = uccl_rdesc_key_find(&out, UCCL_TP_KEY_VERBS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->len, 8);
    CU_ASSERT_EQUAL(k->key[0], 0xd0);
    k = uccl_rdesc_key_find(&out, UCCL_TP_KEY_OFI);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->len, 4);
    CU_ASSERT_EQUAL(k->key[3], 0xc3);
    CU_ASSERT_PTR_NULL(uccl_rdesc_key_find(&out, 77));
    CU_ASSERT_PTR_NULL(uccl_rdesc_key_find(&out, UCCL_TP_KEY_NONE));
}

/* The key area holds 20 bytes: what fits is encoded, the rest refused. */
static void test_encode_limits(void)
{
    uccl_rdesc_fields_t in = sample_fields(2), out;
    uccl_rdesc_t d;

    /* 6 + 14 = 20: exactly full */
    in.keys[1].len = 12;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    assert_same(&in, &out);
    in.keys[1].len = 13;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    /* one 16-byte key, alone: 18 bytes */
    in = sample_fields(1);
    in.keys[0].len = UCCL_TP_RKEY_MAX;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    assert_same(&in, &out);
    in.keys[0].len = UCCL_TP_RKEY_MAX + 1;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    in.keys[0].len = 0;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    in = sample_fields(2);
    in.keys[1].owner = in.keys[0].owner;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    in.keys[1].owner = UCCL_TP_KEY_NONE;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    in = sample_fields(1);
    in.nkeys = UCCL_RDESC_MAX_KEYS + 1;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
    in.nkeys = 1;
    in.device = 0xffff;
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(&in, &d), UCCL_ERR_INVALID_PARAM);
}

/* A version-1 descriptor, byte for byte as version 1 wrote it. */
static void test_version_1(void)
{
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    memset(&d, 0, sizeof(d));
    uccl_put_u32(d.bytes, 0x44524355u);
    d.bytes[4] = 1;
    uccl_put_u64(d.bytes + 8, 0x1122334455667788ull);
    uccl_put_u64(d.bytes + 16, 99);
    uccl_put_u64(d.bytes + 24, 0x7f0000001000ull);
    uccl_put_u64(d.bytes + 32, 4096);
    uccl_put_u32(d.bytes + 40, 0x1234); /* rkey, then its valid byte */
    d.bytes[44] = 1;
    uccl_put_u32(d.bytes + 56, 0xffffffffu);
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_VERSION);
    d.bytes[4] = 3; /* a later one */
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_VERSION);
    d.bytes[4] = 0;
    reseal(&d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_VERSION);
}

static void test_copy_anywhere(void)
{
    uccl_rdesc_fields_t in = sample_fields(2), out;
    uccl_rdesc_t d;
    uint8_t *heap = malloc(UCCL_RDESC_SIZE + 1);

    CU_ASSERT_PTR_NOT_NULL_FATAL(heap);
    encode_ok(&in, &d);
    memcpy(heap + 1, &d, UCCL_RDESC_SIZE); /* unaligned on purpose */
    memcpy(&d, heap + 1, UCCL_RDESC_SIZE);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_OK);
    assert_same(&in, &out);
    free(heap);
}

static void test_null_args(void)
{
    uccl_rdesc_fields_t in = sample_fields(1), out;
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    encode_ok(&in, &d);
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
    uccl_rdesc_fields_t in = sample_fields(2);
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    encode_ok(&in, &d);
    for (int pos = 0; pos < UCCL_RDESC_SIZE; pos++) {
        for (int bit = 0; bit < 8; bit++) {
            d.bytes[pos] ^= (uint8_t)(1u << bit);
            UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
            d.bytes[pos] ^= (uint8_t)(1u << bit);
        }
    }
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
}

/* Only the first n bytes arrived, the rest reads 0 or 0xff: never accepted. */
static void test_truncated(void)
{
    uccl_rdesc_fields_t in = sample_fields(2), out;
    uccl_rdesc_t full, d;

    encode_ok(&in, &full);
    for (int n = 0; n < UCCL_RDESC_SIZE; n++) {
        for (int fill = 0; fill < 2; fill++) {
            memcpy(&d, &full, sizeof(d));
            memset(d.bytes + n, fill ? 0xff : 0, (size_t)(UCCL_RDESC_SIZE - n));
            if (memcmp(&d, &full, sizeof(d)) == 0)
                continue; /* the cut removed nothing (the bytes were already that) */
            UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &out), UCCL_ERR_BAD_DESC);
        }
    }
}

/* Sealed (checksum right) but wrong in content: a buggy or hostile peer. */
static uccl_status_t sealed_with(const uccl_rdesc_t *base, int pos, uint8_t value)
{
    uccl_rdesc_fields_t out;
    uccl_rdesc_t d = *base;

    d.bytes[pos] = value;
    reseal(&d);
    return uccl_rdesc_decode(&d, &out);
}

static void test_bad_fields(void)
{
    uccl_rdesc_fields_t in = sample_fields(2);
    uccl_rdesc_t d;

    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(sealed_with(&d, 0, d.bytes[0] ^ 1), UCCL_ERR_BAD_DESC);   /* magic */
    UNIT_ASSERT_STATUS(sealed_with(&d, 5, UCCL_MEM_ROCM + 1), UCCL_ERR_BAD_DESC); /* mem type */
    /* key slots: verbs-like at 40 (owner 1, len 4), ofi-like at 46 (owner 2, len 8), end at 56 */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 1, 0), UCCL_ERR_BAD_DESC);  /* empty key */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 1, 17), UCCL_ERR_BAD_DESC); /* key too long */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 7, 15), UCCL_ERR_BAD_DESC); /* past the area */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 6, 1), UCCL_ERR_BAD_DESC);  /* owner twice */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 16, 3), UCCL_ERR_BAD_DESC); /* slot of 2 bytes */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 19, 1), UCCL_ERR_BAD_DESC); /* byte after end */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 6, 0), UCCL_ERR_BAD_DESC);  /* end, then bytes */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 7, 7), UCCL_ERR_BAD_DESC);  /* shorter: bytes after */
    /* the same edits that keep the encoding canonical decode */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 2, 0), UCCL_OK);          /* key bytes are any */
    UNIT_ASSERT_STATUS(sealed_with(&d, KEYS_OFF + 6, 9), UCCL_OK);          /* another owner */
}

static void test_wrap_around(void)
{
    uccl_rdesc_fields_t in = sample_fields(1);
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;

    in.addr = UINT64_MAX - 9;
    in.len = 10; /* ends at 2^64: wraps to 0 */
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    in.len = UINT64_MAX;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    in.addr = 1;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_ERR_BAD_DESC);
    /* the last representable byte and an empty range are fine */
    in.addr = UINT64_MAX - 10;
    in.len = 10;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    in.addr = UINT64_MAX;
    in.len = 0;
    encode_ok(&in, &d);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
}

/* A few random bytes changed, checksum left alone: never accepted. */
static void test_fuzz(void)
{
    uccl_rdesc_fields_t in = sample_fields(2), out;
    uccl_rdesc_t orig, d;
    uint64_t seed = 0x5eed0002;
    unsigned accepted_changed = 0;

    encode_ok(&in, &orig);
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

/* What the key parser accepts is what the encoder writes back, byte for byte. */
static void check_canonical(const uccl_rdesc_t *d, const uccl_rdesc_fields_t *out)
{
    uccl_rdesc_t again;
    int used = 0;

    for (int k = 0; k < out->nkeys; k++) {
        CU_ASSERT(out->keys[k].owner != 0);
        CU_ASSERT(out->keys[k].len >= 1 && out->keys[k].len <= UCCL_TP_RKEY_MAX);
        used += 2 + out->keys[k].len;
    }
    CU_ASSERT(used <= UCCL_RDESC_KEY_AREA);
    UNIT_ASSERT_STATUS(uccl_rdesc_encode(out, &again), UCCL_OK);
    CU_ASSERT(memcmp(&again, d, sizeof(again)) == 0);
}

/* Random key areas, sealed, so that the slot parser itself is exercised
 * (short keys are made likely, so that many areas hold several slots). */
static void test_fuzz_sealed_keys(void)
{
    uccl_rdesc_fields_t in = sample_fields(0), out;
    uccl_rdesc_t d;
    uint64_t seed = 0x5eed0003;
    unsigned accepted = 0;

    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        uccl_status_t st;

        in.mem_type = (uccl_mem_type_t)(unit_rand(&seed) % 3);
        encode_ok(&in, &d);
        for (int i = 0; i < UCCL_RDESC_KEY_AREA; i++) {
            uint64_t r = unit_rand(&seed);
            d.bytes[KEYS_OFF + i] = (uint8_t)(r % 4 == 0 ? 0 : r % 4 == 1 ? (r >> 8) % 6 : r >> 16);
        }
        reseal(&d);
        st = uccl_rdesc_decode(&d, &out);
        if (st == UCCL_OK) {
            accepted++;
            check_canonical(&d, &out);
        } else {
            UNIT_ASSERT_STATUS(st, UCCL_ERR_BAD_DESC);
        }
    }
    CU_ASSERT(accepted > 0); /* the loop did reach valid multi-slot areas */
}

/* Whole random descriptors with the right frame and version, sealed. */
static void test_fuzz_sealed_all(void)
{
    uccl_rdesc_fields_t out;
    uccl_rdesc_t d;
    uint64_t seed = 0x5eed0004;

    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        uccl_status_t st;

        for (int i = 0; i < UCCL_RDESC_SIZE; i++)
            d.bytes[i] = (uint8_t)unit_rand(&seed);
        uccl_put_u32(d.bytes, 0x44524355u);
        d.bytes[4] = UCCL_RDESC_VERSION;
        reseal(&d);
        st = uccl_rdesc_decode(&d, &out);
        if (st == UCCL_OK)
            check_canonical(&d, &out);
        else
            UNIT_ASSERT_STATUS(st, UCCL_ERR_BAD_DESC);
    }
}

static CU_TestInfo rdesc_tests[] = {
    {"encode/decode round trip (0..2 key slots) and info", test_round_trip},
    {"key slots found by owner", test_key_find},
    {"encode refuses what does not fit", test_encode_limits},
    {"version 1 and other versions", test_version_1},
    {"copied to an unaligned place", test_copy_anywhere},
    {"NULL arguments", test_null_args},
    {"garbage", test_garbage},
    {"every single-bit flip", test_flipped_bits},
    {"every truncation", test_truncated},
    {"malformed fields and key slots", test_bad_fields},
    {"addr+len wrapping around", test_wrap_around},
    {"fuzz: changed bytes", test_fuzz},
    {"fuzz: sealed random key areas", test_fuzz_sealed_keys},
    {"fuzz: sealed random descriptors", test_fuzz_sealed_all},
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

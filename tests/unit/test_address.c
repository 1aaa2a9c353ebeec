/* Unit tests of engine address blobs (src/core/address.c): round trip,
 * then every way a blob from elsewhere can be wrong, and a fuzz loop. The
 * blob is built from a hand-filled engine with fake transports so that the
 * test needs no live transport. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_fuzz.h"

#define FUZZ_ROUNDS 20000

/* Fake transports: their address entry is a recognizable byte pattern. */
static uccl_status_t fake_address_a(uccl_tp_t *tp, void *buf, size_t *len)
{
    (void)tp;
    memset(buf, 0xaa, 12);
    *len = 12;
    return UCCL_OK;
}

static uccl_status_t fake_address_b(uccl_tp_t *tp, void *buf, size_t *len)
{
    (void)tp;
    for (size_t i = 0; i < 200; i++)
        ((uint8_t *)buf)[i] = (uint8_t)i;
    *len = 200;
    return UCCL_OK;
}

static uccl_status_t fake_address_empty(uccl_tp_t *tp, void *buf, size_t *len)
{
    (void)tp;
    (void)buf;
    *len = 0;
    return UCCL_OK;
}

static uccl_status_t fake_address_max(uccl_tp_t *tp, void *buf, size_t *len)
{
    (void)tp;
    memset(buf, 0x5c, 256);
    *len = 256;
    return UCCL_OK;
}

static const struct uccl_tp_ops ops_a = {.size = sizeof(struct uccl_tp_ops), .name = "shm",
                                         .address = fake_address_a};
static const struct uccl_tp_ops ops_b = {.size = sizeof(struct uccl_tp_ops), .name = "tcp",
                                         .address = fake_address_b};
static const struct uccl_tp_ops ops_empty = {.size = sizeof(struct uccl_tp_ops), .name = "e",
                                             .address = fake_address_empty};
static const struct uccl_tp_ops ops_max = {.size = sizeof(struct uccl_tp_ops),
                                           .name = "fifteen_chars__", .address = fake_address_max};

static uccl_tp_t tp_a = {.ops = &ops_a}, tp_b = {.ops = &ops_b}, tp_empty = {.ops = &ops_empty},
                 tp_max = {.ops = &ops_max};

static uccl_engine_t *fake_engine(void)
{
    static uccl_engine_t engine;

    memset(&engine, 0, sizeof(engine));
    engine.id = 0x0123456789abcdefull;
    engine.host_id = 0xfedcba9876543210ull;
    engine.pid = 4242;
    snprintf(engine.hostname, sizeof(engine.hostname), "node-17.example");
    engine.oob_addr.sin_family = AF_INET;
    engine.oob_addr.sin_addr.s_addr = htonl(0x0a000105);
    engine.oob_addr.sin_port = htons(40123);
    engine.tp[0] = &tp_a;
    engine.tp[1] = &tp_b;
    engine.ntp = 2;
    for (int i = 0; i < UCCL_SECRET_SIZE; i++)
        engine.secret[i] = (uint8_t)(0xa5 + i);
    return &engine;
}

static size_t valid_blob(uint8_t *buf)
{
    size_t len = UCCL_ADDRESS_MAX;

    CU_ASSERT_EQUAL_FATAL(uccl_address_pack(fake_engine(), buf, &len), UCCL_OK);
    return len;
}

/* Recompute the trailing checksum after a deliberate edit, so that the
 * parser's structural checks (not the checksum) have to catch it. */
static void reseal(uint8_t *buf, size_t len)
{
    uccl_put_u32(buf + len - 4, uccl_fnv1a32(buf, len - 4));
}

static void test_round_trip(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_OK);
    CU_ASSERT_EQUAL(a.version, 2);
    CU_ASSERT(memcmp(a.secret, fake_engine()->secret, UCCL_SECRET_SIZE) == 0);
    CU_ASSERT_EQUAL(a.engine_id, 0x0123456789abcdefull);
    CU_ASSERT_EQUAL(a.host_id, 0xfedcba9876543210ull);
    CU_ASSERT_EQUAL(a.pid, 4242);
    CU_ASSERT_STRING_EQUAL(a.hostname, "node-17.example");
    CU_ASSERT_EQUAL(a.oob.sin_family, AF_INET);
    CU_ASSERT_EQUAL(ntohl(a.oob.sin_addr.s_addr), 0x0a000105u);
    CU_ASSERT_EQUAL(ntohs(a.oob.sin_port), 40123);
    CU_ASSERT_EQUAL_FATAL(a.ntp, 2);
    CU_ASSERT_STRING_EQUAL(a.tp[0].name, "shm");
    CU_ASSERT_EQUAL(a.tp[0].len, 12);
    CU_ASSERT_STRING_EQUAL(a.tp[1].name, "tcp");
    CU_ASSERT_EQUAL_FATAL(a.tp[1].len, 200);
    for (size_t i = 0; i < 200; i++)
        CU_ASSERT_EQUAL(((const uint8_t *)a.tp[1].addr)[i], (uint8_t)i);
    /* the entries point into the caller's buffer */
    CU_ASSERT((const uint8_t *)a.tp[0].addr > buf && (const uint8_t *)a.tp[0].addr < buf + len);
}

static void test_round_trip_edges(void)
{
    uccl_engine_t *engine = fake_engine();
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = sizeof(buf);
    uccl_address_t a;

    /* no transport, longest hostname, an empty entry */
    engine->ntp = 0;
    memset(engine->hostname, 'h', UCCL_HOSTNAME_MAX - 1);
    engine->hostname[UCCL_HOSTNAME_MAX - 1] = '\0';
    UNIT_ASSERT_STATUS(uccl_address_pack(engine, buf, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_OK);
    CU_ASSERT_EQUAL(a.ntp, 0);
    CU_ASSERT_EQUAL(strlen(a.hostname), UCCL_HOSTNAME_MAX - 1);
    engine->tp[0] = &tp_empty;
    engine->tp[1] = &tp_max;
    engine->ntp = 2;
    len = sizeof(buf);
    UNIT_ASSERT_STATUS(uccl_address_pack(engine, buf, &len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_OK);
    CU_ASSERT_EQUAL(a.tp[0].len, 0);
    CU_ASSERT_EQUAL(a.tp[1].len, 256);
    CU_ASSERT_STRING_EQUAL(a.tp[1].name, "fifteen_chars__");
}

/* Entries that do not fit UCCL_ADDRESS_MAX are refused, not overflowed. */
static void test_pack_overflow(void)
{
    uccl_engine_t *engine = fake_engine();
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = sizeof(buf);

    for (int i = 0; i < UCCL_TP_MAX; i++)
        engine->tp[i] = &tp_max;
    engine->ntp = UCCL_TP_MAX;
    CU_ASSERT_NOT_EQUAL(uccl_address_pack(engine, buf, &len), UCCL_OK);
}

static void test_buffer_too_small(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t need = valid_blob(buf), len;

    len = 0;
    UNIT_ASSERT_STATUS(uccl_address_pack(fake_engine(), NULL, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    CU_ASSERT_EQUAL(len, need);
    len = need - 1;
    memset(buf, 0x77, sizeof(buf));
    UNIT_ASSERT_STATUS(uccl_address_pack(fake_engine(), buf, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    CU_ASSERT_EQUAL(len, need);
    CU_ASSERT_EQUAL(buf[0], 0x77); /* nothing written */
    len = need;
    UNIT_ASSERT_STATUS(uccl_address_pack(fake_engine(), buf, &len), UCCL_OK);
    CU_ASSERT_EQUAL(len, need);
    UNIT_ASSERT_STATUS(uccl_address_pack(fake_engine(), buf, NULL), UCCL_ERR_INVALID_PARAM);
}

static void test_null_args(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    UNIT_ASSERT_STATUS(uccl_address_parse(NULL, len, &a), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, NULL), UCCL_ERR_INVALID_PARAM);
}

static void test_garbage(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    uint64_t seed = 0x1234;
    uccl_address_t a;

    memset(buf, 0, sizeof(buf));
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, sizeof(buf), &a), UCCL_ERR_BAD_ADDRESS);
    memset(buf, 0xff, sizeof(buf));
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, sizeof(buf), &a), UCCL_ERR_BAD_ADDRESS);
    for (int round = 0; round < 200; round++) {
        size_t len = unit_rand(&seed) % sizeof(buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)unit_rand(&seed);
        UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_BAD_ADDRESS);
    }
    UNIT_ASSERT_STATUS(uccl_address_parse("hello", 5, &a), UCCL_ERR_BAD_ADDRESS);
}

/* Every strict prefix of a valid blob is rejected; each is copied to a heap
 * buffer of exactly that size so that a read past it is caught by ASan. */
static void test_truncated(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
        memcpy(copy, buf, cut);
        UNIT_ASSERT_STATUS(uccl_address_parse(copy, cut, &a), UCCL_ERR_BAD_ADDRESS);
        free(copy);
    }
}

static void test_wrong_magic(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    buf[0] ^= 0x20;
    reseal(buf, len);
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_BAD_ADDRESS);
}

/* The copy a connecting engine sends of its own blob has no secret. */
static void test_public_blob(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX], pub[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf), plen = sizeof(pub);
    static const uint8_t zero[UCCL_SECRET_SIZE];
    uccl_address_t a;

    UNIT_ASSERT_STATUS(uccl_address_pack_public(fake_engine(), pub, &plen), UCCL_OK);
    CU_ASSERT_EQUAL(plen, len);
    UNIT_ASSERT_STATUS(uccl_address_parse(pub, plen, &a), UCCL_OK);
    CU_ASSERT(memcmp(a.secret, zero, sizeof(zero)) == 0);
    CU_ASSERT(memcmp(buf, pub, len - 4 - UCCL_SECRET_SIZE) == 0); /* the rest is the same */
}

static void test_wrong_version(void)
{
    const uint16_t versions[] = {0, 1, 3, 0x100, 0xffff};
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        len = valid_blob(buf);
        uccl_put_u16(buf + 4, versions[i]);
        reseal(buf, len);
        UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_VERSION);
        /* a future version may change the layout: rejected even when unsealed */
        len = valid_blob(buf);
        uccl_put_u16(buf + 4, versions[i]);
        UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_VERSION);
    }
}

/* Every single-bit flip anywhere is caught: in the version field as a version
 * mismatch, everywhere else as a bad address. */
static void test_flipped_bits(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(buf);
    uccl_address_t a;

    for (size_t pos = 0; pos < len; pos++) {
        for (int bit = 0; bit < 8; bit++) {
            uccl_status_t expect = (pos == 4 || pos == 5) ? UCCL_ERR_VERSION : UCCL_ERR_BAD_ADDRESS;
            buf[pos] ^= (uint8_t)(1u << bit);
            UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), expect);
            buf[pos] ^= (uint8_t)(1u << bit);
        }
    }
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_OK);
}

/* Structurally wrong blobs with a correct checksum (a buggy or hostile peer). */
static void test_bad_structure(void)
{
    uint8_t buf[UCCL_ADDRESS_MAX];
    size_t len, host_len = strlen("node-17.example");
    size_t entry0 = 36 + host_len; /* name_len of the first transport entry */
    uccl_address_t a;

#define EXPECT_BAD_AFTER(edit)                                                        \
    do {                                                                              \
        len = valid_blob(buf);                                                        \
        edit;                                                                         \
        reseal(buf, len);                                                             \
        UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_BAD_ADDRESS);   \
    } while (0)

    EXPECT_BAD_AFTER(buf[34] = UCCL_HOSTNAME_MAX);             /* hostname too long */
    EXPECT_BAD_AFTER(buf[34] = 0xff);                          /* hostname past the end */
    EXPECT_BAD_AFTER(buf[35] = UCCL_TP_MAX + 1);               /* too many transports */
    EXPECT_BAD_AFTER(buf[35] = 3);                             /* more entries than present */
    EXPECT_BAD_AFTER(buf[35] = 1);                             /* fewer: trailing bytes */
    EXPECT_BAD_AFTER(uccl_put_u16(buf + 32, 0));               /* no setup port */
    EXPECT_BAD_AFTER(buf[entry0] = 0);                         /* empty transport name */
    EXPECT_BAD_AFTER(buf[entry0] = 16);                        /* name too long */
    EXPECT_BAD_AFTER(uccl_put_u16(buf + entry0 + 4, 257));     /* entry over 256 bytes */
    EXPECT_BAD_AFTER(uccl_put_u16(buf + entry0 + 4, 0xffff));  /* entry past the end */
    EXPECT_BAD_AFTER(uccl_put_u16(buf + entry0 + 4, 13));      /* entries misaligned */
#undef EXPECT_BAD_AFTER

    /* total_len larger than what the caller passed */
    len = valid_blob(buf);
    uccl_put_u16(buf + 6, (uint16_t)(len + 4));
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_BAD_ADDRESS);
    /* total_len smaller than a header */
    len = valid_blob(buf);
    uccl_put_u16(buf + 6, 8);
    UNIT_ASSERT_STATUS(uccl_address_parse(buf, len, &a), UCCL_ERR_BAD_ADDRESS);
}

/* Random mutations (1-4 bytes replaced, or the length cut) of a valid blob,
 * parsed from an exactly sized heap copy: never a crash or an out-of-bounds
 * read, and an error whenever the blob differs from the original. */
static void test_fuzz(void)
{
    uint8_t orig[UCCL_ADDRESS_MAX];
    size_t len = valid_blob(orig);
    uint64_t seed = 0x5eed0001;
    unsigned accepted_changed = 0, rejected = 0;
    uccl_address_t a;

    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        size_t cut = len;
        uint8_t *copy;
        uccl_status_t st;
        bool changed;

        if (unit_rand(&seed) % 8 == 0)
            cut = unit_rand(&seed) % len;
        copy = malloc(cut ? cut : 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
        memcpy(copy, orig, cut);
        for (int n = 1 + (int)(unit_rand(&seed) % 4); n > 0 && cut > 0; n--)
            copy[unit_rand(&seed) % cut] = (uint8_t)unit_rand(&seed);
        changed = cut != len || memcmp(copy, orig, len) != 0;
        st = uccl_address_parse(copy, cut, &a);
        if (changed && st == UCCL_OK)
            accepted_changed++;
        if (!changed)
            CU_ASSERT_EQUAL(st, UCCL_OK);
        if (st != UCCL_OK) {
            rejected++;
            CU_ASSERT(st == UCCL_ERR_BAD_ADDRESS || st == UCCL_ERR_VERSION);
        }
        free(copy);
    }
    if (accepted_changed != 0)
        fprintf(stderr, "\n  %u changed blobs accepted\n", accepted_changed);
    CU_ASSERT_EQUAL(accepted_changed, 0);
    CU_ASSERT(rejected > FUZZ_ROUNDS / 2);
}

static CU_TestInfo address_tests[] = {
    {"pack/parse round trip", test_round_trip},
    {"round trip: no transport, empty and largest entries", test_round_trip_edges},
    {"pack refuses entries past UCCL_ADDRESS_MAX", test_pack_overflow},
    {"pack into a buffer too small", test_buffer_too_small},
    {"NULL arguments", test_null_args},
    {"garbage", test_garbage},
    {"truncated at every length", test_truncated},
    {"wrong magic", test_wrong_magic},
    {"wrong version", test_wrong_version},
    {"public blob without the secret", test_public_blob},
    {"every single-bit flip", test_flipped_bits},
    {"bad structure with a valid checksum", test_bad_structure},
    {"fuzz", test_fuzz},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"address", NULL, NULL, NULL, NULL, address_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

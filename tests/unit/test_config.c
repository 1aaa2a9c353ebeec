/* Unit tests of the configuration tables (src/util/config.c, src/core/core_config.c): every value
 * type, malformed values rejected with nothing written, environment
 * overrides, printing, and the tables compiled in. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"

/* A value that no successful parse in these tests produces. */
#define SENTINEL_BYTE 0xa5

static void fill(void *p, size_t n) { memset(p, SENTINEL_BYTE, n); }

static int untouched(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != SENTINEL_BYTE)
            return 0;
    return 1;
}

static void expect_int(const char *text, int expect)
{
    int v;
    fill(&v, sizeof(v));
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_INT, text, &v), UCCL_OK);
    CU_ASSERT_EQUAL(v, expect);
}

static void expect_bad(uccl_cfg_type_t type, const char *text)
{
    char dst[UCCL_CFG_STRING_MAX + 16];

    fill(dst, sizeof(dst));
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(type, text, dst), UCCL_ERR_INVALID_PARAM);
    if (!untouched(dst, sizeof(dst)))
        fprintf(stderr, "\n  type %d, '%s': destination written on error\n", (int)type, text);
    CU_ASSERT(untouched(dst, sizeof(dst)));
}

static void test_int(void)
{
    expect_int("0", 0);
    expect_int("42", 42);
    expect_int("-7", -7);
    expect_int("2147483647", INT_MAX);
    expect_int("-2147483648", INT_MIN);
    expect_bad(UCCL_CFG_INT, "2147483648");
    expect_bad(UCCL_CFG_INT, "-2147483649");
    expect_bad(UCCL_CFG_INT, "99999999999999999999");
    expect_bad(UCCL_CFG_INT, "");
    expect_bad(UCCL_CFG_INT, "abc");
    expect_bad(UCCL_CFG_INT, "12x");
    expect_bad(UCCL_CFG_INT, "1.5");
    expect_bad(UCCL_CFG_INT, "4K");
}

static void test_bool(void)
{
    const char *yes[] = {"1", "y", "yes", "on", "true", "YES", "True", "ON"};
    const char *no[] = {"0", "n", "no", "off", "false", "NO", "False", "OFF"};
    int v;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        fill(&v, sizeof(v));
        UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_BOOL, yes[i], &v), UCCL_OK);
        CU_ASSERT_EQUAL(v, 1);
        fill(&v, sizeof(v));
        UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_BOOL, no[i], &v), UCCL_OK);
        CU_ASSERT_EQUAL(v, 0);
    }
    expect_bad(UCCL_CFG_BOOL, "");
    expect_bad(UCCL_CFG_BOOL, "2");
    expect_bad(UCCL_CFG_BOOL, "yess");
    expect_bad(UCCL_CFG_BOOL, "-1");
    expect_bad(UCCL_CFG_BOOL, "t");
}

static void expect_size(const char *text, size_t expect)
{
    size_t v;
    fill(&v, sizeof(v));
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_SIZE, text, &v), UCCL_OK);
    CU_ASSERT_EQUAL(v, expect);
}

static void test_size(void)
{
    expect_size("0", 0);
    expect_size("4096", 4096);
    expect_size("4K", 4096);
    expect_size("4k", 4096);
    expect_size("8KB", 8192);
    expect_size("2M", 2u << 20);
    expect_size("2mb", 2u << 20);
    expect_size("1G", (size_t)1 << 30);
    expect_size("3G", (size_t)3 << 30);
    expect_size("18446744073709551615", SIZE_MAX);
    expect_bad(UCCL_CFG_SIZE, "");
    expect_bad(UCCL_CFG_SIZE, "K");
    expect_bad(UCCL_CFG_SIZE, "-1");
    expect_bad(UCCL_CFG_SIZE, " -1");
    expect_bad(UCCL_CFG_SIZE, "-4K");
    expect_bad(UCCL_CFG_SIZE, "1T");
    expect_bad(UCCL_CFG_SIZE, "1.5K");
    expect_bad(UCCL_CFG_SIZE, "4KK");
    expect_bad(UCCL_CFG_SIZE, "4Kx");
    expect_bad(UCCL_CFG_SIZE, "18446744073709551616");
    expect_bad(UCCL_CFG_SIZE, "17179869184G"); /* 2^34 G overflows 64 bits */
    expect_bad(UCCL_CFG_SIZE, "abc");
}

static void test_string(void)
{
    char longest[UCCL_CFG_STRING_MAX], too_long[UCCL_CFG_STRING_MAX + 1];
    char dst[UCCL_CFG_STRING_MAX];

    memset(longest, 'x', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    memset(too_long, 'y', sizeof(too_long) - 1);
    too_long[sizeof(too_long) - 1] = '\0';
    fill(dst, sizeof(dst));
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_STRING, longest, dst), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, longest);
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_STRING, "", dst), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, "");
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_STRING, "shm,tcp", dst), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, "shm,tcp");
    expect_bad(UCCL_CFG_STRING, too_long);
}

static void test_loglevel(void)
{
    const char *names[] = {"error", "warn", "info", "debug", "trace"};
    char digit[2] = "0";
    int v;

    for (int i = 0; i < 5; i++) {
        fill(&v, sizeof(v));
        UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_LOGLEVEL, names[i], &v), UCCL_OK);
        CU_ASSERT_EQUAL(v, i);
        digit[0] = (char)('0' + i);
        UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_LOGLEVEL, digit, &v), UCCL_OK);
        CU_ASSERT_EQUAL(v, i);
    }
    expect_bad(UCCL_CFG_LOGLEVEL, "");
    expect_bad(UCCL_CFG_LOGLEVEL, "5");
    expect_bad(UCCL_CFG_LOGLEVEL, "verbose");
    expect_bad(UCCL_CFG_LOGLEVEL, "00");
}

static void test_null_and_bad_type(void)
{
    int v;

    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_INT, NULL, &v), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_cfg_parse_value(UCCL_CFG_INT, "1", NULL), UCCL_ERR_INVALID_PARAM);
    expect_bad((uccl_cfg_type_t)99, "1");
    UNIT_ASSERT_STATUS(uccl_cfg_parse(NULL, &v), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_cfg_parse(&uccl_core_config_table, NULL), UCCL_ERR_INVALID_PARAM);
}

/* ---- a table of our own, under a prefix no real table uses */

typedef struct test_cfg {
    int count;
    int flag;
    size_t size;
    char name[UCCL_CFG_STRING_MAX];
    int level;
} test_cfg_t;

static const uccl_cfg_field_t test_fields[] = {
    {"COUNT", "3", "a count", offsetof(test_cfg_t, count), UCCL_CFG_INT},
    {"FLAG", "yes", "a flag", offsetof(test_cfg_t, flag), UCCL_CFG_BOOL},
    {"SIZE", "64K", "a size", offsetof(test_cfg_t, size), UCCL_CFG_SIZE},
    {"NAME", "dflt", "a name", offsetof(test_cfg_t, name), UCCL_CFG_STRING},
    {"LEVEL", "info", "a level", offsetof(test_cfg_t, level), UCCL_CFG_LOGLEVEL},
    {NULL, NULL, NULL, 0, 0},
};

static const uccl_cfg_table_t test_table = {
    .prefix = "UTEST_", .fields = test_fields, .struct_size = sizeof(test_cfg_t)};

static const char *const test_env[] = {"UCCL_UTEST_COUNT", "UCCL_UTEST_FLAG", "UCCL_UTEST_SIZE",
                                       "UCCL_UTEST_NAME", "UCCL_UTEST_LEVEL"};

static void clear_test_env(void)
{
    for (size_t i = 0; i < sizeof(test_env) / sizeof(test_env[0]); i++)
        unsetenv(test_env[i]);
}

static void test_table_defaults(void)
{
    test_cfg_t cfg;

    clear_test_env();
    fill(&cfg, sizeof(cfg));
    UNIT_ASSERT_STATUS(uccl_cfg_parse(&test_table, &cfg), UCCL_OK);
    CU_ASSERT_EQUAL(cfg.count, 3);
    CU_ASSERT_EQUAL(cfg.flag, 1);
    CU_ASSERT_EQUAL(cfg.size, 65536);
    CU_ASSERT_STRING_EQUAL(cfg.name, "dflt");
    CU_ASSERT_EQUAL(cfg.level, UCCL_LOG_INFO);
}

static void test_table_env_override(void)
{
    test_cfg_t cfg;

    clear_test_env();
    setenv("UCCL_UTEST_COUNT", "-12", 1);
    setenv("UCCL_UTEST_FLAG", "off", 1);
    setenv("UCCL_UTEST_SIZE", "2M", 1);
    setenv("UCCL_UTEST_NAME", "", 1);
    setenv("UCCL_UTEST_LEVEL", "trace", 1);
    UNIT_ASSERT_STATUS(uccl_cfg_parse(&test_table, &cfg), UCCL_OK);
    CU_ASSERT_EQUAL(cfg.count, -12);
    CU_ASSERT_EQUAL(cfg.flag, 0);
    CU_ASSERT_EQUAL(cfg.size, 2u << 20);
    CU_ASSERT_STRING_EQUAL(cfg.name, "");
    CU_ASSERT_EQUAL(cfg.level, UCCL_LOG_TRACE);
    clear_test_env();
}

/* A malformed variable fails the whole parse and leaves cfg as it was, for
 * every field position (first, middle, last). */
static void test_table_malformed_env(void)
{
    const char *bad[] = {"3x", "maybe", "1Q", NULL, "loud"};
    char too_long[UCCL_CFG_STRING_MAX + 8];
    test_cfg_t cfg;

    memset(too_long, 'z', sizeof(too_long) - 1);
    too_long[sizeof(too_long) - 1] = '\0';
    bad[3] = too_long;
    for (size_t i = 0; i < sizeof(test_env) / sizeof(test_env[0]); i++) {
        clear_test_env();
        setenv(test_env[i], bad[i], 1);
        fill(&cfg, sizeof(cfg));
        UNIT_ASSERT_STATUS(uccl_cfg_parse(&test_table, &cfg), UCCL_ERR_INVALID_PARAM);
        if (!untouched(&cfg, sizeof(cfg)))
            fprintf(stderr, "\n  %s malformed: cfg half-written\n", test_env[i]);
        CU_ASSERT(untouched(&cfg, sizeof(cfg)));
    }
    clear_test_env();
}

static char *print_table(const void *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return NULL;
    uccl_cfg_print(&test_table, cfg, out);
    fclose(out);
    return text;
}

static void test_table_print(void)
{
    test_cfg_t cfg;
    char *text;

    text = print_table(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_COUNT=3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_SIZE=64K\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_LEVEL=info\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# a flag"));
    free(text);

    clear_test_env();
    setenv("UCCL_UTEST_COUNT", "17", 1);
    setenv("UCCL_UTEST_NAME", "hello", 1);
    setenv("UCCL_UTEST_LEVEL", "debug", 1);
    UNIT_ASSERT_STATUS(uccl_cfg_parse(&test_table, &cfg), UCCL_OK);
    clear_test_env();
    text = print_table(&cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_COUNT=17\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_FLAG=1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_SIZE=65536\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_NAME=hello\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_UTEST_LEVEL=debug\n"));
    free(text);
}

/* Every compiled-in table: core first, defaults parse, names unique. */
static void test_compiled_tables(void)
{
    const uccl_cfg_table_t *const *tables = uccl_config_tables();
    char buf[UCCL_CFG_STRING_MAX + 16];
    size_t n = 0;

    CU_ASSERT_PTR_EQUAL_FATAL(tables[0], &uccl_core_config_table);
    for (; tables[n] != NULL; n++) {
        for (const uccl_cfg_field_t *f = tables[n]->fields; f->name != NULL; f++) {
            CU_ASSERT(f->doc != NULL && f->doc[0] != '\0');
            CU_ASSERT(f->offset < tables[n]->struct_size);
            UNIT_ASSERT_STATUS(uccl_cfg_parse_value(f->type, f->dflt, buf), UCCL_OK);
            for (const uccl_cfg_field_t *g = tables[n]->fields; g != f; g++)
                CU_ASSERT_STRING_NOT_EQUAL(f->name, g->name);
        }
    }
    CU_ASSERT(n >= 1 && n <= UCCL_TP_MAX + 2); /* core, GPU layer, transports */
    CU_ASSERT_PTR_EQUAL(uccl_config_tables(), uccl_cfg_tables()); /* registered once */
}

static void test_core_config(void)
{
    uccl_config_t cfg;

    unsetenv("UCCL_TIMEOUT_MS");
    unsetenv("UCCL_RCACHE");
    UNIT_ASSERT_STATUS(uccl_config_get(&cfg), UCCL_OK);
    CU_ASSERT_EQUAL(cfg.timeout_ms, 60000);
    CU_ASSERT_EQUAL(cfg.rcache, 1);
    setenv("UCCL_TIMEOUT_MS", "250", 1);
    setenv("UCCL_RCACHE", "0", 1);
    UNIT_ASSERT_STATUS(uccl_config_get(&cfg), UCCL_OK);
    CU_ASSERT_EQUAL(cfg.timeout_ms, 250);
    CU_ASSERT_EQUAL(cfg.rcache, 0);
    setenv("UCCL_TIMEOUT_MS", "0", 1);
    UNIT_ASSERT_STATUS(uccl_config_get(&cfg), UCCL_ERR_INVALID_PARAM);
    setenv("UCCL_TIMEOUT_MS", "-5", 1);
    UNIT_ASSERT_STATUS(uccl_config_get(&cfg), UCCL_ERR_INVALID_PARAM);
    setenv("UCCL_TIMEOUT_MS", "soon", 1);
    UNIT_ASSERT_STATUS(uccl_config_get(&cfg), UCCL_ERR_INVALID_PARAM);
    unsetenv("UCCL_TIMEOUT_MS");
    unsetenv("UCCL_RCACHE");
}

static CU_TestInfo config_tests[] = {
    {"int values", test_int},
    {"bool values", test_bool},
    {"size values with K/M/G", test_size},
    {"string values and length limit", test_string},
    {"log level values", test_loglevel},
    {"NULL arguments and unknown type", test_null_and_bad_type},
    {"table defaults", test_table_defaults},
    {"table environment override", test_table_env_override},
    {"malformed variable leaves cfg untouched", test_table_malformed_env},
    {"printing defaults and values", test_table_print},
    {"compiled-in tables", test_compiled_tables},
    {"core table and timeout check", test_core_config},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"config", NULL, NULL, NULL, NULL, config_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

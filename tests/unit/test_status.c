/* Unit tests of the status list: names, texts, the peer-error range. */
#include <string.h>

#include "unit.h"

static const struct {
    uccl_status_t value;
    const char *name;
} all_statuses[] = {
#define STATUS_ENTRY_(name, value, text) {UCCL_##name, "UCCL_" #name},
    UCCL_STATUS_MAP(STATUS_ENTRY_)
#undef STATUS_ENTRY_
};

#define NSTATUS (sizeof(all_statuses) / sizeof(all_statuses[0]))

static void test_names_distinct_and_texts_present(void)
{
    for (size_t i = 0; i < NSTATUS; i++) {
        const char *name = uccl_status_name(all_statuses[i].value);
        const char *text = uccl_strerror(all_statuses[i].value);

        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        CU_ASSERT_STRING_EQUAL(name, all_statuses[i].name);
        CU_ASSERT(strlen(text) > 0);
        CU_ASSERT_STRING_NOT_EQUAL(text, "unknown status");
        for (size_t j = 0; j < i; j++) {
            CU_ASSERT_NOT_EQUAL(all_statuses[i].value, all_statuses[j].value);
            CU_ASSERT_STRING_NOT_EQUAL(name, uccl_status_name(all_statuses[j].value));
            CU_ASSERT_STRING_NOT_EQUAL(text, uccl_strerror(all_statuses[j].value));
        }
    }
}

static void test_unknown_values(void)
{
    const int unknown[] = {2, 42, -21, -99, -105, -200, -1000, 1 << 30};

    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        CU_ASSERT_STRING_EQUAL(uccl_strerror((uccl_status_t)unknown[i]), "unknown status");
        CU_ASSERT_PTR_NOT_NULL(uccl_status_name((uccl_status_t)unknown[i]));
    }
}

static void test_ranges(void)
{
    CU_ASSERT_EQUAL(UCCL_OK, 0);
    CU_ASSERT_EQUAL(UCCL_INPROGRESS, 1);
    CU_ASSERT_FALSE(UCCL_STATUS_IS_ERR(UCCL_OK));
    CU_ASSERT_FALSE(UCCL_STATUS_IS_ERR(UCCL_INPROGRESS));
    for (size_t i = 0; i < NSTATUS; i++) {
        uccl_status_t s = all_statuses[i].value;
        int peer = s <= -100 && s > -200;

        if (s == UCCL_OK || s == UCCL_INPROGRESS)
            continue;
        CU_ASSERT(UCCL_STATUS_IS_ERR(s));
        CU_ASSERT_EQUAL(UCCL_STATUS_IS_PEER_ERROR(s) != 0, peer);
    }
    CU_ASSERT(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_PEER_FAILED));
    CU_ASSERT(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_UNREACHABLE));
    CU_ASSERT(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_CONN_REFUSED));
    CU_ASSERT(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_REMOTE_ACCESS));
    CU_ASSERT_FALSE(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_TIMEOUT));
    CU_ASSERT_FALSE(UCCL_STATUS_IS_PEER_ERROR(UCCL_ERR_INVALID_PARAM));
    CU_ASSERT_FALSE(UCCL_STATUS_IS_PEER_ERROR(UCCL_OK));
    CU_ASSERT_FALSE(UCCL_STATUS_IS_PEER_ERROR((uccl_status_t)-200));
}

static void test_version(void)
{
    char expect[32];

    snprintf(expect, sizeof(expect), "%d.%d.%d", UCCL_VERSION_MAJOR, UCCL_VERSION_MINOR,
             UCCL_VERSION_PATCH);
    CU_ASSERT_STRING_EQUAL(uccl_version(), expect);
}

static CU_TestInfo status_tests[] = {
    {"names distinct, texts present", test_names_distinct_and_texts_present},
    {"unknown values", test_unknown_values},
    {"error and peer-error ranges", test_ranges},
    {"version string", test_version},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"status", NULL, NULL, NULL, NULL, status_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

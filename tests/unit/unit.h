/* Scaffolding shared by the CUnit programs of tests/unit: run the suites
 * verbosely, report skipped cases as skipped, and turn the result into an
 * exit status automake understands. */
#ifndef UCCL_TESTS_UNIT_H
#define UCCL_TESTS_UNIT_H

#include <CUnit/Basic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl.h>

#include "unit_proc.h"

/* automake's exit status for "skipped" */
#define UNIT_EXIT_SKIP 77

/* Assert an exact status and print both names when it differs. */
#define UNIT_ASSERT_STATUS(expr, expected)                                                     \
    do {                                                                                       \
        uccl_status_t unit_st_ = (expr);                                                       \
        if (unit_st_ != (expected))                                                            \
            fprintf(stderr, "\n  %s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__,   \
                    #expr, uccl_status_name(unit_st_), uccl_status_name(expected));            \
        CU_ASSERT_EQUAL(unit_st_, (expected));                                                 \
    } while (0)

/* A case that cannot run here: UNIT_SKIP("why", ...) in a test function
 * records why and returns. The case is reported "skipped" with a line
 * "SKIP: suite: test: why" that tests/driver.sh counts as a SKIP result, never
 * as a pass; a program whose every case skipped exits 77 (skipped). */
#define UNIT_SKIP(...)                                                                         \
    do {                                                                                       \
        unit_skip_note(__VA_ARGS__);                                                           \
        return;                                                                                \
    } while (0)

static int unit_skip_flag;
static char unit_skip_why[256];
static unsigned unit_ncases, unit_nskipped;
static struct timespec unit_t0;

__attribute__((format(printf, 1, 2))) static inline void unit_skip_note(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(unit_skip_why, sizeof(unit_skip_why), fmt, ap);
    va_end(ap);
    unit_skip_flag = 1;
}

static void unit_on_suite(const CU_pSuite s) { printf("Suite: %s\n", s->pName); }

static void unit_on_start(const CU_pTest t, const CU_pSuite s)
{
    (void)s;
    unit_skip_flag = 0;
    printf("  Test: %s ...", t->pName);
    clock_gettime(CLOCK_MONOTONIC, &unit_t0);
}

static void unit_on_done(const CU_pTest t, const CU_pSuite s, const CU_pFailureRecord f)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    unit_ncases++;
    printf("(%.2f s) ", (double)(t1.tv_sec - unit_t0.tv_sec) + (t1.tv_nsec - unit_t0.tv_nsec) * 1e-9);
    if (f != NULL) {
        printf("FAILED\n");
        for (CU_pFailureRecord r = f; r != NULL; r = r->pNext)
            printf("    %s:%u - %s\n", r->strFileName, r->uiLineNumber, r->strCondition);
    } else if (unit_skip_flag) {
        unit_nskipped++;
        printf("skipped\nSKIP: %s: %s: %s\n", s->pName, t->pName, unit_skip_why);
    } else {
        printf("passed\n");
    }
}

static void unit_on_init_failed(const CU_pSuite s) { printf("Suite %s: setup FAILED\n", s->pName); }
static void unit_on_cleanup_failed(const CU_pSuite s) { printf("Suite %s: cleanup FAILED\n", s->pName); }

/* UNIT_SANITIZED: built with AddressSanitizer (its allocator, not the code
 * under test, is what heap and RSS figures would measure). */
#if defined(__SANITIZE_ADDRESS__)
#define UNIT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNIT_SANITIZED 1
#endif
#endif

/* UNIT_ONLY=TEXT (for repeating one case by hand): only the cases whose
 * name contains TEXT run; the others are neither run nor counted. */
static inline void unit_only(const char *text)
{
    if (text == NULL || *text == '\0')
        return;
    CU_set_fail_on_inactive(CU_FALSE);
    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        for (CU_pTest t = s->pTest; t != NULL; t = t->pNext)
            CU_set_test_active(t, strstr(t->pName, text) != NULL ? CU_TRUE : CU_FALSE);
}

/* Run the registered suites with the reporter above (CUnit's basic mode
 * would call a skipped case passed). Returns 0 when every case passed or
 * skipped and some passed, 77 when all skipped, 1 when any failed or a suite
 * could not start. */
static inline int unit_run_registered(void)
{
    unsigned failures;

    setvbuf(stdout, NULL, _IOLBF, 0); /* SKIP lines stay whole next to stderr */
    CU_set_suite_start_handler(unit_on_suite);
    CU_set_test_start_handler(unit_on_start);
    CU_set_test_complete_handler(unit_on_done);
    CU_set_suite_init_failure_handler(unit_on_init_failed);
    CU_set_suite_cleanup_failure_handler(unit_on_cleanup_failed);
    unit_only(getenv("UNIT_ONLY"));
    CU_run_all_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    printf("%u cases: %u passed, %u failed, %u skipped (%u assertions failed)\n", unit_ncases,
           unit_ncases - CU_get_number_of_tests_failed() - unit_nskipped,
           CU_get_number_of_tests_failed(), unit_nskipped, CU_get_number_of_failures());
    CU_cleanup_registry();
    if (failures != 0)
        return 1;
    return unit_ncases > 0 && unit_nskipped == unit_ncases ? UNIT_EXIT_SKIP : 0;
}

/* Register suites, run them, return as unit_run_registered, 2 when CUnit
 * itself failed. */
static inline int unit_main(CU_SuiteInfo *suites)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "CU_register_suites: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    return unit_run_registered();
}

#endif

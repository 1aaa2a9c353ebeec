/* Scaffolding shared by the CUnit programs of tests/unit: run the suites
 * verbosely and turn the result into an exit status automake understands. */
#ifndef UCCL_TESTS_UNIT_H
#define UCCL_TESTS_UNIT_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <uccl/uccl.h>

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

/* Register suites, run them, return 0 when every assertion passed, 1 when any
 * failed or a suite could not start, 2 when CUnit itself failed. */
static inline int unit_main(CU_SuiteInfo *suites)
{
    unsigned failures;

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "CU_register_suites: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures != 0 ? 1 : 0;
}

#endif

/* CHECK for the single-process GPU tests (t_gpu_host_only, t_gpu_dmabuf):
 * a failed condition prints FAIL and its message and counts in failures. */
#ifndef UCCL_TESTS_GPU_CHECK1_H
#define UCCL_TESTS_GPU_CHECK1_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            failures++;                   \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
        }                                 \
    } while (0)

#endif

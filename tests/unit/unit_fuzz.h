/* Deterministic pseudo-random numbers for the fuzz loops of tests/unit, so
 * that a failure reproduces exactly. */
#ifndef UCCL_TESTS_UNIT_FUZZ_H
#define UCCL_TESTS_UNIT_FUZZ_H

#include <stdint.h>

/* xorshift64*: fixed seed per loop, same sequence on every run */
static inline uint64_t unit_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

#endif

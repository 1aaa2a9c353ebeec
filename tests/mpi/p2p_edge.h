/* Edge cases of t_p2p: many requests in flight, truncation, stale and
 * out-of-range descriptors. */
#ifndef UCCL_TESTS_P2P_EDGE_H
#define UCCL_TESTS_P2P_EDGE_H

#include "mpi_test.h"

/* Runs every edge case, one report line each; returns the failures. */
int p2p_edge_run(mt_ctx_t *c);

#endif

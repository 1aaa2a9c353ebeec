/* uccl_perf p2p: the timed loops of libuccl and of the MPI reference
 * (perf_p2p.c); the driver, the data check and the setup are uccl_perf.c's. */
#ifndef UCCL_TOOLS_PERF_P2P_H
#define UCCL_TOOLS_PERF_P2P_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <uccl/uccl.h>
#include <uccl/uccl_coll.h>

#include "perf_cuda.h"
#include "perf_opts.h"

enum { TAG_DATA = 1, TAG_ACK = 2, TAG_FIN = 3 };

typedef struct perf_ctx {
    perf_opts_t o;
    int rank;
    uccl_comm_t *comm;
    uccl_conn_t *conn;
    const char *conn_transport;
    bool target_polls; /* the passive rank never sleeps (see idle_wait) */
    uint8_t *buf;  /* the transfers' buffer: host, or the GPU's with --mem cuda */
    uint8_t *host; /* filled and checked here; buf itself in host mode */
    perf_cuda_t *gpu;
    uccl_mr_t *mr;
    uccl_rdesc_t peer_desc; /* rank 1's buffer, for write/read */
    uccl_req_t **reqs;      /* window + 1 */
    MPI_Win win;
    MPI_Request *mreqs; /* window */
} perf_ctx_t;

/* Prints what failed and why, then aborts the job. */
void perf_fail(const perf_ctx_t *c, const char *what, uccl_status_t st);

/* iters windows of c->o.window transfers of size bytes (with --sliding the
 * same number of transfers, window in flight all along), both ranks; return
 * rank 0's time in seconds (0 on a rank that times nothing). */
double perf_uccl_phase(perf_ctx_t *c, size_t size, int iters);
double perf_mpi_phase(perf_ctx_t *c, size_t size, int iters);

#endif

/* uccl_perf coll: the collectives benchmark (tools/perf_coll.c). */
#ifndef UCCL_TOOLS_PERF_COLL_H
#define UCCL_TOOLS_PERF_COLL_H

/* Run "uccl_perf coll ..." (argv[1] == "coll") after MPI_Init; returns the
 * process exit status (non-zero on bad options, errors or a wrong byte). */
int perf_coll_main(int argc, char **argv);

#include <stdbool.h>
#include <stddef.h>

/* The Open MPI over UCX reference (tools/perf_coll_ref.c). */
typedef struct perf_coll_ref {
    const char *mpirun;  /* launcher (default "mpirun") */
    const char *ucx_tls; /* UCX_TLS for the inner job, or NULL (UCX's choice) */
    int ranks;
} perf_coll_ref_t;

/* On rank 0 only: run this program again under mpirun with Open MPI's UCX
 * path (--ref-only) and read its MPI time per call (us) for each count;
 * 0, or -1 with the reason in why. */
int perf_coll_ucx_ref(const perf_coll_ref_t *r, int argc, char **argv, const size_t *counts,
                      double *us, int nrows, char *why, size_t why_len);

#endif

/* uccl_perf coll: the collectives benchmark (tools/perf_coll.c). */
#ifndef UCCL_TOOLS_PERF_COLL_H
#define UCCL_TOOLS_PERF_COLL_H

/* Run "uccl_perf coll ..." (argv[1] == "coll") after MPI_Init; returns the
 * process exit status (non-zero on bad options, errors or a wrong byte). */
int perf_coll_main(int argc, char **argv);

#endif

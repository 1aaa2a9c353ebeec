/* Two-process bootstrap for the GPU tests: under mpirun (np 2) through MPI,
 * otherwise by forking before any GPU runtime call; a peer exchange that
 * progresses an engine while it waits. */
#ifndef UCCL_TESTS_GPU_BOOT_H
#define UCCL_TESTS_GPU_BOOT_H

#include <stddef.h>
#include <uccl/uccl.h>

/* Returns the rank (0 or 1), or -1 on failure. */
int boot_init(int *argc, char ***argv);
/* Send mine, receive the peer's (same length), progressing engine (may be NULL). */
int boot_xchg(uccl_engine_t *engine, const void *mine, void *theirs, size_t len);
int boot_barrier(uccl_engine_t *engine);
/* Combine both ranks' results; returns the exit code for this process. */
int boot_finish(int rc);

#endif

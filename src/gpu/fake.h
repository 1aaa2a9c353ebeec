/* What the two files of the test-only fake GPU backend share: fake.c
 * (devices, memory, IPC) and fake_stream.c (streams, events, injected copy
 * faults). Not part of gpu.h: nothing outside src/gpu/fake*.c includes it. */
#ifndef UCCL_GPU_FAKE_H
#define UCCL_GPU_FAKE_H

#include <stddef.h>

#include "gpu/gpu.h"

#define FAKE_NDEV 4 /* at most; UCCL_FAKE_GPU_COUNT are present (default 2) */

/* The calling thread's current device (0 until uccl_gpu_set_device). */
int uccl_fake_current_device(void);
/* Mark device's primary context active: called by every fake call that a
 * CUDA runtime would create the context in (memory, copies, streams, ...). */
void uccl_fake_ctx_touch(int device);

/* Run every copy queued on the streams of device (-1: all devices), as a
 * cudaDeviceSynchronize does. */
void uccl_fake_streams_flush(int device);
/* Abort, naming what, when a stream of the process waits on a host flag
 * that is not set: a call that synchronizes the device would hang there on a
 * GPU (the library must not make one while it holds a caller's stream). */
void uccl_fake_device_sync_check(const char *what);
/* Make every copy still queued that reads or writes [base, base + len) fail
 * instead of running (the memory is going away under it); returns how many. */
int uccl_fake_streams_fault_range(const void *base, size_t len);

/* UCCL_FAKE_GPU_SM_COPY: may uccl_gpu_sm_copy_load succeed? */
int uccl_fake_sm_copy_on(void);
/* UCCL_FAKE_GPU_COUNT: how many fake GPUs there are (2..FAKE_NDEV). */
int uccl_fake_count(void);

#endif

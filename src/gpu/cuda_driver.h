/* What cuda.c shares with cuda_sm_copy.c, the two files of the CUDA
 * backend: driver API functions reached through the runtime, and the
 * mapping of a driver call's CUresult. Nothing outside src/gpu/cuda*.c
 * includes it. */
#ifndef UCCL_GPU_CUDA_DRIVER_H
#define UCCL_GPU_CUDA_DRIVER_H

#include <cuda.h>
#include <stdint.h>

#include <uccl/uccl.h>

/* A driver API function by name (cuLaunchKernel, ...) through the runtime's
 * entry-point query, so that nothing links libcuda; NULL when the driver
 * has none (the caller then clears the runtime's last error). */
void *uccl_cuda_driver_entry(const char *name);

/* UCCL_OK for CUDA_SUCCESS; else an error line naming what and value
 * (a length or a word's value) and UCCL_ERR_UNSUPPORTED,
 * UCCL_ERR_INVALID_PARAM or UCCL_ERR_IO. */
uccl_status_t uccl_cuda_memop_status(CUresult res, const char *what, uint64_t value);

#endif

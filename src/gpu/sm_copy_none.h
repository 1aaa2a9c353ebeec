/* The copy kernel's calls (gpu.h) for a backend without one (hip.c,
 * none.c): gpu_ipc then copies with the copy engines only. Included by
 * exactly one backend of a build, so these definitions are its own. */
#ifndef UCCL_GPU_SM_COPY_NONE_H
#define UCCL_GPU_SM_COPY_NONE_H

#include "gpu/gpu.h"

uccl_status_t uccl_gpu_sm_copy_load(int device)
{
    (void)device;
    return UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_gpu_sm_copy_async(int device, void *dst, const void *src, size_t len, int blocks,
                                     int unroll, uccl_gpu_stream_t stream)
{
    (void)device;
    (void)len;
    (void)stream;
    return uccl_gpu_sm_copy_args_ok(dst, src, blocks, unroll) ? UCCL_ERR_UNSUPPORTED : UCCL_ERR_INVALID_PARAM;
}

uccl_status_t uccl_gpu_sm_copy_batch_async(int device, void *const *dst, const void *const *src,
                                           const size_t *len, size_t n, int blocks,
                                           uccl_gpu_stream_t stream)
{
    (void)device;
    (void)len;
    (void)stream;
    return uccl_gpu_sm_batch_args_ok(dst, src, n, blocks) ? UCCL_ERR_UNSUPPORTED : UCCL_ERR_INVALID_PARAM;
}

uccl_status_t uccl_gpu_sm_copy_flag_async(int device, void *dst, const void *src, size_t len, int blocks,
                                          uint32_t *count, void *word, uint32_t value,
                                          uccl_gpu_stream_t stream)
{
    (void)device;
    (void)len;
    (void)value;
    return uccl_gpu_sm_flag_args_ok(dst, src, blocks, count, stream, word) ? UCCL_ERR_UNSUPPORTED
                                                                           : UCCL_ERR_INVALID_PARAM;
}

#endif

/* gpu_ipc's SM-driven copy (gpu.h, uccl_gpu_sm_copy_async): dst <- src,
 * n16 16-byte words then ntail (< 16) bytes, grid-stride, four words in
 * flight per thread. dst or src may be a peer GPU's memory mapped over IPC:
 * every block then moves data over NVLink with loads and stores, as NCCL's
 * kernels do, instead of the copy engines, which top out at about 200 GB/s
 * busbw when four GPUs all send and receive at once
 * (tests/gpu/results/4xH200). Built by nvcc into a fatbin that the library
 * embeds and loads with the driver API (src/gpu/cuda_sm.c); the library
 * itself stays C. */
#include <stddef.h>
#include <stdint.h>

extern "C" __global__ void __launch_bounds__(512)
uccl_sm_copy(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n16, unsigned char *dtail,
             const unsigned char *stail, unsigned int ntail)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n16; i += stride)
        dst[i] = src[i];
    if (blockIdx.x == 0 && threadIdx.x < ntail)
        dtail[threadIdx.x] = stail[threadIdx.x];
}

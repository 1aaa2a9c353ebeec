/* gpu_ipc's SM-driven copy (gpu.h, uccl_gpu_sm_copy_async): dst <- src,
 * n16 16-byte words then ntail (< 16) bytes, grid-stride, U words in
 * flight per thread (uccl_sm_copy: 4, uccl_sm_copy8: 8; UCCL_GPU_IPC_SM_UNROLL
 * picks); uccl_sm_copy_batch: up to 64 such copies in one launch, a row of
 * blocks (blockIdx.y) per copy (uccl_gpu_sm_copy_batch_async). dst or src may be a peer GPU's memory mapped over IPC:
 * every block then moves data over NVLink with loads and stores, as NCCL's
 * kernels do, instead of the copy engines, which top out at about 200 GB/s
 * busbw when four GPUs all send and receive at once
 * (tests/gpu/results/4xH200). Built by nvcc into a fatbin that the library
 * embeds and loads with the driver API (src/gpu/cuda.c); the library
 * itself stays C. */
#include <stddef.h>
#include <stdint.h>

template <int U>
static __device__ __forceinline__ void copy_words(uint4 *__restrict__ dst, const uint4 *__restrict__ src,
                                                  size_t n16, unsigned char *dtail, const unsigned char *stail,
                                                  unsigned int ntail)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    for (; i + (U - 1) * stride < n16; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            v[k] = src[i + k * stride];
#pragma unroll
        for (int k = 0; k < U; k++)
            dst[i + k * stride] = v[k];
    }
    for (; i < n16; i += stride)
        dst[i] = src[i];
    if (blockIdx.x == 0 && threadIdx.x < ntail)
        dtail[threadIdx.x] = stail[threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(512)
uccl_sm_copy(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n16, unsigned char *dtail,
             const unsigned char *stail, unsigned int ntail)
{
    copy_words<4>(dst, src, n16, dtail, stail, ntail);
}

extern "C" __global__ void __launch_bounds__(512)
uccl_sm_copy8(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n16, unsigned char *dtail,
              const unsigned char *stail, unsigned int ntail)
{
    copy_words<8>(dst, src, n16, dtail, stail, ntail);
}

/* Up to UCCL_GPU_SM_BATCH_MAX (gpu.h) copies, passed by value (1.5 KiB of
 * kernel parameters); cuda.c's sm_batch_t has this layout. */
#define SM_BATCH_MAX 64
struct uccl_sm_batch {
    uint4 *dst[SM_BATCH_MAX];
    const uint4 *src[SM_BATCH_MAX];
    size_t len[SM_BATCH_MAX];
};

extern "C" __global__ void __launch_bounds__(512) uccl_sm_copy_batch(const struct uccl_sm_batch b)
{
    unsigned int y = blockIdx.y;
    size_t len = b.len[y];
    unsigned int ntail = (unsigned int)(len % 16);

    copy_words<4>(b.dst[y], b.src[y], len / 16, (unsigned char *)b.dst[y] + (len - ntail),
                  (const unsigned char *)b.src[y] + (len - ntail), ntail);
}

/* Copies, then writes value into a word of mapped host memory
 * (uccl_gpu_sm_copy_flag_async): a fence of one transfer told by one
 * launch, not a copy and a stream write (gpu_ipc's FLAG_KERNEL_MAX). Every
 * thread's stores are made visible system-wide before its block's barrier;
 * thread 0 of the last block to finish (count: blocks finished, in device
 * memory, left at 0 again; unused with one block) stores the word, as
 * cuStreamWriteValue32 would after the copy. */
extern "C" __global__ void __launch_bounds__(512)
uccl_sm_copy_flag(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n16, unsigned char *dtail,
                  const unsigned char *stail, unsigned int ntail, unsigned int *count,
                  volatile unsigned int *word, unsigned int value)
{
    copy_words<8>(dst, src, n16, dtail, stail, ntail);
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (gridDim.x > 1) {
        if (atomicAdd(count, 1u) != gridDim.x - 1)
            return;
        *count = 0; /* every other block has added: none reads it again in this launch */
        __threadfence_system();
    }
    *word = value;
}

/* GPU IPC transport test, two processes (mpirun -np 2, or forked): every
 * operation with bytes verified, GPU0->GPU1 and same GPU, GPU<->host,
 * offsets inside one allocation, 1 B to 1 GiB (64 MiB on the fake GPU
 * backend, where copies run on the CPU), and the refused accesses.
 * Without a GPU it prints "skipped: no GPU" and exits 77. The cases live in
 * gpu_test.c; this file holds the sizes. */
#include <stdio.h>

#include "gpu_test.h"

#define MAX_BIG (1ul << 30) /* largest transfer */
#define FAKE_MAX_BIG (64ul << 20) /* on the fake GPU backend (CI, copies on the CPU) */

int main(int argc, char **argv)
{
    static const size_t gsizes[] = {1, 4096, 65536 + 3, 1u << 20, 16u << 20, 256u << 20, MAX_BIG};
    static const size_t hsizes[] = {1, 4096, 1u << 20, 64u << 20};
    const gpu_test_mode_t mode = {
        .gpu_sizes = gsizes,
        .n_gpu_sizes = (int)(sizeof(gsizes) / sizeof(gsizes[0])),
        .big_ops = 0,
        .host_sizes = hsizes,
        .n_host_sizes = (int)(sizeof(hsizes) / sizeof(hsizes[0])),
        .host_range = "1 B .. 64 MiB",
        .gpu_alloc = GPU_TEST_OFF_A + 2 * (MAX_BIG + (1u << 20)),
        .host_alloc = GPU_TEST_OFF_A + 2 * ((64u << 20) + 4096),
        .need_caps = UCCL_CAP_GPU_IPC,
        .caps_name = "gpu_ipc",
        .fake_max = FAKE_MAX_BIG,
        .fake_gpu_alloc = GPU_TEST_OFF_A + 2 * (FAKE_MAX_BIG + (1u << 20)),
        .rma_in_order = 1,
    };

    return gpu_test_main(&argc, &argv, &mode);
}

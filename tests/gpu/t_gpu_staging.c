/* GPU memory staged through pinned host buffers by the shm or tcp transport
 * (argv[1], default shm; UCCL_TRANSPORTS is set to it), two processes: every
 * operation with bytes verified, GPU0->GPU1 and same GPU, GPU<->host,
 * 1 B to 64 MiB + 3, the refused accesses, and a rough bandwidth line.
 * Without a GPU it prints "skipped: no GPU" and exits 77. The cases live in
 * gpu_test.c; this file holds the sizes and the bandwidth line. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "boot.h"
#include "gpu_test.h"

#define MAX_BIG ((64ul << 20) + 3) /* largest transfer */

/* Staged send/recv of the largest size, timed on the receiver. */
static void bandwidth(gpu_test_side_t *me, const char *name)
{
    const int iters = 5;
    struct timespec t0, t1;
    uccl_req_t *req = NULL;

    boot_barrier(gpu_test.eng);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) {
        if (gpu_test.rank == 0)
            CHECK_ST(uccl_send(gpu_test.conn, me->mr1, 0, MAX_BIG, 900, &req), UCCL_OK);
        else
            CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, 0, MAX_BIG, 900, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (gpu_test.rank == 1) {
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("bandwidth %s %s: GPU->GPU send/recv %zu B x %d: %.2f GB/s\n",
               getenv("UCCL_TRANSPORTS"), name, (size_t)MAX_BIG, iters,
               (double)MAX_BIG * iters / s / 1e9);
    }
    boot_barrier(gpu_test.eng);
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {1, 4095, (1u << 20) + 3, MAX_BIG};
    const gpu_test_mode_t mode = {
        .gpu_sizes = sizes,
        .n_gpu_sizes = (int)(sizeof(sizes) / sizeof(sizes[0])),
        .big_ops = 1,
        .host_sizes = sizes,
        .n_host_sizes = (int)(sizeof(sizes) / sizeof(sizes[0])),
        .host_range = "1 B .. 64 MiB + 3",
        .gpu_alloc = GPU_TEST_OFF_A + 2 * (MAX_BIG + (1u << 20)),
        .host_alloc = GPU_TEST_OFF_A + 2 * (MAX_BIG + (1u << 20)),
        .after_sizes = bandwidth,
    };

    setenv("UCCL_TRANSPORTS", argc > 1 && argv[1][0] != '-' ? argv[1] : "shm", 1);
    return gpu_test_main(&argc, &argv, &mode);
}

/* GPU IPC transport test, two processes (mpirun -np 2, or forked): every
 * operation with bytes verified, GPU0->GPU1 and same GPU, GPU<->host,
 * offsets inside one allocation, 1 B to 1 GiB, and the refused accesses.
 * Without a GPU it prints "skipped: no GPU" and exits 77. The cases live in
 * gpu_test.c; this file holds the sizes and the two-sided GPU<->host case. */
#include <stdio.h>

#include "gpu_test.h"

#define MAX_BIG (1ul << 30) /* largest transfer */

/* Two-sided GPU<->host: the GPU side goes over gpu_ipc, the host side over
 * the host transport, so the two never meet. Check exactly that. */
static void t_sendrecv_mixed(gpu_test_side_t *gpu, gpu_test_side_t *host, int failures_before)
{
    uccl_req_t *req;
    uccl_status_t st;

    (void)failures_before;
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_send(gpu_test.conn, gpu->mr1, 0, 256, 777, &req), UCCL_OK);
        CHECK_ST(uccl_wait(req, 300), UCCL_ERR_TIMEOUT);
        uccl_req_free(req);
        return;
    }
    st = uccl_recv(gpu_test.conn, host->mr1, 0, 256, 777, &req);
    if (st == UCCL_OK) {
        st = uccl_wait(req, 300);
        uccl_req_free(req);
        CHECK(st == UCCL_ERR_TIMEOUT, "GPU->host recv: %s", uccl_status_name(st));
    } else {
        CHECK(st == UCCL_ERR_UNSUPPORTED, "GPU->host recv post: %s", uccl_status_name(st));
    }
    printf("unsupported: two-sided GPU->host (send from GPU memory, receive into host memory): "
           "the receive gets %s\n", uccl_status_name(st));
}

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
        .sendrecv_mixed = t_sendrecv_mixed,
    };

    return gpu_test_main(&argc, &argv, &mode);
}

/* UCCL_GPU_IPC_PEER_DONE registers the peer's word page for the engine's
 * GPU when a connection is made (src/tp/gpu_ipc/done.c), wherever that
 * runs: in uccl_connect on the caller's thread, in progress when accepted
 * (inside a lazy comm's first collective, or on the progress thread). Two
 * forked processes, both engines on fake GPU 1 with a progress thread, which
 * takes rank 1's connection in (a thread whose current GPU is 0): after a pulled 64 KiB send (bytes verified, told done
 * by the receiver's word), GPU 0's context is untouched in both processes
 * (on CUDA, registering there creates a context on GPU 0) and GPU 1's is
 * active (the control). Without a GPU: "skipped: no GPU"; on a real GPU or
 * with one fake GPU: skipped (the context model is the fake's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "gpu/gpu.h"
#include "gpu_test.h"

#define SKIP 77
#define LEN (64u << 10)
#define TMO 30000

/* Both engines on GPU 1, connected while rank 1's own thread makes no
 * progress (it waits in the bootstrap): its progress thread, whose current
 * GPU is 0, takes the connection in. 0 or -1. */
static int connect_on_progress_thread(void)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX | UCCL_ENGINE_PARAM_PROGRESS_THREAD,
                              .gpu_index = 1,
                              .progress_thread = 1};
    char mine[UCCL_ADDRESS_MAX], theirs[UCCL_ADDRESS_MAX];
    size_t len = sizeof(mine);
    int rc = 0;

    if (uccl_gpu_set_device(1) != UCCL_OK || uccl_engine_create(&p, &gpu_test.eng) != UCCL_OK)
        return -1;
    CHECK((uccl_engine_caps(gpu_test.eng) & UCCL_CAP_GPU_IPC) != 0, "engine has no gpu_ipc");
    memset(mine, 0, sizeof(mine));
    if (uccl_engine_address(gpu_test.eng, mine, &len) != UCCL_OK)
        return -1;
    boot_xchg(NULL, mine, theirs, sizeof(mine));
    if (gpu_test.rank == 0)
        rc = uccl_connect(gpu_test.eng, theirs, sizeof(theirs), &gpu_test.conn) == UCCL_OK ? 0 : -1;
    boot_barrier(NULL); /* rank 1: connected by its progress thread by now */
    if (gpu_test.rank == 1)
        rc = uccl_accept(gpu_test.eng, TMO, &gpu_test.conn) == UCCL_OK ? 0 : -1;
    return rc;
}

int main(void)
{
    gpu_test_side_t dev;
    int n = 0, active;

    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("UCCL_GPU_IPC_PEER_DONE", "1", 1);
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        printf("skipped: no GPU\n");
        return SKIP;
    }
    if (strcmp(uccl_gpu_backend(), "fake") != 0 || n < 2) {
        printf("skipped: needs the fake GPU backend's context model and 2 fake GPUs (\"%s\", %d GPUs)\n",
               uccl_gpu_backend(), n);
        return SKIP;
    }
    gpu_test.rank = boot_init(NULL, NULL);
    if (gpu_test.rank < 0) {
        perror("bootstrap");
        return 1;
    }
    if (connect_on_progress_thread() != 0 || gpu_test_side_init(&dev, GPU_TEST_OFF_A + 2 * (LEN + 4096), 1) != 0) {
        CHECK(0, "engine, connection or memory setup failed");
        return boot_finish(1);
    }
    gpu_test_sendrecv(&dev, LEN, 0, 7);
    active = 1;
    CHECK(uccl_gpu_primary_ctx_active(0, &active) == UCCL_OK && !active,
          "GPU 0's context was touched by an engine of GPU 1 (PEER_DONE's registration on the "
          "accepting thread's current GPU?)");
    active = 0;
    CHECK(uccl_gpu_primary_ctx_active(1, &active) == UCCL_OK && active,
          "control: GPU 1's context is not active: the check above proves nothing");
    boot_barrier(gpu_test.eng);
    CHECK_ST(uccl_conn_close(gpu_test.conn), UCCL_OK);
    gpu_test_side_fini(&dev);
    boot_barrier(NULL);
    CHECK_ST(uccl_engine_destroy(gpu_test.eng), UCCL_OK);
    if (gpu_test.failures == 0)
        printf("ok: rank %d: a PEER_DONE connection on GPU 1 left GPU 0 untouched\n", gpu_test.rank);
    return boot_finish(gpu_test.failures ? 1 : 0);
}

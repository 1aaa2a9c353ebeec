/* GPU references for the benchmarks (see perf_cuda.h), on src/gpu/gpu.h;
 * NCCL through dlopen with the few prototypes it needs declared here. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "perf_cuda.h"

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

typedef struct plain_export {
    uccl_gpu_ipc_handle_t handle;
    size_t off; /* dst's offset inside its allocation */
    int ok;
} plain_export_t;

double perf_cuda_plain(int rank, void *src, void *dst, size_t len, int iters, perf_xchg_fn xchg)
{
    plain_export_t mine, theirs;
    uccl_gpu_ptr_attr_t attr;
    uccl_gpu_stream_t s;
    void *mapped;
    double t0, us = -1, peer_us = -1;

    memset(&mine, 0, sizeof(mine));
    if (rank == 1 && uccl_gpu_ptr_attr(dst, &attr) == UCCL_OK && uccl_gpu_ipc_get(attr.base, &mine.handle) == UCCL_OK) {
        mine.off = (size_t)((char *)dst - (char *)attr.base);
        mine.ok = 1;
    }
    xchg(&mine, &theirs, sizeof(mine));
    if (rank == 0 && theirs.ok && uccl_gpu_ipc_open(&theirs.handle, &mapped) == UCCL_OK) {
        if (uccl_gpu_stream_create(&s) == UCCL_OK) {
            char *d = (char *)mapped + theirs.off;
            uccl_gpu_memcpy_async(d, src, len, s);
            uccl_gpu_stream_sync(s);
            t0 = now_us();
            for (int i = 0; i < iters; i++) {
                uccl_gpu_memcpy_async(d, src, len, s);
                uccl_gpu_stream_sync(s);
            }
            us = (now_us() - t0) / iters;
            uccl_gpu_stream_destroy(s);
        }
        uccl_gpu_ipc_close(mapped);
    }
    xchg(&us, &peer_us, sizeof(us)); /* rank 1 waits here until rank 0 is done */
    return rank == 0 ? us : peer_us;
}

/* ---------------------------------------------------------------- NCCL */

typedef struct { char internal[128]; } nccl_id_t;
typedef void *nccl_comm_t;
typedef int (*get_id_fn)(nccl_id_t *);
typedef int (*init_rank_fn)(nccl_comm_t *, int, nccl_id_t, int);
typedef int (*p2p_fn)(void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*destroy_fn)(nccl_comm_t);

double perf_cuda_nccl(int rank, void *buf, size_t len, int iters, perf_xchg_fn xchg)
{
    static void *lib;
    static nccl_comm_t comm;
    nccl_id_t id;
    uccl_gpu_stream_t s;
    double t0 = 0, us = -1;
    int ok;

    if (lib == NULL)
        lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    ok = lib != NULL;
    {
        int peer_ok;
        xchg(&ok, &peer_ok, sizeof(ok));
        if (!ok || !peer_ok)
            return -1;
    }
    get_id_fn get_id = (get_id_fn)dlsym(lib, "ncclGetUniqueId");
    init_rank_fn init_rank = (init_rank_fn)dlsym(lib, "ncclCommInitRank");
    p2p_fn send = (p2p_fn)dlsym(lib, "ncclSend"), recv = (p2p_fn)dlsym(lib, "ncclRecv");
    if (comm == NULL) {
        nccl_id_t peer_id;
        memset(&id, 0, sizeof(id));
        if (rank == 0)
            get_id(&id);
        xchg(&id, &peer_id, sizeof(id));
        if (init_rank(&comm, 2, rank == 0 ? id : peer_id, rank) != 0)
            return -1;
    }
    if (uccl_gpu_stream_create(&s) != UCCL_OK)
        return -1;
    for (int i = -1; i < iters; i++) {
        if (i == 0) {
            uccl_gpu_stream_sync(s);
            xchg(&ok, &ok, sizeof(ok));
            t0 = now_us();
        }
        if (rank == 0)
            send(buf, len, 0 /* ncclInt8 */, 1, comm, s);
        else
            recv(buf, len, 0, 0, comm, s);
    }
    uccl_gpu_stream_sync(s);
    us = (now_us() - t0) / iters;
    uccl_gpu_stream_destroy(s);
    return us;
}

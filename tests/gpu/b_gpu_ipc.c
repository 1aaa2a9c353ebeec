/* GPU IPC benchmark, two processes on one host (mpirun -np 2 or forked):
 * uccl_write and uccl_send/recv between GPU buffers against a plain
 * single-stream cudaMemcpyAsync between the same IPC-mapped buffers and
 * NCCL send/recv, 4 KiB to 1 GiB. One JSON object per line on stdout.
 * Usage: b_gpu_ipc [same]   ("same": both processes on GPU 0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boot.h"
#include "gpu/gpu.h"
#include "tools/perf_cuda.h"

#define MAX_LEN (1ul << 30)

static int rank;
static uccl_engine_t *eng;
static uccl_conn_t *conn;

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int xchg(const void *mine, void *theirs, size_t len)
{
    return boot_xchg(eng, mine, theirs, len);
}

/* Rank 0's figure, on both ranks (both must call it: it is an exchange). */
static double rank0_us(double us)
{
    double peer;

    xchg(&us, &peer, sizeof(us));
    return rank == 0 ? us : peer;
}

static double bench_write(uccl_mr_t *mr, const uccl_rdesc_t *rd, size_t len, int iters)
{
    double t0 = 0, us = -1;

    if (rank == 0) {
        for (int i = -2; i < iters; i++) {
            uccl_req_t *req;
            if (i == 0)
                t0 = now_us();
            if (uccl_write(conn, mr, 0, len, rd, 0, &req) != UCCL_OK || uccl_wait(req, -1) != UCCL_OK)
                return -1;
            uccl_req_free(req);
        }
        us = (now_us() - t0) / iters;
    }
    return rank0_us(us);
}

static double bench_sendrecv(uccl_mr_t *mr, size_t len, int iters)
{
    double t0 = 0, us;

    boot_barrier(eng);
    for (int i = -2; i < iters; i++) {
        uccl_req_t *req;
        uccl_status_t st = rank == 0 ? uccl_send(conn, mr, 0, len, 1, &req) : uccl_recv(conn, mr, 0, len, 1, &req);
        if (i == 0)
            t0 = now_us();
        if (st != UCCL_OK || uccl_wait(req, -1) != UCCL_OK)
            return -1;
        uccl_req_free(req);
    }
    us = (now_us() - t0) / iters;
    return rank0_us(us);
}

static void report(const char *what, size_t len, double us)
{
    if (rank == 0)
        printf("{\"bench\":\"%s\",\"bytes\":%zu,\"us\":%.3f,\"GBps\":%.2f}\n", what, len, us,
               us > 0 ? (double)len / us / 1e3 : 0.0);
}

int main(int argc, char **argv)
{
    int n = 0, same = argc > 1 && strcmp(argv[1], "same") == 0;
    char mine[UCCL_ADDRESS_MAX], theirs[UCCL_ADDRESS_MAX];
    size_t alen = sizeof(mine);
    uccl_rdesc_t rd_mine, rd;
    uccl_mr_t *mr;
    void *buf;
    int gpu;

    setvbuf(stdout, NULL, _IOLBF, 0);
    rank = boot_init(&argc, &argv);
    if (rank < 0 || uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        if (rank == 0)
            printf("skipped: no GPU\n");
        return boot_finish(77);
    }
    gpu = same || n < 2 ? 0 : rank;
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = gpu};
    if (uccl_gpu_set_device(gpu) != UCCL_OK || uccl_gpu_malloc(&buf, MAX_LEN) != UCCL_OK ||
        uccl_engine_create(&p, &eng) != UCCL_OK || uccl_mr_reg(eng, buf, MAX_LEN, 0, &mr) != UCCL_OK)
        return boot_finish(1);
    memset(mine, 0, sizeof(mine));
    uccl_engine_address(eng, mine, &alen);
    boot_xchg(NULL, mine, theirs, sizeof(mine));
    if ((rank == 0 ? uccl_connect(eng, theirs, sizeof(theirs), &conn) : uccl_accept(eng, -1, &conn)) != UCCL_OK)
        return boot_finish(1);
    uccl_mr_pack(mr, 0, MAX_LEN, &rd_mine);
    xchg(&rd_mine, &rd, sizeof(rd));
    if (rank == 0)
        printf("{\"config\":\"GPU %d -> GPU %d\"}\n", gpu, same || n < 2 ? 0 : 1);
    for (size_t len = 4096; len <= MAX_LEN; len *= 4) {
        int iters = len <= (1u << 20) ? 2000 : len <= (64u << 20) ? 100 : 10;
        report("uccl_write", len, bench_write(mr, &rd, len, iters));
        report("uccl_sendrecv", len, bench_sendrecv(mr, len, iters));
        report("plain_memcpy", len, perf_cuda_plain(rank, buf, buf, len, iters, xchg));
        report("nccl_sendrecv", len, perf_cuda_nccl(rank, buf, len, iters, xchg));
    }
    boot_barrier(eng);
    uccl_conn_close(conn);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(eng);
    uccl_gpu_free(buf);
    return boot_finish(0);
}

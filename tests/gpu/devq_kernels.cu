// Kernels of b_devq (device queues on a real GPU): producers of the mixed-size
// correctness run, the receiver's consumer (waits on notification counters,
// then checks every byte on the GPU), the benchmark producer, the 4 KiB
// latency loop and the endless producer of the peer-killed case. Plain C
// launchers (extern "C") so that b_devq.c stays C; every launcher returns a
// cudaError_t as int.
#include <cuda_runtime.h>
#include <uccl/uccl_device.cuh>

#include "devq_pair.h"
#include "devq_kernels.h"

// Block b drives ring b: per commands of producer b, mixed sizes; even blocks
// put one command per lane with a warp-wide reservation, odd blocks one per
// thread. Then the block waits for its commands and writes its 8-byte marker
// with a notification (counter b += 1).
__global__ void k_mixed(const uccl_devq_handle_t *qs, uint32_t per, uint32_t maxlen,
                        uint64_t mark_off, int *rc)
{
    uccl_devq_handle_t q = qs[blockIdx.x];
    uint32_t t = blockIdx.x;
    uint64_t ticket = 0, mine = 0;
    int err = 0;

    for (uint32_t base = 0; base < per && err == 0; base += blockDim.x) {
        uint32_t k = base + threadIdx.x;
        if (k < per) {
            dq_cmd_t c;
            dq_cmd(t, k, per, maxlen, &c);
            if ((t & 1) == 0)
                err = uccl_devq_put_warp(&q, 0, 0, c.loff, c.roff, c.len, 0, 0, &ticket);
            else
                err = uccl_devq_put(&q, 0, 0, c.loff, c.roff, c.len, 0, 0, &ticket);
            if (err == 0)
                mine = ticket + 1;
        }
    }
    if (err == 0 && mine > 0)
        err = uccl_devq_wait_done(&q, mine);
    __syncthreads();
    if (threadIdx.x == 0 && err == 0) {
        err = uccl_devq_put(&q, 0, 0, 0, mark_off + (uint64_t)t * 8, 8, UCCL_DEVQ_CMD_NOTIFY,
                            UCCL_DEVQ_NOTIF(t, 1), &ticket);
        if (err == 0)
            err = uccl_devq_wait_done(&q, ticket + 1);
    }
    rc[blockIdx.x * blockDim.x + threadIdx.x] = err;
}

// Receiver: wait (on the GPU) until every producer's notification was counted.
__global__ void k_wait_counters(uccl_devq_handle_t q, uint32_t n, int *rc)
{
    int err = 0;

    for (uint32_t t = 0; t < n && err == 0; t++)
        err = uccl_devq_wait_counter(&q, t, 1);
    *rc = err;
}

// Receiver: check every command's bytes and the gap after it; one thread per command.
__global__ void k_verify(const uint8_t *dst, uint32_t nthreads, uint32_t per, uint32_t maxlen,
                         uint64_t mark_off, unsigned long long *bad)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    dq_cmd_t c;

    if (i >= (uint64_t)nthreads * per) {
        if (i < (uint64_t)nthreads * per + nthreads) { // the markers
            const uint8_t *m = dst + mark_off + (i - (uint64_t)nthreads * per) * 8;
            for (int j = 0; j < 8; j++)
                if (m[j] != dq_pattern((uint64_t)j)) {
                    atomicAdd(bad, 1ull);
                    break;
                }
        }
        return;
    }
    dq_cmd((uint32_t)(i / per), (uint32_t)(i % per), per, maxlen, &c);
    const uint8_t *d = dst + c.roff;
    for (uint64_t j = 0; j < maxlen; j++)
        if (d[j] != (j < c.len ? dq_pattern(c.loff + j) : 0)) {
            atomicAdd(bad, 1ull);
            return;
        }
}

// Benchmark: one warp puts n commands of size bytes (command i: local offset
// (i * size) mod local, remote offset i * stride mod span) and waits for all;
// out[0] = elapsed ns (globaltimer), out[1] = error. wait = 0: the kernel
// leaves once its commands are queued (the host waits for them).
__global__ void k_bench(uccl_devq_handle_t q, uint64_t n, uint64_t size, uint64_t stride,
                        uint64_t local, uint64_t span, int use_warp, int wait, unsigned long long *out)
{
    uint64_t t0 = uccl_devq_now_ns(), ticket = 0, last = 0;
    int err = 0;

    for (uint64_t base = 0; base < n && err == 0; base += blockDim.x) {
        uint64_t i = base + threadIdx.x;
        if (i < n) {
            uint64_t lo = (i * size) % local, ro = (i * stride) % span;
            err = use_warp ? uccl_devq_put_warp(&q, 0, 0, lo, ro, size, 0, 0, &ticket)
                           : uccl_devq_put(&q, 0, 0, lo, ro, size, 0, 0, &ticket);
            if (err == 0 && ticket + 1 > last)
                last = ticket + 1;
        }
    }
    if (err == 0 && last > 0 && wait)
        err = uccl_devq_wait_done(&q, last);
    __syncthreads();
    if (threadIdx.x == 0) {
        out[0] = uccl_devq_now_ns() - t0;
    }
    if (err != 0)
        out[1] = (unsigned long long)(unsigned)err;
}

// Latency: one thread, iters x (put size bytes, wait until done). Global
// timer (ns) of iteration i: ts[3i] start, ts[3i+1] the command published,
// ts[3i+2] its completion seen.
__global__ void k_latency(uccl_devq_handle_t q, uint64_t size, uint32_t iters, unsigned long long *ts,
                          int *rc)
{
    uint64_t ticket;
    int err = 0;

    for (uint32_t i = 0; i < iters && err == 0; i++) {
        uint64_t t0 = uccl_devq_now_ns(), t1;
        err = uccl_devq_put(&q, 0, 0, 0, 0, size, 0, 0, &ticket);
        t1 = uccl_devq_now_ns();
        if (err == 0)
            err = uccl_devq_wait_done(&q, ticket + 1);
        ts[3 * i] = t0;
        ts[3 * i + 1] = t1;
        ts[3 * i + 2] = uccl_devq_now_ns();
    }
    *rc = err;
}

// Until the ring fails: one warp puts 4 KiB commands; *rc = the error seen.
__global__ void k_endless(uccl_devq_handle_t q, uint64_t span, int *rc, unsigned long long *puts)
{
    int err = 0;

    for (uint64_t i = threadIdx.x; err == 0; i += blockDim.x) {
        uint64_t ticket;
        err = uccl_devq_put_warp(&q, 0, 0, (i * 4096) % (DQ_LOCAL - 4096), (i * 4096) % span, 4096, 0, 0,
                                 &ticket);
        if (err == 0 && threadIdx.x == 0)
            atomicAdd(puts, 1ull);
    }
    if (threadIdx.x == 0)
        *rc = err;
}

extern "C" {

int dqk_mixed(const uccl_devq_handle_t *qs_dev, uint32_t nrings, uint32_t per, uint32_t maxlen,
              uint64_t mark_off, int *rc_dev)
{
    k_mixed<<<nrings, 32>>>(qs_dev, per, maxlen, mark_off, rc_dev);
    return (int)cudaGetLastError();
}

int dqk_wait_counters(uccl_devq_handle_t q, uint32_t n, int *rc_dev)
{
    k_wait_counters<<<1, 1>>>(q, n, rc_dev);
    return (int)cudaGetLastError();
}

int dqk_verify(const uint8_t *dst, uint32_t nthreads, uint32_t per, uint32_t maxlen, uint64_t mark_off,
               unsigned long long *bad_dev)
{
    uint64_t n = (uint64_t)nthreads * per + nthreads;
    k_verify<<<(unsigned)((n + 255) / 256), 256>>>(dst, nthreads, per, maxlen, mark_off, bad_dev);
    return (int)cudaGetLastError();
}

int dqk_bench(uccl_devq_handle_t q, uint64_t n, uint64_t size, uint64_t stride, uint64_t local,
              uint64_t span, int use_warp, int wait, unsigned long long *out_dev)
{
    k_bench<<<1, 32>>>(q, n, size, stride, local, span, use_warp, wait, out_dev);
    return (int)cudaGetLastError();
}

int dqk_latency(uccl_devq_handle_t q, uint64_t size, uint32_t iters, unsigned long long *ts_dev, int *rc_dev)
{
    k_latency<<<1, 1>>>(q, size, iters, ts_dev, rc_dev);
    return (int)cudaGetLastError();
}

int dqk_endless(uccl_devq_handle_t q, uint64_t span, int *rc_dev, unsigned long long *puts_dev)
{
    k_endless<<<1, 32>>>(q, span, rc_dev, puts_dev);
    return (int)cudaGetLastError();
}

int dqk_sync(void)
{
    return (int)cudaDeviceSynchronize();
}

// 0 when the device is idle, 1 while a kernel runs, else the error.
int dqk_busy(void)
{
    cudaError_t e = cudaStreamQuery(0);
    if (e == cudaErrorNotReady)
        return 1;
    return e == cudaSuccess ? 0 : -(int)e;
}

} // extern "C"

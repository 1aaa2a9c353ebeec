/* GPU reference measurements for uccl_perf --mem cuda and tests/gpu/b_gpu_ipc:
 * a plain single-stream cudaMemcpyAsync between the same IPC-mapped buffers,
 * and NCCL send/recv when libnccl.so.2 can be dlopen'ed. */
#ifndef UCCL_TOOLS_PERF_CUDA_H
#define UCCL_TOOLS_PERF_CUDA_H

#include <stddef.h>
#include <uccl/uccl.h>

/* Exchange len bytes with the peer (the caller's bootstrap). */
typedef int (*perf_xchg_fn)(const void *mine, void *theirs, size_t len);

/* Rank 0 copies from src into the peer's buffer (rank 1 passes its buffer
 * as dst and only exports it). Returns microseconds per copy, < 0 on error. */
double perf_cuda_plain(int rank, void *src, void *dst, size_t len, int iters, perf_xchg_fn xchg);
/* NCCL send (rank 0) / recv (rank 1) of len bytes; < 0 when NCCL is absent. */
double perf_cuda_nccl(int rank, void *buf, size_t len, int iters, perf_xchg_fn xchg);

/* ---- uccl_perf coll --mem cuda */

/* GPUs this process sees (0 without a runtime or device). */
int perf_cuda_count(void);
/* Make GPU gpu this thread's current device; 0 or -1. */
int perf_cuda_set_device(int gpu);
/* The device-to-device ceiling: iters copies of len bytes src -> dst on
 * one stream of the current device, each waited for (cudaMemcpyAsync +
 * cudaStreamSynchronize, as a blocking collective call waits); seconds
 * per copy, < 0 on error. len 0: 0. */
double perf_cuda_copy_s(void *dst, const void *src, size_t len, int iters);

/* ---- windowed references for uccl_perf (two ranks, collective calls) */

typedef struct perf_cuda perf_cuda_t;

/* Pick the GPU (local_rank % count), allocate len bytes on it, export it to
 * the peer and map the peer's (plain copy), set up NCCL if present.
 * Returns 0, or -1 after printing why. */
int perf_cuda_setup(int rank, int local_rank, size_t len, perf_xchg_fn xchg, perf_cuda_t **out);
void *perf_cuda_buf(const perf_cuda_t *g);
int perf_cuda_gpu(const perf_cuda_t *g);
int perf_cuda_have_nccl(const perf_cuda_t *g);
/* "NVIDIA H200 (0000:19:00.0)" for the header. */
void perf_cuda_describe(const perf_cuda_t *g, char *buf, size_t len);
/* Host <-> the device buffer (synchronous). */
int perf_cuda_upload(perf_cuda_t *g, const void *host, size_t len);
int perf_cuda_download(perf_cuda_t *g, void *host, size_t len);
/* iters windows of `window` transfers of len bytes in flight, then one
 * completion wait; from_rank0: data moves rank 0 -> rank 1 (else 1 -> 0).
 * Plain: rank 0 copies on one stream (rank 1 idle), waits with one stream
 * sync per window. NCCL: ncclSend/ncclRecv on one stream each, plus a
 * 1-byte ack back per window, one stream sync per window. Returns rank 0's
 * seconds (both ranks), < 0 on error or when NCCL is absent. Both ranks
 * call; xchg brackets the timed part. */
double perf_cuda_plain_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters);
double perf_cuda_nccl_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters);
/* The plain copy, told (two-sided send/recv's reference): as
 * perf_cuda_plain_window, and after each window's stream sync rank 0 tells
 * rank 1 through a flag in shared host memory, and rank 1 acks through
 * another that rank 0 waits for: the copy plus the one notification and ack
 * that uccl_perf's send loop needs (its receiver acks every window). Both
 * ranks call; < 0 when the flags could not be shared (another host) or a
 * peer stayed silent for 60 s. */
double perf_cuda_told_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters);
void perf_cuda_teardown(perf_cuda_t *g);

#endif

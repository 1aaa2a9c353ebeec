/* GPU reference measurements for uccl_perf --mem cuda: a plain single-stream
 * cudaMemcpyAsync between the same IPC-mapped buffers, and NCCL send/recv
 * when libnccl.so.2 can be dlopen'ed. */
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

#endif

/* gpu_ipc's held-back copies (ipc.h, "Batching"): collected while a window
 * is posted, issued together on stream 0 at the next progress: one
 * cudaMemcpyBatchAsync, or with BATCH_SM one launch of the copy kernel. */
#include "tp/gpu_ipc/ipc.h"

_Static_assert(IPC_BATCH_MAX <= UCCL_GPU_SM_BATCH_MAX, "a full batch must fit one batch kernel");

/* One H200, two processes on GPU 0 (tests/gpu/results/1xH200-gpu10): every
 * copy of a cudaMemcpyBatchAsync still costs the CPU 3.5-4.5 us, as a copy
 * of its own does, and below 16 MiB that CPU time sets the pace of a
 * window. A kernel launch costs about one such call whatever it copies. */
static bool kernel_wanted(const ipc_tp_t *tp, const ipc_batch_t *b)
{
    return tp->batch_sm_on && !b->cross && b->n >= tp->cfg.batch_sm &&
           uccl_gpu_sm_batch_args_ok(b->dst, b->src, (size_t)b->n, tp->cfg.batch_sm_blocks);
}

/* Held for the batch kernel, 16-32 MiB copies ran at 1.15-1.49x a plain
 * copy, issued one by one on the copy engines at 0.88-1.00 (window 16, one
 * H200: tests/gpu/results/1xH200-gpu13, call 2): with the kernel, copies
 * within the GPU are held up to BATCH_SM_MAX. */
size_t uccl_gpu_ipc_batch_limit(const ipc_tp_t *tp, bool cross)
{
    if (tp->cfg.batch_max == 0 || cross || !tp->batch_sm_on || tp->cfg.batch_sm_max < tp->cfg.batch_max)
        return tp->cfg.batch_max;
    return tp->cfg.batch_sm_max;
}

uccl_status_t uccl_gpu_ipc_batch_flush(ipc_tp_t *tp)
{
    ipc_batch_t *b = &tp->batch;
    uccl_status_t st;
    uint64_t t0;

    if (b->n == 0)
        return UCCL_OK;
    uccl_gpu_ipc_quiet_record(tp); /* its event goes before these copies */
    t0 = IPC_PROF_T0(tp->cfg.prof);
    if (kernel_wanted(tp, b)) {
        st = uccl_gpu_sm_copy_batch_async(tp->device, b->dst, b->src, b->len, (size_t)b->n,
                                          tp->cfg.batch_sm_blocks, tp->streams[0]);
        IPC_PROF_ADD(&tp->prof, IPC_PROF_SM_BATCH, t0, (uint64_t)b->n);
        IPC_PROF_ADD(&tp->prof, IPC_PROF_SM_LAUNCH, t0, 1); /* copies per launch: the two rows */
    } else {
        if (b->n == 1 && tp->cfg.dtod)
            st = uccl_gpu_memcpy_dtod_async(b->dst[0], b->src[0], b->len[0], tp->streams[0]);
        else
            st = uccl_gpu_memcpy_batch_async(b->dst, b->src, b->len, (size_t)b->n, tp->streams[0]);
        IPC_PROF_ADD(&tp->prof, IPC_PROF_BATCH, t0, (uint64_t)b->n);
    }
    b->n = 0;
    b->cross = false;
    return st;
}

static bool overlap(const char *a, size_t alen, const char *b, size_t blen)
{
    return a < b + blen && b < a + alen;
}

/* Would dst <- src run wrongly unordered with a held-back copy? The same
 * copy twice gives the same bytes in either order; anything else that
 * writes what another reads or writes needs the order. */
static bool batch_conflict(const ipc_batch_t *b, const char *dst, const char *src, size_t len)
{
    for (int i = 0; i < b->n; i++) {
        const char *d = b->dst[i], *s = b->src[i];
        size_t n = b->len[i];

        if (d == dst && s == src && n == len)
            continue;
        if (overlap(dst, len, d, n) || overlap(dst, len, s, n) || overlap(src, len, d, n))
            return true;
    }
    return false;
}

uccl_status_t uccl_gpu_ipc_batch_add(ipc_tp_t *tp, char *dst, const char *src, size_t len, bool cross)
{
    ipc_batch_t *b = &tp->batch;

    if (b->n == IPC_BATCH_MAX || batch_conflict(b, dst, src, len)) {
        uccl_status_t st = uccl_gpu_ipc_batch_flush(tp);
        if (st != UCCL_OK)
            return st;
    }
    b->dst[b->n] = dst;
    b->src[b->n] = src;
    b->len[b->n] = len;
    b->cross = b->cross || cross;
    b->n++;
    return UCCL_OK;
}

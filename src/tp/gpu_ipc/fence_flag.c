/* gpu_ipc flag fences (UCCL_GPU_IPC_FLAG_FENCE): when a fence whose copies
 * all went to stream 0 closes, the stream writes the next value of a
 * counter into a word of pinned host memory after them (a stream memory
 * operation, cuStreamWriteValue64, which orders the copies' writes before
 * it), and progress reads that word to learn that the fence passed.
 *
 * Why: on one H200 a cudaEventQuery or cudaStreamQuery that finds the work
 * done costs the CPU 1.5-1.9 us and one that finds it running 0.2-0.5 us
 * (tests/gpu/results/1xH200-gpu10); a read of the word costs nanoseconds.
 * Every transfer waited for pays one done query (window 1 pays it per
 * transfer, on the critical path), and a window pays one per fence. The
 * write costs about what an event record does.
 *
 * Fences are closed in order on stream 0, so the word only grows; a fence
 * passed once the word reached its value. A fault stops a CUDA context, so
 * a write behind a failed copy never comes: every IPC_FLAG_CHECK reads that
 * find the word short, the stream is queried, and an error fails the fence
 * while an idle stream passes it. The fake backend runs a write behind a
 * failed copy (its faults do not stop the stream), so its fault tests
 * (t_gpu_fault) fail with flag fences on.
 *
 * Measured (4x H200, tests/gpu/results/4xH200-gpu11): slower than events
 * and stream queries at window 1 (write 0.03-0.07 below main on one GPU and
 * GPU 0 -> GPU 1) and no better at window 16, so off by default; kept as a
 * setting with its profile rows for later tuning. */
#include "tp/gpu_ipc/ipc.h"
#include "util/log.h"

#define IPC_FLAG_CHECK 1024

/* At open, with the device current: the word, when flag fences are on.
 * Without it (no mapped host memory) fences use events as before. */
void uccl_gpu_ipc_flag_init(ipc_tp_t *tp)
{
    uint32_t *host = NULL;
    void *dev = NULL;
    uccl_status_t st;

    if (!tp->cfg.flag_fence)
        return;
    st = uccl_gpu_flags_alloc(2, &host, &dev); /* page (fake: malloc) aligned: one 64-bit word */
    if (st != UCCL_OK) {
        uccl_info("gpu_ipc: no flag fences (mapped host memory: %s); events instead",
                  uccl_status_name(st));
        return;
    }
    tp->flag_host = (uint64_t *)(void *)host;
    tp->flag_dev = dev;
    tp->flag_seq = 0;
}

/* At close, after the streams were synchronized. */
void uccl_gpu_ipc_flag_fini(ipc_tp_t *tp)
{
    if (tp->flag_host != NULL)
        uccl_gpu_flags_free((uint32_t *)(void *)tp->flag_host);
    tp->flag_host = NULL;
    tp->flag_dev = NULL;
}

/* Closing f (copies on stream 0 only, all issued): make it a flag fence.
 * false: not on, or the write was refused (then never again: events). */
bool uccl_gpu_ipc_flag_mark(ipc_tp_t *tp, ipc_fence_t *f)
{
    uint64_t t0;
    uccl_status_t st;

    if (tp->flag_host == NULL || tp->flag_off)
        return false;
    t0 = IPC_PROF_T0(tp->cfg.prof);
    st = uccl_gpu_stream_write(tp->streams[0], tp->flag_dev, tp->flag_seq + 1, 8);
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_WRITE, t0, 1);
    if (st != UCCL_OK) {
        uccl_info("gpu_ipc: stream write refused (%s): fences use events from now on",
                  uccl_status_name(st));
        tp->flag_off = true;
        return false;
    }
    f->flag = ++tp->flag_seq;
    return true;
}

/* Has flag fence f passed? Then f->flag is 0 (f->status set on an error). */
bool uccl_gpu_ipc_flag_passed(ipc_tp_t *tp, ipc_fence_t *f)
{
    uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);
    uint64_t v = __atomic_load_n(tp->flag_host, __ATOMIC_ACQUIRE);
    uccl_status_t st;

    if ((int64_t)(v - f->flag) >= 0) {
        IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_DONE, t0, 1);
        f->flag = 0;
        return true;
    }
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_BUSY, t0, 1);
    if (++tp->flag_polls % IPC_FLAG_CHECK != 0) {
        uccl_gpu_flags_poll(); /* the fake device runs its streams; nothing on a GPU */
        return false;
    }
    st = uccl_gpu_stream_query(tp->streams[0]);
    if (st == UCCL_INPROGRESS)
        return false;
    if (st != UCCL_OK) /* the write will not come: a fault stopped the stream */
        f->status = UCCL_ERR_TRANSPORT;
    f->flag = 0;
    return true;
}

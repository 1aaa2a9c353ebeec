/* gpu_ipc fences told by a host word (UCCL_GPU_IPC_FLAG_DONE): a fence whose
 * copies all went to stream 0 queues, after them, a stream write of its
 * number into a word of mapped host memory (cuStreamWriteValue32), and
 * progress reads that word instead of asking the driver.
 *
 * Why: a cudaStreamQuery or cudaEventQuery that says done costs the CPU
 * 1.5-2 us on the H200 hosts (0.2-0.5 us while busy), and a transfer waited
 * for alone (a window of 1) pays one each (tests/gpu/results/1xH200-gpu10).
 * A load of the host word costs nothing; the stream write costs one driver
 * call, queued while the copy runs. Fence numbers increase in stream 0's
 * order; fence n writes n into word n % IPC_FLAG_SLOTS of the engine's,
 * compared cyclically (numbers wrap): a word at n or past it says fence n
 * passed, since a later number there was written after n in stream order.
 *
 * A copy fault loses the GPU context on CUDA and the write never lands:
 * every IPC_FLAG_CHECK_POLLS reads of a word not there yet, stream 0 is queried
 * too, and its error fails the fence (as an event's would). A word of its
 * own per fence keeps a later fence's write from passing a failed one where
 * the stream goes on after a fault (the fake GPU's injected faults).
 *
 * Within one GPU only (two processes on it, a process with itself): a fence
 * with a copy to or from another GPU takes the event path. Session 11 tried
 * the same (a 64-bit counter) on a 4x H200 host and measured it slower at
 * window 1, by 0.6-0.75 us a transfer between two GPUs and 0.1-0.3 us on one
 * (tests/gpu/results/4xH200-gpu11); on the one-H200 machine of session 14 it
 * was 1-2 us faster on one GPU (write 0.95-1.03x the copy against
 * 0.86-0.97, three calls: tests/gpu/results/1xH200-gpu14). Two GPUs were not
 * measured again.
 *
 * One flagged fence at a time: a fence closed while another is in flight
 * takes the event path (LAZY_EVENT: none until a copy follows it, then a
 * 0.3 us record). The stream write costs the CPU 1-1.5 us, a completed
 * query 1.5-2 us: a receiver whose window of sends arrives over several
 * progress calls closes a fence in each, and a write for each can cost
 * more than the events (send, window 16: tests/gpu/results/1xH200-gpu14).
 * And only fences of at most FLAG_DONE transfers (default 1: a transfer
 * waited for alone, where the query's cost is not shared): one H200, two
 * processes, window 1, send 0.85-0.99x a plain copy with 1 against
 * 0.83-0.87 with every fence flagged and 0.68-0.83 with none; write and
 * window 16 the same within noise (tests/gpu/results/1xH200-s14-flag). */
#include "tp/gpu_ipc/ipc.h"

void uccl_gpu_ipc_flag_setup(ipc_tp_t *tp)
{
    if (!tp->cfg.flag_done || tp->flag_host != NULL)
        return;
    /* at open, never in progress: a pinned allocation may wait for the device */
    if (uccl_gpu_flags_alloc(IPC_FLAG_SLOTS, &tp->flag_host, &tp->flag_dev) != UCCL_OK) {
        tp->flag_host = NULL;
        uccl_info("gpu_ipc: FLAG_DONE: no mapped host word here: fences are queried");
        return;
    }
    if (tp->cfg.flag_kernel_max > 0 && tp->batch_sm_on &&
        (uccl_gpu_malloc((void **)&tp->flag_count, sizeof(uint32_t)) != UCCL_OK ||
         uccl_gpu_memset(tp->flag_count, 0, sizeof(uint32_t)) != UCCL_OK)) {
        if (tp->flag_count != NULL)
            uccl_gpu_free(tp->flag_count);
        tp->flag_count = NULL;
        uccl_info("gpu_ipc: FLAG_KERNEL_MAX: no device word for the kernel: copies and writes");
    }
}

void uccl_gpu_ipc_flag_close(ipc_tp_t *tp)
{
    if (tp->flag_count != NULL)
        uccl_gpu_free(tp->flag_count);
    tp->flag_count = NULL;
    if (tp->flag_host != NULL)
        uccl_gpu_flags_free(tp->flag_host);
    tp->flag_host = NULL;
    tp->flag_dev = NULL;
}

/* May f be told by the word? Its copies all on stream 0, within this GPU,
 * at most FLAG_DONE ops, no other flagged fence in flight. */
static bool flag_ok(const ipc_tp_t *tp, const ipc_fence_t *f)
{
    return tp->flag_host != NULL && f->streams == 1u && !f->cross && tp->flag_inflight == 0 &&
           f->refs <= tp->cfg.flag_done;
}

/* Where f's number goes: the word its one pull's sender waits on (done.c:
 * the send's number + 1), else the next number into the engine's own. A
 * fence already failed (its batch refused) writes no sender's word: its op
 * fails, and its sender must hear that by FIN, not see the word land. */
static char *flag_word(const ipc_tp_t *tp, ipc_fence_t *f, uint32_t *seq)
{
    if (f->status != UCCL_OK) {
        f->done_dev = NULL;
        f->done_host = NULL;
        f->done_op = NULL;
    }
    if (f->done_dev != NULL) {
        *seq = f->done_value;
        return f->done_dev;
    }
    *seq = tp->flag_seq + 1;
    return (char *)tp->flag_dev + (*seq % IPC_FLAG_SLOTS) * sizeof(uint32_t);
}

static void flag_mark(ipc_tp_t *tp, ipc_fence_t *f, uint32_t seq)
{
    if (f->done_dev != NULL) { /* its op's FIN is left out unless the op fails */
        uint64_t t0 = IPC_PROF_T0(tp->cfg.prof); /* (a count: the write's time is its own row's) */

        f->done_op->done_told = true;
        IPC_PROF_ADD(&tp->prof, IPC_PROF_PEER_WORD, t0, 1);
    } else {
        tp->flag_seq = seq;
    }
    tp->flag_inflight++;
    f->flagged = true;
    f->flag_seq = seq;
    f->flag_polls = 0;
}

bool uccl_gpu_ipc_flag_fence(ipc_tp_t *tp, ipc_fence_t *f)
{
    uint32_t seq;
    char *word = flag_word(tp, f, &seq);
    uint64_t t0;
    uccl_status_t st;

    if (!flag_ok(tp, f))
        return false;
    t0 = IPC_PROF_T0(tp->cfg.prof);
    st = uccl_gpu_stream_write(tp->streams[0], word, seq, sizeof(uint32_t));
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_WRITE, t0, 1);
    if (st != UCCL_OK)
        return false; /* (logged) the fence records its event instead */
    flag_mark(tp, f, seq);
    return true;
}

/* The copy-engine copy costs the CPU about 4.4 us and the stream write
 * 1-1.5 us more (one H200, tests/gpu/results/1xH200-gpu14); a kernel launch
 * costs about what the copy does and writes the word itself at its end
 * (its last block to finish: tp->flag_count; a block per 64 KiB, at most
 * BATCH_SM_BLOCKS), up to FLAG_KERNEL_MAX. A fault in the copy stops the stream before the word:
 * flag_passed's every-IPC_FLAG_CHECK_POLLS query fails the fence. */
bool uccl_gpu_ipc_flag_kernel(ipc_tp_t *tp, ipc_fence_t *f)
{
    ipc_batch_t *b = &tp->batch;
    uint32_t seq;
    char *word = flag_word(tp, f, &seq);
    uint64_t t0;
    uccl_status_t st;

    if (tp->flag_count == NULL || b->n != 1 || b->cross || b->len[0] > tp->cfg.flag_kernel_max ||
        !flag_ok(tp, f) || !uccl_gpu_sm_copy_args_ok(b->dst[0], b->src[0], 1, 8))
        return false;
    uccl_gpu_ipc_quiet_record(tp); /* its event goes before this copy (as batch_flush's) */
    t0 = IPC_PROF_T0(tp->cfg.prof);
    st = uccl_gpu_sm_copy_flag_async(tp->device, b->dst[0], b->src[0], b->len[0], tp->cfg.batch_sm_blocks,
                                     tp->flag_count, word, seq, tp->streams[0]);
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_KERNEL, t0, 1);
    if (st != UCCL_OK)
        return false; /* (logged) the batch goes by the copy engines */
    b->n = 0;
    flag_mark(tp, f, seq);
    return true;
}

static bool flag_clear(ipc_tp_t *tp, ipc_fence_t *f)
{
    f->flagged = false;
    tp->flag_inflight--;
    return true;
}

bool uccl_gpu_ipc_flag_passed(ipc_tp_t *tp, ipc_fence_t *f)
{
    const uint32_t *word = f->done_host != NULL ? f->done_host : &tp->flag_host[f->flag_seq % IPC_FLAG_SLOTS];
    uint32_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    uccl_status_t st;
    uint64_t t0;

    if ((int32_t)(now - f->flag_seq) >= 0)
        return flag_clear(tp, f);
    if (++f->flag_polls % IPC_FLAG_CHECK_POLLS != 0) {
        uccl_gpu_flags_poll(); /* the fake backend runs its streams here */
        return false;
    }
    t0 = IPC_PROF_T0(tp->cfg.prof);
    st = uccl_gpu_stream_query(tp->streams[0]);
    IPC_PROF_ADD(&tp->prof, IPC_PROF_FLAG_CHECK, t0, 1);
    if (st == UCCL_INPROGRESS)
        return false;
    /* done or failed: a done stream has written the word (stream order).
     * A sender's word that landed is what its sender saw: the op is done
     * (a FIN now would name a send already complete) */
    now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if ((int32_t)(now - f->flag_seq) < 0 || (st != UCCL_OK && f->done_host == NULL))
        f->status = UCCL_ERR_TRANSPORT;
    return flag_clear(tp, f);
}

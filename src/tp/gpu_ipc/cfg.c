/* gpu_ipc settings (UCCL_GPU_IPC_*): the one config table, with the
 * measurements behind each default, and the checks engine creation makes. */
#include "tp/gpu_ipc/ipc.h"

static const uccl_cfg_field_t ipc_cfg_fields[] = {
    {"STREAMS", "4", "copy streams per engine; copies of at least STREAM_SPLIT_MIN bytes are cut over all of them",
     offsetof(ipc_cfg_t, streams), UCCL_CFG_INT},
    /* Off by default: on 2x H200 (NVLink) a 16 MiB copy cut over 4 streams
     * ran at 0.81x a single-stream cudaMemcpyAsync, unsplit copies at 0.97x+. */
    {"STREAM_SPLIT_MIN", "0", "copies at least this large are split across the streams (0 = never split)",
     offsetof(ipc_cfg_t, stream_split_min), UCCL_CFG_SIZE},
    /* 2x H200 (NVLink), send/recv window 16, x the plain push copy, pull vs
     * push (same run): 1 MiB 0.79 vs 0.90, 2 MiB 0.80 vs 0.93, 4 MiB 0.89 vs
     * 0.96, 8 MiB 0.94 vs 0.98; 512 KiB 0.76 vs 0.74 and 256 KiB 0.75 vs
     * 0.59. A later run: 512 KiB 0.77 vs 0.88, 256 KiB 0.73 vs 0.75. So push
     * from 512 KiB, where the two runs disagree, and pull below. */
    {"PUSH_MIN", "512K",
     "messages at least this large go to a receive in GPU memory by a sender-side copy after the "
     "receiver's clear-to-send; smaller ones are pulled by the receiver (0 = always pull)",
     offsetof(ipc_cfg_t, push_min), UCCL_CFG_SIZE},
    {"SPLIT_PCT", "50",
     "percent of a pushed message (see PUSH_MIN) that the receiver copies (pulls) itself while the "
     "sender pushes the rest, so both GPUs' copy engines work (0 = the sender pushes it all); "
     "as UCCL_SHM_SPLIT_PCT",
     offsetof(ipc_cfg_t, split_pct), UCCL_CFG_INT},
    /* 2x H200, np 2, blocking allgather / alltoall, both directions busy
     * (tests/gpu/results/2xH200-mgpu17): the clear-to-send hop and a second
     * copy launch on each side cost 4-8 us a call at 1-16 MiB received (2 MiB
     * allgather: 20.0 / 19.3 us pulled whole, 26.9 split), and each GPU's
     * copy engines already run its own pull; 64-256 MiB: 0.96-1.00x main */
    {"DUPLEX_PULL_MAX", "4G",
     "a message of at most this size arriving while this process has a send of its own to the same "
     "peer in flight (an exchange: both directions busy) is pulled whole by the receiver (no "
     "clear-to-send, no push, no split; see PUSH_MIN); 0 = every message by PUSH_MIN",
     offsetof(ipc_cfg_t, duplex_pull_max), UCCL_CFG_SIZE},
    /* One H200 VM, two processes on GPU 0, window 16, ratio to a plain
     * cudaMemcpyAsync in the same job (tests/gpu/results/1xH200-p2p): a
     * copy costs the CPU about 4 us whatever its size (b_copy_cost), and a
     * batch saves about 0.3 us of it; below 16 MiB the CPU sets the pace.
     * 0 (each copy at once): write 0.83-0.97 up to 8 MiB; 4M: 0.93-1.06 up
     * to 2 MiB, 0.80-0.88 at 4-8 MiB; 16M: 0.88-1.04 up to 8 MiB (read and
     * send alike). 16 MiB and up is the GPU's pace: not held back. */
    {"BATCH_MAX", "16M",
     "copies smaller than this are held back and issued together (one cudaMemcpyBatchAsync) at the "
     "next progress, so that a window of small transfers costs the CPU one call, not one each "
     "(0 = every copy is issued when posted)",
     offsetof(ipc_cfg_t, batch_max), UCCL_CFG_SIZE},
    /* 2x H200, GPU0 -> GPU1, window 16, two rounds (tests/gpu/results/2xH200-s11):
     * 512K: write 0.98-0.99x a plain copy at 512 KiB-1 MiB, send 0.91-0.96x;
     * 2M: write 1.26-1.45x, send 1.02-1.20x there; 2 MiB and up the same either way */
    {"BATCH_CROSS", "2M",
     "between two different GPUs, only transfers smaller than this are held back for a batch (see "
     "BATCH_MAX); larger ones are issued when posted (0 = none is batched across GPUs)",
     offsetof(ipc_cfg_t, batch_cross), UCCL_CFG_SIZE},
    /* a batch kernel: one launch for a whole held-back batch (the CPU pays
     * one call, not one per copy). 4x H200 host, two processes on GPU 0,
     * window 16, x a plain cudaMemcpyAsync in the same job
     * (tests/gpu/results/1xH200-gpu13): 0 (the copy engines) 0.70-1.06 by
     * round at 4 KiB-8 MiB; 2: 1.32-4.48 there (write, read, send). A single
     * copy by kernel (1) is no faster than the copy engines at window 1. */
    {"BATCH_SM", "2",
     "a held-back batch (see BATCH_MAX) of at least this many copies, all within this engine's GPU and "
     "16-byte aligned, goes as one launch of a copy kernel instead of copy-engine copies (0 = never)",
     offsetof(ipc_cfg_t, batch_sm), UCCL_CFG_INT},
    /* same host, GPU 0, window 16, x a plain copy: 16 MiB 1.15-1.26 and
     * 32 MiB 1.39-1.49 held for the kernel (64M) against 0.88-1.00 not */
    {"BATCH_SM_MAX", "64M",
     "with the batch kernel (see BATCH_SM), copies within this engine's GPU smaller than this are held "
     "back for it (BATCH_MAX still bounds the others; below BATCH_MAX it has no effect)",
     offsetof(ipc_cfg_t, batch_sm_max), UCCL_CFG_SIZE},
    {"BATCH_SM_BLOCKS", "1024", "thread blocks (of 512 threads) of one batch kernel (see BATCH_SM), "
     "shared by its copies, 1..65535", offsetof(ipc_cfg_t, batch_sm_blocks), UCCL_CFG_INT},
    {"LAZY_EVENT", "1",
     "without FLAG_DONE (or where it has no host word), a fence whose copies all went to stream 0 is "
     "polled with cudaStreamQuery and records its event only when another copy follows it there "
     "(0 = an event per fence when it closes)",
     offsetof(ipc_cfg_t, lazy_event), UCCL_CFG_BOOL},
    /* one H200, two processes on GPU 0, window 16, 1-16 MiB send and write,
     * 20 rounds in one job each (tests/gpu/results/H200-py17): 4096 (never
     * within a window) ran at 0.993-1.007x 64, LAZY_EVENT=0 at 0.993-1.004x;
     * at 4 MiB one launch a window polled 22-23 times (PROF=1) */
    {"QUIET_POLLS", "64",
     "with LAZY_EVENT, an unrecorded fence whose stream stayed busy for this many queries gets its "
     "event recorded and polled from then on (a record while copies run costs the CPU 2.5-4.6 us, "
     "and a fence that ends meanwhile is seen done that much later); 1..2^30",
     offsetof(ipc_cfg_t, quiet_polls), UCCL_CFG_INT},
    {"FLAG_DONE", "1",
     "a fence of at most this many transfers whose copies all went to stream 0 queues a stream write "
     "of its number into a word of mapped host memory, and progress reads that word instead of "
     "querying the stream or an event (a completed query costs the CPU 1.5-2 us, the write 1-1.5 us; "
     "0 = never: query, see LAZY_EVENT; 1..4096)",
     offsetof(ipc_cfg_t, flag_done), UCCL_CFG_INT},
    /* one H200, two processes on GPU 0, window 1, x a plain copy, median
     * of 3 rounds (tests/gpu/results/1xH200-gpu14c, two calls): write
     * 1.03-1.09 at 4-32 KiB with the kernel against 0.94-1.00 without,
     * 0.99-1.00 / 0.97-1.02 at 64 KiB, 0.89-0.94 / 0.96-1.00 from 128 KiB
     * (call 1, every size by kernel); send 0.84-0.90 / 0.74-0.86 at
     * 4-64 KiB, 0.77-0.80 / 0.79-0.84 from 128 KiB; window 16: noise */
    {"FLAG_KERNEL_MAX", "64K",
     "a fence told by the host word (see FLAG_DONE) whose one copy is within this engine's GPU, 16-byte "
     "aligned and at most this many bytes goes as ONE launch of a copy kernel whose last block also "
     "writes the word, instead of a copy-engine copy and a stream write (needs the copy kernel, see "
     "BATCH_SM; 0 = never)",
     offsetof(ipc_cfg_t, flag_kernel_max), UCCL_CFG_SIZE},
    /* one H100, two processes on GPU 0, send at window 1, x a plain copy,
     * mean over 4 KiB-1 MiB of the medians of 3 rounds, three calls
     * (tests/gpu/results/1xH100-gpu15): 0.923 / 0.906 / 0.841 on, 0.892 /
     * 0.870 / 0.848 off. One H200, two processes, on against off, six jobs
     * each over two calls (tests/gpu/results/1xH200-s21): bcast x the copy
     * ceiling 0.88-0.93 / 0.80-0.89 at 4 MiB, median 0.914 / 0.857 at 16
     * MiB (the root's send ends one FIN hop sooner), 0.95-0.99 / 0.92-0.97
     * at 64 MiB;
     * send at window 1 (a ping-pong: the ack, not the FIN, ends a round)
     * 0.70-0.89 on / 0.85-1.01 off at 4 KiB-1 MiB: hence on from
     * PEER_DONE_MIN. A survivor's teardown of a dead peer's registered page
     * while its streams wait (done.c's done_orphans) passed
     * t_gpu_stream_kill 3 of 3 (tests/gpu/results/1xH200-s17-lead) */
    {"PEER_DONE", "1",
     "a message of at least PEER_DONE_MIN bytes that the receiver pulls under a fence told by a host "
     "word (see FLAG_DONE) has the receiver's GPU write that word into the sender's mailbox, so that "
     "the sender sees its send done without the receiver's FIN (which is then sent only on failure, "
     "or where the word cannot be used); 0 = FIN always. A dead peer's word page is unregistered "
     "only once this engine's streams have passed its stream-ordered calls",
     offsetof(ipc_cfg_t, peer_done), UCCL_CFG_BOOL},
    {"PEER_DONE_MIN", "4M",
     "PEER_DONE applies to sends of at least this many bytes (0 = every send); smaller ones end with "
     "the receiver's FIN",
     offsetof(ipc_cfg_t, peer_done_min), UCCL_CFG_SIZE},
    {"DTOD", "1",
     "issue device-to-device copies with the driver's cuMemcpyDtoDAsync instead of the runtime's "
     "cudaMemcpyAsync (0 = the runtime's)",
     offsetof(ipc_cfg_t, dtod), UCCL_CFG_BOOL},
    /* copies between two GPUs: the copy engines reach only about 200 GB/s
     * busbw when 4 GPUs all send and receive at once (tests/gpu/results/4xH200);
     * a copy kernel over the IPC mapping moves the bytes with the SMs */
    {"COPY", "auto",
     "how copies between two different GPUs (device memory on both sides) are issued: ce = the copy "
     "engines (cudaMemcpyAsync), sm = a copy kernel of SM_BLOCKS blocks for copies of at least SM_MIN "
     "bytes (engine creation fails where the build or driver has no kernel), auto = once the engine "
     "is connected to 2 or more other GPUs (and has a kernel), transfers of at least SM_AUTO_MIN by "
     "the kernel on a stream per peer GPU, messages pulled whole by the receiver; else the copy "
     "engines; copies within one GPU always use the copy engines",
     offsetof(ipc_cfg_t, copy), UCCL_CFG_STRING},
    /* 4x H200, GPU0 -> GPU1 write window 16: the kernel ran at 0.57-0.75x
     * the batched copy-engine path at 64-256 KiB (a launch each, no batch) */
    {"SM_MIN", "512K", "copies between two GPUs of at least this many bytes use the copy kernel (see COPY)",
     offsetof(ipc_cfg_t, sm_min), UCCL_CFG_SIZE},
    {"SM_PULL", "0",
     "the copy kernel (see COPY) also does copies that read the other GPU's memory (receives pulling, "
     "reads); 0 = only copies that write it (pushes, writes), the others use the copy engines",
     offsetof(ipc_cfg_t, sm_pull), UCCL_CFG_BOOL},
    {"SM_STREAMS", "0",
     "the copies of an op that uses the copy kernel go to a stream of the peer GPU's own (1 + its "
     "index among the other GPUs modulo STREAMS-1), so that kernels to different GPUs run at once; "
     "copies on different streams are not ordered with each other (0 = stream 0, as every copy)",
     offsetof(ipc_cfg_t, sm_streams), UCCL_CFG_BOOL},
    {"SM_BLOCKS", "32", "thread blocks (of 512 threads) of one copy kernel (see COPY), 1..1024",
     offsetof(ipc_cfg_t, sm_blocks), UCCL_CFG_INT},
    {"SM_UNROLL", "4", "16-byte words each thread of the copy kernel (see COPY) has in flight: 4 or 8",
     offsetof(ipc_cfg_t, sm_unroll), UCCL_CFG_INT},
    /* 4x H200, kernel pulls x the copy engines: alltoall 1.11 at 512 KiB a
     * message, 1.23 at 1 MiB (tests/gpu/results/4xH200-s12) */
    {"SM_AUTO_MIN", "512K",
     "COPY=auto: transfers between two GPUs of at least this size use the copy kernel once the engine "
     "is connected to 2 or more other GPUs (0 = auto never uses it)",
     offsetof(ipc_cfg_t, sm_auto_min), UCCL_CFG_SIZE},
    {"PROF", "0",
     "measure the host time of each step of the transport and print it to stderr when the engine "
     "closes (a micro profile for tuning; 0 = off)",
     offsetof(ipc_cfg_t, prof), UCCL_CFG_BOOL},
    {NULL, NULL, NULL, 0, 0},
};

/* Renamed: the split knob has one name in every transport (SPLIT_PCT, as
 * shm's), and SPLIT_MIN (streams) no longer reads like its threshold. The
 * old names work for one release. */
static const uccl_cfg_alias_t ipc_cfg_aliases[] = {
    {"GPU_IPC_PULL_SHARE", "SPLIT_PCT"},
    {"GPU_IPC_SPLIT_MIN", "STREAM_SPLIT_MIN"},
    {NULL, NULL},
};

const uccl_cfg_table_t uccl_gpu_ipc_cfg_table = {.prefix = "GPU_IPC_",
                                               .fields = ipc_cfg_fields,
                                               .struct_size = sizeof(ipc_cfg_t),
                                               .aliases = ipc_cfg_aliases};

static bool unroll_ok(int unroll)
{
    if (unroll == 4 || unroll == 8)
        return true;
    uccl_error("UCCL_GPU_IPC_SM_UNROLL=%d: not 4 or 8", unroll);
    return false;
}

uccl_status_t uccl_gpu_ipc_cfg_load(ipc_cfg_t *cfg)
{
    const uccl_cfg_table_t *t = &uccl_gpu_ipc_cfg_table;
    uccl_status_t st = uccl_cfg_parse(t, cfg);

    if (st != UCCL_OK)
        return st;
    if (!uccl_cfg_in_range(t, "STREAMS", cfg->streams, 1, IPC_STREAMS_MAX) ||
        !uccl_cfg_in_range(t, "SPLIT_PCT", cfg->split_pct, 0, 100) ||
        !uccl_cfg_in_range(t, "SM_BLOCKS", cfg->sm_blocks, 1, 1024) ||
        !uccl_cfg_in_range(t, "BATCH_SM", cfg->batch_sm, 0, IPC_BATCH_MAX) ||
        !uccl_cfg_in_range(t, "BATCH_SM_BLOCKS", cfg->batch_sm_blocks, 1, 65535) ||
        !uccl_cfg_in_range(t, "FLAG_DONE", cfg->flag_done, 0, 4096) ||
        !uccl_cfg_in_range(t, "QUIET_POLLS", cfg->quiet_polls, 1, 1 << 30) ||
        !uccl_cfg_in_range(t, "SM_UNROLL", cfg->sm_unroll, 4, 8) || !unroll_ok(cfg->sm_unroll) ||
        uccl_gpu_ipc_copy_mode(cfg) < 0)
        return UCCL_ERR_INVALID_PARAM;
    return UCCL_OK;
}

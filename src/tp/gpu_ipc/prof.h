/* gpu_ipc micro profile (UCCL_GPU_IPC_PROF=1, off by default): host
 * nanoseconds spent in each step of the transport, summed per engine and
 * printed to stderr when the engine closes. It is there to find what the
 * CPU pays per transfer below a few MiB, where the CPU that posts copies,
 * not the GPU, sets the pace (tests/gpu/results/1xH200-gpu10). Off, each
 * step costs a test of one flag. */
#ifndef UCCL_TP_GPU_IPC_PROF_H
#define UCCL_TP_GPU_IPC_PROF_H

#include <stdint.h>

#include "util/sys.h"

enum {
    IPC_PROF_POST,       /* post_send / post_write / post_read, whole */
    IPC_PROF_GAP,        /* end of one post to the start of the next (< 50 us): the caller and the core */
    IPC_PROF_COPY,       /* one uccl_gpu_memcpy_async */
    IPC_PROF_BATCH,      /* uccl_gpu_memcpy_batch_async; counted per copy */
    IPC_PROF_RECORD,     /* uccl_gpu_event_record of a fence */
    IPC_PROF_QUERY_BUSY, /* uccl_gpu_event_query that said not yet */
    IPC_PROF_QUERY_DONE, /* uccl_gpu_event_query that said done */
    IPC_PROF_SQUERY_BUSY, /* uccl_gpu_stream_query of an unrecorded fence that said not yet */
    IPC_PROF_SQUERY_DONE, /* the same, done */
    IPC_PROF_MSG,        /* uccl_gpu_ipc_send_msg (a control message) */
    IPC_PROF_RX,         /* a control message handled (parse + dispatch) */
    IPC_PROF_FINISH,     /* an op finished: its fence let go, its request completed */
    IPC_PROF_PROGRESS,   /* one progress call of the transport, whole */
    IPC_PROF_SM,         /* one uccl_gpu_sm_copy_async (a copy kernel, UCCL_GPU_IPC_COPY) */
    IPC_PROF_SM_BATCH,   /* uccl_gpu_sm_copy_batch_async (UCCL_GPU_IPC_BATCH_SM); counted per copy */
    IPC_PROF_FLAG_WRITE, /* the stream write of a fence's number (UCCL_GPU_IPC_FLAG_DONE) */
    IPC_PROF_FLAG_CHECK, /* a stream query while a fence's number is late (FLAG_DONE) */
    IPC_PROF_FLAG_KERNEL, /* a fence's copy and its number by one kernel launch (FLAG_KERNEL_MAX) */
    IPC_PROF_PEER_DONE,  /* a send completed by the word the receiver's GPU wrote (PEER_DONE), sender side */
    IPC_PROF_PEER_WORD,  /* a fence that writes a sender's word (PEER_DONE), receiver side */
    IPC_PROF_QUIET_RECORD, /* an unrecorded fence's event recorded after QUIET_POLLS busy queries */
    IPC_PROF_SM_LAUNCH,  /* uccl_gpu_sm_copy_batch_async, counted per launch (copies: SM_BATCH) */
    IPC_PROF_N
};

typedef struct ipc_prof {
    uint64_t ns[IPC_PROF_N], n[IPC_PROF_N];
    uint64_t last_post_end;
} ipc_prof_t;

/* A start time when profiling (on), else 0. */
#define IPC_PROF_T0(on) ((on) ? uccl_time_ns() : 0)
/* Adds the time since t0 (not 0) to step, counting cnt calls. */
#define IPC_PROF_ADD(p, step, t0, cnt)                                                             \
    do {                                                                                           \
        if ((t0) != 0) {                                                                           \
            (p)->ns[step] += uccl_time_ns() - (t0);                                       \
            (p)->n[step] += (cnt);                                                                 \
        }                                                                                          \
    } while (0)

#endif

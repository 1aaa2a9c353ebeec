/* libuccl: GPU stream ordering, part of the public API of uccl.h (which
 * includes this header; include either). Streams are a cudaStream_t or
 * hipStream_t passed as void *. */
#ifndef UCCL_UCCL_STREAM_H
#define UCCL_UCCL_STREAM_H

#include "uccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPU stream ordering (stream = a cudaStream_t or hipStream_t, as void *).
 * uccl_stream_event: a request that completes once the work queued on
 * stream before the call has run (an event recorded there, polled by
 * progress; the host never waits on the stream). A stream that has run
 * everything queued on it when asked (a stream query) gives a request
 * complete at once, without an event.
 * uccl_stream_hold: work queued on stream after the call waits until
 * uccl_stream_release(hold) (a stream-ordered wait on a host-mapped flag,
 * cuStreamWaitValue32); release frees the hold. Every hold must be
 * released: uccl_engine_destroy releases those left. An engine without a
 * progress thread runs a helper thread that drives its progress while any
 * hold is out (a hold is usually released by progress, and the held stream
 * blocks whoever synchronizes the device meanwhile); it ends with the last
 * hold.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_DEVICE (no GPU runtime),
 * UCCL_ERR_UNSUPPORTED (the driver lacks stream memory operations),
 * UCCL_ERR_BUSY (too many holds unreleased), UCCL_ERR_INVALID_HANDLE. */
typedef struct uccl_stream_hold uccl_stream_hold_t;
UCCL_API uccl_status_t uccl_stream_event(uccl_engine_t *engine, void *stream, uccl_req_t **req);
UCCL_API uccl_status_t uccl_stream_hold(uccl_engine_t *engine, void *stream,
                                        uccl_stream_hold_t **hold);
UCCL_API uccl_status_t uccl_stream_release(uccl_stream_hold_t *hold);

/* uccl_stream_query: whether stream has run everything queued on it so far
 * (a stream query on the engine's device, as uccl_stream_event makes
 * first): UCCL_OK when it has, UCCL_INPROGRESS when work is still queued,
 * else the error the stream reports. Nothing is recorded and no request
 * made: the cheap check before a host-side wait (uccl_stream_event when
 * this says UCCL_INPROGRESS). stream NULL asks the engine's own stream
 * instead (none of the caller's): its work in flight says UCCL_INPROGRESS,
 * and a fault that the runtime keeps for the whole context (CUDA's sticky
 * errors, e.g. a kernel's illegal address on any stream of the process)
 * comes back as its error (UCCL_ERR_IO, the runtime's text logged): how a
 * layer polling a host word that a faulted stream will never write learns
 * of the fault without touching a stream the caller may have destroyed.
 * Errors as uccl_stream_event's. */
UCCL_API uccl_status_t uccl_stream_query(uccl_engine_t *engine, void *stream);

/* Stream operations, enqueued on the caller's stream (a cudaStream_t or
 * hipStream_t as void *) from the calling thread: nothing waits on the
 * host, and no thread of the library takes part later. For layers that
 * move GPU memory in stream order over pointers of this process or peer
 * pointers mapped with uccl_rdesc_ptr (the stream-ordered collectives).
 * uccl_stream_copy: copy len bytes src -> dst in stream order (any memory
 * the GPU runtime can address: device, peer-mapped, registered host).
 * uccl_stream_write_value: in stream order, store value at addr (device
 * memory, this GPU's or peer-mapped; width 4 or 8 bytes, aligned) once the
 * work queued before it has run and its writes are visible.
 * uccl_stream_wait_value: work queued on stream after the call waits until
 * the word at addr is >= value, compared cyclically ((int32_t)(*addr -
 * value) >= 0, or int64_t for width 8), so sequence numbers may wrap. A
 * wait never times out by itself: whoever enqueues one must make sure the
 * value comes (a peer's stream, or the host writing it on failure).
 * Errors: UCCL_ERR_INVALID_HANDLE (engine), UCCL_ERR_INVALID_PARAM (NULL
 * stream or address, width, alignment), UCCL_ERR_NO_DEVICE (no GPU
 * runtime), UCCL_ERR_UNSUPPORTED (the driver lacks stream memory
 * operations), UCCL_ERR_IO. */
UCCL_API uccl_status_t uccl_stream_copy(uccl_engine_t *engine, void *stream, void *dst,
                                        const void *src, size_t len);
UCCL_API uccl_status_t uccl_stream_write_value(uccl_engine_t *engine, void *stream, void *addr,
                                               uint64_t value, size_t width);
UCCL_API uccl_status_t uccl_stream_wait_value(uccl_engine_t *engine, void *stream, const void *addr,
                                              uint64_t value, size_t width);

/* The three above in one call, fewer calls into the GPU runtime: ops[0..n)
 * enqueued on stream in array order, as the calls one by one would be. A
 * run of consecutive WRITE/WAIT ops is one batch of the driver
 * (cuStreamBatchMemOp where it has one; HIP: one call each). With flags
 * UCCL_STREAM_OPS_COPY_BATCH, a run of consecutive COPY ops is one batch
 * too (cudaMemcpyBatchAsync where the runtime has it): the run as a whole
 * is in stream order, its copies are not ordered among themselves, so
 * none may overlap another's destination or read one. Every op is checked
 * before any is enqueued (UCCL_ERR_INVALID_PARAM: kind, NULL, width,
 * alignment); a runtime failure later may leave the ops before it queued.
 * Other errors as the single calls. */
typedef enum uccl_stream_op_kind {
    UCCL_STREAM_OP_COPY = 1,  /* len bytes src -> addr */
    UCCL_STREAM_OP_WRITE = 2, /* store value at addr, width len (4 or 8) */
    UCCL_STREAM_OP_WAIT = 3,  /* later work waits until *addr >= value, cyclic, width len */
} uccl_stream_op_kind_t;
typedef struct uccl_stream_op {
    uccl_stream_op_kind_t kind;
    void *addr;      /* COPY: the destination; WRITE, WAIT: the word */
    const void *src; /* COPY only */
    size_t len;      /* COPY: bytes (0: nothing); WRITE, WAIT: the width */
    uint64_t value;  /* WRITE, WAIT */
} uccl_stream_op_t;
#define UCCL_STREAM_OPS_COPY_BATCH 1u
UCCL_API uccl_status_t uccl_stream_ops(uccl_engine_t *engine, void *stream, const uccl_stream_op_t *ops,
                                       size_t n, unsigned flags);

/* Stream words: one 32-bit word of page-locked host memory that a stream
 * writes (uccl_stream_write_value or a WRITE op, width 4, at *dev) and the
 * host reads at *host: the price of learning that a stream passed a point
 * is one op in a batch and a memory read, not an event.
 * uccl_stream_word_reached: 1 when (int32_t)(*host - value) >= 0 (a wrapping
 * sequence number), else 0. Free the word only once no stream can still
 * write it (uccl_stream_word_free waits for the device, as freeing
 * page-locked memory does). Errors: UCCL_ERR_INVALID_HANDLE,
 * UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_DEVICE, UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_stream_word_alloc(uccl_engine_t *engine, uint32_t **host, void **dev);
UCCL_API uccl_status_t uccl_stream_word_free(uccl_engine_t *engine, uint32_t *host);
UCCL_API int uccl_stream_word_reached(const uint32_t *host, uint32_t value);

#ifdef __cplusplus
}
#endif

#endif /* UCCL_UCCL_STREAM_H */

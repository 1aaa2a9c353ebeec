/* GPU runtime abstraction: the only door to CUDA or HIP. One backend
 * (cuda.c, hip.c or none.c) is chosen at configure time; nothing outside
 * src/gpu includes a vendor header. Every call logs the runtime's own error
 * text once where it fails and returns a uccl_status_t. */
#ifndef UCCL_GPU_GPU_H
#define UCCL_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "util/config.h"

typedef struct uccl_gpu_ptr_attr {
    uccl_mem_type_t type; /* UCCL_MEM_HOST for anything the runtime does not own */
    int device;           /* GPU ordinal, -1 for host */
    void *base;           /* start of the allocation holding the pointer */
    size_t size;          /* size of that allocation (0 when unknown) */
} uccl_gpu_ptr_attr_t;

/* Opaque IPC handle of one device allocation (cudaIpcMemHandle_t and
 * hipIpcMemHandle_t are both 64 bytes). */
#define UCCL_GPU_IPC_HANDLE_SIZE 64
typedef struct uccl_gpu_ipc_handle {
    uint8_t bytes[UCCL_GPU_IPC_HANDLE_SIZE];
} uccl_gpu_ipc_handle_t;

/* Opaque runtime objects (cudaStream_t / cudaEvent_t and the HIP twins). */
typedef struct uccl_gpu_stream *uccl_gpu_stream_t;
typedef struct uccl_gpu_event *uccl_gpu_event_t;

/* Longest PCI bus id string, "0000:19:00.0" plus room for the runtime's own. */
#define UCCL_GPU_BUS_ID_MAX 32

/* "cuda", "hip" or "none". */
const char *uccl_gpu_backend(void);
/* The backend's configuration table (the fake backend's UCCL_FAKE_GPU_*),
 * or NULL; core registers it with the others. */
const uccl_cfg_table_t *uccl_gpu_config_table(void);
/* Classify a pointer. Never fails for host pointers. */
uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr);
/* The type and device alone (base = ptr, size = 0): one runtime query, not
 * the allocation-range lookup too (uccl_copy_post's per-call question). */
uccl_status_t uccl_gpu_ptr_kind(const void *ptr, uccl_gpu_ptr_attr_t *attr);

/* Devices. uccl_gpu_count gives 0 (and UCCL_OK) when no GPU or driver is
 * usable. The bus id is "0000:19:00.0", lower case. */
uccl_status_t uccl_gpu_count(int *n);
/* Is the primary context of GPU ordinal device active in this process? Asks
 * without creating one (tests use it to check that engines touch only their
 * own GPU). */
uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active);
uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len);
/* Ordinal of the device with this bus id (as uccl_gpu_pci_bus_id writes it). */
uccl_status_t uccl_gpu_device_by_bus_id(const char *bus_id, int *device);
/* Current device of the calling thread. */
uccl_status_t uccl_gpu_set_device(int device);
uccl_status_t uccl_gpu_get_device(int *device);
/* Can device reach peer's memory directly; *nvlink = 1 when the link also
 * carries native atomics (NVLink/xGMI, not PCIe). */
uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink);
/* Enable access from the current device to peer (already enabled is OK). */
uccl_status_t uccl_gpu_peer_enable(int peer);

/* Device memory on the current device (tests, benchmarks). */
uccl_status_t uccl_gpu_malloc(void **ptr, size_t len);
uccl_status_t uccl_gpu_free(void *ptr);
/* Page-locked host memory, visible to every device (staging buffers). */
uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len);
uccl_status_t uccl_gpu_host_free(void *ptr);
/* Page-locked host memory mapped into the current device's address space:
 * *host for the CPU, *dev for kernels (the same value under unified
 * addressing; the fake backend gives the host pointer). Zeroed. Free with
 * uccl_gpu_host_free. Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_DEVICE,
 * UCCL_ERR_NO_MEMORY. */
uccl_status_t uccl_gpu_host_alloc_mapped(void **host, void **dev, size_t len);
/* Page-lock len bytes of host memory the caller mapped (shared memory
 * another process made, say) and map them into the current device's
 * address space: *dev is their address for kernels and stream writes (the
 * fake backend gives ptr). Undo with uccl_gpu_host_unregister before the
 * memory goes. Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_DEVICE,
 * UCCL_ERR_UNSUPPORTED, UCCL_ERR_IO (the runtime refused it). */
uccl_status_t uccl_gpu_host_register_mapped(void *ptr, size_t len, void **dev);
uccl_status_t uccl_gpu_host_unregister(void *ptr);
/* Synchronous helpers for tests: any direction, any memory. */
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len);
uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len);

/* IPC: get the handle of an allocation base, open a peer's handle on the
 * current device (peer access enabled lazily), close what open returned. */
uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle);
uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base);
uccl_status_t uccl_gpu_ipc_close(void *base);

/* dma-buf export of device memory, for NICs that register GPU memory from a
 * dma-buf (ibv_reg_dmabuf_mr). The range [base, base + len) is widened to
 * whole host pages; *fd covers the widened range and *offset is where base
 * lies in it. The caller owns *fd and closes it (a registration made from it
 * keeps its own reference). Errors: UCCL_ERR_INVALID_PARAM (NULL out pointer,
 * len 0, not device memory), UCCL_ERR_NO_DEVICE (no GPU or driver, and always
 * in builds without a GPU runtime), UCCL_ERR_UNSUPPORTED (runtime, driver or
 * kernel cannot export dma-bufs), UCCL_ERR_IO (any other runtime failure). */
uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset);

/* Streams (non-blocking with respect to the legacy default stream). */
uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream);
uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream);
uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream);
/* UCCL_OK when everything queued on stream so far has run (waits included),
 * UCCL_INPROGRESS when not yet, an error otherwise. Never blocks. */
uccl_status_t uccl_gpu_stream_query(uccl_gpu_stream_t stream);
/* Copy between any two pointers the runtime can see (unified addressing). */
uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len,
                                    uccl_gpu_stream_t stream);
/* A copy between two device pointers (both GPU memory, local or IPC-mapped):
 * the driver's cuMemcpyDtoDAsync on CUDA, which skips the runtime's
 * unified-addressing lookups of uccl_gpu_memcpy_async; the plain copy
 * elsewhere. */
uccl_status_t uccl_gpu_memcpy_dtod_async(void *dst, const void *src, size_t len,
                                         uccl_gpu_stream_t stream);
/* n copies (n >= 1) queued on stream in one call where the runtime can
 * (cudaMemcpyBatchAsync, CUDA 12.8+), else one call each: the batch as a
 * whole is in stream order, the copies in it are not ordered among
 * themselves, so none may overlap another's destination or read one. */
uccl_status_t uccl_gpu_memcpy_batch_async(void *const *dst, const void *const *src, const size_t *len,
                                          size_t n, uccl_gpu_stream_t stream);

/* SM-driven copies (cuda.c's backend only; gpu_ipc between two GPUs): a
 * copy kernel (src/gpu/sm_copy.cu: 16-byte loads and stores, grid-stride)
 * for device memory that device reaches, its own or a peer's mapped over
 * IPC. uccl_gpu_sm_copy_load(device) loads the kernel into device's context
 * (the current device's; later calls for a loaded device return at once):
 * call it once when a transport starts, never from progress (a module load
 * waits on the context, which a stream held by a collective can block:
 * uccl_coll.h). UCCL_ERR_UNSUPPORTED where the build has none (configure
 * found no nvcc; HIP; none.c) or the driver refuses it.
 * uccl_gpu_sm_copy_async queues dst <- src (len bytes, dst and src 16-byte
 * aligned) on stream as one kernel of blocks blocks (1..1024) of 512
 * threads, each thread with unroll (4 or 8) 16-byte words in flight, on a
 * device loaded before; UCCL_ERR_INVALID_PARAM for bad alignment, blocks
 * or unroll, UCCL_ERR_UNSUPPORTED when device is not loaded. */
#define UCCL_GPU_SM_COPY_ALIGN 16
uccl_status_t uccl_gpu_sm_copy_load(int device);
uccl_status_t uccl_gpu_sm_copy_async(int device, void *dst, const void *src, size_t len, int blocks,
                                     int unroll, uccl_gpu_stream_t stream);
static inline int uccl_gpu_sm_copy_args_ok(const void *dst, const void *src, int blocks, int unroll)
{
    return (((uintptr_t)dst | (uintptr_t)src) & (UCCL_GPU_SM_COPY_ALIGN - 1)) == 0 && blocks >= 1 &&
           blocks <= 1024 && (unroll == 4 || unroll == 8);
}

/* n copies (1..UCCL_GPU_SM_BATCH_MAX) dst[i] <- src[i] (len[i] bytes, every
 * dst and src 16-byte aligned) queued on stream as ONE launch of the copy
 * kernel (uccl_sm_copy_batch: a row of blocks per copy, at most blocks
 * blocks in all, 4 words in flight per thread), on a device loaded before
 * (uccl_gpu_sm_copy_load). As uccl_gpu_memcpy_batch_async, the copies are
 * not ordered among themselves. One launch costs the CPU what one copy call
 * does, so a window of small copies costs one call, not one each (gpu_ipc's
 * UCCL_GPU_IPC_BATCH_SM). Errors as uccl_gpu_sm_copy_async. */
#define UCCL_GPU_SM_BATCH_MAX 64
uccl_status_t uccl_gpu_sm_copy_batch_async(int device, void *const *dst, const void *const *src,
                                           const size_t *len, size_t n, int blocks,
                                           uccl_gpu_stream_t stream);
static inline int uccl_gpu_sm_batch_args_ok(void *const *dst, const void *const *src, size_t n, int blocks)
{
    if (n < 1 || n > UCCL_GPU_SM_BATCH_MAX || dst == NULL || src == NULL || blocks < 1 || blocks > 65535)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((((uintptr_t)dst[i] | (uintptr_t)src[i]) & (UCCL_GPU_SM_COPY_ALIGN - 1)) != 0)
            return 0;
    return 1;
}

/* Events. timing = 0 gives the cheap kind used for completion polling. */
uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing);
uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event);
uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream);
/* UCCL_OK when done, UCCL_INPROGRESS when not yet, an error otherwise. Never blocks. */
uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event);
uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event);
uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms);

/* Stream-ordered waits on host flags (the stream form of the collectives).
 * uccl_gpu_flags_alloc: n zeroed 32-bit words of page-locked host memory
 * that every device can read; *dev is their address for the device (pass
 * it, offset by the word, to uccl_gpu_stream_wait_value). The host stores
 * into host[i] (release order) to let a waiting stream go.
 * uccl_gpu_stream_wait_value: work queued on stream after this call waits
 * until the word at dev is >= value (cuStreamWaitValue32 GEQ); the host is
 * not blocked. Errors: UCCL_ERR_UNSUPPORTED (runtime or device lacks
 * stream memory operations), UCCL_ERR_NO_DEVICE. */
uccl_status_t uccl_gpu_flags_alloc(size_t n, uint32_t **host, void **dev);
uccl_status_t uccl_gpu_flags_free(uint32_t *host);
uccl_status_t uccl_gpu_stream_wait_value(uccl_gpu_stream_t stream, void *dev, uint32_t value);

/* Stream memory operations on device memory (this process's or a peer's
 * mapped over IPC), width 4 or 8 bytes, naturally aligned:
 * uccl_gpu_stream_write: in stream order, store value at dev after the
 * work queued before it has run and its writes are visible (a memory
 * fence, cuStreamWriteValue32/64); uccl_gpu_stream_wait_geq: later work
 * on stream waits until the word at dev is >= value, compared cyclically
 * ((int32_t)(*dev - value) >= 0, or int64_t), so sequence numbers may wrap
 * (cuStreamWaitValue32/64 GEQ). Neither blocks the host. Errors:
 * UCCL_ERR_INVALID_PARAM (width, alignment, NULL), UCCL_ERR_UNSUPPORTED
 * (no stream memory operations), UCCL_ERR_NO_DEVICE, UCCL_ERR_IO. */
static inline int uccl_gpu_value_args_ok(uccl_gpu_stream_t stream, const void *dev, size_t width)
{
    return stream != NULL && dev != NULL && (width == 4 || width == 8) &&
           ((uintptr_t)dev & (width - 1)) == 0;
}
uccl_status_t uccl_gpu_stream_write(uccl_gpu_stream_t stream, void *dev, uint64_t value, size_t width);

/* dst <- src (len bytes, both 16-byte aligned) by the copy kernel (at most
 * blocks blocks, 1..1024, 8 words in flight per thread), which then stores
 * value into the 32-bit word at word (host memory mapped for the device,
 * from uccl_gpu_flags_alloc) once every block's stores are visible
 * system-wide: one launch where a copy and uccl_gpu_stream_write would be
 * two calls (gpu_ipc's UCCL_GPU_IPC_FLAG_KERNEL_MAX). count: a zeroed
 * 32-bit word of device memory (uccl_gpu_malloc) that finds the last block
 * and is left zeroed; one launch using it at a time (stream order); NULL
 * only with blocks 1. A copy that faults never writes the word (the
 * stream stops). Errors as uccl_gpu_sm_copy_async, and
 * UCCL_ERR_INVALID_PARAM for a NULL or unaligned word. */
uccl_status_t uccl_gpu_sm_copy_flag_async(int device, void *dst, const void *src, size_t len, int blocks,
                                          uint32_t *count, void *word, uint32_t value,
                                          uccl_gpu_stream_t stream);
static inline int uccl_gpu_sm_flag_args_ok(const void *dst, const void *src, int blocks, const uint32_t *count,
                                           uccl_gpu_stream_t stream, const void *word)
{
    return uccl_gpu_sm_copy_args_ok(dst, src, blocks, 8) && (count != NULL || blocks == 1) &&
           uccl_gpu_value_args_ok(stream, word, 4);
}
uccl_status_t uccl_gpu_stream_wait_geq(uccl_gpu_stream_t stream, const void *dev, uint64_t value,
                                       size_t width);

/* A batch of the two above, run in array order as the calls one by one
 * would be (cuStreamBatchMemOp where the driver has it: one call for up to
 * 255 operations; else, and on HIP and the fake backend, one call each).
 * Each op is checked first (UCCL_ERR_INVALID_PARAM, nothing queued). */
typedef struct uccl_gpu_memop {
    void *dev;      /* the word (this GPU's or peer-mapped; host-mapped for a write) */
    uint64_t value;
    uint8_t width;  /* 4 or 8 */
    uint8_t wait;   /* 1: wait until >= value (cyclic), 0: write value */
} uccl_gpu_memop_t;
uccl_status_t uccl_gpu_stream_memops(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n);

static inline int uccl_gpu_memops_ok(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!uccl_gpu_value_args_ok(stream, ops[i].dev, ops[i].width))
            return 0;
    return stream != NULL && (n == 0 || ops != NULL);
}

/* The batch as single calls (backends without a batch, and the fallback). */
static inline uccl_status_t uccl_gpu_memops_each(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
{
    uccl_status_t st = UCCL_OK;

    for (size_t i = 0; st == UCCL_OK && i < n; i++)
        st = ops[i].wait ? uccl_gpu_stream_wait_geq(stream, ops[i].dev, ops[i].value, ops[i].width)
                         : uccl_gpu_stream_write(stream, ops[i].dev, ops[i].value, ops[i].width);
    return st;
}

/* A host poll of a word a stream writes (uccl_gpu_flags_alloc memory) has
 * not seen its value yet: let the device go on. Nothing on a GPU (it runs
 * by itself); the fake backend runs its streams as far as they can go. */
void uccl_gpu_flags_poll(void);

/* Tests: queue on stream a fault that, when the stream reaches it, loses
 * the process's GPU context as a kernel's illegal address does on CUDA
 * (sticky: from then on every stream and event query or sync and every
 * async call of the process fails, whatever stream it names). The fake
 * backend only (fake_memop.c); UCCL_ERR_UNSUPPORTED on CUDA and HIP,
 * UCCL_ERR_NO_DEVICE without a runtime. */
uccl_status_t uccl_gpu_fault_inject(uccl_gpu_stream_t stream);

#endif

/* GPU backend on the HIP runtime API (libamdhip64), the twin of cuda.c.
 * Devices, memory, IPC handles, streams, events and the error mapping are
 * shared with cuda.c and live in rt_common.h, where rtX stands for hipX
 * (uccl_gpu_memcpy_async is hipMemcpyAsync there). This file holds what
 * differs from CUDA: pointer classification, primary-context state and dma-buf
 * export, all through the HIP runtime itself. */
#include <hip/hip_runtime_api.h>

#include "uccl_build.h"

/* The names rt_common.h is written against (listed there). */
#define RT_PREFIX hip
#define rtFreeHost hipHostFree
#define RT_CHECK_HOST_ALLOC(ptr, len) RT_CHECK_RAW(hipHostMalloc(ptr, len, hipHostMallocPortable))
#define RT_CHECK_HOST_ALLOC_MAPPED(ptr, len) \
    RT_CHECK_RAW(hipHostMalloc(ptr, len, hipHostMallocPortable | hipHostMallocMapped))
#define RT_CHECK_IPC_OPEN(base, h) RT_CHECK_RAW(hipIpcOpenMemHandle(base, h, hipIpcMemLazyEnablePeerAccess))
#define RT_CHECK_STREAM_CREATE(s) RT_CHECK_RAW(hipStreamCreateWithFlags(&s, hipStreamNonBlocking))
#define RT_CHECK_EVENT_CREATE(e, timing) \
    RT_CHECK_RAW(hipEventCreateWithFlags(&e, timing ? hipEventDefault : hipEventDisableTiming))
#include "gpu/rt_common.h"
#include "gpu/sm_copy_none.h" /* no copy kernel: gpu_ipc uses the copy engines */

uccl_status_t uccl_gpu_ptr_kind(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    hipPointerAttribute_t pa;

    attr_host(ptr, attr);
    if (hipPointerGetAttributes(&pa, ptr) != hipSuccess) {
        (void)hipGetLastError(); /* no driver, no device: it is host memory to us */
        return UCCL_OK;
    }
    /* managed memory cannot be exported over IPC and the CPU reaches it:
     * host transports move it like host memory */
    if (pa.memoryType == hipMemoryTypeDevice && !pa.isManaged) {
        attr->type = UCCL_MEM_ROCM;
        attr->device = pa.device;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    hipDeviceptr_t base;
    size_t size;

    uccl_gpu_ptr_kind(ptr, attr);
    if (attr->type == UCCL_MEM_HOST)
        return UCCL_OK;
    if (hipMemGetAddressRange(&base, &size, (hipDeviceptr_t)(uintptr_t)ptr) == hipSuccess) {
        attr->base = (void *)base;
        attr->size = size;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active)
{
    unsigned int flags;
    hipDevice_t dev;

    if (hipDeviceGet(&dev, device) != hipSuccess ||
        hipDevicePrimaryCtxGetState(dev, &flags, active) != hipSuccess) {
        (void)hipGetLastError();
        return UCCL_ERR_NO_DEVICE;
    }
    return UCCL_OK;
}

/* hipMemGetHandleForAddressRange is newer than some distributions' HIP
 * headers (Debian's among them): configure checks for it. */
uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
#if HAVE_DECL_HIPMEMGETHANDLEFORADDRESSRANGE
    uintptr_t start, end;
    hipPointerAttribute_t pa;
    hipError_t err;
    int handle = -1;

    if (fd == NULL || offset == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    err = hipPointerGetAttributes(&pa, base);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        return rt_status(err) == UCCL_ERR_NO_DEVICE ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM;
    }
    if (pa.memoryType != hipMemoryTypeDevice) {
        uccl_error("dma-buf export of %p: not HIP device memory", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    rt_dmabuf_range(base, len, &start, &end);
    err = hipMemGetHandleForAddressRange(&handle, (hipDeviceptr_t)start, end - start,
                                         hipMemRangeHandleTypeDmaBufFd, 0);
    if (err != hipSuccess) {
        uccl_info("hipMemGetHandleForAddressRange(%p, %zu) failed: %s", (void *)start,
                  (size_t)(end - start), hipGetErrorString(err));
        return err == hipErrorNotSupported ? UCCL_ERR_UNSUPPORTED : rt_status(err);
    }
    *fd = handle;
    *offset = (uint64_t)((uintptr_t)base - start);
    return UCCL_OK;
#else
    (void)base;
    (void)len;
    (void)fd;
    (void)offset;
    uccl_info("dma-buf export: this HIP has no hipMemGetHandleForAddressRange");
    return UCCL_ERR_UNSUPPORTED;
#endif
}

uccl_status_t uccl_gpu_flags_alloc(size_t n, uint32_t **host, void **dev)
{
    void *p = NULL;
    uccl_status_t st;

    if (n == 0 || host == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = RT_CHECK_RAW(hipHostMalloc(&p, n * sizeof(uint32_t), hipHostMallocMapped | hipHostMallocPortable));
    if (st != UCCL_OK)
        return st;
    memset(p, 0, n * sizeof(uint32_t));
    st = RT_CHECK_RAW(hipHostGetDevicePointer(dev, p, 0));
    if (st != UCCL_OK) {
        (void)hipHostFree(p);
        return st;
    }
    *host = p;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_flags_free(uint32_t *host)
{
    return RT_CHECK_RAW(hipHostFree(host));
}

uccl_status_t uccl_gpu_stream_wait_value(uccl_gpu_stream_t stream, void *dev, uint32_t value)
{
    return RT_CHECK_RAW(hipStreamWaitValue32((hipStream_t)stream, dev, value, hipStreamWaitValueGte,
                                             0xffffffffu));
}

uccl_status_t uccl_gpu_stream_write(uccl_gpu_stream_t stream, void *dev, uint64_t value, size_t width)
{
    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    if (width == 4)
        return RT_CHECK_RAW(hipStreamWriteValue32((hipStream_t)stream, dev, (uint32_t)value, 0));
    return RT_CHECK_RAW(hipStreamWriteValue64((hipStream_t)stream, dev, value, 0));
}

/* HIP's Gte is not documented as cyclic: the callers' sequence numbers
 * start from 1 and wrap only after 2^32 calls (32-bit) */
uccl_status_t uccl_gpu_stream_wait_geq(uccl_gpu_stream_t stream, const void *dev, uint64_t value,
                                       size_t width)
{
    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    if (width == 4)
        return RT_CHECK_RAW(hipStreamWaitValue32((hipStream_t)stream, (void *)dev, (uint32_t)value,
                                                 hipStreamWaitValueGte, 0xffffffffu));
    return RT_CHECK_RAW(hipStreamWaitValue64((hipStream_t)stream, (void *)dev, value, hipStreamWaitValueGte,
                                             0xffffffffffffffffull));
}

uccl_status_t uccl_gpu_memcpy_dtod_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    return RT_CHECK(hipMemcpyAsync(dst, src, len, hipMemcpyDeviceToDevice, (hipStream_t)stream));
}

/* hipStreamBatchMemOp is missing from many HIP releases: one call each. */
uccl_status_t uccl_gpu_stream_memops(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
{
    return uccl_gpu_memops_ok(stream, ops, n) ? uccl_gpu_memops_each(stream, ops, n) : UCCL_ERR_INVALID_PARAM;
}

void uccl_gpu_flags_poll(void)
{
}

uccl_status_t uccl_gpu_memcpy_batch_async(void *const *dst, const void *const *src, const size_t *len,
                                          size_t n, uccl_gpu_stream_t stream)
{
    return rt_memcpy_each(dst, src, len, n, stream);
}


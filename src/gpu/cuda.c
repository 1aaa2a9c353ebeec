/* GPU backend on the CUDA runtime API (libcudart). Devices, memory, IPC
 * handles, streams, events and the error mapping are shared with hip.c and
 * live in rt_common.h, where rtX stands for cudaX (uccl_gpu_memcpy_async is
 * cudaMemcpyAsync there). This file holds what only CUDA does: the allocation
 * range (cuMemGetAddressRange), primary-context state and dma-buf export
 * (cuMemGetHandleForAddressRange) come from the driver, reached through the
 * runtime's entry-point query so that nothing links libcuda directly. The
 * copy kernel (gpu.h's uccl_gpu_sm_copy_*) is cuda_sm_copy.c. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>

#include "uccl_build.h"
#include "gpu/cuda_driver.h"

/* The names rt_common.h is written against (listed there). */
#define RT_PREFIX cuda
#define rtFreeHost cudaFreeHost
#define RT_CHECK_HOST_ALLOC(ptr, len) RT_CHECK_RAW(cudaHostAlloc(ptr, len, cudaHostAllocPortable))
#define RT_CHECK_HOST_ALLOC_MAPPED(ptr, len) \
    RT_CHECK_RAW(cudaHostAlloc(ptr, len, cudaHostAllocPortable | cudaHostAllocMapped))
#define RT_CHECK_IPC_OPEN(base, h) RT_CHECK_RAW(cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess))
#define RT_CHECK_STREAM_CREATE(s) RT_CHECK_RAW(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
#define RT_CHECK_EVENT_CREATE(e, timing) \
    RT_CHECK_RAW(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming))
#include "gpu/rt_common.h"

typedef CUresult (*addr_range_fn_t)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

typedef CUresult (*range_handle_fn_t)(void *handle, CUdeviceptr dptr, size_t size,
                                      CUmemRangeHandleType type, unsigned long long flags);

static pthread_once_t addr_range_once = PTHREAD_ONCE_INIT;
static addr_range_fn_t addr_range_fn;
static pthread_once_t range_handle_once = PTHREAD_ONCE_INIT;
static range_handle_fn_t range_handle_fn;

typedef CUresult (*device_get_fn_t)(CUdevice *dev, int ordinal);
typedef CUresult (*ctx_state_fn_t)(CUdevice dev, unsigned int *flags, int *active);

void *uccl_cuda_driver_entry(const char *name)
{
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;

#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &q) != cudaSuccess)
#else
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess)
#endif
        return NULL;
    return q == cudaDriverEntryPointSuccess ? fn : NULL;
}

static void addr_range_lookup(void)
{
    addr_range_fn = (addr_range_fn_t)uccl_cuda_driver_entry("cuMemGetAddressRange");
    if (addr_range_fn == NULL)
        uccl_warn("cuMemGetAddressRange not found: IPC of pointers inside an allocation "
                  "falls back to the pointer itself");
}

uccl_status_t uccl_gpu_ptr_kind(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    struct cudaPointerAttributes pa;

    attr_host(ptr, attr);
    if (cudaPointerGetAttributes(&pa, ptr) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver, no device: it is host memory to us */
        return UCCL_OK;
    }
    /* managed memory cannot be exported over IPC and the CPU reaches it:
     * host transports move it like host memory */
    if (pa.type == cudaMemoryTypeDevice) {
        attr->type = UCCL_MEM_CUDA;
        attr->device = pa.device;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    CUdeviceptr base;
    size_t size;

    uccl_gpu_ptr_kind(ptr, attr);
    if (attr->type == UCCL_MEM_HOST)
        return UCCL_OK;
    pthread_once(&addr_range_once, addr_range_lookup);
    if (addr_range_fn != NULL && addr_range_fn(&base, &size, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS) {
        attr->base = (void *)(uintptr_t)base;
        attr->size = size;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active)
{
    device_get_fn_t device_get = (device_get_fn_t)uccl_cuda_driver_entry("cuDeviceGet");
    ctx_state_fn_t ctx_state = (ctx_state_fn_t)uccl_cuda_driver_entry("cuDevicePrimaryCtxGetState");
    unsigned int flags;
    CUdevice dev;

    if (device_get == NULL || ctx_state == NULL || device_get(&dev, device) != CUDA_SUCCESS ||
        ctx_state(dev, &flags, active) != CUDA_SUCCESS)
        return UCCL_ERR_NO_DEVICE;
    return UCCL_OK;
}

/* cuMemGetHandleForAddressRange appeared in CUDA 11.7 (ABI version 11070). */
static void range_handle_lookup(void)
{
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    cudaError_t err;

#if CUDART_VERSION >= 12050
    err = cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070,
                                           cudaEnableDefault, &q);
#else
    err = cudaGetDriverEntryPoint("cuMemGetHandleForAddressRange", &fn, cudaEnableDefault, &q);
#endif
    if (err == cudaSuccess && q == cudaDriverEntryPointSuccess)
        range_handle_fn = (range_handle_fn_t)fn;
    else
        (void)cudaGetLastError();
}

static uccl_status_t dmabuf_check_ptr(const void *base)
{
    struct cudaPointerAttributes pa;
    cudaError_t err = cudaPointerGetAttributes(&pa, base);

    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        uccl_debug("dma-buf export of %p: %s", base, cudaGetErrorString(err));
        return rt_status(err) == UCCL_ERR_NO_DEVICE ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM;
    }
    if (pa.type != cudaMemoryTypeDevice) {
        uccl_error("dma-buf export of %p: not CUDA device memory", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
    uintptr_t start, end;
    uccl_status_t st;
    CUresult res;
    int handle = -1;

    if (fd == NULL || offset == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = dmabuf_check_ptr(base);
    if (st != UCCL_OK)
        return st;
    rt_dmabuf_range(base, len, &start, &end);
    pthread_once(&range_handle_once, range_handle_lookup);
    if (range_handle_fn == NULL) {
        uccl_info("dma-buf export: the CUDA driver has no cuMemGetHandleForAddressRange (needs 11.7+)");
        return UCCL_ERR_UNSUPPORTED;
    }
    res = range_handle_fn(&handle, (CUdeviceptr)start, end - start,
                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (res != CUDA_SUCCESS) {
        uccl_info("cuMemGetHandleForAddressRange(%p, %zu, DMA_BUF_FD) failed: CUresult %d",
                  (void *)start, (size_t)(end - start), (int)res);
        return res == CUDA_ERROR_NOT_SUPPORTED ? UCCL_ERR_UNSUPPORTED
               : res == CUDA_ERROR_INVALID_VALUE ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_IO;
    }
    *fd = handle;
    *offset = (uint64_t)((uintptr_t)base - start);
    return UCCL_OK;
}

/* ------------------------------------------------------------ stream-ordered waits */

typedef CUresult (*wait_value_fn_t)(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                    unsigned int flags);

static pthread_once_t wait_value_once = PTHREAD_ONCE_INIT;
static wait_value_fn_t wait_value_fn;

static void wait_value_lookup(void)
{
    wait_value_fn = (wait_value_fn_t)uccl_cuda_driver_entry("cuStreamWaitValue32");
    if (wait_value_fn == NULL) {
        (void)cudaGetLastError();
        uccl_info("cuStreamWaitValue32 not found: no stream-ordered collectives");
    }
}

uccl_status_t uccl_gpu_flags_alloc(size_t n, uint32_t **host, void **dev)
{
    void *p = NULL;
    uccl_status_t st;

    if (n == 0 || host == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = RT_CHECK_RAW(cudaHostAlloc(&p, n * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    if (st != UCCL_OK)
        return st;
    memset(p, 0, n * sizeof(uint32_t));
    st = RT_CHECK_RAW(cudaHostGetDevicePointer(dev, p, 0));
    if (st != UCCL_OK) {
        (void)cudaFreeHost(p);
        return st;
    }
    *host = p;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_flags_free(uint32_t *host)
{
    return RT_CHECK_RAW(cudaFreeHost(host));
}

uccl_status_t uccl_gpu_stream_wait_value(uccl_gpu_stream_t stream, void *dev, uint32_t value)
{
    CUresult res;

    pthread_once(&wait_value_once, wait_value_lookup);
    if (wait_value_fn == NULL)
        return UCCL_ERR_UNSUPPORTED;
    res = wait_value_fn((CUstream)stream, (CUdeviceptr)(uintptr_t)dev, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (res != CUDA_SUCCESS) {
        uccl_error("cuStreamWaitValue32(GEQ %u) failed: CUresult %d", value, (int)res);
        return res == CUDA_ERROR_NOT_SUPPORTED ? UCCL_ERR_UNSUPPORTED : UCCL_ERR_IO;
    }
    return UCCL_OK;
}

/* Stream memory operations on device memory (gpu.h): the driver's
 * cuStreamWriteValue32/64 and cuStreamWaitValue32/64, looked up once. */
typedef CUresult (*write32_fn_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*write64_fn_t)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*wait64_fn_t)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

static pthread_once_t memops_once = PTHREAD_ONCE_INIT;
static write32_fn_t write32_fn;
static write64_fn_t write64_fn;
static wait64_fn_t wait64_fn;

static void memops_lookup(void)
{
    pthread_once(&wait_value_once, wait_value_lookup);
    write32_fn = (write32_fn_t)uccl_cuda_driver_entry("cuStreamWriteValue32");
    write64_fn = (write64_fn_t)uccl_cuda_driver_entry("cuStreamWriteValue64");
    wait64_fn = (wait64_fn_t)uccl_cuda_driver_entry("cuStreamWaitValue64");
    (void)cudaGetLastError();
}

uccl_status_t uccl_cuda_memop_status(CUresult res, const char *what, uint64_t value)
{
    if (res == CUDA_SUCCESS)
        return UCCL_OK;
    uccl_error("%s(%llu) failed: CUresult %d", what, (unsigned long long)value, (int)res);
    return res == CUDA_ERROR_NOT_SUPPORTED ? UCCL_ERR_UNSUPPORTED
           : res == CUDA_ERROR_INVALID_VALUE ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_IO;
}

uccl_status_t uccl_gpu_stream_write(uccl_gpu_stream_t stream, void *dev, uint64_t value, size_t width)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)dev;

    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    pthread_once(&memops_once, memops_lookup);
    if (width == 4 && write32_fn != NULL)
        return uccl_cuda_memop_status(
            write32_fn((CUstream)stream, p, (cuuint32_t)value, CU_STREAM_WRITE_VALUE_DEFAULT),
            "cuStreamWriteValue32", value);
    if (width == 8 && write64_fn != NULL)
        return uccl_cuda_memop_status(write64_fn((CUstream)stream, p, value, CU_STREAM_WRITE_VALUE_DEFAULT),
                                      "cuStreamWriteValue64", value);
    return UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_gpu_stream_wait_geq(uccl_gpu_stream_t stream, const void *dev, uint64_t value,
                                       size_t width)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)dev;

    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    pthread_once(&memops_once, memops_lookup);
    if (width == 4 && wait_value_fn != NULL)
        return uccl_cuda_memop_status(
            wait_value_fn((CUstream)stream, p, (cuuint32_t)value, CU_STREAM_WAIT_VALUE_GEQ),
            "cuStreamWaitValue32", value);
    if (width == 8 && wait64_fn != NULL)
        return uccl_cuda_memop_status(wait64_fn((CUstream)stream, p, value, CU_STREAM_WAIT_VALUE_GEQ),
                                      "cuStreamWaitValue64", value);
    return UCCL_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------ device-to-device copies */

typedef CUresult (*dtod_fn_t)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static pthread_once_t dtod_once = PTHREAD_ONCE_INIT;
static dtod_fn_t dtod_fn;

static void dtod_lookup(void)
{
    dtod_fn = (dtod_fn_t)uccl_cuda_driver_entry("cuMemcpyDtoDAsync");
    (void)cudaGetLastError();
}

uccl_status_t uccl_gpu_memcpy_dtod_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    CUresult res;

    pthread_once(&dtod_once, dtod_lookup);
    if (dtod_fn == NULL)
        return uccl_gpu_memcpy_async(dst, src, len, stream);
    res = dtod_fn((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, (CUstream)stream);
    return uccl_cuda_memop_status(res, "cuMemcpyDtoDAsync", len);
}

/* cuStreamBatchMemOp (fewer than 256 operations a call), looked up once; a
 * driver that refuses it (CUDA_ERROR_NOT_SUPPORTED) is not asked again in
 * this process: the ops go one call each, which are the same operations. */
typedef CUresult (*batch_memop_fn_t)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);

#define MEMOP_BATCH_MAX 255

static pthread_once_t batch_memop_once = PTHREAD_ONCE_INIT;
static batch_memop_fn_t batch_memop_fn;
static _Atomic int batch_memop_refused;

static void batch_memop_lookup(void)
{
    batch_memop_fn = (batch_memop_fn_t)uccl_cuda_driver_entry("cuStreamBatchMemOp");
    if (batch_memop_fn == NULL) {
        (void)cudaGetLastError();
        uccl_info("cuStreamBatchMemOp not found: stream memory operations go one call each");
    }
}

static void memop_param(const uccl_gpu_memop_t *op, CUstreamBatchMemOpParams *p)
{
    memset(p, 0, sizeof(*p));
    if (op->wait) {
        p->waitValue.operation = op->width == 4 ? CU_STREAM_MEM_OP_WAIT_VALUE_32 : CU_STREAM_MEM_OP_WAIT_VALUE_64;
        p->waitValue.address = (CUdeviceptr)(uintptr_t)op->dev;
        if (op->width == 4)
            p->waitValue.value = (cuuint32_t)op->value;
        else
            p->waitValue.value64 = op->value;
        p->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    } else {
        p->writeValue.operation = op->width == 4 ? CU_STREAM_MEM_OP_WRITE_VALUE_32 : CU_STREAM_MEM_OP_WRITE_VALUE_64;
        p->writeValue.address = (CUdeviceptr)(uintptr_t)op->dev;
        if (op->width == 4)
            p->writeValue.value = (cuuint32_t)op->value;
        else
            p->writeValue.value64 = op->value;
        p->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    }
}

uccl_status_t uccl_gpu_stream_memops(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
{
    CUstreamBatchMemOpParams p[MEMOP_BATCH_MAX];
    size_t done = 0;

    if (!uccl_gpu_memops_ok(stream, ops, n))
        return UCCL_ERR_INVALID_PARAM;
    pthread_once(&batch_memop_once, batch_memop_lookup);
    while (done < n && batch_memop_fn != NULL &&
           !atomic_load_explicit(&batch_memop_refused, memory_order_relaxed)) {
        size_t k = n - done < MEMOP_BATCH_MAX ? n - done : MEMOP_BATCH_MAX;
        CUresult res;
        for (size_t i = 0; i < k; i++)
            memop_param(&ops[done + i], &p[i]);
        res = batch_memop_fn((CUstream)stream, (unsigned int)k, p, 0);
        if (res == CUDA_ERROR_NOT_SUPPORTED) {
            atomic_store_explicit(&batch_memop_refused, 1, memory_order_relaxed);
            uccl_info("cuStreamBatchMemOp: not supported; stream memory operations go one call each");
            break;
        }
        if (res != CUDA_SUCCESS)
            return uccl_cuda_memop_status(res, "cuStreamBatchMemOp", (uint64_t)k);
        done += k;
    }
    return uccl_gpu_memops_each(stream, ops + done, n - done);
}

void uccl_gpu_flags_poll(void)
{
}

/* ------------------------------------------------------------ batched copies */

/* cudaMemcpyBatchAsync (CUDA 12.8; 13.0 dropped its failIdx argument). A
 * driver that refuses it once (too old for the runtime's call, or a copy
 * kind it does not batch) is not asked again in this process. */
static _Atomic int batch_refused;

uccl_status_t uccl_gpu_memcpy_batch_async(void *const *dst, const void *const *src, const size_t *len,
                                          size_t n, uccl_gpu_stream_t stream)
{
#if CUDART_VERSION >= 12080
    struct cudaMemcpyAttributes attr;
    size_t idx = 0;
    cudaError_t err;

    if (n <= 1 || atomic_load_explicit(&batch_refused, memory_order_relaxed))
        return rt_memcpy_each(dst, src, len, n, stream);
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
#if CUDART_VERSION >= 13000
    err = cudaMemcpyBatchAsync(dst, src, len, n, &attr, &idx, 1, (cudaStream_t)stream);
#else
    size_t fail_idx = 0;
    err = cudaMemcpyBatchAsync((void **)dst, (void **)src, (size_t *)len, n, &attr, &idx, 1, &fail_idx,
                               (cudaStream_t)stream);
#endif
    if (err == cudaSuccess)
        return UCCL_OK;
    if (err != cudaErrorNotSupported && err != cudaErrorInvalidValue && err != cudaErrorCallRequiresNewerDriver)
        return rt_check(err, "cudaMemcpyBatchAsync");
    (void)cudaGetLastError();
    atomic_store_explicit(&batch_refused, 1, memory_order_relaxed);
    uccl_info("cudaMemcpyBatchAsync: %s; copies are issued one by one", cudaGetErrorString(err));
#endif
    return rt_memcpy_each(dst, src, len, n, stream);
}

/* GPU backend on the CUDA runtime API (libcudart). The allocation range
 * (cuMemGetAddressRange) and dma-buf export (cuMemGetHandleForAddressRange)
 * come from the driver, reached through the runtime's entry-point query so
 * that nothing links libcuda directly. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <ctype.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "gpu/gpu.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == UCCL_GPU_IPC_HANDLE_SIZE, "IPC handle size");

typedef CUresult (*addr_range_fn_t)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

typedef CUresult (*range_handle_fn_t)(void *handle, CUdeviceptr dptr, size_t size,
                                      CUmemRangeHandleType type, unsigned long long flags);

static pthread_once_t addr_range_once = PTHREAD_ONCE_INIT;
static addr_range_fn_t addr_range_fn;
static pthread_once_t range_handle_once = PTHREAD_ONCE_INIT;
static range_handle_fn_t range_handle_fn;

static uccl_status_t cuda_status(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return UCCL_OK;
    case cudaErrorNotReady: return UCCL_INPROGRESS;
    case cudaErrorMemoryAllocation: return UCCL_ERR_NO_MEMORY;
    case cudaErrorInvalidValue: return UCCL_ERR_INVALID_PARAM;
    case cudaErrorInvalidDevice:
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return UCCL_ERR_NO_DEVICE;
    default: return UCCL_ERR_IO;
    }
}

/* Log a failed call once, with the runtime's text, and map it. */
static uccl_status_t cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return UCCL_OK;
    uccl_error("%s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
    return cuda_status(err);
}

#define CUDA_CHECK(call) cuda_check((call), #call)

const char *uccl_gpu_backend(void)
{
    return "cuda";
}

typedef CUresult (*device_get_fn_t)(CUdevice *dev, int ordinal);
typedef CUresult (*ctx_state_fn_t)(CUdevice dev, unsigned int *flags, int *active);

/* A driver API function through the runtime, so nothing links libcuda. */
static void *driver_entry(const char *name)
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
    addr_range_fn = (addr_range_fn_t)driver_entry("cuMemGetAddressRange");
    if (addr_range_fn == NULL)
        uccl_warn("cuMemGetAddressRange not found: IPC of pointers inside an allocation "
                  "falls back to the pointer itself");
}

static void attr_host(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    struct cudaPointerAttributes pa;
    CUdeviceptr base;
    size_t size;

    attr_host(ptr, attr);
    if (cudaPointerGetAttributes(&pa, ptr) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver, no device: it is host memory to us */
        return UCCL_OK;
    }
    /* managed memory cannot be exported over IPC and the CPU reaches it:
     * host transports move it like host memory */
    if (pa.type != cudaMemoryTypeDevice)
        return UCCL_OK;
    attr->type = UCCL_MEM_CUDA;
    attr->device = pa.device;
    pthread_once(&addr_range_once, addr_range_lookup);
    if (addr_range_fn != NULL && addr_range_fn(&base, &size, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS) {
        attr->base = (void *)(uintptr_t)base;
        attr->size = size;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active)
{
    device_get_fn_t device_get = (device_get_fn_t)driver_entry("cuDeviceGet");
    ctx_state_fn_t ctx_state = (ctx_state_fn_t)driver_entry("cuDevicePrimaryCtxGetState");
    unsigned int flags;
    CUdevice dev;

    if (device_get == NULL || ctx_state == NULL || device_get(&dev, device) != CUDA_SUCCESS ||
        ctx_state(dev, &flags, active) != CUDA_SUCCESS)
        return UCCL_ERR_NO_DEVICE;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_count(int *n)
{
    cudaError_t err = cudaGetDeviceCount(n);

    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        *n = 0;
        return UCCL_OK;
    }
    if (err != cudaSuccess)
        *n = 0;
    return cuda_check(err, "cudaGetDeviceCount");
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    char id[UCCL_GPU_BUS_ID_MAX];
    uccl_status_t st;

    if (buf == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = CUDA_CHECK(cudaDeviceGetPCIBusId(id, (int)sizeof(id), device));
    if (st != UCCL_OK)
        return st;
    for (char *p = id; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (strlen(id) >= len)
        return UCCL_ERR_BUFFER_TOO_SMALL;
    memcpy(buf, id, strlen(id) + 1);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_device_by_bus_id(const char *bus_id, int *device)
{
    return CUDA_CHECK(cudaDeviceGetByPCIBusId(device, bus_id));
}

uccl_status_t uccl_gpu_set_device(int device)
{
    return CUDA_CHECK(cudaSetDevice(device));
}

uccl_status_t uccl_gpu_get_device(int *device)
{
    return CUDA_CHECK(cudaGetDevice(device));
}

uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
{
    uccl_status_t st;

    *can_access = *nvlink = 0;
    if (device == peer) {
        *can_access = 1;
        return UCCL_OK;
    }
    st = CUDA_CHECK(cudaDeviceCanAccessPeer(can_access, device, peer));
    if (st == UCCL_OK && *can_access)
        st = CUDA_CHECK(cudaDeviceGetP2PAttribute(nvlink, cudaDevP2PAttrNativeAtomicSupported, device, peer));
    return st;
}

uccl_status_t uccl_gpu_peer_enable(int peer)
{
    cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);

    if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        return UCCL_OK;
    }
    return cuda_check(err, "cudaDeviceEnablePeerAccess");
}

uccl_status_t uccl_gpu_malloc(void **ptr, size_t len)
{
    return CUDA_CHECK(cudaMalloc(ptr, len));
}

uccl_status_t uccl_gpu_free(void *ptr)
{
    return CUDA_CHECK(cudaFree(ptr));
}

uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len)
{
    return CUDA_CHECK(cudaHostAlloc(ptr, len, cudaHostAllocPortable));
}

uccl_status_t uccl_gpu_host_free(void *ptr)
{
    return CUDA_CHECK(cudaFreeHost(ptr));
}

/* The test helpers are synchronous: a memset or device-to-device copy is
 * otherwise still running when the caller hands the memory to a peer. */
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len)
{
    uccl_status_t st = CUDA_CHECK(cudaMemcpy(dst, src, len, cudaMemcpyDefault));

    return st == UCCL_OK ? CUDA_CHECK(cudaDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len)
{
    uccl_status_t st = CUDA_CHECK(cudaMemset(ptr, value, len));

    return st == UCCL_OK ? CUDA_CHECK(cudaDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle)
{
    cudaIpcMemHandle_t h;
    uccl_status_t st = CUDA_CHECK(cudaIpcGetMemHandle(&h, base));

    if (st == UCCL_OK)
        memcpy(handle->bytes, &h, sizeof(h));
    return st;
}

uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base)
{
    cudaIpcMemHandle_t h;

    memcpy(&h, handle->bytes, sizeof(h));
    return CUDA_CHECK(cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess));
}

uccl_status_t uccl_gpu_ipc_close(void *base)
{
    return CUDA_CHECK(cudaIpcCloseMemHandle(base));
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
        return cuda_status(err) == UCCL_ERR_NO_DEVICE ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM;
    }
    if (pa.type != cudaMemoryTypeDevice) {
        uccl_error("dma-buf export of %p: not CUDA device memory", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)base & ~(page - 1);
    uintptr_t end = ((uintptr_t)base + len + page - 1) & ~(page - 1);
    uccl_status_t st;
    CUresult res;
    int handle = -1;

    if (fd == NULL || offset == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = dmabuf_check_ptr(base);
    if (st != UCCL_OK)
        return st;
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

uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream)
{
    cudaStream_t s;
    uccl_status_t st = CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    if (st == UCCL_OK)
        *stream = (uccl_gpu_stream_t)s;
    return st;
}

uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream)
{
    return CUDA_CHECK(cudaStreamDestroy((cudaStream_t)stream));
}

uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream)
{
    return CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
}

uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    return CUDA_CHECK(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, (cudaStream_t)stream));
}

uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing)
{
    cudaEvent_t e;
    uccl_status_t st = CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault
                                                                      : cudaEventDisableTiming));

    if (st == UCCL_OK)
        *event = (uccl_gpu_event_t)e;
    return st;
}

uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event)
{
    return CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
}

uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream)
{
    return CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event)
{
    cudaError_t err = cudaEventQuery((cudaEvent_t)event);

    if (err == cudaErrorNotReady)
        return UCCL_INPROGRESS;
    return cuda_check(err, "cudaEventQuery");
}

uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event)
{
    return CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
}

uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
{
    return CUDA_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}

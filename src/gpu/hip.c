/* GPU backend on the HIP runtime API (libamdhip64): the twin of cuda.c. */
#include <hip/hip_runtime_api.h>
#include <ctype.h>
#include <string.h>
#include <unistd.h>

#include "uccl_build.h"

#include "core/log.h"
#include "gpu/gpu.h"

_Static_assert(sizeof(hipIpcMemHandle_t) == UCCL_GPU_IPC_HANDLE_SIZE, "IPC handle size");

static uccl_status_t hip_status(hipError_t err)
{
    switch (err) {
    case hipSuccess: return UCCL_OK;
    case hipErrorNotReady: return UCCL_INPROGRESS;
    case hipErrorMemoryAllocation: return UCCL_ERR_NO_MEMORY;
    case hipErrorInvalidValue: return UCCL_ERR_INVALID_PARAM;
    case hipErrorInvalidDevice:
    case hipErrorNoDevice:
    case hipErrorInsufficientDriver: return UCCL_ERR_NO_DEVICE;
    default: return UCCL_ERR_IO;
    }
}

/* Log a failed call once, with the runtime's text, and map it. */
static uccl_status_t hip_check(hipError_t err, const char *what)
{
    if (err == hipSuccess)
        return UCCL_OK;
    uccl_error("%s failed: %s (%s)", what, hipGetErrorString(err), hipGetErrorName(err));
    return hip_status(err);
}

#define HIP_CHECK(call) hip_check((call), #call)

const char *uccl_gpu_backend(void)
{
    return "hip";
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
    hipPointerAttribute_t pa;
    hipDeviceptr_t base;
    size_t size;

    attr_host(ptr, attr);
    if (hipPointerGetAttributes(&pa, ptr) != hipSuccess) {
        (void)hipGetLastError(); /* no driver, no device: it is host memory to us */
        return UCCL_OK;
    }
    /* managed memory cannot be exported over IPC and the CPU reaches it:
     * host transports move it like host memory */
    if (pa.memoryType != hipMemoryTypeDevice || pa.isManaged)
        return UCCL_OK;
    attr->type = UCCL_MEM_ROCM;
    attr->device = pa.device;
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

uccl_status_t uccl_gpu_count(int *n)
{
    hipError_t err = hipGetDeviceCount(n);

    if (err == hipErrorNoDevice || err == hipErrorInsufficientDriver) {
        (void)hipGetLastError();
        *n = 0;
        return UCCL_OK;
    }
    if (err != hipSuccess)
        *n = 0;
    return hip_check(err, "hipGetDeviceCount");
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    char id[UCCL_GPU_BUS_ID_MAX];
    uccl_status_t st;

    if (buf == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = HIP_CHECK(hipDeviceGetPCIBusId(id, (int)sizeof(id), device));
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
    return HIP_CHECK(hipDeviceGetByPCIBusId(device, bus_id));
}

uccl_status_t uccl_gpu_set_device(int device)
{
    return HIP_CHECK(hipSetDevice(device));
}

uccl_status_t uccl_gpu_get_device(int *device)
{
    return HIP_CHECK(hipGetDevice(device));
}

uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
{
    uccl_status_t st;

    *can_access = *nvlink = 0;
    if (device == peer) {
        *can_access = 1;
        return UCCL_OK;
    }
    st = HIP_CHECK(hipDeviceCanAccessPeer(can_access, device, peer));
    if (st == UCCL_OK && *can_access)
        st = HIP_CHECK(hipDeviceGetP2PAttribute(nvlink, hipDevP2PAttrNativeAtomicSupported, device, peer));
    return st;
}

uccl_status_t uccl_gpu_peer_enable(int peer)
{
    hipError_t err = hipDeviceEnablePeerAccess(peer, 0);

    if (err == hipErrorPeerAccessAlreadyEnabled) {
        (void)hipGetLastError();
        return UCCL_OK;
    }
    return hip_check(err, "hipDeviceEnablePeerAccess");
}

uccl_status_t uccl_gpu_malloc(void **ptr, size_t len)
{
    return HIP_CHECK(hipMalloc(ptr, len));
}

uccl_status_t uccl_gpu_free(void *ptr)
{
    return HIP_CHECK(hipFree(ptr));
}

uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len)
{
    return HIP_CHECK(hipHostMalloc(ptr, len, hipHostMallocPortable));
}

uccl_status_t uccl_gpu_host_free(void *ptr)
{
    return HIP_CHECK(hipHostFree(ptr));
}

/* The test helpers are synchronous: a memset or device-to-device copy is
 * otherwise still running when the caller hands the memory to a peer. */
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len)
{
    uccl_status_t st = HIP_CHECK(hipMemcpy(dst, src, len, hipMemcpyDefault));

    return st == UCCL_OK ? HIP_CHECK(hipDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len)
{
    uccl_status_t st = HIP_CHECK(hipMemset(ptr, value, len));

    return st == UCCL_OK ? HIP_CHECK(hipDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle)
{
    hipIpcMemHandle_t h;
    uccl_status_t st = HIP_CHECK(hipIpcGetMemHandle(&h, base));

    if (st == UCCL_OK)
        memcpy(handle->bytes, &h, sizeof(h));
    return st;
}

uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base)
{
    hipIpcMemHandle_t h;

    memcpy(&h, handle->bytes, sizeof(h));
    return HIP_CHECK(hipIpcOpenMemHandle(base, h, hipIpcMemLazyEnablePeerAccess));
}

uccl_status_t uccl_gpu_ipc_close(void *base)
{
    return HIP_CHECK(hipIpcCloseMemHandle(base));
}

/* hipMemGetHandleForAddressRange is newer than some distributions' HIP
 * headers (Debian's among them): configure checks for it. */
uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
#if HAVE_DECL_HIPMEMGETHANDLEFORADDRESSRANGE
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)base & ~(page - 1);
    uintptr_t end = ((uintptr_t)base + len + page - 1) & ~(page - 1);
    hipPointerAttribute_t pa;
    hipError_t err;
    int handle = -1;

    if (fd == NULL || offset == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    err = hipPointerGetAttributes(&pa, base);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        return hip_status(err) == UCCL_ERR_NO_DEVICE ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM;
    }
    if (pa.memoryType != hipMemoryTypeDevice) {
        uccl_error("dma-buf export of %p: not HIP device memory", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    err = hipMemGetHandleForAddressRange(&handle, (hipDeviceptr_t)start, end - start,
                                         hipMemRangeHandleTypeDmaBufFd, 0);
    if (err != hipSuccess) {
        uccl_info("hipMemGetHandleForAddressRange(%p, %zu) failed: %s", (void *)start,
                  (size_t)(end - start), hipGetErrorString(err));
        return err == hipErrorNotSupported ? UCCL_ERR_UNSUPPORTED : hip_status(err);
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

uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream)
{
    hipStream_t s;
    uccl_status_t st = HIP_CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));

    if (st == UCCL_OK)
        *stream = (uccl_gpu_stream_t)s;
    return st;
}

uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream)
{
    return HIP_CHECK(hipStreamDestroy((hipStream_t)stream));
}

uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream)
{
    return HIP_CHECK(hipStreamSynchronize((hipStream_t)stream));
}

uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    return HIP_CHECK(hipMemcpyAsync(dst, src, len, hipMemcpyDefault, (hipStream_t)stream));
}

uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing)
{
    hipEvent_t e;
    uccl_status_t st = HIP_CHECK(hipEventCreateWithFlags(&e, timing ? hipEventDefault
                                                                      : hipEventDisableTiming));

    if (st == UCCL_OK)
        *event = (uccl_gpu_event_t)e;
    return st;
}

uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event)
{
    return HIP_CHECK(hipEventDestroy((hipEvent_t)event));
}

uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream)
{
    return HIP_CHECK(hipEventRecord((hipEvent_t)event, (hipStream_t)stream));
}

uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event)
{
    hipError_t err = hipEventQuery((hipEvent_t)event);

    if (err == hipErrorNotReady)
        return UCCL_INPROGRESS;
    return hip_check(err, "hipEventQuery");
}

uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event)
{
    return HIP_CHECK(hipEventSynchronize((hipEvent_t)event));
}

uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
{
    return HIP_CHECK(hipEventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)end));
}

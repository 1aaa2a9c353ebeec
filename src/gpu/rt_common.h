/* The part of the CUDA and HIP backends that is the same on both: error
 * mapping, devices, memory, IPC handles, streams and events. Not an ordinary
 * header: cuda.c and hip.c each include it once, after defining the rt* names
 * (rtMalloc -> cudaMalloc / hipMalloc, ...) and the RT_CHECK_* calls listed
 * below; what differs between the runtimes stays in those two files. */
#ifndef UCCL_GPU_RT_COMMON_H
#define UCCL_GPU_RT_COMMON_H

/* What the including backend defines first:
 *   RT_PREFIX   cuda or hip: rtX below is RT_PREFIX pasted to X (rtMalloc is
 *               cudaMalloc or hipMalloc), so a call's runtime name is found by
 *               swapping the prefix.
 *   rtFreeHost  the one name used here that is not a plain prefix swap.
 *   RT_CHECK_HOST_ALLOC(ptr, len), RT_CHECK_HOST_ALLOC_MAPPED(ptr, len),
 *               RT_CHECK_IPC_OPEN(base, h),
 *   RT_CHECK_STREAM_CREATE(s), RT_CHECK_EVENT_CREATE(e, timing): the calls
 *               whose flags are macros, written out whole with RT_CHECK_RAW so
 *               that the log shows the flag's name (stringifying an expanded
 *               call would show its value). */
#include <ctype.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "gpu/gpu.h"

/* Every runtime name used below: rtX is cudaX or hipX. Two levels of pasting
 * so that RT_PREFIX is expanded first. */
#define RT_API(name) RT_API_PASTE(RT_PREFIX, name)
#define RT_API_PASTE(prefix, name) RT_API_PASTE2(prefix, name)
#define RT_API_PASTE2(prefix, name) prefix##name

#define rtError_t RT_API(Error_t)
#define rtSuccess RT_API(Success)
#define rtErrorNotReady RT_API(ErrorNotReady)
#define rtErrorMemoryAllocation RT_API(ErrorMemoryAllocation)
#define rtErrorInvalidValue RT_API(ErrorInvalidValue)
#define rtErrorInvalidDevice RT_API(ErrorInvalidDevice)
#define rtErrorNoDevice RT_API(ErrorNoDevice)
#define rtErrorInsufficientDriver RT_API(ErrorInsufficientDriver)
#define rtErrorPeerAccessAlreadyEnabled RT_API(ErrorPeerAccessAlreadyEnabled)
#define rtGetErrorString RT_API(GetErrorString)
#define rtGetErrorName RT_API(GetErrorName)
#define rtGetLastError RT_API(GetLastError)
#define rtGetDeviceCount RT_API(GetDeviceCount)
#define rtDeviceGetPCIBusId RT_API(DeviceGetPCIBusId)
#define rtDeviceGetByPCIBusId RT_API(DeviceGetByPCIBusId)
#define rtSetDevice RT_API(SetDevice)
#define rtGetDevice RT_API(GetDevice)
#define rtDeviceCanAccessPeer RT_API(DeviceCanAccessPeer)
#define rtDeviceGetP2PAttribute RT_API(DeviceGetP2PAttribute)
#define rtDevP2PAttrNativeAtomicSupported RT_API(DevP2PAttrNativeAtomicSupported)
#define rtDeviceEnablePeerAccess RT_API(DeviceEnablePeerAccess)
#define rtMalloc RT_API(Malloc)
#define rtHostGetDevicePointer RT_API(HostGetDevicePointer)
#define rtHostRegister RT_API(HostRegister)
#define rtHostRegisterMapped RT_API(HostRegisterMapped)
#define rtHostRegisterPortable RT_API(HostRegisterPortable)
#define rtHostUnregister RT_API(HostUnregister)
#define rtFree RT_API(Free)
#define rtMemcpy RT_API(Memcpy)
#define rtMemcpyDefault RT_API(MemcpyDefault)
#define rtMemset RT_API(Memset)
#define rtDeviceSynchronize RT_API(DeviceSynchronize)
#define rtIpcMemHandle_t RT_API(IpcMemHandle_t)
#define rtIpcGetMemHandle RT_API(IpcGetMemHandle)
#define rtIpcCloseMemHandle RT_API(IpcCloseMemHandle)
#define rtStream_t RT_API(Stream_t)
#define rtStreamDestroy RT_API(StreamDestroy)
#define rtStreamSynchronize RT_API(StreamSynchronize)
#define rtStreamQuery RT_API(StreamQuery)
#define rtMemcpyAsync RT_API(MemcpyAsync)
#define rtEvent_t RT_API(Event_t)
#define rtEventDestroy RT_API(EventDestroy)
#define rtEventRecord RT_API(EventRecord)
#define rtEventQuery RT_API(EventQuery)
#define rtEventSynchronize RT_API(EventSynchronize)
#define rtEventElapsedTime RT_API(EventElapsedTime)

_Static_assert(sizeof(rtIpcMemHandle_t) == UCCL_GPU_IPC_HANDLE_SIZE, "IPC handle size");

static uccl_status_t rt_status(rtError_t err)
{
    switch (err) {
    case rtSuccess: return UCCL_OK;
    case rtErrorNotReady: return UCCL_INPROGRESS;
    case rtErrorMemoryAllocation: return UCCL_ERR_NO_MEMORY;
    case rtErrorInvalidValue: return UCCL_ERR_INVALID_PARAM;
    case rtErrorInvalidDevice:
    case rtErrorNoDevice:
    case rtErrorInsufficientDriver: return UCCL_ERR_NO_DEVICE;
    default: return UCCL_ERR_IO;
    }
}

/* Log a failed call once, with the runtime's text, and map it. */
static uccl_status_t rt_check(rtError_t err, const char *what)
{
    if (err == rtSuccess)
        return UCCL_OK;
    uccl_error("%s failed: %s (%s)", what, rtGetErrorString(err), rtGetErrorName(err));
    return rt_status(err);
}

/* The call as written, for calls spelled with the runtime's own names. */
#define RT_CHECK_RAW(call) rt_check((call), #call)
/* The call after the rt* names are replaced, so the log names the runtime's
 * function ("cudaMalloc(ptr, len) failed"), as RT_CHECK_RAW would. */
#define RT_CHECK(call) RT_CHECK_RAW(call)
#define RT_NAME(name) RT_NAME_STR(name)
#define RT_NAME_STR(name) #name

const char *uccl_gpu_backend(void)
{
    return RT_NAME(RT_PREFIX);
}

const uccl_cfg_table_t *uccl_gpu_config_table(void)
{
    return NULL;
}

static void attr_host(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
}

/* dma-buf export covers whole host pages (gpu.h): the page-aligned range
 * holding [base, base + len). Inline: hip.c may have no export to use it. */
static inline void rt_dmabuf_range(const void *base, size_t len, uintptr_t *start, uintptr_t *end)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

    *start = (uintptr_t)base & ~(page - 1);
    *end = ((uintptr_t)base + len + page - 1) & ~(page - 1);
}

uccl_status_t uccl_gpu_count(int *n)
{
    rtError_t err = rtGetDeviceCount(n);

    if (err == rtErrorNoDevice || err == rtErrorInsufficientDriver) {
        (void)rtGetLastError();
        *n = 0;
        return UCCL_OK;
    }
    if (err != rtSuccess)
        *n = 0;
    return rt_check(err, RT_NAME(rtGetDeviceCount));
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    char id[UCCL_GPU_BUS_ID_MAX];
    uccl_status_t st;

    if (buf == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = RT_CHECK(rtDeviceGetPCIBusId(id, (int)sizeof(id), device));
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
    return RT_CHECK(rtDeviceGetByPCIBusId(device, bus_id));
}

uccl_status_t uccl_gpu_set_device(int device)
{
    return RT_CHECK(rtSetDevice(device));
}

uccl_status_t uccl_gpu_get_device(int *device)
{
    return RT_CHECK(rtGetDevice(device));
}

uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
{
    uccl_status_t st;

    *can_access = *nvlink = 0;
    if (device == peer) {
        *can_access = 1;
        return UCCL_OK;
    }
    st = RT_CHECK(rtDeviceCanAccessPeer(can_access, device, peer));
    if (st == UCCL_OK && *can_access)
        st = RT_CHECK(rtDeviceGetP2PAttribute(nvlink, rtDevP2PAttrNativeAtomicSupported, device, peer));
    return st;
}

uccl_status_t uccl_gpu_peer_enable(int peer)
{
    rtError_t err = rtDeviceEnablePeerAccess(peer, 0);

    if (err == rtErrorPeerAccessAlreadyEnabled) {
        (void)rtGetLastError();
        return UCCL_OK;
    }
    return rt_check(err, RT_NAME(rtDeviceEnablePeerAccess));
}

uccl_status_t uccl_gpu_malloc(void **ptr, size_t len)
{
    return RT_CHECK(rtMalloc(ptr, len));
}

uccl_status_t uccl_gpu_free(void *ptr)
{
    return RT_CHECK(rtFree(ptr));
}

uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len)
{
    return RT_CHECK_HOST_ALLOC(ptr, len);
}

uccl_status_t uccl_gpu_host_alloc_mapped(void **host, void **dev, size_t len)
{
    uccl_status_t st;

    if (host == NULL || dev == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = RT_CHECK_HOST_ALLOC_MAPPED(host, len);
    if (st != UCCL_OK)
        return st;
    st = RT_CHECK(rtHostGetDevicePointer(dev, *host, 0));
    if (st != UCCL_OK) {
        (void)rtFreeHost(*host);
        *host = NULL;
        return st;
    }
    memset(*host, 0, len);
    return UCCL_OK;
}

/* A failure is logged and returned, and cleared from the runtime's last
 * error: gpu_ipc goes on without the page (PEER_DONE), possibly inside the
 * caller's progress call, and the caller's next cudaGetLastError (after its
 * own kernel launch) must not find our error there. */
uccl_status_t uccl_gpu_host_register_mapped(void *ptr, size_t len, void **dev)
{
    uccl_status_t st;

    if (ptr == NULL || dev == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    st = RT_CHECK(rtHostRegister(ptr, len, rtHostRegisterMapped | rtHostRegisterPortable));
    if (st == UCCL_OK) {
        st = RT_CHECK(rtHostGetDevicePointer(dev, ptr, 0));
        if (st != UCCL_OK)
            (void)rtHostUnregister(ptr);
    }
    if (st != UCCL_OK)
        (void)rtGetLastError();
    return st;
}

uccl_status_t uccl_gpu_host_unregister(void *ptr)
{
    return RT_CHECK(rtHostUnregister(ptr));
}

uccl_status_t uccl_gpu_host_free(void *ptr)
{
    return RT_CHECK(rtFreeHost(ptr));
}

/* The test helpers are synchronous: a memset or device-to-device copy is
 * otherwise still running when the caller hands the memory to a peer. */
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len)
{
    uccl_status_t st = RT_CHECK(rtMemcpy(dst, src, len, rtMemcpyDefault));

    return st == UCCL_OK ? RT_CHECK(rtDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len)
{
    uccl_status_t st = RT_CHECK(rtMemset(ptr, value, len));

    return st == UCCL_OK ? RT_CHECK(rtDeviceSynchronize()) : st;
}

uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle)
{
    rtIpcMemHandle_t h;
    uccl_status_t st = RT_CHECK(rtIpcGetMemHandle(&h, base));

    if (st == UCCL_OK)
        memcpy(handle->bytes, &h, sizeof(h));
    return st;
}

uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base)
{
    rtIpcMemHandle_t h;

    memcpy(&h, handle->bytes, sizeof(h));
    return RT_CHECK_IPC_OPEN(base, h);
}

uccl_status_t uccl_gpu_ipc_close(void *base)
{
    return RT_CHECK(rtIpcCloseMemHandle(base));
}

uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream)
{
    rtStream_t s;
    uccl_status_t st = RT_CHECK_STREAM_CREATE(s);

    if (st == UCCL_OK)
        *stream = (uccl_gpu_stream_t)s;
    return st;
}

uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream)
{
    return RT_CHECK(rtStreamDestroy((rtStream_t)stream));
}

uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream)
{
    return RT_CHECK(rtStreamSynchronize((rtStream_t)stream));
}

uccl_status_t uccl_gpu_stream_query(uccl_gpu_stream_t stream)
{
    rtError_t err = rtStreamQuery((rtStream_t)stream);

    if (err == rtErrorNotReady)
        return UCCL_INPROGRESS;
    return rt_check(err, RT_NAME(rtStreamQuery));
}

uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    return RT_CHECK(rtMemcpyAsync(dst, src, len, rtMemcpyDefault, (rtStream_t)stream));
}

/* One call per copy: the batch for runtimes (or versions) without one. */
static uccl_status_t rt_memcpy_each(void *const *dst, const void *const *src, const size_t *len, size_t n,
                                   uccl_gpu_stream_t stream)
{
    for (size_t i = 0; i < n; i++) {
        uccl_status_t st = uccl_gpu_memcpy_async(dst[i], src[i], len[i], stream);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing)
{
    rtEvent_t e;
    uccl_status_t st = RT_CHECK_EVENT_CREATE(e, timing);

    if (st == UCCL_OK)
        *event = (uccl_gpu_event_t)e;
    return st;
}

uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event)
{
    return RT_CHECK(rtEventDestroy((rtEvent_t)event));
}

uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream)
{
    return RT_CHECK(rtEventRecord((rtEvent_t)event, (rtStream_t)stream));
}

uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event)
{
    rtError_t err = rtEventQuery((rtEvent_t)event);

    if (err == rtErrorNotReady)
        return UCCL_INPROGRESS;
    return rt_check(err, RT_NAME(rtEventQuery));
}

uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event)
{
    return RT_CHECK(rtEventSynchronize((rtEvent_t)event));
}

uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
{
    return RT_CHECK(rtEventElapsedTime(ms, (rtEvent_t)start, (rtEvent_t)end));
}

/* No injected faults on a real runtime (gpu.h: the fake backend's). */
uccl_status_t uccl_gpu_fault_inject(uccl_gpu_stream_t stream)
{
    return stream == NULL ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_UNSUPPORTED;
}

#endif

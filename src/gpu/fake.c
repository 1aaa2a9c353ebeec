/* Test-only GPU backend (configure --enable-fake-gpu): one "device" whose
 * memory is ordinary host memory, so that the GPU paths of the transports
 * (classification, staging, GPUDirect registration) run where no GPU is.
 * uccl_gpu_backend() says "fake" so that nobody mistakes it for a GPU. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "gpu/gpu.h"

#define FAKE_MAX_ALLOCS 1024

/* The "device" allocations: what uccl_gpu_ptr_attr reports as UCCL_MEM_CUDA. */
typedef struct fake_alloc {
    uint8_t *base;
    size_t size;
} fake_alloc_t;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_alloc_t fake_allocs[FAKE_MAX_ALLOCS];

const char *uccl_gpu_backend(void)
{
    return "fake";
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    const uint8_t *p = ptr;

    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        fake_alloc_t *a = &fake_allocs[i];
        if (a->base != NULL && p >= a->base && p < a->base + a->size) {
            attr->type = UCCL_MEM_CUDA;
            attr->device = 0;
            attr->base = a->base;
            attr->size = a->size;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_count(int *n)
{
    *n = 1;
    return UCCL_OK;
}

static uccl_status_t fake_check_device(int device)
{
    return device == 0 ? UCCL_OK : UCCL_ERR_NO_DEVICE;
}

uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active)
{
    *active = 1;
    return fake_check_device(device);
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    (void)buf, (void)len;
    /* no PCI device: topology-driven choices fall back as without a GPU */
    return device == 0 ? UCCL_ERR_UNSUPPORTED : UCCL_ERR_NO_DEVICE;
}

uccl_status_t uccl_gpu_device_by_bus_id(const char *bus_id, int *device)
{
    (void)bus_id, (void)device;
    return UCCL_ERR_NOT_FOUND;
}

uccl_status_t uccl_gpu_set_device(int device)
{
    return fake_check_device(device);
}

uccl_status_t uccl_gpu_get_device(int *device)
{
    *device = 0;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
{
    *can_access = device == peer;
    *nvlink = 0;
    return fake_check_device(device) == UCCL_OK ? fake_check_device(peer) : UCCL_ERR_NO_DEVICE;
}

uccl_status_t uccl_gpu_peer_enable(int peer)
{
    return fake_check_device(peer);
}

uccl_status_t uccl_gpu_malloc(void **ptr, size_t len)
{
    void *p;

    if (ptr == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return UCCL_ERR_NO_MEMORY;
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].base == NULL) {
            fake_allocs[i] = (fake_alloc_t){p, len};
            pthread_mutex_unlock(&fake_lock);
            *ptr = p;
            return UCCL_OK;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    munmap(p, len);
    uccl_error("fake GPU: more than %d allocations", FAKE_MAX_ALLOCS);
    return UCCL_ERR_NO_MEMORY;
}

uccl_status_t uccl_gpu_free(void *ptr)
{
    fake_alloc_t a = {0};

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (ptr != NULL && fake_allocs[i].base == ptr) {
            a = fake_allocs[i];
            fake_allocs[i] = (fake_alloc_t){0};
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    if (a.base == NULL) {
        uccl_error("fake GPU: free of %p, which uccl_gpu_malloc did not return", ptr);
        return UCCL_ERR_INVALID_PARAM;
    }
    munmap(a.base, a.size);
    return UCCL_OK;
}

/* "Pinned" host memory: plain heap memory, page aligned like cudaHostAlloc's. */
uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len)
{
    if (ptr == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    return posix_memalign(ptr, 4096, len) == 0 ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

uccl_status_t uccl_gpu_host_free(void *ptr)
{
    free(ptr);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len)
{
    if (len > 0)
        memmove(dst, src, len);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len)
{
    memset(ptr, value, len);
    return UCCL_OK;
}

/* No IPC and no dma-buf: the fake device has no driver behind it. */
uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle)
{
    (void)base, (void)handle;
    return UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base)
{
    (void)handle, (void)base;
    return UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_gpu_ipc_close(void *base)
{
    (void)base;
    return UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
    uccl_gpu_ptr_attr_t attr;

    if (fd == NULL || offset == NULL || len == 0 || uccl_gpu_ptr_attr(base, &attr) != UCCL_OK ||
        attr.type == UCCL_MEM_HOST)
        return UCCL_ERR_INVALID_PARAM; /* as gpu.h says for memory that is not the device's */
    return UCCL_ERR_UNSUPPORTED;
}

/* Streams and events: every copy is synchronous, so all is always done. A
 * stream or event is a non-NULL token that the runtime never dereferences. */
static uint8_t fake_token;

uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream)
{
    *stream = (uccl_gpu_stream_t)(void *)&fake_token;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream)
{
    (void)stream;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream)
{
    (void)stream;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    (void)stream;
    return uccl_gpu_memcpy(dst, src, len);
}

uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing)
{
    (void)timing;
    *event = (uccl_gpu_event_t)(void *)&fake_token;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event)
{
    (void)event;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream)
{
    (void)event, (void)stream;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event)
{
    (void)event;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event)
{
    (void)event;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
{
    (void)start, (void)end;
    *ms = 0;
    return UCCL_OK;
}

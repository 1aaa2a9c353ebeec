/* GPU backend for builds without CUDA or HIP: every pointer is host memory,
 * there are no devices, and every device call says so. */
#include <stdint.h>

#include "gpu/gpu.h"
#include "gpu/sm_copy_none.h" /* no copy kernel: gpu_ipc uses the copy engines */

const char *uccl_gpu_backend(void)
{
    return "none";
}

const uccl_cfg_table_t *uccl_gpu_config_table(void)
{
    return NULL;
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ptr_kind(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    return uccl_gpu_ptr_attr(ptr, attr);
}

uccl_status_t uccl_gpu_count(int *n)
{
    *n = 0;
    return UCCL_OK;
}

/* Every other call: this build has no GPU runtime, so the arguments go unused. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define NO_DEVICE(...) { return UCCL_ERR_NO_DEVICE; }

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len) NO_DEVICE(device, buf, len)
uccl_status_t uccl_gpu_device_by_bus_id(const char *bus_id, int *device) NO_DEVICE(bus_id, device)
uccl_status_t uccl_gpu_set_device(int device) NO_DEVICE(device)
uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active) NO_DEVICE(device, active)
uccl_status_t uccl_gpu_get_device(int *device) NO_DEVICE(device)
uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
    NO_DEVICE(device, peer, can_access, nvlink)
uccl_status_t uccl_gpu_peer_enable(int peer) NO_DEVICE(peer)
uccl_status_t uccl_gpu_malloc(void **ptr, size_t len) NO_DEVICE(ptr, len)
uccl_status_t uccl_gpu_free(void *ptr) NO_DEVICE(ptr)
uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len) NO_DEVICE(ptr, len)
uccl_status_t uccl_gpu_host_free(void *ptr) NO_DEVICE(ptr)
uccl_status_t uccl_gpu_host_alloc_mapped(void **host, void **dev, size_t len) NO_DEVICE(host, dev, len)
uccl_status_t uccl_gpu_host_register_mapped(void *ptr, size_t len, void **dev) NO_DEVICE(ptr, len, dev)
uccl_status_t uccl_gpu_host_unregister(void *ptr) NO_DEVICE(ptr)
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len) NO_DEVICE(dst, src, len)
uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len) NO_DEVICE(ptr, value, len)
uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle) NO_DEVICE(base, handle)
uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base) NO_DEVICE(handle, base)
uccl_status_t uccl_gpu_ipc_close(void *base) NO_DEVICE(base)
uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
    NO_DEVICE(base, len, fd, offset)
uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream) NO_DEVICE(stream)
uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream) NO_DEVICE(stream)
uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream) NO_DEVICE(stream)
uccl_status_t uccl_gpu_stream_query(uccl_gpu_stream_t stream) NO_DEVICE(stream)
uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
    NO_DEVICE(dst, src, len, stream)
uccl_status_t uccl_gpu_memcpy_dtod_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
    NO_DEVICE(dst, src, len, stream)
uccl_status_t uccl_gpu_memcpy_batch_async(void *const *dst, const void *const *src, const size_t *len,
                                          size_t n, uccl_gpu_stream_t stream)
    NO_DEVICE(dst, src, len, n, stream)
uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing) NO_DEVICE(event, timing)
uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event) NO_DEVICE(event)
uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream) NO_DEVICE(event, stream)
uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event) NO_DEVICE(event)
uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event) NO_DEVICE(event)
uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
    NO_DEVICE(start, end, ms)
uccl_status_t uccl_gpu_flags_alloc(size_t n, uint32_t **host, void **dev) NO_DEVICE(n, host, dev)
uccl_status_t uccl_gpu_flags_free(uint32_t *host) NO_DEVICE(host)
uccl_status_t uccl_gpu_stream_wait_value(uccl_gpu_stream_t stream, void *dev, uint32_t value)
    NO_DEVICE(stream, dev, value)
uccl_status_t uccl_gpu_stream_write(uccl_gpu_stream_t stream, void *dev, uint64_t value, size_t width)
    NO_DEVICE(stream, dev, value, width)
uccl_status_t uccl_gpu_stream_wait_geq(uccl_gpu_stream_t stream, const void *dev, uint64_t value,
                                       size_t width) NO_DEVICE(stream, dev, value, width)
uccl_status_t uccl_gpu_stream_memops(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
    NO_DEVICE(stream, ops, n)
void uccl_gpu_flags_poll(void) {}
uccl_status_t uccl_gpu_fault_inject(uccl_gpu_stream_t stream) NO_DEVICE(stream)


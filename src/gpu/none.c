/* GPU backend for builds without CUDA or HIP: every pointer is host memory. */
#include "gpu/gpu.h"

const char *uccl_gpu_backend(void)
{
    return "none";
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_count(int *n)
{
    *n = 0;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    (void)device;
    (void)buf;
    (void)len;
    return UCCL_ERR_NO_DEVICE;
}

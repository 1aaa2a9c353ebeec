/* GPU runtime abstraction: the only door to CUDA or HIP. One backend
 * (cuda.c, hip.c or none.c) is chosen at configure time. */
#ifndef UCCL_GPU_GPU_H
#define UCCL_GPU_GPU_H

#include <stddef.h>
#include <uccl/uccl.h>

typedef struct uccl_gpu_ptr_attr {
    uccl_mem_type_t type; /* UCCL_MEM_HOST for anything the runtime does not own */
    int device;           /* GPU ordinal, -1 for host */
    void *base;           /* start of the allocation holding the pointer */
    size_t size;          /* size of that allocation (0 when unknown) */
} uccl_gpu_ptr_attr_t;

/* "cuda", "hip" or "none". */
const char *uccl_gpu_backend(void);
/* Classify a pointer. Never fails for host pointers. */
uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr);

/* Number of GPUs the runtime shows this process (0 when there is no runtime
 * or no device; then the call still returns UCCL_OK). */
uccl_status_t uccl_gpu_count(int *n);
/* PCI address of GPU ordinal device as "DDDD:BB:DD.F" (lower case, the form
 * hwloc prints) into buf. Errors: UCCL_ERR_NO_DEVICE (no such ordinal),
 * UCCL_ERR_BUFFER_TOO_SMALL (len < 13). */
uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len);

#endif

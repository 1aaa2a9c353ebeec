/* The DLPack C ABI (dlpack.h v0.8, stable since v0.2): only the structs a
 * consumer reads from a "dltensor" capsule, copied so that the build needs
 * no DLPack headers. */
#ifndef UCCL_PY_DLPACK_ABI_H
#define UCCL_PY_DLPACK_ABI_H

#include <stdint.h>

typedef struct {
    int32_t device_type; /* 1 = CPU, 2 = CUDA, 3 = CUDA host, 10 = ROCm */
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif /* UCCL_PY_DLPACK_ABI_H */

/* Stream operations on the caller's stream (uccl.h): a copy, a value
 * written and a value waited for, enqueued from the calling thread through
 * the GPU layer. No engine state is touched: the engine only vouches that
 * the caller runs one (and a GPU runtime). */
#include "core.h"
#include "gpu/gpu.h"

static uccl_status_t stream_check(uccl_engine_t *engine, void *stream)
{
    uccl_status_t st = uccl_engine_check(engine);

    if (st != UCCL_OK)
        return st;
    return stream == NULL ? UCCL_ERR_INVALID_PARAM : UCCL_OK;
}

uccl_status_t uccl_stream_copy(uccl_engine_t *engine, void *stream, void *dst, const void *src, size_t len)
{
    uccl_status_t st = stream_check(engine, stream);

    if (st != UCCL_OK || len == 0)
        return st;
    if (dst == NULL || src == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return uccl_gpu_memcpy_async(dst, src, len, (uccl_gpu_stream_t)stream);
}

uccl_status_t uccl_stream_write_value(uccl_engine_t *engine, void *stream, void *addr, uint64_t value,
                                      size_t width)
{
    uccl_status_t st = stream_check(engine, stream);

    return st != UCCL_OK ? st : uccl_gpu_stream_write((uccl_gpu_stream_t)stream, addr, value, width);
}

uccl_status_t uccl_stream_wait_value(uccl_engine_t *engine, void *stream, const void *addr, uint64_t value,
                                     size_t width)
{
    uccl_status_t st = stream_check(engine, stream);

    return st != UCCL_OK ? st : uccl_gpu_stream_wait_geq((uccl_gpu_stream_t)stream, addr, value, width);
}

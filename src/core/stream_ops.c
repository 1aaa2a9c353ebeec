/* Stream operations on the caller's stream (uccl.h): a copy, a value
 * written and a value waited for, enqueued from the calling thread through
 * the GPU layer. The only engine state touched: the last value a batch
 * writes into each of the engine's stream words, so that transports learn
 * when the caller's streams passed every call (uccl_engine_streams_passed). */
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

/* ------------------------------------------------------------------ batches */

static bool op_ok(const uccl_stream_op_t *op)
{
    if (op->kind == UCCL_STREAM_OP_COPY)
        return op->len == 0 || (op->addr != NULL && op->src != NULL);
    if (op->kind != UCCL_STREAM_OP_WRITE && op->kind != UCCL_STREAM_OP_WAIT)
        return false;
    return op->addr != NULL && (op->len == 4 || op->len == 8) && ((uintptr_t)op->addr & (op->len - 1)) == 0;
}

#define OPS_RUN 32 /* ops handed to the GPU layer at once */

/* ops[0..k) of one kind class (copies, or memory operations) in one call. */
static uccl_status_t run_issue(uccl_gpu_stream_t s, const uccl_stream_op_t *ops, size_t k, unsigned flags)
{
    uccl_gpu_memop_t m[OPS_RUN];
    void *dst[OPS_RUN];
    const void *src[OPS_RUN];
    size_t len[OPS_RUN], c = 0;

    if (ops[0].kind != UCCL_STREAM_OP_COPY) {
        for (size_t i = 0; i < k; i++)
            m[i] = (uccl_gpu_memop_t){.dev = ops[i].addr, .value = ops[i].value, .width = (uint8_t)ops[i].len,
                                      .wait = ops[i].kind == UCCL_STREAM_OP_WAIT};
        return uccl_gpu_stream_memops(s, m, k);
    }
    for (size_t i = 0; i < k; i++) {
        if (ops[i].len == 0)
            continue;
        dst[c] = ops[i].addr;
        src[c] = ops[i].src;
        len[c++] = ops[i].len;
    }
    if (c == 0)
        return UCCL_OK;
    if (c > 1 && (flags & UCCL_STREAM_OPS_COPY_BATCH))
        return uccl_gpu_memcpy_batch_async(dst, src, len, c, s);
    for (size_t i = 0; i < c; i++) {
        uccl_status_t st = uccl_gpu_memcpy_async(dst[i], src[i], len[i], s);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

/* A WRITE into one of the engine's stream words: note its value before
 * the batch is enqueued (a pointer the batch uses stays mapped until the
 * stream passed it). */
static void sword_note(uccl_engine_t *engine, const uccl_stream_op_t *ops, size_t n)
{
    int ns = __atomic_load_n(&engine->nsword, __ATOMIC_ACQUIRE);

    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != UCCL_STREAM_OP_WRITE || ops[i].len != 4)
            continue;
        for (int k = 0; k < ns; k++) {
            struct uccl_sword *w = &engine->sword[k];
            if (__atomic_load_n(&w->dev, __ATOMIC_ACQUIRE) != ops[i].addr)
                continue;
            __atomic_store_n(&w->last, (uint32_t)ops[i].value, __ATOMIC_RELEASE);
            __atomic_store_n(&w->written, 1, __ATOMIC_RELEASE);
            break;
        }
    }
}

bool uccl_engine_streams_passed(uccl_engine_t *engine)
{
    int ns = __atomic_load_n(&engine->nsword, __ATOMIC_ACQUIRE);

    if (__atomic_load_n(&engine->sword_untracked, __ATOMIC_ACQUIRE) > 0)
        return false;
    for (int k = 0; k < ns; k++) {
        struct uccl_sword *w = &engine->sword[k];
        uint32_t *host = __atomic_load_n(&w->host, __ATOMIC_ACQUIRE);
        if (host != NULL && __atomic_load_n(&w->written, __ATOMIC_ACQUIRE) &&
            !uccl_stream_word_reached(host, __atomic_load_n(&w->last, __ATOMIC_ACQUIRE)))
            return false;
    }
    return true;
}

uccl_status_t uccl_stream_ops(uccl_engine_t *engine, void *stream, const uccl_stream_op_t *ops, size_t n,
                              unsigned flags)
{
    uccl_status_t st = stream_check(engine, stream);

    if (st != UCCL_OK)
        return st;
    if ((n > 0 && ops == NULL) || (flags & ~UCCL_STREAM_OPS_COPY_BATCH) != 0)
        return UCCL_ERR_INVALID_PARAM;
    for (size_t i = 0; i < n; i++)
        if (!op_ok(&ops[i]))
            return UCCL_ERR_INVALID_PARAM;
    sword_note(engine, ops, n);
    for (size_t i = 0; st == UCCL_OK && i < n;) {
        bool copy = ops[i].kind == UCCL_STREAM_OP_COPY;
        size_t k = 1;
        while (i + k < n && k < OPS_RUN && (ops[i + k].kind == UCCL_STREAM_OP_COPY) == copy)
            k++;
        st = run_issue((uccl_gpu_stream_t)stream, ops + i, k, flags);
        i += k;
    }
    return st;
}

/* ------------------------------------------------------------------ stream words */

uccl_status_t uccl_stream_word_alloc(uccl_engine_t *engine, uint32_t **host, void **dev)
{
    uccl_status_t st = uccl_engine_check(engine);
    int k;

    if (st != UCCL_OK)
        return st;
    if (host == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_gpu_flags_alloc(1, host, dev);
    if (st != UCCL_OK)
        return st;
    uccl_engine_lock(engine);
    for (k = 0; k < engine->nsword; k++)
        if (engine->sword[k].host == NULL)
            break;
    if (k < UCCL_ENGINE_SWORDS) {
        struct uccl_sword *w = &engine->sword[k];
        __atomic_store_n(&w->written, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&w->host, *host, __ATOMIC_RELEASE);
        __atomic_store_n(&w->dev, *dev, __ATOMIC_RELEASE);
        if (k == engine->nsword)
            __atomic_store_n(&engine->nsword, k + 1, __ATOMIC_RELEASE);
    } else {
        engine->sword_untracked++;
    }
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

uccl_status_t uccl_stream_word_free(uccl_engine_t *engine, uint32_t *host)
{
    uccl_status_t st = uccl_engine_check(engine);
    int k;

    if (st != UCCL_OK)
        return st;
    if (host == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(engine);
    for (k = 0; k < engine->nsword; k++)
        if (engine->sword[k].host == host)
            break;
    if (k < engine->nsword) {
        __atomic_store_n(&engine->sword[k].dev, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&engine->sword[k].host, NULL, __ATOMIC_RELEASE);
    } else if (engine->sword_untracked > 0) {
        engine->sword_untracked--;
    }
    uccl_engine_unlock(engine);
    return uccl_gpu_flags_free(host);
}

int uccl_stream_word_reached(const uint32_t *host, uint32_t value)
{
    if (host == NULL)
        return 0;
    if ((int32_t)(__atomic_load_n(host, __ATOMIC_ACQUIRE) - value) >= 0)
        return 1;
    uccl_gpu_flags_poll();
    return (int32_t)(__atomic_load_n(host, __ATOMIC_ACQUIRE) - value) >= 0;
}

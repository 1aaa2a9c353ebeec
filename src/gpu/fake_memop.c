/* Host-flag waits, stream memory operations and the injected sticky fault
 * of the test-only fake GPU backend (the model: fake_stream.c's top).
 * The sticky fault (uccl_gpu_fault_inject, tests only) is queued on a
 * stream like a copy. When the stream runs into it, the process's context
 * is lost, as after a kernel's illegal address on a GPU: nothing queued on
 * any stream runs any more, and from then on every stream or event query
 * or sync, every async copy, record, wait and memory operation fails with
 * UCCL_ERR_IO and the runtime's text ("an illegal memory access was
 * encountered"), on whichever stream or event it is asked. Memory, IPC and
 * teardown (stream and event destroy, frees) keep working, so a test can
 * end cleanly. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/log.h"
#include "gpu/fake.h"

static int ctx_lost; /* atomic */

int uccl_fake_ctx_lost(void)
{
    return __atomic_load_n(&ctx_lost, __ATOMIC_ACQUIRE);
}

void uccl_fake_ctx_lost_set(void)
{
    if (!__atomic_exchange_n(&ctx_lost, 1, __ATOMIC_ACQ_REL))
        uccl_error("fake GPU: a stream ran into an injected sticky fault: the context is lost");
}

uccl_status_t uccl_fake_ctx_err(const char *what)
{
    if (!uccl_fake_ctx_lost())
        return UCCL_OK;
    uccl_error("%s failed: an illegal memory access was encountered (fake GPU, injected sticky fault)",
               what);
    return UCCL_ERR_IO;
}

/* A copy of tmpl queued at the end of stream (its number given here). */
static uccl_status_t queue_entry(uccl_gpu_stream_t stream, const fake_copy_t *tmpl)
{
    fake_copy_t *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return UCCL_ERR_NO_MEMORY;
    pthread_mutex_lock(&uccl_fake_stream_lock);
    *c = *tmpl;
    c->seq = ++stream->issued;
    uccl_list_push_back(&stream->queue, &c->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_fault_inject(uccl_gpu_stream_t stream)
{
    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return queue_entry(stream, &(fake_copy_t){.sticky = true});
}

/* ------------------------------------------------------------ host-flag waits */

uccl_status_t uccl_gpu_flags_alloc(size_t n, uint32_t **host, void **dev)
{
    uint32_t *p;

    if (n == 0 || host == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    p = calloc(n, sizeof(*p));
    if (p == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_fake_ctx_touch(uccl_fake_current_device());
    *host = p;
    *dev = p;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_flags_free(uint32_t *host)
{
    uccl_fake_streams_flush(-1); /* as cudaFreeHost waits for the device */
    free(host);
    return UCCL_OK;
}

static uint64_t host_registers; /* calls of the process so far (atomic) */

/* Host memory the fake's streams store into as it is (its "device" address).
 * UCCL_FAKE_GPU_FAIL_HOST_REGISTER=N: the N-th call fails, with the error
 * line the CUDA backend logs, and registers nothing. */
uccl_status_t uccl_gpu_host_register_mapped(void *ptr, size_t len, void **dev)
{
    size_t fail = uccl_fake_fail_host_register();

    if (ptr == NULL || dev == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    uccl_fake_ctx_touch(uccl_fake_current_device());
    if (fail > 0 && __atomic_add_fetch(&host_registers, 1, __ATOMIC_RELAXED) == fail) {
        uccl_error("cudaHostRegister(ptr, len, cudaHostRegisterMapped | cudaHostRegisterPortable) failed: "
                   "injected (fake GPU, UCCL_FAKE_GPU_FAIL_HOST_REGISTER=%zu)", fail);
        return UCCL_ERR_IO;
    }
    *dev = ptr;
    return UCCL_OK;
}

static bool fake_streams_waiting(bool dev);

uccl_status_t uccl_gpu_host_unregister(void *ptr)
{
    if (ptr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    /* cudaHostUnregister synchronizes the device: while a stream waits, on a
     * host flag or on a device word (a dead peer's stream will never write
     * it), it does not return on a GPU (one H200, t_gpu_stream_kill with
     * UCCL_GPU_IPC_PEER_DONE=1, session 16). Stricter than uccl_gpu_free's
     * check, which trusts a device word to come: gpu_ipc unregisters only
     * at an endpoint's end, once the caller's streams passed. */
    if (fake_streams_waiting(true)) {
        uccl_error("fake GPU: uccl_gpu_host_unregister synchronizes the device while a stream "
                   "waits on a word not set yet: on a GPU this call would not return");
        abort();
    }
    uccl_fake_device_sync("uccl_gpu_host_unregister");
    return UCCL_OK;
}

uccl_status_t uccl_gpu_stream_wait_value(uccl_gpu_stream_t stream, void *dev, uint32_t value)
{
    if (stream == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err("cuStreamWaitValue32");
    return queue_entry(stream, &(fake_copy_t){.wait = dev, .value = value, .width = 4});
}

/* Stream memory operations on (fake) device memory: queued like copies,
 * run in stream order when something drives the stream (see the top). A
 * wait on device memory is set by a peer's stream, not by a host that the
 * device sync check could blame. */
static uccl_status_t memop_queue(uccl_gpu_stream_t stream, const fake_copy_t *tmpl)
{
    uccl_status_t st;

    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err(tmpl->wait != NULL ? "cuStreamWaitValue" : "cuStreamWriteValue");
    if ((st = queue_entry(stream, tmpl)) == UCCL_OK)
        uccl_fake_ctx_touch(stream->device);
    return st;
}

uccl_status_t uccl_gpu_stream_write(uccl_gpu_stream_t stream, void *dev, uint64_t value, size_t width)
{
    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    return memop_queue(stream, &(fake_copy_t){.store = dev, .value = value, .width = (uint8_t)width});
}

uccl_status_t uccl_gpu_stream_wait_geq(uccl_gpu_stream_t stream, const void *dev, uint64_t value,
                                       size_t width)
{
    if (!uccl_gpu_value_args_ok(stream, dev, width))
        return UCCL_ERR_INVALID_PARAM;
    return memop_queue(stream, &(fake_copy_t){.wait = dev, .value = value, .width = (uint8_t)width,
                                              .dev_wait = true});
}

/* No batch here: the ops are queued one by one, in order, as a batch runs. */
uccl_status_t uccl_gpu_stream_memops(uccl_gpu_stream_t stream, const uccl_gpu_memop_t *ops, size_t n)
{
    return uccl_gpu_memops_ok(stream, ops, n) ? uccl_gpu_memops_each(stream, ops, n) : UCCL_ERR_INVALID_PARAM;
}

/* The host polls a word a stream writes: the fake device runs its streams
 * as far as they can go (a GPU would, without being asked). */
void uccl_gpu_flags_poll(void)
{
    uccl_fake_streams_flush(-1);
}

/* Does a stream wait on a host flag not set (dev too: or on a device word
 * not set)? A lost context waits on nothing: it fails every sync at once. */
static bool fake_streams_waiting(bool dev)
{
    uccl_list_t *pos;
    bool held = false;

    if (uccl_fake_ctx_lost())
        return false;
    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_for_each(pos, &uccl_fake_streams) {
        uccl_gpu_stream_t s = uccl_container_of(pos, struct uccl_gpu_stream, link);
        uccl_list_t *cpos;
        uccl_list_for_each(cpos, &s->queue) {
            fake_copy_t *c = uccl_container_of(cpos, fake_copy_t, link);
            if (c->wait != NULL && (dev || !c->dev_wait) && !uccl_fake_wait_met(c))
                held = true;
        }
    }
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return held;
}

void uccl_fake_device_sync(const char *what)
{
    if (uccl_fake_ctx_lost()) /* a lost context fails every sync at once: no hang */
        return;
    if (fake_streams_waiting(false)) {
        uccl_error("fake GPU: %s synchronizes the device while a stream waits on a host flag "
                   "not set yet: on a GPU this call would never return", what);
        abort();
    }
    uccl_fake_streams_flush(-1);
}

/* The copy kernel's copy, then the store of the word: the fake stream drops
 * a store right behind a copy that failed (fake_stream.c), as the kernel
 * never gets to it on a GPU. */
uccl_status_t uccl_gpu_sm_copy_flag_async(int device, void *dst, const void *src, size_t len, int blocks,
                                          uint32_t *count, void *word, uint32_t value,
                                          uccl_gpu_stream_t stream)
{
    uccl_status_t st;

    if (!uccl_gpu_sm_flag_args_ok(dst, src, blocks, count, stream, word))
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_gpu_sm_copy_async(device, dst, src, len, blocks, 8, stream);
    return st == UCCL_OK ? uccl_gpu_stream_write(stream, word, value, sizeof(uint32_t)) : st;
}

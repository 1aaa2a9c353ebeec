/* Test-only GPU backend (configure --enable-fake-gpu): two "devices" whose
 * memory is host memory, so that the GPU paths of the transports (pointer
 * classification, staging, GPUDirect registration, gpu_ipc) run where no GPU
 * is. uccl_gpu_backend() says "fake" so that nobody mistakes it for a GPU.
 * This file holds the devices and memory; IPC is fake_ipc.c; streams, events
 * and injected copy faults are in fake_stream.c (its top comment gives the
 * copy model).
 *
 * - Devices 0 and 1: a current device per thread (0 to start with), peer
 *   access both ways reported as NVLink, bus ids in PCI domain fa6e that no
 *   machine has. A device's "primary context" becomes active at the first
 *   call that would create it in CUDA (memory, copies, streams, events, IPC,
 *   set_device), so tests can check that host-only engines touch none.
 * - Device memory is POSIX shared memory: shm_open of a fresh name
 *   (/uccl-fakegpu-PID-N-RANDOM), backed in full at allocation (a full
 *   /dev/shm gives UCCL_ERR_NO_MEMORY, not SIGBUS later) and mapped shared;
 *   freeing waits for queued copies (as cudaFree does), unmaps and unlinks.
 * - IPC: the 64-byte handle holds a magic, the size and the name; opening it
 *   in another process maps the object as memory of the caller's current
 *   device (opening the same handle again there counts references, as the
 *   CUDA driver does; a handle of the caller's own allocation is refused, as
 *   CUDA refuses it). Closing a mapping runs the streams first; copies into
 *   it still queued behind a wait not met then fail, where a GPU would block
 *   in the close (tests/gpu/results/1xH200-rev14). Malformed handles, names
 *   not of this backend and objects that no longer exist give
 *   UCCL_ERR_INVALID_PARAM or UCCL_ERR_NOT_FOUND with an error line.
 * - No dma-buf export: device memory gives UCCL_ERR_UNSUPPORTED.
 * - uccl_gpu_free, uccl_gpu_ipc_close and uccl_gpu_host_unregister synchronize the device, as their
 *   CUDA twins do (the close waits for every stream, even unrelated ones):
 *   called while a stream waits on a host flag not set (uccl_gpu_stream_
 *   wait_value), they would wait forever on a GPU: here they abort, saying so.
 * As with CUDA, a process must fork before its first GPU call: a child
 * forked later inherits the parent's allocations as its own. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/list.h"
#include "util/log.h"
#include "util/sys.h"
#include "gpu/fake.h"

#define FAKE_MAX_ALLOCS 1024

pthread_mutex_t uccl_fake_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_alloc_t fake_allocs[FAKE_MAX_ALLOCS];
static _Thread_local int fake_cur_dev;
static atomic_int fake_ctx[FAKE_NDEV];

const char *uccl_gpu_backend(void)
{
    return "fake";
}

/* ------------------------------------------------------------ devices */

int uccl_fake_current_device(void)
{
    return fake_cur_dev;
}

void uccl_fake_ctx_touch(int device)
{
    if (device >= 0 && device < uccl_fake_count())
        atomic_store(&fake_ctx[device], 1);
}

static uccl_status_t fake_check_device(int device)
{
    return device >= 0 && device < uccl_fake_count() ? UCCL_OK : UCCL_ERR_NO_DEVICE;
}

uccl_status_t uccl_gpu_count(int *n)
{
    *n = uccl_fake_count();
    return UCCL_OK;
}

uccl_status_t uccl_gpu_primary_ctx_active(int device, int *active)
{
    uccl_status_t st = fake_check_device(device);

    if (st == UCCL_OK)
        *active = atomic_load(&fake_ctx[device]);
    return st;
}

uccl_status_t uccl_gpu_pci_bus_id(int device, char *buf, size_t len)
{
    char id[UCCL_GPU_BUS_ID_MAX];

    if (fake_check_device(device) != UCCL_OK)
        return UCCL_ERR_NO_DEVICE;
    if (buf == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    snprintf(id, sizeof(id), "fa6e:%02x:00.0", device);
    if (strlen(id) >= len)
        return UCCL_ERR_BUFFER_TOO_SMALL;
    memcpy(buf, id, strlen(id) + 1);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_device_by_bus_id(const char *bus_id, int *device)
{
    char id[UCCL_GPU_BUS_ID_MAX];

    if (bus_id == NULL || device == NULL)
        return UCCL_ERR_INVALID_PARAM;
    for (int d = 0; d < uccl_fake_count(); d++) {
        uccl_gpu_pci_bus_id(d, id, sizeof(id));
        if (strcasecmp(id, bus_id) == 0) {
            *device = d;
            return UCCL_OK;
        }
    }
    return UCCL_ERR_NOT_FOUND;
}

uccl_status_t uccl_gpu_set_device(int device)
{
    uccl_status_t st = fake_check_device(device);

    if (st == UCCL_OK) {
        fake_cur_dev = device;
        uccl_fake_ctx_touch(device); /* cudaSetDevice makes the primary context (CUDA 12) */
    }
    return st;
}

uccl_status_t uccl_gpu_get_device(int *device)
{
    *device = fake_cur_dev;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_peer_query(int device, int peer, int *can_access, int *nvlink)
{
    *can_access = *nvlink = 0;
    if (fake_check_device(device) != UCCL_OK || fake_check_device(peer) != UCCL_OK)
        return UCCL_ERR_NO_DEVICE;
    *can_access = 1;
    *nvlink = device != peer; /* as rt_common.h: a device and itself is no link */
    return UCCL_OK;
}

uccl_status_t uccl_gpu_peer_enable(int peer)
{
    uccl_status_t st = fake_check_device(peer);

    if (st == UCCL_OK)
        uccl_fake_ctx_touch(fake_cur_dev);
    return st;
}

/* ------------------------------------------------------------ memory */

/* The allocation or mapping holding ptr; with uccl_fake_alloc_lock held. */
fake_alloc_t *uccl_fake_alloc_find_locked(const void *ptr)
{
    const uint8_t *p = ptr;

    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        fake_alloc_t *a = &fake_allocs[i];
        if (a->kind != FAKE_SLOT_FREE && p >= a->base && p < a->base + a->size)
            return a;
    }
    return NULL;
}

fake_alloc_t *uccl_fake_alloc_find_name_locked(const char *name)
{
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++)
        if (fake_allocs[i].kind != FAKE_SLOT_FREE && strcmp(fake_allocs[i].name, name) == 0)
            return &fake_allocs[i];
    return NULL;
}

/* Record a new allocation or mapping; false when the table is full. */
bool uccl_fake_alloc_add(const fake_alloc_t *a)
{
    pthread_mutex_lock(&uccl_fake_alloc_lock);
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++) {
        if (fake_allocs[i].kind == FAKE_SLOT_FREE) {
            fake_allocs[i] = *a;
            pthread_mutex_unlock(&uccl_fake_alloc_lock);
            return true;
        }
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    uccl_error("fake GPU: more than %d allocations and IPC mappings", FAKE_MAX_ALLOCS);
    return false;
}

/* The entry of kind whose base is ptr; with uccl_fake_alloc_lock held. */
fake_alloc_t *uccl_fake_alloc_at_locked(const void *ptr, fake_kind_t kind)
{
    for (int i = 0; i < FAKE_MAX_ALLOCS; i++)
        if (fake_allocs[i].kind == kind && fake_allocs[i].base == ptr)
            return &fake_allocs[i];
    return NULL;
}

/* Take the entry whose base is ptr and of kind out of the table. */
static bool alloc_remove(void *ptr, fake_kind_t kind, fake_alloc_t *out)
{
    fake_alloc_t *e;

    pthread_mutex_lock(&uccl_fake_alloc_lock);
    e = uccl_fake_alloc_at_locked(ptr, kind);
    if (e != NULL) {
        *out = *e;
        *e = (fake_alloc_t){0};
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    return e != NULL;
}

uccl_status_t uccl_gpu_ptr_attr(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    fake_alloc_t *a;

    attr->type = UCCL_MEM_HOST;
    attr->device = -1;
    attr->base = (void *)ptr;
    attr->size = 0;
    pthread_mutex_lock(&uccl_fake_alloc_lock);
    a = uccl_fake_alloc_find_locked(ptr);
    if (a != NULL) {
        attr->type = UCCL_MEM_CUDA;
        attr->device = a->device;
        attr->base = a->base;
        attr->size = a->size;
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    return UCCL_OK;
}

/* No range lookup to skip here: the table holds it. */
uccl_status_t uccl_gpu_ptr_kind(const void *ptr, uccl_gpu_ptr_attr_t *attr)
{
    return uccl_gpu_ptr_attr(ptr, attr);
}

/* A fresh shared-memory object of len bytes, backed now and mapped. */
static uccl_status_t shm_create(fake_alloc_t *a)
{
    static atomic_uint counter;
    uccl_status_t st = UCCL_ERR_NO_MEMORY;
    void *p;
    int fd, err;

    snprintf(a->name, sizeof(a->name), FAKE_NAME_PREFIX "%d-%u-%08x", (int)getpid(),
             atomic_fetch_add(&counter, 1), (unsigned)uccl_random_u64());
    fd = shm_open(a->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        uccl_error("fake GPU: shm_open %s: %s", a->name, strerror(errno));
        return UCCL_ERR_IO;
    }
    err = ftruncate(fd, (off_t)a->size) == 0 ? posix_fallocate(fd, 0, (off_t)a->size) : errno;
    if (err != 0) {
        uccl_error("fake GPU: no room for %zu bytes in /dev/shm (%s): %s", a->size, a->name, strerror(err));
        goto err_unlink;
    }
    p = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        uccl_error("fake GPU: mmap of %zu bytes (%s): %s", a->size, a->name, strerror(errno));
        goto err_unlink;
    }
    close(fd);
    a->base = p;
    return UCCL_OK;

err_unlink:
    close(fd);
    shm_unlink(a->name);
    return st;
}

uccl_status_t uccl_gpu_malloc(void **ptr, size_t len)
{
    fake_alloc_t a = {.kind = FAKE_OWNED, .size = len, .device = fake_cur_dev};
    uccl_status_t st;

    if (ptr == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    uccl_fake_ctx_touch(a.device);
    st = shm_create(&a);
    if (st != UCCL_OK)
        return st;
    if (!uccl_fake_alloc_add(&a)) {
        munmap(a.base, a.size);
        shm_unlink(a.name);
        return UCCL_ERR_NO_MEMORY;
    }
    *ptr = a.base;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_free(void *ptr)
{
    fake_alloc_t a;

    if (ptr == NULL)
        return UCCL_OK;
    uccl_fake_device_sync("uccl_gpu_free");
    if (!alloc_remove(ptr, FAKE_OWNED, &a)) {
        uccl_error("fake GPU: free of %p, which uccl_gpu_malloc did not return", ptr);
        return UCCL_ERR_INVALID_PARAM;
    }
    munmap(a.base, a.size);
    shm_unlink(a.name); /* peers that opened it keep their mapping */
    return UCCL_OK;
}

/* "Pinned" host memory: plain heap memory, page aligned like cudaHostAlloc's. */
uccl_status_t uccl_gpu_host_alloc(void **ptr, size_t len)
{
    if (ptr == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    uccl_fake_ctx_touch(fake_cur_dev);
    return posix_memalign(ptr, 4096, len) == 0 ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

/* Host memory is what the fake devices see: the device pointer is the host one. */
uccl_status_t uccl_gpu_host_alloc_mapped(void **host, void **dev, size_t len)
{
    uccl_status_t st;

    if (host == NULL || dev == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_gpu_host_alloc(host, len);
    if (st != UCCL_OK)
        return st;
    memset(*host, 0, len);
    *dev = *host;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_host_free(void *ptr)
{
    uccl_fake_streams_flush(-1); /* as cudaFreeHost */
    free(ptr);
    return UCCL_OK;
}

/* The synchronous helpers copy first and then wait for the device, like
 * cudaMemcpy + cudaDeviceSynchronize: the copy itself does not wait for
 * copies queued on the (non-blocking) streams. */
uccl_status_t uccl_gpu_memcpy(void *dst, const void *src, size_t len)
{
    uccl_fake_ctx_touch(fake_cur_dev);
    if (len > 0)
        memmove(dst, src, len);
    uccl_fake_streams_flush(fake_cur_dev);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_memset(void *ptr, int value, size_t len)
{
    uccl_fake_ctx_touch(fake_cur_dev);
    memset(ptr, value, len);
    uccl_fake_streams_flush(fake_cur_dev);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_dmabuf_fd(void *base, size_t len, int *fd, uint64_t *offset)
{
    fake_alloc_t *a;

    if (fd == NULL || offset == NULL || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&uccl_fake_alloc_lock);
    a = uccl_fake_alloc_find_locked(base);
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    if (a == NULL) {
        uccl_error("dma-buf export of %p: not fake GPU device memory", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_ERR_UNSUPPORTED; /* no driver behind the fake device */
}

/* The copy kernel (gpu.h): a queued copy like the others, once "loaded" on
 * that device (UCCL_FAKE_GPU_SM_COPY=0: a build without one). */
static atomic_int fake_sm_loaded[FAKE_NDEV];

uccl_status_t uccl_gpu_sm_copy_load(int device)
{
    uccl_status_t st = fake_check_device(device);

    if (st == UCCL_OK && !uccl_fake_sm_copy_on())
        st = UCCL_ERR_UNSUPPORTED;
    if (st == UCCL_OK)
        atomic_store(&fake_sm_loaded[device], 1);
    return st;
}

uccl_status_t uccl_gpu_sm_copy_async(int device, void *dst, const void *src, size_t len, int blocks,
                                     int unroll, uccl_gpu_stream_t stream)
{
    if (!uccl_gpu_sm_copy_args_ok(dst, src, blocks, unroll) || stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (fake_check_device(device) != UCCL_OK || !atomic_load(&fake_sm_loaded[device]))
        return UCCL_ERR_UNSUPPORTED;
    return uccl_gpu_memcpy_async(dst, src, len, stream);
}

/* The batch as its copies, queued one by one (the kernel's copies are
 * unordered among themselves; gpu_ipc's batch never overlaps them). */
uccl_status_t uccl_gpu_sm_copy_batch_async(int device, void *const *dst, const void *const *src,
                                           const size_t *len, size_t n, int blocks,
                                           uccl_gpu_stream_t stream)
{
    uccl_status_t st = UCCL_OK;

    if (!uccl_gpu_sm_batch_args_ok(dst, src, n, blocks) || len == NULL || stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (fake_check_device(device) != UCCL_OK || !atomic_load(&fake_sm_loaded[device]))
        return UCCL_ERR_UNSUPPORTED;
    for (size_t i = 0; st == UCCL_OK && i < n; i++)
        st = uccl_gpu_memcpy_async(dst[i], src[i], len[i], stream);
    return st;
}

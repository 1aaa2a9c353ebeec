/* IPC of the test-only fake GPU backend: the handle (a magic, the size and
 * the shared-memory object's name), opening it as memory of the caller's
 * current device (references counted per device) and closing it; the
 * model is fake.c's top comment. The allocation table is fake.c's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "gpu/fake.h"

#define FAKE_IPC_MAGIC "uccl-fk1"

/* What uccl_gpu_ipc_get writes into the opaque handle. */
typedef struct fake_ipc_handle {
    char magic[8];
    uint64_t size;
    char name[FAKE_NAME_MAX];
} fake_ipc_handle_t;

_Static_assert(sizeof(fake_ipc_handle_t) == UCCL_GPU_IPC_HANDLE_SIZE, "fake IPC handle size");

uccl_status_t uccl_gpu_ipc_get(void *base, uccl_gpu_ipc_handle_t *handle)
{
    fake_ipc_handle_t h;
    fake_alloc_t *a;

    if (handle == NULL)
        return UCCL_ERR_INVALID_PARAM;
    memset(&h, 0, sizeof(h));
    pthread_mutex_lock(&uccl_fake_alloc_lock);
    a = uccl_fake_alloc_find_locked(base);
    if (a != NULL && a->kind == FAKE_OWNED) {
        memcpy(h.magic, FAKE_IPC_MAGIC, sizeof(h.magic));
        h.size = a->size;
        memcpy(h.name, a->name, sizeof(h.name));
        uccl_fake_ctx_touch(a->device);
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    if (h.size == 0) {
        uccl_error("fake GPU: IPC handle of %p: not device memory allocated by this process", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    memcpy(handle->bytes, &h, sizeof(h));
    return UCCL_OK;
}

/* A handle from a peer is untrusted bytes: check all of it. */
static uccl_status_t handle_parse(const uccl_gpu_ipc_handle_t *handle, fake_ipc_handle_t *h)
{
    memcpy(h, handle->bytes, sizeof(*h));
    if (memcmp(h->magic, FAKE_IPC_MAGIC, sizeof(h->magic)) != 0) {
        uccl_error("fake GPU: IPC open: not a handle of the fake GPU backend (bad magic)");
        return UCCL_ERR_INVALID_PARAM;
    }
    if (memchr(h->name, '\0', sizeof(h->name)) == NULL ||
        strncmp(h->name, FAKE_NAME_PREFIX, strlen(FAKE_NAME_PREFIX)) != 0 || strchr(h->name + 1, '/') ||
        h->size == 0 || h->size > SIZE_MAX / 2) {
        uccl_error("fake GPU: IPC open: malformed handle (name or size)");
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* Map the peer's object; its size must be the handle's. */
static uccl_status_t shm_map(const fake_ipc_handle_t *h, void **out)
{
    struct stat sb;
    void *p;
    int fd = shm_open(h->name, O_RDWR | O_CLOEXEC, 0);

    if (fd < 0) {
        uccl_error("fake GPU: IPC open of %s: %s", h->name, strerror(errno));
        return errno == ENOENT ? UCCL_ERR_NOT_FOUND : UCCL_ERR_IO;
    }
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != h->size) {
        uccl_error("fake GPU: IPC open of %s: object is not the %llu bytes the handle says", h->name,
                   (unsigned long long)h->size);
        close(fd);
        return UCCL_ERR_INVALID_PARAM;
    }
    p = mmap(NULL, (size_t)h->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        uccl_error("fake GPU: IPC open of %s: mmap: %s", h->name, strerror(errno));
        return UCCL_ERR_NO_MEMORY;
    }
    *out = p;
    return UCCL_OK;
}

/* Same handle already open on this device: one more reference. */
static uccl_status_t open_known(const fake_ipc_handle_t *h, int device, void **base)
{
    uccl_status_t st = UCCL_ERR_NOT_FOUND;
    fake_alloc_t *a;

    pthread_mutex_lock(&uccl_fake_alloc_lock);
    a = uccl_fake_alloc_find_name_locked(h->name);
    if (a != NULL && a->kind == FAKE_OWNED) {
        st = UCCL_ERR_INVALID_PARAM;
    } else if (a != NULL && a->device == device) {
        a->refs++;
        *base = a->base;
        st = UCCL_OK;
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    if (st == UCCL_ERR_INVALID_PARAM)
        uccl_error("fake GPU: IPC open of %s: an allocation of this process (CUDA refuses those too)",
                   h->name);
    return st;
}

uccl_status_t uccl_gpu_ipc_open(const uccl_gpu_ipc_handle_t *handle, void **base)
{
    fake_alloc_t a = {.kind = FAKE_MAPPED, .device = uccl_fake_current_device(), .refs = 1};
    fake_ipc_handle_t h;
    uccl_status_t st;

    if (handle == NULL || base == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = handle_parse(handle, &h);
    if (st == UCCL_OK)
        st = open_known(&h, a.device, base);
    if (st != UCCL_ERR_NOT_FOUND)
        return st;
    st = shm_map(&h, (void **)&a.base);
    if (st != UCCL_OK)
        return st;
    a.size = (size_t)h.size;
    memcpy(a.name, h.name, sizeof(a.name));
    if (!uccl_fake_alloc_add(&a)) {
        munmap(a.base, a.size);
        return UCCL_ERR_NO_MEMORY;
    }
    uccl_fake_ctx_touch(a.device);
    *base = a.base;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ipc_close(void *base)
{
    fake_alloc_t a, *e;
    bool last = false;
    int queued;

    uccl_fake_device_sync("uccl_gpu_ipc_close");
    pthread_mutex_lock(&uccl_fake_alloc_lock);
    e = uccl_fake_alloc_at_locked(base, FAKE_MAPPED);
    if (e != NULL) {
        a = *e;
        last = --e->refs == 0;
        if (last)
            *e = (fake_alloc_t){0};
    }
    pthread_mutex_unlock(&uccl_fake_alloc_lock);
    if (e == NULL) {
        uccl_error("fake GPU: IPC close of %p, which uccl_gpu_ipc_open did not return", base);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (!last)
        return UCCL_OK;
    queued = uccl_fake_streams_fault_range(a.base, a.size);
    if (queued > 0)
        uccl_error("fake GPU: IPC mapping %p closed while %d queued copies into it wait behind a wait not "
                   "met: a GPU would block in this close until it is; here they fail", base, queued);
    munmap(a.base, a.size);
    return UCCL_OK;
}

/* Host memory of uccl_mem_alloc: shared memory (a memfd mapped MAP_SHARED)
 * that a peer process on the same host can map too (shm's rdesc_ptr), with
 * a plain page-aligned allocation as the fallback where memfd_create fails.
 * The allocations live in one process-wide table (a range tree), so that
 * uccl_mem_free knows how to release them and a transport's mem_reg finds
 * the file behind a registered range (uccl_tp_host_shared). Note for users:
 * MAP_SHARED memory stays shared with a child after fork. */
#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"

typedef struct hostmem {
    uintptr_t base;
    size_t size; /* mapped bytes (len rounded up to pages) */
    int fd;
    uint32_t id; /* this process's allocation number (a reused fd gets a new one) */
} hostmem_t;

static pthread_mutex_t hostmem_lock = PTHREAD_MUTEX_INITIALIZER;
static void *hostmem_tree;
static uint32_t hostmem_next_id = 1;

/* Equal when one range holds the other: a lookup key of [addr, addr+len)
 * finds the allocation holding it (allocations never overlap). */
static int hostmem_cmp(const void *a, const void *b)
{
    const hostmem_t *x = a, *y = b;

    if (x->base + x->size <= y->base && x->size > 0)
        return -1;
    if (y->base + y->size <= x->base && y->size > 0)
        return 1;
    return 0;
}

uccl_status_t uccl_hostmem_alloc(size_t len, void **ptr)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = (len + (size_t)page - 1) & ~((size_t)page - 1);
    hostmem_t *h;
    void *p;
    int fd = memfd_create("uccl", MFD_CLOEXEC);

    if (fd < 0 || size < len) {
        uccl_debug("uccl_mem_alloc: memfd_create: %s; private memory (peers cannot map it)",
                   strerror(errno));
        if (fd >= 0)
            close(fd);
        return posix_memalign(ptr, 4096, len) == 0 ? UCCL_OK : UCCL_ERR_NO_MEMORY;
    }
    h = malloc(sizeof(*h));
    if (h == NULL || ftruncate(fd, (off_t)size) != 0 ||
        (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        free(h);
        close(fd);
        return UCCL_ERR_NO_MEMORY;
    }
    h->base = (uintptr_t)p;
    h->size = size;
    h->fd = fd;
    pthread_mutex_lock(&hostmem_lock);
    h->id = hostmem_next_id++;
    if (tsearch(h, &hostmem_tree, hostmem_cmp) == NULL) {
        pthread_mutex_unlock(&hostmem_lock);
        munmap(p, size);
        close(fd);
        free(h);
        return UCCL_ERR_NO_MEMORY;
    }
    pthread_mutex_unlock(&hostmem_lock);
    *ptr = p;
    return UCCL_OK;
}

static hostmem_t *hostmem_find(uintptr_t addr, size_t len)
{
    hostmem_t key = {addr, len, -1, 0}, **found = tfind(&key, &hostmem_tree, hostmem_cmp);

    if (found == NULL || addr < (*found)->base || addr + len > (*found)->base + (*found)->size)
        return NULL;
    return *found;
}

size_t uccl_hostmem_size(const void *ptr, bool *shared)
{
    hostmem_t *h;
    size_t size = 0;

    pthread_mutex_lock(&hostmem_lock);
    h = hostmem_find((uintptr_t)ptr, 1);
    if (h != NULL && h->base == (uintptr_t)ptr)
        size = h->size;
    pthread_mutex_unlock(&hostmem_lock);
    *shared = size > 0;
    return size;
}

bool uccl_hostmem_free(void *ptr)
{
    hostmem_t *h;

    pthread_mutex_lock(&hostmem_lock);
    h = hostmem_find((uintptr_t)ptr, 1);
    if (h == NULL || h->base != (uintptr_t)ptr) {
        pthread_mutex_unlock(&hostmem_lock);
        return false;
    }
    tdelete(h, &hostmem_tree, hostmem_cmp);
    pthread_mutex_unlock(&hostmem_lock);
    munmap((void *)h->base, h->size);
    close(h->fd);
    free(h);
    return true;
}

bool uccl_tp_host_shared(const void *addr, size_t len, int *fd, uint64_t *base, size_t *size,
                         uint32_t *id)
{
    hostmem_t *h;
    bool found;

    pthread_mutex_lock(&hostmem_lock);
    h = hostmem_find((uintptr_t)addr, len ? len : 1);
    found = h != NULL;
    if (found) {
        *fd = h->fd;
        *base = h->base;
        *size = h->size;
        if (id != NULL)
            *id = h->id;
    }
    pthread_mutex_unlock(&hostmem_lock);
    return found;
}

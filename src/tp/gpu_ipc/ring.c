/* The gpu_ipc shared-memory mailbox (see ring.h). Acquire/release on the
 * head and tail indexes order the record bytes; nothing here blocks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tp_api.h"
#include "tp/gpu_ipc/ring.h"

#define REC_HDR 8u
#define REC_WRAP 0xffffu

static size_t rec_size(size_t len)
{
    return (REC_HDR + len + 7u) & ~(size_t)7u;
}

static uccl_status_t ring_map(ipc_ring_t *ring, int fd)
{
    void *p = mmap(NULL, sizeof(ipc_ring_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED) {
        uccl_error("gpu_ipc: mmap of mailbox %s: %s", ring->name, strerror(errno));
        return UCCL_ERR_NO_MEMORY;
    }
    ring->shm = p;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_ipc_ring_create(ipc_ring_t *ring)
{
    static _Atomic unsigned counter;
    uccl_status_t st;
    int fd;

    snprintf(ring->name, sizeof(ring->name), "/uccl-gpuipc-%d-%u-%08x", (int)getpid(),
             atomic_fetch_add(&counter, 1), (unsigned)uccl_random_u64());
    fd = shm_open(ring->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        uccl_error("gpu_ipc: shm_open %s: %s", ring->name, strerror(errno));
        return UCCL_ERR_IO;
    }
    ring->linked = true;
    if (ftruncate(fd, sizeof(ipc_ring_shm_t)) != 0) {
        uccl_error("gpu_ipc: ftruncate %s: %s", ring->name, strerror(errno));
        st = UCCL_ERR_NO_MEMORY;
        goto err_unlink;
    }
    st = ring_map(ring, fd);
    if (st != UCCL_OK)
        goto err_unlink;
    close(fd);
    return UCCL_OK;

err_unlink:
    close(fd);
    shm_unlink(ring->name);
    ring->linked = false;
    return st;
}

uccl_status_t uccl_gpu_ipc_ring_attach(ipc_ring_t *ring, const char *name)
{
    uccl_status_t st;
    struct stat sb;
    int fd;

    if (strnlen(name, IPC_RING_NAME_MAX) == IPC_RING_NAME_MAX || strncmp(name, "/uccl-gpuipc-", 13) != 0)
        return UCCL_ERR_INVALID_PARAM;
    snprintf(ring->name, sizeof(ring->name), "%s", name);
    ring->linked = false;
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        uccl_error("gpu_ipc: cannot open the peer's mailbox %s: %s", name, strerror(errno));
        return UCCL_ERR_IO;
    }
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != sizeof(ipc_ring_shm_t)) {
        uccl_error("gpu_ipc: peer mailbox %s has the wrong size", name);
        close(fd);
        return UCCL_ERR_IO;
    }
    st = ring_map(ring, fd);
    close(fd);
    shm_unlink(name); /* both sides have it mapped now */
    return st;
}

void uccl_gpu_ipc_ring_destroy(ipc_ring_t *ring)
{
    if (ring->shm != NULL)
        munmap(ring->shm, sizeof(ipc_ring_shm_t));
    if (ring->linked)
        shm_unlink(ring->name);
    ring->shm = NULL;
    ring->linked = false;
}

static void put_hdr(uint8_t *p, uint32_t len, uint16_t type)
{
    memcpy(p, &len, 4);
    memcpy(p + 4, &type, 2);
    memset(p + 6, 0, 2);
}

bool uccl_gpu_ipc_ring_push(ipc_ring_t *ring, uint16_t type, const void *a, size_t alen, const void *b,
                   size_t blen)
{
    ipc_ring_shm_t *s = ring->shm;
    uint64_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_acquire);
    size_t need = rec_size(alen + blen);
    size_t pos = head % IPC_RING_BYTES, contig = IPC_RING_BYTES - pos;
    size_t total = need > contig ? contig + need : need;

    if (IPC_RING_BYTES - (head - tail) < total)
        return false;
    if (need > contig) {
        put_hdr(s->data + pos, 0, REC_WRAP);
        head += contig;
        pos = 0;
    }
    put_hdr(s->data + pos, (uint32_t)(alen + blen), type);
    if (alen)
        memcpy(s->data + pos + REC_HDR, a, alen);
    if (blen)
        memcpy(s->data + pos + REC_HDR + alen, b, blen);
    atomic_store_explicit(&s->head, head + need, memory_order_release);
    return true;
}

uccl_status_t uccl_gpu_ipc_ring_peek(ipc_ring_t *ring, uint16_t *type, const void **payload, size_t *len)
{
    ipc_ring_shm_t *s = ring->shm;
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&s->head, memory_order_acquire);

    for (;;) {
        size_t pos = tail % IPC_RING_BYTES, contig = IPC_RING_BYTES - pos;
        uint32_t rlen;
        uint16_t rtype;

        if (head == tail)
            return UCCL_ERR_NOT_FOUND;
        if (head - tail > IPC_RING_BYTES || head - tail < REC_HDR)
            return UCCL_ERR_PEER_FAILED;
        memcpy(&rlen, s->data + pos, 4);
        memcpy(&rtype, s->data + pos + 4, 2);
        if (rtype == REC_WRAP) {
            tail += contig;
            atomic_store_explicit(&s->tail, tail, memory_order_release);
            continue;
        }
        if (rlen > IPC_MSG_MAX || rec_size(rlen) > contig || rec_size(rlen) > head - tail)
            return UCCL_ERR_PEER_FAILED;
        *type = rtype;
        *payload = s->data + pos + REC_HDR;
        *len = rlen;
        return UCCL_OK;
    }
}

void uccl_gpu_ipc_ring_pop(ipc_ring_t *ring, size_t len)
{
    ipc_ring_shm_t *s = ring->shm;
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);

    atomic_store_explicit(&s->tail, tail + rec_size(len), memory_order_release);
}

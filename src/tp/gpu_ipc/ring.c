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

#define REC_HDR sizeof(uccl_spsc_hdr_t)
#define REC_ALIGN 8u

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
    uccl_spsc_attach(&ring->view, ring->shm, IPC_RING_BYTES, REC_ALIGN, false, true);
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
    if (st == UCCL_OK)
        uccl_spsc_attach(&ring->view, ring->shm, IPC_RING_BYTES, REC_ALIGN, true, false);
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

bool uccl_gpu_ipc_ring_push(ipc_ring_t *ring, uint16_t type, const void *a, size_t alen, const void *b,
                   size_t blen)
{
    uccl_spsc_hdr_t hdr = {type, (uint32_t)(REC_HDR + alen + blen)};
    uint8_t *p;

    if (alen + blen > IPC_MSG_MAX || type == UCCL_SPSC_PAD)
        return false;
    p = uccl_spsc_reserve(&ring->view, hdr.size);
    if (p == NULL)
        return false;
    memcpy(p, &hdr, sizeof(hdr));
    if (alen)
        memcpy(p + REC_HDR, a, alen);
    if (blen)
        memcpy(p + REC_HDR + alen, b, blen);
    uccl_spsc_commit(&ring->view, hdr.size);
    return true;
}

uccl_status_t uccl_gpu_ipc_ring_peek(ipc_ring_t *ring, uint16_t *type, const void **payload, size_t *len)
{
    uccl_spsc_hdr_t hdr;
    bool bad;
    const uint8_t *p = uccl_spsc_peek(&ring->view, &hdr, &bad);

    if (bad)
        return UCCL_ERR_PEER_FAILED;
    if (p == NULL)
        return UCCL_ERR_NOT_FOUND;
    if (uccl_gpu_ipc_rec_check(&hdr, type, len) != UCCL_OK)
        return UCCL_ERR_PEER_FAILED;
    *payload = p + REC_HDR;
    return UCCL_OK;
}

void uccl_gpu_ipc_ring_pop(ipc_ring_t *ring, size_t len)
{
    uccl_spsc_release(&ring->view, REC_HDR + len);
}

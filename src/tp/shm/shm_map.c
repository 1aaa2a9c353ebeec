/* Direct access to a peer's host memory (uccl_rdesc_ptr through shm):
 * memory of uccl_mem_alloc is a memfd mapped MAP_SHARED (core hostmem.c).
 * mem_reg finds the memfd behind a region and mem_pack puts its number and
 * the allocation's base into the region's key slot; the peer takes the
 * file with pidfd_getfd (the ptrace permission CMA needs too) or else
 * through /proc/PID/fd (same user), checks it is one of ours (a memfd named
 * "uccl"), maps it and keeps the mapping until the connection closes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* What a region's key slot carries: the memfd's number in the owner and
 * the address the owner mapped it at (little-endian). */
#define SHM_RKEY_LEN 12

struct uccl_tp_memh {
    int fd;
    uint64_t base;
};

uccl_status_t uccl_shm_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                               int device, uccl_tp_memh_t **out)
{
    uccl_tp_memh_t *memh;
    uint64_t base;
    size_t size;
    int fd;

    (void)tp;
    (void)device;
    *out = NULL; /* not ours to map: peers use the message path */
    if (type != UCCL_MEM_HOST || !uccl_tp_host_shared(addr, len, &fd, &base, &size, NULL))
        return UCCL_OK;
    memh = malloc(sizeof(*memh));
    if (memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    memh->fd = fd;
    memh->base = base;
    *out = memh;
    return UCCL_OK;
}

void uccl_shm_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh)
{
    (void)tp;
    free(memh);
}

size_t uccl_shm_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    (void)tp;
    uccl_put_u32(rkey, (uint32_t)memh->fd);
    uccl_put_u64(rkey + 4, memh->base);
    return SHM_RKEY_LEN;
}

/* The peer's file descriptor pfd, duplicated into this process, or -1. */
static int shm_map_take_fd(shm_ep_t *ep, int pfd)
{
    char path[64];
    int fd = -1;

    if (ep->pidfd < 0)
        ep->pidfd = (int)syscall(SYS_pidfd_open, ep->peer_pid, 0);
    if (ep->pidfd >= 0)
        fd = (int)syscall(SYS_pidfd_getfd, ep->pidfd, pfd, 0);
    if (fd < 0) {
        uccl_debug("shm: pidfd_getfd of fd %d of process %d: %s; trying /proc", pfd,
                   ep->peer_pid, strerror(errno));
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", ep->peer_pid, pfd);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            uccl_debug("shm: open %s: %s", path, strerror(errno));
    }
    return fd;
}

/* Is fd a memfd of uccl_mem_alloc ("/memfd:uccl (deleted)")? */
static bool shm_map_fd_ours(int fd)
{
    static const char want[] = "/memfd:uccl ";
    char path[64], link[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof(link) - 1);
    return n >= (ssize_t)sizeof(want) - 1 && memcmp(link, want, sizeof(want) - 1) == 0;
}

static shm_map_t *shm_map_find(shm_ep_t *ep, uint64_t region_id, uint64_t base)
{
    for (int i = 0; i < ep->nregions; i++)
        if (ep->regions[i].region_id == region_id && ep->maps[ep->regions[i].map].base == base)
            return &ep->maps[ep->regions[i].map];
    return NULL;
}

/* Map the peer's memfd pfd at base (or find it mapped: same file). */
static uccl_status_t shm_map_new(shm_ep_t *ep, int pfd, uint64_t base, int *index)
{
    struct stat sb;
    void *p;
    int fd = shm_map_take_fd(ep, pfd);

    if (fd < 0)
        return UCCL_ERR_UNSUPPORTED;
    if (!shm_map_fd_ours(fd) || fstat(fd, &sb) != 0 || sb.st_size <= 0) {
        uccl_debug("shm: fd %d of process %d is not memory of uccl_mem_alloc", pfd, ep->peer_pid);
        close(fd);
        return UCCL_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < ep->nmaps; i++)
        if (ep->maps[i].ino == sb.st_ino && ep->maps[i].dev == sb.st_dev &&
            ep->maps[i].base == base) {
            close(fd);
            *index = i;
            return UCCL_OK;
        }
    if (ep->nmaps == ep->capmaps) {
        int cap = ep->capmaps ? 2 * ep->capmaps : 8;
        shm_map_t *grown = realloc(ep->maps, (size_t)cap * sizeof(*grown));
        if (grown == NULL) {
            close(fd);
            return UCCL_ERR_NO_MEMORY;
        }
        ep->maps = grown;
        ep->capmaps = cap;
    }
    p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        uccl_debug("shm: mmap of %lld bytes of process %d: %s", (long long)sb.st_size,
                   ep->peer_pid, strerror(errno));
        return errno == ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_UNSUPPORTED;
    }
    ep->maps[ep->nmaps] = (shm_map_t){.base = base, .size = (uint64_t)sb.st_size, .local = p,
                                      .ino = sb.st_ino, .dev = sb.st_dev};
    *index = ep->nmaps++;
    return UCCL_OK;
}

static uccl_status_t shm_map_region(shm_ep_t *ep, uint64_t region_id, int pfd, uint64_t base,
                                    shm_map_t **out)
{
    int index;
    uccl_status_t st;

    if (ep->nregions == ep->capregions) {
        int cap = ep->capregions ? 2 * ep->capregions : 16;
        shm_map_region_t *grown = realloc(ep->regions, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return UCCL_ERR_NO_MEMORY;
        ep->regions = grown;
        ep->capregions = cap;
    }
    if ((st = shm_map_new(ep, pfd, base, &index)) != UCCL_OK)
        return st;
    ep->regions[ep->nregions++] = (shm_map_region_t){.region_id = region_id, .map = index};
    *out = &ep->maps[index];
    return UCCL_OK;
}

uccl_status_t uccl_shm_remote_ptr(uccl_tp_ep_t *base_ep, const uccl_req_remote_t *remote,
                                  void **ptr)
{
    shm_ep_t *ep = (shm_ep_t *)base_ep;
    shm_map_t *m;
    uint64_t base;
    int pfd;
    uccl_status_t st;

    if (remote->mem_type != UCCL_MEM_HOST || remote->rkey_len != SHM_RKEY_LEN) {
        uccl_debug("shm: peer %d's %s memory has no shm key (not from uccl_mem_alloc)",
                   ep->peer_pid, remote->mem_type == UCCL_MEM_HOST ? "host" : "GPU");
        return UCCL_ERR_UNSUPPORTED;
    }
    pfd = (int)uccl_get_u32(remote->rkey);
    base = uccl_get_u64(remote->rkey + 4);
    if (pfd < 0 || remote->addr < base)
        return UCCL_ERR_BAD_DESC;
    m = shm_map_find(ep, remote->region_id, base);
    if (m == NULL && (st = shm_map_region(ep, remote->region_id, pfd, base, &m)) != UCCL_OK)
        return st;
    if (remote->addr - base > m->size || remote->len > m->size - (remote->addr - base)) {
        uccl_debug("shm: [%llx, +%llu) is outside the peer's allocation at %llx (%llu bytes)",
                   (unsigned long long)remote->addr, (unsigned long long)remote->len,
                   (unsigned long long)base, (unsigned long long)m->size);
        return UCCL_ERR_BAD_DESC;
    }
    *ptr = (uint8_t *)m->local + (remote->addr - base);
    return UCCL_OK;
}

uint32_t uccl_shm_map_rts_key(const shm_ep_t *ep, shm_wire_iov_t *iov, uint32_t cnt)
{
    uint64_t base;
    size_t size;
    uint32_t id;
    int fd;

    if (cnt != 1 || iov[0].len > ep->tp->cfg.map_max ||
        !uccl_tp_host_shared((const void *)(uintptr_t)iov[0].addr, iov[0].len, &fd, &base,
                             &size, &id))
        return 0;
    iov[1] = (shm_wire_iov_t){.addr = base, .len = (uint32_t)fd | (uint64_t)id << 32};
    return SHM_FLAG_MAPPED;
}

/* The peer's fd number of key is in use again, so each allocation we
 * mapped under that number with another id is freed: unmap it unless a
 * region (uccl_rdesc_ptr, whose pointers live on) refers to it. The slot
 * stays, empty, so that region indexes keep their meaning. */
static void shm_map_drop_freed(shm_ep_t *ep, uint64_t key)
{
    for (int i = 0; i < ep->nmaps; i++) {
        shm_map_t *m = &ep->maps[i];
        bool used = false;

        if (m->local == NULL || m->rts_key == 0 || m->rts_key == key ||
            (uint32_t)m->rts_key != (uint32_t)key)
            continue;
        for (int r = 0; r < ep->nregions && !used; r++)
            used = ep->regions[r].map == i;
        if (used)
            continue;
        munmap(m->local, m->size);
        *m = (shm_map_t){0};
    }
}

const void *uccl_shm_map_piece(shm_ep_t *ep, const shm_wire_iov_t *piece,
                               const shm_wire_iov_t *key)
{
    shm_map_t *m = NULL;
    int index;

    if (ep->map_failed || key->len == 0)
        return NULL;
    for (int i = 0; i < ep->nmaps && m == NULL; i++)
        if (ep->maps[i].rts_key == key->len && ep->maps[i].base == key->addr)
            m = &ep->maps[i];
    if (m == NULL) {
        /* a new allocation, or one reusing a freed one's fd and address
         * (another id): take the file the peer holds under that number now */
        shm_map_drop_freed(ep, key->len);
        if (shm_map_new(ep, (int)(uint32_t)key->len, key->addr, &index) != UCCL_OK) {
            uccl_debug("shm: cannot map pid %d's memory of uccl_mem_alloc; pulling with CMA",
                       ep->peer_pid);
            ep->map_failed = true;
            return NULL;
        }
        m = &ep->maps[index];
        m->rts_key = key->len;
    }
    if (piece->addr < m->base || piece->addr - m->base > m->size ||
        piece->len > m->size - (piece->addr - m->base))
        return NULL;
    return (const uint8_t *)m->local + (piece->addr - m->base);
}

void uccl_shm_map_release(shm_ep_t *ep)
{
    shm_tp_t *tp = ep->tp;
    shm_map_t *kept = NULL;

    if (ep->nmaps > 0 && uccl_conn_status(ep->base.conn) != UCCL_OK)
        kept = realloc(tp->kept, (size_t)(tp->nkept + ep->nmaps) * sizeof(*kept));
    for (int i = 0; i < ep->nmaps; i++) {
        if (ep->maps[i].local == NULL)
            continue; /* dropped (shm_map_drop_freed) */
        if (kept != NULL)
            kept[tp->nkept++] = ep->maps[i];
        else
            munmap(ep->maps[i].local, ep->maps[i].size);
    }
    if (kept != NULL)
        tp->kept = kept;
    free(ep->maps);
    free(ep->regions);
    ep->maps = NULL;
    ep->regions = NULL;
    ep->nmaps = ep->capmaps = ep->nregions = ep->capregions = 0;
    if (ep->pidfd >= 0)
        close(ep->pidfd);
    ep->pidfd = -1;
}

void uccl_shm_map_close(shm_tp_t *tp)
{
    for (int i = 0; i < tp->nkept; i++)
        munmap(tp->kept[i].local, tp->kept[i].size);
    free(tp->kept);
    tp->kept = NULL;
    tp->nkept = 0;
}

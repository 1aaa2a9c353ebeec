/* The shared SPSC ring: reserve/commit for the producer, peek/release for
 * the consumer. No syscalls, no locks. */
#include "shm_ring.h"

#include <string.h>

void uccl_shm_ring_attach(shm_ring_t *ring, void *mem, size_t cap, bool producer, bool init)
{
    ring->ctl = mem;
    ring->data = (uint8_t *)mem + sizeof(shm_ring_ctl_t);
    ring->cap = cap;
    if (init) {
        atomic_store_explicit(&ring->ctl->head, 0, memory_order_relaxed);
        atomic_store_explicit(&ring->ctl->tail, 0, memory_order_relaxed);
    }
    if (producer) {
        ring->pos = atomic_load_explicit(&ring->ctl->head, memory_order_relaxed);
        ring->other = atomic_load_explicit(&ring->ctl->tail, memory_order_acquire);
    } else {
        ring->pos = atomic_load_explicit(&ring->ctl->tail, memory_order_relaxed);
        ring->other = atomic_load_explicit(&ring->ctl->head, memory_order_acquire);
    }
}

void *uccl_shm_ring_reserve(shm_ring_t *ring, size_t size)
{
    uint64_t need = shm_ring_align(size);
    uint64_t off = ring->pos & (ring->cap - 1);
    uint64_t contig = ring->cap - off;
    uint64_t total = contig < need ? contig + need : need;

    if (need > ring->cap / 2)
        return NULL;
    if (ring->cap - (ring->pos - ring->other) < total) {
        ring->other = atomic_load_explicit(&ring->ctl->tail, memory_order_acquire);
        if (ring->cap - (ring->pos - ring->other) < total)
            return NULL;
    }
    if (contig < need) {
        /* published together with the packet by the next commit */
        shm_pkt_hdr_t pad = {SHM_RING_PAD, (uint32_t)contig};
        memcpy(ring->data + off, &pad, sizeof(pad));
        ring->pos += contig;
        off = 0;
    }
    return ring->data + off;
}

void uccl_shm_ring_commit(shm_ring_t *ring, size_t size)
{
    ring->pos += shm_ring_align(size);
    atomic_store_explicit(&ring->ctl->head, ring->pos, memory_order_release);
}

const void *uccl_shm_ring_peek(shm_ring_t *ring, shm_pkt_hdr_t *hdr, bool *bad)
{
    *bad = false;
    for (;;) {
        uint64_t off, avail;
        const uint8_t *p;

        if (ring->pos == ring->other) {
            ring->other = atomic_load_explicit(&ring->ctl->head, memory_order_acquire);
            if (ring->pos == ring->other)
                return NULL;
        }
        off = ring->pos & (ring->cap - 1);
        avail = ring->other - ring->pos;
        p = ring->data + off;
        memcpy(hdr, p, sizeof(*hdr));
        if (hdr->size < sizeof(*hdr) || shm_ring_align(hdr->size) > avail ||
            hdr->size > ring->cap - off || avail > ring->cap) {
            *bad = true;
            return NULL;
        }
        if (hdr->type != SHM_RING_PAD)
            return p;
        uccl_shm_ring_release(ring, hdr->size);
    }
}

void uccl_shm_ring_release(shm_ring_t *ring, size_t size)
{
    ring->pos += shm_ring_align(size);
    atomic_store_explicit(&ring->ctl->tail, ring->pos, memory_order_release);
}

bool uccl_shm_ring_empty(shm_ring_t *ring)
{
    if (ring->pos != ring->other)
        return false;
    ring->other = atomic_load_explicit(&ring->ctl->head, memory_order_acquire);
    return ring->pos == ring->other;
}

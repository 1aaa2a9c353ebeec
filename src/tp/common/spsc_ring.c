/* The shared SPSC record ring (spsc_ring.h): reserve/commit for the
 * producer, peek/release for the consumer. */
#include "tp/common/spsc_ring.h"

#include <string.h>

void uccl_spsc_attach(uccl_spsc_t *ring, void *mem, size_t cap, size_t align, bool producer,
                      bool init)
{
    ring->ctl = mem;
    ring->data = (uint8_t *)mem + sizeof(uccl_spsc_ctl_t);
    ring->cap = cap;
    ring->align = align < 8 ? 8 : align;
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

void *uccl_spsc_reserve(uccl_spsc_t *ring, size_t size)
{
    uint64_t need = uccl_spsc_align(ring, size);
    uint64_t off = ring->pos & (ring->cap - 1);
    uint64_t contig = ring->cap - off;
    uint64_t total = contig < need ? contig + need : need;

    if (size < sizeof(uccl_spsc_hdr_t) || need > ring->cap / 2)
        return NULL;
    if (ring->cap - (ring->pos - ring->other) < total) {
        ring->other = atomic_load_explicit(&ring->ctl->tail, memory_order_acquire);
        if (ring->cap - (ring->pos - ring->other) < total)
            return NULL;
    }
    if (contig < need) {
        /* published together with the record by the next commit */
        uccl_spsc_hdr_t pad = {UCCL_SPSC_PAD, (uint32_t)contig};
        memcpy(ring->data + off, &pad, sizeof(pad));
        ring->pos += contig;
        off = 0;
    }
    return ring->data + off;
}

void uccl_spsc_commit(uccl_spsc_t *ring, size_t size)
{
    ring->pos += uccl_spsc_align(ring, size);
    atomic_store_explicit(&ring->ctl->head, ring->pos, memory_order_release);
}

const void *uccl_spsc_peek(uccl_spsc_t *ring, uccl_spsc_hdr_t *hdr, bool *bad)
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
        if (avail > ring->cap || avail < sizeof(*hdr)) {
            *bad = true;
            return NULL;
        }
        p = ring->data + off;
        memcpy(hdr, p, sizeof(*hdr));
        if (hdr->size < sizeof(*hdr) || uccl_spsc_align(ring, hdr->size) > avail ||
            hdr->size > ring->cap - off) {
            *bad = true;
            return NULL;
        }
        if (hdr->type != UCCL_SPSC_PAD)
            return p;
        uccl_spsc_release(ring, hdr->size);
    }
}

void uccl_spsc_release(uccl_spsc_t *ring, size_t size)
{
    ring->pos += uccl_spsc_align(ring, size);
    atomic_store_explicit(&ring->ctl->tail, ring->pos, memory_order_release);
}

bool uccl_spsc_empty(uccl_spsc_t *ring)
{
    if (ring->pos != ring->other)
        return false;
    ring->other = atomic_load_explicit(&ring->ctl->head, memory_order_acquire);
    return ring->pos == ring->other;
}

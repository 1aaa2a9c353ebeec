/* Single-producer/single-consumer byte ring in shared memory: packets of
 * variable size, 64-byte aligned, never split across the end (a PAD packet
 * fills the tail instead). head and tail are C11 atomics on their own cache
 * lines; the producer publishes with release, the consumer reads with acquire. */
#ifndef UCCL_TP_SHM_RING_H
#define UCCL_TP_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_RING_ALIGN 64 /* a packet per cache line at least: payloads stay aligned */
#define SHM_RING_PAD 1u /* packet type reserved by the ring */

/* Every packet starts with this header; size counts the header too. */
typedef struct shm_pkt_hdr {
    uint32_t type;
    uint32_t size;
} shm_pkt_hdr_t;

/* Lives in the shared segment. */
typedef struct shm_ring_ctl {
    _Alignas(64) _Atomic uint64_t head; /* bytes produced (written by the producer only) */
    char pad0[56];
    _Alignas(64) _Atomic uint64_t tail; /* bytes consumed (written by the consumer only) */
    char pad1[56];
} shm_ring_ctl_t;

/* One side's private view of a ring. */
typedef struct shm_ring {
    shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t cap; /* power of two */
    uint64_t pos;    /* producer: head; consumer: tail (own counter, kept locally) */
    uint64_t other;  /* last seen value of the other side's counter */
} shm_ring_t;

static inline size_t shm_ring_align(size_t n) { return (n + SHM_RING_ALIGN - 1) & ~(size_t)(SHM_RING_ALIGN - 1); }

/* Bytes of shared memory one ring of capacity cap needs. */
static inline size_t shm_ring_footprint(size_t cap) { return sizeof(shm_ring_ctl_t) + cap; }

/* Attach a view to the ring at mem; init zeroes the counters (creator only). */
void uccl_shm_ring_attach(shm_ring_t *ring, void *mem, size_t cap, bool producer, bool init);

/* Producer: room for a packet of size bytes, or NULL when the ring is full
 * (try again later). Write the packet there, then uccl_shm_ring_commit. */
void *uccl_shm_ring_reserve(shm_ring_t *ring, size_t size);
void uccl_shm_ring_commit(shm_ring_t *ring, size_t size);

/* Consumer: the next packet (header already checked against the ring's
 * bounds) or NULL when empty; *bad is set when the peer wrote garbage.
 * Release it with uccl_shm_ring_release once its payload has been used. */
const void *uccl_shm_ring_peek(shm_ring_t *ring, shm_pkt_hdr_t *hdr, bool *bad);
void uccl_shm_ring_release(shm_ring_t *ring, size_t size);
/* Consumer: nothing left to read. */
bool uccl_shm_ring_empty(shm_ring_t *ring);

#endif

/* The single-producer/single-consumer record ring in shared memory that
 * transports share (shm's data ring, gpu_ipc's control mailbox): records
 * of variable size, each starting with a header {type, size}, aligned to
 * the ring's alignment (8 or more), never split across the end (a PAD
 * record fills the tail instead). head and tail are C11 atomics on their
 * own cache lines; the producer publishes with release, the consumer reads
 * with acquire. Each side keeps a private view with its own counter and the
 * last value it saw of the other's, so the shared lines are touched only
 * when needed. Nothing here blocks or makes a system call.
 * Layout in the shared memory: uccl_spsc_ctl_t (128 bytes), then cap bytes. */
#ifndef UCCL_TP_COMMON_SPSC_RING_H
#define UCCL_TP_COMMON_SPSC_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UCCL_SPSC_PAD 0u /* record type reserved by the ring */

/* Every record starts with this; size counts the header too. */
typedef struct uccl_spsc_hdr {
    uint32_t type;
    uint32_t size;
} uccl_spsc_hdr_t;

/* Lives in the shared memory, before the data. */
typedef struct uccl_spsc_ctl {
    _Alignas(64) _Atomic uint64_t head; /* bytes produced (written by the producer only) */
    char pad0[56];
    _Alignas(64) _Atomic uint64_t tail; /* bytes consumed (written by the consumer only) */
    char pad1[56];
} uccl_spsc_ctl_t;

/* One side's private view of a ring. */
typedef struct uccl_spsc {
    uccl_spsc_ctl_t *ctl;
    uint8_t *data;
    uint64_t cap;   /* power of two */
    uint64_t align; /* power of two, >= 8 */
    uint64_t pos;   /* producer: head; consumer: tail (own counter, kept locally) */
    uint64_t other; /* last seen value of the other side's counter */
} uccl_spsc_t;

static inline size_t uccl_spsc_align(const uccl_spsc_t *ring, size_t n)
{
    return (n + ring->align - 1) & ~(size_t)(ring->align - 1);
}

/* Bytes of shared memory one ring of capacity cap needs. */
static inline size_t uccl_spsc_footprint(size_t cap)
{
    return sizeof(uccl_spsc_ctl_t) + cap;
}

/* Attach a view to the ring at mem (cap and align powers of two, align >=
 * 8); init zeroes the counters (the creator only, before the peer attaches). */
void uccl_spsc_attach(uccl_spsc_t *ring, void *mem, size_t cap, size_t align, bool producer,
                      bool init);

/* Producer: room for a record of size bytes (header included), or NULL when
 * the ring is full (try again later) or size is over half the ring. Write
 * the record there (header first), then uccl_spsc_commit(size). */
void *uccl_spsc_reserve(uccl_spsc_t *ring, size_t size);
void uccl_spsc_commit(uccl_spsc_t *ring, size_t size);

/* Consumer: the next record (PAD records skipped; its header, checked
 * against the ring's bounds, copied to *hdr) or NULL when empty; *bad is
 * set when the peer wrote garbage. The peer can still write the record:
 * copy before parsing. Release it with uccl_spsc_release(hdr->size as
 * peek gave it) once used. */
const void *uccl_spsc_peek(uccl_spsc_t *ring, uccl_spsc_hdr_t *hdr, bool *bad);
void uccl_spsc_release(uccl_spsc_t *ring, size_t size);
/* Consumer: nothing left to read. */
bool uccl_spsc_empty(uccl_spsc_t *ring);

#endif

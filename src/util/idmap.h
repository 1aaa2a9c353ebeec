/* An id -> object table for operations in flight (libfabric's ofi_idm /
 * indexer idea): O(1) insert, lookup and removal, freed slots reused from a
 * free list, and a generation per slot so that an id whose object is gone
 * (a stale or forged id from a peer) finds nothing instead of whatever took
 * its slot. Freed slots are reused oldest first, so that a slot's
 * generation wraps as late as possible. An id is gen << index_bits | index, within id_bits (a wire field
 * may be narrower than 64 bits: the rendezvous immediate carries 25), never 0.
 * The table grows by doubling up to 2^index_bits entries in use. */
#ifndef UCCL_UTIL_IDMAP_H
#define UCCL_UTIL_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uccl/uccl.h>

typedef struct uccl_idmap_slot {
    void *obj;       /* NULL while free */
    uint32_t gen;    /* generation of the id now (or last) given for it, 1.. */
    uint32_t next;   /* free list: index of the next free slot + 1, 0 = end */
} uccl_idmap_slot_t;

typedef struct uccl_idmap {
    uccl_idmap_slot_t *slots;
    uint32_t cap, count;
    uint32_t free_head, free_tail; /* free list (FIFO): index + 1, 0 = none */
    unsigned index_bits, gen_bits;
} uccl_idmap_t;

/* id_bits 2..64, index_bits 1..id_bits-1 (and <= 31): ids use id_bits,
 * generations the id_bits - index_bits left (at least 1). */
void uccl_idmap_init(uccl_idmap_t *m, unsigned id_bits, unsigned index_bits);
void uccl_idmap_fini(uccl_idmap_t *m);

/* Give obj (not NULL) an id: UCCL_ERR_NO_MEMORY when out of memory or when
 * 2^index_bits ids are in use. */
uccl_status_t uccl_idmap_insert(uccl_idmap_t *m, void *obj, uint64_t *id);
/* The object of id, NULL when id is not in use (never given, removed, or
 * from an older generation of its slot). */
void *uccl_idmap_lookup(const uccl_idmap_t *m, uint64_t id);
/* Drop id; returns its object (NULL when id was not in use). */
void *uccl_idmap_remove(uccl_idmap_t *m, uint64_t id);
/* The object whose id in use has low as its low bits (bits > index_bits:
 * a wire field that carries only part of an id), NULL when none; *id its
 * whole id. */
void *uccl_idmap_lookup_low(const uccl_idmap_t *m, uint64_t low, unsigned bits, uint64_t *id);
/* id was given and is not in use any more (removed, or its slot given again
 * since): a late message about something finished, not a forged id. */
bool uccl_idmap_stale(const uccl_idmap_t *m, uint64_t id);

static inline uint32_t uccl_idmap_count(const uccl_idmap_t *m)
{
    return m->count;
}

#endif

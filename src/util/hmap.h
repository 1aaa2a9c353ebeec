/* A small hash map u64 -> object, for lookups by a key the peer chooses
 * (a region id, an allocation key, a message id): open addressing with
 * linear probing and backward-shift removal (no tombstones), grown at 1/2
 * load, keys mixed with a per-map random seed so that keys a peer picks
 * cannot pile up in one probe run on purpose. Every key may be used, 0
 * included; objects are never NULL. */
#ifndef UCCL_UTIL_HMAP_H
#define UCCL_UTIL_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include <uccl/uccl.h>

typedef struct uccl_hmap_ent {
    uint64_t key;
    void *obj; /* NULL: free */
} uccl_hmap_ent_t;

typedef struct uccl_hmap {
    uccl_hmap_ent_t *ents;
    uint32_t cap, count; /* cap: 0 or a power of two */
    uint64_t seed;
} uccl_hmap_t;

void uccl_hmap_init(uccl_hmap_t *m);
void uccl_hmap_fini(uccl_hmap_t *m);
/* Map key to obj (not NULL), replacing what key had: UCCL_ERR_NO_MEMORY
 * when the table cannot grow (nothing changed). */
uccl_status_t uccl_hmap_put(uccl_hmap_t *m, uint64_t key, void *obj);
/* The object of key, NULL when none. */
void *uccl_hmap_get(const uccl_hmap_t *m, uint64_t key);
/* Drop key; returns its object (NULL when it had none). */
void *uccl_hmap_del(uccl_hmap_t *m, uint64_t key);

static inline uint32_t uccl_hmap_count(const uccl_hmap_t *m)
{
    return m->count;
}

#endif

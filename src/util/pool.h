/* Fixed-size object pool for handles. Objects are never returned to the
 * system before the pool is destroyed, and freed ones are reused oldest
 * first, so a stale handle still points at readable memory whose magic says
 * "released" (caught as UCCL_ERR_INVALID_HANDLE) for as long as possible.
 *
 * Memory: a pool grows by one chunk of per_chunk objects only when none is
 * free, so it holds the most objects ever alive at once, rounded up to a
 * chunk (a high-water mark set by the caller's window of outstanding
 * handles, not by how many were ever made), until the pool is destroyed.
 * A chunk is calloc'ed and every object's link written at once: its pages
 * count in RSS from the first get (the engine's request pool, 256 requests
 * of ~3.4 KB: one 856 KiB chunk at the first request; measured in
 * tests/perf/results/core-rss16). */
#ifndef UCCL_UTIL_POOL_H
#define UCCL_UTIL_POOL_H

#include <stddef.h>

#include "util/list.h"

typedef struct uccl_pool {
    size_t elem_size;
    size_t link_offset; /* offset of the uccl_list_t used while free */
    size_t per_chunk;
    uccl_list_t free_list;
    void *chunks; /* singly linked through the first word of each chunk */
    size_t allocated;
} uccl_pool_t;

void uccl_pool_init(uccl_pool_t *pool, size_t elem_size, size_t link_offset, size_t per_chunk);
/* Returns an object (contents as left by its last user, or zeroed when new)
 * or NULL when out of memory. */
void *uccl_pool_get(uccl_pool_t *pool);
void uccl_pool_put(uccl_pool_t *pool, void *obj);
void uccl_pool_destroy(uccl_pool_t *pool);

#endif

/* Fixed-size object pool with FIFO reuse (see pool.h for why). */
#include "util/pool.h"

#include <stdlib.h>

void uccl_pool_init(uccl_pool_t *pool, size_t elem_size, size_t link_offset, size_t per_chunk)
{
    pool->elem_size = (elem_size + 15) & ~(size_t)15;
    pool->link_offset = link_offset;
    pool->per_chunk = per_chunk ? per_chunk : 64;
    uccl_list_init(&pool->free_list);
    pool->chunks = NULL;
    pool->allocated = 0;
}

static int pool_grow(uccl_pool_t *pool)
{
    const size_t header = 16; /* keeps elements 16-byte aligned */
    char *chunk = calloc(1, header + pool->elem_size * pool->per_chunk);

    if (chunk == NULL)
        return -1;
    *(void **)chunk = pool->chunks;
    pool->chunks = chunk;
    for (size_t i = 0; i < pool->per_chunk; i++) {
        char *obj = chunk + header + i * pool->elem_size;
        uccl_list_push_back(&pool->free_list, (uccl_list_t *)(obj + pool->link_offset));
    }
    pool->allocated += pool->per_chunk;
    return 0;
}

void *uccl_pool_get(uccl_pool_t *pool)
{
    uccl_list_t *link;

    if (uccl_list_empty(&pool->free_list) && pool_grow(pool) != 0)
        return NULL;
    link = uccl_list_pop_front(&pool->free_list);
    return (char *)link - pool->link_offset;
}

void uccl_pool_put(uccl_pool_t *pool, void *obj)
{
    uccl_list_push_back(&pool->free_list, (uccl_list_t *)((char *)obj + pool->link_offset));
}

void uccl_pool_destroy(uccl_pool_t *pool)
{
    void *chunk = pool->chunks;

    while (chunk != NULL) {
        void *next = *(void **)chunk;
        free(chunk);
        chunk = next;
    }
    pool->chunks = NULL;
    uccl_list_init(&pool->free_list);
}

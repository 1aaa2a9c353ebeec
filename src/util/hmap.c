/* The u64 -> object hash map (hmap.h). */
#include "hmap.h"

#include <stdlib.h>

#include "sys.h"

#define HMAP_MIN_CAP 16

static uint32_t hmap_slot(const uccl_hmap_t *m, uint64_t key)
{
    uint64_t x = key ^ m->seed; /* splitmix64's finalizer */

    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (uint32_t)x & (m->cap - 1);
}

void uccl_hmap_init(uccl_hmap_t *m)
{
    *m = (uccl_hmap_t){.seed = uccl_random_u64()};
}

void uccl_hmap_fini(uccl_hmap_t *m)
{
    free(m->ents);
    m->ents = NULL;
    m->cap = m->count = 0;
}

/* The slot of key, or the free slot where it would go. */
static uint32_t hmap_find(const uccl_hmap_t *m, uint64_t key)
{
    uint32_t i = hmap_slot(m, key);

    while (m->ents[i].obj != NULL && m->ents[i].key != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static uccl_status_t hmap_grow(uccl_hmap_t *m)
{
    uint32_t cap = m->cap == 0 ? HMAP_MIN_CAP : m->cap * 2;
    uccl_hmap_t n = {.cap = cap, .count = m->count, .seed = m->seed};

    if (cap == 0 || (n.ents = calloc(cap, sizeof(*n.ents))) == NULL)
        return UCCL_ERR_NO_MEMORY;
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->ents[i].obj != NULL)
            n.ents[hmap_find(&n, m->ents[i].key)] = m->ents[i];
    free(m->ents);
    *m = n;
    return UCCL_OK;
}

uccl_status_t uccl_hmap_put(uccl_hmap_t *m, uint64_t key, void *obj)
{
    uint32_t i;

    if (obj == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if ((m->count + 1) * 2 > m->cap && hmap_grow(m) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    i = hmap_find(m, key);
    if (m->ents[i].obj == NULL)
        m->count++;
    m->ents[i] = (uccl_hmap_ent_t){key, obj};
    return UCCL_OK;
}

void *uccl_hmap_get(const uccl_hmap_t *m, uint64_t key)
{
    return m->cap == 0 ? NULL : m->ents[hmap_find(m, key)].obj;
}

void *uccl_hmap_del(uccl_hmap_t *m, uint64_t key)
{
    uint32_t mask = m->cap - 1, i, j;
    void *obj;

    if (m->cap == 0)
        return NULL;
    i = hmap_find(m, key);
    obj = m->ents[i].obj;
    if (obj == NULL)
        return NULL;
    /* backward shift: move up every later entry of the run whose home is
     * not between the hole and it, so no lookup stops early */
    for (j = (i + 1) & mask; m->ents[j].obj != NULL; j = (j + 1) & mask) {
        uint32_t home = hmap_slot(m, m->ents[j].key);

        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->ents[i] = m->ents[j];
            i = j;
        }
    }
    m->ents[i].obj = NULL;
    m->count--;
    return obj;
}

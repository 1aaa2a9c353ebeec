/* The id -> object table (idmap.h). */
#include "util/idmap.h"

#include <stdlib.h>
#include <string.h>

void uccl_idmap_init(uccl_idmap_t *m, unsigned id_bits, unsigned index_bits)
{
    memset(m, 0, sizeof(*m));
    if (id_bits > 64)
        id_bits = 64;
    if (index_bits > 31)
        index_bits = 31;
    if (index_bits + 1 > id_bits)
        index_bits = id_bits - 1;
    m->index_bits = index_bits;
    m->gen_bits = id_bits - index_bits > 32 ? 32 : id_bits - index_bits;
}

void uccl_idmap_fini(uccl_idmap_t *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = m->free_head = m->free_tail = 0;
}

static uint32_t idmap_gen_max(const uccl_idmap_t *m)
{
    return m->gen_bits >= 32 ? UINT32_MAX : (1u << m->gen_bits) - 1;
}

static void idmap_free_push(uccl_idmap_t *m, uint32_t index)
{
    m->slots[index].next = 0;
    if (m->free_tail != 0)
        m->slots[m->free_tail - 1].next = index + 1;
    else
        m->free_head = index + 1;
    m->free_tail = index + 1;
}

static uccl_status_t idmap_grow(uccl_idmap_t *m)
{
    uint32_t limit = 1u << m->index_bits, cap = m->cap == 0 ? 64 : m->cap * 2;
    uccl_idmap_slot_t *slots;

    if (cap > limit)
        cap = limit;
    if (cap <= m->cap)
        return UCCL_ERR_NO_MEMORY; /* every index is in use */
    slots = realloc(m->slots, (size_t)cap * sizeof(*slots));
    if (slots == NULL)
        return UCCL_ERR_NO_MEMORY;
    m->slots = slots;
    for (uint32_t i = m->cap; i < cap; i++) { /* to the free list, lowest index first */
        slots[i] = (uccl_idmap_slot_t){.obj = NULL, .gen = 0, .next = 0};
        idmap_free_push(m, i);
    }
    m->cap = cap;
    return UCCL_OK;
}

uccl_status_t uccl_idmap_insert(uccl_idmap_t *m, void *obj, uint64_t *id)
{
    uccl_idmap_slot_t *s;
    uint32_t index;

    if (obj == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (m->free_head == 0 && idmap_grow(m) != UCCL_OK)
        return UCCL_ERR_NO_MEMORY;
    index = m->free_head - 1;
    s = &m->slots[index];
    m->free_head = s->next;
    if (m->free_head == 0)
        m->free_tail = 0;
    s->obj = obj;
    s->gen = s->gen >= idmap_gen_max(m) ? 1 : s->gen + 1; /* never 0: ids are never 0 */
    s->next = 0;
    m->count++;
    *id = (uint64_t)s->gen << m->index_bits | index;
    return UCCL_OK;
}

static uccl_idmap_slot_t *idmap_slot(const uccl_idmap_t *m, uint64_t id)
{
    uint64_t index = id & ((1ull << m->index_bits) - 1), gen = id >> m->index_bits;
    uccl_idmap_slot_t *s;

    if (index >= m->cap || gen == 0 || gen > idmap_gen_max(m))
        return NULL;
    s = &m->slots[index];
    return s->obj != NULL && s->gen == gen ? s : NULL;
}

void *uccl_idmap_lookup(const uccl_idmap_t *m, uint64_t id)
{
    uccl_idmap_slot_t *s = idmap_slot(m, id);

    return s != NULL ? s->obj : NULL;
}

void *uccl_idmap_remove(uccl_idmap_t *m, uint64_t id)
{
    uccl_idmap_slot_t *s = idmap_slot(m, id);
    void *obj;

    if (s == NULL)
        return NULL;
    obj = s->obj;
    s->obj = NULL;
    idmap_free_push(m, (uint32_t)(s - m->slots));
    m->count--;
    return obj;
}

void *uccl_idmap_lookup_low(const uccl_idmap_t *m, uint64_t low, unsigned bits, uint64_t *id)
{
    uint64_t index = low & ((1ull << m->index_bits) - 1);
    uint64_t mask = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    const uccl_idmap_slot_t *s;

    if (index >= m->cap)
        return NULL;
    s = &m->slots[index];
    *id = (uint64_t)s->gen << m->index_bits | index;
    return s->obj != NULL && (*id & mask) == (low & mask) ? s->obj : NULL;
}

bool uccl_idmap_stale(const uccl_idmap_t *m, uint64_t id)
{
    uint64_t index = id & ((1ull << m->index_bits) - 1), gen = id >> m->index_bits;
    const uccl_idmap_slot_t *s;

    if (index >= m->cap || gen == 0 || gen > idmap_gen_max(m))
        return false;
    s = &m->slots[index];
    return gen < s->gen || (gen == s->gen && s->obj == NULL);
}

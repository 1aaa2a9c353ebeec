/* Intrusive doubly linked list (circular, with a head node). */
#ifndef UCCL_UTIL_LIST_H
#define UCCL_UTIL_LIST_H

#include <stddef.h>

typedef struct uccl_list {
    struct uccl_list *prev, *next;
} uccl_list_t;

#define UCCL_LIST_INIT(head) { &(head), &(head) }
#define uccl_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void uccl_list_init(uccl_list_t *head) { head->prev = head->next = head; }
static inline int uccl_list_empty(const uccl_list_t *head) { return head->next == head; }

static inline void uccl_list_insert_after(uccl_list_t *pos, uccl_list_t *elem)
{
    elem->prev = pos;
    elem->next = pos->next;
    pos->next->prev = elem;
    pos->next = elem;
}

static inline void uccl_list_push_back(uccl_list_t *head, uccl_list_t *elem)
{
    uccl_list_insert_after(head->prev, elem);
}

static inline void uccl_list_push_front(uccl_list_t *head, uccl_list_t *elem)
{
    uccl_list_insert_after(head, elem);
}

static inline void uccl_list_del(uccl_list_t *elem)
{
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
    elem->prev = elem->next = elem;
}

static inline uccl_list_t *uccl_list_pop_front(uccl_list_t *head)
{
    uccl_list_t *e = head->next;
    if (e == head)
        return NULL;
    uccl_list_del(e);
    return e;
}

static inline size_t uccl_list_length(const uccl_list_t *head)
{
    size_t n = 0;

    for (const uccl_list_t *e = head->next; e != head; e = e->next)
        n++;
    return n;
}

#define uccl_list_first(head, type, member) uccl_container_of((head)->next, type, member)

#define uccl_list_for_each(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/* Safe against removal of pos. */
#define uccl_list_for_each_safe(pos, tmp, head) \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif

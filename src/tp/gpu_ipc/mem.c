/* gpu_ipc memory: local device allocations (one IPC handle each, however
 * many regions lie in them), announcements to peers, peer allocations
 * mapped here (opened once, closed when the peer withdraws them and no copy
 * runs), and grants to access a peer's region (see ipc.h). */
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"

/* ------------------------------------------------------------ local allocations */

static ipc_alloc_t *alloc_find(ipc_tp_t *tp, void *base)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &tp->allocs) {
        ipc_alloc_t *a = uccl_container_of(pos, ipc_alloc_t, link);
        if (a->base == base)
            return a;
    }
    return NULL;
}

static bool announced_has(ipc_ep_t *ep, uint64_t gen, bool remove)
{
    for (int i = 0; i < ep->nannounced; i++) {
        if (ep->announced[i] != gen)
            continue;
        if (remove)
            ep->announced[i] = ep->announced[--ep->nannounced];
        return true;
    }
    return false;
}

/* Withdraw a from every peer it was announced to (ALLOC_GONE under its
 * base): the peer drops that announcement's mapping before it meets the
 * next allocation at the same base. */
static void alloc_withdraw(ipc_tp_t *tp, ipc_alloc_t *a)
{
    uccl_list_t *pos;
    msg_key_t m = {(uint64_t)(uintptr_t)a->base};

    uccl_list_for_each(pos, &tp->eps) {
        ipc_ep_t *ep = uccl_container_of(pos, ipc_ep_t, link);
        if (announced_has(ep, a->gen, true))
            uccl_gpu_ipc_send_msg(ep, IPC_MSG_ALLOC_GONE, &m, sizeof(m), NULL, 0);
    }
}

/* The allocation under addr, announced under its base. A known entry at
 * that base is reused only while it is the same allocation (size and IPC
 * handle): memory freed under live registrations (uccl_mem_free, whose
 * regions stay, stale, until deregistered) and allocated again at the same
 * base must not go out under the freed one's handle. Such an entry is
 * withdrawn from the peers first and left to its stale regions. */
static uccl_status_t alloc_get(ipc_tp_t *tp, void *addr, ipc_alloc_t **out)
{
    uccl_gpu_ptr_attr_t attr;
    uccl_gpu_ipc_handle_t handle;
    ipc_alloc_t *a;
    uccl_status_t st = uccl_gpu_ptr_attr(addr, &attr);

    if (st != UCCL_OK || (st = uccl_gpu_ipc_get(attr.base, &handle)) != UCCL_OK)
        return st;
    a = alloc_find(tp, attr.base);
    if (a != NULL && (a->size != attr.size || memcmp(&a->handle, &handle, sizeof(handle)) != 0)) {
        alloc_withdraw(tp, a);
        uccl_list_del(&a->link);
        a->gone = true;
        a = NULL;
    }
    if (a == NULL) {
        a = calloc(1, sizeof(*a));
        if (a == NULL)
            return UCCL_ERR_NO_MEMORY;
        a->base = attr.base;
        a->size = attr.size;
        a->handle = handle;
        a->gen = ++tp->next_gen;
        uccl_list_push_back(&tp->allocs, &a->link);
    }
    a->refs++;
    *out = a;
    return UCCL_OK;
}

/* Last region of an allocation gone: tell the peers that mapped it (a gone
 * one was withdrawn already). */
static void alloc_put(ipc_tp_t *tp, ipc_alloc_t *a)
{
    if (--a->refs > 0)
        return;
    if (!a->gone) {
        alloc_withdraw(tp, a);
        uccl_list_del(&a->link);
    }
    free(a);
}

uccl_status_t uccl_gpu_ipc_mem_reg(uccl_tp_t *base, void *addr, size_t len, uccl_mem_type_t type, int device,
                          uccl_tp_memh_t **out)
{
    ipc_tp_t *tp = (ipc_tp_t *)base;
    uccl_tp_memh_t *memh = calloc(1, sizeof(*memh));
    uccl_status_t st;

    (void)device;
    if (memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    memh->addr = addr;
    memh->len = len;
    memh->type = type;
    if (type != UCCL_MEM_HOST) {
        st = alloc_get(tp, addr, &memh->alloc);
        if (st != UCCL_OK) {
            free(memh);
            return st;
        }
    }
    *out = memh;
    return UCCL_OK;
}

void uccl_gpu_ipc_mem_dereg(uccl_tp_t *base, uccl_tp_memh_t *memh)
{
    ipc_tp_t *tp = (ipc_tp_t *)base;
    uccl_list_t *pos;

    if (memh->tgt_inflight > 0)
        uccl_gpu_ipc_ops_forget_memh(tp, memh);
    if (memh->granted) {
        msg_key_t m = {memh->region_id};
        uccl_list_for_each(pos, &tp->eps)
            uccl_gpu_ipc_send_msg(uccl_container_of(pos, ipc_ep_t, link), IPC_MSG_REVOKE, &m, sizeof(m), NULL, 0);
    }
    if (memh->alloc != NULL)
        alloc_put(tp, memh->alloc);
    free(memh);
}

uccl_status_t uccl_gpu_ipc_announce(ipc_ep_t *ep, ipc_alloc_t *a)
{
    msg_alloc_t m;
    uccl_status_t st;

    if (a->gone) /* a stale region's: its memory was freed */
        return UCCL_ERR_STALE;
    if (announced_has(ep, a->gen, false))
        return UCCL_OK;
    if (ep->nannounced == ep->cap_announced) {
        int cap = ep->cap_announced ? ep->cap_announced * 2 : 16;
        uint64_t *arr = realloc(ep->announced, (size_t)cap * sizeof(*arr));
        if (arr == NULL)
            return UCCL_ERR_NO_MEMORY;
        ep->announced = arr;
        ep->cap_announced = cap;
    }
    m.key = (uint64_t)(uintptr_t)a->base;
    m.size = a->size;
    m.handle = a->handle;
    st = uccl_gpu_ipc_send_msg(ep, IPC_MSG_ALLOC, &m, sizeof(m), NULL, 0);
    if (st == UCCL_OK)
        ep->announced[ep->nannounced++] = a->gen;
    return st;
}

/* ------------------------------------------------------------ peer allocations */

ipc_map_t *uccl_gpu_ipc_map_find(ipc_ep_t *ep, uint64_t key)
{
    return uccl_hmap_get(&ep->map_keys, key);
}

static void map_retire(ipc_ep_t *ep, ipc_map_t *map)
{
    if (uccl_hmap_get(&ep->map_keys, map->key) == map)
        uccl_hmap_del(&ep->map_keys, map->key);
    uccl_list_del(&map->link);
    uccl_list_push_back(&ep->zombies, &map->link);
}

/* The peer's word for an allocation's size bounds every copy from or to
 * it (peer_plan, grants): check it against the range the runtime reports
 * for the mapping, where it reports one. */
static uccl_status_t map_check_size(const ipc_ep_t *ep, const ipc_map_t *map)
{
    uccl_gpu_ptr_attr_t attr;
    uintptr_t p = (uintptr_t)map->ptr, base, end;

    if (uccl_gpu_ptr_attr(map->ptr, &attr) != UCCL_OK || attr.type == UCCL_MEM_HOST || attr.size == 0)
        return UCCL_OK; /* the runtime cannot tell: nothing to check against */
    base = (uintptr_t)attr.base;
    end = base + attr.size;
    if (p >= base && p < end && map->size <= end - p)
        return UCCL_OK;
    uccl_error("gpu_ipc: pid %d announced a %zu-byte allocation; its mapping at %p lies in a "
               "%zu-byte range at %p", ep->peer_pid, map->size, map->ptr, attr.size, attr.base);
    return UCCL_ERR_PEER_FAILED;
}

/* Take a reference on the mapping of the peer allocation m describes,
 * opening it on first use; a different handle under a known key means the
 * peer freed and reallocated: the old mapping is retired. */
uccl_status_t uccl_gpu_ipc_map_get(ipc_ep_t *ep, const msg_alloc_t *m, ipc_map_t **out)
{
    ipc_map_t *map = uccl_gpu_ipc_map_find(ep, m->key);
    uccl_status_t st;

    if (map != NULL && memcmp(&map->handle, &m->handle, sizeof(m->handle)) == 0) {
        map->refs++;
        *out = map;
        return UCCL_OK;
    }
    if (map != NULL)
        map_retire(ep, map);
    /* a retired mapping still open may hold the same IPC handle (CUDA gives
     * one to neighbouring small allocations and to a new allocation at a
     * freed one's address): a second open would fail with AlreadyMapped */
    if (!uccl_list_empty(&ep->zombies))
        uccl_gpu_ipc_maps_release(ep, false);
    map = calloc(1, sizeof(*map));
    if (map == NULL)
        return UCCL_ERR_NO_MEMORY;
    map->key = m->key;
    map->size = m->size;
    map->handle = m->handle;
    if (ep->peer_pid == ep->tp->base.params->pid) {
        map->ptr = (void *)(uintptr_t)m->key; /* same process: the pointer is ours */
    } else {
        st = m->size > 0 ? uccl_gpu_ipc_use_device(ep->tp, ep->peer_device) : UCCL_ERR_PEER_FAILED;
        if (st == UCCL_OK)
            st = uccl_gpu_ipc_open(&m->handle, &map->ptr);
        if (st == UCCL_OK && (st = map_check_size(ep, map)) != UCCL_OK)
            uccl_gpu_ipc_close(map->ptr);
        if (st != UCCL_OK) {
            uccl_error("gpu_ipc: cannot map a %zu-byte allocation of pid %d: %s", (size_t)m->size,
                       ep->peer_pid, uccl_strerror(st));
            free(map);
            return st;
        }
    }
    map->refs = 1;
    if (uccl_hmap_put(&ep->map_keys, map->key, map) != UCCL_OK) {
        if (ep->peer_pid != ep->tp->base.params->pid)
            uccl_gpu_ipc_close(map->ptr);
        free(map);
        return UCCL_ERR_NO_MEMORY;
    }
    uccl_list_push_back(&ep->maps, &map->link);
    *out = map;
    return UCCL_OK;
}

void uccl_gpu_ipc_map_put(ipc_ep_t *ep, ipc_map_t *map)
{
    if (--map->refs == 0)
        map_retire(ep, map);
}

/* Close retired mappings once no copy may use them (all = ep going away).
 * One that a pointer of uccl_rdesc_ptr reached waits until the caller's
 * streams passed every stream-ordered call of the engine: a peer that
 * deregisters its region after a failure (its comm destroyed) does not know
 * that this process's stream still has copies into it queued, perhaps
 * behind a wait that only this engine's progress releases. Closing it then
 * would wait for that stream forever (cudaIpcCloseMemHandle waits for the
 * device: tests/gpu/results/1xH200-rev14) or, where it did not, let the
 * copies fault. At the ep's end such a mapping moves to the orphans. */
void uccl_gpu_ipc_maps_release(ipc_ep_t *ep, bool all)
{
    uccl_list_t *pos, *tmp;
    bool passed, held = uccl_engine_stream_holds(ep->tp->base.engine) > 0;

    if (!all && !uccl_list_empty(&ep->ops))
        return;
    /* closing a mapping synchronizes the device: not while a caller's
     * stream waits on this engine's progress (a stream hold); at the ep's
     * end (its peer gone) every mapping then goes to the orphans, closed
     * once the holds are out (else this progress would wait forever for a
     * stream that only it releases) */
    if (!all && held)
        return;
    if (all)
        while (!uccl_list_empty(&ep->maps))
            map_retire(ep, uccl_list_first(&ep->maps, ipc_map_t, link));
    passed = uccl_engine_streams_passed(ep->tp->base.engine);
    uccl_list_for_each_safe(pos, tmp, &ep->zombies) {
        ipc_map_t *map = uccl_container_of(pos, ipc_map_t, link);
        bool busy = map->ptr_refs > 0 || (map->ptr_used && !passed) || held;
        /* refs: retired while a grant or an announcement still holds it
         * (another allocation came at its key): closed once they let go */
        if ((busy || map->refs > 0) && !all)
            continue;
        uccl_list_del(&map->link);
        if (busy) {
            map->own = ep->peer_pid == ep->tp->base.params->pid;
            map->dev = ep->peer_device;
            uccl_list_push_back(&ep->tp->orphans, &map->link);
            continue;
        }
        if (ep->peer_pid != ep->tp->base.params->pid && uccl_gpu_ipc_use_device(ep->tp, ep->peer_device) == UCCL_OK)
            uccl_gpu_ipc_close(map->ptr);
        free(map);
    }
}

/* At transport close, or from progress once the streams passed. */
void uccl_gpu_ipc_orphans_close(ipc_tp_t *tp)
{
    while (!uccl_list_empty(&tp->orphans)) {
        ipc_map_t *map = uccl_list_first(&tp->orphans, ipc_map_t, link);
        uccl_list_del(&map->link);
        if (!map->own && uccl_gpu_ipc_use_device(tp, map->dev) == UCCL_OK)
            uccl_gpu_ipc_close(map->ptr);
        free(map);
    }
}

/* ------------------------------------------------------------ grants */

/* Target side: check the region, answer with its range and allocation. */
void uccl_gpu_ipc_on_grant_req(ipc_ep_t *ep, const msg_grant_req_t *m)
{
    uccl_engine_t *engine = ep->tp->base.engine;
    uccl_region_t *region;
    uccl_tp_memh_t *memh;
    msg_grant_t g;
    uccl_status_t st = uccl_engine_region_find(engine, m->region_id, m->addr, m->len, &region);

    memset(&g, 0, sizeof(g));
    g.region_id = m->region_id;
    memh = st == UCCL_OK ? uccl_region_memh(region, &ep->tp->base) : NULL;
    if (st == UCCL_OK && (memh == NULL || memh->alloc == NULL))
        st = UCCL_ERR_REMOTE_ACCESS; /* host memory is never mapped by peers */
    if (st == UCCL_OK && memh->alloc->gone)
        st = UCCL_ERR_REMOTE_ACCESS; /* stale: its memory was freed (alloc_get) */
    if (st == UCCL_OK) {
        memh->region_id = uccl_region_id(region);
        memh->granted = true;
        g.addr = (uint64_t)(uintptr_t)uccl_region_addr(region);
        g.len = uccl_region_len(region);
        g.alloc.key = (uint64_t)(uintptr_t)memh->alloc->base;
        g.alloc.size = memh->alloc->size;
        g.alloc.handle = memh->alloc->handle;
    } else {
        uccl_debug("gpu_ipc: refusing access to region %llu for pid %d",
                   (unsigned long long)m->region_id, ep->peer_pid);
    }
    g.status = st;
    uccl_gpu_ipc_send_msg(ep, IPC_MSG_GRANT, &g, sizeof(g), NULL, 0);
}

ipc_grant_t *uccl_gpu_ipc_grant_find(ipc_ep_t *ep, uint64_t region_id)
{
    return uccl_hmap_get(&ep->grant_ids, region_id);
}

uccl_status_t uccl_gpu_ipc_grant_add(ipc_ep_t *ep, const msg_grant_t *m)
{
    ipc_grant_t *g;
    uccl_status_t st;

    if (m->addr < m->alloc.key || m->len > m->alloc.size || m->addr - m->alloc.key > m->alloc.size - m->len) {
        uccl_gpu_ipc_ep_fail(ep, "grant outside its allocation");
        return UCCL_ERR_PEER_FAILED;
    }
    if (uccl_gpu_ipc_grant_find(ep, m->region_id) != NULL)
        return UCCL_OK; /* a second answer for the same region: the first one serves */
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_gpu_ipc_map_get(ep, &m->alloc, &g->map);
    if (st != UCCL_OK) {
        free(g);
        return st;
    }
    g->region_id = m->region_id;
    g->addr = m->addr;
    g->len = m->len;
    if (uccl_hmap_put(&ep->grant_ids, g->region_id, g) != UCCL_OK) {
        uccl_gpu_ipc_map_put(ep, g->map);
        free(g);
        return UCCL_ERR_NO_MEMORY;
    }
    uccl_list_push_back(&ep->grants, &g->link);
    return UCCL_OK;
}

void uccl_gpu_ipc_on_revoke(ipc_ep_t *ep, uint64_t region_id)
{
    ipc_map_t *pm = uccl_hmap_del(&ep->ptr_maps, region_id);
    ipc_grant_t *g = uccl_gpu_ipc_grant_find(ep, region_id);

    if (pm != NULL) { /* uccl_rdesc_ptr's pointer ends with the region */
        pm->ptr_refs--;
        uccl_gpu_ipc_map_put(ep, pm);
    }

    if (g == NULL)
        return;
    uccl_hmap_del(&ep->grant_ids, region_id);
    uccl_list_del(&g->link);
    uccl_gpu_ipc_map_put(ep, g->map);
    free(g);
}

/* ------------------------------------------------------------ direct pointers */

#define PTR_ASKED ((void *)1)
#define PTR_REFUSED ((void *)2)

void uccl_gpu_ipc_ptr_refused(ipc_ep_t *ep, uint64_t region_id)
{
    (void)uccl_hmap_put(&ep->ptr_asked, region_id, PTR_REFUSED);
}

/* The mapping stays (a reference of its own) until the peer revokes the
 * region (deregistered: uccl.h asks the peer to keep it registered while
 * the pointer is used) or the ep goes, and after that until the caller's
 * streams passed (uccl_gpu_ipc_maps_release): a stream may still write
 * there. A new
 * allocation at the same address gets a new mapping: CUDA may hand out the
 * same IPC handle bytes for it, so the old one must be gone by then. */
uccl_status_t uccl_gpu_ipc_remote_ptr(uccl_tp_ep_t *base, const uccl_req_remote_t *r, void **ptr)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;
    ipc_map_t *map = uccl_hmap_get(&ep->ptr_maps, r->region_id);
    ipc_grant_t *g;
    void *asked;
    uccl_status_t st;

    if (r->mem_type == UCCL_MEM_HOST)
        return UCCL_ERR_REMOTE_ACCESS; /* host memory is never mapped by peers */
    if (map == NULL) {
        uccl_gpu_ipc_ep_poll(ep); /* a revoke on its way: its mapping closed before a new one opens */
        if (ep->failed)
            return UCCL_ERR_PEER_FAILED;
        if (!uccl_list_empty(&ep->zombies))
            uccl_gpu_ipc_maps_release(ep, false);
        g = uccl_gpu_ipc_grant_find(ep, r->region_id);
        asked = uccl_hmap_get(&ep->ptr_asked, r->region_id);
        if (g == NULL && asked == PTR_REFUSED)
            return UCCL_ERR_REMOTE_ACCESS;
        if (g == NULL && asked == NULL) {
            msg_grant_req_t m = {r->region_id, r->addr, r->len};
            if ((st = uccl_hmap_put(&ep->ptr_asked, r->region_id, PTR_ASKED)) != UCCL_OK ||
                (st = uccl_gpu_ipc_send_msg(ep, IPC_MSG_GRANT_REQ, &m, sizeof(m), NULL, 0)) != UCCL_OK)
                return st;
        }
        if (g == NULL)
            return UCCL_INPROGRESS;
        if (r->addr < g->addr || r->len > g->len || r->addr - g->addr > g->len - r->len)
            return UCCL_ERR_REMOTE_ACCESS;
        map = g->map;
        if ((st = uccl_hmap_put(&ep->ptr_maps, r->region_id, map)) != UCCL_OK)
            return st;
        map->refs++;
        map->ptr_refs++;
        map->ptr_used = true;
        uccl_hmap_del(&ep->ptr_asked, r->region_id);
    }
    if (r->addr < map->key || r->len > map->size || r->addr - map->key > map->size - r->len)
        return UCCL_ERR_REMOTE_ACCESS;
    *ptr = (char *)map->ptr + (r->addr - map->key);
    return UCCL_OK;
}

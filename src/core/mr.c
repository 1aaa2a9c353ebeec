/* Memory registration with a registration cache: registering a range that
 * is already registered (same start, length and memory type) shares the
 * existing region (O(log n) lookup); the last deregistration releases it
 * eagerly, so freed and reused memory never meets a stale registration. */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "gpu/gpu.h"

static int region_cmp_range(const void *a, const void *b)
{
    const uccl_region_t *x = a, *y = b;

    if (x->addr != y->addr)
        return (char *)x->addr < (char *)y->addr ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return (int)x->mem_type - (int)y->mem_type;
}

static int region_cmp_id(const void *a, const void *b)
{
    const uccl_region_t *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static void region_tp_dereg(uccl_engine_t *engine, uccl_region_t *region)
{
    for (int i = 0; i < engine->ntp; i++) {
        uccl_tp_t *tp = engine->tp[i];
        if (region->memh[i] != NULL && tp->ops->mem_dereg != NULL)
            tp->ops->mem_dereg(tp, region->memh[i]);
        region->memh[i] = NULL;
    }
}

static uccl_status_t region_create(uccl_engine_t *engine, void *ptr, size_t len,
                                   const uccl_gpu_ptr_attr_t *attr, uccl_region_t **out)
{
    uccl_region_t *region = calloc(1, sizeof(*region));
    uccl_status_t st = UCCL_OK;

    if (region == NULL)
        return UCCL_ERR_NO_MEMORY;
    region->addr = ptr;
    region->len = len;
    region->mem_type = attr->type;
    region->device = attr->device;
    region->alloc_base = attr->base ? attr->base : ptr;
    region->alloc_size = attr->size ? attr->size : len;
    region->id = uccl_region_id_next(engine);
    for (int i = 0; i < engine->ntp; i++) {
        uccl_tp_t *tp = engine->tp[i];
        if (!(tp->ops->caps & UCCL_TP_CAP_MEM_REG) || tp->ops->mem_reg == NULL)
            continue;
        st = tp->ops->mem_reg(tp, ptr, len, attr->type, attr->device, &region->memh[i]);
        if (st != UCCL_OK) {
            uccl_error("%s: cannot register %zu bytes at %p: %s", tp->ops->name, len, ptr,
                       uccl_strerror(st));
            goto err_dereg;
        }
    }
    if (tsearch(region, &engine->region_by_id, region_cmp_id) == NULL) {
        st = UCCL_ERR_NO_MEMORY;
        goto err_dereg;
    }
    *out = region;
    return UCCL_OK;

err_dereg:
    region_tp_dereg(engine, region);
    free(region);
    return st;
}

static void region_destroy(uccl_engine_t *engine, uccl_region_t *region)
{
    /* a released region left the range cache, where a new region of the
     * same range may be now */
    if (region->in_rcache)
        tdelete(region, &engine->rcache_by_range, region_cmp_range);
    tdelete(region, &engine->region_by_id, region_cmp_id);
    region_tp_dereg(engine, region);
    free(region);
}

/* Is every page of host range [ptr, ptr+len) mapped? msync(MS_ASYNC) walks
 * the process's mappings over the range and does nothing else (no page
 * walk, no I/O since Linux 2.6.19): about 0.1 us whatever len, where
 * /proc/self/maps costs ~80 us and mincore a page walk. It does not see
 * protections: mapped PROT_NONE or read-only memory passes. */
static uccl_status_t host_range_check(void *ptr, size_t len)
{
    long pagesize = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)ptr & ~(uintptr_t)(pagesize - 1);

    if (msync((void *)start, (uintptr_t)ptr - start + len, MS_ASYNC) == 0)
        return UCCL_OK;
    uccl_error("uccl_mr_reg: [%p, %p) (%zu bytes) is not all mapped memory of this process (%s)",
               ptr, (void *)((uintptr_t)ptr + len), len, strerror(errno));
    return UCCL_ERR_INVALID_PARAM;
}

static uccl_status_t region_get(uccl_engine_t *engine, void *ptr, size_t len, uccl_region_t **out)
{
    uccl_gpu_ptr_attr_t attr;
    uccl_region_t key, **found;
    uccl_status_t st = uccl_gpu_ptr_attr(ptr, &attr);

    if (st != UCCL_OK)
        return st;

    key.addr = ptr;
    key.len = len;
    key.mem_type = attr.type;
    if (engine->cfg.rcache) {
        found = tfind(&key, &engine->rcache_by_range, region_cmp_range);
        if (found != NULL) {
            (*found)->refcount++;
            *out = *found;
            return UCCL_OK;
        }
    }
    /* an unmapped host range would crash the first copy, ours or the one a
     * peer's write makes here: refuse it (once per region; cache hits skip it) */
    if (attr.type == UCCL_MEM_HOST && (st = host_range_check(ptr, len)) != UCCL_OK)
        return st;
    st = region_create(engine, ptr, len, &attr, out);
    if (st != UCCL_OK)
        return st;
    if (engine->cfg.rcache && tsearch(*out, &engine->rcache_by_range, region_cmp_range) == NULL) {
        region_destroy(engine, *out);
        return UCCL_ERR_NO_MEMORY;
    }
    (*out)->in_rcache = engine->cfg.rcache;
    (*out)->refcount = 1;
    return UCCL_OK;
}

uccl_status_t uccl_mr_reg(uccl_engine_t *engine, void *ptr, size_t len, unsigned flags,
                          uccl_mr_t **mr_out)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_region_t *region;
    uccl_mr_t *mr;

    if (st != UCCL_OK)
        return st;
    if (ptr == NULL || len == 0 || mr_out == NULL || (uintptr_t)ptr + len < (uintptr_t)ptr ||
        (flags & ~(unsigned)UCCL_MR_LOCAL_ONLY) != 0)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(engine);
    mr = uccl_pool_get(&engine->mr_pool);
    if (mr == NULL) {
        st = UCCL_ERR_NO_MEMORY;
        goto out;
    }
    st = region_get(engine, ptr, len, &region);
    if (st != UCCL_OK) {
        uccl_pool_put(&engine->mr_pool, mr);
        goto out;
    }
    mr->magic = UCCL_MAGIC_MR;
    mr->flags = flags;
    mr->engine = engine;
    mr->region = region;
    mr->addr = ptr;
    mr->len = len;
    mr->inflight = 0;
    *mr_out = mr;
out:
    uccl_engine_unlock(engine);
    return st;
}

uccl_status_t uccl_mr_dereg(uccl_mr_t *mr)
{
    uccl_status_t st = uccl_mr_check(mr);
    uccl_engine_t *engine;

    if (st != UCCL_OK)
        return st;
    engine = mr->engine;
    uccl_engine_lock(engine);
    if (mr->inflight > 0) {
        uccl_warn("uccl_mr_dereg: %d requests still use region %p", mr->inflight, mr->addr);
        uccl_engine_unlock(engine);
        return UCCL_ERR_BUSY;
    }
    if (mr->region->refcount == 1 && mr->region->held > 0) {
        uccl_warn("uccl_mr_dereg: a peer's write or read of region %p is still being copied",
                  mr->addr);
        uccl_engine_unlock(engine);
        return UCCL_ERR_BUSY;
    }
    if (--mr->region->refcount == 0)
        region_destroy(engine, mr->region);
    mr->magic = UCCL_MAGIC_DEAD;
    mr->region = NULL;
    uccl_pool_put(&engine->mr_pool, mr);
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

uccl_status_t uccl_mr_query(const uccl_mr_t *mr, uccl_mr_attr_t *attr)
{
    uccl_status_t st = uccl_mr_check(mr);

    if (st != UCCL_OK)
        return st;
    if (attr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    attr->addr = mr->addr;
    attr->len = mr->len;
    attr->mem_type = mr->region->mem_type;
    attr->device = mr->region->device;
    return mr->region->released ? UCCL_ERR_STALE : UCCL_OK;
}

/* uccl_mem_free is about to free [base, base+size): every region over it
 * becomes stale (uccl_mr_query says so) and leaves the range cache, so
 * that memory mapped there later gets a registration of its own. twalk
 * has no user argument: the range travels in statics, under a lock. */
static pthread_mutex_t released_lock = PTHREAD_MUTEX_INITIALIZER;
static uccl_engine_t *released_engine;
static uintptr_t released_start, released_end;
static bool released_held; /* uccl_mr_range_held's answer */

static bool region_over_range(const uccl_region_t *region)
{
    uintptr_t start = (uintptr_t)region->addr;

    return start < released_end && start + region->len > released_start;
}

static void region_find_held(const void *node, VISIT which, int depth)
{
    const uccl_region_t *region = *(const uccl_region_t *const *)node;

    (void)depth;
    if ((which == postorder || which == leaf) && region->held > 0 && region_over_range(region))
        released_held = true;
}

bool uccl_mr_range_held(uccl_engine_t *engine, const void *base, size_t size)
{
    bool held;

    pthread_mutex_lock(&released_lock);
    released_start = (uintptr_t)base;
    released_end = (uintptr_t)base + (size ? size : 1);
    released_held = false;
    twalk(engine->region_by_id, region_find_held);
    held = released_held;
    pthread_mutex_unlock(&released_lock);
    return held;
}

static void region_mark_released(const void *node, VISIT which, int depth)
{
    uccl_region_t *region = *(uccl_region_t *const *)node;

    (void)depth;
    if ((which != postorder && which != leaf) || !region_over_range(region))
        return;
    region->released = true;
    if (region->in_rcache) {
        tdelete(region, &released_engine->rcache_by_range, region_cmp_range);
        region->in_rcache = false;
    }
}

void uccl_mr_release_range(uccl_engine_t *engine, const void *base, size_t size)
{
    pthread_mutex_lock(&released_lock);
    released_engine = engine;
    released_start = (uintptr_t)base;
    released_end = (uintptr_t)base + (size ? size : 1);
    twalk(engine->region_by_id, region_mark_released);
    released_engine = NULL;
    pthread_mutex_unlock(&released_lock);
}

/* Does one more key of len bytes fit beside f's keys in the key area? */
static bool rdesc_keys_fit(const uccl_rdesc_fields_t *f, size_t len)
{
    size_t used = 0;

    for (int i = 0; i < f->nkeys; i++)
        used += 2 + (size_t)f->keys[i].len;
    return used + 2 + len <= UCCL_RDESC_KEY_AREA;
}

uccl_status_t uccl_mr_pack(const uccl_mr_t *mr, size_t off, size_t len, uccl_rdesc_t *rdesc)
{
    uccl_status_t st = uccl_mr_check(mr);
    uccl_rdesc_fields_t f;
    const uccl_engine_t *engine;

    if (st != UCCL_OK)
        return st;
    if (rdesc == NULL || (mr->flags & UCCL_MR_LOCAL_ONLY))
        return UCCL_ERR_INVALID_PARAM;
    if (off > mr->len || len > mr->len - off)
        return UCCL_ERR_OUT_OF_BOUNDS;
    engine = mr->engine;
    memset(&f, 0, sizeof(f));
    f.engine_id = engine->id;
    f.region_id = mr->region->id;
    f.addr = (uint64_t)(uintptr_t)mr->addr + off;
    f.len = len;
    f.mem_type = mr->region->mem_type;
    f.device = mr->region->device;
    /* one key slot per transport that needs remote keys: the initiator
     * takes the slot of the transport its connection uses (xfer.c). Network
     * transports' keys first; a same-host transport's key (shm: direct
     * mapping, the message path works without it) only where it fits. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < engine->ntp; i++) {
            const uccl_tp_t *tp = engine->tp[i];
            uccl_rdesc_key_t *key = &f.keys[f.nkeys];
            bool optional = (tp->ops->caps & UCCL_TP_CAP_SAME_HOST) != 0;

            if (!(tp->ops->caps & UCCL_TP_CAP_RKEY) || mr->region->memh[i] == NULL ||
                optional != (pass == 1))
                continue;
            if (f.nkeys == UCCL_RDESC_MAX_KEYS) {
                if (optional)
                    continue;
                uccl_error("uccl_mr_pack: more transports with remote keys than descriptor slots");
                return UCCL_ERR_UNSUPPORTED;
            }
            key->owner = tp->ops->rkey_owner;
            key->len = (uint8_t)tp->ops->mem_pack((uccl_tp_t *)tp, mr->region->memh[i], key->key);
            if (key->len > 0 && optional && !rdesc_keys_fit(&f, key->len))
                key->len = 0;
            if (key->len > 0)
                f.nkeys++;
        }
    st = uccl_rdesc_encode(&f, rdesc);
    if (st != UCCL_OK)
        uccl_error("uccl_mr_pack: cannot encode a descriptor of device %d with %d key slots "
                   "(%d bytes shared by the slots)", f.device, f.nkeys, UCCL_RDESC_KEY_AREA);
    return st == UCCL_OK ? UCCL_OK : UCCL_ERR_UNSUPPORTED;
}

uccl_status_t uccl_engine_region_find(uccl_engine_t *engine, uint64_t region_id, uint64_t addr,
                                      uint64_t len, uccl_region_t **out)
{
    uccl_region_t key, **found;
    uint64_t start, end;

    if (UCCL_REGION_INCARNATION(region_id) != UCCL_REGION_INCARNATION(engine->id))
        return UCCL_ERR_STALE; /* a descriptor of another incarnation of this engine */
    key.id = region_id;
    found = tfind(&key, &engine->region_by_id, region_cmp_id);
    /* released: uccl_mem_free freed its memory (the region stays, stale,
     * until deregistered): nothing reaches it any more */
    if (found == NULL || (*found)->released)
        return UCCL_ERR_REMOTE_ACCESS;
    start = (uint64_t)(uintptr_t)(*found)->addr;
    end = start + (*found)->len;
    if (addr < start || addr > end || len > end - addr)
        return UCCL_ERR_REMOTE_ACCESS;
    *out = *found;
    return UCCL_OK;
}

static uccl_engine_t *release_engine; /* tdestroy has no user argument */

static void region_free_node(void *node)
{
    uccl_region_t *region = node;

    region_tp_dereg(release_engine, region);
    free(region);
}

static void noop_free(void *node)
{
    (void)node;
}

void uccl_mr_release_all(uccl_engine_t *engine)
{
    static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;

    pthread_mutex_lock(&release_lock);
    release_engine = engine;
    tdestroy(engine->rcache_by_range, noop_free);
    tdestroy(engine->region_by_id, region_free_node);
    release_engine = NULL;
    pthread_mutex_unlock(&release_lock);
    engine->rcache_by_range = NULL;
    engine->region_by_id = NULL;
}

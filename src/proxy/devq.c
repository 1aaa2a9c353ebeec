/* Device queues: creating a ring, its memory (pinned host memory mapped for
 * the GPU, or plain host memory for host threads), binding the local region,
 * connections and remote descriptors, start/stop of the proxy thread
 * (devq_proxy.c), and what the host reads back (status, stats, counters). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "gpu/gpu.h"
#include "proxy/devq.h"

#define DEVQ_ENTRIES_MAX (1u << 20)
#define DEVQ_BATCH_MAX 4096u
#define DEVQ_INFLIGHT_MAX 4096u
#define DEVQ_HEAD_BYTES 128 /* ticket counter, and the tail cache 64 bytes on */

static const uccl_devq_params_t devq_defaults = {
    .entries = 1024, .npeers = 16, .nslots = 64, .ncounters = 0, .mem = UCCL_DEVQ_MEM_MAPPED,
    .batch_max = 256, .inflight_max = 64, .batch_bytes = UINT64_MAX, .timeout_ms = 60000,
};

static uccl_status_t resolve_params(const uccl_devq_params_t *in, uccl_devq_params_t *p)
{
    const uint64_t known = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_NPEERS | UCCL_DEVQ_PARAM_NSLOTS |
                           UCCL_DEVQ_PARAM_NCOUNTERS | UCCL_DEVQ_PARAM_MEM | UCCL_DEVQ_PARAM_BATCH_MAX |
                           UCCL_DEVQ_PARAM_TIMEOUT_MS | UCCL_DEVQ_PARAM_INFLIGHT_MAX |
                           UCCL_DEVQ_PARAM_BATCH_BYTES;

    *p = devq_defaults;
    if (in == NULL)
        return UCCL_OK;
    if (in->field_mask & ~known) {
        uccl_error("uccl_devq_create: unknown field_mask bits 0x%llx",
                   (unsigned long long)(in->field_mask & ~known));
        return UCCL_ERR_INVALID_PARAM;
    }
#define TAKE(bit, field)                 \
    if (in->field_mask & UCCL_DEVQ_PARAM_##bit) \
        p->field = in->field;
    TAKE(ENTRIES, entries)
    TAKE(NPEERS, npeers)
    TAKE(NSLOTS, nslots)
    TAKE(NCOUNTERS, ncounters)
    TAKE(MEM, mem)
    TAKE(BATCH_MAX, batch_max)
    TAKE(INFLIGHT_MAX, inflight_max)
    TAKE(TIMEOUT_MS, timeout_ms)
    TAKE(BATCH_BYTES, batch_bytes)
#undef TAKE
    p->field_mask = known;
    if (p->entries < 2 || p->entries > DEVQ_ENTRIES_MAX || (p->entries & (p->entries - 1)) != 0) {
        uccl_error("uccl_devq_create: entries %u is not a power of two in [2, %u]", p->entries,
                   DEVQ_ENTRIES_MAX);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (p->npeers < 1 || p->npeers > 65536 || p->nslots < 1 || p->nslots > 65536 ||
        p->ncounters > (1u << 16) || p->batch_max < 1 || p->batch_max > DEVQ_BATCH_MAX ||
        p->inflight_max < 1 || p->inflight_max > DEVQ_INFLIGHT_MAX || p->timeout_ms <= 0 || p->batch_bytes == 0 ||
        (p->mem != UCCL_DEVQ_MEM_MAPPED && p->mem != UCCL_DEVQ_MEM_HOST)) {
        uccl_error("uccl_devq_create: a parameter is out of range (npeers %u, nslots %u, "
                   "ncounters %u, batch_max %u, inflight_max %u, timeout_ms %d, mem %d)",
                   p->npeers, p->nslots, p->ncounters, p->batch_max, p->inflight_max,
                   p->timeout_ms, (int)p->mem);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static uccl_status_t alloc_ring(uccl_devq_t *q)
{
    uccl_status_t st;

    q->counters_off = round_up(sizeof(uccl_devq_ctrl_t), 64);
    q->cmds_off = q->counters_off + round_up((size_t)q->p.ncounters * sizeof(uint64_t), 64);
    q->mem_bytes = q->cmds_off + (size_t)q->p.entries * sizeof(uccl_devq_cmd_t);
    q->device = -1;
    if (q->p.mem == UCCL_DEVQ_MEM_HOST) {
        if (posix_memalign(&q->mem, 4096, q->mem_bytes) != 0 ||
            posix_memalign((void **)&q->head, 64, DEVQ_HEAD_BYTES) != 0)
            return UCCL_ERR_NO_MEMORY;
        memset(q->mem, 0, q->mem_bytes);
        memset(q->head, 0, DEVQ_HEAD_BYTES);
        q->dev_base = q->mem;
    } else {
        st = uccl_gpu_get_device(&q->device);
        if (st == UCCL_OK)
            st = uccl_gpu_host_alloc_mapped(&q->mem, &q->dev_base, q->mem_bytes);
        if (st != UCCL_OK) {
            q->mem = NULL;
            uccl_error("uccl_devq_create: no mapped host memory for the GPU (%s)",
                       uccl_status_name(st));
            return st;
        }
        st = uccl_gpu_malloc((void **)&q->head, DEVQ_HEAD_BYTES);
        if (st == UCCL_OK)
            st = uccl_gpu_memset(q->head, 0, DEVQ_HEAD_BYTES);
        if (st != UCCL_OK)
            return st;
    }
    q->ctrl = (uccl_devq_ctrl_t *)q->mem;
    q->counters = (uint64_t *)((char *)q->mem + q->counters_off);
    q->cmds = (uccl_devq_cmd_t *)((char *)q->mem + q->cmds_off);
    return UCCL_OK;
}

static void free_ring(uccl_devq_t *q)
{
    if (q->p.mem == UCCL_DEVQ_MEM_HOST) {
        free(q->mem);
        free(q->head);
        return;
    }
    if (q->mem != NULL)
        uccl_gpu_host_free(q->mem);
    if (q->head != NULL)
        uccl_gpu_free(q->head);
}

uccl_status_t uccl_devq_destroy(uccl_devq_t *q)
{
    if (q == NULL)
        return UCCL_ERR_INVALID_HANDLE;
    if (q->running)
        uccl_devq_stop(q);
    free_ring(q);
    free(q->peers);
    free(q->slots);
    free(q->slot_bound);
    free(q->fifo);
    free(q->iov);
    free(q->riov);
    free(q->trace);
    free(q);
    return UCCL_OK;
}

uccl_status_t uccl_devq_trace_enable(uccl_devq_t *q, uint32_t n)
{
    if (q == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running)
        return UCCL_ERR_BUSY;
    free(q->trace);
    q->trace = NULL;
    q->trace_cap = q->trace_fill = q->trace_count = 0;
    if (n == 0)
        return UCCL_OK;
    q->trace = calloc(n, sizeof(*q->trace));
    if (q->trace == NULL)
        return UCCL_ERR_NO_MEMORY;
    q->trace_cap = n;
    return UCCL_OK;
}

uint32_t uccl_devq_trace_read(const uccl_devq_t *q, uccl_devq_trace_rec_t *out, uint32_t n)
{
    uint32_t have;

    if (q == NULL || q->trace == NULL || out == NULL)
        return 0;
    have = __atomic_load_n(&q->trace_count, __ATOMIC_ACQUIRE);
    if (have > n)
        have = n;
    memcpy(out, q->trace, (size_t)have * sizeof(*out));
    return have;
}

uccl_status_t uccl_devq_create(uccl_engine_t *engine, const uccl_devq_params_t *params, uccl_devq_t **out)
{
    uccl_devq_t *q;
    uccl_status_t st;

    if (engine == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    *out = NULL;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return UCCL_ERR_NO_MEMORY;
    q->engine = engine;
    st = resolve_params(params, &q->p);
    if (st != UCCL_OK) {
        free(q);
        return st;
    }
    q->peers = calloc(q->p.npeers, sizeof(*q->peers));
    q->slots = calloc(q->p.nslots, sizeof(*q->slots));
    q->slot_bound = calloc(q->p.nslots, 1);
    q->fifo_cap = q->p.inflight_max;
    q->fifo = calloc(q->fifo_cap, sizeof(*q->fifo));
    q->iov = calloc(UCCL_IOV_MAX, sizeof(*q->iov));
    q->riov = calloc(UCCL_RIOV_MAX, sizeof(*q->riov));
    if (q->peers == NULL || q->slots == NULL || q->slot_bound == NULL || q->fifo == NULL ||
        q->iov == NULL || q->riov == NULL) {
        uccl_devq_destroy(q);
        return UCCL_ERR_NO_MEMORY;
    }
    st = alloc_ring(q);
    if (st != UCCL_OK) {
        uccl_devq_destroy(q);
        return st;
    }
    *out = q;
    return UCCL_OK;
}

uccl_status_t uccl_devq_bind_local(uccl_devq_t *q, uccl_mr_t *mr)
{
    uccl_mr_attr_t a;
    uccl_status_t st;

    if (q == NULL || mr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running)
        return UCCL_ERR_BUSY;
    st = uccl_mr_query(mr, &a);
    if (st != UCCL_OK)
        return st;
    q->local = mr;
    q->local_len = a.len;
    return UCCL_OK;
}

uccl_status_t uccl_devq_bind_peer(uccl_devq_t *q, uint32_t peer, uccl_conn_t *conn)
{
    if (q == NULL || peer >= q->p.npeers)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running)
        return UCCL_ERR_BUSY;
    q->peers[peer] = conn;
    return UCCL_OK;
}

uccl_status_t uccl_devq_bind_rdesc(uccl_devq_t *q, uint32_t slot, const uccl_rdesc_t *rdesc)
{
    uccl_rdesc_info_t info;
    uccl_status_t st;

    if (q == NULL || rdesc == NULL || slot >= q->p.nslots)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running)
        return UCCL_ERR_BUSY;
    st = uccl_rdesc_info(rdesc, &info);
    if (st != UCCL_OK)
        return st;
    q->slots[slot] = *rdesc;
    q->slot_bound[slot] = 1;
    return UCCL_OK;
}

uccl_status_t uccl_devq_set_error(uccl_devq_t *q, uccl_status_t error)
{
    int32_t expected = 0;

    if (__atomic_compare_exchange_n(&q->ctrl->error, &expected, (int32_t)error, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        if (error != UCCL_ERR_CANCELED)
            uccl_error("device queue %p failed: %s", (void *)q, uccl_strerror(error));
        return error;
    }
    return (uccl_status_t)expected;
}

uccl_status_t uccl_devq_fail(uccl_devq_t *q, uccl_status_t error)
{
    if (q == NULL || !UCCL_STATUS_IS_ERR(error))
        return UCCL_ERR_INVALID_PARAM;
    uccl_devq_set_error(q, error);
    return UCCL_OK;
}

uccl_status_t uccl_devq_status(const uccl_devq_t *q)
{
    if (q == NULL)
        return UCCL_ERR_INVALID_PARAM;
    return (uccl_status_t)__atomic_load_n(&q->ctrl->error, __ATOMIC_ACQUIRE);
}

uccl_status_t uccl_devq_start(uccl_devq_t *q)
{
    int rc;

    if (q == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running)
        return UCCL_ERR_BUSY;
    if (q->canceled_by_stop) { /* a restart after a clean stop */
        if (__atomic_load_n(&q->ctrl->lost, __ATOMIC_ACQUIRE)) {
            uccl_error("uccl_devq_start: a put gave up tickets while the ring was stopped: they are "
                       "never published, the ring cannot run again");
            return UCCL_ERR_CANCELED;
        }
        __atomic_store_n(&q->ctrl->error, 0, __ATOMIC_SEQ_CST);
        q->canceled_by_stop = 0;
    }
    if (uccl_devq_status(q) != UCCL_OK)
        return uccl_devq_status(q);
    atomic_store(&q->stop_req, 0);
    rc = pthread_create(&q->thread, NULL, uccl_devq_proxy_main, q);
    if (rc != 0) {
        uccl_error("uccl_devq_start: pthread_create: %s", strerror(rc));
        return UCCL_ERR_NO_MEMORY;
    }
    q->running = true;
    atomic_store(&q->sentinel_stop, 0);
    rc = pthread_create(&q->sentinel, NULL, uccl_devq_sentinel_main, q);
    if (rc != 0) /* the proxy's own checks remain */
        uccl_warn("uccl_devq_start: no sentinel thread (%s): a failed connection may be seen only at "
                  "the ring's timeout", strerror(rc));
    q->sentinel_running = rc == 0;
    return UCCL_OK;
}

uccl_status_t uccl_devq_stop(uccl_devq_t *q)
{
    uccl_status_t st;

    if (q == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (q->running) {
        atomic_store(&q->stop_req, 1);
        pthread_join(q->thread, NULL);
        q->running = false;
    }
    if (q->sentinel_running) {
        atomic_store(&q->sentinel_stop, 1);
        pthread_join(q->sentinel, NULL);
        q->sentinel_running = false;
    }
    st = uccl_devq_status(q);
    /* nobody may spin on a proxy that is gone */
    if (uccl_devq_set_error(q, UCCL_ERR_CANCELED) == UCCL_ERR_CANCELED && st == UCCL_OK)
        q->canceled_by_stop = 1;
    return st;
}

uccl_status_t uccl_devq_handle(const uccl_devq_t *q, uccl_devq_handle_t *h)
{
    char *d;

    if (q == NULL || h == NULL)
        return UCCL_ERR_INVALID_PARAM;
    d = (char *)q->dev_base;
    memset(h, 0, sizeof(*h));
    h->cmds = (uccl_devq_cmd_t *)(d + q->cmds_off);
    h->head = q->head;
    h->tail_cache = q->head + 8;
    h->ctrl = (uccl_devq_ctrl_t *)d;
    h->counters = q->p.ncounters > 0 ? (volatile uint64_t *)(d + q->counters_off) : NULL;
    h->mask = q->p.entries - 1;
    h->ncounters = q->p.ncounters;
    h->spin_timeout_ns = (uint64_t)q->p.timeout_ms * 1000000ull;
    return UCCL_OK;
}

uccl_status_t uccl_devq_stats(const uccl_devq_t *q, uccl_devq_stats_t *s)
{
    if (q == NULL || s == NULL)
        return UCCL_ERR_INVALID_PARAM;
    s->commands = atomic_load(&q->n_commands);
    s->completed = atomic_load(&q->n_completed);
    s->writes = atomic_load(&q->n_writes);
    s->bytes = atomic_load(&q->n_bytes);
    s->notifs = atomic_load(&q->n_notifs);
    return UCCL_OK;
}

uccl_status_t uccl_devq_counter(const uccl_devq_t *q, uint32_t index, uint64_t *value)
{
    if (q == NULL || value == NULL || index >= q->p.ncounters)
        return UCCL_ERR_INVALID_PARAM;
    *value = __atomic_load_n(&q->counters[index], __ATOMIC_ACQUIRE);
    return UCCL_OK;
}

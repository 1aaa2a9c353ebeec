/* GPU memory on the verbs transport: at open, whether the engine's GPU
 * memory registers with the NIC (GPUDirect RDMA) or is staged; the
 * registration of GPU regions; and staging itself. A staged source (a send
 * or a write out of GPU memory) runs through the pipelined staging engine
 * (tp/staging.h), whose pinned buffers this file registers with the PD: the
 * data path posts each chunk from the buffer its D2H copy filled while the
 * next chunks copy. A staged sink (a receive or a read into GPU memory)
 * lands in one pinned, NIC-registered bounce the size of the message (the
 * rendezvous names one target to the peer; a few bounces are kept for
 * reuse) and is copied into place when it completes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "topo/topo.h"
#include "verbs.h"
#include "verbs_gdr.h"

#define VERBS_BOUNCE_CACHE 32                /* unused bounces kept... */
#define VERBS_BOUNCE_CACHE_BYTES (256u << 20) /* ...up to these bytes in all */
#define VERBS_BOUNCE_CACHE_MAX (64u << 20)    /* larger ones are freed at once */
#define VERBS_BOUNCE_ROUND 65536
#define VERBS_PROBE_SIZE 65536

/* ------------------------------------------------------------------ open */

static uccl_mem_type_t verbs_gpu_mem_type(void)
{
    return strcmp(uccl_gpu_backend(), "hip") == 0 ? UCCL_MEM_ROCM : UCCL_MEM_CUDA;
}

/* Register a probe allocation of the engine's GPU the way UCCL_VERBS_GDR
 * asks: what works for it works for the regions of that GPU. */
static uccl_status_t verbs_gpu_probe(tp_verbs_t *v, int device, verbs_gdr_want_t want,
                                     verbs_gdr_mode_t *mode)
{
    char why[UCCL_TOPO_WHY_MAX];
    struct ibv_mr *mr = NULL;
    void *probe = NULL;
    int prev = -1;
    uccl_status_t st;

    *mode = VERBS_GDR_UNSUPPORTED;
    if (uccl_gpu_get_device(&prev) != UCCL_OK)
        prev = -1;
    st = uccl_gpu_set_device(device);
    if (st == UCCL_OK)
        st = uccl_gpu_malloc(&probe, VERBS_PROBE_SIZE);
    if (st == UCCL_OK) {
        st = uccl_verbs_gdr_reg(v->cfg.gdr_sysroot, v->pd, probe, VERBS_PROBE_SIZE, v->mr_access,
                           v->gpu_mem_type, device, want, &mr, mode, why, sizeof(why));
        if (mr != NULL)
            ibv_dereg_mr(mr);
        uccl_gpu_free(probe);
        if (st == UCCL_OK)
            uccl_info("verbs: %s registers GPU %d memory directly: %s", v->dev_name, device, why);
    } else {
        uccl_warn("verbs: cannot allocate on GPU %d to probe GPUDirect RDMA: %s", device,
                  uccl_strerror(st));
    }
    if (prev >= 0 && prev != device)
        uccl_gpu_set_device(prev);
    return st;
}

static uccl_status_t verbs_stage_reg(void *ctx, void *ptr, size_t len, void **handle)
{
    tp_verbs_t *v = ctx;
    struct ibv_mr *mr = ibv_reg_mr(v->pd, ptr, len, v->mr_access);

    if (mr == NULL) {
        uccl_error("%s: ibv_reg_mr of a %zu-byte staging buffer: %s", v->dev_name, len,
                   strerror(errno));
        return errno == ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
    }
    *handle = mr;
    return UCCL_OK;
}

static void verbs_stage_dereg(void *ctx, void *handle)
{
    (void)ctx;
    if (ibv_dereg_mr(handle) != 0)
        uccl_warn("ibv_dereg_mr (staging buffer): %s", strerror(errno));
}

/* The staging engine for GPU sources, its buffers registered with our PD;
 * without it (no usable GPU runtime) sources are bounced like sinks. */
static void verbs_stage_open(tp_verbs_t *v, int device)
{
    uccl_status_t st = uccl_stage_create(device, v->cfg.stage_chunk, v->cfg.stage_depth, &v->stage);

    if (st != UCCL_OK) {
        uccl_warn("verbs: no pipelined staging on GPU %d (%s); GPU sources are bounced whole",
                  device, uccl_strerror(st));
        v->stage = NULL;
        return;
    }
    uccl_stage_set_reg(v->stage, verbs_stage_reg, verbs_stage_dereg, v);
}

uccl_status_t uccl_verbs_gpu_open(tp_verbs_t *v, const uccl_tp_open_params_t *params)
{
    verbs_gdr_mode_t mode = VERBS_GDR_STAGING;
    verbs_gdr_want_t want;
    uccl_status_t st;

    v->gpu_mode = VERBS_GDR_HOST;
    uccl_list_init(&v->bounce_cache);
    if (params->gpu_index < 0)
        return UCCL_OK;
    st = uccl_verbs_gdr_parse_want(v->cfg.gdr, &want);
    if (st != UCCL_OK)
        return st;
    v->gpu_mem_type = verbs_gpu_mem_type();
    if (want != VERBS_GDR_WANT_OFF) {
        st = verbs_gpu_probe(v, params->gpu_index, want, &mode);
        if (st != UCCL_OK && want != VERBS_GDR_WANT_AUTO)
            return st; /* an override that cannot be met (uccl_verbs_gdr_reg said why) */
        if (st != UCCL_OK)
            mode = VERBS_GDR_STAGING;
    }
    v->gpu_mode = (int)mode;
    v->base.open_caps = v->gpu_mem_type == UCCL_MEM_ROCM ? UCCL_TP_CAP_ROCM_MEM : UCCL_TP_CAP_CUDA_MEM;
    if (mode == VERBS_GDR_STAGING) {
        uccl_info("verbs: GPU %d memory is staged through pinned host buffers (no GPUDirect RDMA; "
                  "UCCL_VERBS_GDR=%s)", params->gpu_index, v->cfg.gdr);
        verbs_stage_open(v, params->gpu_index);
    }
    return UCCL_OK;
}

static void verbs_bounce_free(tp_verbs_bounce_t *b)
{
    if (b->mr != NULL && ibv_dereg_mr(b->mr) != 0)
        uccl_warn("ibv_dereg_mr (bounce buffer): %s", strerror(errno));
    if (b->buf != NULL)
        uccl_gpu_host_free(b->buf);
    free(b);
}

void uccl_verbs_gpu_close(tp_verbs_t *v)
{
    uccl_stage_destroy(v->stage); /* deregisters its buffers */
    v->stage = NULL;
    while (!uccl_list_empty(&v->bounce_cache))
        verbs_bounce_free(uccl_container_of(uccl_list_pop_front(&v->bounce_cache),
                                            tp_verbs_bounce_t, link));
    v->nbounce_cached = 0;
    v->bounce_cached_bytes = 0;
}

/* ------------------------------------------------------------------ stage buffers in flight */

uccl_status_t uccl_verbs_qp_held_init(tp_verbs_t *v, tp_verbs_qp_t *q)
{
    q->held_head = q->held_n = 0;
    q->held_cap = v->stage != NULL ? v->cfg.tx_depth : 0;
    if (q->held_cap == 0)
        return UCCL_OK;
    q->held = calloc((size_t)q->held_cap, sizeof(*q->held));
    return q->held != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

/* A data work request was built for q (buf: the stage buffer it reads). */
void uccl_verbs_qp_held_push(tp_verbs_t *v, tp_verbs_qp_t *q, uccl_stage_buf_t *buf)
{
    if (q->held_cap == 0)
        return;
    q->held[(q->held_head + q->held_n) % q->held_cap] = buf;
    q->held_n++;
    if (buf != NULL)
        v->staged_wrs++;
}

/* The oldest data work request of q completed: its buffer may be reused. */
void uccl_verbs_qp_held_pop(tp_verbs_t *v, tp_verbs_qp_t *q)
{
    uccl_stage_buf_t *buf;

    if (q->held_cap == 0 || q->held_n == 0)
        return;
    buf = q->held[q->held_head];
    q->held_head = (q->held_head + 1) % q->held_cap;
    q->held_n--;
    if (buf != NULL) {
        v->staged_wrs--;
        uccl_stage_buf_put(v->stage, buf);
    }
}

/* After the QP is destroyed: nothing reads the buffers any more. */
void uccl_verbs_qp_held_fini(tp_verbs_t *v, tp_verbs_qp_t *q)
{
    while (q->held_n > 0)
        uccl_verbs_qp_held_pop(v, q);
    free(q->held);
    q->held = NULL;
    q->held_cap = 0;
}

/* ------------------------------------------------------------------ regions */

uccl_status_t uccl_verbs_gpu_mem_reg(tp_verbs_t *v, void *addr, size_t len, uccl_mem_type_t type,
                                   int device, uccl_tp_memh_t **out)
{
    uccl_status_t st = UCCL_OK;

    *out = NULL;
    if (v->gpu_mode != VERBS_GDR_STAGING) /* GPUDirect, or an engine without GPU */
        st = uccl_verbs_gdr_mem_reg(v, addr, len, type, device, out);
    if (st != UCCL_OK || *out != NULL || v->gpu_mode == VERBS_GDR_HOST)
        return st;
    /* staged: a handle without MR, so that the region is known here */
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

bool uccl_verbs_req_staged(const tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        const uccl_tp_memh_t *memh;

        if (req->iov[i].len == 0 || req->iov[i].region == NULL)
            continue;
        memh = uccl_region_memh(req->iov[i].region, &ep->tp->base);
        if (memh != NULL && memh->mr == NULL)
            return true;
    }
    return false;
}

uccl_status_t uccl_verbs_check_local(const tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        if (req->iov[i].region == NULL || uccl_region_memh(req->iov[i].region, &ep->tp->base) == NULL) {
            uccl_error("verbs: local buffer %p is not registered with this transport",
                       req->iov[i].addr);
            return UCCL_ERR_NOT_REGISTERED;
        }
    }
    return UCCL_OK;
}

uccl_status_t uccl_verbs_check_remote(const tp_verbs_ep_t *ep, const uccl_req_t *req)
{
    if (req->remote.rkey_len == VERBS_RKEY_SIZE)
        return UCCL_OK;
    uccl_error("verbs: remote region %llu (%s memory) has no RDMA key: its owner could not "
               "register it with %s's peer NIC (no GPUDirect RDMA there, the region is staged), "
               "so only send/recv reach it", (unsigned long long)req->remote.region_id,
               req->remote.mem_type == UCCL_MEM_HOST ? "host" : "GPU", ep->tp->dev_name);
    return UCCL_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------------ bounces */

static tp_verbs_bounce_t *verbs_bounce_get(tp_verbs_t *v, size_t len)
{
    tp_verbs_bounce_t *b;
    uccl_list_t *pos;

    uccl_list_for_each(pos, &v->bounce_cache) {
        b = uccl_container_of(pos, tp_verbs_bounce_t, link);
        if (b->size >= len) {
            uccl_list_del(&b->link);
            v->nbounce_cached--;
            v->bounce_cached_bytes -= b->size;
            return b;
        }
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->size = (len + VERBS_BOUNCE_ROUND - 1) / VERBS_BOUNCE_ROUND * VERBS_BOUNCE_ROUND;
    if (uccl_gpu_host_alloc((void **)&b->buf, b->size) != UCCL_OK) {
        b->buf = NULL;
        verbs_bounce_free(b);
        return NULL;
    }
    b->mr = ibv_reg_mr(v->pd, b->buf, b->size, v->mr_access);
    if (b->mr == NULL) {
        uccl_error("%s: ibv_reg_mr of a %zu-byte bounce buffer: %s", v->dev_name, b->size,
                   strerror(errno));
        verbs_bounce_free(b);
        return NULL;
    }
    return b;
}

static void verbs_bounce_put(tp_verbs_t *v, tp_verbs_bounce_t *b)
{
    if (v->nbounce_cached >= VERBS_BOUNCE_CACHE || b->size > VERBS_BOUNCE_CACHE_MAX ||
        v->bounce_cached_bytes + b->size > VERBS_BOUNCE_CACHE_BYTES) {
        verbs_bounce_free(b);
        return;
    }
    uccl_list_push_front(&v->bounce_cache, &b->link);
    v->nbounce_cached++;
    v->bounce_cached_bytes += b->size;
}

/* Copy between req's local pieces and flat[0, len): GPU pieces through the
 * GPU layer (a memcpy on device memory would fault), host pieces by memcpy. */
uccl_status_t uccl_verbs_iov_copy(uccl_req_t *req, void *flat, size_t len, bool to_iov)
{
    uint8_t *p = flat, *mem;
    uccl_req_cur_t cur;
    size_t n;
    int i;

    uccl_req_cur_init(&cur, req, 0);
    while ((n = uccl_req_cur_next(&cur, len, &mem, &i)) > 0) {
        bool gpu = req->iov[i].region != NULL && uccl_region_mem_type(req->iov[i].region) != UCCL_MEM_HOST;
        void *dst = to_iov ? (void *)mem : p;
        const void *src = to_iov ? (const void *)p : mem;
        uccl_status_t st;

        if (gpu) {
            st = uccl_gpu_memcpy(dst, src, n);
            if (st != UCCL_OK)
                return st;
        } else {
            memcpy(dst, src, n);
        }
        p += n;
        len -= n;
    }
    return UCCL_OK;
}

static tp_verbs_xfer_t *verbs_xfer_get(tp_verbs_t *v, uccl_req_t *req)
{
    if (req->tp_ptr == NULL) {
        req->tp_ptr = calloc(1, sizeof(tp_verbs_xfer_t));
        if (req->tp_ptr != NULL)
            tp_verbs_xfer(req)->tp = v;
    }
    return req->tp_ptr;
}

/* Staged req reads len bytes of its pieces (gather: a send or a write),
 * through the staging pipeline, or writes them (a receive or a read),
 * through a bounce. */
uccl_status_t uccl_verbs_xfer_stage(tp_verbs_ep_t *ep, uccl_req_t *req, size_t len, bool gather)
{
    tp_verbs_xfer_t *x = verbs_xfer_get(ep->tp, req);

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (gather && ep->tp->stage != NULL) {
        if (x->src == NULL && (x->src = malloc(sizeof(*x->src))) == NULL)
            return UCCL_ERR_NO_MEMORY;
        uccl_stage_src_init(x->src, ep->tp->stage, req, NULL, len);
        return UCCL_OK;
    }
    if (x->bounce == NULL)
        x->bounce = verbs_bounce_get(ep->tp, len);
    if (x->bounce == NULL)
        return UCCL_ERR_NO_MEMORY;
    return gather ? uccl_verbs_iov_copy(req, x->bounce->buf, len, false) : UCCL_OK;
}

uccl_status_t uccl_verbs_xfer_segs(uccl_req_t *req, uint64_t nseg)
{
    tp_verbs_xfer_t *old = req->tp_ptr, *x = calloc(1, sizeof(*x) + nseg * sizeof(uccl_rndv_seg_t));

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (old != NULL) {
        x->tp = old->tp;
        x->bounce = old->bounce;
        x->src = old->src;
        free(old);
    }
    x->nseg = nseg;
    req->tp_ptr = x;
    return UCCL_OK;
}

/* Finishing req: data staged for a receive or a read goes to its pieces
 * (a failed copy becomes the request's status), the bounce goes back. */
void uccl_verbs_xfer_release(uccl_req_t *req, uccl_status_t *status, size_t bytes)
{
    tp_verbs_xfer_t *x = req->tp_ptr;

    if (x == NULL)
        return;
    if (x->src != NULL) { /* buffers still queued go back once their copies are done */
        uccl_stage_src_fini(x->src);
        free(x->src);
    }
    if (x->bounce != NULL) {
        if (*status == UCCL_OK && (req->op == UCCL_OP_RECV || req->op == UCCL_OP_READ))
            *status = uccl_verbs_iov_copy(req, x->bounce->buf, bytes, true);
        verbs_bounce_put(x->tp, x->bounce);
    }
    free(x);
    req->tp_ptr = NULL;
}

/* GPU memory on the verbs transport: at open, whether the engine's GPU
 * memory registers with the NIC (GPUDirect RDMA) or is staged; the
 * registration of GPU regions; and staging itself, all through the
 * pipelined staging engine (tp/staging.h), whose pinned buffers this file
 * registers with the PD. A staged source (a send or a write out of GPU
 * memory): the data path posts each chunk from the buffer its D2H copy
 * filled while the next chunks copy. A staged sink (a receive or a read
 * into GPU memory): up to STAGE_DEPTH windows of a stage buffer each; a
 * receive grants them to the sender (rndv GRANT), a read posts RDMA READs
 * into them; each window that landed is copied into place on the copy
 * stream while the next ones arrive, and is used again after its copy.
 * On the sender, a send on granted windows writes each window on one QP
 * and closes it with a chunk immediate (verbs_data.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "topo/topo.h"
#include "verbs.h"
#include "verbs_gdr.h"

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

/* The staging engine, its buffers registered with our PD. */
static uccl_status_t verbs_stage_open(tp_verbs_t *v, int device)
{
    uccl_status_t st = uccl_stage_create(device, v->cfg.stage_chunk, v->cfg.stage_depth, &v->stage);

    if (st != UCCL_OK) {
        uccl_error("verbs: cannot stage GPU %d memory (%s)", device, uccl_strerror(st));
        v->stage = NULL;
        return st;
    }
    uccl_stage_set_reg(v->stage, verbs_stage_reg, verbs_stage_dereg, v);
    return UCCL_OK;
}

uccl_status_t uccl_verbs_gpu_open(tp_verbs_t *v, const uccl_tp_open_params_t *params)
{
    verbs_gdr_mode_t mode = VERBS_GDR_STAGING;
    verbs_gdr_want_t want;
    uccl_status_t st;

    v->gpu_mode = VERBS_GDR_HOST;
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
        return verbs_stage_open(v, params->gpu_index);
    }
    return UCCL_OK;
}

void uccl_verbs_gpu_close(tp_verbs_t *v)
{
    uccl_stage_destroy(v->stage); /* deregisters its buffers */
    v->stage = NULL;
}

/* ------------------------------------------------------------------ stage buffers in flight */

uccl_status_t uccl_verbs_qp_held_init(tp_verbs_t *v, tp_verbs_qp_t *q)
{
    q->held_head = q->held_n = 0;
    q->bytes_out = 0;
    q->held_cap = v->cfg.tx_depth;
    q->held = calloc((size_t)q->held_cap, sizeof(*q->held));
    return q->held != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

/* A data work request of len bytes was built for q (buf: the stage buffer
 * it reads). */
void uccl_verbs_qp_held_push(tp_verbs_t *v, tp_verbs_qp_t *q, uccl_stage_buf_t *buf, size_t len)
{
    if (q->held_cap == 0)
        return;
    q->held[(q->held_head + q->held_n) % q->held_cap] = (struct tp_verbs_held){buf, len};
    q->held_n++;
    q->bytes_out += len;
    if (buf != NULL)
        v->staged_wrs++;
}

/* The oldest data work request of q completed: its buffer may be reused. */
void uccl_verbs_qp_held_pop(tp_verbs_t *v, tp_verbs_qp_t *q)
{
    uccl_stage_buf_t *buf;

    if (q->held_cap == 0 || q->held_n == 0)
        return;
    buf = q->held[q->held_head].buf;
    q->bytes_out -= q->held[q->held_head].len;
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
    if (req->remote.rkey_len >= VERBS_RKEY_SIZE &&
        req->remote.rkey_len <= VERBS_RKEY_SIZE * VERBS_MAX_RAILS &&
        req->remote.rkey_len % VERBS_RKEY_SIZE == 0) /* one rkey per rail */
        return UCCL_OK;
    uccl_error("verbs: remote region %llu (%s memory) has no RDMA key: its owner could not "
               "register it with %s's peer NIC (no GPUDirect RDMA there, the region is staged), "
               "so only send/recv reach it", (unsigned long long)req->remote.region_id,
               req->remote.mem_type == UCCL_MEM_HOST ? "host" : "GPU", ep->tp->dev_name);
    return UCCL_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------------ staged requests */

static tp_verbs_xfer_t *verbs_xfer_get(uccl_req_t *req)
{
    if (req->tp_ptr == NULL)
        req->tp_ptr = calloc(1, sizeof(tp_verbs_xfer_t));
    return req->tp_ptr;
}

/* The peer reaches a window by its address and rkey. */
static void verbs_sink_buf_seg(void *ctx, const uccl_stage_buf_t *buf, uccl_rndv_seg_t *seg)
{
    (void)ctx;
    seg->addr = (uintptr_t)uccl_stage_buf_ptr(buf);
    seg->key = ((struct ibv_mr *)uccl_stage_buf_reg(buf))->rkey;
}

/* A read's sink is done or failed: the read ends with its last work request. */
static void verbs_sink_read_settle(void *ctx, uccl_req_t *req)
{
    tp_verbs_ep_t *ep = ctx;

    if (req->tp_data[VERBS_RD_WRS] == 0) {
        uccl_list_del(&req->tp_link);
        uccl_rndv_write_done(&ep->rndv, req);
    }
}

static const uccl_rndv_sink_hooks_t verbs_sink_hooks = {
    .buf_seg = verbs_sink_buf_seg,
    .read_settle = verbs_sink_read_settle,
};

/* Staged req: a source pipeline or a sink (uccl_rndv_staged_stage). */
uccl_status_t uccl_verbs_xfer_stage(tp_verbs_ep_t *ep, uccl_req_t *req, size_t len, bool gather)
{
    tp_verbs_xfer_t *x = verbs_xfer_get(req);

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    return uccl_rndv_staged_stage(&x->staged, &ep->rndv, ep->tp->stage, ep->tp->cfg.stage_depth,
                                  &verbs_sink_hooks, ep, req, len, gather);
}

uccl_status_t uccl_verbs_xfer_segs(uccl_req_t *req, uint64_t nseg)
{
    tp_verbs_xfer_t *old = req->tp_ptr, *x = calloc(1, sizeof(*x) + nseg * sizeof(uccl_rndv_seg_t));

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    if (old != NULL) {
        *x = *old;
        free(old);
    }
    x->nseg = nseg;
    req->tp_ptr = x;
    return UCCL_OK;
}

uccl_status_t uccl_verbs_sink_start(tp_verbs_ep_t *ep, uccl_req_t *req)
{
    (void)ep;
    return uccl_rndv_sink_start(tp_verbs_xfer(req)->staged.sink);
}

/* Sender: window `slot` at byte off of the receiver's message, granted. */
uccl_status_t uccl_verbs_grant(tp_verbs_ep_t *ep, uccl_req_t *req, bool first, int slot,
                               uint64_t off, const uccl_rndv_seg_t *seg)
{
    tp_verbs_xfer_t *x = first ? verbs_xfer_get(req) : tp_verbs_xfer(req);
    uccl_status_t st;

    if (x == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_rndv_staged_grant(&x->staged, &ep->rndv, req, slot, off, seg);
    if (st != UCCL_OK)
        return st;
    if (first)
        uccl_verbs_data_start(ep, req);
    return UCCL_OK;
}

/* Finishing req: what staged it goes back (uccl_rndv_staged_release). */
void uccl_verbs_xfer_release(uccl_req_t *req)
{
    tp_verbs_xfer_t *x = req->tp_ptr;

    if (x == NULL)
        return;
    uccl_rndv_staged_release(&x->staged, req);
    free(x);
    req->tp_ptr = NULL;
}

/* GPUDirect RDMA for the verbs transport: the decision between dma-buf,
 * peer-memory module and staging, and the registration that follows from it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uccl_build.h"
#include "util/log.h"
#include "gpu/gpu.h"
#include "topo/topo.h"
#include "verbs.h"
#include "verbs_gdr.h"

const char *uccl_verbs_gdr_mode_name(verbs_gdr_mode_t mode)
{
    switch (mode) {
    case VERBS_GDR_HOST: return "HOST";
    case VERBS_GDR_DMABUF: return "DMABUF";
    case VERBS_GDR_PEERMEM: return "PEERMEM";
    case VERBS_GDR_STAGING: return "STAGING";
    case VERBS_GDR_UNSUPPORTED: return "UNSUPPORTED";
    }
    return "?";
}

uccl_status_t uccl_verbs_gdr_parse_want(const char *text, verbs_gdr_want_t *want)
{
    static const char *const names[] = {"auto", "dmabuf", "peermem", "off"};

    for (size_t i = 0; text != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(text, names[i]) == 0) {
            *want = (verbs_gdr_want_t)i;
            return UCCL_OK;
        }
    }
    uccl_error("UCCL_VERBS_GDR=%s: expected auto, dmabuf, peermem or off", text ? text : "(null)");
    return UCCL_ERR_INVALID_PARAM;
}

/* What is missing for dma-buf, as a phrase; NULL when nothing is. */
static const char *dmabuf_missing(const verbs_gdr_inputs_t *in)
{
    if (!in->have_reg_dmabuf)
        return "libibverbs has no ibv_reg_dmabuf_mr";
    if (!in->runtime_dmabuf)
        return "the GPU runtime cannot export this allocation as a dma-buf";
    return NULL;
}

/* No direct path: staging when allowed, else nothing. */
static verbs_gdr_mode_t no_direct_path(const verbs_gdr_inputs_t *in, const char *cause, char *why,
                                       size_t len)
{
    if (in->staging_ok) {
        snprintf(why, len, "staging: %s", cause);
        return VERBS_GDR_STAGING;
    }
    snprintf(why, len, "unsupported: %s, and staging is not allowed", cause);
    return VERBS_GDR_UNSUPPORTED;
}

static verbs_gdr_mode_t choose_auto(const verbs_gdr_inputs_t *in, char *why, size_t len)
{
    const char *missing = dmabuf_missing(in);
    char cause[160];

    if (in->dist == UCCL_TOPO_DIST_SYS && in->staging_ok) {
        snprintf(why, len, "staging: NIC and GPU are across sockets (SYS), a host bounce is faster "
                           "than peer traffic over the CPU interconnect");
        return VERBS_GDR_STAGING;
    }
    if (missing == NULL) {
        snprintf(why, len, "dma-buf: ibv_reg_dmabuf_mr and a runtime dma-buf fd are available");
        return VERBS_GDR_DMABUF;
    }
    if (in->peermem) {
        snprintf(why, len, "peermem: %s, but a peer-memory module is loaded", missing);
        return VERBS_GDR_PEERMEM;
    }
    snprintf(cause, sizeof(cause), "%s and no peer-memory module is loaded", missing);
    return no_direct_path(in, cause, why, len);
}

verbs_gdr_mode_t uccl_verbs_gdr_choose(const verbs_gdr_inputs_t *in, char *why, size_t len)
{
    char scratch[1];
    const char *missing;

    if (why == NULL || len == 0) { /* the decision stands without its explanation */
        why = scratch;
        len = sizeof(scratch);
    }
    if (in->mem_type == UCCL_MEM_HOST) {
        snprintf(why, len, "host memory: plain ibv_reg_mr");
        return VERBS_GDR_HOST;
    }
    if (in->mem_type != UCCL_MEM_CUDA && in->mem_type != UCCL_MEM_ROCM) {
        snprintf(why, len, "unsupported: unknown memory type %d", (int)in->mem_type);
        return VERBS_GDR_UNSUPPORTED;
    }
    switch (in->want) {
    case VERBS_GDR_WANT_OFF:
        return no_direct_path(in, "UCCL_VERBS_GDR=off", why, len);
    case VERBS_GDR_WANT_DMABUF:
        missing = dmabuf_missing(in);
        if (missing == NULL) {
            snprintf(why, len, "dma-buf: asked for by UCCL_VERBS_GDR=dmabuf, and available");
            return VERBS_GDR_DMABUF;
        }
        snprintf(why, len, "unsupported: UCCL_VERBS_GDR=dmabuf but %s", missing);
        return VERBS_GDR_UNSUPPORTED;
    case VERBS_GDR_WANT_PEERMEM:
        if (in->peermem) {
            snprintf(why, len, "peermem: asked for by UCCL_VERBS_GDR=peermem, module loaded");
            return VERBS_GDR_PEERMEM;
        }
        snprintf(why, len, "unsupported: UCCL_VERBS_GDR=peermem but no peer-memory module is loaded");
        return VERBS_GDR_UNSUPPORTED;
    case VERBS_GDR_WANT_AUTO:
        return choose_auto(in, why, len);
    }
    snprintf(why, len, "unsupported: bad UCCL_VERBS_GDR value %d", (int)in->want);
    return VERBS_GDR_UNSUPPORTED;
}

/* ------------------------------------------------------------------ inputs */

static bool sys_path_exists(const char *sysroot, const char *rest)
{
    char path[512];
    struct stat sb;

    if (snprintf(path, sizeof(path), "%s/%s", sysroot, rest) >= (int)sizeof(path))
        return false;
    return stat(path, &sb) == 0;
}

bool uccl_verbs_gdr_peermem_loaded(const char *sysroot, uccl_mem_type_t type)
{
    /* MLNX_OFED's PeerDirect lists its peers under kernel/mm/memory_peers;
     * upstream kernels only have the module itself. */
    static const char *const cuda[] = {"module/nvidia_peermem", "module/nv_peer_mem",
                                       "kernel/mm/memory_peers/nv_mem/version", NULL};
    static const char *const rocm[] = {"kernel/mm/memory_peers/amdkfd/version", "module/amdp2p",
                                       NULL};
    const char *const *paths = type == UCCL_MEM_CUDA ? cuda : type == UCCL_MEM_ROCM ? rocm : NULL;

    for (; paths != NULL && *paths != NULL; paths++)
        if (sys_path_exists(sysroot, *paths))
            return true;
    return false;
}

/* ------------------------------------------------------------------ registration */

static uccl_status_t reg_failed(const char *call, void *addr, size_t len, int device)
{
    int err = errno;

    uccl_error("%s(%p, %zu) of GPU %d memory: %s", call, addr, len, device, strerror(err));
    return err == ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
}

static uccl_status_t reg_dmabuf(struct ibv_pd *pd, void *addr, size_t len, int access, int fd,
                                uint64_t offset, int device, struct ibv_mr **mr)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
    *mr = ibv_reg_dmabuf_mr(pd, offset, len, (uint64_t)(uintptr_t)addr, fd, access);
    return *mr != NULL ? UCCL_OK : reg_failed("ibv_reg_dmabuf_mr", addr, len, device);
#else
    (void)pd, (void)access, (void)fd, (void)offset, (void)mr;
    errno = EOPNOTSUPP; /* not reached: the decision needs the declaration */
    return reg_failed("ibv_reg_dmabuf_mr", addr, len, device);
#endif
}

static uccl_status_t reg_peermem(struct ibv_pd *pd, void *addr, size_t len, int access, int device,
                                 struct ibv_mr **mr)
{
    *mr = ibv_reg_mr(pd, addr, len, access);
    return *mr != NULL ? UCCL_OK : reg_failed("ibv_reg_mr", addr, len, device);
}

static void log_no_direct(verbs_gdr_mode_t mode, void *addr, size_t len, int device,
                          const char *why)
{
    if (mode == VERBS_GDR_STAGING)
        uccl_info("verbs: GPU %d memory %p+%zu not registered with the NIC (%s); it is staged "
                  "through host buffers", device, addr, len, why);
    else
        uccl_error("verbs: GPU %d memory %p+%zu cannot be registered: %s", device, addr, len, why);
}

uccl_status_t uccl_verbs_gdr_reg(const char *sysroot, struct ibv_pd *pd, void *addr, size_t len, int access,
                            uccl_mem_type_t type, int device, verbs_gdr_want_t want,
                            struct ibv_mr **mr, verbs_gdr_mode_t *mode, char *why, size_t whylen)
{
    verbs_gdr_inputs_t in = {.mem_type = type, .have_reg_dmabuf = HAVE_DECL_IBV_REG_DMABUF_MR,
                             .want = want, .staging_ok = true, .dist = VERBS_GDR_DIST_UNKNOWN};
    uint64_t offset = 0;
    uccl_status_t st;
    int fd = -1;

    if (mr == NULL || mode == NULL || why == NULL || whylen == 0 || len == 0)
        return UCCL_ERR_INVALID_PARAM;
    *mr = NULL;
    if (type != UCCL_MEM_HOST && want != VERBS_GDR_WANT_OFF) {
        in.runtime_dmabuf = in.have_reg_dmabuf && uccl_gpu_dmabuf_fd(addr, len, &fd, &offset) == UCCL_OK;
        in.peermem = uccl_verbs_gdr_peermem_loaded(sysroot, type);
    }
    *mode = uccl_verbs_gdr_choose(&in, why, whylen);
    switch (*mode) {
    case VERBS_GDR_HOST:
        st = reg_peermem(pd, addr, len, access, device, mr);
        break;
    case VERBS_GDR_DMABUF:
        st = reg_dmabuf(pd, addr, len, access, fd, offset, device, mr);
        if (st != UCCL_OK && want == VERBS_GDR_WANT_AUTO && in.peermem) {
            uccl_warn("verbs: dma-buf registration refused, trying the peer-memory module");
            *mode = VERBS_GDR_PEERMEM;
            snprintf(why, whylen, "peermem: the NIC refused the dma-buf registration");
            st = reg_peermem(pd, addr, len, access, device, mr);
        }
        break;
    case VERBS_GDR_PEERMEM:
        st = reg_peermem(pd, addr, len, access, device, mr);
        break;
    default:
        log_no_direct(*mode, addr, len, device, why);
        st = UCCL_ERR_UNSUPPORTED;
        break;
    }
    if (fd >= 0)
        close(fd); /* a dma-buf MR holds its own reference to the buffer */
    if (st == UCCL_OK)
        uccl_debug("verbs: registered %p+%zu (GPU %d): %s", addr, len, device, why);
    return st;
}

/* ------------------------------------------------------------------ transport hook */

uccl_status_t uccl_verbs_gdr_mem_reg(tp_verbs_t *v, void *addr, size_t len, uccl_mem_type_t type,
                                   int device, uccl_tp_memh_t **out)
{
    char why[UCCL_TOPO_WHY_MAX];
    verbs_gdr_want_t want;
    verbs_gdr_mode_t mode;
    uccl_tp_memh_t *memh;
    uccl_status_t st;

    *out = NULL;
    st = uccl_verbs_gdr_parse_want(v->cfg.gdr, &want);
    if (st != UCCL_OK)
        return st;
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_verbs_gdr_reg(v->cfg.gdr_sysroot, v->pd, addr, len, v->mr_access, type, device, want, &memh->mr, &mode, why,
                       sizeof(why));
    if (st == UCCL_OK) {
        *out = memh;
        return UCCL_OK;
    }
    free(memh);
    /* no memory handle: as before GPUDirect, the region is carried by a
     * transport that moves GPU memory (staging); only a failed override fails */
    if (mode == VERBS_GDR_STAGING)
        return UCCL_OK;
    if (want == VERBS_GDR_WANT_AUTO && st != UCCL_ERR_INVALID_PARAM) {
        uccl_warn("%s: GPU %d memory left to staging after the failed registration", v->dev_name,
                  device);
        return UCCL_OK;
    }
    return st;
}

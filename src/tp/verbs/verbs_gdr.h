/* GPUDirect RDMA for the verbs transport: which way (dma-buf, peer-memory
 * module, or none: staging elsewhere) GPU memory gets registered with the NIC. */
#ifndef UCCL_TP_VERBS_GDR_H
#define UCCL_TP_VERBS_GDR_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <uccl/uccl.h>

/* Outcome of the decision. */
typedef enum {
    VERBS_GDR_HOST = 0,    /* host memory: plain ibv_reg_mr, no GPU involved */
    VERBS_GDR_DMABUF,      /* ibv_reg_dmabuf_mr on a dma-buf fd the GPU runtime exported */
    VERBS_GDR_PEERMEM,     /* plain ibv_reg_mr on device memory; a peer-memory module pins it */
    VERBS_GDR_STAGING,     /* no direct path: the memory must be staged through host buffers */
    VERBS_GDR_UNSUPPORTED, /* no direct path and staging not allowed, or an override not met */
} verbs_gdr_mode_t;

/* UCCL_VERBS_GDR: what the user asked for. */
typedef enum {
    VERBS_GDR_WANT_AUTO = 0, /* dma-buf, else peermem, else staging */
    VERBS_GDR_WANT_DMABUF,   /* dma-buf or fail */
    VERBS_GDR_WANT_PEERMEM,  /* peer-memory module or fail */
    VERBS_GDR_WANT_OFF,      /* never register GPU memory with the NIC */
} verbs_gdr_want_t;

/* Distance unknown (no topology): treated as near. */
#define VERBS_GDR_DIST_UNKNOWN (-1)

/* Everything the decision depends on, gathered by uccl_verbs_gdr_reg. */
typedef struct verbs_gdr_inputs {
    uccl_mem_type_t mem_type;
    bool have_reg_dmabuf; /* libibverbs declares ibv_reg_dmabuf_mr (HAVE_DECL_IBV_REG_DMABUF_MR) */
    bool runtime_dmabuf;  /* the GPU runtime exported a dma-buf fd for this allocation */
    bool peermem;         /* a peer-memory kernel module for this GPU vendor is loaded */
    verbs_gdr_want_t want;
    bool staging_ok;      /* something else can carry the memory when no direct path exists */
    int dist;             /* uccl_topo_dist_t between NIC and GPU, or VERBS_GDR_DIST_UNKNOWN */
} verbs_gdr_inputs_t;

/* Pure decision: no system calls. why (len > 0) always gets one non-empty
 * human line saying what was chosen and why. In auto mode a NIC-GPU pair
 * across sockets (UCCL_TOPO_DIST_SYS) prefers staging when allowed: PCIe
 * peer traffic over the CPU interconnect is slower than a host bounce. An
 * override that cannot be honoured gives UNSUPPORTED, never a silent fallback. */
verbs_gdr_mode_t uccl_verbs_gdr_choose(const verbs_gdr_inputs_t *in, char *why, size_t len);

/* "HOST", "DMABUF", "PEERMEM", "STAGING", "UNSUPPORTED". */
const char *uccl_verbs_gdr_mode_name(verbs_gdr_mode_t mode);

/* Parse a UCCL_VERBS_GDR value: auto, dmabuf, peermem, off (any case).
 * Errors: UCCL_ERR_INVALID_PARAM (logged, naming the accepted values). */
uccl_status_t uccl_verbs_gdr_parse_want(const char *text, verbs_gdr_want_t *want);

/* Is a peer-memory module for GPUs of type loaded, looking under sysroot
 * ("/sys" on a live machine; tests point it at a fake tree)? CUDA:
 * nvidia_peermem or nv_peer_mem (module or memory_peers entry); ROCm: the
 * amdkfd memory peer (amdgpu with PeerDirect) or amdp2p. */
bool uccl_verbs_gdr_peermem_loaded(const char *sysroot, uccl_mem_type_t type);

/* Register [addr, addr + len) of memory type on pd, choosing the way with
 * uccl_verbs_gdr_choose (staging allowed); sysroot as for uccl_verbs_gdr_peermem_loaded. device is the GPU ordinal (logs only).
 * *mode says what was decided and *mr is set on UCCL_OK. In auto mode a
 * dma-buf registration the NIC refuses falls back to peermem when loaded.
 * Errors: UCCL_ERR_UNSUPPORTED with *mode STAGING (no direct path: the
 * caller stages the memory through host buffers; logged at info) or UNSUPPORTED (an override cannot be met; logged as an error),
 * UCCL_ERR_NO_MEMORY / UCCL_ERR_TRANSPORT (the NIC refused; errno logged),
 * UCCL_ERR_INVALID_PARAM (bad arguments). */
uccl_status_t uccl_verbs_gdr_reg(const char *sysroot, struct ibv_pd *pd, void *addr, size_t len, int access,
                            uccl_mem_type_t type, int device, verbs_gdr_want_t want,
                            struct ibv_mr **mr, verbs_gdr_mode_t *mode, char *why, size_t whylen);

/* Direct registration of GPU memory for the verbs transport
 * (uccl_verbs_gpu_mem_reg calls it): UCCL_VERBS_GDR decides; no direct path
 * leaves *memh NULL and returns UCCL_OK (the caller stages the region).
 * In auto mode a registration the NIC refuses does the same (warned); an
 * override that cannot be met, or a bad UCCL_VERBS_GDR, is an error. */
struct tp_verbs;
struct uccl_tp_memh;
uccl_status_t uccl_verbs_gdr_mem_reg(struct tp_verbs *v, void *addr, size_t len,
                                   uccl_mem_type_t type, int device, struct uccl_tp_memh **memh);

#endif

/* The transports compiled into this build. Adding a transport adds one
 * line here and its own directory; no other transport changes. */
#include "uccl_build.h"
#include "core/tp_api.h"

extern const struct uccl_tp_ops uccl_tp_shm_ops;
extern const struct uccl_tp_ops uccl_tp_tcp_ops;
#ifdef UCCL_HAVE_VERBS
extern const struct uccl_tp_ops uccl_tp_verbs_ops;
#endif
#if defined(UCCL_HAVE_CUDA) || defined(UCCL_HAVE_ROCM) || defined(UCCL_HAVE_FAKE_GPU)
extern const struct uccl_tp_ops uccl_tp_gpu_ipc_ops;
#endif

const struct uccl_tp_ops *const *uccl_tp_list(void)
{
    static const struct uccl_tp_ops *const list[] = {
        &uccl_tp_shm_ops,
        &uccl_tp_tcp_ops,
#ifdef UCCL_HAVE_VERBS
        &uccl_tp_verbs_ops,
#endif
#if defined(UCCL_HAVE_CUDA) || defined(UCCL_HAVE_ROCM) || defined(UCCL_HAVE_FAKE_GPU)
        &uccl_tp_gpu_ipc_ops,
#endif
        NULL,
    };
    return list;
}

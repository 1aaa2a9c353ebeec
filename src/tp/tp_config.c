/* The transports' configuration tables, handed to the registry (util/config.h)
 * so that config itself knows no transport. Apart from tp_list.c so that a
 * unit test replacing uccl_tp_list() still links this. */
#include "uccl_build.h"
#include "core/tp_api.h"

/* Variable prefixes of parts left out of this build: a script that sets
 * UCCL_VERBS_* for every build is then told "not used here", not "unknown". */
static const struct {
    const char *prefix, *what;
} absent_parts[] = {
#ifndef UCCL_HAVE_VERBS
    {"VERBS_", "verbs transport"},
    {"IB_", "verbs transport"},
#endif
#if !defined(UCCL_HAVE_CUDA) && !defined(UCCL_HAVE_ROCM) && !defined(UCCL_HAVE_FAKE_GPU)
    {"GPU_IPC_", "gpu_ipc transport (no GPU backend)"},
#endif
#ifndef UCCL_HAVE_FAKE_GPU
    {"FAKE_GPU_", "fake GPU backend (--enable-fake-gpu)"},
#endif
    {NULL, NULL},
};

void uccl_tp_config_register(void)
{
    for (const struct uccl_tp_ops *const *ops = uccl_tp_list(); *ops != NULL; ops++)
        if ((*ops)->config_table != NULL)
            uccl_cfg_register((*ops)->config_table);
    for (size_t i = 0; absent_parts[i].prefix != NULL; i++)
        uccl_cfg_register_absent(absent_parts[i].prefix, absent_parts[i].what);
}

/* The core's own settings (UCCL_LOG_LEVEL, UCCL_TIMEOUT_MS, ...) and the
 * assembly of every configuration table of this build (core, GPU layer,
 * transports) into the util registry. */
#ifndef UCCL_CORE_CORE_CONFIG_H
#define UCCL_CORE_CORE_CONFIG_H

#include <uccl/uccl.h>

#include "util/config.h"

typedef struct uccl_config {
    int log_level;
    int timeout_ms;
    int setup_timeout_ms;
    int setup_max_pending;
    size_t unexpected_max;
    char transports[UCCL_CFG_STRING_MAX];
    char net_devices[UCCL_CFG_STRING_MAX];
    int progress_thread;
    int rcache;
    char oob_ifaddr[UCCL_CFG_STRING_MAX];
    int oob_port;
    char port_range[UCCL_CFG_STRING_MAX];
    int port_lo, port_hi; /* parsed from port_range; 0, 0 = any free port */
    int oob_bind_any;
    char topo_xml[UCCL_CFG_STRING_MAX];
    char host_id[UCCL_CFG_STRING_MAX];
} uccl_config_t;

extern const uccl_cfg_table_t uccl_core_config_table;

/* Parse the core table (also sets the log level). The first call of the
 * process also warns about unknown UCCL_* variables. */
uccl_status_t uccl_config_get(uccl_config_t *cfg);

/* Every table of this build, registered once per process (thread-safe),
 * NULL-terminated, core first. */
const uccl_cfg_table_t *const *uccl_config_tables(void);

#endif

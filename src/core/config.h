/* Configuration as data: tables of {name, default, doc, offset, type} that
 * parse UCCL_* environment variables into a struct, print defaults and
 * document themselves. The core table is here; each transport keeps its own
 * table beside its code and lists it in its ops. */
#ifndef UCCL_CORE_CONFIG_H
#define UCCL_CORE_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <uccl/uccl.h>

typedef enum {
    UCCL_CFG_INT,    /* int, decimal */
    UCCL_CFG_BOOL,   /* int 0/1: 0 1 y n yes no on off true false */
    UCCL_CFG_SIZE,   /* size_t with optional K/M/G suffix (powers of 1024) */
    UCCL_CFG_STRING, /* char[UCCL_CFG_STRING_MAX], "" when unset */
    UCCL_CFG_LOGLEVEL, /* int, error|warn|info|debug|trace */
} uccl_cfg_type_t;

#define UCCL_CFG_STRING_MAX 256

typedef struct uccl_cfg_field {
    const char *name;  /* without the UCCL_ prefix */
    const char *dflt;
    const char *doc;
    size_t offset;
    uccl_cfg_type_t type;
} uccl_cfg_field_t;

typedef struct uccl_cfg_table {
    const char *prefix; /* "" for core, "TCP_" etc. for a transport */
    const uccl_cfg_field_t *fields; /* ended by {NULL} */
    size_t struct_size;
} uccl_cfg_table_t;

/* Core settings. */
typedef struct uccl_config {
    int log_level;
    int timeout_ms;
    char transports[UCCL_CFG_STRING_MAX];
    char net_devices[UCCL_CFG_STRING_MAX];
    int progress_thread;
    int rcache;
    char oob_ifaddr[UCCL_CFG_STRING_MAX];
    char topo_xml[UCCL_CFG_STRING_MAX];
    char host_id[UCCL_CFG_STRING_MAX];
} uccl_config_t;

extern const uccl_cfg_table_t uccl_core_config_table;

/* Parse one value of the given type into dst. Returns UCCL_ERR_INVALID_PARAM
 * (nothing written) when text is malformed or out of range. */
uccl_status_t uccl_cfg_parse_value(uccl_cfg_type_t type, const char *text, void *dst);

/* Fill cfg from defaults, then from the environment ("UCCL_" prefix name).
 * A malformed variable is an error naming it; nothing is half-parsed. */
uccl_status_t uccl_cfg_parse(const uccl_cfg_table_t *table, void *cfg);

/* Print "UCCL_NAME=value  # doc" for every field of cfg (or the defaults when
 * cfg is NULL). */
void uccl_cfg_print(const uccl_cfg_table_t *table, const void *cfg, FILE *out);

/* Every table compiled in (core first), NULL-terminated. */
const uccl_cfg_table_t *const *uccl_cfg_tables(void);

/* Parse the core table once per process (also sets the log level). */
uccl_status_t uccl_config_get(uccl_config_t *cfg);

#endif

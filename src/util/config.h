/* Configuration as data: tables of {name, default, doc, offset, type} that
 * parse UCCL_* environment variables into a struct, print defaults and
 * document themselves (UCX's config parser idea). This file is generic: each
 * layer keeps its own table beside its code (core, each transport, the fake
 * GPU) and hands it to the registry here, so that the printer, the dump and
 * the unknown-variable check know every legal name. */
#ifndef UCCL_UTIL_CONFIG_H
#define UCCL_UTIL_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
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

/* A field's old name, kept for one release after a rename: when
 * UCCL_<prefix><field> is not set, UCCL_<old_name> is read instead and a
 * warning (once per process and name) names the new variable; when both are
 * set, the new one wins and the old one is said to be ignored. */
typedef struct uccl_cfg_alias {
    const char *old_name; /* without UCCL_, e.g. "IB_TIMEOUT" */
    const char *field;    /* the field's name in its table, e.g. "IB_TIMEOUT" of "VERBS_" */
} uccl_cfg_alias_t;

typedef struct uccl_cfg_table {
    const char *prefix; /* "" for core, "TCP_" etc. for a transport */
    const uccl_cfg_field_t *fields; /* ended by {NULL} */
    size_t struct_size;
    const uccl_cfg_alias_t *aliases; /* ended by {NULL}; NULL = none */
} uccl_cfg_table_t;

/* Parse one value of the given type into dst. Returns UCCL_ERR_INVALID_PARAM
 * (nothing written) when text is malformed or out of range. */
uccl_status_t uccl_cfg_parse_value(uccl_cfg_type_t type, const char *text, void *dst);

/* Fill cfg from defaults, then from the environment ("UCCL_" prefix name,
 * else a field's old name, see uccl_cfg_alias_t). A malformed variable is an
 * error naming it; nothing is half-parsed. */
uccl_status_t uccl_cfg_parse(const uccl_cfg_table_t *table, void *cfg);

/* Range check of a parsed value: lo <= v <= hi, else an error naming the
 * variable (UCCL_<prefix><name>=v) and its range, and false. */
bool uccl_cfg_in_range(const uccl_cfg_table_t *table, const char *name, long long v, long long lo,
                       long long hi);

/* Format the field's value at src as text (the inverse of parse_value). */
void uccl_cfg_format_value(const uccl_cfg_field_t *f, const void *src, char *buf, size_t len);

/* Print "UCCL_NAME=value  # doc" for every field of cfg (or the defaults when
 * cfg is NULL). */
void uccl_cfg_print(const uccl_cfg_table_t *table, const void *cfg, FILE *out);

/* ---- registry: the tables of this build.
 * Registration is meant to happen once, before the first reader (core does
 * it under a pthread_once); it is serialized by a lock, and a table given
 * twice is kept once. Readers see a NULL-terminated list. */
#define UCCL_CFG_TABLES_MAX 16
/* Errors: UCCL_ERR_INVALID_PARAM (NULL), UCCL_ERR_NO_MEMORY (registry full). */
uccl_status_t uccl_cfg_register(const uccl_cfg_table_t *table);
/* A variable prefix of a part this build left out ("VERBS_" without verbs):
 * its variables are reported as unused by this build, not as unknown.
 * what names the part ("verbs"). Both strings must stay valid. */
uccl_status_t uccl_cfg_register_absent(const char *prefix, const char *what);
/* The registered tables, NULL-terminated. */
const uccl_cfg_table_t *const *uccl_cfg_tables(void);
/* The absent part whose prefix starts name[0..len) (without UCCL_), or NULL. */
const char *uccl_cfg_absent_part(const char *name, size_t len);
/* The old name of table's field f (NULL when it has none). */
const char *uccl_cfg_alias_of(const uccl_cfg_table_t *table, const uccl_cfg_field_t *f);

/* ---- the environment against the registry */
typedef enum {
    UCCL_CFG_VAR_KNOWN,  /* a field of a registered table */
    UCCL_CFG_VAR_ABSENT, /* under a prefix registered as absent */
    UCCL_CFG_VAR_ALIAS,  /* the old name of a field (hint: the new name) */
    UCCL_CFG_VAR_UNKNOWN,
} uccl_cfg_var_kind_t;

/* Classify the variable name (with its UCCL_ prefix, up to '=' or the end).
 * For an old name, hint receives the new one. For an unknown one, hint (when non-NULL) receives the closest legal name
 * within a small edit distance, or "" when none is close. what (when
 * non-NULL) receives the absent part's name for UCCL_CFG_VAR_ABSENT. */
uccl_cfg_var_kind_t uccl_cfg_classify(const char *name, char *hint, size_t hint_len,
                                      const char **what);

/* Warn (once per call) about each UCCL_* variable of env (an environ-style
 * array) that no registered table knows, naming the closest known name;
 * variables of absent parts are said at info level, old names are left to
 * the parser's deprecation warning. Returns the number of unknown variables. */
int uccl_cfg_check_env(char *const *env);

/* ---- dump: every registered variable with its value, as text or JSON,
 * plus the unknown UCCL_* variables of the environment. */
enum {
    UCCL_CFG_DUMP_JSON = 1u << 0,     /* JSON array instead of text */
    UCCL_CFG_DUMP_DEFAULTS = 1u << 1, /* built-in defaults, environment ignored */
};
/* Write the dump to out. Never fails on the environment: a malformed value
 * shows the default and is marked invalid. */
void uccl_cfg_dump(FILE *out, unsigned flags, char *const *env);

/* text as a JSON string literal (quotes, backslashes and control bytes
 * escaped): the dump's and uccl_info's JSON. */
void uccl_json_string(FILE *out, const char *text);

#endif

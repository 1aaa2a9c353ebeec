/* The core configuration table and the generic table parser and printer. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "tp.h"

#define CORE_FIELD(name, dflt, doc, field, type) {name, dflt, doc, offsetof(uccl_config_t, field), type}

static const uccl_cfg_field_t core_fields[] = {
    CORE_FIELD("LOG_LEVEL", "warn", "log level: error, warn, info, debug, trace", log_level,
               UCCL_CFG_LOGLEVEL),
    CORE_FIELD("TIMEOUT_MS", "60000",
               "bound on every wait that depends on a peer (connect, accept, uccl_wait); > 0",
               timeout_ms, UCCL_CFG_INT),
    CORE_FIELD("TRANSPORTS", "", "comma list of transports allowed (empty = all usable)", transports,
               UCCL_CFG_STRING),
    CORE_FIELD("NET_DEVICES", "", "network devices to use, e.g. mlx5_0:1,rxe0 (empty = by topology)",
               net_devices, UCCL_CFG_STRING),
    CORE_FIELD("PROGRESS_THREAD", "0", "1 = progress the engine from a background thread",
               progress_thread, UCCL_CFG_BOOL),
    CORE_FIELD("RCACHE", "1", "1 = share registrations of the same range (registration cache)",
               rcache, UCCL_CFG_BOOL),
    CORE_FIELD("OOB_IFADDR", "",
               "IPv4 address to listen on for connection setup and advertise (empty = the host's "
               "first non-loopback address, else 127.0.0.1)",
               oob_ifaddr, UCCL_CFG_STRING),
    CORE_FIELD("HOST_ID", "",
               "host identity to advertise instead of hostname + boot id (test use: ranks with "
               "different values on one machine act as different hosts and never use shm)",
               host_id, UCCL_CFG_STRING),
    CORE_FIELD("TOPO_XML", "", "hwloc XML file to load instead of the live machine", topo_xml,
               UCCL_CFG_STRING),
    {NULL, NULL, NULL, 0, 0},
};

const uccl_cfg_table_t uccl_core_config_table = {"", core_fields, sizeof(uccl_config_t)};

static int parse_bool(const char *t)
{
    static const char *const yes[] = {"1", "y", "yes", "on", "true"};
    static const char *const no[] = {"0", "n", "no", "off", "false"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(t, yes[i]) == 0)
            return 1;
        if (strcasecmp(t, no[i]) == 0)
            return 0;
    }
    return -1;
}

static uccl_status_t parse_size(const char *t, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (!isdigit((unsigned char)*t)) /* strtoull would skip blanks and negate "-1" */
        return UCCL_ERR_INVALID_PARAM;
    errno = 0;
    v = strtoull(t, &end, 10);
    if (errno != 0 || end == t)
        return UCCL_ERR_INVALID_PARAM;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return UCCL_ERR_INVALID_PARAM;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || (shift && v > (SIZE_MAX >> shift)))
        return UCCL_ERR_INVALID_PARAM;
    *out = (size_t)(v << shift);
    return UCCL_OK;
}

uccl_status_t uccl_cfg_parse_value(uccl_cfg_type_t type, const char *text, void *dst)
{
    char *end;
    long v;
    int b;

    if (text == NULL || dst == NULL)
        return UCCL_ERR_INVALID_PARAM;
    switch (type) {
    case UCCL_CFG_INT:
        errno = 0;
        v = strtol(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX)
            return UCCL_ERR_INVALID_PARAM;
        *(int *)dst = (int)v;
        return UCCL_OK;
    case UCCL_CFG_BOOL:
        b = parse_bool(text);
        if (b < 0)
            return UCCL_ERR_INVALID_PARAM;
        *(int *)dst = b;
        return UCCL_OK;
    case UCCL_CFG_SIZE:
        return parse_size(text, (size_t *)dst);
    case UCCL_CFG_STRING:
        if (strlen(text) >= UCCL_CFG_STRING_MAX)
            return UCCL_ERR_INVALID_PARAM;
        strcpy((char *)dst, text);
        return UCCL_OK;
    case UCCL_CFG_LOGLEVEL:
        b = uccl_log_level_parse(text);
        if (b < 0)
            return UCCL_ERR_INVALID_PARAM;
        *(int *)dst = b;
        return UCCL_OK;
    }
    return UCCL_ERR_INVALID_PARAM;
}

uccl_status_t uccl_cfg_parse(const uccl_cfg_table_t *table, void *cfg)
{
    char envname[128];
    uccl_status_t st = UCCL_OK;
    void *tmp;

    if (table == NULL || cfg == NULL)
        return UCCL_ERR_INVALID_PARAM;
    /* parse into a scratch copy so that a bad variable leaves cfg untouched */
    tmp = calloc(1, table->struct_size);
    if (tmp == NULL)
        return UCCL_ERR_NO_MEMORY;
    for (const uccl_cfg_field_t *f = table->fields; f->name != NULL; f++) {
        void *dst = (char *)tmp + f->offset;
        const char *env;

        if (uccl_cfg_parse_value(f->type, f->dflt, dst) != UCCL_OK) {
            uccl_error("bad built-in default %s for UCCL_%s%s", f->dflt, table->prefix, f->name);
            st = UCCL_ERR_INVALID_PARAM;
            break;
        }
        snprintf(envname, sizeof(envname), "UCCL_%s%s", table->prefix, f->name);
        env = getenv(envname);
        if (env != NULL && uccl_cfg_parse_value(f->type, env, dst) != UCCL_OK) {
            uccl_error("invalid value '%s' for %s (%s)", env, envname, f->doc);
            st = UCCL_ERR_INVALID_PARAM;
            break;
        }
    }
    if (st == UCCL_OK)
        memcpy(cfg, tmp, table->struct_size);
    free(tmp);
    return st;
}

static void format_value(const uccl_cfg_field_t *f, const void *src, char *buf, size_t len)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
    int level;

    switch (f->type) {
    case UCCL_CFG_INT: snprintf(buf, len, "%d", *(const int *)src); break;
    case UCCL_CFG_BOOL: snprintf(buf, len, "%d", *(const int *)src ? 1 : 0); break;
    case UCCL_CFG_SIZE: snprintf(buf, len, "%zu", *(const size_t *)src); break;
    case UCCL_CFG_STRING: snprintf(buf, len, "%s", (const char *)src); break;
    case UCCL_CFG_LOGLEVEL:
        level = *(const int *)src;
        snprintf(buf, len, "%s", level >= 0 && level <= 4 ? levels[level] : "?");
        break;
    }
}

void uccl_cfg_print(const uccl_cfg_table_t *table, const void *cfg, FILE *out)
{
    char value[UCCL_CFG_STRING_MAX + 32];

    for (const uccl_cfg_field_t *f = table->fields; f->name != NULL; f++) {
        if (cfg != NULL)
            format_value(f, (const char *)cfg + f->offset, value, sizeof(value));
        else
            snprintf(value, sizeof(value), "%s", f->dflt);
        fprintf(out, "UCCL_%s%s=%s\n    # %s\n", table->prefix, f->name, value, f->doc);
    }
}

const uccl_cfg_table_t *const *uccl_cfg_tables(void)
{
    static const uccl_cfg_table_t *tables[UCCL_TP_MAX + 2];

    if (tables[0] == NULL) {
        size_t n = 0;
        tables[n++] = &uccl_core_config_table;
        for (const struct uccl_tp_ops *const *ops = uccl_tp_list(); *ops != NULL; ops++)
            if ((*ops)->config_table != NULL)
                tables[n++] = (*ops)->config_table;
        tables[n] = NULL;
    }
    return tables;
}

uccl_status_t uccl_config_get(uccl_config_t *cfg)
{
    uccl_status_t st = uccl_cfg_parse(&uccl_core_config_table, cfg);

    if (st != UCCL_OK)
        return st;
    if (cfg->timeout_ms <= 0) {
        uccl_error("UCCL_TIMEOUT_MS must be > 0 (got %d)", cfg->timeout_ms);
        return UCCL_ERR_INVALID_PARAM;
    }
    uccl_log_level_current = (uccl_log_level_t)cfg->log_level;
    return UCCL_OK;
}

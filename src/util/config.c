/* The generic table parser and printer, and the registry of the tables
 * compiled in. */
#include "util/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

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
        if (isspace((unsigned char)*text)) /* strtol would skip it: " 5" is not a number */
            return UCCL_ERR_INVALID_PARAM;
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

const char *uccl_cfg_alias_of(const uccl_cfg_table_t *table, const uccl_cfg_field_t *f)
{
    for (const uccl_cfg_alias_t *a = table->aliases; a != NULL && a->old_name != NULL; a++)
        if (strcmp(a->field, f->name) == 0)
            return a->old_name;
    return NULL;
}

/* Old names warned about already: once per process and name. */
static pthread_mutex_t alias_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *alias_warned[64];
static size_t nalias_warned;

static bool alias_first_use(const char *old_name)
{
    bool first = true;

    pthread_mutex_lock(&alias_lock);
    for (size_t i = 0; i < nalias_warned && first; i++)
        first = strcmp(alias_warned[i], old_name) != 0;
    if (first && nalias_warned < sizeof(alias_warned) / sizeof(alias_warned[0]))
        alias_warned[nalias_warned++] = old_name;
    pthread_mutex_unlock(&alias_lock);
    return first;
}

/* The value of field f: UCCL_<prefix><name>, else its old name (warned
 * about once); NULL when neither is set. envname receives the name read. */
static const char *field_env(const uccl_cfg_table_t *table, const uccl_cfg_field_t *f,
                             char *envname, size_t len)
{
    const char *old = uccl_cfg_alias_of(table, f), *value, *old_value = NULL;
    char oldname[128];

    snprintf(envname, len, "UCCL_%s%s", table->prefix, f->name);
    value = getenv(envname);
    if (old == NULL)
        return value;
    snprintf(oldname, sizeof(oldname), "UCCL_%s", old);
    old_value = getenv(oldname);
    if (old_value == NULL)
        return value;
    if (value != NULL) {
        if (alias_first_use(old))
            uccl_warn("UCCL_%s is deprecated and ignored: %s is set too", old, envname);
        return value;
    }
    if (alias_first_use(old))
        uccl_warn("UCCL_%s is deprecated: use %s (read as that for now)", old, envname);
    snprintf(envname, len, "%s", oldname);
    return old_value;
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
        env = field_env(table, f, envname, sizeof(envname));
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

void uccl_cfg_format_value(const uccl_cfg_field_t *f, const void *src, char *buf, size_t len)
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
            uccl_cfg_format_value(f, (const char *)cfg + f->offset, value, sizeof(value));
        else
            snprintf(value, sizeof(value), "%s", f->dflt);
        fprintf(out, "UCCL_%s%s=%s\n    # %s\n", table->prefix, f->name, value, f->doc);
    }
}

/* ---------------------------------------------------------------- registry */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const uccl_cfg_table_t *registry[UCCL_CFG_TABLES_MAX + 1]; /* NULL-terminated */
static struct {
    const char *prefix, *what;
} absent[UCCL_CFG_TABLES_MAX];
static size_t nregistered, nabsent;

uccl_status_t uccl_cfg_register(const uccl_cfg_table_t *table)
{
    uccl_status_t st = UCCL_OK;

    if (table == NULL || table->prefix == NULL || table->fields == NULL)
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nregistered; i++)
        if (registry[i] == table)
            goto out;
    if (nregistered == UCCL_CFG_TABLES_MAX) {
        uccl_error("config registry full (%d tables): UCCL_%s* not registered",
                   UCCL_CFG_TABLES_MAX, table->prefix);
        st = UCCL_ERR_NO_MEMORY;
        goto out;
    }
    registry[nregistered++] = table;
out:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

uccl_status_t uccl_cfg_register_absent(const char *prefix, const char *what)
{
    uccl_status_t st = UCCL_OK;

    if (prefix == NULL || what == NULL || prefix[0] == '\0')
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nabsent; i++)
        if (strcmp(absent[i].prefix, prefix) == 0)
            goto out;
    if (nabsent == UCCL_CFG_TABLES_MAX) {
        uccl_error("config registry full: prefix UCCL_%s* not registered as absent", prefix);
        st = UCCL_ERR_NO_MEMORY;
        goto out;
    }
    absent[nabsent].prefix = prefix;
    absent[nabsent].what = what;
    nabsent++;
out:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

const uccl_cfg_table_t *const *uccl_cfg_tables(void)
{
    return registry;
}

/* The part a prefix-absent variable belongs to, or NULL (name without UCCL_). */
const char *uccl_cfg_absent_part(const char *name, size_t len)
{
    const char *what = NULL;

    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nabsent && what == NULL; i++) {
        size_t plen = strlen(absent[i].prefix);
        if (len >= plen && strncmp(name, absent[i].prefix, plen) == 0)
            what = absent[i].what;
    }
    pthread_mutex_unlock(&registry_lock);
    return what;
}

bool uccl_cfg_in_range(const uccl_cfg_table_t *table, const char *name, long long v, long long lo,
                       long long hi)
{
    if (v >= lo && v <= hi)
        return true;
    uccl_error("UCCL_%s%s=%lld: out of range, must be in [%lld, %lld]", table->prefix, name, v, lo,
               hi);
    return false;
}

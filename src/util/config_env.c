/* The environment against the config registry: which UCCL_* variables no
 * table knows (with the closest legal name), and the dump of every variable
 * with its value as text or JSON. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/log.h"

#define NAME_MAX_LEN 128 /* longest variable name considered for a hint */

/* Levenshtein distance, two rows; both strings shorter than NAME_MAX_LEN. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t row[2][NAME_MAX_LEN + 1];

    for (size_t j = 0; j <= lb; j++)
        row[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *prev = row[(i - 1) & 1], *cur = row[i & 1];
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
    }
    return row[la & 1][lb];
}

/* name[0..len) is the old name of a registered field: hint gets the new. */
static bool lookup_alias(const char *name, size_t len, char *hint, size_t hint_len)
{
    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++) {
        for (const uccl_cfg_alias_t *a = (*t)->aliases; a != NULL && a->old_name != NULL; a++) {
            if (strlen(a->old_name) == len && memcmp(a->old_name, name, len) == 0) {
                if (hint != NULL)
                    snprintf(hint, hint_len, "UCCL_%s%s", (*t)->prefix, a->field);
                return true;
            }
        }
    }
    return false;
}

/* name[0..len) is a field of a registered table; else remember the closest. */
static bool lookup(const char *name, size_t len, char *hint, size_t hint_len)
{
    char full[NAME_MAX_LEN];
    size_t best = (size_t)-1, limit = len / 5 > 2 ? len / 5 : 2;

    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++) {
        for (const uccl_cfg_field_t *f = (*t)->fields; f->name != NULL; f++) {
            int n = snprintf(full, sizeof(full), "%s%s", (*t)->prefix, f->name);
            size_t d;
            if (n < 0 || (size_t)n >= sizeof(full))
                continue;
            if ((size_t)n == len && memcmp(full, name, len) == 0)
                return true;
            if (hint == NULL || len >= NAME_MAX_LEN)
                continue;
            d = edit_distance(name, len, full, (size_t)n);
            if (d <= limit && d < best) {
                best = d;
                snprintf(hint, hint_len, "UCCL_%s", full);
            }
        }
    }
    return false;
}

uccl_cfg_var_kind_t uccl_cfg_classify(const char *name, char *hint, size_t hint_len,
                                      const char **what)
{
    const char *part;
    size_t len;

    if (hint != NULL && hint_len > 0)
        hint[0] = '\0';
    else
        hint = NULL;
    if (name == NULL || strncmp(name, "UCCL_", 5) != 0)
        return UCCL_CFG_VAR_UNKNOWN;
    name += 5;
    len = strcspn(name, "=");
    if (lookup(name, len, hint, hint_len))
        return UCCL_CFG_VAR_KNOWN;
    if (lookup_alias(name, len, hint, hint_len))
        return UCCL_CFG_VAR_ALIAS;
    part = uccl_cfg_absent_part(name, len);
    if (part != NULL) {
        if (hint != NULL)
            hint[0] = '\0';
        if (what != NULL)
            *what = part;
        return UCCL_CFG_VAR_ABSENT;
    }
    return UCCL_CFG_VAR_UNKNOWN;
}

int uccl_cfg_check_env(char *const *env)
{
    char hint[NAME_MAX_LEN + 8];
    const char *what = NULL;
    int unknown = 0;

    for (; env != NULL && *env != NULL; env++) {
        int len = (int)strcspn(*env, "=");
        if (strncmp(*env, "UCCL_", 5) != 0)
            continue;
        switch (uccl_cfg_classify(*env, hint, sizeof(hint), &what)) {
        case UCCL_CFG_VAR_KNOWN: break;
        case UCCL_CFG_VAR_ALIAS: break; /* uccl_cfg_parse warns when it reads one */
        case UCCL_CFG_VAR_ABSENT:
            uccl_info("%.*s is not used: this build has no %s", len, *env, what);
            break;
        case UCCL_CFG_VAR_UNKNOWN:
            unknown++;
            if (hint[0] != '\0')
                uccl_warn("unknown variable %.*s is ignored (did you mean %s?)", len, *env, hint);
            else
                uccl_warn("unknown variable %.*s is ignored (uccl_info -c lists every variable)",
                          len, *env);
            break;
        }
    }
    return unknown;
}

/* ---------------------------------------------------------------- dump */

void uccl_json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

/* One dumped variable. state: default, env, invalid (raw ignored), unknown,
 * unused (a part this build left out). */
typedef struct dump_var {
    const char *name, *value, *dflt, *state, *doc, *raw, *hint;
} dump_var_t;

static void dump_one(FILE *out, unsigned flags, const dump_var_t *v, bool *first)
{
    if (!(flags & UCCL_CFG_DUMP_JSON)) {
        fprintf(out, "%s=%s\n    # %s\n", v->name, v->value, v->doc);
        if (v->raw != NULL)
            fprintf(out, "    # invalid value '%s' ignored: default shown\n", v->raw);
        return;
    }
    fprintf(out, "%s{\"name\":", *first ? "" : ",");
    uccl_json_string(out, v->name);
    fprintf(out, ",\"value\":");
    uccl_json_string(out, v->value);
    if (v->dflt != NULL) {
        fprintf(out, ",\"default\":");
        uccl_json_string(out, v->dflt);
    }
    fprintf(out, ",\"state\":\"%s\",\"doc\":", v->state);
    uccl_json_string(out, v->doc);
    if (v->raw != NULL) {
        fprintf(out, ",\"raw\":");
        uccl_json_string(out, v->raw);
    }
    if (v->hint != NULL && v->hint[0] != '\0') {
        fprintf(out, ",\"hint\":");
        uccl_json_string(out, v->hint);
    }
    fputc('}', out);
    *first = false;
}

static const char *env_value(char *const *env, const char *name)
{
    size_t len = strlen(name);

    for (; env != NULL && *env != NULL; env++)
        if (strncmp(*env, name, len) == 0 && (*env)[len] == '=')
            return *env + len + 1;
    return NULL;
}

static void dump_table(FILE *out, unsigned flags, char *const *env, const uccl_cfg_table_t *t,
                       bool *first)
{
    union {
        int i;
        size_t z;
        char s[UCCL_CFG_STRING_MAX];
    } scratch;
    char name[NAME_MAX_LEN + 8], value[UCCL_CFG_STRING_MAX + 32];

    for (const uccl_cfg_field_t *f = t->fields; f->name != NULL; f++) {
        const char *raw = NULL;
        dump_var_t v = {.name = name, .value = value, .dflt = f->dflt, .state = "default",
                        .doc = f->doc};

        snprintf(name, sizeof(name), "UCCL_%s%s", t->prefix, f->name);
        if (!(flags & UCCL_CFG_DUMP_DEFAULTS)) {
            const char *old = uccl_cfg_alias_of(t, f);
            char oldname[NAME_MAX_LEN + 8];

            raw = env_value(env, name);
            if (raw == NULL && old != NULL) { /* set under its old name */
                snprintf(oldname, sizeof(oldname), "UCCL_%s", old);
                raw = env_value(env, oldname);
            }
        }
        if (raw != NULL && uccl_cfg_parse_value(f->type, raw, &scratch) == UCCL_OK) {
            v.state = "env";
        } else {
            v.state = raw != NULL ? "invalid" : "default";
            v.raw = raw;
            if (uccl_cfg_parse_value(f->type, f->dflt, &scratch) != UCCL_OK) {
                snprintf(value, sizeof(value), "%s", f->dflt); /* shown as written */
                dump_one(out, flags, &v, first);
                continue;
            }
        }
        uccl_cfg_format_value(f, &scratch, value, sizeof(value));
        dump_one(out, flags, &v, first);
    }
}

/* The UCCL_* variables of env that no table knows. */
static void dump_strangers(FILE *out, unsigned flags, char *const *env, bool *first)
{
    char name[NAME_MAX_LEN + 8], hint[NAME_MAX_LEN + 8], doc[NAME_MAX_LEN + 64];

    for (; env != NULL && *env != NULL; env++) {
        const char *what = NULL, *eq = strchr(*env, '=');
        dump_var_t v = {.name = name, .doc = doc, .hint = hint};
        uccl_cfg_var_kind_t kind;

        if (strncmp(*env, "UCCL_", 5) != 0 || eq == NULL || (size_t)(eq - *env) >= sizeof(name))
            continue;
        kind = uccl_cfg_classify(*env, hint, sizeof(hint), &what);
        if (kind == UCCL_CFG_VAR_KNOWN || kind == UCCL_CFG_VAR_ALIAS)
            continue; /* an old name shows as the value of its new one */
        snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
        v.value = eq + 1;
        if (kind == UCCL_CFG_VAR_ABSENT) {
            v.state = "unused";
            snprintf(doc, sizeof(doc), "not used: this build has no %s", what);
        } else {
            v.state = "unknown";
            if (hint[0] != '\0')
                snprintf(doc, sizeof(doc), "unknown variable, ignored (did you mean %s?)", hint);
            else
                snprintf(doc, sizeof(doc), "unknown variable, ignored");
        }
        dump_one(out, flags, &v, first);
    }
}

void uccl_cfg_dump(FILE *out, unsigned flags, char *const *env)
{
    bool first = true;

    if (flags & UCCL_CFG_DUMP_JSON)
        fputc('[', out);
    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++)
        dump_table(out, flags, env, *t, &first);
    if (!(flags & UCCL_CFG_DUMP_DEFAULTS))
        dump_strangers(out, flags, env, &first);
    if (flags & UCCL_CFG_DUMP_JSON)
        fputc(']', out);
}

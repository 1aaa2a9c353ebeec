/* Unit tests of the configuration against the environment (src/util/
 * config_env.c, src/core/core_config.c) and of the log sink (src/util/log.c):
 * unknown UCCL_* variables are warned about once per process with the
 * closest legal name, parts left out of the build are told apart, and the
 * public uccl_config_dump sizes, formats and escapes every variable. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "uccl_build.h"
#include "unit.h"

/* ------------------------------------------------------------ log capture */

#define CAPTURE_MAX 32

typedef struct captured {
    uccl_log_level_t level;
    char file[64];
    int line;
    char msg[512];
} captured_t;

static captured_t lines[CAPTURE_MAX];
static int nlines;

static void capture(void *arg, uccl_log_level_t level, const char *file, int line, const char *msg)
{
    int *calls = arg;

    (*calls)++;
    if (nlines == CAPTURE_MAX)
        return;
    lines[nlines].level = level;
    snprintf(lines[nlines].file, sizeof(lines[nlines].file), "%s", file);
    lines[nlines].line = line;
    snprintf(lines[nlines].msg, sizeof(lines[nlines].msg), "%s", msg);
    nlines++;
}

static int calls;

static void capture_start(void)
{
    nlines = 0;
    calls = 0;
    uccl_log_set_sink(capture, &calls);
}

/* Lines captured at level whose message holds every needle (up to 2). */
static int count_lines(uccl_log_level_t level, const char *a, const char *b)
{
    int n = 0;
    for (int i = 0; i < nlines; i++)
        if (lines[i].level == level && strstr(lines[i].msg, a) != NULL &&
            (b == NULL || strstr(lines[i].msg, b) != NULL))
            n++;
    return n;
}

static void test_sink(void)
{
    uccl_log_level_t saved = uccl_log_level_current;

    uccl_log_level_current = UCCL_LOG_INFO;
    capture_start();
    uccl_warn("sink test %d", 42);
    uccl_debug("below the level: not delivered");
    uccl_info("at info");
    CU_ASSERT_EQUAL(calls, 2);
    CU_ASSERT_EQUAL(lines[0].level, UCCL_LOG_WARN);
    CU_ASSERT_STRING_EQUAL(lines[0].msg, "sink test 42");
    CU_ASSERT_STRING_EQUAL(lines[0].file, "test_config_env.c"); /* base name */
    CU_ASSERT(lines[0].line > 0);
    CU_ASSERT_EQUAL(lines[1].level, UCCL_LOG_INFO);
    uccl_log_set_sink(NULL, NULL);
    uccl_warn("back on stderr (expected in this test's log)");
    CU_ASSERT_EQUAL(calls, 2);
    uccl_log_level_current = saved;
}

/* ------------------------------------------------------------ classify */

typedef struct utest_cfg {
    int count;
} utest_cfg_t;

static const uccl_cfg_field_t utest_fields[] = {
    {"COUNT", "3", "a test value", offsetof(utest_cfg_t, count), UCCL_CFG_INT},
    {NULL, NULL, NULL, 0, 0},
};
static const uccl_cfg_table_t utest_table = {
    .prefix = "ENVTEST_", .fields = utest_fields, .struct_size = sizeof(utest_cfg_t)};

static void test_classify(void)
{
    char hint[64];
    const char *what = NULL;

    uccl_config_tables(); /* core's registration, once */
    UNIT_ASSERT_STATUS(uccl_cfg_register(&utest_table), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_cfg_register(&utest_table), UCCL_OK); /* kept once */
    UNIT_ASSERT_STATUS(uccl_cfg_register(NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_cfg_register_absent("ABSENTTEST_", "test part"), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_cfg_register_absent("", "x"), UCCL_ERR_INVALID_PARAM);

    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_TIMEOUT_MS", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_KNOWN);
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_ENVTEST_COUNT=7", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_KNOWN);
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_TIMEOUT_MX=1", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_UNKNOWN);
    CU_ASSERT_STRING_EQUAL(hint, "UCCL_TIMEOUT_MS");
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_ENVTEST_CUONT", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_UNKNOWN);
    CU_ASSERT_STRING_EQUAL(hint, "UCCL_ENVTEST_COUNT");
    /* a prefix of a legal name is not that name */
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_TIMEOUT", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_UNKNOWN);
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_ZZZZZZZZZZZZZZZZ", hint, sizeof(hint), NULL),
                    UCCL_CFG_VAR_UNKNOWN);
    CU_ASSERT_STRING_EQUAL(hint, ""); /* nothing close */
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_ABSENTTEST_X=1", hint, sizeof(hint), &what),
                    UCCL_CFG_VAR_ABSENT);
    CU_ASSERT_STRING_EQUAL(what, "test part");
#ifndef UCCL_HAVE_FAKE_GPU
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_FAKE_GPU_FAIL_COPY=1", NULL, 0, NULL),
                    UCCL_CFG_VAR_ABSENT);
#else
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_FAKE_GPU_FAIL_COPY=1", NULL, 0, NULL),
                    UCCL_CFG_VAR_KNOWN);
#endif
}

/* check_env over an explicit environment: one warning per unknown name,
 * with the hint; absent parts at info; known names and other variables
 * nothing. */
static void test_check_env(void)
{
    char *env[] = {"PATH=/bin",
                   "UCCL_TIMEOUT_MS=5",
                   "UCCL_TIMEOUT_MX=5",
                   "UCCL_ENVTEST_CUONT=1",
                   "UCCL_QQQQQQQQQQQQQQQQQQ=1",
                   "UCCL_ABSENTTEST_Y=2",
                   "XUCCL_TIMEOUT_MX=1",
                   NULL};
    uccl_log_level_t saved = uccl_log_level_current;

    uccl_log_level_current = UCCL_LOG_INFO;
    capture_start();
    CU_ASSERT_EQUAL(uccl_cfg_check_env(env), 3);
    uccl_log_set_sink(NULL, NULL);
    uccl_log_level_current = saved;
    CU_ASSERT_EQUAL(count_lines(UCCL_LOG_WARN, "UCCL_TIMEOUT_MX", "did you mean UCCL_TIMEOUT_MS?"), 1);
    CU_ASSERT_EQUAL(count_lines(UCCL_LOG_WARN, "UCCL_ENVTEST_CUONT", "UCCL_ENVTEST_COUNT"), 1);
    CU_ASSERT_EQUAL(count_lines(UCCL_LOG_WARN, "UCCL_QQQQQQQQQQQQQQQQQQ", "uccl_info -c"), 1);
    CU_ASSERT_EQUAL(count_lines(UCCL_LOG_INFO, "UCCL_ABSENTTEST_Y", "test part"), 1);
    CU_ASSERT_EQUAL(count_lines(UCCL_LOG_WARN, "=5", NULL), 0); /* names only, no values */
    CU_ASSERT_EQUAL(nlines, 4);
}

/* The first uccl_config_get of a process warns, later ones do not (a child:
 * this process's once has not run yet, the child's is its own). */
static void test_warn_once(void)
{
    pid_t pid = fork();
    int status = 0;

    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        uccl_config_t cfg;
        int rc = 0;

        /* only this test's variable, whatever UCCL_* the caller exported */
        for (int again = 1; again;) {
            again = 0;
            for (char **e = environ; *e != NULL; e++)
                if (strncmp(*e, "UCCL_", 5) == 0) {
                    char name[128];
                    snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
                    unsetenv(name);
                    again = 1;
                    break;
                }
        }
        setenv("UCCL_TIMEOUT_MX", "5", 1);
        capture_start();
        rc |= uccl_config_get(&cfg) != UCCL_OK;
        rc |= (count_lines(UCCL_LOG_WARN, "UCCL_TIMEOUT_MX", "UCCL_TIMEOUT_MS") != 1) << 1;
        rc |= uccl_config_get(&cfg) != UCCL_OK;
        rc |= (nlines != 1) << 2;
        _exit(rc);
    }
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0); /* 1: get failed, 2: no warning, 4: warned twice */
}

/* ------------------------------------------------------------ old names */

typedef struct alias_cfg {
    int depth;
    int width;
} alias_cfg_t;

static const uccl_cfg_field_t alias_fields[] = {
    {"DEPTH", "8", "a renamed value", offsetof(alias_cfg_t, depth), UCCL_CFG_INT},
    {"WIDTH", "2", "a value never renamed", offsetof(alias_cfg_t, width), UCCL_CFG_INT},
    {NULL, NULL, NULL, 0, 0},
};
static const uccl_cfg_alias_t alias_aliases[] = {
    {"OLDTEST_DEPTH", "DEPTH"},
    {NULL, NULL},
};
static const uccl_cfg_table_t alias_table = {.prefix = "ALIASTEST_",
                                             .fields = alias_fields,
                                             .struct_size = sizeof(alias_cfg_t),
                                             .aliases = alias_aliases};

/* An old name is read when the new one is unset, with one deprecation
 * warning per process naming the new one; the new name wins when both are
 * set; a malformed old value is refused naming the old variable; classify
 * and the dump know the old name. Runs in a child: "once per process". */
static void test_alias(void)
{
    pid_t pid = fork();
    int status = 0;

    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        alias_cfg_t cfg;
        char hint[64], *text;
        size_t len = 0;
        int rc = 0;

        unsetenv("UCCL_ALIASTEST_DEPTH");
        setenv("UCCL_OLDTEST_DEPTH", "5", 1);
        capture_start();
        rc |= uccl_cfg_parse(&alias_table, &cfg) != UCCL_OK || cfg.depth != 5 || cfg.width != 2;
        rc |= (count_lines(UCCL_LOG_WARN, "UCCL_OLDTEST_DEPTH is deprecated",
                           "use UCCL_ALIASTEST_DEPTH") != 1) << 1;
        rc |= (uccl_cfg_parse(&alias_table, &cfg) != UCCL_OK || cfg.depth != 5) << 2;
        rc |= (nlines != 1) << 3; /* once per process */
        setenv("UCCL_ALIASTEST_DEPTH", "7", 1);
        rc |= (uccl_cfg_parse(&alias_table, &cfg) != UCCL_OK || cfg.depth != 7) << 4; /* new wins */
        unsetenv("UCCL_ALIASTEST_DEPTH");
        setenv("UCCL_OLDTEST_DEPTH", "deep", 1);
        nlines = 0;
        cfg.depth = 99;
        rc |= (uccl_cfg_parse(&alias_table, &cfg) != UCCL_ERR_INVALID_PARAM || cfg.depth != 99) << 5;
        rc |= (count_lines(UCCL_LOG_ERROR, "'deep'", "UCCL_OLDTEST_DEPTH") != 1) << 6;
        uccl_log_set_sink(NULL, NULL);
        /* classify: an old name is neither known nor unknown, and hints the new */
        uccl_config_tables();
        rc |= (uccl_cfg_register(&alias_table) != UCCL_OK) << 7;
        rc |= (uccl_cfg_classify("UCCL_OLDTEST_DEPTH=1", hint, sizeof(hint), NULL) !=
               UCCL_CFG_VAR_ALIAS || strcmp(hint, "UCCL_ALIASTEST_DEPTH") != 0) << 8;
        /* the dump shows the value under the new name, not as a stranger */
        setenv("UCCL_OLDTEST_DEPTH", "6", 1);
        text = uccl_config_dump(0, NULL, &len) == UCCL_ERR_BUFFER_TOO_SMALL ? malloc(len) : NULL;
        rc |= (text == NULL || uccl_config_dump(0, text, &len) != UCCL_OK ||
               strstr(text, "UCCL_ALIASTEST_DEPTH=6\n") == NULL ||
               strstr(text, "\nUCCL_OLDTEST_DEPTH") != NULL) << 9;
        free(text);
        _exit(rc);
    }
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        fprintf(stderr, "\n  alias child: failed checks mask 0x%x\n", WEXITSTATUS(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

/* The renamed knobs of the transports: their old names are aliases of the
 * new ones (verbs under VERBS_, one split knob name in shm and gpu_ipc). */
static void test_transport_aliases(void)
{
    static const char *const pairs[][2] = {
#ifdef UCCL_HAVE_VERBS
        {"UCCL_IB_TIMEOUT", "UCCL_VERBS_IB_TIMEOUT"},
        {"UCCL_IB_GID_INDEX", "UCCL_VERBS_IB_GID_INDEX"},
#endif
#if defined(UCCL_HAVE_CUDA) || defined(UCCL_HAVE_ROCM) || defined(UCCL_HAVE_FAKE_GPU)
        {"UCCL_GPU_IPC_PULL_SHARE", "UCCL_GPU_IPC_SPLIT_PCT"},
        {"UCCL_GPU_IPC_SPLIT_MIN", "UCCL_GPU_IPC_STREAM_SPLIT_MIN"},
#endif
        {NULL, NULL},
    };
    char hint[64];
    int checked = 0;

    uccl_config_tables();
    for (int i = 0; pairs[i][0] != NULL; i++, checked++) {
        CU_ASSERT_EQUAL(uccl_cfg_classify(pairs[i][0], hint, sizeof(hint), NULL), UCCL_CFG_VAR_ALIAS);
        CU_ASSERT_STRING_EQUAL(hint, pairs[i][1]);
        CU_ASSERT_EQUAL(uccl_cfg_classify(pairs[i][1], NULL, 0, NULL), UCCL_CFG_VAR_KNOWN);
    }
    CU_ASSERT_EQUAL(uccl_cfg_classify("UCCL_SHM_SPLIT_PCT", NULL, 0, NULL), UCCL_CFG_VAR_KNOWN);
    if (checked == 0)
        printf("SKIP: neither verbs nor gpu_ipc in this build: no renamed knob to check\n");
}

/* ------------------------------------------------------------ dump */

static char *dump(unsigned flags)
{
    size_t len = 0;
    char *buf;

    UNIT_ASSERT_STATUS(uccl_config_dump(flags, NULL, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    buf = malloc(len);
    if (buf == NULL)
        return NULL;
    UNIT_ASSERT_STATUS(uccl_config_dump(flags, buf, &len), UCCL_OK);
    CU_ASSERT_EQUAL(strlen(buf) + 1, len);
    return buf;
}

static void test_dump_sizes(void)
{
    size_t len = 0, need;
    char *buf;

    UNIT_ASSERT_STATUS(uccl_config_dump(0, NULL, NULL), UCCL_ERR_INVALID_PARAM);
    len = 8;
    UNIT_ASSERT_STATUS(uccl_config_dump(0, NULL, &len), UCCL_ERR_INVALID_PARAM);
    len = 0;
    UNIT_ASSERT_STATUS(uccl_config_dump(1u << 7, NULL, &len), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_config_dump(0, NULL, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    need = len;
    CU_ASSERT_FATAL(need > 1);
    buf = malloc(need);
    CU_ASSERT_FATAL(buf != NULL);
    memset(buf, 'x', need);
    len = need - 1; /* one short: nothing written, size said again */
    UNIT_ASSERT_STATUS(uccl_config_dump(0, buf, &len), UCCL_ERR_BUFFER_TOO_SMALL);
    CU_ASSERT_EQUAL(len, need);
    CU_ASSERT_EQUAL(buf[0], 'x');
    UNIT_ASSERT_STATUS(uccl_config_dump(0, buf, &len), UCCL_OK);
    CU_ASSERT_EQUAL(len, need);
    CU_ASSERT_EQUAL(strlen(buf) + 1, need);
    free(buf);
}

/* Every registered field appears once; values come from the environment,
 * malformed ones show the default, unknown ones are listed with a hint. */
static void test_dump_text(void)
{
    char name[128], *text, *lines_nl;

    setenv("UCCL_TIMEOUT_MS", "250", 1);
    setenv("UCCL_RCACHE", "bad", 1);
    setenv("UCCL_TIMEOUT_MX", "5", 1);
    text = dump(0);
    CU_ASSERT_FATAL(text != NULL);
    lines_nl = malloc(strlen(text) + 2); /* every entry then starts "\nUCCL_" */
    CU_ASSERT_FATAL(lines_nl != NULL);
    sprintf(lines_nl, "\n%s", text);
    for (const uccl_cfg_table_t *const *t = uccl_config_tables(); *t != NULL; t++) {
        for (const uccl_cfg_field_t *f = (*t)->fields; f->name != NULL; f++) {
            const char *at;
            snprintf(name, sizeof(name), "\nUCCL_%s%s=", (*t)->prefix, f->name);
            at = strstr(lines_nl, name);
            CU_ASSERT_PTR_NOT_NULL(at);
            if (at != NULL)
                CU_ASSERT_PTR_NULL(strstr(at + 1, name)); /* once */
        }
    }
    free(lines_nl);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_TIMEOUT_MS=250\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_RCACHE=1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "invalid value 'bad' ignored"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_TIMEOUT_MX=5\n    # unknown variable, ignored "
                                        "(did you mean UCCL_TIMEOUT_MS?)\n"));
#ifdef UCCL_HAVE_FAKE_GPU
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nUCCL_FAKE_GPU_FAIL_COPY=0\n"));
#endif
    free(text);

    text = dump(UCCL_CONFIG_DUMP_DEFAULTS); /* environment ignored */
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UCCL_TIMEOUT_MS=60000\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "UCCL_TIMEOUT_MX"));
    CU_ASSERT_PTR_NULL(strstr(text, "invalid value"));
    free(text);
    unsetenv("UCCL_TIMEOUT_MS");
    unsetenv("UCCL_RCACHE");
    unsetenv("UCCL_TIMEOUT_MX");
}

static void test_dump_json(void)
{
    char *text;

    setenv("UCCL_TIMEOUT_MS", "250", 1);
    setenv("UCCL_RCACHE", "bad", 1);
    setenv("UCCL_TIMEOUT_MX", "5", 1);
    setenv("UCCL_TRANSPORTS", "a\"b\\c", 1);
#ifndef UCCL_HAVE_FAKE_GPU
    setenv("UCCL_FAKE_GPU_FAIL_COPY", "1", 1);
#endif
    text = dump(UCCL_CONFIG_DUMP_JSON);
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_EQUAL(text[0], '[');
    CU_ASSERT_EQUAL(text[strlen(text) - 1], ']');
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"name\":\"UCCL_TIMEOUT_MS\",\"value\":\"250\","
                                        "\"default\":\"60000\",\"state\":\"env\","));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"name\":\"UCCL_RCACHE\",\"value\":\"1\","
                                        "\"default\":\"1\",\"state\":\"invalid\","));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, ",\"raw\":\"bad\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"name\":\"UCCL_TIMEOUT_MX\",\"value\":\"5\","
                                        "\"state\":\"unknown\","));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, ",\"hint\":\"UCCL_TIMEOUT_MS\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"value\":\"a\\\"b\\\\c\"")); /* escaped */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"name\":\"UCCL_LOG_LEVEL\",\"value\":\"warn\","
                                        "\"default\":\"warn\",\"state\":\"default\","));
#ifndef UCCL_HAVE_FAKE_GPU
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"name\":\"UCCL_FAKE_GPU_FAIL_COPY\",\"value\":\"1\","
                                        "\"state\":\"unused\","));
    unsetenv("UCCL_FAKE_GPU_FAIL_COPY");
#endif
    free(text);
    unsetenv("UCCL_TIMEOUT_MS");
    unsetenv("UCCL_RCACHE");
    unsetenv("UCCL_TIMEOUT_MX");
    unsetenv("UCCL_TRANSPORTS");
}

static CU_TestInfo env_tests[] = {
    {"unknown variable warned once per process", test_warn_once},
    {"log sink receives lines, NULL restores stderr", test_sink},
    {"classify names: known, unknown with hint, absent", test_classify},
    {"check_env warns per unknown name", test_check_env},
    {"old names: read, warned once, new wins, classified, dumped", test_alias},
    {"renamed transport knobs keep their old names", test_transport_aliases},
    {"dump: size query, exact and short buffers, bad arguments", test_dump_sizes},
    {"dump: text with environment, defaults", test_dump_text},
    {"dump: JSON states and escaping", test_dump_json},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"config_env", NULL, NULL, NULL, NULL, env_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}

/* Bad configuration fails engine creation, with a message naming the
 * setting (issue 20): transport knobs that used to make the transport
 * silently skipped, core variables, every number of every config table
 * compiled in given garbage or a leading blank, every string variable given
 * nonsense, and bad engine params. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_config.h"
#include "unit.h"

/* Create an engine with stderr captured; returns the status, fills log. */
static uccl_status_t create_logged(const uccl_engine_params_t *params, char *log, size_t len)
{
    FILE *tmp = tmpfile();
    uccl_engine_t *e = NULL;
    uccl_status_t st;
    int saved;
    size_t n = 0;

    log[0] = '\0';
    if (tmp == NULL)
        return UCCL_ERR_IO;
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    st = uccl_engine_create(params, &e);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    n = fread(log, 1, len - 1, tmp);
    log[n] = '\0';
    fclose(tmp);
    if (e != NULL)
        uccl_engine_destroy(e);
    return st;
}

/* name=value must fail engine creation with a message that names name. */
static void expect_env_refused(const char *name, const char *value)
{
    char log[8192];
    uccl_status_t st;

    setenv(name, value, 1);
    st = create_logged(NULL, log, sizeof(log));
    unsetenv(name);
    if (st != UCCL_ERR_INVALID_PARAM || strstr(log, name) == NULL)
        fprintf(stderr, "\n  %s='%s': %s, log: %s\n", name, value, uccl_status_name(st), log);
    CU_ASSERT_EQUAL(st, UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, name));
}

static void expect_params_refused(const uccl_engine_params_t *p, const char *name)
{
    char log[8192];
    uccl_status_t st = create_logged(p, log, sizeof(log));

    if (st != UCCL_ERR_INVALID_PARAM || strstr(log, name) == NULL)
        fprintf(stderr, "\n  params (%s): %s, log: %s\n", name, uccl_status_name(st), log);
    CU_ASSERT_EQUAL(st, UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, name));
}

static void test_transport_knobs(void)
{
    expect_env_refused("UCCL_SHM_RING_SIZE", "1000");
    expect_env_refused("UCCL_SHM_CMA", "maybe");
    expect_env_refused("UCCL_SHM_CHUNK", "0");
    expect_env_refused("UCCL_SHM_STAGE_DEPTH", "-3");
    expect_env_refused("UCCL_SHM_SPLIT_PCT", "101");
    expect_env_refused("UCCL_SHM_CMA_HELPER", "maybe");
    expect_env_refused("UCCL_TCP_NUM_STREAMS", "0");
    expect_env_refused("UCCL_TCP_CHUNK", "12");
}

static bool table_present(const char *prefix)
{
    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++)
        if (strcmp((*t)->prefix, prefix) == 0)
            return true;
    return false;
}

/* gpu_ipc's copy path (UCCL_GPU_IPC_COPY: auto|ce|sm, SM_BLOCKS 1..1024, SM_UNROLL 4|8),
 * where the transport is built: refused before any GPU is looked for. */
static void test_gpu_ipc_copy_knobs(void)
{
    if (!table_present("GPU_IPC_")) {
        printf(" (no gpu_ipc in this build) ");
        return;
    }
    expect_env_refused("UCCL_GPU_IPC_COPY", "SM");
    expect_env_refused("UCCL_GPU_IPC_COPY", "sm,ce");
    expect_env_refused("UCCL_GPU_IPC_COPY", "kernel");
    expect_env_refused("UCCL_GPU_IPC_SM_BLOCKS", "0");
    expect_env_refused("UCCL_GPU_IPC_SM_BLOCKS", "1025");
    expect_env_refused("UCCL_GPU_IPC_SM_MIN", "1Q");
    expect_env_refused("UCCL_GPU_IPC_SM_UNROLL", "6");
    expect_env_refused("UCCL_GPU_IPC_SM_UNROLL", "16");
    expect_env_refused("UCCL_GPU_IPC_SM_AUTO_MIN", "big");
}

static void test_core_variables(void)
{
    expect_env_refused("UCCL_OOB_IFADDR", "bogus");
    expect_env_refused("UCCL_TOPO_XML", "/nonexistent.xml");
    expect_env_refused("UCCL_NET_DEVICES", "nosuch0:9");
    expect_env_refused("UCCL_NET_DEVICES", "lo:0");
    expect_env_refused("UCCL_NET_DEVICES", "lo:1x");
    expect_env_refused("UCCL_NET_DEVICES", "lo,");
    expect_env_refused("UCCL_NET_DEVICES", "lo,,lo");
    expect_env_refused("UCCL_NET_DEVICES", "../lo");
    /* the class directories' own entries: /sys/class/net/.. exists */
    expect_env_refused("UCCL_NET_DEVICES", "..");
    expect_env_refused("UCCL_NET_DEVICES", ".");
    expect_env_refused("UCCL_NET_DEVICES", "lo,..:1");
    expect_env_refused("UCCL_TIMEOUT_MS", " 5000");
    expect_env_refused("UCCL_SETUP_TIMEOUT_MS", "0");
    expect_env_refused("UCCL_SETUP_MAX_PENDING", "0");
    expect_env_refused("UCCL_UNEXPECTED_MAX", "1K");
    expect_env_refused("UCCL_COLL_ALGO", "garbage");
    expect_env_refused("UCCL_LAZY_CONNECT", "2");
    expect_env_refused("UCCL_LAZY_CONNECT", "yes");
    expect_env_refused("UCCL_COLL_MAPPED_DEPTH", "1");
    expect_env_refused("UCCL_COLL_MAPPED_DEPTH", "17");
    expect_env_refused("UCCL_COLL_STREAM_OPS", "batched");
    expect_env_refused("UCCL_COLL_COPY_THREAD", "2");
    expect_env_refused("UCCL_COLL_COPY_THREAD", "on");
}

/* Every number, size, flag and level of every table compiled in (the
 * variables uccl_info -c lists, string ones aside): garbage, a blank, empty,
 * negative and huge values are refused, naming the variable. (A negative
 * value is refused by each variable's own range: none takes -5.) */
static void test_every_table(void)
{
    static const char *const garbage[] = {"garbage", " 1", "1 ", "", "-5", "99999999999999999999999"};
    char name[128];
    int checked = 0;

    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++) {
        for (const uccl_cfg_field_t *f = (*t)->fields; f->name != NULL; f++) {
            if (f->type == UCCL_CFG_STRING)
                continue;
            snprintf(name, sizeof(name), "UCCL_%s%s", (*t)->prefix, f->name);
            for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
                expect_env_refused(name, garbage[i]);
            checked++;
        }
    }
    printf(" [%d variables] ", checked);
    CU_ASSERT(checked >= 10);
}

/* Every string variable of every table compiled in (uccl_info -c lists
 * them: transport lists, device lists, addresses, paths, provider and
 * algorithm names, modes) given nonsense: refused, naming the variable.
 * Free strings, accepted on purpose, are listed with the reason. (Empty is
 * every string's "default" and is accepted.) */
static const struct {
    const char *name, *why;
} free_strings[] = {
    {"UCCL_HOST_ID", "any text is an identity: ranks that give different ones act as different "
                     "hosts (test use)"},
    {"UCCL_VERBS_GDR_SYSROOT", "a sysfs root; one without the peer-memory module is a setting "
                               "tests use on purpose (GPU registration is then refused there, "
                               "naming it)"},
};

static bool is_free_string(const char *name)
{
    for (size_t i = 0; i < sizeof(free_strings) / sizeof(free_strings[0]); i++)
        if (strcmp(name, free_strings[i].name) == 0)
            return true;
    return false;
}

static void test_every_string(void)
{
    static const char *const nonsense[] = {"garbage", "-5", "%$#;,", NULL /* too long */};
    char name[128], longval[400];
    int checked = 0, free_ones = 0;

    memset(longval, 'x', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    for (const uccl_cfg_table_t *const *t = uccl_cfg_tables(); *t != NULL; t++) {
        for (const uccl_cfg_field_t *f = (*t)->fields; f->name != NULL; f++) {
            if (f->type != UCCL_CFG_STRING)
                continue;
            snprintf(name, sizeof(name), "UCCL_%s%s", (*t)->prefix, f->name);
            if (is_free_string(name)) {
                free_ones++;
                continue;
            }
            for (size_t i = 0; i < sizeof(nonsense) / sizeof(nonsense[0]); i++)
                expect_env_refused(name, nonsense[i] != NULL ? nonsense[i] : longval);
            checked++;
        }
    }
    printf(" [%d string variables, %d free] ", checked, free_ones);
    CU_ASSERT(checked >= 6);
}

static void test_engine_params(void)
{
    char too_long[UCCL_CFG_STRING_MAX + 8];
    uccl_engine_params_t p;

    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = 12345};
    expect_params_refused(&p, "gpu_index");
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_PROGRESS_THREAD, .progress_thread = 7};
    expect_params_refused(&p, "progress_thread");
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_NET_DEVICES,
                               .net_devices = "nosuchdev0:1"};
    expect_params_refused(&p, "net_devices");
    /* Longer than the settings hold: refused, and said so (once silently). */
    memset(too_long, 'x', sizeof(too_long) - 1);
    too_long[sizeof(too_long) - 1] = '\0';
    p.net_devices = too_long;
    expect_params_refused(&p, "net_devices");
    p = (uccl_engine_params_t){.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = too_long};
    expect_params_refused(&p, "transports");
}

/* The checks refuse only what is wrong. */
static void test_good_values_accepted(void)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_NET_DEVICES |
                                            UCCL_ENGINE_PARAM_PROGRESS_THREAD,
                              .net_devices = "lo:1", .progress_thread = 1};
    const char *srcdir = getenv("srcdir");
    char path[512], log[8192];

    setenv("UCCL_OOB_IFADDR", "127.0.0.1", 1);
    setenv("UCCL_TIMEOUT_MS", "+5000", 1);
    setenv("UCCL_SHM_STAGE_DEPTH", "2", 1);
    setenv("UCCL_COLL_ALGO", "Ring", 1);
    setenv("UCCL_LAZY_CONNECT", "1", 1);
    setenv("UCCL_COLL_MAPPED_DEPTH", "2", 1);
    setenv("UCCL_COLL_STREAM_OPS", "single", 1);
    snprintf(path, sizeof(path), "%s/tests/data/nvidiaDGX2.xml", srcdir ? srcdir : ".");
    if (access(path, R_OK) == 0)
        setenv("UCCL_TOPO_XML", path, 1);
    UNIT_ASSERT_STATUS(create_logged(&p, log, sizeof(log)), UCCL_OK);
    unsetenv("UCCL_OOB_IFADDR");
    unsetenv("UCCL_TIMEOUT_MS");
    unsetenv("UCCL_SHM_STAGE_DEPTH");
    unsetenv("UCCL_COLL_ALGO");
    unsetenv("UCCL_LAZY_CONNECT");
    unsetenv("UCCL_COLL_MAPPED_DEPTH");
    unsetenv("UCCL_COLL_STREAM_OPS");
    unsetenv("UCCL_TOPO_XML");
}

static CU_TestInfo tests[] = {
    {"transport knobs", test_transport_knobs},
    {"gpu_ipc copy knobs", test_gpu_ipc_copy_knobs},
    {"core variables", test_core_variables},
    {"every number of every table", test_every_table},
    {"every string of every table", test_every_string},
    {"engine params", test_engine_params},
    {"good values accepted", test_good_values_accepted},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {
        {"config_errors", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };

    unsetenv("UCCL_TRANSPORTS");
    return unit_main(suites);
}

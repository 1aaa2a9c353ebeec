/* The core configuration table, the registry of every table of this build,
 * the once-per-process unknown-variable warning and uccl_config_dump. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core_config.h"
#include "core/tp_api.h"
#include "gpu/gpu.h"
#include "util/log.h"

extern char **environ;

#define CORE_FIELD(name, dflt, doc, field, type) {name, dflt, doc, offsetof(uccl_config_t, field), type}

static const uccl_cfg_field_t core_fields[] = {
    CORE_FIELD("LOG_LEVEL", "warn", "log level: error, warn, info, debug, trace", log_level,
               UCCL_CFG_LOGLEVEL),
    CORE_FIELD("TIMEOUT_MS", "60000",
               "bound on every wait that depends on a peer (connect, accept, uccl_wait); > 0",
               timeout_ms, UCCL_CFG_INT),
    CORE_FIELD("SETUP_TIMEOUT_MS", "5000",
               "an incoming connection must deliver its setup request within this time or is "
               "dropped (a real peer sends it at once); > 0", setup_timeout_ms, UCCL_CFG_INT),
    CORE_FIELD("SETUP_MAX_PENDING", "64",
               "incoming connections whose setup request is not in yet; beyond this the oldest "
               "idle one is dropped (idle sockets cannot fill the fd table; peers under way wait "
               "in the listen backlog instead); >= 1",
               setup_max_pending, UCCL_CFG_INT),
    CORE_FIELD("UNEXPECTED_MAX", "1G",
               "bytes of messages a connection keeps that no receive took yet; a peer that "
               "sends more fails the connection with UCCL_ERR_NO_MEMORY (memory stays bounded "
               "when receives are never posted); >= 64K", unexpected_max, UCCL_CFG_SIZE),
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
    CORE_FIELD("OOB_PORT", "0",
               "TCP port of the setup listener (0 = any free port; a fixed one lets a restarted "
               "process listen at the same address); 0..65535", oob_port, UCCL_CFG_INT),
    CORE_FIELD("PORT_RANGE", "",
               "TCP ports the listeners take, lo-hi, e.g. 50000-50100 (empty = any free port); "
               "each engine takes two (setup and tcp transport), first free first; for firewalls",
               port_range, UCCL_CFG_STRING),
    CORE_FIELD("OOB_BIND_ANY", "0",
               "1 = the setup and tcp listeners listen on every interface (0.0.0.0); 0 = on the "
               "advertised address only", oob_bind_any, UCCL_CFG_BOOL),
    CORE_FIELD("HOST_ID", "",
               "host identity to advertise instead of hostname + boot id (test use: ranks with "
               "different values on one machine act as different hosts and never use shm)",
               host_id, UCCL_CFG_STRING),
    CORE_FIELD("TOPO_XML", "", "hwloc XML file to load instead of the live machine", topo_xml,
               UCCL_CFG_STRING),
    {NULL, NULL, NULL, 0, 0},
};

const uccl_cfg_table_t uccl_core_config_table = {
    .prefix = "", .fields = core_fields, .struct_size = sizeof(uccl_config_t)};

/* Variables the collectives (coll/) read themselves with getenv: coll/ sees
 * only the public headers. Listed here so that the registry knows them (no
 * unknown-variable warning) and uccl_info -c documents them; this table's
 * parsed values are not used. */
typedef struct uccl_coll_env {
    char algo[UCCL_CFG_STRING_MAX];
    char lazy_connect[UCCL_CFG_STRING_MAX];
    char stream[UCCL_CFG_STRING_MAX];
    char stream_cache[UCCL_CFG_STRING_MAX];
    size_t stream_seq0;
    char stream_ops[UCCL_CFG_STRING_MAX];
    size_t mapped_depth;
    char copy_thread[UCCL_CFG_STRING_MAX];
    size_t copy_min;
    int trace;
    size_t gpu_copy_late;
} uccl_coll_env_t;

static const uccl_cfg_field_t coll_env_fields[] = {
    {"COLL_ALGO", "", "force a collective algorithm where it applies (direct, ring, pairwise, "
     "bruck, binomial, scatter_allgather, linear, hier, mapped; empty = by the selection table)",
     offsetof(uccl_coll_env_t, algo), UCCL_CFG_STRING},
    {"LAZY_CONNECT", "", "communicators connect a pair on its first use (1) or every pair in "
     "uccl_comm_init (0); empty = lazy above 32 ranks", offsetof(uccl_coll_env_t, lazy_connect),
     UCCL_CFG_STRING},
    {"COLL_STREAM", "direct", "stream-ordered collectives: direct (enqueued on the caller's stream, "
     "over peer-mapped GPU memory, where every peer is reached by gpu_ipc) or hold (the engine's "
     "progress moves the data while the stream is held)", offsetof(uccl_coll_env_t, stream),
     UCCL_CFG_STRING},
    {"COLL_STREAM_CACHE", "1", "direct stream path: 0 = the plan cache off, every call exchanges "
     "a token with every peer (for comparisons); anything else = on (a call like an earlier one "
     "reuses its plan)", offsetof(uccl_coll_env_t, stream_cache), UCCL_CFG_STRING},
    {"COLL_STREAM_SEQ0", "0", "tests only: the first sequence number of the direct stream path "
     "(every rank the same; near 4294967295 tests the wrap)", offsetof(uccl_coll_env_t, stream_seq0),
     UCCL_CFG_SIZE},
    {"COLL_STREAM_OPS", "batch", "direct stream path: how a call's stream operations reach the "
     "driver: batch (its flag writes and waits in one cuStreamBatchMemOp each run, copies one call "
     "each), all (copies batched too: cudaMemcpyBatchAsync) or single (one call per operation)",
     offsetof(uccl_coll_env_t, stream_ops), UCCL_CFG_STRING},
    {"COLL_MAPPED_DEPTH", "16", "algorithm mapped: buffers per writer (2..16; fewer where "
     "they would pass 8 MiB a rank): a root runs this many calls ahead of its readers (every "
     "rank the same, else mapped is not used)", offsetof(uccl_coll_env_t, mapped_depth),
     UCCL_CFG_SIZE},
    {"COLL_COPY_THREAD", "auto", "collectives' large local host copies (own block, in-place "
     "temporary) run on a helper thread beside the caller: auto (where the host has at least "
     "twice as many CPUs as the comm has ranks on it), 1 or 0", offsetof(uccl_coll_env_t,
     copy_thread), UCCL_CFG_STRING},
    {"COLL_COPY_MIN", "64K", "the collectives' helper thread takes local copies of at least "
     "this many bytes", offsetof(uccl_coll_env_t, copy_min), UCCL_CFG_SIZE},
    {"COLL_TRACE", "0", "print at exit the host time of the collectives' steps (each op kind's "
     "posting and completion from the call's start, per size; a profile for tuning; 0 = off)",
     offsetof(uccl_coll_env_t, trace), UCCL_CFG_BOOL},
    {"COLL_GPU_COPY_LATE", "1", "a phase's local copies in GPU memory (an allgather's or "
     "alltoall's own block) are posted this many engine progress rounds after the phase's "
     "transfers (or once those are done), so that the peers' copies are issued first "
     "(0 = with the transfers; 0..1000000)", offsetof(uccl_coll_env_t, gpu_copy_late),
     UCCL_CFG_SIZE},
    {NULL, NULL, NULL, 0, 0},
};

static const uccl_cfg_table_t uccl_coll_env_table = {
    .prefix = "", .fields = coll_env_fields, .struct_size = sizeof(uccl_coll_env_t)};

/* Variables the Python binding (python/src/tensor.c) reads itself: listed
 * so that the registry knows them; not parsed here. */
typedef struct uccl_py_env {
    char torch_fast[UCCL_CFG_STRING_MAX];
    char torch_desc[UCCL_CFG_STRING_MAX];
} uccl_py_env_t;

static const uccl_cfg_field_t py_env_fields[] = {
    {"PY_TORCH_FAST", "1", "Python binding: 0 = every torch tensor goes the general way "
     "(DLPack), not the direct read of its data pointer, device and stream; anything else = on",
     offsetof(uccl_py_env_t, torch_fast), UCCL_CFG_STRING},
    {"PY_TORCH_DESC", "1", "Python binding: 0 = the direct path reads a tensor through the "
     "generic attribute calls, not the type's descriptors (for comparison); anything else = on",
     offsetof(uccl_py_env_t, torch_desc), UCCL_CFG_STRING},
    {NULL, NULL, NULL, 0, 0},
};

static const uccl_cfg_table_t uccl_py_env_table = {
    .prefix = "", .fields = py_env_fields, .struct_size = sizeof(uccl_py_env_t)};

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

/* Each layer hands its tables over; config itself knows none of them. */
static void tables_register(void)
{
    const uccl_cfg_table_t *gpu = uccl_gpu_config_table();

    uccl_cfg_register(&uccl_core_config_table);
    uccl_cfg_register(&uccl_coll_env_table);
    uccl_cfg_register(&uccl_py_env_table);
    if (gpu != NULL)
        uccl_cfg_register(gpu);
    uccl_tp_config_register();
}

const uccl_cfg_table_t *const *uccl_config_tables(void)
{
    pthread_once(&tables_once, tables_register);
    return uccl_cfg_tables();
}

static void check_env(void)
{
    uccl_config_tables();
    uccl_cfg_check_env(environ);
}

/* A switch read as "0 = off, anything else on": 0, 1 or empty, else refused. */
static bool zero_or_one(const char *name, const char *value)
{
    if (value[0] == '\0' || strcmp(value, "0") == 0 || strcmp(value, "1") == 0)
        return true;
    uccl_error("%s=%s: expected 0, 1 or empty", name, value);
    return false;
}

/* The Python binding reads its switches itself, at its first tensor: a bad
 * one is refused here, at engine creation, as the collectives' are. */
static uccl_status_t py_env_check(void)
{
    uccl_py_env_t env;

    if (uccl_cfg_parse(&uccl_py_env_table, &env) != UCCL_OK ||
        !zero_or_one("UCCL_PY_TORCH_FAST", env.torch_fast) ||
        !zero_or_one("UCCL_PY_TORCH_DESC", env.torch_desc))
        return UCCL_ERR_INVALID_PARAM;
    return UCCL_OK;
}

/* The collectives read UCCL_COLL_ALGO, UCCL_LAZY_CONNECT,
 * UCCL_COLL_COPY_THREAD, UCCL_COLL_COPY_MIN, UCCL_COLL_MAPPED_DEPTH,
 * UCCL_COLL_TRACE, UCCL_COLL_GPU_COPY_LATE and UCCL_COLL_STREAM_CACHE
 * themselves (at their first use, where a bad value could only be warned
 * about): refuse a bad one here, at engine creation.
 * The names are coll/select.c's. */
static uccl_status_t coll_env_check(void)
{
    static const char *const algos[] = {"auto", "direct", "ring", "pairwise", "bruck", "binomial",
                                        "scatter_allgather", "linear", "hier", "mapped"};
    uccl_coll_env_t env;
    bool ok = false;

    if (uccl_cfg_parse(&uccl_coll_env_table, &env) != UCCL_OK)
        return UCCL_ERR_INVALID_PARAM;
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]) && !ok; i++)
        ok = strcasecmp(env.algo, algos[i]) == 0;
    if (env.algo[0] != '\0' && !ok) {
        uccl_error("UCCL_COLL_ALGO=%s: not an algorithm (direct, ring, pairwise, bruck, binomial, "
                   "scatter_allgather, linear, hier, mapped, auto)", env.algo);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (env.gpu_copy_late > 1000000) {
        uccl_error("UCCL_COLL_GPU_COPY_LATE=%zu: expected 0..1000000", env.gpu_copy_late);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (env.mapped_depth < 2 || env.mapped_depth > 16) {
        uccl_error("UCCL_COLL_MAPPED_DEPTH=%zu: expected 2..16", env.mapped_depth);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (!zero_or_one("UCCL_LAZY_CONNECT", env.lazy_connect))
        return UCCL_ERR_INVALID_PARAM;
    if (strcmp(env.copy_thread, "auto") != 0 && strcmp(env.copy_thread, "0") != 0 &&
        strcmp(env.copy_thread, "1") != 0) {
        uccl_error("UCCL_COLL_COPY_THREAD=%s: expected auto, 0 or 1", env.copy_thread);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (strcmp(env.stream, "direct") != 0 && strcmp(env.stream, "hold") != 0) {
        uccl_error("UCCL_COLL_STREAM=%s: expected direct or hold", env.stream);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (strcmp(env.stream_ops, "batch") != 0 && strcmp(env.stream_ops, "all") != 0 &&
        strcmp(env.stream_ops, "single") != 0) {
        uccl_error("UCCL_COLL_STREAM_OPS=%s: expected batch, all or single", env.stream_ops);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (!zero_or_one("UCCL_COLL_STREAM_CACHE", env.stream_cache))
        return UCCL_ERR_INVALID_PARAM;
    return py_env_check();
}

/* UCCL_PORT_RANGE: "lo-hi" with 1 <= lo <= hi <= 65535, or empty. */
static uccl_status_t parse_port_range(uccl_config_t *cfg)
{
    const char *text = cfg->port_range;
    size_t digits_lo = strspn(text, "0123456789");
    unsigned lo, hi;
    int end = -1;

    cfg->port_lo = cfg->port_hi = 0;
    if (text[0] == '\0')
        return UCCL_OK;
    /* digits, '-', digits: sscanf's %u alone would skip blanks and take a sign */
    if (digits_lo == 0 || text[digits_lo] != '-' || !isdigit((unsigned char)text[digits_lo + 1]) ||
        sscanf(text, "%5u-%5u%n", &lo, &hi, &end) != 2 || text[end] != '\0' || lo < 1 ||
        lo > hi || hi > 65535) {
        uccl_error("UCCL_PORT_RANGE=%s: expected lo-hi with 1 <= lo <= hi <= 65535, e.g. "
                   "50000-50100", cfg->port_range);
        return UCCL_ERR_INVALID_PARAM;
    }
    cfg->port_lo = (int)lo;
    cfg->port_hi = (int)hi;
    return UCCL_OK;
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
    if (cfg->setup_timeout_ms <= 0 || cfg->setup_max_pending < 1) {
        uccl_error("UCCL_SETUP_TIMEOUT_MS must be > 0 (got %d) and UCCL_SETUP_MAX_PENDING >= 1 "
                   "(got %d)", cfg->setup_timeout_ms, cfg->setup_max_pending);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (cfg->unexpected_max < (64u << 10)) {
        uccl_error("UCCL_UNEXPECTED_MAX=%zu: must be at least 64K", cfg->unexpected_max);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (cfg->oob_port < 0 || cfg->oob_port > 65535) {
        uccl_error("UCCL_OOB_PORT must be in 0..65535 (got %d)", cfg->oob_port);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (parse_port_range(cfg) != UCCL_OK)
        return UCCL_ERR_INVALID_PARAM;
    uccl_log_level_current = (uccl_log_level_t)cfg->log_level;
    /* after the level is set, so that UCCL_LOG_LEVEL=error silences it */
    pthread_once(&check_once, check_env);
    return coll_env_check();
}

uccl_status_t uccl_config_dump(unsigned flags, char *buf, size_t *len)
{
    const unsigned known = UCCL_CONFIG_DUMP_JSON | UCCL_CONFIG_DUMP_DEFAULTS;
    char *text = NULL;
    size_t size = 0;
    FILE *out;

    if (len == NULL || (buf == NULL && *len != 0) || (flags & ~known) != 0)
        return UCCL_ERR_INVALID_PARAM;
    uccl_config_tables();
    out = open_memstream(&text, &size);
    if (out == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_cfg_dump(out, (flags & UCCL_CONFIG_DUMP_JSON ? UCCL_CFG_DUMP_JSON : 0) |
                           (flags & UCCL_CONFIG_DUMP_DEFAULTS ? UCCL_CFG_DUMP_DEFAULTS : 0),
                  environ);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        return UCCL_ERR_NO_MEMORY;
    }
    if (*len < size + 1) {
        *len = size + 1;
        free(text);
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    memcpy(buf, text, size + 1);
    *len = size + 1;
    free(text);
    return UCCL_OK;
}

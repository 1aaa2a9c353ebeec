/* The one algorithm table: which algorithm implements which collective,
 * and what AUTO picks by size, rank count and host layout. Also the few
 * environment settings coll/ reads itself (it cannot see the config
 * table): UCCL_COLL_ALGO, UCCL_TIMEOUT_MS, UCCL_LOG_LEVEL, UCCL_COLL_TRACE,
 * UCCL_COLL_GPU_COPY_LATE. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "coll.h"

static const char *const algo_names[UCCL_COLL_ALGO_COUNT] = {
    [UCCL_COLL_ALGO_AUTO] = "auto",
    [UCCL_COLL_ALGO_DIRECT] = "direct",
    [UCCL_COLL_ALGO_RING] = "ring",
    [UCCL_COLL_ALGO_PAIRWISE] = "pairwise",
    [UCCL_COLL_ALGO_BRUCK] = "bruck",
    [UCCL_COLL_ALGO_BINOMIAL] = "binomial",
    [UCCL_COLL_ALGO_SCATTER_ALLGATHER] = "scatter_allgather",
    [UCCL_COLL_ALGO_LINEAR] = "linear",
    [UCCL_COLL_ALGO_HIER] = "hier",
    [UCCL_COLL_ALGO_MAPPED] = "mapped",
};

static const char *const op_names[UCCL_COLL_OP_COUNT] = {
    "allgather", "allgatherv", "alltoall", "alltoallv", "bcast", "gather", "scatter",
};

#define A(x) (1u << UCCL_COLL_ALGO_##x)
/* Algorithms implementing each op (AUTO always). */
static const unsigned algo_table[UCCL_COLL_OP_COUNT] = {
    [UCCL_COLL_ALLGATHER] = A(DIRECT) | A(RING) | A(LINEAR) | A(HIER) | A(MAPPED),
    [UCCL_COLL_ALLGATHERV] = A(DIRECT) | A(RING) | A(LINEAR) | A(HIER) | A(MAPPED),
    [UCCL_COLL_ALLTOALL] = A(DIRECT) | A(PAIRWISE) | A(BRUCK) | A(LINEAR) | A(MAPPED),
    [UCCL_COLL_ALLTOALLV] = A(DIRECT) | A(PAIRWISE) | A(LINEAR) | A(MAPPED),
    [UCCL_COLL_BCAST] = A(DIRECT) | A(BINOMIAL) | A(SCATTER_ALLGATHER) | A(LINEAR) | A(HIER) |
                        A(MAPPED),
    [UCCL_COLL_GATHER] = A(DIRECT) | A(BINOMIAL) | A(LINEAR) | A(MAPPED),
    [UCCL_COLL_SCATTER] = A(DIRECT) | A(BINOMIAL) | A(LINEAR) | A(MAPPED),
};
#undef A

const char *uccl_coll_algo_name(uccl_coll_algo_t algo)
{
    return (unsigned)algo < UCCL_COLL_ALGO_COUNT ? algo_names[algo] : "?";
}

const char *uccl_coll_op_name(uccl_coll_op_t op)
{
    return (unsigned)op < UCCL_COLL_OP_COUNT ? op_names[op] : "?";
}

uccl_status_t uccl_coll_algo_parse(const char *name, uccl_coll_algo_t *algo)
{
    if (name == NULL || algo == NULL)
        return UCCL_ERR_INVALID_PARAM;
    for (int i = 0; i < UCCL_COLL_ALGO_COUNT; i++) {
        if (strcasecmp(name, algo_names[i]) == 0) {
            *algo = (uccl_coll_algo_t)i;
            return UCCL_OK;
        }
    }
    return UCCL_ERR_NOT_FOUND;
}

bool uccl_coll_algo_supports(uccl_coll_op_t op, uccl_coll_algo_t algo)
{
    return (unsigned)op < UCCL_COLL_OP_COUNT && (unsigned)algo < UCCL_COLL_ALGO_COUNT &&
           algo != UCCL_COLL_ALGO_AUTO && (algo_table[op] & (1u << algo));
}

/* Where the comm's ranks are, as the table distinguishes it. */
typedef enum {
    LAYOUT_ANY = 0,
    LAYOUT_SINGLE,      /* one rank */
    LAYOUT_SHM,         /* one host, every peer over shm */
    LAYOUT_ONE_HOST,    /* one host, some peer over a network transport */
    LAYOUT_SHARED,      /* several hosts, some running several ranks */
    LAYOUT_SPREAD,      /* several hosts, one rank each */
    LAYOUT_COUNT,
} coll_layout_t;

static const char *const layout_names[LAYOUT_COUNT] = {
    "any", "1 rank", "1 host, shm", "1 host, network", "hosts of several ranks",
    "1 rank per host",
};

#define OPS(x) (1u << UCCL_COLL_##x)
#define ALL_OPS ((1u << UCCL_COLL_OP_COUNT) - 1)
#define SIZE_ANY ((size_t)-1)

/* Largest block AUTO sends through MAPPED's shared segments on one host
 * (alltoallv: every call, pair by pair): forced mapped vs forced linear on
 * a quiet 16-core host (tests/perf/results/coll/mapped-H200host): on 2
 * ranks linear's single CMA copy wins from 8 KiB for allgather and
 * alltoall, on 4 mapped still wins at 16 KiB and linear at 32 KiB. Rooted
 * collectives on 2 ranks: linear took 4-8 us at 8-16 KiB where mapped
 * bcast took 1.2-2.0 us, so they go mapped up to 16 KiB on any rank count. */
#define COLL_MAPPED_AUTO_MAX_2 4096
#define COLL_MAPPED_AUTO_MAX 16384

/* THE table AUTO walks: the first rule matching op, layout, rank count and
 * bytes per rank block wins. One host over shm, small blocks: mapped (the
 * ranks copy through each other's mapped segments: no request, matching or
 * engine lock per block; skipped where some rank cannot map some peer).
 * Larger: linear, every peer's block
 * in flight at once as one message (eager through the ring when small,
 * else pulled by the receiver with one CMA copy, large ones copied by both
 * sides at once): on a 16-core host it beat direct (the same single copy
 * plus a ready token) at every size, np 2 and 4 (tests/perf/results).
 * One host over tcp: linear too (1.1-2x direct at 16-512 KiB, even above).
 * Across hosts: hierarchical allgather and bcast when hosts hold several
 * ranks (each byte crosses between hosts once per host), Bruck for small
 * alltoall on many ranks, ring/pairwise for the rest, binomial trees for
 * small rooted ops, scatter+allgather for large broadcasts, linear
 * gather/scatter when blocks are large. */
static const struct coll_rule {
    unsigned ops;
    coll_layout_t layout;
    int min_ranks;
    size_t max_bytes; /* rule applies up to this many bytes per block */
    uccl_coll_algo_t algo;
} rules[] = {
    {ALL_OPS, LAYOUT_SINGLE, 1, SIZE_ANY, UCCL_COLL_ALGO_LINEAR},
    {OPS(BCAST) | OPS(GATHER) | OPS(SCATTER), LAYOUT_SHM, 2, COLL_MAPPED_AUTO_MAX,
     UCCL_COLL_ALGO_MAPPED},
    {ALL_OPS, LAYOUT_SHM, 3, COLL_MAPPED_AUTO_MAX, UCCL_COLL_ALGO_MAPPED},
    {ALL_OPS, LAYOUT_SHM, 2, COLL_MAPPED_AUTO_MAX_2, UCCL_COLL_ALGO_MAPPED},
    {ALL_OPS, LAYOUT_SHM, 2, SIZE_ANY, UCCL_COLL_ALGO_LINEAR},
    {ALL_OPS, LAYOUT_ONE_HOST, 2, SIZE_ANY, UCCL_COLL_ALGO_LINEAR},
    {OPS(ALLGATHER) | OPS(ALLGATHERV) | OPS(BCAST), LAYOUT_SHARED, 2, SIZE_ANY,
     UCCL_COLL_ALGO_HIER},
    {OPS(ALLGATHER) | OPS(ALLGATHERV), LAYOUT_ANY, 2, SIZE_ANY, UCCL_COLL_ALGO_RING},
    {OPS(ALLTOALL), LAYOUT_ANY, 8, 256, UCCL_COLL_ALGO_BRUCK},
    {OPS(ALLTOALL) | OPS(ALLTOALLV), LAYOUT_ANY, 2, SIZE_ANY, UCCL_COLL_ALGO_PAIRWISE},
    {OPS(BCAST), LAYOUT_ANY, 2, SIZE_ANY / 2, UCCL_COLL_ALGO_BINOMIAL}, /* see rule_algo */
    {OPS(GATHER) | OPS(SCATTER), LAYOUT_ANY, 2, SIZE_ANY / 2, UCCL_COLL_ALGO_BINOMIAL},
    {ALL_OPS, LAYOUT_ANY, 1, SIZE_ANY, UCCL_COLL_ALGO_LINEAR},
};
#undef OPS

/* bcast: binomial below 64 KiB or on fewer than 4 ranks, scatter+allgather
 * above; gather/scatter: binomial while the whole buffer (bytes * n) is at
 * most 64 KiB. These two depend on more than one column: special rows. */
static uccl_coll_algo_t rule_algo(const struct coll_rule *r, uccl_coll_op_t op, int n,
                                  size_t bytes)
{
    if (r->max_bytes != SIZE_ANY / 2)
        return r->algo;
    if (op == UCCL_COLL_BCAST)
        return bytes >= 65536 && n >= 4 ? UCCL_COLL_ALGO_SCATTER_ALLGATHER
                                        : UCCL_COLL_ALGO_BINOMIAL;
    return bytes * (size_t)n <= 65536 ? UCCL_COLL_ALGO_BINOMIAL : UCCL_COLL_ALGO_LINEAR;
}

static coll_layout_t layout(const coll_state_t *cs)
{
    bool one_host = true, shared = false;

    if (cs->size == 1)
        return LAYOUT_SINGLE;
    for (int r = 0; r < cs->size; r++) {
        one_host = one_host && cs->host_id[r] == cs->host_id[cs->rank];
        shared = shared || uccl_coll_host_leader(cs, r, -1) != r;
    }
    if (one_host)
        return cs->net ? LAYOUT_ONE_HOST : LAYOUT_SHM;
    return shared ? LAYOUT_SHARED : LAYOUT_SPREAD;
}

/* The ranks of one host tell each other whether their engines have shm:
 * each knows only its own (UCCL_TRANSPORTS is a rank's setting), and the
 * table picks MAPPED or LINEAR by it. Ranks that differed decided apart:
 * MAPPED's setup allgather on the ranks with shm met the first LINEAR call
 * of those without (same sequence number), which completed UCCL_OK with
 * the setup's bytes in the receive buffer while the others timed out.
 * Once per comm, at the first call the table decides (every rank gets
 * there at the same call), by a LINEAR allgather of one byte. */
uccl_status_t uccl_coll_net_agree(coll_state_t *cs)
{
    uint8_t mine = cs->net, *all;
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                          .algo = UCCL_COLL_ALGO_LINEAR, .sendbuf = &mine, .count = 1};
    coll_layout_t lay = layout(cs);
    uccl_status_t st;

    if (cs->net_agreed || (lay != LAYOUT_SHM && lay != LAYOUT_ONE_HOST))
        return UCCL_OK; /* agreed, or one rank, or several hosts: shm plays no part */
    if ((all = calloc((size_t)cs->size, 1)) == NULL)
        return UCCL_ERR_NO_MEMORY;
    a.recvbuf = all;
    if ((st = uccl_coll_internal(cs->comm, &a)) == UCCL_OK) {
        for (int r = 0; r < cs->size; r++)
            cs->net = cs->net || all[r] != 0;
        if (cs->net && !mine)
            coll_debug("rank %d: some rank of this host has no shm; the comm's peers talk "
                       "over the network", cs->rank);
        cs->net_agreed = true;
    }
    free(all);
    return st;
}

uccl_coll_algo_t uccl_coll_select(const coll_state_t *cs, uccl_coll_op_t op, size_t bytes)
{
    coll_layout_t lay = layout(cs);

    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        const struct coll_rule *r = &rules[i];
        if (r->algo == UCCL_COLL_ALGO_MAPPED && (cs->mapped_ok < 0 || cs->mapped_gpu))
            continue; /* some rank cannot map some peer; or GPU engines all (mapped.c) */
        if ((r->ops & (1u << op)) && (r->layout == LAYOUT_ANY || r->layout == lay) &&
            cs->size >= r->min_ranks &&
            (r->max_bytes == SIZE_ANY || r->max_bytes == SIZE_ANY / 2 || bytes <= r->max_bytes))
            return rule_algo(r, op, cs->size, bytes);
    }
    return UCCL_COLL_ALGO_LINEAR;
}

static void ops_text(unsigned ops, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    if (ops == ALL_OPS) {
        snprintf(buf, len, "all");
        return;
    }
    for (int op = 0; op < UCCL_COLL_OP_COUNT && used < len; op++)
        if (ops & (1u << op))
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                                     op_names[op]);
}

/* The table as text (JSON with UCCL_COLL_TABLE_JSON), snprintf style. */
int uccl_coll_table_print(char *buf, size_t len, unsigned flags)
{
    bool json = flags & UCCL_COLL_TABLE_JSON;
    size_t used = 0;
    char ops[128], bytes[64], jbytes[32], ranks[16];
    int w;

#define OUT(...)                                                                          \
    do {                                                                                  \
        w = snprintf(buf != NULL && used < len ? buf + used : NULL,                       \
                     buf != NULL && used < len ? len - used : 0, __VA_ARGS__);            \
        if (w < 0)                                                                        \
            return -1;                                                                    \
        used += (size_t)w;                                                                \
    } while (0)
    if (json)
        OUT("{\"rules\":[");
    else
        OUT("%-4s %-40s %-24s %6s %-22s %s\n", "rule", "collectives", "layout", "ranks",
            "bytes per block", "algorithm");
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        const struct coll_rule *r = &rules[i];
        const char *algo = uccl_coll_algo_name(r->algo);
        ops_text(r->ops, ops, sizeof(ops));
        if (r->max_bytes == SIZE_ANY / 2) {
            snprintf(bytes, sizeof(bytes), "any");
            algo = r->ops & (1u << UCCL_COLL_BCAST)
                       ? "binomial < 64K <= scatter_allgather"
                       : "binomial if bytes*ranks <= 64K, else linear";
        } else if (r->max_bytes == SIZE_ANY) {
            snprintf(bytes, sizeof(bytes), "any");
        } else {
            snprintf(bytes, sizeof(bytes), "<= %zu", r->max_bytes);
        }
        if (r->max_bytes >= SIZE_ANY / 2)
            snprintf(jbytes, sizeof(jbytes), "null");
        else
            snprintf(jbytes, sizeof(jbytes), "%zu", r->max_bytes);
        snprintf(ranks, sizeof(ranks), ">= %d", r->min_ranks);
        if (json)
            OUT("%s{\"collectives\":\"%s\",\"layout\":\"%s\",\"min_ranks\":%d,"
                "\"max_bytes\":%s,\"algorithm\":\"%s\"}",
                i ? "," : "", ops, layout_names[r->layout], r->min_ranks, jbytes, algo);
        else
            OUT("%-4zu %-40s %-24s %6s %-22s %s\n", i + 1, ops, layout_names[r->layout], ranks,
                bytes, algo);
    }
    if (json)
        OUT("]}");
    else
        OUT("First matching rule wins; UCCL_COLL_ALGO=NAME forces one algorithm wherever it "
            "implements the collective.\n");
#undef OUT
    return (int)used;
}

int uccl_coll_host_leader(const coll_state_t *cs, int r, int root)
{
    if (root >= 0 && cs->host_id[root] == cs->host_id[r])
        return root;
    for (int q = 0; q < r; q++)
        if (cs->host_id[q] == cs->host_id[r])
            return q;
    return r;
}

uccl_coll_algo_t uccl_coll_algo_select(const uccl_comm_t *comm, uccl_coll_op_t op, size_t bytes)
{
    coll_state_t *cs;

    if ((unsigned)op >= UCCL_COLL_OP_COUNT || uccl_coll_state_get((uccl_comm_t *)comm, &cs) != UCCL_OK)
        return UCCL_COLL_ALGO_AUTO;
    if (uccl_coll_algo_supports(op, uccl_coll_algo_forced()))
        return uccl_coll_algo_forced();
    return uccl_coll_select(cs, op, bytes);
}

/* ------------------------------------------------------------------ environment */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static uccl_coll_algo_t env_algo = UCCL_COLL_ALGO_AUTO;
static int env_timeout_ms = 60000;
static int env_log_level = 1;
static int env_lazy = -1; /* -1: by size */
static bool env_trace;
static unsigned env_copy_late = 1;

static void env_read(void)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
    const char *v = getenv("UCCL_COLL_ALGO");

    if (v != NULL && *v != '\0' && uccl_coll_algo_parse(v, &env_algo) != UCCL_OK)
        fprintf(stderr, "[uccl coll] warn UCCL_COLL_ALGO=%s is not an algorithm; using auto\n", v);
    v = getenv("UCCL_LAZY_CONNECT");
    if (v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
        env_lazy = v[0] - '0';
    else if (v != NULL && *v != '\0')
        fprintf(stderr, "[uccl coll] warn UCCL_LAZY_CONNECT=%s is not 0 or 1; by rank count\n",
                v);
    v = getenv("UCCL_COLL_TRACE");
    for (int i = 0; v != NULL && i < 5 && !env_trace; i++) /* the registry's true words */
        env_trace = strcasecmp(v, (const char *const[]){"1", "y", "yes", "on", "true"}[i]) == 0;
    v = getenv("UCCL_COLL_GPU_COPY_LATE");
    if (v != NULL && *v != '\0')
        env_copy_late = (unsigned)strtoul(v, NULL, 10); /* checked at engine creation */
    v = getenv("UCCL_TIMEOUT_MS");
    if (v != NULL && atoi(v) > 0)
        env_timeout_ms = atoi(v);
    v = getenv("UCCL_LOG_LEVEL");
    for (int i = 0; v != NULL && i < 5; i++)
        if (strcasecmp(v, levels[i]) == 0 || (v[0] == '0' + i && v[1] == '\0'))
            env_log_level = i;
}

uccl_coll_algo_t uccl_coll_algo_forced(void)
{
    pthread_once(&env_once, env_read);
    return env_algo;
}

bool uccl_coll_lazy_connect(int size)
{
    pthread_once(&env_once, env_read);
    return env_lazy >= 0 ? env_lazy == 1 : size > COLL_LAZY_AUTO_RANKS;
}

bool uccl_coll_trace_on(void)
{
    pthread_once(&env_once, env_read);
    return env_trace;
}

unsigned uccl_coll_gpu_copy_late(void)
{
    pthread_once(&env_once, env_read);
    return env_copy_late;
}

int uccl_coll_timeout_ms(void)
{
    pthread_once(&env_once, env_read);
    return env_timeout_ms;
}

int uccl_coll_log_enabled(int level)
{
    pthread_once(&env_once, env_read);
    return level <= env_log_level;
}

/* As the library's own lines: to the sink a caller set (uccl_log_set_sink),
 * else to stderr. */
void uccl_coll_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uccl_log_write((uccl_log_level_t)(level & 3), file, line, msg);
}

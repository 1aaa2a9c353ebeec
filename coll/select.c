/* The one algorithm table: which algorithm implements which collective,
 * and what AUTO picks by size, rank count and host layout. Also the few
 * environment settings coll/ reads itself (it cannot see the config
 * table): UCCL_COLL_ALGO, UCCL_TIMEOUT_MS, UCCL_LOG_LEVEL. */
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
};

static const char *const op_names[UCCL_COLL_OP_COUNT] = {
    "allgather", "allgatherv", "alltoall", "alltoallv", "bcast", "gather", "scatter",
};

#define A(x) (1u << UCCL_COLL_ALGO_##x)
/* Algorithms implementing each op (AUTO always). */
static const unsigned algo_table[UCCL_COLL_OP_COUNT] = {
    [UCCL_COLL_ALLGATHER] = A(DIRECT) | A(RING) | A(LINEAR) | A(HIER),
    [UCCL_COLL_ALLGATHERV] = A(DIRECT) | A(RING) | A(LINEAR) | A(HIER),
    [UCCL_COLL_ALLTOALL] = A(DIRECT) | A(PAIRWISE) | A(BRUCK) | A(LINEAR),
    [UCCL_COLL_ALLTOALLV] = A(DIRECT) | A(PAIRWISE) | A(LINEAR),
    [UCCL_COLL_BCAST] = A(DIRECT) | A(BINOMIAL) | A(SCATTER_ALLGATHER) | A(LINEAR) | A(HIER),
    [UCCL_COLL_GATHER] = A(DIRECT) | A(BINOMIAL) | A(LINEAR),
    [UCCL_COLL_SCATTER] = A(DIRECT) | A(BINOMIAL) | A(LINEAR),
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

static bool one_host(const coll_state_t *cs)
{
    for (int r = 0; r < cs->size; r++)
        if (cs->host_id[r] != cs->host_id[cs->rank])
            return false;
    return true;
}

/* Some host runs more than one rank of the comm. */
static bool shared_hosts(const coll_state_t *cs)
{
    for (int r = 0; r < cs->size; r++)
        if (uccl_coll_host_leader(cs, r, -1) != r)
            return true;
    return false;
}

/* One host: DIRECT everywhere (single-copy writes, all peers at once).
 * Across hosts: hierarchical allgather and bcast when hosts hold several
 * ranks (each byte crosses between hosts once per host), Bruck for small
 * alltoall on many ranks, ring/pairwise for the rest, binomial trees for
 * small rooted ops, scatter+allgather for large broadcasts, linear
 * gather/scatter when blocks are large. */
uccl_coll_algo_t uccl_coll_select(const coll_state_t *cs, uccl_coll_op_t op, size_t bytes)
{
    int n = cs->size;

    if (n == 1)
        return UCCL_COLL_ALGO_LINEAR;
    if (one_host(cs))
        return UCCL_COLL_ALGO_DIRECT;
    if ((op == UCCL_COLL_ALLGATHER || op == UCCL_COLL_ALLGATHERV || op == UCCL_COLL_BCAST) &&
        shared_hosts(cs))
        return UCCL_COLL_ALGO_HIER;
    switch (op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLGATHERV: return UCCL_COLL_ALGO_RING;
    case UCCL_COLL_ALLTOALL:
        return bytes <= 256 && n >= 8 ? UCCL_COLL_ALGO_BRUCK : UCCL_COLL_ALGO_PAIRWISE;
    case UCCL_COLL_ALLTOALLV: return UCCL_COLL_ALGO_PAIRWISE;
    case UCCL_COLL_BCAST:
        return bytes >= 65536 && n >= 4 ? UCCL_COLL_ALGO_SCATTER_ALLGATHER
                                        : UCCL_COLL_ALGO_BINOMIAL;
    default: return bytes * (size_t)n <= 65536 ? UCCL_COLL_ALGO_BINOMIAL : UCCL_COLL_ALGO_LINEAR;
    }
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

void uccl_coll_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char host[64] = "?", msg[1024];
    const char *base = strrchr(file, '/');
    va_list ap;

    gethostname(host, sizeof(host) - 1);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[uccl %s:%d %s:%d] %s %s\n", host, (int)getpid(), base ? base + 1 : file,
            line, names[level & 3], msg);
}

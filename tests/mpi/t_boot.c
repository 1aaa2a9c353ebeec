/* MPI-launched test of the generic bootstrap, uccl_comm_init, without the
 * MPI adapter: the callback is written here (MPI_Allgather plus faults it
 * can inject), so the test sees every call. Cases: a working bootstrap, a
 * callback failing on one rank in each round, blocks out of rank order, bad
 * params. With --hosts-by-parity (run under host-by-parity.sh, which sets
 * UCCL_HOST_ID by rank parity): the host map against the conns. With
 * --lazy-mix (np >= 2): rank 1 alone sets UCCL_LAZY_CONNECT=1. Any -np. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

/* Well below run-mpi.sh's UCCL_TIMEOUT_MS (30 s): a failure must be known
 * from the votes, not from a connect or accept running out of time. */
#define FAST_FAIL_S 10.0

typedef struct cb_ctx {
    int rank, size;
    int calls;     /* callback calls on this rank */
    int fail_rank; /* this rank's callback fails... */
    int fail_call; /* ...on this call (1-based); 0 = never */
    int reverse;   /* deliver the blocks in reverse rank order */
    int garble;    /* rank 0's first call: rank size-1's block garbled past its header */
    size_t keep;   /* first call on every rank: only the first keep bytes of each block */
} cb_ctx_t;

/* The bootstrap's block starts with four 32-bit fields (status, rank, size,
 * address length); what follows is the engine's identity and address. */
#define BLOCK_HEAD 16

/* A store-like failure: this rank took its part, but what it received is
 * unusable (overwritten here, so that nothing can rely on it). */
static uccl_status_t test_allgather(const void *send, void *recv, size_t bytes, void *ctx)
{
    cb_ctx_t *x = ctx;
    uint8_t *out = recv, *tmp;

    x->calls++;
    if (MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return UCCL_ERR_IO;
    if (x->reverse && (tmp = malloc(bytes)) != NULL) {
        for (int i = 0, j = x->size - 1; i < j; i++, j--) {
            memcpy(tmp, out + (size_t)i * bytes, bytes);
            memcpy(out + (size_t)i * bytes, out + (size_t)j * bytes, bytes);
            memcpy(out + (size_t)j * bytes, tmp, bytes);
        }
        free(tmp);
    }
    for (int r = 0; x->keep != 0 && x->calls == 1 && r < x->size && x->keep < bytes; r++)
        memset(out + (size_t)r * bytes + x->keep, 0, bytes - x->keep);
    if (x->garble && x->rank == 0 && x->calls == 1 && bytes > BLOCK_HEAD)
        memset(out + (size_t)(x->size - 1) * bytes + BLOCK_HEAD, 0xa5, bytes - BLOCK_HEAD);
    if (x->rank == x->fail_rank && x->calls == x->fail_call) {
        memset(recv, 0xa5, bytes * (size_t)x->size);
        return UCCL_ERR_TIMEOUT;
    }
    return UCCL_OK;
}

static uccl_comm_params_t boot_params(cb_ctx_t *x, const mt_ctx_t *c)
{
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |
                                          UCCL_COMM_PARAM_ALLGATHER,
                            .rank = c->rank, .size = c->size,
                            .allgather = test_allgather, .allgather_ctx = x};

    memset(x, 0, sizeof(*x));
    x->rank = c->rank;
    x->size = c->size;
    x->fail_rank = -1;
    return p;
}

static void check_works(mt_ctx_t *c)
{
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;

    mt_expect(c, uccl_comm_init(&p, &comm), UCCL_OK, "uccl_comm_init");
    if (x.calls != 3)
        mt_fail(c, "the callback was called %d times, the contract says 3", x.calls);
    if (comm == NULL)
        return;
    mt_check_comm(c, comm);
    MPI_Barrier(MPI_COMM_WORLD); /* nobody closes a conn a peer still uses */
    mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "uccl_comm_destroy");
}

/* After an init that had to settle before anyone connected: the callback
 * ran its 3 rounds, it took less than FAST_FAIL_S, a comm came back only
 * where one was wanted. */
static void settled_fast(mt_ctx_t *c, const cb_ctx_t *x, double t0, uccl_comm_t *comm,
                         bool comm_wanted)
{
    double took = MPI_Wtime() - t0;

    if (x->calls != 3)
        mt_fail(c, "the callback was called %d times, the contract says 3", x->calls);
    if (took > FAST_FAIL_S)
        mt_fail(c, "init took %.1f s: someone waited for a connection", took);
    if (comm_wanted != (comm != NULL))
        mt_fail(c, "init returned %s comm", comm != NULL ? "a" : "no");
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm != NULL)
        uccl_comm_destroy(comm);
}

/* The callback fails on rank fail_rank in round `call`. Rounds 1 and 2:
 * every rank fails, the failing one with the callback's error, soon. Round
 * 3 (the final vote) is the documented exception: only that rank knows. */
static void check_callback_fails(mt_ctx_t *c, int fail_rank, int call)
{
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;
    int here = c->rank == fail_rank;
    uccl_status_t want = here ? UCCL_ERR_TIMEOUT : call < 3 ? UCCL_ERR_PEER_FAILED : UCCL_OK;
    double t0 = MPI_Wtime();

    x.fail_rank = fail_rank;
    x.fail_call = call;
    mt_expect(c, uccl_comm_init(&p, &comm), want, "init with a failing callback");
    settled_fast(c, &x, t0, comm, want == UCCL_OK);
}

static void check_misordered(mt_ctx_t *c)
{
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;

    x.reverse = 1;
    mt_expect(c, uccl_comm_init(&p, &comm), UCCL_ERR_INVALID_PARAM,
              "init with blocks in reverse rank order");
    if (x.calls != 3)
        mt_fail(c, "the callback was called %d times, the contract says 3", x.calls);
}


/* The callback reports success but rank 0 got rank size-1's block garbled
 * (a store that mixed up its keys): the ranks saw different tables. Or
 * (keep > 0) every rank got every block cut after keep bytes (a store with
 * a value size limit), zeros after. Every rank must refuse, soon, with one
 * error: no rank may connect to garbage (nor make a lazy comm that fails at
 * first use) while its peer waits UCCL_TIMEOUT_MS in its accept. */
static void check_garbled(mt_ctx_t *c, size_t keep)
{
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;
    double t0 = MPI_Wtime();

    x.garble = keep == 0;
    x.keep = keep;
    mt_expect(c, uccl_comm_init(&p, &comm), UCCL_ERR_INVALID_PARAM,
              keep != 0 ? "init where every block arrived truncated"
                        : "init where one rank received a garbled block");
    settled_fast(c, &x, t0, comm, false);
}

/* The last rank's engine opens only tcp, the others' only shm: no pair
 * with the last rank has a transport in common. Every rank must learn it
 * from the exchange (UCCL_ERR_NO_TRANSPORT on the ranks of such a pair),
 * soon, not from an accept waiting UCCL_TIMEOUT_MS for a connect that
 * failed on the other side. Both settings of UCCL_LAZY_CONNECT. */
static void check_disjoint_transports(mt_ctx_t *c)
{
    uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS};
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;
    double t0 = MPI_Wtime();

    ep.transports = c->rank == c->size - 1 ? "tcp" : "shm";
    p.field_mask |= UCCL_COMM_PARAM_ENGINE_PARAMS;
    p.engine_params = &ep;
    mt_expect(c, uccl_comm_init(&p, &comm), UCCL_ERR_NO_TRANSPORT,
              "init where the last rank shares no transport with the others");
    settled_fast(c, &x, t0, comm, false);
}

/* Each refused at once: the callback is never called. */
static void expect_refused(mt_ctx_t *c, const uccl_comm_params_t *p, const cb_ctx_t *x,
                           const char *what)
{
    uccl_comm_t *comm = NULL;

    mt_expect(c, uccl_comm_init(p, &comm), UCCL_ERR_INVALID_PARAM, what);
    if (x->calls != 0)
        mt_fail(c, "%s: the callback was called (%d times)", what, x->calls);
    if (comm != NULL)
        mt_fail(c, "%s: a comm came back", what);
}

static void check_bad_params(mt_ctx_t *c)
{
    uccl_engine_params_t ep = {0};
    cb_ctx_t x;
    const uccl_comm_params_t good = boot_params(&x, c);
    uccl_comm_params_t p;

    p = good, p.field_mask |= 1ull << 33;
    expect_refused(c, &p, &x, "an unknown field bit");
    p = good, p.field_mask |= UCCL_COMM_PARAM_CONNS;
    expect_refused(c, &p, &x, "a bit only uccl_comm_create reads");
    p = good, p.rank = c->size;
    expect_refused(c, &p, &x, "rank == size");
    p = good, p.rank = -1;
    expect_refused(c, &p, &x, "rank -1");
    p = good, p.size = 0, p.rank = 0;
    expect_refused(c, &p, &x, "size 0");
    p = good, p.allgather = NULL;
    expect_refused(c, &p, &x, "a NULL callback");
    p = good, p.field_mask &= ~(uint64_t)UCCL_COMM_PARAM_ALLGATHER;
    expect_refused(c, &p, &x, "no ALLGATHER bit");
    p = good, p.field_mask &= ~(uint64_t)UCCL_COMM_PARAM_SIZE;
    expect_refused(c, &p, &x, "no SIZE bit");
    p = good, p.field_mask |= UCCL_COMM_PARAM_ENGINE, p.engine = NULL;
    expect_refused(c, &p, &x, "a NULL engine");
    p = good, p.field_mask |= UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_ENGINE_PARAMS;
    p.engine = c->engine, p.engine_params = &ep;
    expect_refused(c, &p, &x, "an engine and engine params");
    expect_refused(c, NULL, &x, "NULL params");
    mt_expect(c, uccl_comm_init(&good, NULL), UCCL_ERR_INVALID_PARAM, "no output");
    if (x.calls != 0)
        mt_fail(c, "no output: the callback was called");
}

/* Ranks of one parity share a "host": host ids, uccl_comm_same_host and the
 * conns' attributes must all say so, and between hosts the conn is tcp. */
static void check_host_map(mt_ctx_t *c, uccl_comm_t *comm, const uint64_t *ids)
{
    const char *tps = getenv("UCCL_TRANSPORTS");
    int shm_allowed = tps == NULL || strstr(tps, "shm") != NULL;

    for (int q = 0; q < c->size; q++) {
        int same = q % 2 == c->rank % 2;
        uccl_conn_attr_t attr = {0};
        if ((ids[q] == ids[c->rank]) != same || uccl_comm_same_host(comm, q) != same)
            mt_fail(c, "rank %d: host id %016llx (mine %016llx), same_host %d, expected %d", q,
                    (unsigned long long)ids[q], (unsigned long long)ids[c->rank],
                    uccl_comm_same_host(comm, q), same);
        if (q == c->rank)
            continue;
        if (uccl_conn_query(uccl_comm_conn(comm, q), &attr) != UCCL_OK)
            mt_fail(c, "uccl_conn_query of conn(%d) failed", q);
        else if (attr.same_host != same || attr.host_id != ids[q])
            mt_fail(c, "conn(%d): same_host %d host_id %016llx, expected %d and %016llx", q,
                    attr.same_host, (unsigned long long)attr.host_id, same,
                    (unsigned long long)ids[q]);
        else if (strcmp(attr.transport, same && shm_allowed ? "shm" : "tcp") != 0)
            mt_fail(c, "conn(%d) uses %s between %s hosts", q, attr.transport,
                    same ? "equal" : "different");
    }
}

static int check_hosts(mt_ctx_t *c)
{
    cb_ctx_t x;
    uccl_comm_params_t p = boot_params(&x, c);
    uccl_comm_t *comm = NULL;
    uint64_t mine = uccl_engine_host_id(c->engine), *ids = calloc((size_t)c->size, sizeof(*ids));
    int failures = 0;

    if (getenv("UCCL_HOST_ID") == NULL)
        mt_fail(c, "UCCL_HOST_ID is not set: run this case under host-by-parity.sh");
    MPI_Allgather(&mine, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    check_host_map(c, c->comm, ids);
    failures += mt_report(c, "UCCL_HOST_ID by parity: uccl_comm_init_mpi's host map = conns'");
    mt_expect(c, uccl_comm_init(&p, &comm), UCCL_OK, "uccl_comm_init");
    if (comm != NULL) {
        uint64_t own = uccl_engine_host_id(uccl_comm_engine(comm));
        if (own != mine)
            mt_fail(c, "two engines of one process have host ids %016llx and %016llx",
                    (unsigned long long)own, (unsigned long long)mine);
        check_host_map(c, comm, ids);
        mt_check_comm(c, comm);
        MPI_Barrier(MPI_COMM_WORLD);
        uccl_comm_destroy(comm);
    }
    failures += mt_report(c, "UCCL_HOST_ID by parity: uccl_comm_init's host map = conns'");
    free(ids);
    return failures;
}

/* Rank 1 connects lazily, the others in uccl_comm_init (the variable is
 * read once per process, at its first init: so before any other case). Each
 * would wait for the other until UCCL_TIMEOUT_MS; every rank refuses. */
static int check_lazy_mix(void)
{
    mt_ctx_t c = {.transport = "lazy on rank 1 only"};
    uccl_comm_t *comm = NULL;
    uccl_comm_params_t p;
    cb_ctx_t x;
    double t0;

    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.size);
    setenv("UCCL_LAZY_CONNECT", c.rank == 1 ? "1" : "0", 1);
    p = boot_params(&x, &c);
    t0 = MPI_Wtime();
    mt_expect(&c, uccl_comm_init(&p, &comm), UCCL_ERR_INVALID_PARAM,
              "init with UCCL_LAZY_CONNECT=1 on rank 1 only");
    settled_fast(&c, &x, t0, comm, false);
    return mt_report(&c, "UCCL_LAZY_CONNECT differing on one rank: every rank refuses, fast");
}

int main(int argc, char **argv)
{
    mt_ctx_t c;
    int rc, failures = 0;

    MPI_Init(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "--lazy-mix") == 0) {
        failures = check_lazy_mix();
        MPI_Finalize();
        return failures != 0;
    }
    rc = mt_init(&c, 64);
    if (rc == 0 && argc > 1 && strcmp(argv[1], "--hosts-by-parity") == 0) {
        failures += check_hosts(&c);
    } else if (rc == 0) {
        check_works(&c);
        failures += mt_report(&c, "uccl_comm_init over the test's callback: conns lead to ranks");
        for (int call = 1; call <= 3; call++) {
            char name[96];
            check_callback_fails(&c, c.size - 1, call);
            snprintf(name, sizeof(name), "callback failing on the last rank in round %d%s", call,
                     call < 3 ? ": every rank fails, fast" : ": only that rank fails");
            failures += mt_report(&c, name);
        }
        if (c.size > 1) {
            check_misordered(&c);
            failures += mt_report(&c, "blocks out of rank order: every rank refuses");
            check_garbled(&c, 0);
            failures += mt_report(&c, "a block garbled on one rank only: every rank refuses, "
                                      "fast");
            check_garbled(&c, 64);
            failures += mt_report(&c, "every block truncated to 64 bytes: every rank refuses, "
                                      "fast");
            check_disjoint_transports(&c);
            failures += mt_report(&c, "no transport in common with one rank: every rank "
                                      "refuses, fast");
        }
        check_bad_params(&c);
        failures += mt_report(&c, "bad params refused at once, no callback call");
    }
    mt_fini(&c);
    MPI_Finalize();
    return rc != 0 ? rc : failures != 0;
}

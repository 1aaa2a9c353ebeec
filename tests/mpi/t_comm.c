/* MPI test of communicators: uccl_comm_init_mpi maps every connection to the
 * right rank, accessors, uccl_comm_create's argument checks and engine
 * ownership, a caller's engine, and failures that every rank must agree on.
 * The generic bootstrap without the adapter: t_boot.c. Any -np. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

/* Every conn leads to its rank; all ranks share this host (one machine). */
static void check_mapping(mt_ctx_t *c)
{
    mt_check_comm(c, c->comm);
    for (int q = 0; q < c->size; q++) {
        if (!uccl_comm_same_host(c->comm, q))
            mt_fail(c, "rank %d not reported on this host", q);
    }
}

static void check_accessors(mt_ctx_t *c)
{
    if (uccl_comm_rank(c->comm) != c->rank || uccl_comm_size(c->comm) != c->size)
        mt_fail(c, "rank/size %d/%d, MPI says %d/%d", uccl_comm_rank(c->comm),
                uccl_comm_size(c->comm), c->rank, c->size);
    if (uccl_comm_conn(c->comm, c->rank) != NULL || uccl_comm_conn(c->comm, -1) != NULL ||
        uccl_comm_conn(c->comm, c->size) != NULL)
        mt_fail(c, "uccl_comm_conn gives a conn for own rank or out of range");
    if (!uccl_comm_same_host(c->comm, c->rank) || uccl_comm_same_host(c->comm, c->size))
        mt_fail(c, "uccl_comm_same_host wrong for own rank or out of range");
}

static void expect_create(mt_ctx_t *c, const uccl_comm_params_t *p, uccl_status_t want,
                          const char *what)
{
    uccl_comm_t *comm = NULL;

    mt_expect(c, uccl_comm_create(p, &comm), want, what);
    if (want != UCCL_OK && comm != NULL)
        mt_fail(c, "%s: a comm came back with the error", what);
}

/* Each refusal differs from a valid size-1 / size-2 request in one thing. */
static void check_create_refusals(mt_ctx_t *c, const uccl_comm_params_t *one)
{
    uccl_conn_t *conns[2] = {NULL, NULL};
    uccl_comm_params_t p;

    p = *one, p.engine = NULL;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with a NULL engine");
    p = *one, p.field_mask &= ~(uint64_t)UCCL_COMM_PARAM_ENGINE;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create without the ENGINE bit");
    p = *one, p.field_mask &= ~(uint64_t)UCCL_COMM_PARAM_RANK;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create without the RANK bit");
    p = *one, p.field_mask |= 1ull << 40;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with an unknown field bit");
    p = *one, p.field_mask |= UCCL_COMM_PARAM_ALLGATHER;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with a bit only uccl_comm_init reads");
    p = *one, p.field_mask |= UCCL_COMM_PARAM_FLAGS, p.flags = 1ull << 9;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with an unknown flag");
    p = *one, p.field_mask |= UCCL_COMM_PARAM_HOST_IDS, p.host_ids = NULL;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with NULL host ids");
    p = *one, p.size = 0;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with size 0");
    p = *one, p.size = 2, p.rank = 2, p.field_mask |= UCCL_COMM_PARAM_CONNS, p.conns = conns;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with rank == size");
    p.rank = -1;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with rank -1");
    p.rank = 0;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create with a NULL conn for a peer");
    p.field_mask &= ~(uint64_t)UCCL_COMM_PARAM_CONNS;
    expect_create(c, &p, UCCL_ERR_INVALID_PARAM, "create of size 2 without the CONNS bit");
    expect_create(c, NULL, UCCL_ERR_INVALID_PARAM, "create with NULL params");
    mt_expect(c, uccl_comm_create(one, NULL), UCCL_ERR_INVALID_PARAM, "create without output");
}

static void check_create_args(mt_ctx_t *c)
{
    uint64_t host = 12345;
    uccl_comm_t *comm = NULL;
    uccl_engine_t *e = c->engine;
    uccl_comm_params_t one = {.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK |
                                            UCCL_COMM_PARAM_SIZE,
                              .engine = e, .rank = 0, .size = 1};

    check_create_refusals(c, &one);
    mt_expect(c, uccl_comm_create(&one, &comm), UCCL_OK, "create of size 1");
    if (comm != NULL && (uccl_comm_size(comm) != 1 || uccl_comm_engine(comm) != e ||
                         !uccl_comm_same_host(comm, 0)))
        mt_fail(c, "size-1 comm has size %d", uccl_comm_size(comm));
    if (comm != NULL)
        mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "destroy of a comm not owning its engine");
    one.field_mask |= UCCL_COMM_PARAM_HOST_IDS, one.host_ids = &host;
    comm = NULL;
    mt_expect(c, uccl_comm_create(&one, &comm), UCCL_OK, "create of size 1 with host ids");
    if (comm != NULL)
        mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "destroy");
    /* The engine must have survived: it still answers. */
    mt_expect(c, uccl_engine_progress(e) >= 0 ? UCCL_OK : UCCL_ERR_IO, UCCL_OK, "engine alive");
    mt_expect(c, uccl_comm_destroy(NULL), UCCL_ERR_INVALID_PARAM, "destroy NULL");
}

/* The comm destroys an engine it was given with UCCL_COMM_FLAG_OWN_ENGINE
 * (no leak check under mpirun, so look for the engine itself: its
 * listening socket must be gone, a connect to its address fails). */
static void check_own_engine(mt_ctx_t *c)
{
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK |
                                          UCCL_COMM_PARAM_SIZE | UCCL_COMM_PARAM_FLAGS,
                            .rank = 0, .size = 1, .flags = UCCL_COMM_FLAG_OWN_ENGINE};
    uccl_comm_t *comm = NULL;
    uccl_conn_t *conn = NULL;
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t len = sizeof(addr);
    uccl_status_t st;

    mt_expect(c, uccl_engine_create(NULL, &p.engine), UCCL_OK, "uccl_engine_create");
    if (p.engine == NULL)
        return;
    mt_expect(c, uccl_engine_address(p.engine, addr, &len), UCCL_OK, "uccl_engine_address");
    mt_expect(c, uccl_comm_create(&p, &comm), UCCL_OK, "create owning the engine");
    if (comm == NULL) {
        uccl_engine_destroy(p.engine);
        return;
    }
    mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "destroy of a comm owning its engine");
    st = uccl_connect(c->engine, addr, len, &conn);
    if (st == UCCL_OK) {
        mt_fail(c, "connected to the engine of a destroyed comm: it is still alive");
        uccl_conn_close(conn);
    }
}

/* The adapter sets rank, size and callback itself; both engine bits at
 * once are ambiguous. Refused at once on every rank, with no MPI call. */
static void check_init_mpi_args(mt_ctx_t *c)
{
    uccl_engine_params_t ep = {0};
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_RANK, .rank = 0};
    uccl_comm_t *comm = NULL;

    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, &p, &comm), UCCL_ERR_INVALID_PARAM,
              "init_mpi with the RANK bit");
    p.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_ENGINE_PARAMS;
    p.engine = c->engine, p.engine_params = &ep;
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, &p, &comm), UCCL_ERR_INVALID_PARAM,
              "init_mpi with an engine and engine params");
    p.field_mask = UCCL_COMM_PARAM_ENGINE, p.engine = NULL;
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, &p, &comm), UCCL_ERR_INVALID_PARAM,
              "init_mpi with a NULL engine");
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_NULL, NULL, &comm), UCCL_ERR_INVALID_PARAM,
              "init_mpi on MPI_COMM_NULL");
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, NULL), UCCL_ERR_INVALID_PARAM,
              "init_mpi without output");
    if (comm != NULL)
        mt_fail(c, "a refused init_mpi returned a comm");
}

/* A split of MPI_COMM_WORLD (even/odd world ranks, reversed): the comm's
 * ranks are the split's, and an allgather over it moves the right bytes. An
 * intercommunicator between the halves is refused at once (its MPI_Bcast
 * and MPI_Allgather reach the other half: every rank hung in the bootstrap). */
static void check_split_comms(mt_ctx_t *c)
{
    MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    uccl_comm_t *comm = NULL;
    int hrank = -1, hsize = 0;
    uint8_t mine[8], all[8 * 16];

    MPI_Comm_split(MPI_COMM_WORLD, c->rank % 2, c->size - c->rank, &half);
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    mt_expect(c, uccl_comm_init_mpi(half, NULL, &comm), UCCL_OK, "init_mpi on a split");
    if (comm != NULL && (uccl_comm_rank(comm) != hrank || uccl_comm_size(comm) != hsize))
        mt_fail(c, "comm on a split: rank/size %d/%d, the split's %d/%d", uccl_comm_rank(comm),
                uccl_comm_size(comm), hrank, hsize);
    memset(mine, 'a' + hrank, sizeof(mine));
    if (comm != NULL && hsize <= 16) {
        mt_expect(c, uccl_allgather(comm, mine, all, sizeof(mine)), UCCL_OK, "split allgather");
        for (int r = 0; r < hsize * 8; r++)
            if (all[r] != 'a' + r / 8) {
                mt_fail(c, "split allgather: byte %d is %d, want %d", r, all[r], 'a' + r / 8);
                break;
            }
    }
    if (comm != NULL)
        uccl_comm_destroy(comm);
    comm = NULL;
    if (c->size > 1) {
        /* each half's leader (its rank 0) is its highest world rank */
        int other = (c->size - 1) % 2 != c->rank % 2 ? c->size - 1 : c->size - 2;
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, other, 7, &inter);
        mt_expect(c, uccl_comm_init_mpi(inter, NULL, &comm), UCCL_ERR_INVALID_PARAM,
                  "init_mpi on an intercommunicator");
        if (comm != NULL)
            mt_fail(c, "a refused init_mpi returned a comm");
        MPI_Comm_free(&inter);
    }
    MPI_Comm_free(&half);
}

/* A comm on an engine the caller owns: the comm uses it and leaves it. */
static void check_given_engine(mt_ctx_t *c)
{
    uccl_engine_t *engine = NULL;
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_ENGINE};
    uccl_comm_t *comm = NULL;
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t len = sizeof(addr);

    mt_expect(c, uccl_engine_create(NULL, &engine), UCCL_OK, "uccl_engine_create");
    p.engine = engine;
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, &p, &comm), UCCL_OK,
              "init with the caller's engine");
    if (comm != NULL && uccl_comm_engine(comm) != engine)
        mt_fail(c, "comm does not use the engine it was given");
    if (comm != NULL)
        uccl_comm_destroy(comm);
    if (engine != NULL) {
        mt_expect(c, uccl_engine_address(engine, addr, &len), UCCL_OK,
                  "the caller's engine after uccl_comm_destroy");
        uccl_engine_destroy(engine);
    }
}

/* The admission secret an address blob carries (the 16 bytes before its
 * trailing checksum, src/core/address.c). */
static int blob_secret(mt_ctx_t *c, uccl_engine_t *e, uint8_t secret[UCCL_SECRET_SIZE])
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);

    if (uccl_engine_address(e, blob, &len) != UCCL_OK || len < 4 + UCCL_SECRET_SIZE) {
        mt_fail(c, "uccl_engine_address");
        return -1;
    }
    memcpy(secret, blob + len - 4 - UCCL_SECRET_SIZE, UCCL_SECRET_SIZE);
    return 0;
}

/* uccl_comm_init_mpi gives its engines one secret per job (rank 0's draw):
 * the same on every rank, not an engine's own. */
static void check_job_secret(mt_ctx_t *c)
{
    uint8_t mine[UCCL_SECRET_SIZE], zero[UCCL_SECRET_SIZE] = {0}, other[UCCL_SECRET_SIZE];
    uint8_t *all = calloc((size_t)c->size, UCCL_SECRET_SIZE);
    uccl_engine_t *e = NULL;

    if (all == NULL || blob_secret(c, c->engine, mine) != 0)
        memset(mine, 0, sizeof(mine));
    MPI_Allgather(mine, UCCL_SECRET_SIZE, MPI_BYTE, all, UCCL_SECRET_SIZE, MPI_BYTE,
                  MPI_COMM_WORLD);
    if (memcmp(mine, zero, sizeof(zero)) == 0)
        mt_fail(c, "no secret in the comm engine's address");
    for (int r = 0; all != NULL && r < c->size; r++)
        if (memcmp(all + (size_t)r * UCCL_SECRET_SIZE, mine, UCCL_SECRET_SIZE) != 0)
            mt_fail(c, "rank %d's engine has another secret than this rank's", r);
    if (uccl_engine_create(NULL, &e) == UCCL_OK && blob_secret(c, e, other) == 0 &&
        memcmp(other, mine, sizeof(mine)) == 0)
        mt_fail(c, "an engine of its own drew the job's secret");
    if (e != NULL)
        uccl_engine_destroy(e);
    free(all);
}

/* Rank fail_rank (or every rank, -1) cannot create its engine: each rank
 * gets an error, the failing one its own. */
static void check_agreed_failure(mt_ctx_t *c, int fail_rank)
{
    uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS,
                               .transports = "no-such-transport"};
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_ENGINE_PARAMS, .engine_params = &ep};
    int fails_here = fail_rank < 0 || fail_rank == c->rank;
    uccl_comm_t *comm = NULL;
    uccl_status_t st = uccl_comm_init_mpi(MPI_COMM_WORLD, fails_here ? &p : NULL, &comm);

    mt_expect(c, st, fails_here ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_PEER_FAILED,
              "init with a failing rank");
    if (st == UCCL_OK && comm != NULL)
        uccl_comm_destroy(comm);
}

int main(int argc, char **argv)
{
    uccl_comm_t *early = NULL, *late = NULL;
    /* MPI not initialized: a status, not MPI's abort of the process. */
    uccl_status_t before = uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &early), after;
    mt_ctx_t c;
    int rc, failures = 0;

    MPI_Init(&argc, &argv);
    rc = mt_init(&c, 4096);
    if (rc == 0) {
        mt_expect(&c, before, UCCL_ERR_INVALID_PARAM, "init_mpi before MPI_Init");
        if (early != NULL)
            mt_fail(&c, "init_mpi before MPI_Init returned a comm");
        failures += mt_report(&c, "uccl_comm_init_mpi before MPI_Init: refused");
        check_split_comms(&c);
        failures += mt_report(&c, "init_mpi on a split works, on an intercommunicator refused");
        check_accessors(&c);
        failures += mt_report(&c, "comm accessors");
        check_mapping(&c);
        failures += mt_report(&c, "every conn leads to its rank (engine id and a message)");
        check_job_secret(&c);
        failures += mt_report(&c, "the comm's engines share the job's secret");
        check_create_args(&c);
        failures += mt_report(&c, "uccl_comm_create refuses bad arguments");
        check_own_engine(&c);
        failures += mt_report(&c, "a comm destroys the engine it owns");
        check_init_mpi_args(&c);
        failures += mt_report(&c, "uccl_comm_init_mpi refuses bad arguments at once");
        check_given_engine(&c);
        failures += mt_report(&c, "init on the caller's engine leaves it alive");
        check_agreed_failure(&c, -1);
        failures += mt_report(&c, "init failing on every rank fails everywhere");
        if (c.size > 1) {
            check_agreed_failure(&c, c.size - 1);
            failures += mt_report(&c, "init failing on one rank fails everywhere");
        }
    }
    mt_fini(&c);
    MPI_Finalize();
    after = uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &late);
    if (rc == 0 && (after != UCCL_ERR_INVALID_PARAM || late != NULL)) {
        fprintf(stderr, "FAIL: init_mpi after MPI_Finalize: %s\n", uccl_strerror(after));
        failures++;
    } else if (rc == 0 && c.rank == 0) {
        printf("ok uccl_comm_init_mpi after MPI_Finalize: refused\n");
    }
    return rc != 0 ? rc : failures != 0;
}

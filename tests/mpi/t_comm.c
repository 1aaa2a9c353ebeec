/* MPI test of communicators: uccl_comm_init_mpi maps every connection to the
 * right rank, accessors, uccl_comm_create's argument checks, a caller's
 * engine, and failures that every rank must agree on. Any -np. */
#include <stdio.h>
#include <stdlib.h>

#include "mpi_test.h"

enum { TAG_RANK = 31 };

/* conn(q) must lead to rank q: its peer id is q's engine id, and a message
 * sent on it by q carries q's rank. */
static void check_mapping(mt_ctx_t *c)
{
    uint64_t mine = uccl_engine_id(c->engine), *ids = calloc((size_t)c->size, sizeof(*ids));
    int *got = calloc((size_t)c->size, sizeof(*got));
    uccl_req_t **reqs = calloc(2 * (size_t)c->size, sizeof(*reqs));
    uccl_mr_t *mr = NULL;
    int n = 0;

    MPI_Allgather(&mine, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (uccl_mr_reg(c->engine, got, (size_t)c->size * sizeof(*got), 0, &mr) != UCCL_OK)
        mt_fail(c, "registering");
    for (int q = 0; mr != NULL && q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        uccl_conn_attr_t attr;
        if (q == c->rank)
            continue;
        if (uccl_conn_query(conn, &attr) != UCCL_OK || attr.peer_id != ids[q])
            mt_fail(c, "conn to rank %d leads to engine %016llx, rank %d has %016llx", q,
                    (unsigned long long)attr.peer_id, q, (unsigned long long)ids[q]);
        if (!uccl_comm_same_host(c->comm, q))
            mt_fail(c, "rank %d not reported on this host", q);
        mt_expect(c, uccl_recv(conn, mr, (size_t)q * sizeof(int), sizeof(int), TAG_RANK,
                               &reqs[n++]), UCCL_OK, "uccl_recv");
        got[c->rank] = c->rank;
        mt_expect(c, uccl_send(conn, mr, (size_t)c->rank * sizeof(int), sizeof(int), TAG_RANK,
                               &reqs[n++]), UCCL_OK, "uccl_send");
    }
    mt_wait(c, reqs, n, UCCL_OK, "rank exchange");
    for (int q = 0; q < c->size; q++) {
        if (q != c->rank && got[q] != q)
            mt_fail(c, "message on conn(%d) came from rank %d", q, got[q]);
    }
    if (mr != NULL)
        uccl_mr_dereg(mr);
    free(reqs);
    free(got);
    free(ids);
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

static void check_create_args(mt_ctx_t *c)
{
    uccl_conn_t *conns[2] = {NULL, NULL};
    int host[2] = {0, 0};
    uccl_comm_t *comm = NULL;
    uccl_engine_t *e = c->engine;

    mt_expect(c, uccl_comm_create(NULL, 0, 0, 1, NULL, NULL, &comm), UCCL_ERR_INVALID_PARAM,
              "create without engine");
    mt_expect(c, uccl_comm_create(e, 0, 0, 0, NULL, NULL, &comm), UCCL_ERR_INVALID_PARAM,
              "create with size 0");
    mt_expect(c, uccl_comm_create(e, 0, 2, 2, conns, host, &comm), UCCL_ERR_INVALID_PARAM,
              "create with rank == size");
    mt_expect(c, uccl_comm_create(e, 0, -1, 2, conns, host, &comm), UCCL_ERR_INVALID_PARAM,
              "create with rank -1");
    mt_expect(c, uccl_comm_create(e, 0, 0, 2, conns, host, &comm), UCCL_ERR_INVALID_PARAM,
              "create with a NULL conn for a peer");
    mt_expect(c, uccl_comm_create(e, 0, 0, 1, NULL, NULL, NULL), UCCL_ERR_INVALID_PARAM,
              "create without output");
    mt_expect(c, uccl_comm_create(e, 0, 0, 1, NULL, NULL, &comm), UCCL_OK, "create of size 1");
    if (comm != NULL && (uccl_comm_size(comm) != 1 || uccl_comm_engine(comm) != e))
        mt_fail(c, "size-1 comm has size %d", uccl_comm_size(comm));
    if (comm != NULL)
        mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "destroy of a comm not owning its engine");
    /* The engine must have survived: it still answers. */
    mt_expect(c, uccl_engine_progress(e) >= 0 ? UCCL_OK : UCCL_ERR_IO, UCCL_OK, "engine alive");
    mt_expect(c, uccl_comm_destroy(NULL), UCCL_ERR_INVALID_PARAM, "destroy NULL");
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
    mt_ctx_t c;
    int rc, failures = 0;

    MPI_Init(&argc, &argv);
    rc = mt_init(&c, 4096);
    if (rc == 0) {
        check_accessors(&c);
        failures += mt_report(&c, "comm accessors");
        check_mapping(&c);
        failures += mt_report(&c, "every conn leads to its rank (engine id and a message)");
        check_create_args(&c);
        failures += mt_report(&c, "uccl_comm_create refuses bad arguments");
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
    return rc != 0 ? rc : failures != 0;
}

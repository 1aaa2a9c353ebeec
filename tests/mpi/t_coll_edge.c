/* Edge cases of the collectives' contract found in review (issue 19):
 * blocks of the v-variants whose displacement reaches past the end of the
 * address space, and persistent plans that outlive their communicator;
 * (T_COLL_EDGE_MIXED) ranks of one host of which some have no shm. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uccl/uccl_coll.h>

#include "mpi_test.h"

#define EDGE_BLOCK 8
#define EDGE_POISON 0xa5

static bool mapped_usable(uccl_comm_t *comm)
{
    uint8_t sb[8] = {0}, rb[8 * 64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                          .sendbuf = sb, .recvbuf = rb, .count = 8,
                          .algo = UCCL_COLL_ALGO_MAPPED};
    int ok = uccl_coll(comm, &a) == UCCL_OK;

    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok;
}

/* One alltoallv or allgatherv of algo whose block for (or from) the last
 * rank sits SIZE_MAX - 16 bytes past the buffer: the displacement and the
 * count fit size_t, the address does not (it wraps to just before the
 * buffer). Every rank gets UCCL_ERR_INVALID_PARAM at once and nothing lands
 * in its receive buffer. */
static void wrap_case(mt_ctx_t *c, uccl_coll_op_t op, uccl_coll_algo_t algo, bool send_side)
{
    int n = c->size, last = n - 1;
    size_t sc[64], sd[64], rc[64], rd[64], len = (size_t)n * EDGE_BLOCK;
    /* 32 bytes of room before each buffer: the wrapped block lies there */
    uint8_t *sbase = malloc(len + 32), *rbase = malloc(len + 32), *sb = sbase + 32,
            *rb = rbase + 32;
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = op, .sendbuf = sb,
                          .recvbuf = rb, .count = EDGE_BLOCK, .sendcounts = sc, .sdispls = sd,
                          .recvcounts = rc, .rdispls = rd, .algo = algo};
    char what[128];
    long bad = 0;

    if (sbase == NULL || rbase == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        sc[i] = rc[i] = EDGE_BLOCK, sd[i] = rd[i] = (size_t)i * EDGE_BLOCK;
    if (send_side)
        sd[last] = SIZE_MAX - 16;
    else
        rd[last] = SIZE_MAX - 16;
    memset(sbase, 0x3c, len + 32);
    memset(rbase, EDGE_POISON, len + 32);
    snprintf(what, sizeof(what), "%s/%s, %s block %d at SIZE_MAX - 16", uccl_coll_op_name(op),
             uccl_coll_algo_name(algo), send_side ? "send" : "receive", last);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_ERR_INVALID_PARAM, what);
    for (size_t i = 0; i < len + 32; i++)
        bad += rbase[i] != EDGE_POISON;
    if (bad)
        mt_fail(c, "%s: %ld bytes of the receive buffer (or the 32 before it) written", what,
                bad);
out:
    free(sbase);
    free(rbase);
}

/* After the refused calls every rank still agrees on the sequence: an
 * alltoallv of algo gives Open MPI's bytes. */
static void wrap_after(mt_ctx_t *c, uccl_coll_algo_t algo)
{
    int n = c->size, sc[64], sd[64];
    size_t usc[64], usd[64], len = (size_t)n * EDGE_BLOCK;
    uint8_t *sb = malloc(len), *rb = calloc(len, 1), *ref = calloc(len, 1);
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALLV,
                          .sendbuf = sb, .recvbuf = rb, .sendcounts = usc, .sdispls = usd,
                          .recvcounts = usc, .rdispls = usd, .algo = algo};

    if (sb == NULL || rb == NULL || ref == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        sc[i] = EDGE_BLOCK, sd[i] = i * EDGE_BLOCK, usc[i] = EDGE_BLOCK,
        usd[i] = (size_t)i * EDGE_BLOCK;
    for (size_t i = 0; i < len; i++)
        sb[i] = (uint8_t)(c->rank * 29 + (int)i * 3 + 1);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_OK, "alltoallv after the refused calls");
    MPI_Alltoallv(sb, sc, sd, MPI_BYTE, ref, sc, sd, MPI_BYTE, MPI_COMM_WORLD);
    if (memcmp(rb, ref, len) != 0)
        mt_fail(c, "alltoallv/%s after the refused calls: not Open MPI's result",
                uccl_coll_algo_name(algo));
out:
    free(sb);
    free(rb);
    free(ref);
}

/* alltoall of algo in place, on a receive buffer a first call registered,
 * with a count whose n blocks wrap the address space to just before it:
 * the buffer cache must not take the first registration as covering them
 * (an in-place temporary of that size then looped forever). Refused on
 * every rank (the registration fails), nothing written, no hang. */
static void wrap_plain(mt_ctx_t *c, uccl_coll_algo_t algo)
{
    int n = c->size;
    uint8_t *base = malloc((size_t)n * EDGE_BLOCK + 32), *rb = base + 32;
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALL,
                          .sendbuf = UCCL_IN_PLACE, .recvbuf = rb, .count = EDGE_BLOCK,
                          .algo = algo};
    char what[128];
    long bad = 0;

    if (base == NULL) {
        mt_fail(c, "out of memory");
        return;
    }
    memset(base, 0, (size_t)n * EDGE_BLOCK + 32);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_OK, "alltoall in place (registers the buffer)");
    memset(base, EDGE_POISON, (size_t)n * EDGE_BLOCK + 32);
    a.count = (SIZE_MAX - 32) / (size_t)n;
    snprintf(what, sizeof(what), "alltoall/%s in place, %d blocks of %zu bytes",
             uccl_coll_algo_name(algo), n, a.count);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_ERR_INVALID_PARAM, what);
    for (size_t i = 0; i < (size_t)n * EDGE_BLOCK + 32; i++)
        bad += base[i] != EDGE_POISON;
    if (bad)
        mt_fail(c, "%s: %ld bytes of the receive buffer (or the 32 before it) written", what,
                bad);
    free(base);
}

static void ce_addr_wrap(mt_ctx_t *c)
{
    uccl_coll_algo_t algos[] = {UCCL_COLL_ALGO_AUTO, UCCL_COLL_ALGO_DIRECT,
                                UCCL_COLL_ALGO_LINEAR, UCCL_COLL_ALGO_PAIRWISE,
                                UCCL_COLL_ALGO_MAPPED};
    bool mapped = mapped_usable(c->comm);

    for (size_t k = 0; k < sizeof(algos) / sizeof(algos[0]); k++) {
        if (algos[k] == UCCL_COLL_ALGO_MAPPED && !mapped)
            continue;
        wrap_case(c, UCCL_COLL_ALLTOALLV, algos[k], true);
        wrap_case(c, UCCL_COLL_ALLTOALLV, algos[k], false);
        if (algos[k] != UCCL_COLL_ALGO_PAIRWISE)
            wrap_case(c, UCCL_COLL_ALLGATHERV, algos[k] == UCCL_COLL_ALGO_LINEAR ?
                      UCCL_COLL_ALGO_RING : algos[k], false);
        wrap_plain(c, algos[k]);
        wrap_after(c, algos[k]);
    }
    wrap_plain(c, UCCL_COLL_ALGO_BRUCK);
}

/* Plans left over when their comm is destroyed: one started (and done),
 * one never started, one whose start is still in flight (its request,
 * an engine's the comm owned, goes with the engine). Their starts fail
 * with UCCL_ERR_INVALID_HANDLE (not a hang on the freed comm's lock),
 * their frees succeed. */
static void ce_plan_detached(mt_ctx_t *c)
{
    uccl_comm_t *comm = NULL;
    uint8_t sb[EDGE_BLOCK], rb[EDGE_BLOCK * 64];
    uccl_coll_plan_t *done = NULL, *idle = NULL, *flying = NULL;
    uint8_t fsb[EDGE_BLOCK], frb[EDGE_BLOCK * 64];
    uccl_req_t *req = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = sb, .recvbuf = rb,
                          .count = EDGE_BLOCK};
    uccl_coll_args_t b = {.op = UCCL_COLL_ALLTOALL, .sendbuf = rb, .recvbuf = rb + 8 * 32,
                          .count = 4};

    memset(sb, c->rank, sizeof(sb));
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm), UCCL_OK, "second comm");
    if (comm == NULL)
        return;
    mt_expect(c, uccl_coll_init(comm, &a, &done), UCCL_OK, "uccl_coll_init (allgather)");
    mt_expect(c, uccl_coll_init(comm, &b, &idle), UCCL_OK, "uccl_coll_init (alltoall)");
    mt_expect(c, uccl_coll_init(comm, &(uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER,
                                                          .sendbuf = fsb, .recvbuf = frb,
                                                          .count = EDGE_BLOCK},
                                &flying),
              UCCL_OK, "uccl_coll_init (allgather in flight)");
    if (done != NULL) {
        mt_expect(c, uccl_coll_start(done, &req), UCCL_OK, "uccl_coll_start");
        if (req != NULL) {
            mt_expect(c, uccl_wait(req, -1), UCCL_OK, "persistent allgather");
            uccl_req_free(req);
            req = NULL;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (flying != NULL && c->rank == 0) /* the others never start it: in flight */
        mt_expect(c, uccl_coll_start(flying, &req), UCCL_OK, "uccl_coll_start (left in flight)");
    req = NULL;
    uccl_comm_destroy(comm); /* with a collective in flight on rank 0 */
    if (flying != NULL) {
        mt_expect(c, uccl_coll_start(flying, &req), UCCL_ERR_INVALID_HANDLE,
                  "start of a plan that was in flight when its comm was destroyed");
        mt_expect(c, uccl_coll_plan_free(flying), UCCL_OK,
                  "free of a plan that was in flight when its comm was destroyed");
    }
    if (done != NULL) {
        mt_expect(c, uccl_coll_start(done, &req), UCCL_ERR_INVALID_HANDLE,
                  "start of a plan whose comm is destroyed");
        mt_expect(c, uccl_coll_start_stream(done, NULL, NULL), UCCL_ERR_INVALID_HANDLE,
                  "stream start of a plan whose comm is destroyed");
        mt_expect(c, uccl_coll_plan_free(done), UCCL_OK, "free of a plan whose comm is gone");
    }
    if (idle != NULL) {
        mt_expect(c, uccl_coll_start(idle, &req), UCCL_ERR_INVALID_HANDLE,
                  "start of a never-started plan whose comm is destroyed");
        mt_expect(c, uccl_coll_plan_free(idle), UCCL_OK, "free of a plan whose comm is gone");
    }
}

/* A send buffer that overlaps the receive buffer without UCCL_IN_PLACE:
 * allgather sending from another rank's block, alltoall from the receive
 * buffer itself. Refused with UCCL_ERR_INVALID_PARAM on every rank, nothing written. The
 * one overlap allowed: the own block read from where it lands (allgather
 * from recvbuf + rank * count), which gives Open MPI's result. */
static void overlap_case(mt_ctx_t *c, uccl_coll_args_t a, uint8_t *rb, size_t rlen,
                         uccl_status_t want, const char *what)
{
    uint8_t *before = malloc(rlen);
    char msg[128];

    if (before == NULL) {
        mt_fail(c, "out of memory");
        return;
    }
    memcpy(before, rb, rlen);
    snprintf(msg, sizeof(msg), "%s/%s", what, uccl_coll_algo_name(a.algo));
    mt_expect(c, uccl_coll(c->comm, &a), want, msg);
    if (want != UCCL_OK && memcmp(before, rb, rlen) != 0)
        mt_fail(c, "%s: the receive buffer changed", msg);
    free(before);
}

static void ce_overlap(mt_ctx_t *c)
{
    uccl_coll_algo_t algos[] = {UCCL_COLL_ALGO_AUTO, UCCL_COLL_ALGO_DIRECT,
                                UCCL_COLL_ALGO_LINEAR, UCCL_COLL_ALGO_MAPPED};
    int n = c->size, r = c->rank, other = (r + 1) % n;
    size_t cnt = 16, len = (size_t)n * cnt;
    uint8_t *rb = malloc(len), *ref = malloc(len);
    bool mapped = mapped_usable(c->comm);

    if (rb == NULL || ref == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    if (n < 2) {
        mt_skip(c, "overlapping buffers (one rank)");
        goto out;
    }
    for (size_t k = 0; k < sizeof(algos) / sizeof(algos[0]); k++) {
        uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .recvbuf = rb, .count = cnt,
                              .algo = algos[k]};
        if (algos[k] == UCCL_COLL_ALGO_MAPPED && !mapped)
            continue;
        for (size_t i = 0; i < len; i++)
            rb[i] = (uint8_t)(r * 41 + (int)i);
        a.op = UCCL_COLL_ALLGATHER;
        a.sendbuf = rb + (size_t)other * cnt;
        overlap_case(c, a, rb, len, UCCL_ERR_INVALID_PARAM, "allgather from another block");
        a.op = UCCL_COLL_ALLTOALL;
        a.sendbuf = rb;
        overlap_case(c, a, rb, len, UCCL_ERR_INVALID_PARAM, "alltoall, sendbuf == recvbuf");
        a.op = UCCL_COLL_ALLGATHER; /* allowed: the own block where it lands */
        a.sendbuf = rb + (size_t)r * cnt;
        MPI_Allgather(rb + (size_t)r * cnt, (int)cnt, MPI_BYTE, ref, (int)cnt, MPI_BYTE,
                      MPI_COMM_WORLD);
        overlap_case(c, a, rb, len, UCCL_OK, "allgather from the own block");
        if (memcmp(rb, ref, len) != 0)
            mt_fail(c, "allgather/%s from the own block: not Open MPI's result",
                    uccl_coll_algo_name(algos[k]));
    }
out:
    free(rb);
    free(ref);
}

/* A plan whose receive buffer is freed with uccl_mem_free before its
 * first start: the plan registered it at uccl_coll_init, so the start
 * sees the stale registration and fails with UCCL_ERR_STALE on every rank
 * (it used to register the freed range there: UCCL_ERR_INVALID_PARAM, or
 * whatever memory came back at that address). */
static void ce_plan_freed_early(mt_ctx_t *c)
{
    uccl_engine_t *e = uccl_comm_engine(c->comm);
    size_t len = (size_t)c->size * EDGE_BLOCK;
    void *sb = NULL, *rb = NULL;
    uccl_coll_plan_t *plan = NULL;
    uccl_req_t *req = NULL;

    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, EDGE_BLOCK, &sb), UCCL_OK, "uccl_mem_alloc");
    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, len, &rb), UCCL_OK, "uccl_mem_alloc");
    if (sb == NULL || rb == NULL)
        return;
    mt_expect(c, uccl_coll_init(c->comm, &(uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER,
                                                             .sendbuf = sb, .recvbuf = rb,
                                                             .count = EDGE_BLOCK},
                                &plan),
              UCCL_OK, "uccl_coll_init");
    mt_expect(c, uccl_mem_free(e, rb), UCCL_OK, "uccl_mem_free of the receive buffer");
    if (plan != NULL) {
        mt_expect(c, uccl_coll_start(plan, &req), UCCL_ERR_STALE,
                  "first start of a plan whose receive buffer was freed");
        if (req != NULL)
            uccl_req_free(req);
        mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "uccl_coll_plan_free");
    }
    mt_expect(c, uccl_mem_free(e, sb), UCCL_OK, "uccl_mem_free");
    wrap_after(c, UCCL_COLL_ALGO_AUTO); /* every rank still agrees on the sequence */
}

/* ------------------------------------------------------------------ shm on some ranks only */

#define MIXED_BLOCK 64
#define MIXED_ROUNDS 3

static uint8_t mixed_byte(int op, int round, int from, int to, size_t b)
{
    return (uint8_t)(op * 59 + round * 31 + from * 7 + to * 13 + (int)b + 1);
}

/* One AUTO call of op (MIXED_BLOCK bytes per block, root the last rank):
 * OK, and every byte as the op defines. */
static void mixed_call(mt_ctx_t *c, uccl_coll_op_t op, int round)
{
    int n = c->size, r = c->rank, root = n - 1;
    size_t blk = MIXED_BLOCK, len = blk * (size_t)n, cnt[64], dsp[64];
    uint8_t *sb = malloc(len), *rb = malloc(len);
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ROOT, .op = op, .sendbuf = sb,
                          .recvbuf = rb, .count = blk, .sendcounts = cnt, .sdispls = dsp,
                          .recvcounts = cnt, .rdispls = dsp, .root = root};
    bool all_to = op == UCCL_COLL_ALLTOALL || op == UCCL_COLL_ALLTOALLV;
    size_t want_len = op == UCCL_COLL_GATHER ? (r == root ? len : 0)
                      : op == UCCL_COLL_BCAST || op == UCCL_COLL_SCATTER ? blk : len;
    long bad = 0;

    if (sb == NULL || rb == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++) {
        cnt[j] = blk;
        dsp[j] = (size_t)j * blk;
        for (size_t b = 0; b < blk; b++) /* block j: to rank j (all-to-all, scatter) */
            sb[dsp[j] + b] = mixed_byte(op, round, r, all_to || op == UCCL_COLL_SCATTER ? j : 0, b);
    }
    memset(rb, EDGE_POISON, len);
    if (op == UCCL_COLL_BCAST && r == root)
        memcpy(rb, sb, blk);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_OK, "shm on some ranks: an AUTO call");
    for (size_t b = 0; b < want_len && !c->failed; b++) {
        int from = op == UCCL_COLL_BCAST || op == UCCL_COLL_SCATTER ? root : (int)(b / blk);
        int to = all_to || op == UCCL_COLL_SCATTER ? r : 0;
        bad += rb[b] != mixed_byte(op, round, from, to, b % blk);
    }
    if (bad > 0)
        mt_fail(c, "shm on some ranks: %s round %d, %ld of %zu bytes wrong",
                uccl_coll_op_name(op), round, bad, want_len);
out:
    free(sb);
    free(rb);
}

/* Ranks of one host of which some have no shm (UCCL_TRANSPORTS=tcp on
 * rank 1, shm-off-rank1.sh): they talk over tcp, and the table must pick
 * the same algorithm on every rank, not MAPPED on the ranks with shm and
 * LINEAR on the others. Each op by AUTO at 64 B, byte-checked. */
static void ce_mixed_shm(mt_ctx_t *c)
{
    if (c->size < 2 || c->size > 64) {
        mt_skip(c, "shm on some ranks (2 to 64 ranks)");
        return;
    }
    for (int round = 0; round < MIXED_ROUNDS && !c->failed; round++)
        for (int op = 0; op < UCCL_COLL_OP_COUNT && !c->failed; op++)
            mixed_call(c, (uccl_coll_op_t)op, round);
    if (c->rank == 0)
        printf("# shm on some ranks: %d AUTO calls of every op at %d B, byte-checked\n",
               MIXED_ROUNDS * UCCL_COLL_OP_COUNT, MIXED_BLOCK);
}

int main(int argc, char **argv)
{
    mt_ctx_t c;
    int rc, fails = 0;

    MPI_Init(&argc, &argv);
    rc = mt_init(&c, 64);
    if (rc != 0) {
        mt_fini(&c);
        MPI_Finalize();
        return rc;
    }
    if (getenv("T_COLL_EDGE_MIXED") != NULL) { /* shm-off-rank1.sh: that case alone */
        ce_mixed_shm(&c);
        fails += mt_report(&c, "shm on some ranks: every rank picks the same algorithm");
    } else if (c.size > 64) {
        mt_skip(&c, "more than 64 ranks");
    } else {
        ce_addr_wrap(&c);
        fails += mt_report(&c, "v-variants: a block past the address space is refused");
        ce_overlap(&c);
        fails += mt_report(&c, "send buffer overlapping the receive buffer: refused");
        ce_plan_detached(&c);
        fails += mt_report(&c, "plans outliving their comm: start refused, free works");
        ce_plan_freed_early(&c);
        fails += mt_report(&c, "a plan's buffer freed before its first start: UCCL_ERR_STALE");
    }
    mt_fini(&c);
    MPI_Finalize();
    return fails ? 1 : 0;
}

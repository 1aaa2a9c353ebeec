/* Collective cases beyond the matrix: plan reuse over 1000 calls (counters),
 * buffers freed with uccl_mem_free and allocated again, large blocks on
 * buffers of uccl_mem_alloc,
 * several non-blocking collectives in flight, persistent plans, bad
 * arguments, count mismatches and a rank that leaves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"

static void stats(mt_ctx_t *c, uccl_comm_t *comm, uccl_coll_stats_t *s)
{
    mt_expect(c, uccl_comm_coll_stats(comm, s), UCCL_OK, "uccl_comm_coll_stats");
}

/* The same buffers 1000 times (DIRECT, the algorithm with descriptors):
 * after the first call nothing is registered and no descriptor is sent,
 * and every later call takes the first call's cached plan. */
void ct_reuse(mt_ctx_t *c)
{
    ct_case_t k;
    uccl_coll_stats_t s0, s1, s2;
    int n = c->size, calls = 1000;

    ct_prepare(c, &k, UCCL_COLL_ALLGATHER, 64, 0, false, 777);
    k.args.field_mask |= UCCL_COLL_ARG_ALGO;
    k.args.algo = UCCL_COLL_ALGO_DIRECT;
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    stats(c, c->comm, &s0);
    mt_expect(c, uccl_coll(c->comm, &k.args), UCCL_OK, "first call");
    stats(c, c->comm, &s1);
    if (s1.buf_regs - s0.buf_regs != 2 || (n > 1 && s1.desc_sent == s0.desc_sent))
        mt_fail(c, "first call on new buffers: %llu registrations (want 2), %llu descriptors",
                (unsigned long long)(s1.buf_regs - s0.buf_regs),
                (unsigned long long)(s1.desc_sent - s0.desc_sent));
    for (int i = 1; i < calls && !c->failed; i++) {
        if (i % 100 == 0)
            memset(k.rbuf, 0, k.rlen);
        mt_expect(c, uccl_coll(c->comm, &k.args), UCCL_OK, "repeated call");
        if (i % 100 == 0)
            ct_compare(c, &k, "allgather after repeated calls");
    }
    stats(c, c->comm, &s2);
    if (s2.calls - s0.calls != (uint64_t)calls)
        mt_fail(c, "%llu calls counted, %d made", (unsigned long long)(s2.calls - s0.calls), calls);
    if (s2.buf_regs != s1.buf_regs || s2.desc_sent != s1.desc_sent)
        mt_fail(c, "after the first call: %llu registrations, %llu descriptors sent",
                (unsigned long long)(s2.buf_regs - s1.buf_regs),
                (unsigned long long)(s2.desc_sent - s1.desc_sent));
    if (n > 1 && s2.desc_reused - s1.desc_reused < (uint64_t)(calls - 1) * (uint64_t)(n - 1))
        mt_fail(c, "only %llu ready messages named a known descriptor",
                (unsigned long long)(s2.desc_reused - s1.desc_reused));
    if (s2.plan_hits - s1.plan_hits != (uint64_t)(calls - 1))
        mt_fail(c, "%llu of %d repeated calls took the cached plan",
                (unsigned long long)(s2.plan_hits - s1.plan_hits), calls - 1);
    if (s2.buf_hits != s1.buf_hits)
        mt_fail(c, "%llu buffer-cache look-ups by calls that had a cached plan",
                (unsigned long long)(s2.buf_hits - s1.buf_hits));
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    ct_free(&k);
    if (c->rank == 0)
        printf("# reuse: %d calls, first call registered %llu buffers and sent %llu descriptors, "
               "%llu later calls reused its plan\n",
               calls, (unsigned long long)(s1.buf_regs - s0.buf_regs),
               (unsigned long long)(s1.desc_sent - s0.desc_sent),
               (unsigned long long)(s2.plan_hits - s1.plan_hits));
}

/* Four collectives of different kinds posted before any is waited for. */
void ct_inflight(mt_ctx_t *c)
{
    enum { N = 5 };
    static const uccl_coll_op_t ops[N] = {UCCL_COLL_ALLGATHER, UCCL_COLL_ALLTOALLV,
                                          UCCL_COLL_BCAST, UCCL_COLL_ALLTOALL, UCCL_COLL_GATHER};
    static const uccl_coll_algo_t algos[N] = {UCCL_COLL_ALGO_DIRECT, UCCL_COLL_ALGO_PAIRWISE,
                                              UCCL_COLL_ALGO_BINOMIAL, UCCL_COLL_ALGO_DIRECT,
                                              UCCL_COLL_ALGO_BINOMIAL};
    ct_case_t k[N];
    uccl_req_t *reqs[N] = {NULL};

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            ct_prepare(c, &k[i], ops[i], 100 + 50 * (size_t)i, c->size - 1, false,
                       (uint32_t)(900 + i + 10 * round));
            k[i].args.field_mask |= UCCL_COLL_ARG_ALGO;
            k[i].args.algo = algos[i];
        }
        for (int i = 0; i < N; i++)
            mt_expect(c, uccl_coll_post(c->comm, &k[i].args, &reqs[i]), UCCL_OK,
                      "uccl_coll_post");
        mt_expect(c, uccl_wait_all(reqs, N, -1), UCCL_OK, "uccl_wait_all");
        for (int i = 0; i < N; i++) {
            if (reqs[i] != NULL)
                uccl_req_free(reqs[i]);
            reqs[i] = NULL;
            ct_compare(c, &k[i], uccl_coll_op_name(ops[i]));
            ct_free(&k[i]);
        }
    }
}

static void start_both(mt_ctx_t *c, uccl_coll_plan_t *pa, uccl_coll_plan_t *pb, bool busy)
{
    uccl_req_t *r[2] = {NULL, NULL};

    mt_expect(c, uccl_coll_start(pa, &r[0]), UCCL_OK, "start allgather");
    if (busy) {
        uccl_req_t *extra = NULL;
        mt_expect(c, uccl_coll_start(pa, &extra), UCCL_ERR_BUSY, "second start while in flight");
        mt_expect(c, uccl_coll_plan_free(pa), UCCL_ERR_BUSY, "free while in flight");
    }
    mt_expect(c, uccl_coll_start(pb, &r[1]), UCCL_OK, "start alltoall");
    mt_expect(c, uccl_wait_all(r, 2, -1), UCCL_OK, "wait for both");
    for (int j = 0; j < 2; j++)
        if (r[j] != NULL)
            uccl_req_free(r[j]);
}

/* Two plans started alternately 10 times, receive buffers wiped between
 * starts; after the first start nothing is registered or described. */
void ct_persistent(mt_ctx_t *c)
{
    ct_case_t a, b;
    uccl_coll_plan_t *pa = NULL, *pb = NULL;
    uccl_coll_stats_t s0, s1;

    ct_prepare(c, &a, UCCL_COLL_ALLGATHER, 300, 0, false, 5001);
    ct_prepare(c, &b, UCCL_COLL_ALLTOALL, 200, 0, false, 6001);
    b.args.field_mask |= UCCL_COLL_ARG_ALGO;
    b.args.algo = UCCL_COLL_ALGO_DIRECT;
    mt_expect(c, uccl_coll_init(c->comm, &a.args, &pa), UCCL_OK, "init allgather");
    mt_expect(c, uccl_coll_init(c->comm, &b.args, &pb), UCCL_OK, "init alltoall");
    for (int i = 0; i < 10 && pa && pb; i++) {
        if (i == 1)
            stats(c, c->comm, &s0);
        memset(a.rbuf, 0xee, a.rlen);
        memset(b.rbuf, 0xee, b.rlen);
        start_both(c, pa, pb, i == 3);
        ct_compare(c, &a, "persistent allgather");
        ct_compare(c, &b, "persistent alltoall (direct)");
    }
    stats(c, c->comm, &s1);
    if (s1.buf_regs != s0.buf_regs || s1.desc_sent != s0.desc_sent)
        mt_fail(c, "starts after the first registered %llu buffers and sent %llu descriptors",
                (unsigned long long)(s1.buf_regs - s0.buf_regs),
                (unsigned long long)(s1.desc_sent - s0.desc_sent));
    mt_expect(c, pa ? uccl_coll_plan_free(pa) : UCCL_OK, UCCL_OK, "free allgather plan");
    mt_expect(c, pb ? uccl_coll_plan_free(pb) : UCCL_OK, UCCL_OK, "free alltoall plan");
    ct_free(&a);
    ct_free(&b);
}

/* ------------------------------------------------------------------ errors */

static void expect_args(mt_ctx_t *c, uccl_coll_args_t a, uccl_status_t want, const char *what)
{
    mt_expect(c, uccl_coll(c->comm, &a), want, what);
}

void ct_bad_args(mt_ctx_t *c)
{
    int n = c->size, r = c->rank;
    char buf[64];
    size_t cnt[64], dsp[64];
    uccl_coll_algo_t algo = UCCL_COLL_ALGO_AUTO;
    uccl_req_t *req = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = buf, .recvbuf = buf};

    mt_expect(c, uccl_coll(NULL, &a), UCCL_ERR_INVALID_PARAM, "NULL comm");
    mt_expect(c, uccl_coll(c->comm, NULL), UCCL_ERR_INVALID_PARAM, "NULL args");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_OP_COUNT}, UCCL_ERR_INVALID_PARAM, "bad op");
    expect_args(c, (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ROOT, .op = UCCL_COLL_BCAST,
                                      .recvbuf = buf, .count = 1, .root = n},
                UCCL_ERR_INVALID_PARAM, "root == size");
    expect_args(c, (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ROOT, .op = UCCL_COLL_GATHER,
                                      .sendbuf = buf, .recvbuf = buf, .count = 1, .root = -1},
                UCCL_ERR_INVALID_PARAM, "root -1");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER, .recvbuf = buf, .count = 8},
                UCCL_ERR_INVALID_PARAM, "NULL sendbuf with count 8");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_ALLTOALL, .sendbuf = buf, .count = 1},
                UCCL_ERR_INVALID_PARAM, "NULL recvbuf with count 1");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_BCAST, .recvbuf = UCCL_IN_PLACE, .count = 1},
                UCCL_ERR_INVALID_PARAM, "bcast in place");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_SCATTER, .sendbuf = UCCL_IN_PLACE,
                                      .recvbuf = buf, .count = 1},
                UCCL_ERR_INVALID_PARAM, "scatter with sendbuf in place");
    expect_args(c, (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ROOT, .op = UCCL_COLL_GATHER,
                                      .sendbuf = UCCL_IN_PLACE, .recvbuf = buf, .count = 1,
                                      .root = (r + 1) % n},
                n > 1 ? UCCL_ERR_INVALID_PARAM : UCCL_OK, "gather in place off the root");
    expect_args(c, (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALL,
                                      .sendbuf = buf, .recvbuf = buf, .algo = UCCL_COLL_ALGO_RING},
                UCCL_ERR_INVALID_PARAM, "ring alltoall");
    expect_args(c, (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                                      .sendbuf = buf, .recvbuf = buf, .algo = UCCL_COLL_ALGO_COUNT},
                UCCL_ERR_INVALID_PARAM, "algorithm out of range");
    for (int i = 0; i < n; i++)
        cnt[i] = 4, dsp[i] = (size_t)i * 2; /* blocks overlap (n > 1) */
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_ALLTOALLV, .sendbuf = buf, .recvbuf = buf,
                                      .sendcounts = cnt, .sdispls = dsp, .recvcounts = cnt,
                                      .rdispls = dsp},
                n > 1 ? UCCL_ERR_INVALID_PARAM : UCCL_OK, "overlapping receive blocks");
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_ALLTOALLV, .sendbuf = buf, .recvbuf = buf,
                                      .sendcounts = cnt, .recvcounts = cnt, .rdispls = dsp},
                UCCL_ERR_INVALID_PARAM, "NULL sdispls");
    for (int i = 0; i < n; i++)
        cnt[i] = 1, dsp[i] = (size_t)i;
    expect_args(c, (uccl_coll_args_t){.op = UCCL_COLL_ALLGATHERV, .sendbuf = buf, .count = 2,
                                      .recvbuf = buf + 8, .recvcounts = cnt, .rdispls = dsp},
                UCCL_ERR_TRUNCATED, "allgatherv count != recvcounts[rank]");
    mt_expect(c, uccl_iallgather(c->comm, buf, buf + 8, 1, NULL), UCCL_ERR_INVALID_PARAM,
              "non-blocking without req");
    mt_expect(c, uccl_coll_start(NULL, &req), UCCL_ERR_INVALID_PARAM, "start NULL plan");
    mt_expect(c, uccl_coll_plan_free(NULL), UCCL_ERR_INVALID_PARAM, "free NULL plan");
    mt_expect(c, uccl_coll_algo_parse("Ring", &algo), UCCL_OK, "parse ring");
    if (algo != UCCL_COLL_ALGO_RING)
        mt_fail(c, "'Ring' parsed as %d", (int)algo);
    mt_expect(c, uccl_coll_algo_parse("nope", &algo), UCCL_ERR_NOT_FOUND, "parse nope");
    if (uccl_coll_algo_select(c->comm, UCCL_COLL_ALLTOALL, 64) == UCCL_COLL_ALGO_AUTO ||
        uccl_coll_algo_select(NULL, UCCL_COLL_ALLTOALL, 64) != UCCL_COLL_ALGO_AUTO)
        mt_fail(c, "uccl_coll_algo_select");
    /* every rank still agrees on the sequence: a real call works */
    ct_case_t k;
    ct_prepare(c, &k, UCCL_COLL_ALLGATHER, 5, 0, false, 4242);
    mt_expect(c, uccl_coll(c->comm, &k.args), UCCL_OK, "a call after refused ones");
    ct_compare(c, &k, "allgather after refused calls");
    ct_free(&k);
}

/* alltoallv where rank 0 and rank 1 disagree on what 1 sends 0: extra
 * bytes (DIRECT: both see it), then missing bytes (LINEAR: the receiver
 * sees a short message). The other ranks complete. */
static void mismatch_case(mt_ctx_t *c, uccl_coll_op_t op, uccl_coll_algo_t algo, size_t sent,
                          size_t expected, uccl_status_t want0, uccl_status_t want1)
{
    int n = c->size, r = c->rank;
    size_t sc[64], sd[64], rc[64], rd[64];
    uint8_t *sb = calloc(64 * 64, 1), *rb = calloc(64 * 64, 1);
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = op, .sendbuf = sb,
                          .recvbuf = rb, .sendcounts = sc, .sdispls = sd, .recvcounts = rc,
                          .rdispls = rd, .algo = algo};
    char what[96];

    for (int i = 0; i < n; i++)
        sc[i] = rc[i] = 16, sd[i] = rd[i] = (size_t)i * 64;
    if (op == UCCL_COLL_ALLGATHERV) {
        rc[1] = r == 0 ? expected : sent;
        a.count = rc[r];
    } else {
        if (r == 1)
            sc[0] = sent;
        if (r == 0)
            rc[1] = expected;
    }
    snprintf(what, sizeof(what), "%s/%s, rank 1 sends %zu where rank 0 expects %zu",
             uccl_coll_op_name(op), uccl_coll_algo_name(algo), sent, expected);
    mt_expect(c, uccl_coll(c->comm, &a), r == 0 ? want0 : r == 1 ? want1 : UCCL_OK, what);
    free(sb);
    free(rb);
}

/* MAPPED alltoallv: rank 1 sends rank 0 sent bytes where rank 0 expects
 * expected; rank 0 gets UCCL_ERR_TRUNCATED and the first of them, byte
 * for byte, the others complete. */
static void mapped_mismatch_bytes(mt_ctx_t *c, size_t sent, size_t expected)
{
    int n = c->size, r = c->rank;
    size_t sc[64], sd[64], rc[64], rd[64], stride = 512, got = sent < expected ? sent : expected;
    uint8_t *sb = calloc(64 * stride, 1), *rb = calloc(64 * stride, 1);
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLTOALLV,
                          .sendbuf = sb, .recvbuf = rb, .sendcounts = sc, .sdispls = sd,
                          .recvcounts = rc, .rdispls = rd, .algo = UCCL_COLL_ALGO_MAPPED};
    char what[96];

    if (sb == NULL || rb == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        sc[i] = rc[i] = 16, sd[i] = rd[i] = (size_t)i * stride;
    if (r == 1)
        sc[0] = sent;
    if (r == 0)
        rc[1] = expected;
    for (size_t b = 0; b < 64 * stride; b++)
        sb[b] = (uint8_t)(b * 7 + (size_t)r * 31 + 1);
    snprintf(what, sizeof(what), "alltoallv/mapped, rank 1 sends %zu where rank 0 expects %zu",
             sent, expected);
    mt_expect(c, uccl_coll(c->comm, &a), r == 0 ? UCCL_ERR_TRUNCATED : UCCL_OK, what);
    for (size_t b = 0; r == 0 && b < got; b++)
        if (rb[stride + b] != (uint8_t)(b * 7 + 31 + 1)) { /* rank 1's sd[0] = 0 */
            mt_fail(c, "%s: byte %zu is 0x%02x, not rank 1's 0x%02x", what, b, rb[stride + b],
                    (uint8_t)(b * 7 + 31 + 1));
            break;
        }
out:
    free(sb);
    free(rb);
}

void ct_mismatch(mt_ctx_t *c)
{
    if (c->size < 2) {
        mt_skip(c, "count mismatches (one rank)");
        return;
    }
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_DIRECT, 24, 16, UCCL_ERR_TRUNCATED,
                  UCCL_ERR_TRUNCATED);
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_DIRECT, 16, 8, UCCL_ERR_TRUNCATED,
                  UCCL_ERR_TRUNCATED);
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_LINEAR, 16, 24, UCCL_ERR_TRUNCATED,
                  UCCL_OK);
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_PAIRWISE, 16, 24, UCCL_ERR_TRUNCATED,
                  UCCL_OK);
    mismatch_case(c, UCCL_COLL_ALLGATHERV, UCCL_COLL_ALGO_DIRECT, 12, 10, UCCL_ERR_TRUNCATED,
                  UCCL_ERR_TRUNCATED);
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_DIRECT, 0, 16, UCCL_ERR_TRUNCATED,
                  UCCL_ERR_TRUNCATED);
    if (!ct_mapped_usable(c, c->comm))
        return;
    /* MAPPED: the reader sees the length the writer stored in its slot */
    mismatch_case(c, UCCL_COLL_ALLTOALLV, UCCL_COLL_ALGO_MAPPED, 24, 16, UCCL_ERR_TRUNCATED,
                  UCCL_OK);
    mismatch_case(c, UCCL_COLL_ALLGATHERV, UCCL_COLL_ALGO_MAPPED, 12, 10, UCCL_ERR_TRUNCATED,
                  UCCL_OK);
    /* across a small slot's 336 bytes and its lines of 56 (each with its
     * flag): the reader finds the bytes where the writer's length put them
     * and waits for the writer's lines (its own length would look
     * elsewhere, or for too few or too many lines) */
    mapped_mismatch_bytes(c, 400, 300);
    mapped_mismatch_bytes(c, 300, 400);
    mapped_mismatch_bytes(c, 337, 336);
    mapped_mismatch_bytes(c, 336, 337);
    mapped_mismatch_bytes(c, 500, 400);
    mapped_mismatch_bytes(c, 57, 56);
    mapped_mismatch_bytes(c, 56, 57);
    mapped_mismatch_bytes(c, 200, 60);
    mapped_mismatch_bytes(c, 0, 100);
}

bool ct_mapped_usable(mt_ctx_t *c, uccl_comm_t *comm)
{
    uint8_t sb[8] = {0}, rb[8 * 64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                          .sendbuf = sb, .recvbuf = rb, .count = 8,
                          .algo = UCCL_COLL_ALGO_MAPPED};
    uccl_status_t st = uccl_coll(comm, &a);

    if (st != UCCL_OK && st != UCCL_ERR_UNSUPPORTED)
        mt_expect(c, st, UCCL_OK, "mapped: the first call (sets the segments up)");
    return st == UCCL_OK;
}

/* The last rank leaves a second comm (destroys it); the others run an
 * allgather of algo on it: each has an op with the leaver (DIRECT) or waits
 * on its flags (MAPPED: one call first, so that the segments are set up and
 * mapped), so each fails with UCCL_ERR_PEER_FAILED well within
 * UCCL_TIMEOUT_MS, and a second call on the broken comm fails too.
 * persistent: the same through a plan made (and started once) before the
 * rank left: its start succeeds, its request fails. */
static uccl_status_t gone_call(uccl_comm_t *comm, const uccl_coll_args_t *a,
                               uccl_coll_plan_t *plan)
{
    uccl_req_t *req = NULL;
    uccl_status_t st;

    if (plan == NULL)
        return uccl_coll(comm, a);
    if ((st = uccl_coll_start(plan, &req)) != UCCL_OK)
        return UCCL_ERR_IO; /* a start does not wait: it never sees the leaver */
    st = uccl_wait(req, -1);
    uccl_req_free(req);
    return st;
}

void ct_peer_gone(mt_ctx_t *c, uccl_coll_algo_t algo, bool persistent)
{
    uccl_coll_plan_t *plan = NULL;
    uccl_comm_t *comm = NULL;
    uint8_t sb[8] = {0}, rb[8 * 64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                          .sendbuf = sb, .recvbuf = rb, .count = 8, .algo = algo};
    const char *tm = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = tm ? atoi(tm) : 60000, usable = 1;
    struct timespec t0, t1;
    uccl_status_t st;

    if (c->size < 2) {
        mt_skip(c, "%s, a rank gone (one rank)", uccl_coll_algo_name(algo));
        return;
    }
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm), UCCL_OK, "second comm");
    if (algo == UCCL_COLL_ALGO_MAPPED) {
        usable = comm != NULL && ct_mapped_usable(c, comm);
        MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!usable)
            mt_skip(c, "mapped, a rank gone (the ranks cannot map each other's memory)");
    }
    if (usable && persistent && comm != NULL) {
        mt_expect(c, uccl_coll_init(comm, &a, &plan), UCCL_OK, "a rank gone: uccl_coll_init");
        mt_expect(c, gone_call(comm, &a, plan), UCCL_OK, "a rank gone: a start before");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (usable && c->rank == c->size - 1) {
        if (plan != NULL)
            uccl_coll_plan_free(plan);
        plan = NULL;
        if (comm != NULL)
            uccl_comm_destroy(comm);
        comm = NULL;
    } else if (usable && comm != NULL) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = gone_call(comm, &a, plan);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        mt_expect(c, st, UCCL_ERR_PEER_FAILED, "allgather with a rank gone");
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        /* Lazy connection: a rank waiting for a lower rank to connect (which
         * gave up on the leaver) learns of it when its accept times out. */
        if (ms > (mt_lazy() ? 2 * timeout_ms : timeout_ms))
            mt_fail(c, "the failure took %.0f ms (UCCL_TIMEOUT_MS %d)", ms, timeout_ms);
        mt_expect(c, gone_call(comm, &a, plan) < 0 ? UCCL_OK : UCCL_ERR_IO, UCCL_OK,
                  "a second call on the broken comm fails too");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (plan != NULL)
        mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "a rank gone: uccl_coll_plan_free");
    if (comm != NULL)
        uccl_comm_destroy(comm);
}

/* Buffers freed with uccl_mem_free and allocated again at the same
 * addresses: the next call registers them anew and builds a new plan
 * instead of reusing the cached, stale ones, and a persistent plan over
 * freed memory refuses to start with UCCL_ERR_STALE. The allocations are
 * above glibc's largest mmap threshold (32 MiB), so each is a mapping of
 * its own that free unmaps and the next allocation of the same size gets
 * back (under ASan the addresses differ: the counters still hold). Only
 * their first bytes are touched. */
#define FREED_ALLOC ((size_t)40 << 20)
static void freed_fill(uint8_t *b, size_t len, int rank, unsigned salt)
{
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(rank * 7 + (int)i * 13 + (int)salt);
}

static void freed_call(mt_ctx_t *c, uint8_t *sb, uint8_t *rb, size_t count, unsigned salt)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = sb, .recvbuf = rb,
                          .count = count, .field_mask = UCCL_COLL_ARG_ALGO,
                          .algo = UCCL_COLL_ALGO_DIRECT};
    long bad = 0;

    freed_fill(sb, count, c->rank, salt);
    memset(rb, 0, count * (size_t)c->size);
    mt_expect(c, uccl_coll(c->comm, &a), UCCL_OK, "allgather on uccl_mem_alloc buffers");
    for (int r = 0; r < c->size; r++)
        for (size_t i = 0; i < count; i++)
            bad += rb[(size_t)r * count + i] != (uint8_t)(r * 7 + (int)i * 13 + (int)salt);
    if (bad)
        mt_fail(c, "allgather on uccl_mem_alloc buffers: %ld bytes wrong", bad);
}

void ct_freed(mt_ctx_t *c)
{
    uccl_engine_t *e = uccl_comm_engine(c->comm);
    size_t count = 256, rlen = count * (size_t)c->size;
    void *sb = NULL, *rb = NULL, *sb2 = NULL, *rb2 = NULL;
    uccl_coll_stats_t s0, s1;
    uccl_coll_plan_t *plan = NULL;
    uccl_req_t *req = NULL;
    int same;

    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, FREED_ALLOC, &sb), UCCL_OK, "uccl_mem_alloc");
    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, FREED_ALLOC + rlen, &rb), UCCL_OK,
              "uccl_mem_alloc");
    if (c->failed)
        return;
    freed_call(c, sb, rb, count, 1);
    freed_call(c, sb, rb, count, 2); /* the cached plan */
    mt_expect(c, uccl_mem_free(e, sb), UCCL_OK, "uccl_mem_free");
    mt_expect(c, uccl_mem_free(e, rb), UCCL_OK, "uccl_mem_free");
    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, FREED_ALLOC, &sb2), UCCL_OK, "uccl_mem_alloc");
    mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, FREED_ALLOC + rlen, &rb2), UCCL_OK,
              "uccl_mem_alloc");
    if (c->failed)
        return;
    same = sb2 == sb && rb2 == rb;
    stats(c, c->comm, &s0);
    freed_call(c, sb2, rb2, count, 3);
    stats(c, c->comm, &s1);
    if (s1.buf_regs - s0.buf_regs != 2 || s1.plan_hits != s0.plan_hits)
        mt_fail(c, "buffers freed and allocated again%s: %llu registrations (want 2), %llu "
                "cached plans taken (want 0)", same ? " at the same addresses" : "",
                (unsigned long long)(s1.buf_regs - s0.buf_regs),
                (unsigned long long)(s1.plan_hits - s0.plan_hits));
    /* a persistent plan over memory freed since: refused on every rank */
    mt_expect(c, uccl_coll_init(c->comm, &(uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER,
                                                             .sendbuf = sb2, .recvbuf = rb2,
                                                             .count = count},
                                &plan),
              UCCL_OK, "uccl_coll_init");
    if (plan != NULL) {
        mt_expect(c, uccl_coll_start(plan, &req), UCCL_OK, "uccl_coll_start");
        if (req != NULL) {
            mt_expect(c, uccl_wait(req, -1), UCCL_OK, "persistent allgather");
            uccl_req_free(req);
            req = NULL;
        }
    }
    mt_expect(c, uccl_mem_free(e, rb2), UCCL_OK, "uccl_mem_free");
    if (plan != NULL) {
        mt_expect(c, uccl_coll_start(plan, &req), UCCL_ERR_STALE,
                  "start of a plan whose buffer was freed");
        if (req != NULL)
            uccl_req_free(req);
        mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "uccl_coll_plan_free");
    }
    mt_expect(c, uccl_mem_free(e, sb2), UCCL_OK, "uccl_mem_free");
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    if (c->rank == 0)
        printf("# freed: memory came back at the same addresses: %s\n", same ? "yes" : "no");
}

/* Large blocks on buffers of uccl_mem_alloc (over shm a rendezvous send
 * from such memory is copied by the receiver from its mapping of the
 * sender's memfd, not with CMA): alltoall and allgather by the table's
 * choice at 64 KiB and 1 MiB + 8 per block, compared byte for byte with
 * Open MPI's result on the same input; twice, the buffers freed and
 * allocated again in between (fd numbers reused: no stale mapping read). */
void ct_shared_large(mt_ctx_t *c)
{
    static const size_t counts[] = {65536, (1u << 20) + 8};
    static const uccl_coll_op_t ops[] = {UCCL_COLL_ALLTOALL, UCCL_COLL_ALLGATHER};
    uccl_engine_t *e = uccl_comm_engine(c->comm);
    size_t max = counts[1] * (size_t)c->size;
    uint8_t *ref = malloc(max);

    for (int round = 0; round < 2 && ref != NULL && !c->failed; round++) {
        uint8_t *sb = NULL, *rb = NULL;
        mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, max, (void **)&sb), UCCL_OK,
                  "uccl_mem_alloc");
        mt_expect(c, uccl_mem_alloc(e, UCCL_MEM_HOST, max, (void **)&rb), UCCL_OK,
                  "uccl_mem_alloc");
        for (int k = 0; k < 4 && !c->failed; k++) {
            size_t n = counts[k / 2];
            uccl_coll_args_t a = {.op = ops[k % 2], .sendbuf = sb, .recvbuf = rb, .count = n};
            for (size_t i = 0; i < max; i++)
                sb[i] = (uint8_t)(c->rank * 31 + (int)i * 7 + round * 3 + k);
            memset(rb, 0, max);
            mt_expect(c, uccl_coll(c->comm, &a), UCCL_OK, uccl_coll_op_name(a.op));
            if (a.op == UCCL_COLL_ALLTOALL)
                MPI_Alltoall(sb, (int)n, MPI_BYTE, ref, (int)n, MPI_BYTE, MPI_COMM_WORLD);
            else
                MPI_Allgather(sb, (int)n, MPI_BYTE, ref, (int)n, MPI_BYTE, MPI_COMM_WORLD);
            if (!c->failed && memcmp(rb, ref, n * (size_t)c->size) != 0)
                mt_fail(c, "%s of %zu bytes a block on uccl_mem_alloc buffers (round %d): "
                        "not Open MPI's result", uccl_coll_op_name(a.op), n, round);
        }
        mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
        if (sb != NULL)
            mt_expect(c, uccl_mem_free(e, sb), UCCL_OK, "uccl_mem_free");
        if (rb != NULL)
            mt_expect(c, uccl_mem_free(e, rb), UCCL_OK, "uccl_mem_free");
    }
    if (ref == NULL)
        mt_fail(c, "no memory");
    free(ref);
}

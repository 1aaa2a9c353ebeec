/* MAPPED's ring of buffers per writer (coll/mapped.c): many rooted calls
 * back to back with varying roots, sizes and ops, blocking and all in
 * flight at once, so that a root runs calls ahead of its readers and
 * every writer's ring wraps several times; scatters whose blocks cross
 * the bytes a writer prefetches of its next buffer; a few calls repeated
 * on the same buffers (plan-cache hits: the blocking ones take
 * uccl_coll_mapped_call) mixed with non-blocking ones in flight; and a
 * reader that leaves while the root is calls ahead of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_test.h"

#define RING_CALLS 80  /* > 4 rings of the deepest (16 buffers) */
#define RING_AHEAD 40  /* a root fails at most this many calls after its reader left */
#define RING_LEFT 20   /* calls the leaving reader makes */

/* Call i: op, block size and root, alike on every rank. Sizes cross the
 * 56 bytes of a small slot's line (each line has its own flag), two lines
 * (112) and the 336 of a small slot (larger blocks lie in the slot's own
 * region), and 70000 goes above a slot (built as LINEAR between mapped
 * calls). */
typedef void ring_gen_t(int i, int n, uccl_coll_op_t *op, size_t *count, int *root,
                        bool *in_place);

static void ring_call(int i, int n, uccl_coll_op_t *op, size_t *count, int *root, bool *in_place)
{
    static const size_t sizes[] = {0,   1,   8,    55,   56,    57,   112,
                                   113, 336, 337, 1000, 4096, 16384, 70000};
    const int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));
    static const uccl_coll_op_t ops[] = {UCCL_COLL_BCAST, UCCL_COLL_GATHER, UCCL_COLL_BCAST,
                                         UCCL_COLL_SCATTER, UCCL_COLL_BCAST,
                                         UCCL_COLL_ALLGATHER};

    *op = ops[i % 6];
    *count = sizes[(i * 5 + i / ns) % ns];
    if (*count == 70000 && i % 4 != 0)
        *count = 64; /* large blocks now and then only */
    *root = (i * 7 / 3) % n;
    *in_place = false;
}

/* Call i of a run of scatters: blocks from 1 KiB to 8 KiB across the 1 KiB
 * a reader and the 4 KiB a writer prefetch (coll/mapped_slot.h,
 * PF_READ_MAX and PF_WRITE_MAX), a line short, whole, a line's byte
 * over, in an order where each call's block differs from the one before
 * (a writer prefetches its next buffer with the length it just wrote); a
 * root keeps 20 calls (runs ahead and reuses its buffers), every third
 * call in place at the root (the own block stays in the send buffer). */
static void scatter_edge_call(int i, int n, uccl_coll_op_t *op, size_t *count, int *root,
                              bool *in_place)
{
    static const size_t sizes[] = {1023, 1024, 1025, 2047, 2048, 2049,
                                   4095, 4096, 4097, 8192, 64};
    const int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));

    *op = UCCL_COLL_SCATTER;
    *count = sizes[(i * 7) % ns];
    *root = (i / 20) % n;
    *in_place = i % 3 == 0;
}

static void ring_round(mt_ctx_t *c, const char *name, ring_gen_t *gen, bool nonblocking,
                       uint32_t seed)
{
    ct_case_t *k = calloc(RING_CALLS, sizeof(*k));
    uccl_req_t **req = calloc(RING_CALLS, sizeof(*req));
    char what[128];
    int bad = 0;

    if (k == NULL || req == NULL) {
        mt_fail(c, "out of memory");
        goto out;
    }
    for (int i = 0; i < RING_CALLS; i++) {
        uccl_coll_op_t op;
        size_t count;
        int root;
        bool in_place;
        gen(i, c->size, &op, &count, &root, &in_place);
        ct_prepare(c, &k[i], op, count, root, in_place, seed + (uint32_t)i);
        k[i].args.field_mask |= UCCL_COLL_ARG_ALGO;
        k[i].args.algo = UCCL_COLL_ALGO_MAPPED;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < RING_CALLS && !c->failed; i++) /* back to back: no MPI between */
        mt_expect(c, nonblocking ? uccl_coll_post(c->comm, &k[i].args, &req[i])
                                 : uccl_coll(c->comm, &k[i].args),
                  UCCL_OK, nonblocking ? "mapped ring: posting" : "mapped ring: a call");
    if (nonblocking && !c->failed)
        mt_expect(c, uccl_wait_all(req, RING_CALLS, 60000), UCCL_OK,
                  "mapped ring: every call in flight completes");
    for (int i = 0; i < RING_CALLS && !c->failed && bad == 0; i++) {
        snprintf(what, sizeof(what), "%s (%s), call %d: %s count %zu root %d%s", name,
                 nonblocking ? "all in flight" : "blocking", i, uccl_coll_op_name(k[i].args.op),
                 k[i].args.count, k[i].args.root,
                 k[i].args.recvbuf == UCCL_IN_PLACE || k[i].args.sendbuf == UCCL_IN_PLACE
                     ? " in place" : "");
        bad = ct_compare(c, &k[i], what);
    }
out:
    for (int i = 0; k != NULL && i < RING_CALLS; i++) {
        if (req[i] != NULL)
            uccl_req_free(req[i]);
        ct_free(&k[i]);
    }
    free(k);
    free(req);
}

/* Skips case `what` where MAPPED cannot run (one rank, or ranks that cannot
 * map each other's memory); true when skipped. */
static bool mapped_skip(mt_ctx_t *c, const char *what)
{
    if (c->size >= 2 && ct_mapped_usable(c, c->comm))
        return false;
    mt_skip(c, "%s (%s)", what, c->size < 2 ? "one rank" : "the ranks cannot map each other's memory");
    return true;
}

void ct_mapped_ring(mt_ctx_t *c)
{
    if (mapped_skip(c, "mapped ring"))
        return;
    double t0 = MPI_Wtime();
    ring_round(c, "mapped ring", ring_call, false, 4242);
    ring_round(c, "mapped ring", ring_call, true, 5353);
    if (c->rank == 0)
        printf("# mapped ring: %d rooted and allgather calls back to back, blocking and all in "
               "flight, byte-compared (%.0f ms with the references)\n", RING_CALLS,
               (MPI_Wtime() - t0) * 1e3);
}

void ct_mapped_scatter_edges(mt_ctx_t *c)
{
    if (mapped_skip(c, "mapped scatter edges"))
        return;
    ring_round(c, "mapped scatter edges", scatter_edge_call, false, 6464);
    ring_round(c, "mapped scatter edges", scatter_edge_call, true, 7575);
    if (c->rank == 0)
        printf("# mapped scatter edges: %d scatters of 1023 B-8 KiB back to back, blocking and "
               "all in flight, byte-compared\n", RING_CALLS);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Bcasts of rank 0 on a second comm; the last rank leaves (destroys the
 * comm) after RING_LEFT calls, while rank 0 is calls ahead. Every survivor
 * gets UCCL_ERR_PEER_FAILED or UCCL_ERR_TIMEOUT within RING_AHEAD calls and
 * UCCL_TIMEOUT_MS, every call before that delivered rank 0's bytes, and
 * the next call fails too. */
void ct_mapped_ring_dead(mt_ctx_t *c)
{
    const char *tm = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = tm ? atoi(tm) : 60000, usable = 0, leaver = c->size - 1, failed_at = -1;
    uccl_comm_t *comm = NULL;
    uint8_t buf[64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_BCAST,
                          .recvbuf = buf, .count = sizeof(buf), .root = 0,
                          .algo = UCCL_COLL_ALGO_MAPPED};
    struct timespec t0;
    uccl_status_t st = UCCL_OK;

    if (c->size < 2) {
        mt_skip(c, "mapped ring, a reader gone (one rank)");
        return;
    }
    mt_expect(c, uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm), UCCL_OK, "second comm");
    usable = comm != NULL && ct_mapped_usable(c, comm);
    MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!usable) {
        mt_skip(c, "mapped ring, a reader gone (the ranks cannot map each other)");
        goto out;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < RING_LEFT + RING_AHEAD; i++) {
        if (c->rank == leaver && i == RING_LEFT) {
            uccl_comm_destroy(comm);
            comm = NULL;
            break;
        }
        for (size_t b = 0; b < sizeof(buf); b++)
            buf[b] = c->rank == 0 ? (uint8_t)(i * 3 + (int)b) : 0xee;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if ((st = uccl_coll(comm, &a)) != UCCL_OK) {
            failed_at = i;
            break;
        }
        for (size_t b = 0; b < sizeof(buf); b++)
            if (buf[b] != (uint8_t)(i * 3 + (int)b)) {
                mt_fail(c, "mapped ring: bcast %d, byte %zu is 0x%02x", i, b, buf[b]);
                break;
            }
    }
    if (c->rank != leaver) {
        double ms = ms_since(&t0);
        if (failed_at < 0)
            mt_fail(c, "mapped ring: %d bcasts after rank %d left all succeeded", RING_AHEAD,
                    leaver);
        else if (st != UCCL_ERR_PEER_FAILED && st != UCCL_ERR_TIMEOUT)
            mt_expect(c, st, UCCL_ERR_PEER_FAILED, "mapped ring: bcast with a reader gone");
        else if (failed_at < RING_LEFT)
            mt_fail(c, "mapped ring: bcast %d failed before rank %d left", failed_at, leaver);
        if (ms > timeout_ms)
            mt_fail(c, "mapped ring: the failing call took %.0f ms (UCCL_TIMEOUT_MS %d)", ms,
                    timeout_ms);
        if (failed_at >= 0)
            mt_expect(c, uccl_coll(comm, &a) < 0 ? UCCL_OK : UCCL_ERR_IO, UCCL_OK,
                      "mapped ring: the next call on the broken comm fails too");
        if (c->rank == 0)
            printf("# mapped ring, a reader gone after %d calls: rank 0 failed at call %d "
                   "(%s, %.0f ms)\n", RING_LEFT, failed_at, uccl_strerror(st), ms);
    }
out:
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm != NULL)
        uccl_comm_destroy(comm);
}

/* ------------------------------------------------------------------ hits */

#define HIT_CASES 5
#define HIT_ROUNDS 60

/* Byte b of rank r's block in round t of case i (every rank computes any
 * rank's: no reference collective needed per call). */
static uint8_t hit_byte(int t, int i, int r, size_t b)
{
    return (uint8_t)(t * 131 + i * 37 + r * 71 + (int)(b * 13) + 1);
}

typedef struct {
    uccl_coll_args_t a;
    uint8_t *sb, *rb;
    size_t count;
    int root;
} hit_case_t;

static void hit_fill(const mt_ctx_t *c, hit_case_t *h, int t, int i)
{
    int n = c->size, r = c->rank;

    memset(h->rb, 0xee, h->count * (size_t)n);
    if (h->a.op == UCCL_COLL_BCAST) {
        for (size_t b = 0; r == h->root && b < h->count; b++)
            h->rb[b] = hit_byte(t, i, r, b);
    } else if (h->a.op == UCCL_COLL_SCATTER) { /* block j: for rank j */
        for (size_t b = 0; r == h->root && b < h->count * (size_t)n; b++)
            h->sb[b] = hit_byte(t, i, (int)(b / h->count), b % h->count);
    } else if (h->a.op == UCCL_COLL_ALLTOALL) { /* block j: from r for rank j */
        for (size_t b = 0; b < h->count * (size_t)n; b++)
            h->sb[b] = hit_byte(t, i, r + 16 * (int)(b / h->count), b % h->count);
    } else {
        for (size_t b = 0; b < h->count; b++)
            h->sb[b] = hit_byte(t, i, r, b);
    }
}

/* 0 when case i of round t left the right bytes, else 1 (reported). */
static int hit_check(mt_ctx_t *c, const hit_case_t *h, int t, int i)
{
    int n = c->size, r = c->rank;
    bool a2a = h->a.op == UCCL_COLL_ALLTOALL;
    bool all = a2a || h->a.op == UCCL_COLL_ALLGATHER || (h->a.op == UCCL_COLL_GATHER && r == h->root);
    size_t len = all ? h->count * (size_t)n : h->a.op == UCCL_COLL_GATHER ? 0 : h->count;

    for (size_t b = 0; b < len; b++) {
        int from = all ? (int)(b / h->count) : h->a.op == UCCL_COLL_BCAST ? h->root : r;
        uint8_t want = hit_byte(t, i, from + (a2a ? 16 * r : 0), b % h->count);
        if (h->rb[b] != want) {
            mt_fail(c, "mapped %s: round %d, %s of %zu B (root %d): byte %zu is 0x%02x, "
                    "not 0x%02x", i >= HIT_CASES ? "plans" : "hits", t,
                    uccl_coll_op_name(h->a.op), h->count, h->root, b,
                    h->rb[b], want);
            return 1;
        }
    }
    return 0;
}

/* A bcast whose readers expect 48 of the root's 64 bytes, three times on
 * the same buffer: UCCL_ERR_TRUNCATED each time on the readers, their 48
 * bytes delivered; the comm goes on. */
static void hit_truncated(mt_ctx_t *c)
{
    uint8_t buf[64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO | UCCL_COLL_ARG_ROOT,
                          .op = UCCL_COLL_BCAST, .recvbuf = buf, .root = 0,
                          .count = c->rank == 0 ? 64 : 48, .algo = UCCL_COLL_ALGO_MAPPED};

    for (int t = 0; t < 3 && !c->failed; t++) {
        for (size_t b = 0; b < sizeof(buf); b++)
            buf[b] = c->rank == 0 ? hit_byte(t, 9, 0, b) : 0xee;
        mt_expect(c, uccl_coll(c->comm, &a), c->rank == 0 ? UCCL_OK : UCCL_ERR_TRUNCATED,
                  "mapped hits: a bcast of 64 B where the readers expect 48, repeated");
        for (size_t b = 0; c->rank != 0 && b < sizeof(buf); b++)
            if (buf[b] != (b < 48 ? hit_byte(t, 9, 0, b) : 0xee)) {
                mt_fail(c, "mapped hits: truncated bcast %d, byte %zu is 0x%02x", t, b, buf[b]);
                break;
            }
    }
}

/* Case i of ct_mapped_hits: its buffers and arguments (false: no memory). */
static bool hit_setup(const mt_ctx_t *c, hit_case_t *h, int i)
{
    static const uccl_coll_op_t ops[HIT_CASES] = {UCCL_COLL_BCAST, UCCL_COLL_GATHER,
                                                  UCCL_COLL_SCATTER, UCCL_COLL_BCAST,
                                                  UCCL_COLL_ALLGATHER};
    static const size_t counts[HIT_CASES] = {8, 64, 337, 4096, 8};
    size_t n = (size_t)c->size;

    h->count = counts[i];
    h->root = (i * 3) % c->size;
    h->sb = malloc(counts[i] * n);
    h->rb = malloc(counts[i] * n);
    h->a = (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO | UCCL_COLL_ARG_ROOT,
                              .op = ops[i], .count = counts[i], .root = h->root,
                              .algo = UCCL_COLL_ALGO_MAPPED, .recvbuf = h->rb,
                              .sendbuf = ops[i] == UCCL_COLL_BCAST ? NULL : h->sb};
    return h->sb != NULL && h->rb != NULL;
}

/* Every case of ct_mapped_hits (false: out of memory, failed). */
static bool hits_setup(mt_ctx_t *c, hit_case_t h[HIT_CASES])
{
    for (int i = 0; i < HIT_CASES; i++)
        if (!hit_setup(c, &h[i], i)) {
            mt_fail(c, "out of memory");
            return false;
        }
    return true;
}

/* HIT_CASES calls (rooted ops of 8-4096 B, allgather of 8 B) repeated
 * HIT_ROUNDS times on the same buffers, new bytes every round, every
 * call checked: after the first round each is a plan-cache hit, which a
 * blocking call runs by uccl_coll_mapped_call. Every third round posts
 * every other case non-blocking first, the blocking ones run while those
 * are in flight, and all are waited for at the round's end. The comm's
 * counters: every call counted, every call after the first round a hit. */
void ct_mapped_hits(mt_ctx_t *c)
{
    hit_case_t h[HIT_CASES];
    uccl_req_t *req[HIT_CASES];
    uccl_coll_stats_t s0, s1;
    int calls = 0, bad = 0;

    memset(h, 0, sizeof(h));
    if (mapped_skip(c, "mapped hits"))
        return;
    if (!hits_setup(c, h))
        goto out;
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "uccl_comm_coll_stats");
    for (int t = 0; t < HIT_ROUNDS && !c->failed && bad == 0; t++) {
        bool mixed = t % 3 == 2;
        for (int i = 0; i < HIT_CASES; i++) {
            hit_fill(c, &h[i], t, i);
            req[i] = NULL;
        }
        for (int i = 0; i < HIT_CASES && !c->failed; i++, calls++)
            mt_expect(c, mixed && i % 2 == 0 ? uccl_coll_post(c->comm, &h[i].a, &req[i])
                                             : uccl_coll(c->comm, &h[i].a),
                      UCCL_OK, mixed && i % 2 == 0 ? "mapped hits: posting" : "mapped hits: a call");
        for (int i = 0; i < HIT_CASES; i++) {
            if (req[i] != NULL) {
                mt_expect(c, uccl_wait(req[i], 60000), UCCL_OK, "mapped hits: a call in flight");
                uccl_req_free(req[i]);
            }
        }
        for (int i = 0; i < HIT_CASES && !c->failed && bad == 0; i++)
            bad = hit_check(c, &h[i], t, i);
    }
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "uccl_comm_coll_stats");
    if (!c->failed && s1.calls - s0.calls != (uint64_t)calls)
        mt_fail(c, "mapped hits: %llu calls counted, %d made",
                (unsigned long long)(s1.calls - s0.calls), calls);
    if (!c->failed && s1.plan_hits - s0.plan_hits != (uint64_t)(calls - HIT_CASES))
        mt_fail(c, "mapped hits: %llu plan-cache hits, want %d",
                (unsigned long long)(s1.plan_hits - s0.plan_hits), calls - HIT_CASES);
    if (!c->failed)
        hit_truncated(c);
    if (c->rank == 0)
        printf("# mapped hits: %d calls of %d cases on the same buffers, a third of the rounds "
               "with non-blocking ones in flight, byte-checked; %llu plan-cache hits\n", calls,
               HIT_CASES, (unsigned long long)(s1.plan_hits - s0.plan_hits));
out:
    for (int i = 0; i < HIT_CASES; i++) {
        free(h[i].sb);
        free(h[i].rb);
    }
}

/* ------------------------------------------------------------------ plans */

#define PLAN_CASES 6
#define PLAN_ROUNDS 60

/* Plan k of ct_mapped_plans: case HIT_CASES + k of hit_byte's numbering. */
static bool plan_setup(mt_ctx_t *c, hit_case_t *h, int k, uccl_coll_plan_t **plan)
{
    static const uccl_coll_op_t ops[PLAN_CASES] = {UCCL_COLL_BCAST, UCCL_COLL_GATHER,
                                                   UCCL_COLL_SCATTER, UCCL_COLL_ALLGATHER,
                                                   UCCL_COLL_ALLTOALL, UCCL_COLL_BCAST};
    static const size_t counts[PLAN_CASES] = {8, 64, 337, 8, 8, 4096};
    size_t n = (size_t)c->size;

    h->count = counts[k];
    h->root = (k * 5 + 1) % c->size;
    h->sb = malloc(counts[k] * n);
    h->rb = malloc(counts[k] * n);
    if (h->sb == NULL || h->rb == NULL)
        return false;
    h->a = (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO | UCCL_COLL_ARG_ROOT,
                              .op = ops[k], .count = counts[k], .root = h->root,
                              .algo = UCCL_COLL_ALGO_MAPPED, .recvbuf = h->rb,
                              .sendbuf = ops[k] == UCCL_COLL_BCAST ? NULL : h->sb};
    mt_expect(c, uccl_coll_init(c->comm, &h->a, plan), UCCL_OK, "mapped plans: uccl_coll_init");
    return *plan != NULL;
}

/* The plans' requests of a round: uccl_test until done (odd k) or
 * uccl_wait_all (the rest); freed. */
static void plan_finish(mt_ctx_t *c, uccl_req_t **r, int n)
{
    for (int k = 1; k < n && !c->failed; k += 2) {
        uccl_status_t st;
        int done = 0;
        time_t t0 = time(NULL);
        while ((st = uccl_test(r[k], &done)) == UCCL_INPROGRESS && time(NULL) - t0 < 60)
            ;
        mt_expect(c, st, UCCL_OK, "mapped plans: uccl_test of a start");
        if (!done)
            mt_fail(c, "mapped plans: a start not done after 60 s of uccl_test");
    }
    mt_expect(c, uccl_wait_all(r, (size_t)n, 60000), UCCL_OK, "mapped plans: uccl_wait_all");
    for (int k = 0; k < n; k++) {
        if (r[k] != NULL)
            uccl_req_free(r[k]);
        r[k] = NULL;
    }
}

/* A persistent bcast of 64 B whose readers' plans expect 48, started
 * three times: each start OK, its request UCCL_ERR_TRUNCATED on the
 * readers, their 48 bytes delivered (a start that met the flags ready
 * still reports it from the request). */
static void plan_truncated(mt_ctx_t *c)
{
    uint8_t buf[64];
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ALGO | UCCL_COLL_ARG_ROOT,
                          .op = UCCL_COLL_BCAST, .recvbuf = buf, .root = c->size - 1,
                          .count = c->rank == c->size - 1 ? 64 : 48,
                          .algo = UCCL_COLL_ALGO_MAPPED};
    bool root = c->rank == c->size - 1;
    uccl_coll_plan_t *p = NULL;

    mt_expect(c, uccl_coll_init(c->comm, &a, &p), UCCL_OK, "mapped plans: init (truncated)");
    for (int t = 0; t < 3 && p != NULL; t++) { /* every rank every turn: the barriers */
        uccl_req_t *r = NULL;
        for (size_t b = 0; b < sizeof(buf); b++)
            buf[b] = root ? hit_byte(t, 19, c->rank, b) : 0xee;
        if (!root) /* the root's flags up first: the readers' start reads them */
            nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
        mt_expect(c, uccl_coll_start(p, &r), UCCL_OK, "mapped plans: start (truncated)");
        mt_expect(c, r != NULL ? uccl_wait(r, 60000) : UCCL_ERR_IO,
                  root ? UCCL_OK : UCCL_ERR_TRUNCATED,
                  "mapped plans: a bcast of 64 B where the readers expect 48, started again");
        if (r != NULL)
            uccl_req_free(r);
        for (size_t b = 0; !root && b < sizeof(buf); b++)
            if (buf[b] != (b < 48 ? hit_byte(t, 19, c->size - 1, b) : 0xee)) {
                mt_fail(c, "mapped plans: truncated bcast %d, byte %zu is 0x%02x", t, b, buf[b]);
                break;
            }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (p != NULL)
        mt_expect(c, uccl_coll_plan_free(p), UCCL_OK, "mapped plans: free (truncated)");
}

/* Round t of ct_mapped_plans (mode t % 3, see there); 0 when every
 * call's bytes are right, else 1 (reported). */
static int plan_round(mt_ctx_t *c, hit_case_t *h, hit_case_t *p, uccl_coll_plan_t **plan, int t,
                      int *calls)
{
    uccl_req_t *req[HIT_CASES], *r[PLAN_CASES] = {NULL};
    int mode = t % 3, bad = 0;

    for (int i = 0; i < HIT_CASES; i++) {
        hit_fill(c, &h[i], t, i);
        req[i] = NULL;
    }
    for (int k = 0; k < PLAN_CASES; k++)
        hit_fill(c, &p[k], t, HIT_CASES + k);
    for (int i = 0; mode == 2 && i < HIT_CASES && !c->failed; i++, (*calls)++)
        mt_expect(c, uccl_coll_post(c->comm, &h[i].a, &req[i]), UCCL_OK,
                  "mapped plans: posting a plain call");
    for (int k = 0; k < PLAN_CASES && !c->failed; k++, (*calls)++) {
        mt_expect(c, uccl_coll_start(plan[k], &r[k]), UCCL_OK, "mapped plans: a start");
        if (k == 0) {
            uccl_req_t *extra = NULL;
            mt_expect(c, uccl_coll_start(plan[0], &extra), UCCL_ERR_BUSY,
                      "mapped plans: a second start while in flight");
            mt_expect(c, uccl_coll_plan_free(plan[0]), UCCL_ERR_BUSY,
                      "mapped plans: free while in flight");
        }
        if (mode == 0)
            plan_finish(c, &r[k], 1);
    }
    for (int i = 0; mode == 1 && i < HIT_CASES && !c->failed; i++, (*calls)++)
        mt_expect(c, uccl_coll(c->comm, &h[i].a), UCCL_OK, "mapped plans: a plain call");
    if (mode != 0)
        plan_finish(c, r, PLAN_CASES);
    for (int i = 0; i < HIT_CASES; i++)
        if (req[i] != NULL) {
            mt_expect(c, uccl_wait(req[i], 60000), UCCL_OK, "mapped plans: a posted call");
            uccl_req_free(req[i]);
        }
    for (int k = 0; k < PLAN_CASES && !c->failed && bad == 0; k++)
        bad = hit_check(c, &p[k], t, HIT_CASES + k);
    for (int i = 0; mode != 0 && i < HIT_CASES && !c->failed && bad == 0; i++)
        bad = hit_check(c, &h[i], t, i);
    return bad;
}

/* PLAN_CASES persistent MAPPED plans (rooted ops 8 B-4 KiB, allgather and
 * alltoall of 8 B) started PLAN_ROUNDS times, new bytes every round, every
 * start byte-checked: by turns each started and waited for at once; all
 * started, then blocking plain calls (ct_mapped_hits' cases, on their own
 * buffers) while they are in flight; the plain ones posted non-blocking,
 * then all plans started. Each round, a second start of the first plan and
 * its free while in flight: UCCL_ERR_BUSY. The comm counts every call. */
void ct_mapped_plans(mt_ctx_t *c)
{
    hit_case_t h[HIT_CASES], p[PLAN_CASES];
    uccl_coll_plan_t *plan[PLAN_CASES] = {NULL};
    uccl_coll_stats_t s0, s1;
    int calls = 0, bad = 0;

    memset(h, 0, sizeof(h));
    memset(p, 0, sizeof(p));
    if (mapped_skip(c, "mapped plans"))
        return;
    if (!hits_setup(c, h))
        goto out;
    for (int k = 0; k < PLAN_CASES; k++)
        if (!plan_setup(c, &p[k], k, &plan[k]))
            goto out;
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "uccl_comm_coll_flush");
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "uccl_comm_coll_stats");
    for (int t = 0; t < PLAN_ROUNDS && !c->failed && bad == 0; t++)
        bad = plan_round(c, h, p, plan, t, &calls);
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "uccl_comm_coll_stats");
    if (!c->failed && s1.calls - s0.calls != (uint64_t)calls)
        mt_fail(c, "mapped plans: %llu calls counted, %d made",
                (unsigned long long)(s1.calls - s0.calls), calls);
    if (!c->failed)
        plan_truncated(c);
    if (c->rank == 0)
        printf("# mapped plans: %d calls (%d plans started %d times, plain calls blocking and "
               "non-blocking between), byte-checked\n", calls, PLAN_CASES, PLAN_ROUNDS);
out:
    for (int k = 0; k < PLAN_CASES; k++)
        if (plan[k] != NULL)
            mt_expect(c, uccl_coll_plan_free(plan[k]), UCCL_OK, "mapped plans: uccl_coll_plan_free");
    for (int i = 0; i < HIT_CASES; i++) {
        free(h[i].sb);
        free(h[i].rb);
    }
    for (int k = 0; k < PLAN_CASES; k++) {
        free(p[k].sb);
        free(p[k].rb);
    }
}

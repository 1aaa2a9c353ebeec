/* Soak (issue 20): randomly mixed operations over shm and tcp with every
 * byte verified: send/recv both ways (tags reused, receives larger than the
 * message at times), write, read and writev; sizes 0 B to 16 MiB skewed to
 * small; a varying number in flight. 0 mismatches, every status OK, and the
 * process holds as many file descriptors at the end as after setup.
 * Operations in all: SOAK_OPS (default 3 x 10^5 in the ASan build, where CI
 * runs it for about two minutes, 2 x 10^4 in the others), split over the
 * transports; SOAK_SEED picks the sequence (printed). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/unit.h"
#include "../unit/unit_conn.h"

#define ARENA (64u << 20)
#define MAX_OP (16u << 20)
#define MAX_FLIGHT 16

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_OPS 300000
#else
#define DEFAULT_OPS 20000
#endif

enum { K_SEND_AB, K_SEND_BA, K_WRITE, K_READ, K_WRITEV, NKINDS };
static const char *const kind_names[NKINDS] = {"send a->b", "send b->a", "write", "read", "writev"};

static long ops_per_suite;
static unsigned seed0;

typedef struct arena {
    uint8_t *p;
    uccl_mr_t *mr;
    size_t used;
} arena_t;

/* One operation in flight: where its bytes come from and must land. */
typedef struct op {
    int kind;
    uccl_req_t *req[2]; /* send + recv, or the one-sided request */
    uint8_t *dst;
    size_t len;
    uint64_t seed;
} op_t;

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Sizes: 3% zero, ~87% up to 64 KiB, ~9% to 1 MiB, ~1% to 16 MiB. */
static size_t pick_size(void)
{
    unsigned r = (unsigned)(rng() % 1000);
    unsigned lo, hi;

    if (r < 30)
        return 0;
    if (r < 900)
        lo = 0, hi = 16;
    else if (r < 990)
        lo = 16, hi = 20;
    else
        lo = 20, hi = 24;
    {
        unsigned e = lo + (unsigned)(rng() % (hi - lo + 1));
        size_t n = ((size_t)1 << e) + (size_t)(rng() % ((size_t)1 << e));
        return n > MAX_OP ? MAX_OP : n;
    }
}

static uint8_t byte_at(uint64_t seed, size_t i)
{
    uint64_t w = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(w >> (8 * (i & 7)));
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ull;
        memcpy(p + i, &w, 8);
    }
    for (; i < len; i++)
        p[i] = byte_at(seed, i);
}

static size_t mismatches(const uint8_t *p, size_t len, uint64_t seed)
{
    size_t bad = 0, i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w = (seed + (i >> 3)) * 0x9e3779b97f4a7c15ull, got;
        memcpy(&got, p + i, 8);
        if (got != w)
            for (int k = 0; k < 8; k++)
                bad += p[i + (size_t)k] != byte_at(seed, i + (size_t)k);
    }
    for (; i < len; i++)
        bad += p[i] != byte_at(seed, i);
    return bad;
}

/* Room for len bytes (64-byte aligned starts) in an arena; NULL = drain first. */
static uint8_t *take(arena_t *a, size_t len)
{
    size_t at = (a->used + 63) & ~(size_t)63;

    if (at + len > ARENA)
        return NULL;
    a->used = at + len;
    return a->p + at;
}

typedef struct soak {
    unit_pair_t p;
    arena_t as, ad, bs, bd; /* a's source and destination, b's */
    uccl_rdesc_t bs_desc, bd_desc;
    op_t flight[MAX_FLIGHT];
    int n;
    size_t bad, failed, bytes, per_kind[NKINDS];
} soak_t;

static size_t off_in(const arena_t *a, const uint8_t *p) { return (size_t)(p - a->p); }

/* Finish everything in flight; check statuses and bytes. */
static void drain(soak_t *s)
{
    uccl_req_t *reqs[2 * MAX_FLIGHT];
    int n = 0;

    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < 2; k++)
            if (s->flight[i].req[k] != NULL)
                reqs[n++] = s->flight[i].req[k];
    if (unit_drive(&s->p, reqs, (size_t)n, 4 * UNIT_TIMEOUT_MS) != UCCL_OK) {
        s->failed++;
        fprintf(stderr, "soak: %d requests did not finish in time\n", n);
    }
    for (int i = 0; i < s->n; i++) {
        op_t *o = &s->flight[i];
        for (int k = 0; k < 2; k++) {
            size_t got = 0;
            uccl_status_t st;
            if (o->req[k] == NULL)
                continue;
            st = uccl_wait(o->req[k], 0);
            if (st != UCCL_OK) {
                s->failed++;
                fprintf(stderr, "soak: %s of %zu bytes: %s\n", kind_names[o->kind], o->len,
                        uccl_status_name(st));
            } else if (k == 1 && uccl_req_bytes(o->req[k], &got) == UCCL_OK && got != o->len) {
                s->failed++;
                fprintf(stderr, "soak: receive of %zu bytes reports %zu\n", o->len, got);
            }
            uccl_req_free(o->req[k]);
        }
        {
            size_t bad = mismatches(o->dst, o->len, o->seed);
            if (bad != 0)
                fprintf(stderr, "soak: %s of %zu bytes: %zu bytes differ\n", kind_names[o->kind],
                        o->len, bad);
            s->bad += bad;
        }
    }
    s->n = 0;
    s->as.used = s->ad.used = s->bs.used = s->bd.used = 0;
}

/* Post one operation; false = no room in the arenas (drain, then retry). */
static bool post(soak_t *s, int kind, size_t len, uint64_t tag, uint64_t seed)
{
    op_t *o = &s->flight[s->n];
    arena_t *src_a = kind == K_SEND_BA || kind == K_READ ? &s->bs : &s->as;
    arena_t *dst_a = kind == K_SEND_BA || kind == K_READ ? &s->ad : &s->bd;
    size_t slack = (kind == K_SEND_AB || kind == K_SEND_BA) ? (size_t)(rng() % 3) * 32 : 0;
    uint8_t *src = take(src_a, len), *dst = src ? take(dst_a, len + slack) : NULL;
    uccl_status_t st1 = UCCL_OK, st2 = UCCL_OK;

    if (src == NULL || dst == NULL)
        return false;
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->dst = dst;
    o->len = len;
    o->seed = seed;
    fill(src, len, seed);
    memset(dst, 0xee, len + slack);
    switch (kind) {
    case K_SEND_AB:
    case K_SEND_BA: {
        uccl_conn_t *tx = kind == K_SEND_AB ? s->p.ab : s->p.ba, *rx = kind == K_SEND_AB ? s->p.ba : s->p.ab;
        st1 = uccl_recv(rx, dst_a->mr, off_in(dst_a, dst), len + slack, tag, &o->req[1]);
        st2 = uccl_send(tx, src_a->mr, off_in(src_a, src), len, tag, &o->req[0]);
        break;
    }
    case K_WRITE:
        st1 = uccl_write(s->p.ab, s->as.mr, off_in(&s->as, src), len, &s->bd_desc,
                         off_in(&s->bd, dst), &o->req[0]);
        break;
    case K_READ:
        st1 = uccl_read(s->p.ab, s->ad.mr, off_in(&s->ad, dst), len, &s->bs_desc,
                        off_in(&s->bs, src), &o->req[0]);
        break;
    default: { /* writev: up to 8 pieces of the source, gaps between them */
        uccl_iov_t iov[8];
        int cnt = 1 + (int)(rng() % 8), used = 0;
        size_t done = 0;
        /* the pieces must be the message in order: gather from src itself */
        for (int i = 0; i < cnt && done < len; i++) {
            size_t piece = i == cnt - 1 ? len - done : (len - done) / (size_t)(cnt - i);
            iov[used++] = (uccl_iov_t){s->as.mr, off_in(&s->as, src) + done, piece};
            done += piece;
        }
        if (used == 0)
            iov[used++] = (uccl_iov_t){s->as.mr, off_in(&s->as, src), 0};
        st1 = uccl_writev(s->p.ab, iov, used, &s->bd_desc, off_in(&s->bd, dst), &o->req[0]);
        break;
    }
    }
    if (st1 != UCCL_OK || st2 != UCCL_OK) {
        fprintf(stderr, "soak: posting %s of %zu bytes: %s / %s\n", kind_names[kind], len,
                uccl_status_name(st1), uccl_status_name(st2));
        s->failed++;
    }
    s->n++;
    s->per_kind[kind]++;
    s->bytes += len;
    return true;
}

static uccl_status_t arena_open(uccl_engine_t *e, arena_t *a)
{
    a->p = malloc(ARENA);
    a->used = 0;
    return a->p ? uccl_mr_reg(e, a->p, ARENA, 0, &a->mr) : UCCL_ERR_NO_MEMORY;
}

static void test_soak(void)
{
    soak_t *s = calloc(1, sizeof(*s));
    int depth = 1, fds0;
    uint64_t t0 = unit_now_ms();

    rng_state = ((uint64_t)seed0 << 1 | 1) * 0x2545f4914f6cdd1dull + (unit_tp[0] == 't');
    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &s->p), UCCL_OK);
    if (s->p.a == NULL) {
        free(s);
        return;
    }
    UNIT_ASSERT_STATUS(arena_open(s->p.a, &s->as), UCCL_OK);
    UNIT_ASSERT_STATUS(arena_open(s->p.a, &s->ad), UCCL_OK);
    UNIT_ASSERT_STATUS(arena_open(s->p.b, &s->bs), UCCL_OK);
    UNIT_ASSERT_STATUS(arena_open(s->p.b, &s->bd), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(s->bs.mr, 0, ARENA, &s->bs_desc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(s->bd.mr, 0, ARENA, &s->bd_desc), UCCL_OK);
    /* one of each first: every stream of the connection is up (tcp's
     * acceptor takes its streams in while progressing) before fds count */
    for (int k = 0; k < NKINDS; k++)
        post(s, k, 4096, 0, rng());
    drain(s);
    fds0 = unit_fd_count();
    for (long i = 0; i < ops_per_suite; i++) {
        int kind = (int)(rng() % NKINDS);
        size_t len = pick_size();
        uint64_t tag = rng() % 4; /* few tags: reused while in flight */

        if (i % 97 == 0)
            depth = 1 + (int)(rng() % MAX_FLIGHT);
        if (s->n >= depth)
            drain(s);
        if (!post(s, kind, len, tag, rng())) {
            drain(s);
            CU_ASSERT_FATAL(post(s, kind, len, tag, rng()));
        }
    }
    drain(s);
    CU_ASSERT_EQUAL(s->bad, 0);
    CU_ASSERT_EQUAL(s->failed, 0);
    CU_ASSERT_EQUAL(unit_fd_count(), fds0);
    printf("\n# soak over %s: %ld operations (", unit_tp, ops_per_suite);
    for (int k = 0; k < NKINDS; k++)
        printf("%s%s %zu", k ? ", " : "", kind_names[k], s->per_kind[k]);
    printf("), %.1f GiB, %.1f s, %zu bytes wrong, %zu failed, fds %d -> %d\n",
           (double)s->bytes / (1 << 30), (double)(unit_now_ms() - t0) / 1000, s->bad, s->failed,
           fds0, unit_fd_count());
    uccl_mr_dereg(s->as.mr);
    uccl_mr_dereg(s->ad.mr);
    uccl_mr_dereg(s->bs.mr);
    uccl_mr_dereg(s->bd.mr);
    unit_pair_close(&s->p);
    free(s->as.p);
    free(s->ad.p);
    free(s->bs.p);
    free(s->bd.p);
    free(s);
}

static CU_TestInfo cases[] = {
    {"random mixed operations, bytes verified", test_soak},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    const char *n = getenv("SOAK_OPS"), *sd = getenv("SOAK_SEED");

    ops_per_suite = (n ? atol(n) : DEFAULT_OPS) / 2;
    seed0 = sd ? (unsigned)atoi(sd) : (unsigned)unit_now_ms();
    printf("# SOAK_OPS=%ld SOAK_SEED=%u\n", 2 * ops_per_suite, seed0);
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_tp("soak", cases, NULL, NULL);
}

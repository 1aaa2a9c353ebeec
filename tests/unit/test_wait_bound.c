/* A wait keeps its deadline during a large copy (issue 20): one progress
 * call does a bounded share of the work (shm: UCCL_SHM_PROGRESS_BYTES of
 * CMA copies, in calls of UCCL_SHM_CMA_CHUNK; tcp: UCCL_TCP_PROGRESS_BYTES),
 * so uccl_wait(req, short) returns UCCL_ERR_TIMEOUT soon after its deadline
 * and no single progress call runs long. Tiny CMA calls (64 bytes) make a
 * whole copy take far longer than either bound. Received bytes are compared. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unit.h"
#include "unit_conn.h"

#define BIG (32u << 20)
#define SHORT_WAIT_MS 20
/* Allowed past a deadline (wall clock, generous: CI boxes are loaded), and
 * for one progress call (CPU time of this thread, kernel copies included,
 * so that preemption does not count). A whole copy in CMA calls of 64 bytes
 * takes several times either. */
#define OVERSHOOT_MS 300
#define PROGRESS_CPU_MS 50

static uint64_t cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Progress e once; the longest such call so far (CPU us) in *max_us. */
static void progress_timed(uccl_engine_t *e, uint64_t *max_us)
{
    uint64_t t0 = cpu_us(), dt;

    uccl_engine_progress(e);
    dt = cpu_us() - t0;
    *max_us = dt > *max_us ? dt : *max_us;
}

typedef enum { OP_SENDRECV, OP_WRITE, OP_READ } op_t;

/* Progress both engines until req is done. */
static uccl_status_t drive(unit_pair_t *p, uccl_req_t *req, uint64_t *max_us)
{
    uint64_t deadline = unit_now_ms() + 60000;
    int done = 0;

    while (!done && unit_now_ms() < deadline) {
        progress_timed(p->b, max_us);
        progress_timed(p->a, max_us);
        uccl_test(req, &done);
    }
    return done ? uccl_wait(req, 0) : UCCL_ERR_TIMEOUT;
}

/* a and b move BIG bytes: b receives (send/recv), b is the write's target
 * (it pulls), or b is the read's target (it pushes). */
static void run(op_t op, bool split)
{
    unit_pair_t p = {0};
    uint8_t *src = malloc(BIG), *dst = calloc(1, BIG);
    uccl_mr_t *ms = NULL, *md = NULL;
    uccl_req_t *req = NULL, *other = NULL;
    uccl_rdesc_t desc;
    uint64_t t0, waited, max_us = 0;
    uccl_status_t st;

    CU_ASSERT_FATAL(src != NULL && dst != NULL);
    for (size_t i = 0; i < BIG; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    setenv("UCCL_SHM_SPLIT_MIN", split ? "1M" : "0", 1);
    st = unit_pair_open(unit_tp, &p);
    if (st == UCCL_ERR_UNSUPPORTED && strcmp(unit_tp, "shm") == 0) {
        printf(" SKIP: CMA not permitted here (UCCL_SHM_CMA=on refused) ");
        goto out;
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    if (st != UCCL_OK)
        goto out;
    /* the copying side, b, holds the destination, except for a read */
    UNIT_ASSERT_STATUS(uccl_mr_reg(op == OP_READ ? p.b : p.a, src, BIG, 0, &ms), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(op == OP_READ ? p.a : p.b, dst, BIG, 0, &md), UCCL_OK);
    if (op == OP_SENDRECV) {
        UNIT_ASSERT_STATUS(uccl_send(p.ab, ms, 0, BIG, 5, &other), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_recv(p.ba, md, 0, BIG, 5, &req), UCCL_OK);
    } else if (op == OP_WRITE) {
        UNIT_ASSERT_STATUS(uccl_mr_pack(md, 0, BIG, &desc), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_write(p.ab, ms, 0, BIG, &desc, 0, &req), UCCL_OK);
    } else {
        UNIT_ASSERT_STATUS(uccl_mr_pack(ms, 0, BIG, &desc), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_read(p.ab, md, 0, BIG, &desc, 0, &req), UCCL_OK);
    }
    if (req == NULL)
        goto out;
    /* the receive's wait progresses b, which copies; a write's or read's
     * wait progresses a: let b start the copy first */
    for (int i = 0; op != OP_SENDRECV && i < 2; i++)
        progress_timed(p.b, &max_us);
    t0 = unit_now_ms();
    st = uccl_wait(req, SHORT_WAIT_MS);
    waited = unit_now_ms() - t0;
    UNIT_ASSERT_STATUS(st, UCCL_ERR_TIMEOUT);
    CU_ASSERT(waited < SHORT_WAIT_MS + OVERSHOOT_MS);
    UNIT_ASSERT_STATUS(drive(&p, req, &max_us), UCCL_OK);
    CU_ASSERT(max_us < PROGRESS_CPU_MS * 1000);
    printf(" [wait(%d ms) took %llu ms, longest progress %.1f ms CPU] ", SHORT_WAIT_MS,
           (unsigned long long)waited, (double)max_us / 1000.0);
    CU_ASSERT_EQUAL(memcmp(src, dst, BIG), 0);
    if (other != NULL)
        UNIT_ASSERT_STATUS(uccl_wait(other, UNIT_TIMEOUT_MS), UCCL_OK);
out:
    if (other != NULL)
        uccl_req_free(other);
    if (req != NULL)
        uccl_req_free(req);
    unit_pair_close(&p);
    free(src);
    free(dst);
}

#define POLL_TRIES 21

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A wait of UCCL_DEADLINE_COARSE_MS (100) or more keeps its deadline on the
 * coarse clock (a memory read, where the precise one may be a system call),
 * a shorter one on the precise clock: neither ends before its time has
 * passed by the precise clock, nor long after. uccl_wait, uccl_wait_all and
 * uccl_notif_wait on a receive nobody sends to and a notification that
 * never comes, 3 times each at 1-8 ms and twice at 120 ms; timeout 0 polls
 * once. */
static void test_short_waits(void)
{
    static const int waits_ms[] = {1, 2, 3, 5, 8, 120};
    unit_pair_t p = {0};
    uint8_t buf[64], msg[64];
    uccl_mr_t *mr = NULL, *smr = NULL;
    uccl_req_t *req = NULL, *sreq = NULL;
    uint64_t value = 0, t0, took, worst_early = 0, worst_late = 0, polls[2][POLL_TRIES];

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, buf, sizeof(buf), 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(p.ba, mr, 0, sizeof(buf), 77, &req), UCCL_OK);
    for (int rep = 0; req != NULL && rep < 3; rep++) {
        for (size_t i = 0; i < sizeof(waits_ms) / sizeof(waits_ms[0]); i++) {
            uint64_t want = (uint64_t)waits_ms[i] * 1000000u;

            if (waits_ms[i] >= 100 && rep == 2)
                continue;

            for (int how = 0; how < 3; how++) {
                t0 = unit_now_ns();
                if (how == 0)
                    UNIT_ASSERT_STATUS(uccl_wait(req, waits_ms[i]), UCCL_ERR_TIMEOUT);
                else if (how == 1)
                    UNIT_ASSERT_STATUS(uccl_wait_all(&req, 1, waits_ms[i]), UCCL_ERR_TIMEOUT);
                else
                    UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &value, waits_ms[i]),
                                       UCCL_ERR_TIMEOUT);
                took = unit_now_ns() - t0;
                CU_ASSERT(took >= want);
                CU_ASSERT(took < want + (uint64_t)OVERSHOOT_MS * 1000000u);
                if (took < want && want - took > worst_early)
                    worst_early = want - took;
                if (took > want && took - want > worst_late)
                    worst_late = took - want;
            }
        }
    }
    /* timeout 0: one poll, not until a clock tick or the millisecond's end
     * (0-1 ms, 0.5 in the median); the median of 21 tries of each, so that
     * a try preempted on a loaded machine does not count */
    for (int i = 0; req != NULL && i < POLL_TRIES; i++) {
        t0 = unit_now_ns();
        UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_ERR_TIMEOUT);
        polls[0][i] = unit_now_ns() - t0;
        t0 = unit_now_ns();
        UNIT_ASSERT_STATUS(uccl_notif_wait(p.ba, &value, 0), UCCL_ERR_TIMEOUT);
        polls[1][i] = unit_now_ns() - t0;
    }
    for (int k = 0; req != NULL && k < 2; k++) {
        qsort(polls[k], POLL_TRIES, sizeof(polls[k][0]), cmp_u64);
        CU_ASSERT(polls[k][POLL_TRIES / 2] < 250000u);
    }
    printf(" [earliest %.3f ms early, latest %.3f ms late] ", (double)worst_early / 1e6,
           (double)worst_late / 1e6);
    /* the receive, timed out 55 times, still completes with its bytes */
    memset(msg, 0x5a, sizeof(msg));
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, msg, sizeof(msg), 0, &smr), UCCL_OK);
    if (smr != NULL && uccl_send(p.ab, smr, 0, sizeof(msg), 77, &sreq) == UCCL_OK) {
        uccl_req_t *both[2] = {sreq, req};
        UNIT_ASSERT_STATUS(unit_drive(&p, both, 2, UNIT_TIMEOUT_MS), UCCL_OK);
        CU_ASSERT_EQUAL(memcmp(buf, msg, sizeof(msg)), 0);
        uccl_req_free(sreq);
    }
    if (req != NULL)
        uccl_req_free(req);
    if (smr != NULL)
        uccl_mr_dereg(smr);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    unit_pair_close(&p);
}

static void test_recv(void) { run(OP_SENDRECV, false); }
static void test_recv_split(void) { run(OP_SENDRECV, true); }
static void test_write(void) { run(OP_WRITE, false); }
static void test_write_split(void) { run(OP_WRITE, true); }
static void test_read(void) { run(OP_READ, false); }

static CU_TestInfo tests[] = {
    {"32 MiB receive", test_recv},
    {"32 MiB receive, split copy", test_recv_split},
    {"32 MiB write, target copies", test_write},
    {"32 MiB write, split copy", test_write_split},
    {"32 MiB read, target copies", test_read},
    {"short waits: never early, not long after", test_short_waits},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "60000", 1);
    setenv("UCCL_SHM_CMA", "on", 1);
    setenv("UCCL_SHM_CMA_CHUNK", "64", 1);
    setenv("UCCL_TCP_PROGRESS_BYTES", "256K", 1);
    return unit_main_tp("wait_bound", tests, NULL, NULL);
}

/* shm-only cases (the shared scenarios are in test_tp_conformance.c): sizes
 * around the split threshold (UCCL_SHM_SPLIT_MIN, 1 MiB here), where the
 * receiver stops copying a message alone and both sides copy halves at once,
 * and many such split messages in flight at once both ways. And the close
 * fence's test of a peer that can no longer copy: a zombie counts as gone.
 * Suite tp_shm_pairs, each case on a pair of its own settings: engines whose
 * CMA settings differ (one side UCCL_SHM_CMA=0), and a target region
 * deregistered (or its memory freed) while a peer's write or read of it is
 * copied outside the target's checks (the peer's part of a split, the CMA
 * helper's piece). */
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "util/sys.h"
#include "unit_conn.h"

static unit_pair_t P;

static int suite_init(void)
{
    setenv("UCCL_SHM_SPLIT_MIN", "1M", 1);
    return unit_pair_open("shm", &P) == UCCL_OK ? 0 : -1;
}

static int suite_cleanup(void)
{
    unit_pair_close(&P);
    unsetenv("UCCL_SHM_SPLIT_MIN");
    return 0;
}

/* Both ways, each size posted first and unexpected, bytes compared. */
static void test_split_sizes(void)
{
    static const size_t sizes[] = {(1u << 20) - 1, 1u << 20, (1u << 20) + 1, (1u << 20) + 65,
                                   (3u << 20) + 7};
    const size_t cap = (3u << 20) + 64;
    uint8_t *buf[2] = {malloc(cap), malloc(cap)}, *rbuf[2] = {malloc(cap), malloc(cap)};
    uccl_mr_t *smr[2], *rmr[2];
    uccl_conn_t *conn[2] = {P.ab, P.ba};
    uccl_engine_t *engine[2] = {P.a, P.b};

    for (int side = 0; side < 2; side++) {
        CU_ASSERT_FATAL(buf[side] != NULL && rbuf[side] != NULL);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], buf[side], cap, 0, &smr[side]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], rbuf[side], cap, 0, &rmr[side]), UCCL_OK);
        for (size_t i = 0; i < cap; i++)
            buf[side][i] = unit_pattern(i, (unsigned)side + 3);
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int order = 0; order < 4; order++) {
            int from = order % 2, to = 1 - from, recv_first = order / 2;
            uccl_req_t *reqs[2] = {NULL, NULL};
            size_t got = 0, bad = 0;

            memset(rbuf[to], 0, cap);
            if (recv_first)
                UNIT_ASSERT_STATUS(uccl_recv(conn[to], rmr[to], 0, cap, 200 + k, &reqs[1]), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_send(conn[from], smr[from], 0, sizes[k], 200 + k, &reqs[0]), UCCL_OK);
            if (!recv_first)
                UNIT_ASSERT_STATUS(uccl_recv(conn[to], rmr[to], 0, cap, 200 + k, &reqs[1]), UCCL_OK);
            UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2, 30000), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_wait(reqs[1], 0), UCCL_OK);
            uccl_req_bytes(reqs[1], &got);
            CU_ASSERT_EQUAL(got, sizes[k]);
            for (size_t i = 0; i < sizes[k]; i++)
                bad += rbuf[to][i] != unit_pattern(i, (unsigned)from + 3);
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_EQUAL(rbuf[to][sizes[k]], 0);
            uccl_req_free(reqs[0]);
            uccl_req_free(reqs[1]);
        }
    }
    for (int side = 0; side < 2; side++) {
        uccl_mr_dereg(smr[side]);
        uccl_mr_dereg(rmr[side]);
        free(buf[side]);
        free(rbuf[side]);
    }
}

/* DEPTH split messages each way, every receive and send posted before either
 * engine progresses, so that many splits wait for their DONE at once; each
 * message lands whole in its own slot. */
#define DEPTH 12
#define SLOT ((1u << 20) + 4096)
#define MSG_LEN(i) ((1u << 20) + 64 * (size_t)(i) + 1)

static void test_split_depth(void)
{
    const size_t cap = (size_t)DEPTH * SLOT;
    uint8_t *buf[2] = {malloc(cap), malloc(cap)}, *rbuf[2] = {calloc(1, cap), calloc(1, cap)};
    uccl_mr_t *smr[2], *rmr[2];
    uccl_conn_t *conn[2] = {P.ab, P.ba};
    uccl_engine_t *engine[2] = {P.a, P.b};
    uccl_req_t *reqs[4 * DEPTH] = {NULL};

    for (int side = 0; side < 2; side++) {
        CU_ASSERT_FATAL(buf[side] != NULL && rbuf[side] != NULL);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], buf[side], cap, 0, &smr[side]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], rbuf[side], cap, 0, &rmr[side]), UCCL_OK);
        unit_fill(buf[side], cap, (unsigned)side + 5);
    }
    for (int i = 0; i < DEPTH; i++)
        for (int to = 0; to < 2; to++)
            UNIT_ASSERT_STATUS(uccl_recv(conn[to], rmr[to], (size_t)i * SLOT, SLOT, 300 + i,
                                         &reqs[2 * i + to]),
                               UCCL_OK);
    for (int i = 0; i < DEPTH; i++)
        for (int from = 0; from < 2; from++)
            UNIT_ASSERT_STATUS(uccl_send(conn[from], smr[from], (size_t)i * SLOT, MSG_LEN(i), 300 + i,
                                         &reqs[2 * DEPTH + 2 * i + from]),
                               UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 4 * DEPTH, 30000), UCCL_OK);
    for (int i = 0; i < DEPTH; i++) {
        for (int to = 0; to < 2; to++) {
            const uint8_t *got = rbuf[to] + (size_t)i * SLOT, *want = buf[1 - to] + (size_t)i * SLOT;
            size_t bytes = 0;

            UNIT_ASSERT_STATUS(uccl_wait(reqs[2 * i + to], 0), UCCL_OK);
            UNIT_ASSERT_STATUS(uccl_wait(reqs[2 * DEPTH + 2 * i + (1 - to)], 0), UCCL_OK);
            uccl_req_bytes(reqs[2 * i + to], &bytes);
            CU_ASSERT_EQUAL(bytes, MSG_LEN(i));
            CU_ASSERT(memcmp(got, want, MSG_LEN(i)) == 0);
            CU_ASSERT_EQUAL(got[MSG_LEN(i)], 0);
        }
    }
    for (int i = 0; i < 4 * DEPTH; i++)
        uccl_req_free(reqs[i]);
    for (int side = 0; side < 2; side++) {
        uccl_mr_dereg(smr[side]);
        uccl_mr_dereg(rmr[side]);
        free(buf[side]);
        free(rbuf[side]);
    }
}

/* A peer killed mid-copy leaves its cma_busy flag set; until its parent
 * reaps it, kill(pid, 0) still succeeds. The close fence must see it gone
 * at once instead of waiting UCCL_TIMEOUT_MS. */
static void test_pid_gone(void)
{
    int status;
    pid_t live = fork(), zombie;

    CU_ASSERT_FATAL(live >= 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    zombie = fork();
    CU_ASSERT_FATAL(zombie >= 0);
    if (zombie == 0)
        _exit(0);
    CU_ASSERT_FALSE(uccl_pid_gone(live));
    CU_ASSERT_FALSE(uccl_pid_gone(getpid()));
    CU_ASSERT_FALSE(uccl_pid_gone(0));
    for (int i = 0; i < 2000 && !uccl_pid_gone(zombie); i++)
        usleep(1000);
    CU_ASSERT_TRUE(uccl_pid_gone(zombie));
    CU_ASSERT_EQUAL(kill(zombie, 0), 0); /* not reaped: the zombie case itself */
    CU_ASSERT_EQUAL(waitpid(zombie, &status, 0), zombie);
    CU_ASSERT_TRUE(uccl_pid_gone(zombie));
    CU_ASSERT_EQUAL(kill(live, SIGKILL), 0);
    CU_ASSERT_EQUAL(waitpid(live, &status, 0), live);
    CU_ASSERT_TRUE(uccl_pid_gone(live));
}

/* ------------------------------------------------------------------ tp_shm_pairs */

#define BIG (4u << 20) /* above UCCL_SHM_SPLIT_MIN and UCCL_SHM_CMA_HELPER_MIN */

/* Engine a created under the settings of env_a ("NAME=VALUE" words), b under
 * env_b's, then connected (a connects). */
static uccl_status_t pair_open_env(const char *env_a, const char *env_b, unit_pair_t *p)
{
    const char *env[2] = {env_a, env_b};
    uccl_engine_t **engine[2] = {&p->a, &p->b};
    uccl_status_t st = UCCL_OK;

    memset(p, 0, sizeof(*p));
    for (int side = 0; side < 2 && st == UCCL_OK; side++) {
        char words[256], *save = NULL;
        snprintf(words, sizeof(words), "%s", env[side]);
        for (char *w = strtok_r(words, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(w, '=');
            *eq = '\0';
            setenv(w, eq + 1, 1);
        }
        st = unit_engine_create("shm", engine[side]);
        snprintf(words, sizeof(words), "%s", env[side]);
        for (char *w = strtok_r(words, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
            *strchr(w, '=') = '\0';
            unsetenv(w);
        }
    }
    if (st == UCCL_OK)
        st = unit_connect(p->a, p->b, &p->ab, &p->ba);
    if (st != UCCL_OK)
        unit_pair_close(p);
    return st;
}

/* One side pipelines through the ring (UCCL_SHM_CMA=0), the other copies
 * with CMA and splits large transfers: it must not offer its peer a part
 * (which that peer cannot copy: it failed the connection as a malformed
 * OFFER). Sends, writes and reads of 4 MiB both ways, bytes compared. */
static void test_cma_one_side(void)
{
    unit_pair_t p;
    uccl_conn_t *conn[2];
    uccl_engine_t *engine[2];
    uint8_t *src[2], *dst[2];
    uccl_mr_t *smr[2], *dmr[2];

    UNIT_ASSERT_STATUS(pair_open_env("UCCL_SHM_CMA=0", "UCCL_SHM_SPLIT_MIN=1M", &p), UCCL_OK);
    conn[0] = p.ab, conn[1] = p.ba, engine[0] = p.a, engine[1] = p.b;
    for (int side = 0; side < 2; side++) {
        src[side] = malloc(BIG);
        dst[side] = malloc(BIG);
        CU_ASSERT_FATAL(src[side] != NULL && dst[side] != NULL);
        unit_fill(src[side], BIG, (unsigned)side + 11);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], src[side], BIG, 0, &smr[side]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_reg(engine[side], dst[side], BIG, 0, &dmr[side]), UCCL_OK);
    }
    for (int op = 0; op < 3; op++) {
        for (int from = 0; from < 2; from++) {
            int to = 1 - from;
            uccl_req_t *reqs[2] = {NULL, NULL};
            uccl_rdesc_t rd;

            memset(dst[to], 0, BIG);
            if (op == 0) {
                UNIT_ASSERT_STATUS(uccl_recv(conn[to], dmr[to], 0, BIG, 40, &reqs[1]), UCCL_OK);
                UNIT_ASSERT_STATUS(uccl_send(conn[from], smr[from], 0, BIG, 40, &reqs[0]), UCCL_OK);
            } else if (op == 1) { /* from writes its source into to's destination */
                UNIT_ASSERT_STATUS(uccl_mr_pack(dmr[to], 0, BIG, &rd), UCCL_OK);
                UNIT_ASSERT_STATUS(uccl_write(conn[from], smr[from], 0, BIG, &rd, 0, &reqs[0]),
                                   UCCL_OK);
            } else { /* to reads from's source into its destination */
                UNIT_ASSERT_STATUS(uccl_mr_pack(smr[from], 0, BIG, &rd), UCCL_OK);
                UNIT_ASSERT_STATUS(uccl_read(conn[to], dmr[to], 0, BIG, &rd, 0, &reqs[0]), UCCL_OK);
            }
            UNIT_ASSERT_STATUS(unit_drive(&p, reqs, 2, 30000), UCCL_OK);
            for (int i = 0; i < 2; i++) {
                if (reqs[i] == NULL)
                    continue;
                UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), UCCL_OK);
                uccl_req_free(reqs[i]);
            }
            CU_ASSERT_EQUAL(unit_mismatches(dst[to], BIG, (unsigned)from + 11), 0);
        }
    }
    CU_ASSERT_EQUAL(unit_ping(&p, 41), UCCL_OK);
    unit_pair_close(&p);
    for (int side = 0; side < 2; side++) {
        free(src[side]);
        free(dst[side]);
    }
}

/* A pair under env with CMA required: UCCL_ERR_UNSUPPORTED (the case
 * skipped) where this host does not permit it. */
static uccl_status_t pair_open_cma(const char *env, unit_pair_t *p)
{
    char words[256];
    uccl_status_t st;

    snprintf(words, sizeof(words), "UCCL_SHM_CMA=on %s", env);
    st = pair_open_env(words, words, p);
    if (st == UCCL_ERR_UNSUPPORTED)
        unit_skip_note("CMA is not permitted here (UCCL_SHM_CMA=on: UNSUPPORTED)");
    else
        UNIT_ASSERT_STATUS(st, UCCL_OK);
    return st;
}

/* a writes BIG bytes into b's target (or reads them from it): mine filled
 * with seed, target with seed + 1, the destination zeroed, both registered,
 * the request posted and one progress call on each side, after which the
 * copy is under way, partly outside b's checks. */
static void copy_begin(unit_pair_t *p, uint8_t *mine, uint8_t *target, int is_read, int seed,
                       uccl_mr_t **tmr, uccl_req_t **req)
{
    uccl_mr_t *mmr;
    uccl_rdesc_t rd;

    unit_fill(mine, BIG, seed);
    unit_fill(target, BIG, seed + 1);
    memset(is_read ? mine : target, 0, BIG);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p->a, mine, BIG, 0, &mmr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p->b, target, BIG, 0, tmr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(*tmr, 0, BIG, &rd), UCCL_OK);
    UNIT_ASSERT_STATUS(is_read ? uccl_read(p->ab, mmr, 0, BIG, &rd, 0, req)
                               : uccl_write(p->ab, mmr, 0, BIG, &rd, 0, req),
                       UCCL_OK);
    uccl_engine_progress(p->a); /* the request into the ring */
    uccl_engine_progress(p->b); /* checked; b offers a part or gives its helper one */
}

/* b's region is the target of a's write (or the source of a's read) of
 * 4 MiB (copy_begin). b's uccl_mr_dereg must not succeed then (it did, and the rest
 * landed in, or was read from, the memory b had taken back): BUSY; the
 * transfer ends intact, and then the region goes. close_b: b closes its end
 * instead; the hold goes with it (the region goes, a's request fails). */
static void dereg_mid_copy(const char *env, int is_read, int close_b)
{
    unit_pair_t p;
    uint8_t *mine = malloc(BIG), *target = malloc(BIG);
    uccl_mr_t *tmr;
    uccl_req_t *req = NULL;

    CU_ASSERT_FATAL(mine != NULL && target != NULL);
    if (pair_open_cma(env, &p) != UCCL_OK) {
        free(mine);
        free(target);
        return;
    }
    copy_begin(&p, mine, target, is_read, 21, &tmr, &req);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(tmr), UCCL_ERR_BUSY);
    if (close_b) {
        UNIT_ASSERT_STATUS(uccl_conn_close(p.ba), UCCL_OK);
        p.ba = NULL;
        UNIT_ASSERT_STATUS(uccl_mr_dereg(tmr), UCCL_OK);
        UNIT_ASSERT_STATUS(unit_drive(&p, &req, 1, 30000), UCCL_OK);
        CU_ASSERT_NOT_EQUAL(uccl_wait(req, 0), UCCL_OK);
        uccl_req_free(req);
        unit_pair_close(&p);
        free(mine);
        free(target);
        return;
    }
    UNIT_ASSERT_STATUS(unit_drive(&p, &req, 1, 30000), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
    CU_ASSERT_EQUAL(is_read ? unit_mismatches(mine, BIG, 22) : unit_mismatches(target, BIG, 21),
                    0);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(tmr), UCCL_OK);
    uccl_req_free(req);
    CU_ASSERT_EQUAL(unit_ping(&p, 42), UCCL_OK);
    unit_pair_close(&p);
    free(mine);
    free(target);
}

#define SPLIT_ENV "UCCL_SHM_SPLIT_MIN=1M UCCL_SHM_CMA_HELPER=off"
/* the helper takes half of every job from 512K; progress copies 4 KiB a call */
#define HELPER_ENV "UCCL_SHM_SPLIT_MIN=0 UCCL_SHM_CMA_HELPER=on UCCL_SHM_PROGRESS_BYTES=4096"

/* The same with b's memory of uccl_mem_alloc freed instead: uccl_mem_free
 * must not free it (it did, and a new allocation at the same address took
 * the rest of the write): BUSY, then the transfer ends intact. */
static void memfree_mid_copy(const char *env, int is_read)
{
    unit_pair_t p;
    uint8_t *mine = malloc(BIG), *target = NULL;
    uccl_mr_t *tmr;
    uccl_req_t *req = NULL;
    uccl_status_t st;

    CU_ASSERT_FATAL(mine != NULL);
    if (pair_open_cma(env, &p) != UCCL_OK) {
        free(mine);
        return;
    }
    UNIT_ASSERT_STATUS(uccl_mem_alloc(p.b, UCCL_MEM_HOST, BIG, (void **)&target), UCCL_OK);
    CU_ASSERT_FATAL(target != NULL);
    copy_begin(&p, mine, target, is_read, 23, &tmr, &req);
    st = uccl_mem_free(p.b, target);
    UNIT_ASSERT_STATUS(st, UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(unit_drive(&p, &req, 1, 30000), UCCL_OK);
    if (st == UCCL_ERR_BUSY) { /* else target is gone */
        UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_OK);
        CU_ASSERT_EQUAL(is_read ? unit_mismatches(mine, BIG, 24)
                                : unit_mismatches(target, BIG, 23),
                        0);
        UNIT_ASSERT_STATUS(uccl_mr_dereg(tmr), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mem_free(p.b, target), UCCL_OK);
    }
    uccl_req_free(req);
    unit_pair_close(&p);
    free(mine);
}

static void test_dereg_split_write(void) { dereg_mid_copy(SPLIT_ENV, 0, 0); }
static void test_dereg_split_read(void) { dereg_mid_copy(SPLIT_ENV, 1, 0); }
static void test_dereg_helper_write(void) { dereg_mid_copy(HELPER_ENV, 0, 0); }
static void test_dereg_helper_read(void) { dereg_mid_copy(HELPER_ENV, 1, 0); }
static void test_dereg_split_closed(void) { dereg_mid_copy(SPLIT_ENV, 0, 1); }
static void test_dereg_helper_closed(void) { dereg_mid_copy(HELPER_ENV, 1, 1); }
static void test_memfree_split_write(void) { memfree_mid_copy(SPLIT_ENV, 0); }
static void test_memfree_helper_read(void) { memfree_mid_copy(HELPER_ENV, 1); }

int main(void)
{
    CU_TestInfo tests[] = {{"send/recv around the split threshold, both ways", test_split_sizes},
                           {"12 split messages in flight each way", test_split_depth},
                           {"a zombie peer counts as gone", test_pid_gone},
                           CU_TEST_INFO_NULL};
    CU_TestInfo pair_tests[] = {
        {"CMA on one side only: send, write, read of 4 MiB both ways", test_cma_one_side},
        {"dereg during a split write: BUSY, then intact", test_dereg_split_write},
        {"dereg during a split read: BUSY, then intact", test_dereg_split_read},
        {"dereg during a write shared with the CMA helper: BUSY", test_dereg_helper_write},
        {"dereg during a read shared with the CMA helper: BUSY", test_dereg_helper_read},
        {"a split write's hold ends when the target closes", test_dereg_split_closed},
        {"a helper's hold ends when the target closes", test_dereg_helper_closed},
        {"uccl_mem_free during a split write: BUSY, then intact", test_memfree_split_write},
        {"uccl_mem_free during a helper's read: BUSY, then intact", test_memfree_helper_read},
        CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"tp_shm", suite_init, suite_cleanup, NULL, NULL, tests},
                             {"tp_shm_pairs", NULL, NULL, NULL, NULL, pair_tests},
                             CU_SUITE_INFO_NULL};

    if (!unit_transport_usable("shm"))
        return UNIT_EXIT_SKIP;
    return unit_main(suites);
}

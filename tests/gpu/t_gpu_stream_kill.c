/* A stream-ordered collective with a rank SIGKILLed, on a real GPU (the
 * fake backend's t_coll case ct_stream_dead closes the leaver's connections
 * instead; on a GPU its stream would run on into closed mappings, but a
 * dead process's stream stops with it). NRANKS processes, forked before
 * any GPU runtime call, share GPU 0 over gpu_ipc; the comm is bootstrapped
 * over shared memory, so no launcher sees a rank die. One stream-ordered
 * allgather first proves the direct path and its bytes; a loop of calls into
 * fresh receive buffers, each freed after (plans evicted, regions revoked),
 * must not grow the count of peer mappings (fake backend); then the last rank
 * posts another behind a gate on its stream (a wait on a device word nobody
 * sets) and is killed once every rank's part is queued. Each survivor's
 * request must end with UCCL_ERR_PEER_FAILED or UCCL_ERR_TIMEOUT within
 * UCCL_TIMEOUT_MS (+ slack), its stream must go on (the sync returns, copies
 * queued after it run and their bytes arrive) and the next stream call on
 * the comm must fail at once; then the survivors tear down at once (their
 * comm destroy revokes buffers another survivor's stream may still copy
 * into). A hang is killed by the parent's watchdog and reported. Without a GPU: "skipped: no GPU", exit 77. */
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uccl/uccl.h>
#include <uccl/uccl_coll.h>
#include <uccl/uccl_stream.h>

#include "gpu/gpu.h"

#define NRANKS 3
#define LEN 4096
#define ROUNDS 64
#define SLOT 8192
#define SKIP 77
#define SLACK_MS 2000

/* The parent's and the ranks' shared page: the bootstrap's allgather
 * rounds, a count of ranks whose last call is queued, per-rank verdicts. */
typedef struct shared {
    atomic_int arrived[ROUNDS];
    atomic_int queued;
    atomic_int skipped;
    atomic_int checked; /* survivors past their checks */
    uint8_t slot[ROUNDS][NRANKS][SLOT];
} shared_t;

static shared_t *sh;
static int my_rank, my_round;
static int failures;

static double ms_since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("FAIL rank %d: ", my_rank);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

static void expect(uccl_status_t st, uccl_status_t want, const char *what)
{
    if (st != want)
        fail("%s: %s, want %s", what, uccl_status_name(st), uccl_status_name(want));
}

/* The comm's bootstrap: rounds through the shared page, in call order. */
static uccl_status_t shm_allgather(const void *send, void *recv, size_t bytes, void *ctx)
{
    int r = my_round++;
    struct timespec t0;

    (void)ctx;
    if (r >= ROUNDS || bytes > SLOT)
        return UCCL_ERR_INVALID_PARAM;
    memcpy(sh->slot[r][my_rank], send, bytes);
    atomic_fetch_add(&sh->arrived[r], 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&sh->arrived[r]) < NRANKS) {
        if (ms_since(&t0) > 30000)
            return UCCL_ERR_TIMEOUT;
        usleep(100);
    }
    for (int q = 0; q < NRANKS; q++)
        memcpy((uint8_t *)recv + (size_t)q * bytes, sh->slot[r][q], bytes);
    return UCCL_OK;
}

static uint8_t pat(int r, int round, size_t k) { return (uint8_t)(r * 37 + round * 11 + (int)k * 5 + 1); }

/* Every rank's block of round landed in dr. */
static void check_allgather(void *dr, int round, const char *what)
{
    uint8_t *h = malloc((size_t)NRANKS * LEN);

    if (h == NULL || uccl_gpu_memcpy(h, dr, (size_t)NRANKS * LEN) != UCCL_OK) {
        fail("%s: reading the receive buffer back", what);
        free(h);
        return;
    }
    for (int q = 0; q < NRANKS; q++)
        for (size_t k = 0; k < LEN; k++)
            if (h[(size_t)q * LEN + k] != pat(q, round, k)) {
                fail("%s: rank %d's byte %zu is %u, want %u", what, q, k, h[(size_t)q * LEN + k],
                     pat(q, round, k));
                free(h);
                return;
            }
    free(h);
}

typedef struct rank_ctx {
    uccl_engine_t *e;
    uccl_comm_t *comm;
    uccl_gpu_stream_t s;
    void *ds, *dr, *gate;
    uint8_t src[LEN];
} rank_ctx_t;

/* One stream-ordered allgather that must work: the direct path, intact. */
static void warm_call(rank_ctx_t *x)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = x->ds, .recvbuf = x->dr, .count = LEN};
    uccl_coll_stats_t st0 = {0}, st1 = {0};
    uccl_req_t *req = NULL;

    for (size_t k = 0; k < LEN; k++)
        x->src[k] = pat(my_rank, 0, k);
    expect(uccl_gpu_memcpy(x->ds, x->src, LEN), UCCL_OK, "the send buffer");
    expect(uccl_comm_coll_stats(x->comm, &st0), UCCL_OK, "stats");
    expect(uccl_coll_post_stream(x->comm, &a, x->s, &req), UCCL_OK, "the first stream call");
    if (req != NULL) {
        expect(uccl_wait(req, -1), UCCL_OK, "the first stream call's request");
        uccl_req_free(req);
    }
    expect(uccl_gpu_stream_sync(x->s), UCCL_OK, "the stream after the first call");
    check_allgather(x->dr, 0, "the first stream call");
    expect(uccl_comm_coll_stats(x->comm, &st1), UCCL_OK, "stats");
    if (st1.stream_direct != st0.stream_direct + 1)
        fail("the first stream call did not take the direct path (every peer is on gpu_ipc)");
}

/* Mappings of the peers' device memory in this process: on the fake
 * backend, the peers' shared-memory objects in /proc/self/maps (-1
 * elsewhere: a GPU's mappings are not counted there). */
static int peer_mappings(void)
{
    char line[512], mine[64];
    int n = 0;
    FILE *f;

    if (strcmp(uccl_gpu_backend(), "fake") != 0 || (f = fopen("/proc/self/maps", "r")) == NULL)
        return -1;
    snprintf(mine, sizeof(mine), "/uccl-fakegpu-%d-", (int)getpid());
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "/uccl-fakegpu-") != NULL && strstr(line, mine) == NULL)
            n++;
    fclose(f);
    return n;
}

/* Stream calls into a fresh receive buffer each round, freed after it:
 * every round's plan is evicted and the peers revoke their old buffers.
 * Mappings of revoked regions that a stream used close only once the
 * streams passed (gpu_ipc), so they must not pile up: the count of peer
 * mappings stays flat from round EVICT_FLAT on. */
#define EVICT_ROUNDS 24
#define EVICT_FLAT 6
static void evict_loop(rank_ctx_t *x)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = x->ds, .count = LEN};
    int flat = -1, n = -1;

    for (int i = 0; i < EVICT_ROUNDS && failures == 0; i++) {
        uccl_req_t *req = NULL;
        void *dr = NULL;
        if (uccl_mem_alloc(x->e, UCCL_MEM_CUDA, (size_t)NRANKS * LEN, &dr) != UCCL_OK) {
            fail("a receive buffer for eviction round %d", i);
            return;
        }
        a.recvbuf = dr;
        expect(uccl_coll_post_stream(x->comm, &a, x->s, &req), UCCL_OK, "a stream call of the eviction loop");
        if (req != NULL) {
            expect(uccl_wait(req, -1), UCCL_OK, "its request");
            uccl_req_free(req);
        }
        expect(uccl_gpu_stream_sync(x->s), UCCL_OK, "the stream after it");
        check_allgather(dr, 0, "a stream call of the eviction loop");
        expect(uccl_mem_free(x->e, dr), UCCL_OK, "freeing its receive buffer");
        n = peer_mappings();
        if (i == EVICT_FLAT)
            flat = n;
    }
    printf("rank %d: peer mappings after %d rounds of fresh receive buffers: %d (%d after round %d)\n",
           my_rank, EVICT_ROUNDS, n, flat, EVICT_FLAT);
    if (n > flat + 2)
        fail("peer mappings grow with plan evictions: %d after round %d, %d after round %d", flat, EVICT_FLAT,
             n, EVICT_ROUNDS);
}

/* A survivor: its request fails in time, its stream goes on, the comm's
 * stream path is closed. */
static void survive(rank_ctx_t *x, uccl_req_t *req, int timeout_ms)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = x->ds, .recvbuf = x->dr, .count = LEN};
    uint8_t back[LEN];
    struct timespec t0;
    uccl_status_t st;
    double ms;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = req != NULL ? uccl_wait(req, 3 * timeout_ms) : UCCL_ERR_INVALID_PARAM;
    ms = ms_since(&t0);
    printf("rank %d: the call with the last rank killed ended with %s after %.0f ms\n", my_rank,
           uccl_status_name(st), ms);
    if (st != UCCL_ERR_PEER_FAILED && st != UCCL_ERR_TIMEOUT)
        fail("the request of a call with a rank killed: %s", uccl_status_name(st));
    if (ms > timeout_ms + SLACK_MS)
        fail("the failure took %.0f ms (UCCL_TIMEOUT_MS %d)", ms, timeout_ms);
    if (req != NULL)
        uccl_req_free(req);
    /* the stream goes on: a sync returns, and work queued after runs */
    expect(uccl_gpu_stream_sync(x->s), UCCL_OK, "the stream after the failure");
    for (size_t k = 0; k < LEN; k++)
        x->src[k] = (uint8_t)(pat(my_rank, 2, k) ^ 0x5a);
    expect(uccl_gpu_memcpy_async(x->ds, x->src, LEN, x->s), UCCL_OK, "a copy queued after the failure");
    expect(uccl_gpu_memcpy_async(x->dr, x->ds, LEN, x->s), UCCL_OK, "a device copy queued after it");
    expect(uccl_gpu_stream_sync(x->s), UCCL_OK, "the stream running the later copies");
    memset(back, 0, sizeof(back));
    expect(uccl_gpu_memcpy(back, x->dr, LEN), UCCL_OK, "reading the later copy back");
    if (memcmp(back, x->src, LEN) != 0)
        fail("the copies queued after the failure did not land");
    /* the next stream call on the comm fails at once */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    req = NULL;
    st = uccl_coll_post_stream(x->comm, &a, x->s, &req);
    if (st == UCCL_OK && req != NULL)
        st = uccl_wait(req, 3 * timeout_ms);
    ms = ms_since(&t0);
    printf("rank %d: the next stream call: %s after %.0f ms\n", my_rank, uccl_status_name(st), ms);
    if (st == UCCL_OK)
        fail("a stream call on the comm with a rank killed succeeded");
    if (ms > 1000.0)
        fail("the next stream call took %.0f ms to fail", ms);
    if (req != NULL)
        uccl_req_free(req);
    expect(uccl_gpu_stream_sync(x->s), UCCL_OK, "the stream at the end");
}

static int rank_main(int timeout_ms)
{
    uccl_comm_params_t cp = {.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK |
                                           UCCL_COMM_PARAM_SIZE | UCCL_COMM_PARAM_ALLGATHER,
                             .rank = my_rank, .size = NRANKS, .allgather = shm_allgather};
    uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = 0};
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = LEN};
    rank_ctx_t x = {0};
    uint32_t zero = 0;
    uccl_req_t *req = NULL;
    int n = 0, last = NRANKS - 1;

    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        atomic_fetch_add(&sh->skipped, 1);
        return SKIP;
    }
    /* every rank on GPU 0, the engine too */
    if (uccl_gpu_set_device(0) != UCCL_OK || uccl_engine_create(&ep, &x.e) != UCCL_OK) {
        fail("engine");
        return 1;
    }
    cp.engine = x.e;
    expect(uccl_comm_init(&cp, &x.comm), UCCL_OK, "the comm");
    if (x.comm == NULL || uccl_gpu_stream_create(&x.s) != UCCL_OK ||
        uccl_mem_alloc(x.e, UCCL_MEM_CUDA, LEN, &x.ds) != UCCL_OK ||
        uccl_mem_alloc(x.e, UCCL_MEM_CUDA, (size_t)NRANKS * LEN, &x.dr) != UCCL_OK ||
        uccl_mem_alloc(x.e, UCCL_MEM_CUDA, sizeof(zero), &x.gate) != UCCL_OK ||
        uccl_copy(x.e, x.gate, &zero, sizeof(zero)) != UCCL_OK) {
        fail("a comm, a stream and buffers");
        return 1;
    }
    warm_call(&x);
    evict_loop(&x);
    a.sendbuf = x.ds;
    a.recvbuf = x.dr;
    if (my_rank == last) /* nothing after this runs until the gate opens */
        expect(uccl_stream_wait_value(x.e, x.s, x.gate, 1, 4), UCCL_OK, "the gate");
    expect(uccl_coll_post_stream(x.comm, &a, x.s, my_rank == last ? NULL : &req), UCCL_OK,
           "the call the last rank leaves");
    fflush(stdout);
    atomic_fetch_add(&sh->queued, 1);
    if (my_rank == last) {
        for (;;)
            pause(); /* the parent kills it here */
    }
    while (atomic_load(&sh->queued) < NRANKS)
        usleep(100);
    survive(&x, req, timeout_ms);
    /* Teardown at once: after the failure another survivor's stream may
     * still have copies into this one's receive buffer queued, behind a
     * wait that only its own progress releases once it sees the failure;
     * deregistering the buffer (comm destroy) revokes the region there, and
     * gpu_ipc must not close the mapping under that stream (cudaIpcClose
     * MemHandle would wait for it forever; the fake fails the copies).
     * T_STREAM_KILL_MEET=1: survivors meet first (the race cannot form). */
    atomic_fetch_add(&sh->checked, 1);
    for (struct timespec t0 = {0}; getenv("T_STREAM_KILL_MEET") != NULL &&
                                   atomic_load(&sh->checked) < NRANKS - 1;) {
        if (t0.tv_sec == 0)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (ms_since(&t0) > 30000) {
            fail("the other survivors did not finish their checks");
            break;
        }
        usleep(100);
    }
    uccl_comm_destroy(x.comm);
    uccl_mem_free(x.e, x.gate);
    uccl_mem_free(x.e, x.dr);
    uccl_mem_free(x.e, x.ds);
    uccl_gpu_stream_destroy(x.s);
    uccl_engine_destroy(x.e);
    return failures ? 1 : 0;
}

int main(void)
{
    const char *tm;
    int timeout_ms, rc = 0, done = 0, status[NRANKS] = {0};
    pid_t pid[NRANKS];
    bool killed = false, reaped[NRANKS] = {false};
    struct timespec t0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("UCCL_TRANSPORTS", "shm,gpu_ipc", 0);
    setenv("UCCL_TIMEOUT_MS", "3000", 0);
    tm = getenv("UCCL_TIMEOUT_MS");
    timeout_ms = atoi(tm);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int r = 0; r < NRANKS; r++) { /* before any GPU runtime call */
        pid[r] = fork();
        if (pid[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pid[r] == 0) {
            my_rank = r;
            _exit(rank_main(timeout_ms));
        }
    }
    /* the watchdog: the last rank dies once every part is queued; a rank
     * still running after 60 s + 4 x UCCL_TIMEOUT_MS hangs */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (done < NRANKS) {
        for (int r = 0; r < NRANKS; r++)
            if (!reaped[r] && waitpid(pid[r], &status[r], WNOHANG) == pid[r]) {
                reaped[r] = true;
                done++;
            }
        if (!killed && atomic_load(&sh->queued) == NRANKS) {
            kill(pid[NRANKS - 1], SIGKILL);
            killed = true;
            printf("rank %d (pid %d) killed with its stream call queued behind the gate\n", NRANKS - 1,
                   (int)pid[NRANKS - 1]);
        }
        if (done < NRANKS && ms_since(&t0) > 60000.0 + 4.0 * timeout_ms) {
            for (int r = 0; r < NRANKS; r++)
                if (!reaped[r]) {
                    printf("FAIL: rank %d still running (a hang): killed\n", r);
                    kill(pid[r], SIGKILL);
                    rc = 1;
                }
            killed = true;
        }
        usleep(1000);
    }
    if (atomic_load(&sh->skipped) > 0) {
        printf("skipped: no GPU\n");
        return SKIP;
    }
    for (int r = 0; r < NRANKS - 1; r++)
        if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0) {
            printf("FAIL: survivor rank %d ended with status %#x\n", r, status[r]);
            rc = 1;
        }
    if (!killed || !WIFSIGNALED(status[NRANKS - 1]) || WTERMSIG(status[NRANKS - 1]) != SIGKILL) {
        printf("FAIL: the last rank was not killed with its call queued (status %#x)\n", status[NRANKS - 1]);
        rc = 1;
    }
    printf("%s: stream-ordered allgather, %d ranks on one GPU (%s backend), the last SIGKILLed\n",
           rc == 0 ? "PASS" : "FAIL", NRANKS, uccl_gpu_backend());
    return rc;
}

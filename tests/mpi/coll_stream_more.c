/* More cases of the direct stream path (coll/stream.c) in t_coll_gpu:
 * two streams of one comm, a flush while a call is queued, a rank gone
 * while its peers' hold-path calls are in flight, and a wide comm. Stubs in t_coll. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_test.h"
#ifdef T_COLL_GPU
#include "gpu/gpu.h"
#endif

#ifndef T_COLL_GPU
void ct_stream_two(mt_ctx_t *c) { (void)c; }
void ct_stream_wide(mt_ctx_t *c) { (void)c; }
void ct_stream_flush(mt_ctx_t *c) { (void)c; }
void ct_stream_hold_dead(mt_ctx_t *c) { (void)c; }
void ct_stream_destroy(mt_ctx_t *c) { (void)c; }
#else

static uint8_t pat(int r, int call, size_t k)
{
    return (uint8_t)(r * 37 + call * 11 + (int)k * 5 + 3);
}

/* rlen bytes of an allgather of call's blocks (len bytes each) at dev, as expected. */
static void check_gather(mt_ctx_t *c, const void *dev, size_t len, int call, const char *what)
{
    size_t rlen = (size_t)c->size * len;
    uint8_t *back = malloc(rlen);

    if (back == NULL || uccl_copy(c->engine, back, dev, rlen) != UCCL_OK) {
        mt_fail(c, "%s: the result back", what);
        free(back);
        return;
    }
    for (size_t k = 0; k < rlen; k++)
        if (back[k] != pat((int)(k / len), call, k % len)) {
            mt_fail(c, "%s: byte %zu (rank %zu's block): 0x%02x, want 0x%02x", what, k, k / len, back[k],
                    pat((int)(k / len), call, k % len));
            break;
        }
    free(back);
}

/* A GPU buffer of len bytes holding call's pattern for this rank. */
static void *send_buf(mt_ctx_t *c, size_t len, int call)
{
    uint8_t *h = malloc(len);
    void *d = NULL;

    if (h == NULL || uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len, &d) != UCCL_OK) {
        free(h);
        return NULL;
    }
    for (size_t k = 0; k < len; k++)
        h[k] = pat(c->rank, call, k);
    if (uccl_copy(c->engine, d, h, len) != UCCL_OK) {
        uccl_mem_free(c->engine, d);
        d = NULL;
    }
    free(h);
    return d;
}

/* A comm of the case's own on the test's engine, a send buffer of len bytes
 * (call's pattern), a receive buffer of n * len and, if gate is not NULL, a
 * device word at 0 for the stream to wait on; false: a FAIL line. */
static bool case_setup(mt_ctx_t *c, uccl_comm_t **comm, size_t len, int call, void **ds, void **dr, void **gate)
{
    uccl_comm_params_t cp = {.field_mask = UCCL_COMM_PARAM_ENGINE, .engine = c->engine};
    uint32_t zero = 0;

    if (uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, comm) != UCCL_OK || (*ds = send_buf(c, len, call)) == NULL ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, (size_t)c->size * len, dr) != UCCL_OK ||
        (gate != NULL && (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, sizeof(zero), gate) != UCCL_OK ||
                          uccl_copy(c->engine, *gate, &zero, sizeof(zero)) != UCCL_OK))) {
        mt_fail(c, "a second comm, buffers%s", gate != NULL ? " and a gate" : "");
        return false;
    }
    return true;
}

typedef struct {
    uccl_gpu_stream_t s;
    uccl_status_t st;
    int done; /* atomic */
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *y = arg;

    y->st = uccl_gpu_stream_sync(y->s);
    __atomic_store_n(&y->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Two allgathers on one comm, every rank alike: call 1 on stream s1 held
 * behind a gate (a wait on a device word nobody sets yet), call 2 on s2.
 * A thread drives s2 (as a GPU runs every stream by itself) while s1 stays
 * held: the comm's direct calls keep their order on the device (call 2
 * runs after call 1), so call 1's request must not be done then: its
 * stream never started it. Then the gate opens, s1 runs, and both
 * requests and both results are checked. */
#define TWO_LEN 2048
void ct_stream_two(mt_ctx_t *c)
{
    uccl_comm_params_t cp = {.field_mask = UCCL_COMM_PARAM_ENGINE, .engine = c->engine};
    int n = c->size;
    size_t rlen = (size_t)n * TWO_LEN;
    uccl_comm_t *comm = NULL;
    uccl_gpu_stream_t s1 = NULL, s2 = NULL;
    void *ds[3] = {NULL, NULL, NULL}, *dr[3] = {NULL, NULL, NULL}, *gate = NULL;
    uint32_t zero = 0, one = 1;
    uccl_req_t *r[3] = {NULL, NULL, NULL};
    syncer_t y = {0};
    pthread_t th;
    bool started = false;

    if (!ct_fake_direct(c, "stream form, two streams"))
        return;
    if (uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, &comm) != UCCL_OK || uccl_gpu_stream_create(&s1) != UCCL_OK ||
        uccl_gpu_stream_create(&s2) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, sizeof(zero), &gate) != UCCL_OK ||
        uccl_copy(c->engine, gate, &zero, sizeof(zero)) != UCCL_OK) {
        mt_fail(c, "a second comm, two streams and a gate");
        goto out;
    }
    for (int i = 0; i < 3; i++)
        if ((ds[i] = send_buf(c, TWO_LEN, i)) == NULL ||
            uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[i]) != UCCL_OK) {
            mt_fail(c, "buffers");
            goto out;
        }
    /* call 0 sets the path up (flags mapped both ways), run out on s1 */
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = ds[0], .recvbuf = dr[0], .count = TWO_LEN};
    mt_expect(c, uccl_coll_post_stream(comm, &a, s1, &r[0]), UCCL_OK, "call 0 (setup)");
    mt_expect(c, uccl_gpu_stream_sync(s1), UCCL_OK, "s1 after call 0");
    if (r[0] != NULL)
        mt_expect(c, uccl_wait(r[0], -1), UCCL_OK, "call 0's request");
    check_gather(c, dr[0], TWO_LEN, 0, "call 0");
    MPI_Barrier(MPI_COMM_WORLD);

    mt_expect(c, uccl_stream_wait_value(c->engine, s1, gate, 1, 4), UCCL_OK, "the gate on s1");
    a.sendbuf = ds[1];
    a.recvbuf = dr[1];
    mt_expect(c, uccl_coll_post_stream(comm, &a, s1, &r[1]), UCCL_OK, "call 1 on s1");
    a.sendbuf = ds[2];
    a.recvbuf = dr[2];
    mt_expect(c, uccl_coll_post_stream(comm, &a, s2, &r[2]), UCCL_OK, "call 2 on s2");
    y.s = s2;
    started = pthread_create(&th, NULL, sync_thread, &y) == 0;
    if (!started)
        mt_fail(c, "a thread");
    for (int i = 0; i < 50 && !__atomic_load_n(&y.done, __ATOMIC_ACQUIRE); i++)
        usleep(10000);
    int done1 = 0;
    if (r[1] != NULL && uccl_test(r[1], &done1) != UCCL_INPROGRESS && done1)
        mt_fail(c, "call 1's request is done while its stream s1 is held before the call "
                   "(s2, driven meanwhile, ran call 2%s)", y.done ? " to its end" : "");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank checked before any gate opens */
    mt_expect(c, uccl_copy(c->engine, gate, &one, sizeof(one)), UCCL_OK, "the gate opens");
    mt_expect(c, uccl_gpu_stream_sync(s1), UCCL_OK, "s1 after call 1");
    if (started) {
        pthread_join(th, NULL);
        mt_expect(c, y.st, UCCL_OK, "s2 after call 2");
    }
    for (int i = 1; i < 3; i++)
        if (r[i] != NULL)
            mt_expect(c, uccl_wait(r[i], -1), UCCL_OK, i == 1 ? "call 1's request" : "call 2's request");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's streams ran out: the bytes are in */
    check_gather(c, dr[1], TWO_LEN, 1, "call 1 (s1)");
    check_gather(c, dr[2], TWO_LEN, 2, "call 2 (s2)");
out:
    for (int i = 0; i < 3; i++)
        if (r[i] != NULL)
            uccl_req_free(r[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    for (int i = 0; i < 3; i++) {
        uccl_mem_free(c->engine, ds[i]);
        uccl_mem_free(c->engine, dr[i]);
    }
    uccl_mem_free(c->engine, gate);
    if (s1 != NULL)
        uccl_gpu_stream_destroy(s1);
    if (s2 != NULL)
        uccl_gpu_stream_destroy(s2);
}

/* uccl_comm_coll_flush while a direct stream call is queued on every
 * rank but held (its stream behind a gate): the call is in flight, so the
 * flush is refused (UCCL_ERR_BUSY), and its receive buffer stays
 * registered for the peers that still write into it through their
 * mappings (a flush that deregistered it made a peer still in the call
 * close its mapping, then enqueue its copies into the closed range). Once
 * the stream ran the call: the flush works, the bytes are there. */
#define FLUSH_LEN 4096
void ct_stream_flush(mt_ctx_t *c)
{
    int n = c->size;
    uccl_comm_t *comm = NULL;
    void *ds = NULL, *dr = NULL, *gate = NULL, *s = ct_stream();
    uint32_t one = 1;
    uccl_req_t *req = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = FLUSH_LEN};

    if (!ct_fake_direct(c, "stream form, a flush while a call is queued"))
        return;
    if (!case_setup(c, &comm, FLUSH_LEN, 7, &ds, &dr, &gate))
        goto out;
    a.sendbuf = ds;
    a.recvbuf = dr;
    for (int i = 0; i < 2; i++) /* the second call a plan hit */
        ct_path_setup(c, comm, &a, s);
    mt_expect(c, uccl_gpu_memset(dr, 0, (size_t)n * FLUSH_LEN), UCCL_OK, "receive buffer cleared");
    MPI_Barrier(MPI_COMM_WORLD);
    mt_expect(c, uccl_stream_wait_value(c->engine, s, gate, 1, 4), UCCL_OK, "the gate");
    mt_expect(c, uccl_coll_post_stream(comm, &a, s, &req), UCCL_OK, "the call behind the gate");
    mt_expect(c, uccl_comm_coll_flush(comm), UCCL_ERR_BUSY, "flush while the call is queued");
    MPI_Barrier(MPI_COMM_WORLD);
    mt_expect(c, uccl_copy(c->engine, gate, &one, sizeof(one)), UCCL_OK, "the gate opens");
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream after the call");
    if (req != NULL)
        mt_expect(c, uccl_wait(req, -1), UCCL_OK, "its request");
    mt_expect(c, uccl_comm_coll_flush(comm), UCCL_OK, "flush once the stream passed the call");
    MPI_Barrier(MPI_COMM_WORLD);
    check_gather(c, dr, FLUSH_LEN, 7, "the call behind the gate");
out:
    ct_case_done(c, comm, req, ds, dr);
    uccl_mem_free(c->engine, gate);
}

/* The library's stderr while a case runs, in a file (its log lines). */
typedef struct {
    FILE *f;
    int saved;
} err_capture_t;

static void capture_start(err_capture_t *e)
{
    fflush(stderr);
    e->saved = -1;
    e->f = tmpfile();
    if (e->f != NULL && (e->saved = dup(2)) >= 0)
        dup2(fileno(e->f), 2);
}

/* Stop capturing; true when an error line naming a collective came, the
 * first copied into line. The lines go on to stderr. */
static bool capture_end(err_capture_t *e, char *line, size_t len)
{
    char buf[512];
    bool found = false;

    fflush(stderr);
    if (e->saved >= 0) {
        dup2(e->saved, 2);
        close(e->saved);
    }
    if (e->f == NULL)
        return false;
    rewind(e->f);
    while (fgets(buf, sizeof(buf), e->f) != NULL) {
        fputs(buf, stderr);
        if (!found && strstr(buf, "] error ") != NULL && strstr(buf, "collective") != NULL) {
            found = true;
            snprintf(line, len, "%s", buf);
        }
    }
    fclose(e->f);
    return found;
}

/* A rank gone while its peers' stream calls on the hold path are in
 * flight (a gather: the direct path leaves it to the hold path): their
 * streams wait on a host flag that only their engines' progress releases,
 * and the progress that sees the gone rank's connections fail closes the
 * mappings of its memory (made by the first call, DIRECT into its receive
 * buffer). Closing one synchronizes the device (cudaIpcCloseMemHandle), on
 * a GPU forever while a stream is held: the fake backend aborts there. The
 * survivors' requests must fail (UCCL_ERR_PEER_FAILED or UCCL_ERR_TIMEOUT)
 * and their streams go on. Rank 0 drops its request (req NULL): its
 * failure must then be logged as an error (uccl_coll.h). */
#define HDEAD_LEN 8192
void ct_stream_hold_dead(mt_ctx_t *c)
{
    int n = c->size, last = n - 1;
    uccl_comm_t *comm = NULL;
    void *ds = NULL, *dr = NULL, *gate = NULL, *s = ct_stream();
    uint32_t one = 1;
    uccl_req_t *req = NULL;
    err_capture_t cap = {NULL, -1};
    char line[512] = "";
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ROOT | UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_GATHER,
                          .algo = UCCL_COLL_ALGO_DIRECT, .root = last, .count = HDEAD_LEN};
    uccl_status_t st;

    if (!ct_fake_direct(c, "stream form (hold path), a rank gone"))
        return;
    if (!case_setup(c, &comm, HDEAD_LEN, 9, &ds, &dr, &gate))
        goto out;
    a.sendbuf = ds;
    a.recvbuf = dr;
    mt_expect(c, uccl_coll_post_stream(comm, &a, s, &req), UCCL_OK, "the first gather (maps the root's buffer)");
    if (req != NULL)
        mt_expect(c, uccl_wait(req, -1), UCCL_OK, "its request");
    uccl_req_free(req);
    req = NULL;
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
    if (c->rank == last)
        check_gather(c, dr, HDEAD_LEN, 9, "the first gather, at the root");
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rank == last) /* its part never starts: its stream waits for a gate first */
        mt_expect(c, uccl_stream_wait_value(c->engine, s, gate, 1, 4), UCCL_OK, "the gate");
    if (c->rank == 0)
        capture_start(&cap);
    mt_expect(c, uccl_coll_post_stream(comm, &a, s, c->rank == 0 ? NULL : &req), UCCL_OK,
              "the gather the root leaves");
    MPI_Barrier(MPI_COMM_WORLD); /* every stream is held */
    if (c->rank == last) {
        for (int q = 0; q < n; q++)
            if (q != last)
                uccl_conn_close(uccl_comm_conn(comm, q));
        MPI_Barrier(MPI_COMM_WORLD);
        mt_expect(c, uccl_copy(c->engine, gate, &one, sizeof(one)), UCCL_OK, "the gate opens");
        st = req != NULL ? uccl_wait(req, -1) : UCCL_ERR_INVALID_PARAM;
        if (st == UCCL_OK)
            mt_fail(c, "the gather of the rank that left succeeded");
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "the leaver's stream after the failure");
    } else {
        st = req != NULL ? uccl_wait(req, -1) : UCCL_ERR_PEER_FAILED;
        if (st != UCCL_ERR_PEER_FAILED && st != UCCL_ERR_TIMEOUT)
            mt_fail(c, "the request of a gather whose root is gone: %s", uccl_status_name(st));
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "the stream goes on after the failure");
        if (c->rank == 0 && !capture_end(&cap, line, sizeof(line))) /* the hold went as the call ended */
            mt_fail(c, "the failure of a stream call whose request was dropped logged no error");
        else if (c->rank == 0)
            printf("# rank 0, request dropped, logged: %s", line);
        MPI_Barrier(MPI_COMM_WORLD);
    }
out:
    ct_case_done(c, comm, req, ds, dr);
    uccl_mem_free(c->engine, gate);
}

/* A rank that destroys its comm as soon as its direct stream call returns
 * (a plan hit; its stream has not run the call): the peers may still be
 * in the call, and they write into its receive buffer through their
 * mappings, which its deregistration would close under them (a peer that
 * saw the revoke before it enqueued the cached plan's copies wrote into
 * a closed range: SIGSEGV on the fake backend, an illegal address on a
 * GPU). Its registrations must outlive the comm until its stream passed
 * the call. Every rank's request ends (any status: the comm is gone
 * midway), every stream runs out. Several rounds: the window is narrow. */
#define DESTROY_LEN 65536
#define DESTROY_ROUNDS 6
void ct_stream_destroy(mt_ctx_t *c)
{
    if (!ct_fake_direct(c, "stream form, a comm destroyed with its call queued"))
        return;
    for (int round = 0; round < DESTROY_ROUNDS; round++) {
        uccl_comm_t *comm = NULL;
        void *ds = NULL, *dr = NULL, *s = ct_stream();
        uccl_req_t *req = NULL;
        uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = DESTROY_LEN};
        uccl_status_t st;

        if (!case_setup(c, &comm, DESTROY_LEN, round, &ds, &dr, NULL)) {
            round = DESTROY_ROUNDS;
        } else {
            a.sendbuf = ds;
            a.recvbuf = dr;
            ct_path_setup(c, comm, &a, s);
            mt_expect(c, uccl_coll_post_stream(comm, &a, s, &req), UCCL_OK, "the second call (a plan hit)");
            if (c->rank == 0) {
                mt_expect(c, uccl_comm_destroy(comm), UCCL_OK, "comm destroyed with the call queued");
                comm = NULL;
            }
            st = req != NULL ? uccl_wait(req, -1) : UCCL_OK; /* any status, but an end */
            (void)st;
            mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "the stream runs out");
        }
        ct_case_done(c, comm, req, ds, dr);
    }
}

/* An allgather on the test's stream, every peer on the direct path, where
 * every rank writes into every peer and waits for every peer: the most
 * stream operations a call enqueues (coll-gpu-stream-np8.sh: 8 ranks,
 * as on a host of 8 GPUs). Bytes compared, twice (an exchange, a hit). */
#define WIDE_LEN 1024
void ct_stream_wide(mt_ctx_t *c)
{
    size_t rlen = (size_t)c->size * WIDE_LEN;
    void *ds = NULL, *dr = NULL, *s = ct_stream();
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = WIDE_LEN};
    uccl_coll_stats_t s0, s1;

    if (!ct_fake_direct(c, "stream form, every peer written and waited for"))
        return;
    if ((ds = send_buf(c, WIDE_LEN, 5)) == NULL ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    a.sendbuf = ds;
    a.recvbuf = dr;
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "stats");
    for (int i = 0; i < 2; i++) {
        mt_expect(c, uccl_gpu_memset(dr, 0, rlen), UCCL_OK, "receive buffer cleared");
        mt_expect(c, uccl_coll_post_stream(c->comm, &a, s, NULL), UCCL_OK, "uccl_coll_post_stream");
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
        check_gather(c, dr, WIDE_LEN, 5, i == 0 ? "first call" : "second call");
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "stats");
    if (s1.stream_direct - s0.stream_direct != 2)
        mt_fail(c, "%llu of 2 calls took the direct path",
                (unsigned long long)(s1.stream_direct - s0.stream_direct));
out:
    mt_uccl_barrier(c);
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
}
#endif

/* The direct stream path of the stream-ordered collectives (coll/stream.c)
 * in t_coll_gpu: where every peer is reached by gpu_ipc (the fake GPU build
 * and one GPU shared by two processes), stream calls are enqueued whole on
 * the caller's stream; UCCL_COLL_STREAM=hold turns the path off (then
 * these cases check the hold path the same way). Stubs in t_coll. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_test.h"
#ifdef T_COLL_GPU
#include "gpu/gpu.h"
#endif

#ifndef T_COLL_GPU
void ct_stream_direct(mt_ctx_t *c) { (void)c; }
void ct_stream_dead(mt_ctx_t *c) { (void)c; }
void ct_stream_cache(mt_ctx_t *c) { (void)c; }
void ct_stream_stats(mt_ctx_t *c) { (void)c; }
void ct_stream_fault(mt_ctx_t *c) { (void)c; }
#else

/* The direct path is on (UCCL_COLL_STREAM) and every peer is reached by
 * gpu_ipc (not so across emulated hosts): stream calls on GPU memory take it. */
static bool direct_expected(mt_ctx_t *c)
{
    const char *v = getenv("UCCL_COLL_STREAM");
    uccl_conn_attr_t attr;

    if (v != NULL && strcmp(v, "hold") == 0)
        return false;
    for (int q = 0; q < c->size; q++)
        if (q != c->rank && (uccl_conn_query(uccl_comm_conn(c->comm, q), &attr) != UCCL_OK ||
                             strcmp(attr.gpu_transport, "gpu_ipc") != 0))
            return false;
    return true;
}

/* Every rank past its calls; the comm's cached plans dropped, the buffers freed. */
static void bufs_done(mt_ctx_t *c, void *ds, void *dr[2])
{
    mt_uccl_barrier(c);
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr[0]);
    uccl_mem_free(c->engine, dr[1]);
}

static uint8_t pat(int r, int round, size_t k)
{
    return (uint8_t)(r * 29 + round * 7 + (int)k * 3 + 1);
}

/* SD_ROUNDS back-to-back calls (allgather, alltoall, bcast in turn) on
 * the stream with no host wait between them, alternating two receive
 * buffers: each round's producer writes new bytes into the send buffer
 * and a consumer copies the result out, both on the stream; all rounds
 * are compared at the end. A peer that wrote into a receive buffer its
 * owner's stream still reads, or read a send buffer before its producer,
 * shows up as wrong bytes. With UCCL_COLL_STREAM_SEQ0 near 2^32 the
 * sequence numbers wrap on the way (coll-gpu-stream-np2.sh). */
#define SD_LEN 1031
#define SD_ROUNDS 48
void ct_stream_direct(mt_ctx_t *c)
{
    int n = c->size, me = c->rank;
    size_t rlen = (size_t)n * SD_LEN, slen = (size_t)n * SD_LEN;
    uint8_t *src = malloc((size_t)SD_ROUNDS * slen), *back = malloc((size_t)SD_ROUNDS * rlen);
    void *ds = NULL, *dr[2] = {NULL, NULL}, *dout = NULL, *s = ct_stream();
    uccl_coll_stats_t st0, st1;
    uccl_req_t *last = NULL;

    if (src == NULL || back == NULL || uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, slen, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[0]) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[1]) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, (size_t)SD_ROUNDS * rlen, &dout) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    for (int i = 0; i < SD_ROUNDS; i++)
        for (size_t k = 0; k < slen; k++)
            src[(size_t)i * slen + k] = pat(me, i, k);
    mt_expect(c, uccl_comm_coll_stats(c->comm, &st0), UCCL_OK, "stats");
    for (int i = 0; i < SD_ROUNDS; i++) {
        uccl_coll_args_t a = {.op = i % 3 == 0 ? UCCL_COLL_ALLGATHER
                                    : i % 3 == 1 ? UCCL_COLL_ALLTOALL : UCCL_COLL_BCAST,
                              .sendbuf = ds, .recvbuf = dr[i % 2], .count = SD_LEN};
        uccl_status_t st;
        if (a.op == UCCL_COLL_BCAST) { /* root i % n broadcasts its round's bytes */
            a.field_mask = UCCL_COLL_ARG_ROOT;
            a.root = i % n;
            a.sendbuf = NULL;
            a.count = rlen;
        }
        mt_expect(c, uccl_gpu_memcpy_async(a.op == UCCL_COLL_BCAST ? dr[i % 2] : ds, src + (size_t)i * slen,
                                           slen, s),
                  UCCL_OK, "producer");
        st = uccl_coll_post_stream(c->comm, &a, s, i == SD_ROUNDS - 1 ? &last : NULL);
        mt_expect(c, st, UCCL_OK, "uccl_coll_post_stream, back to back");
        if (st != UCCL_OK)
            break;
        mt_expect(c, uccl_gpu_memcpy_async((char *)dout + (size_t)i * rlen, dr[i % 2], rlen, s), UCCL_OK,
                  "consumer");
    }
    if (last != NULL) {
        mt_expect(c, uccl_wait(last, -1), UCCL_OK, "the last call's request");
        uccl_req_free(last);
    }
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "the stream after the rounds");
    mt_expect(c, uccl_comm_coll_stats(c->comm, &st1), UCCL_OK, "stats");
    if (direct_expected(c) && st1.stream_direct - st0.stream_direct != SD_ROUNDS)
        mt_fail(c, "%llu of %d stream calls took the direct path (every peer is on gpu_ipc)",
                (unsigned long long)(st1.stream_direct - st0.stream_direct), SD_ROUNDS);
    if (direct_expected(c)) { /* the first call of each distinct (op, buffer, root) exchanges, no other */
        int keys = 0;
        for (int i = 0; i < SD_ROUNDS; i++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = j % 3 == i % 3 && j % 2 == i % 2 && (i % 3 != 2 || j % n == i % n);
            keys += !seen;
        }
        if (st1.stream_exchanges - st0.stream_exchanges != (uint64_t)keys ||
            st1.stream_plan_hits - st0.stream_plan_hits != (uint64_t)(SD_ROUNDS - keys))
            mt_fail(c, "stream plan cache: %llu exchanges, %llu hits; want %d and %d",
                    (unsigned long long)(st1.stream_exchanges - st0.stream_exchanges),
                    (unsigned long long)(st1.stream_plan_hits - st0.stream_plan_hits), keys,
                    SD_ROUNDS - keys);
        else if (c->rank == 0)
            printf("# stream plan cache: %d calls, %d exchanged (first on their arguments), %d cached: "
                   "no token, no descriptor\n", SD_ROUNDS, keys, SD_ROUNDS - keys);
    }
    mt_expect(c, uccl_copy(c->engine, back, dout, (size_t)SD_ROUNDS * rlen), UCCL_OK, "results back");
    for (int i = 0; i < SD_ROUNDS; i++) {
        const uint8_t *got = back + (size_t)i * rlen;
        for (size_t k = 0; k < rlen; k++) {
            int r = (int)(k / SD_LEN);
            size_t j = k % SD_LEN;
            uint8_t want = i % 3 == 0   ? pat(r, i, j)
                           : i % 3 == 1 ? pat(r, i, (size_t)me * SD_LEN + j)
                                        : pat(i % n, i, k);
            if (got[k] != want) {
                mt_fail(c, "round %d (%s) byte %zu: 0x%02x, want 0x%02x", i,
                        i % 3 == 0 ? "allgather" : i % 3 == 1 ? "alltoall" : "bcast", k, got[k], want);
                i = SD_ROUNDS;
                break;
            }
        }
    }
out:
    bufs_done(c, ds, dr);
    uccl_mem_free(c->engine, dout);
    free(src);
    free(back);
}

/* The stream plan cache (coll/stream_cache.c) when the ranks' arguments
 * disagree with what was cached: an allgather on (ds, dr[0]) three times
 * (1 exchange, 2 hits); rank 0 alone on dr[1] (an exchange: it has no
 * plan there); everyone back on their first buffers: rank 0's plan is of
 * the first exchange, the others' of the second, so they exchange again,
 * then hit; the last rank frees its receive buffer and takes a new one
 * (maybe at the same address): an exchange. Every round's bytes compared. */
#define SC_LEN 3001
static void sc_round(mt_ctx_t *c, void *s, void *ds, void *dr, int round, uint64_t want_x, uint64_t want_h)
{
    int n = c->size;
    size_t rlen = (size_t)n * SC_LEN;
    uint8_t *src = malloc(SC_LEN), *back = malloc(rlen);
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = ds, .recvbuf = dr, .count = SC_LEN};
    uccl_coll_stats_t s0, s1;

    if (src == NULL || back == NULL) {
        mt_fail(c, "memory");
        goto out;
    }
    for (size_t k = 0; k < SC_LEN; k++)
        src[k] = pat(c->rank, round, k);
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "stats");
    mt_expect(c, uccl_gpu_memcpy_async(ds, src, SC_LEN, s), UCCL_OK, "producer");
    mt_expect(c, uccl_coll_post_stream(c->comm, &a, s, NULL), UCCL_OK, "uccl_coll_post_stream");
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
    mt_expect(c, uccl_copy(c->engine, back, dr, rlen), UCCL_OK, "results back");
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "stats");
    if (s1.stream_exchanges - s0.stream_exchanges != want_x || s1.stream_plan_hits - s0.stream_plan_hits != want_h)
        mt_fail(c, "round %d: %llu exchanges, %llu plan hits; want %llu, %llu", round,
                (unsigned long long)(s1.stream_exchanges - s0.stream_exchanges),
                (unsigned long long)(s1.stream_plan_hits - s0.stream_plan_hits), (unsigned long long)want_x,
                (unsigned long long)want_h);
    for (size_t k = 0; k < rlen; k++)
        if (back[k] != pat((int)(k / SC_LEN), round, k % SC_LEN)) {
            mt_fail(c, "round %d byte %zu: 0x%02x, want 0x%02x", round, k, back[k],
                    pat((int)(k / SC_LEN), round, k % SC_LEN));
            break;
        }
out:
    free(src);
    free(back);
}

void ct_stream_cache(mt_ctx_t *c)
{
    int n = c->size, me = c->rank, round = 0;
    size_t rlen = (size_t)n * SC_LEN;
    void *ds = NULL, *dr[2] = {NULL, NULL}, *s = ct_stream();

    if (n < 2 || !direct_expected(c)) {
        mt_skip(c, "stream plan cache (%s)", n < 2 ? "one rank" : "not every peer on the direct path");
        return;
    }
    if (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, SC_LEN, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[0]) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[1]) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    sc_round(c, s, ds, dr[0], round++, 1, 0);
    sc_round(c, s, ds, dr[0], round++, 0, 1);
    sc_round(c, s, ds, dr[0], round++, 0, 1);
    sc_round(c, s, ds, dr[me == 0], round++, 1, 0); /* rank 0 on another buffer */
    sc_round(c, s, ds, dr[0], round++, 1, 0);       /* plans of different exchanges */
    sc_round(c, s, ds, dr[0], round++, 0, 1);
    mt_uccl_barrier(c);
    if (me == n - 1) { /* freed and allocated again: its plan goes */
        uccl_mem_free(c->engine, dr[0]);
        dr[0] = NULL;
        if (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr[0]) != UCCL_OK) {
            mt_fail(c, "a new receive buffer");
            dr[0] = NULL;
        }
    }
    mt_uccl_barrier(c);
    if (dr[0] != NULL) {
        sc_round(c, s, ds, dr[0], round++, 1, 0);
        sc_round(c, s, ds, dr[0], round++, 0, 1);
    }
out:
    bufs_done(c, ds, dr);
}

/* The comm's counters when a stream call's plan agreement (one internal
 * 8-byte host allgather, coll/stream_cache.c: it must not count) runs with
 * a non-blocking DIRECT allgather of host memory in flight on the same
 * comm. That collective posts its ready tokens (and counts the descriptors
 * they carry, or reuse) only when progress first reaches it; on rank 0
 * that is inside the agreement, which waits for the other ranks (they come
 * 100 ms late). Each round checks the counters exactly: the two calls, the
 * descriptors sent on the first round (the fresh receive buffer's, one per
 * peer; the sink's went in the warm-up) and reused (the sink's, then both),
 * the plan cache hit of the second round, and the bytes. */
#define SS_LEN 512
static void ss_expect(mt_ctx_t *c, const char *what, uint64_t got, uint64_t want, int round)
{
    if (got != want)
        mt_fail(c, "round %d: %s went up by %llu, want %llu", round, what, (unsigned long long)got,
                (unsigned long long)want);
}

void ct_stream_stats(mt_ctx_t *c)
{
    int n = c->size, me = c->rank;
    size_t rlen = (size_t)n * SS_LEN;
    const char *sc = getenv("UCCL_COLL_STREAM_CACHE");
    void *ds = NULL, *dr = NULL, *s = ct_stream();
    uint8_t *hs = malloc(SS_LEN), *hr[2] = {malloc(rlen), malloc(rlen)};
    uccl_coll_args_t sa = {.op = UCCL_COLL_ALLGATHER, .count = SS_LEN};
    uccl_coll_args_t ha = {.field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER,
                           .algo = UCCL_COLL_ALGO_DIRECT, .sendbuf = hs, .count = SS_LEN};

    if (n < 2 || !direct_expected(c) || (sc != NULL && strcmp(sc, "0") == 0)) {
        mt_skip(c, "stream agreement counters (%s)",
                n < 2 ? "one rank" : sc != NULL && strcmp(sc, "0") == 0 ? "UCCL_COLL_STREAM_CACHE=0"
                                                                       : "not every peer on the direct path");
        goto out;
    }
    if (hs == NULL || hr[0] == NULL || hr[1] == NULL ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, SS_LEN, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    sa.sendbuf = ds;
    sa.recvbuf = dr;
    for (size_t k = 0; k < SS_LEN; k++)
        hs[k] = pat(me, 99, k);
    /* warm-up: the stream plan kept; the sink's descriptor sent to every peer */
    for (int i = 0; i < 2; i++)
        mt_expect(c, uccl_coll_post_stream(c->comm, &sa, s, NULL), UCCL_OK, "warm-up stream call");
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
    ha.recvbuf = hr[0];
    mt_expect(c, uccl_coll(c->comm, &ha), UCCL_OK, "warm-up DIRECT allgather");
    for (int round = 0; round < 2; round++) { /* every rank both rounds, failed or not */
        uccl_coll_stats_t s0, s1;
        uccl_req_t *req = NULL;
        ha.recvbuf = hr[1];
        memset(hr[1], 0, rlen);
        MPI_Barrier(MPI_COMM_WORLD); /* not a uccl call: counters untouched */
        mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "stats");
        mt_expect(c, uccl_coll_post(c->comm, &ha, &req), UCCL_OK, "non-blocking DIRECT allgather");
        if (me != 0)
            usleep(100000);
        mt_expect(c, uccl_coll_post_stream(c->comm, &sa, s, NULL), UCCL_OK, "stream call (a plan hit)");
        if (req != NULL) {
            mt_expect(c, uccl_wait(req, -1), UCCL_OK, "the DIRECT allgather");
            uccl_req_free(req);
        }
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
        mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "stats");
        ss_expect(c, "calls", s1.calls - s0.calls, 2, round);
        ss_expect(c, "stream_plan_hits", s1.stream_plan_hits - s0.stream_plan_hits, 1, round);
        ss_expect(c, "stream_exchanges", s1.stream_exchanges - s0.stream_exchanges, 0, round);
        ss_expect(c, "plan_hits", s1.plan_hits - s0.plan_hits, (uint64_t)round, round);
        ss_expect(c, "desc_sent", s1.desc_sent - s0.desc_sent, round == 0 ? (uint64_t)(n - 1) : 0, round);
        ss_expect(c, "desc_reused", s1.desc_reused - s0.desc_reused, (uint64_t)(n - 1) * (round == 0 ? 1 : 2),
                  round);
        for (size_t k = 0; k < rlen; k++)
            if (hr[1][k] != pat((int)(k / SS_LEN), 99, k % SS_LEN)) {
                mt_fail(c, "round %d byte %zu: 0x%02x, want 0x%02x", round, k, hr[1][k],
                        pat((int)(k / SS_LEN), 99, k % SS_LEN));
                break;
            }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
out:
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
    free(hs);
    free(hr[0]);
    free(hr[1]);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Every rank on the direct path and the fake backend (which alone can
 * hold a stream as a dead process's, or inject a fault); else one line
 * the case skipped (mt_skip: "SKIP: NAME (why)") and false. */
bool ct_fake_direct(mt_ctx_t *c, const char *name)
{
    int n = c->size, direct = n > 1 && direct_expected(c), all = 0;

    /* every rank the same answer */
    MPI_Allreduce(&direct, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (all && strcmp(uccl_gpu_backend(), "fake") == 0)
        return true;
    mt_skip(c, "%s (%s)", name, n < 2 ? "one rank"
            : !all ? "not every peer on the direct path (UCCL_COLL_STREAM=hold, or other hosts)"
                   : "fake GPU backend only");
    return false;
}

/* coll_test.h */
void ct_path_setup(mt_ctx_t *c, uccl_comm_t *comm, const uccl_coll_args_t *a, void *s)
{
    uccl_req_t *req = NULL;

    mt_expect(c, uccl_coll_post_stream(comm, a, s, &req), UCCL_OK, "first stream call");
    if (req != NULL)
        mt_expect(c, uccl_wait(req, -1), UCCL_OK, "its request");
    uccl_req_free(req);
    mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The end of a case on its own comm: its request, then (every rank) the
 * comm and the two buffers (coll_test.h). */
void ct_case_done(mt_ctx_t *c, uccl_comm_t *comm, uccl_req_t *req, void *ds, void *dr)
{
    if (req != NULL)
        uccl_req_free(req);
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
}

/* A rank gone with its part of a direct stream call queued but never run
 * (the last rank posts behind a gate on its stream, a wait on a device
 * word nobody sets yet, then closes its connections): a stream wait cannot time out, so the survivors' requests must
 * see the failed connection, write the flags themselves and let their
 * streams go on, within UCCL_TIMEOUT_MS; the next stream call on that
 * comm fails at once. Afterwards the last rank runs its stream out. */
#define DEAD_LEN 4096
void ct_stream_dead(mt_ctx_t *c)
{
    /* on the test's engine: destroying the comm closes its connections,
     * and the leaver's queued event stays with an engine that lives on */
    uccl_comm_params_t cp = {.field_mask = UCCL_COMM_PARAM_ENGINE, .engine = c->engine};
    int n = c->size, last = n - 1;
    const char *tm = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = tm ? atoi(tm) : 60000;
    uccl_comm_t *comm = NULL;
    void *ds = NULL, *dr = NULL, *gate = NULL, *s = ct_stream();
    uint32_t zero = 0, one = 1;
    uccl_req_t *req = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = DEAD_LEN};
    struct timespec t0;
    uccl_status_t st;

    /* on a GPU the leaver's stream would run on by itself into mappings its
     * engine closed (a fault): the fake backend's streams run only when
     * driven, which is what a dead process's do (a hold-path leaver would
     * close its connections while its stream waits on the engine: not this
     * test) */
    if (!ct_fake_direct(c, "stream form, a rank gone"))
        return;
    if (uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, &comm) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, DEAD_LEN, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, (size_t)n * DEAD_LEN, &dr) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, sizeof(zero), &gate) != UCCL_OK ||
        uccl_copy(c->engine, gate, &zero, sizeof(zero)) != UCCL_OK) {
        mt_fail(c, "a second comm and buffers");
        goto out;
    }
    a.sendbuf = ds;
    a.recvbuf = dr;
    ct_path_setup(c, comm, &a, s);
    if (c->rank == last) /* nothing after this runs until the gate opens */
        mt_expect(c, uccl_stream_wait_value(c->engine, s, gate, 1, 4), UCCL_OK, "the gate");
    st = uccl_coll_post_stream(comm, &a, s, c->rank == last ? NULL : &req);
    mt_expect(c, st, UCCL_OK, "the call the last rank leaves");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's part is queued */
    if (c->rank == last) {
        /* gone as a dead process is: its connections drop, its regions stay
         * registered (no revoke: the survivors' mappings stay); its stream is
         * not driven until the others are done */
        for (int q = 0; q < n; q++)
            if (q != last)
                uccl_conn_close(uccl_comm_conn(comm, q));
        MPI_Barrier(MPI_COMM_WORLD);
        mt_expect(c, uccl_copy(c->engine, gate, &one, sizeof(one)), UCCL_OK, "the gate opens");
        /* the survivors wrote its flags, and the mappings it was handed
         * outlive the connections: its part runs out (UCCL_ERR_IO would be
         * a copy into a mapping closed under it) */
        st = uccl_gpu_stream_sync(s);
        if (st != UCCL_OK && st != UCCL_ERR_IO)
            mt_fail(c, "the leaver's stream, run out afterwards: %s", uccl_status_name(st));
    } else {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = req != NULL ? uccl_wait(req, 3 * timeout_ms) : UCCL_ERR_INVALID_PARAM;
        if (st != UCCL_ERR_PEER_FAILED && st != UCCL_ERR_TIMEOUT)
            mt_fail(c, "the request of a call with a rank gone: %s", uccl_status_name(st));
        if (ms_since(&t0) > timeout_ms + 2000.0)
            mt_fail(c, "the failure took %.0f ms (UCCL_TIMEOUT_MS %d)", ms_since(&t0), timeout_ms);
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "the stream goes on after the failure");
        st = uccl_coll_post_stream(comm, &a, s, NULL);
        if (st == UCCL_OK)
            mt_fail(c, "a stream call on the broken comm succeeded");
        MPI_Barrier(MPI_COMM_WORLD);
    }
out:
    ct_case_done(c, comm, req, ds, dr);
    uccl_mem_free(c->engine, gate);
}

/* A fault that the runtime keeps for the whole context (the fake backend's
 * sticky fault, as a kernel's illegal address on CUDA), queued on every
 * rank's stream ahead of a direct stream call: no stream ever writes the
 * call's word, and no peer connection fails. The request must end with the
 * fault's status (UCCL_ERR_IO) on every rank well before UCCL_TIMEOUT_MS
 * (learnt from the engine's own stream: without that it ended with
 * UCCL_ERR_TIMEOUT at the timeout); the next stream call on the comm must
 * fail at once, and a host-memory collective on that comm still works.
 * The context stays lost, so this is a run's last GPU case. */
#define FAULT_LEN 4096
void ct_stream_fault(mt_ctx_t *c)
{
    uccl_comm_params_t cp = {.field_mask = UCCL_COMM_PARAM_ENGINE, .engine = c->engine};
    int n = c->size;
    const char *tm = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = tm ? atoi(tm) : 60000;
    uccl_comm_t *comm = NULL;
    uccl_gpu_stream_t s = NULL;
    void *ds = NULL, *dr = NULL;
    uint8_t hs[8], *hr = NULL;
    uccl_req_t *req = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = FAULT_LEN};
    struct timespec t0;
    uccl_status_t st;
    double ms;

    if (!ct_fake_direct(c, "stream form, a sticky fault"))
        return;
    if (uccl_comm_init_mpi(MPI_COMM_WORLD, &cp, &comm) != UCCL_OK || uccl_gpu_stream_create(&s) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, FAULT_LEN, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, (size_t)n * FAULT_LEN, &dr) != UCCL_OK ||
        (hr = malloc((size_t)n * sizeof(hs))) == NULL) {
        mt_fail(c, "a second comm, a stream and buffers");
        goto out;
    }
    a.sendbuf = ds;
    a.recvbuf = dr;
    ct_path_setup(c, comm, &a, s);
    mt_expect(c, uccl_gpu_fault_inject(s), UCCL_OK, "the fault queued on the stream");
    mt_expect(c, uccl_coll_post_stream(comm, &a, s, &req), UCCL_OK, "the call behind the fault");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = req != NULL ? uccl_wait(req, 3 * timeout_ms) : UCCL_ERR_INVALID_PARAM;
    ms = ms_since(&t0);
    if (st != UCCL_ERR_IO)
        mt_fail(c, "the request behind a sticky fault: %s after %.0f ms, want UCCL_ERR_IO", uccl_status_name(st),
                ms);
    if (ms > timeout_ms / 5.0)
        mt_fail(c, "the fault took %.0f ms to fail the request (UCCL_TIMEOUT_MS %d)", ms, timeout_ms);
    uccl_req_free(req);
    req = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = uccl_coll_post_stream(comm, &a, s, &req);
    if (st == UCCL_OK && req != NULL)
        st = uccl_wait(req, 3 * timeout_ms);
    if (st == UCCL_OK)
        mt_fail(c, "a stream call after the fault succeeded");
    if (ms_since(&t0) > 1000.0)
        mt_fail(c, "a stream call after the fault took %.0f ms to fail", ms_since(&t0));
    /* the comm itself goes on for host memory */
    memset(hs, c->rank + 1, sizeof(hs));
    mt_expect(c, uccl_allgather(comm, hs, hr, sizeof(hs)), UCCL_OK, "host-memory allgather after the fault");
    for (size_t k = 0; k < (size_t)n * sizeof(hs); k++)
        if (hr[k] != (uint8_t)(k / sizeof(hs) + 1)) {
            mt_fail(c, "host allgather after the fault, byte %zu: %u", k, hr[k]);
            break;
        }
out:
    ct_case_done(c, comm, req, ds, dr);
    if (s != NULL)
        uccl_gpu_stream_destroy(s);
    free(hr);
}
#endif

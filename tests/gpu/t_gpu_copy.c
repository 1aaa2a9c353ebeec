/* The public local-memory calls: uccl_mem_query / alloc / free, uccl_copy
 * and uccl_copy_post between host and GPU memory in every direction (bytes
 * compared, offsets not aligned), their refusals, and stream ordering:
 * uccl_stream_event completes only after the work queued on the stream
 * before it, and uccl_stream_hold keeps the stream's later work queued
 * until uccl_stream_release (on the fake backend the copies run lazily, so
 * a missing wait shows as an early copy); a stream with nothing left to run
 * gives an event request complete at once; uccl_stream_ops keeps its
 * order and refuses a bad op whole. Single process. Without a GPU
 * runtime or device only host copies and the refusals of GPU work are
 * checked, then "SKIP: no GPU" (77). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "check1.h"

#define LEN (1u << 20)

static void fill(unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + salt + (i >> 9));
}

static int same(const unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + salt + (i >> 9)))
            return 0;
    return 1;
}

static void check_query(uccl_engine_t *e, void *dev)
{
    static char host[64];
    uccl_mem_type_t t = UCCL_MEM_CUDA;
    int d = 5;
    void *p = NULL;

    CHECK(uccl_mem_query(host, &t, &d) == UCCL_OK && t == UCCL_MEM_HOST && d == -1,
          "static host memory is host (type %d device %d)", (int)t, d);
    CHECK(uccl_mem_query((char *)dev + 100, &t, &d) == UCCL_OK && t != UCCL_MEM_HOST && d >= 0,
          "a pointer inside a GPU allocation is GPU memory (type %d device %d)", (int)t, d);
    CHECK(uccl_mem_query(host, NULL, &d) == UCCL_ERR_INVALID_PARAM, "NULL type refused");
    CHECK(uccl_mem_alloc(e, UCCL_MEM_HOST, 0, &p) == UCCL_ERR_INVALID_PARAM, "length 0 refused");
    CHECK(uccl_mem_alloc(e, UCCL_MEM_HOST, 10, NULL) == UCCL_ERR_INVALID_PARAM, "NULL out refused");
    CHECK(uccl_mem_alloc(e, (uccl_mem_type_t)9, 10, &p) == UCCL_ERR_INVALID_PARAM,
          "unknown type refused");
    CHECK(uccl_mem_alloc(NULL, UCCL_MEM_HOST, 10, &p) == UCCL_ERR_INVALID_HANDLE, "NULL engine");
    uccl_mem_query(dev, &t, NULL);
    CHECK(uccl_mem_alloc(e, t == UCCL_MEM_CUDA ? UCCL_MEM_ROCM : UCCL_MEM_CUDA, 10, &p) ==
              UCCL_ERR_UNSUPPORTED, "the other vendor's memory is refused");
    CHECK(uccl_mem_alloc(e, UCCL_MEM_HOST, 100, &p) == UCCL_OK && ((uintptr_t)p & 4095) == 0,
          "host allocation is page aligned");
    CHECK(uccl_mem_query(p, &t, NULL) == UCCL_OK && t == UCCL_MEM_HOST, "and host memory");
    CHECK(uccl_mem_free(e, p) == UCCL_OK, "free host");
    CHECK(uccl_copy(e, NULL, host, 1) == UCCL_ERR_INVALID_PARAM, "NULL dst refused");
    CHECK(uccl_copy(e, NULL, NULL, 0) == UCCL_OK, "an empty copy of NULLs is fine");
    CHECK(uccl_copy_post(e, host, host + 1, 1, NULL) == UCCL_ERR_INVALID_PARAM, "NULL req");
}

/* Every direction: h->d, d->d (other offsets), d->h; blocking and posted. */
static void check_copies(uccl_engine_t *e, unsigned char *d1, unsigned char *d2, int posted)
{
    unsigned char *h = malloc(LEN), *back = malloc(LEN);
    size_t n = LEN - 4096 - 3;
    uccl_req_t *req = NULL;
    size_t bytes = 0;

    fill(h, LEN, 11u + (unsigned)posted);
    memset(back, 0, LEN);
    if (!posted) {
        CHECK(uccl_copy(e, d1 + 1, h + 3, n) == UCCL_OK, "host -> GPU");
        CHECK(uccl_copy(e, d2 + 4096, d1 + 1, n) == UCCL_OK, "GPU -> GPU");
        CHECK(uccl_copy(e, back, d2 + 4096, n) == UCCL_OK, "GPU -> host");
    } else {
        CHECK(uccl_copy_post(e, d1 + 1, h + 3, n, &req) == UCCL_OK && uccl_wait(req, -1) == UCCL_OK,
              "posted host -> GPU");
        CHECK(uccl_req_bytes(req, &bytes) == UCCL_OK && bytes == n, "bytes %zu of %zu", bytes, n);
        uccl_req_free(req);
        CHECK(uccl_copy_post(e, d2 + 4096, d1 + 1, n, &req) == UCCL_OK &&
                  uccl_wait(req, -1) == UCCL_OK, "posted GPU -> GPU");
        uccl_req_free(req);
        CHECK(uccl_copy_post(e, back, d2 + 4096, n, &req) == UCCL_OK &&
                  uccl_wait(req, -1) == UCCL_OK, "posted GPU -> host");
        uccl_req_free(req);
        CHECK(uccl_copy_post(e, back + n, h, 3, &req) == UCCL_OK && uccl_wait(req, 0) == UCCL_OK,
              "a posted host copy is complete at once");
        uccl_req_free(req);
    }
    CHECK(memcmp(back, h + 3, n) == 0, "%s round trip host -> GPU -> GPU -> host",
          posted ? "posted" : "blocking");
    free(h);
    free(back);
}

/* Work before uccl_stream_event gates it; a hold keeps later work queued. */
static uccl_gpu_stream_t check_stream(uccl_engine_t *e, unsigned char *d1, unsigned char *d2)
{
    unsigned char *h = malloc(LEN), *back = malloc(LEN);
    uccl_gpu_stream_t s;
    uccl_gpu_event_t ev;
    uccl_stream_hold_t *hold = NULL;
    uccl_req_t *gate = NULL;
    uccl_status_t st;
    int spins = 0;

    if (uccl_gpu_stream_create(&s) != UCCL_OK || uccl_gpu_event_create(&ev, 0) != UCCL_OK) {
        CHECK(0, "stream and event");
        return NULL;
    }
    fill(h, LEN, 77);
    uccl_copy(e, d1, h, LEN);
    /* producer on the stream, then gate + hold, then consumer d1 -> d2 */
    fill(h, LEN, 78);
    CHECK(uccl_gpu_memcpy_async(d1, h, LEN, s) == UCCL_OK, "producer");
    CHECK(uccl_stream_event(e, s, &gate) == UCCL_OK, "uccl_stream_event");
    st = uccl_stream_hold(e, s, &hold);
    if (st == UCCL_ERR_UNSUPPORTED) {
        printf("# no stream memory operations here: hold not checked\n");
        uccl_wait(gate, -1);
        uccl_req_free(gate);
        uccl_gpu_stream_sync(s);
        goto out;
    }
    CHECK(st == UCCL_OK, "uccl_stream_hold: %s", uccl_status_name(st));
    CHECK(uccl_gpu_memcpy_async(d2, d1, LEN, s) == UCCL_OK, "consumer");
    CHECK(uccl_gpu_event_record(ev, s) == UCCL_OK, "event after the consumer");
    CHECK(uccl_wait(gate, -1) == UCCL_OK, "the gate completes");
    uccl_req_free(gate);
    uccl_copy(e, back, d1, LEN);
    CHECK(same(back, LEN, 78), "once the gate is done the producer's bytes are there");
    for (int i = 0; i < 5; i++) /* the consumer stays queued behind the hold */
        CHECK(uccl_gpu_event_query(ev) == UCCL_INPROGRESS, "query %d: work after a hold ran", i);
    /* what the collective would write while it holds the stream */
    fill(h, LEN, 79);
    uccl_copy(e, d1, h, LEN);
    CHECK(uccl_stream_release(hold) == UCCL_OK, "release");
    while ((st = uccl_gpu_event_query(ev)) == UCCL_INPROGRESS && spins++ < 10000000)
        ;
    CHECK(st == UCCL_OK, "the consumer runs after the release: %s", uccl_status_name(st));
    uccl_copy(e, back, d2, LEN);
    CHECK(same(back, LEN, 79), "the consumer copied what was there at the release");
    CHECK(uccl_stream_release(NULL) == UCCL_ERR_INVALID_HANDLE, "NULL hold");
    CHECK(uccl_stream_event(e, s, NULL) == UCCL_ERR_INVALID_PARAM, "NULL req");
    /* a hold left unreleased: the engine releases it when destroyed */
    CHECK(uccl_stream_hold(e, s, &hold) == UCCL_OK, "a hold for the engine to release");
out:
    uccl_gpu_event_destroy(ev);
    free(h);
    free(back);
    return s;
}

/* A stream with nothing left to run gives uccl_stream_event a request
 * complete at once (no event, no progress: uccl_req_bytes answers); one with
 * work queued does not, or only once that work ran (the fake backend's
 * copies wait for a waiter, so there it is never at once). */
static void check_stream_idle(uccl_engine_t *e, unsigned char *d1)
{
    unsigned char *h = malloc(LEN), *back = malloc(LEN);
    uccl_gpu_stream_t s;
    uccl_req_t *r = NULL;
    size_t n = 1;
    uccl_status_t st;
    int at_once;

    if (uccl_gpu_stream_create(&s) != UCCL_OK) {
        CHECK(0, "stream");
        return;
    }
    CHECK(uccl_stream_query(e, s) == UCCL_OK, "uccl_stream_query: a new stream has run everything");
    CHECK(uccl_stream_query(NULL, s) == UCCL_ERR_INVALID_HANDLE, "uccl_stream_query: NULL engine");
    CHECK(uccl_stream_query(e, NULL) == UCCL_OK, "uccl_stream_query: the engine's own stream, idle");
    CHECK(uccl_stream_event(e, s, &r) == UCCL_OK, "event of a new stream");
    CHECK(uccl_req_bytes(r, &n) == UCCL_OK && n == 0, "a new stream's event is complete at once");
    CHECK(uccl_wait(r, -1) == UCCL_OK, "and succeeded");
    uccl_req_free(r);
    fill(h, LEN, 81);
    CHECK(uccl_gpu_memcpy_async(d1, h, LEN, s) == UCCL_OK, "producer");
    CHECK(uccl_stream_event(e, s, &r) == UCCL_OK, "event behind the producer");
    at_once = uccl_req_bytes(r, &n) == UCCL_OK;
    /* the query agrees: work queued (INPROGRESS; always on the fake
     * backend, whose copies wait for a waiter) unless it ran */
    st = uccl_stream_query(e, s);
    if (strcmp(uccl_gpu_backend(), "fake") == 0)
        CHECK(st == UCCL_INPROGRESS, "uccl_stream_query behind a queued copy: %s",
              uccl_status_name(st));
    else
        CHECK(st == UCCL_OK || (!at_once && st == UCCL_INPROGRESS),
              "uccl_stream_query behind the producer: %s", uccl_status_name(st));
    if (at_once) { /* a GPU may have run the copy already: then it is there */
        uccl_copy(e, back, d1, LEN);
        CHECK(same(back, LEN, 81), "complete at once with the producer's copy not run");
    }
    CHECK(uccl_wait(r, -1) == UCCL_OK, "the event behind the producer completes");
    uccl_req_free(r);
    uccl_copy(e, back, d1, LEN);
    CHECK(same(back, LEN, 81), "the producer's bytes once its event completed");
    CHECK(uccl_stream_query(e, s) == UCCL_OK, "uccl_stream_query: the drained stream");
    CHECK(uccl_stream_event(e, s, &r) == UCCL_OK, "event of the drained stream");
    CHECK(uccl_req_bytes(r, &n) == UCCL_OK, "a drained stream's event is complete at once");
    uccl_req_free(r);
    printf("# stream event behind a queued copy: %s\n",
           at_once ? "complete at once (ran)" : "waited");
    uccl_gpu_stream_destroy(s);
    free(h);
    free(back);
}

/* uccl_stream_ops: one call enqueues a wait, copies and writes in order
 * (a wait in the batch holds what follows it), a stream word reports the
 * stream past its write; a bad op anywhere refuses the whole call with
 * nothing queued. d2 has 4096 bytes past LEN for the device words. */
static void check_stream_ops(uccl_engine_t *e, unsigned char *d1, unsigned char *d2)
{
    unsigned char *h = malloc(LEN), *back = malloc(LEN);
    uint32_t *dw = (uint32_t *)(d2 + LEN), zero[2] = {0, 0}, got[2] = {0, 0}, *word = NULL;
    void *wdev = NULL;
    uccl_gpu_stream_t s = NULL, s2 = NULL;
    int spins = 0;

    if (h == NULL || back == NULL || uccl_gpu_stream_create(&s) != UCCL_OK ||
        uccl_gpu_stream_create(&s2) != UCCL_OK || uccl_stream_word_alloc(e, &word, &wdev) != UCCL_OK) {
        CHECK(0, "stream ops: setup");
        goto out;
    }
    CHECK(*word == 0 && uccl_stream_word_reached(word, 0) && !uccl_stream_word_reached(word, 1),
          "a new stream word is 0");
    fill(h, LEN, 91);
    uccl_copy(e, d1, h, LEN);
    fill(h, LEN, 92);
    uccl_copy(e, d2, h, LEN);
    uccl_copy(e, dw, zero, sizeof(zero));
    {
        uccl_stream_op_t ops[] = {
            {.kind = UCCL_STREAM_OP_WAIT, .addr = &dw[0], .len = 4, .value = 1},
            {.kind = UCCL_STREAM_OP_WRITE, .addr = &dw[1], .len = 4, .value = 7},
            {.kind = UCCL_STREAM_OP_COPY, .addr = d2, .src = d1, .len = LEN / 2},
            {.kind = UCCL_STREAM_OP_COPY, .addr = d2 + LEN / 2, .src = d1 + LEN / 2, .len = LEN / 2},
            {.kind = UCCL_STREAM_OP_WRITE, .addr = wdev, .len = 4, .value = 5},
        };
        uccl_stream_op_t bad[] = {
            {.kind = UCCL_STREAM_OP_WRITE, .addr = wdev, .len = 4, .value = 9},
            {.kind = (uccl_stream_op_kind_t)99, .addr = wdev, .len = 4},
        }, release = {.kind = UCCL_STREAM_OP_WRITE, .addr = &dw[0], .len = 4, .value = 1};
        CHECK(uccl_stream_ops(e, s, ops, 5, UCCL_STREAM_OPS_COPY_BATCH) == UCCL_OK, "stream ops: enqueue");
        for (int i = 0; i < 100; i++)
            CHECK(!uccl_stream_word_reached(word, 5), "the word before the wait is met (poll %d)", i);
        uccl_copy(e, back, d2, LEN);
        CHECK(same(back, LEN, 92), "no copy runs before the wait in the batch is met");
        uccl_copy(e, got, dw, sizeof(got));
        CHECK(got[1] == 0, "the write after the wait in one batch waits too (%u)", got[1]);
        CHECK(uccl_stream_ops(e, s, bad, 2, 0) == UCCL_ERR_INVALID_PARAM, "a bad kind refuses the call");
        bad[1] = (uccl_stream_op_t){.kind = UCCL_STREAM_OP_WAIT, .addr = wdev, .len = 2};
        CHECK(uccl_stream_ops(e, s, bad, 2, 0) == UCCL_ERR_INVALID_PARAM, "width 2 refused");
        bad[1] = (uccl_stream_op_t){.kind = UCCL_STREAM_OP_WRITE, .addr = (char *)wdev + 2, .len = 4};
        CHECK(uccl_stream_ops(e, s, bad, 2, 0) == UCCL_ERR_INVALID_PARAM, "misaligned word refused");
        bad[1] = (uccl_stream_op_t){.kind = UCCL_STREAM_OP_COPY, .addr = NULL, .src = d1, .len = 8};
        CHECK(uccl_stream_ops(e, s, bad, 2, 0) == UCCL_ERR_INVALID_PARAM, "NULL copy refused");
        CHECK(uccl_stream_ops(e, s, ops, 1, 2) == UCCL_ERR_INVALID_PARAM, "unknown flags refused");
        CHECK(uccl_stream_ops(e, NULL, ops, 1, 0) == UCCL_ERR_INVALID_PARAM, "NULL stream refused");
        CHECK(uccl_stream_ops(e, s2, &release, 1, 0) == UCCL_OK, "the release from another stream");
        while (!uccl_stream_word_reached(word, 5) && spins++ < 5000000)
            ;
        CHECK(uccl_stream_word_reached(word, 5) && *word == 5, "the stream word after the batch: %u", *word);
        CHECK(uccl_gpu_stream_sync(s) == UCCL_OK, "sync");
        CHECK(*word == 5, "the refused calls queued nothing (word %u)", *word);
        uccl_copy(e, back, d2, LEN);
        CHECK(same(back, LEN, 91), "the batch's copies after its wait");
        uccl_copy(e, got, dw, sizeof(got));
        CHECK(got[0] == 1 && got[1] == 7, "the device words: %u %u", got[0], got[1]);
    }
    *word = 3; /* cyclic: 3 is past 0xfffffff8 */
    CHECK(uccl_stream_word_reached(word, 0xfffffff8u) && !uccl_stream_word_reached(word, 4), "cyclic compare");
out:
    if (word != NULL)
        CHECK(uccl_stream_word_free(e, word) == UCCL_OK, "word free");
    if (s != NULL)
        uccl_gpu_stream_destroy(s);
    if (s2 != NULL)
        uccl_gpu_stream_destroy(s2);
    free(h);
    free(back);
}

/* What works in every build, GPU or not: host copies, host allocations,
 * and clear refusals of GPU work where there is no GPU. */
static void check_host_only(uccl_engine_t *e, int ngpu)
{
    unsigned char a[300], b[300];
    uccl_mem_type_t t = UCCL_MEM_CUDA;
    uccl_req_t *req = NULL;
    uccl_stream_hold_t *hold = NULL;
    size_t bytes = 0;
    void *p = NULL;

    fill(a, sizeof(a), 5);
    memset(b, 0, sizeof(b));
    CHECK(uccl_copy(e, b, a, sizeof(a)) == UCCL_OK && memcmp(a, b, sizeof(a)) == 0, "host copy");
    CHECK(uccl_copy(e, a + 1, a, 100) == UCCL_OK && a[1] == b[0] && a[100] == b[99],
          "overlapping host copy (memmove)");
    CHECK(uccl_copy_post(e, b, a, 200, &req) == UCCL_OK && uccl_test(req, &(int){0}) == UCCL_OK &&
              uccl_req_bytes(req, &bytes) == UCCL_OK && bytes == 200, "posted host copy: done, 200 bytes");
    uccl_req_free(req);
    CHECK(uccl_mem_query(b, &t, NULL) == UCCL_OK && t == UCCL_MEM_HOST, "stack memory is host");
    if (ngpu > 0)
        return;
    CHECK(uccl_mem_alloc(e, UCCL_MEM_CUDA, 64, &p) == UCCL_ERR_NO_DEVICE, "no GPU: NO_DEVICE");
    CHECK(uccl_stream_event(e, NULL, &req) != UCCL_OK, "no GPU: uccl_stream_event refused");
    CHECK(uccl_stream_hold(e, NULL, &hold) != UCCL_OK, "no GPU: uccl_stream_hold refused");
    CHECK(uccl_stream_word_alloc(e, (uint32_t **)&p, &p) == UCCL_ERR_NO_DEVICE, "no GPU: no stream word");
}

int main(void)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "tcp"};
    uccl_engine_t *e = NULL;
    uccl_gpu_stream_t s = NULL;
    void *d1 = NULL, *d2 = NULL;
    int n = 0;

    if (uccl_gpu_count(&n) != UCCL_OK)
        n = 0;
    if (uccl_engine_create(&p, &e) != UCCL_OK) {
        printf("FAIL: engine\n");
        return 1;
    }
    check_host_only(e, n);
    if (n == 0) {
        uccl_engine_destroy(e);
        if (failures) {
            printf("FAIL: %d failure(s) in the host checks\n", failures);
            return 1;
        }
        printf("SKIP: no GPU (host copies and the refusals checked)\n");
        return 77;
    }
    CHECK(uccl_mem_alloc(e, UCCL_MEM_CUDA, LEN, &d1) == UCCL_OK &&
              uccl_mem_alloc(e, UCCL_MEM_CUDA, LEN + 4096, &d2) == UCCL_OK,
          "GPU allocations");
    if (d1 != NULL && d2 != NULL) {
        check_query(e, d1);
        check_copies(e, d1, d2, 0);
        check_copies(e, d1, d2, 1);
        check_stream_idle(e, d1);
        check_stream_ops(e, d1, d2);
        s = check_stream(e, d1, d2);
    }
    CHECK(uccl_engine_destroy(e) == UCCL_OK, "engine destroy");
    if (s != NULL) { /* the engine released the hold it was left with */
        CHECK(uccl_gpu_stream_sync(s) == UCCL_OK, "the held stream goes on after the engine");
        uccl_gpu_stream_destroy(s);
    }
    uccl_gpu_free(d1);
    uccl_gpu_free(d2);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

/* Streams, events and injected copy faults of the test-only fake GPU backend
 * (see fake.c). The model, deterministic and as lazy as CUDA allows, so that
 * a caller that reads a copy's result before waiting for it sees old bytes:
 *
 * - uccl_gpu_memcpy_async only queues the copy on its stream. Queued copies
 *   run, in the order they were issued on their stream, only when something
 *   waits for them: uccl_gpu_stream_sync (all of the stream), an event sync
 *   or the second query of an event (the copies issued on its stream before
 *   it was recorded), uccl_gpu_memcpy/memset (every stream of the current
 *   device, after their own copy, like cudaMemcpy + cudaDeviceSynchronize),
 *   uccl_gpu_free/host_free and uccl_gpu_stream_destroy.
 * - An event is complete once every copy issued on its stream before it was
 *   recorded has run. The first query after each record of an event whose
 *   copies have not run yet says UCCL_INPROGRESS and runs nothing; the next
 *   query runs them and reports, so every caller's "not yet" path runs.
 * - Injected faults, for tests only, through the config table below (read
 *   at the first async copy; the count is of every uccl_gpu_memcpy_async
 *   call of the process, from 1):
 *   UCCL_FAKE_GPU_FAIL_COPY=N: the N-th copy is accepted but fails when it
 *     runs (no byte is written), as an asynchronous copy fault would: the
 *     first event recorded after it on its stream reports UCCL_ERR_IO, and
 *     so does the stream sync that runs it. Unlike CUDA, where such a fault
 *     poisons the whole context, later copies and events are fine, so a
 *     test can check that the one transfer fails and the rest goes on.
 *     A fault that poisons the context as CUDA's do: uccl_gpu_fault_inject
 *     (fake_memop.c).
 *   UCCL_FAKE_GPU_FAIL_ISSUE=N: uccl_gpu_memcpy_async refuses the N-th copy
 *     with UCCL_ERR_IO, nothing queued.
 *   UCCL_FAKE_GPU_FAIL_HOST_REGISTER=N: the N-th uccl_gpu_host_register_mapped
 *     of the process fails (fake_memop.c); that call reads the table if no
 *     copy did before it.
 * - uccl_gpu_stream_wait_value queues a wait: the stream's later copies
 *   stay queued until the host flag reaches the value. A query of an event
 *   behind an unmet wait says UCCL_INPROGRESS; a sync (stream or event)
 *   waits for the flag as a GPU would (up to 60 s, then UCCL_ERR_TIMEOUT:
 *   a test that never releases its stream fails instead of hanging).
 *   Flags are plain host memory (host == dev address).
 * - uccl_gpu_stream_write and uccl_gpu_stream_wait_geq queue a store and a
 *   wait on (fake, shared) device memory, run in stream order as copies
 *   are: a wait there is met by a peer process's stream when that process
 *   drives its own (a sync or query), as the stream form's flags are.
 * - A store queued behind a copy that failed (UCCL_FAKE_GPU_FAIL_COPY), with
 *   no other store between them, is dropped: on CUDA the fault stops the
 *   stream and the word never changes, and a transport that learns a copy's
 *   end from that word (UCCL_GPU_IPC_FLAG_DONE) must see the fault, not the
 *   word; later stores land, as later copies run.
 * Streams and events are allocated objects; destroying a stream runs what
 * it still holds and completes the events recorded on it. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/sys.h"
#include "util/config.h"
#include "util/list.h"
#include "util/log.h"
#include "gpu/fake.h"

struct uccl_gpu_event {
    uccl_gpu_stream_t stream; /* recorded on and not complete yet, else NULL */
    uint64_t since, ticket;   /* it covers the copies (since, ticket] of stream */
    bool polled;              /* said UCCL_INPROGRESS once for this record */
    uccl_status_t status;     /* once complete */
    uccl_list_t link;         /* fake_events */
};

typedef struct fake_cfg {
    size_t fail_copy; /* sizes: a count, never negative (-5 is refused) */
    size_t fail_issue;
    size_t fail_register; /* a count, as fail_copy */
    int sm_copy;
    size_t count; /* a size: never negative (-5 is refused) */
} fake_cfg_t;

static const uccl_cfg_field_t fake_cfg_fields[] = {
    {"FAIL_COPY", "0",
     "fake GPU, tests only: the N-th async copy of the process fails when it runs; the first event "
     "recorded after it on its stream reports the error (0 = never)",
     offsetof(fake_cfg_t, fail_copy), UCCL_CFG_SIZE},
    {"FAIL_ISSUE", "0",
     "fake GPU, tests only: uccl_gpu_memcpy_async refuses the N-th async copy of the process (0 = never)",
     offsetof(fake_cfg_t, fail_issue), UCCL_CFG_SIZE},
    {"FAIL_HOST_REGISTER", "0",
     "fake GPU, tests only: the N-th uccl_gpu_host_register_mapped of the process fails, as a "
     "cudaHostRegister can (0 = never)",
     offsetof(fake_cfg_t, fail_register), UCCL_CFG_SIZE},
    {"SM_COPY", "1", "fake GPU, tests only: the fake has gpu.h's copy kernel (0 = as a build without nvcc)",
     offsetof(fake_cfg_t, sm_copy), UCCL_CFG_BOOL},
    {"COUNT", "2", "fake GPU, tests only: how many fake GPUs there are, 1..4 (1: every process on one GPU, "
     "as on a one-GPU machine)",
     offsetof(fake_cfg_t, count), UCCL_CFG_SIZE},
    {NULL, NULL, NULL, 0, 0},
};

static const uccl_cfg_table_t fake_cfg_table = {
    .prefix = "FAKE_GPU_", .fields = fake_cfg_fields, .struct_size = sizeof(fake_cfg_t)};

const uccl_cfg_table_t *uccl_gpu_config_table(void)
{
    return &fake_cfg_table;
}

pthread_mutex_t uccl_fake_stream_lock = PTHREAD_MUTEX_INITIALIZER;
uccl_list_t uccl_fake_streams = UCCL_LIST_INIT(uccl_fake_streams);
static uccl_list_t fake_events = UCCL_LIST_INIT(fake_events);
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static fake_cfg_t fake_cfg;
static uint64_t copies_issued; /* async copies of the process, under stream_lock */

static void cfg_load(void)
{
    if (uccl_cfg_parse(&fake_cfg_table, &fake_cfg) != UCCL_OK)
        memset(&fake_cfg, 0, sizeof(fake_cfg));
    if (fake_cfg.fail_copy > 0)
        uccl_warn("fake GPU: async copy %zu of this process will fail when it runs "
                  "(UCCL_FAKE_GPU_FAIL_COPY)", fake_cfg.fail_copy);
    if (fake_cfg.fail_issue > 0)
        uccl_warn("fake GPU: async copy %zu of this process will be refused (UCCL_FAKE_GPU_FAIL_ISSUE)",
                  fake_cfg.fail_issue);
    if (fake_cfg.fail_register > 0)
        uccl_warn("fake GPU: host registration %zu of this process will fail "
                  "(UCCL_FAKE_GPU_FAIL_HOST_REGISTER)", fake_cfg.fail_register);
}

/* ------------------------------------------------------------ running copies */

static void fault_add(uccl_gpu_stream_t s, uint64_t seq)
{
    if (s->nfaults == FAKE_FAULTS_MAX) {
        memmove(s->faults, s->faults + 1, (FAKE_FAULTS_MAX - 1) * sizeof(s->faults[0]));
        s->nfaults--;
    }
    s->faults[s->nfaults++] = seq;
}

static bool fault_in(uccl_gpu_stream_t s, uint64_t since, uint64_t upto)
{
    for (int i = 0; i < s->nfaults; i++)
        if (s->faults[i] > since && s->faults[i] <= upto)
            return true;
    return false;
}

/* Run the queued copies of s numbered up to upto, in order, stopping at a
 * wait whose flag is not there yet; stream_lock held. */
static void run_until(uccl_gpu_stream_t s, uint64_t upto)
{
    while (!uccl_fake_ctx_lost() && !uccl_list_empty(&s->queue)) {
        fake_copy_t *c = uccl_list_first(&s->queue, fake_copy_t, link);
        if (c->seq > upto)
            break;
        if (c->wait != NULL && !uccl_fake_wait_met(c))
            break;
        uccl_list_del(&c->link);
        if (c->sticky) { /* the context is lost: nothing runs any more */
            uccl_fake_ctx_lost_set();
            free(c);
            return;
        }
        if (c->store != NULL && !fault_in(s, s->last_store, c->seq)) { /* (else dropped: see above) */
            if (c->width == 4)
                __atomic_store_n((uint32_t *)c->store, (uint32_t)c->value, __ATOMIC_RELEASE);
            else
                __atomic_store_n((uint64_t *)c->store, c->value, __ATOMIC_RELEASE);
        }
        if (c->store != NULL)
            s->last_store = c->seq;
        else if (c->fail)
            fault_add(s, c->seq);
        else if (c->len > 0)
            memmove(c->dst, c->src, c->len);
        s->done = c->seq;
        free(c);
    }
}

/* The event's copies have run: fix its status; stream_lock held. */
static void event_complete(uccl_gpu_event_t e)
{
    e->status = fault_in(e->stream, e->since, e->ticket) ? UCCL_ERR_IO : UCCL_OK;
    if (e->status != UCCL_OK)
        uccl_error("fake GPU: event %p: an async copy before it failed (injected fault)", (void *)e);
    e->stream = NULL;
}

void uccl_fake_streams_flush(int device)
{
    uccl_list_t *pos;

    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_for_each(pos, &uccl_fake_streams) {
        uccl_gpu_stream_t s = uccl_container_of(pos, struct uccl_gpu_stream, link);
        if (device < 0 || s->device == device)
            run_until(s, s->issued);
    }
    pthread_mutex_unlock(&uccl_fake_stream_lock);
}

static bool overlaps(const void *p, size_t len, const void *base, size_t blen)
{
    const char *a = p, *b = base;

    return len > 0 && a < b + blen && b < a + len;
}

int uccl_fake_streams_fault_range(const void *base, size_t len)
{
    uccl_list_t *spos, *cpos;
    int n = 0;

    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_for_each(spos, &uccl_fake_streams) {
        uccl_gpu_stream_t s = uccl_container_of(spos, struct uccl_gpu_stream, link);
        uccl_list_for_each(cpos, &s->queue) {
            fake_copy_t *c = uccl_container_of(cpos, fake_copy_t, link);
            if (!c->fail && (overlaps(c->dst, c->len, base, len) || overlaps(c->src, c->len, base, len) ||
                             (c->store != NULL && overlaps(c->store, c->width, base, len)))) {
                c->fail = true;
                n++;
            }
        }
    }
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return n;
}

/* run_until that waits for the host flags of the waits on the way, as a
 * synchronizing call does on a GPU; stream_lock held (dropped while it
 * waits). UCCL_ERR_TIMEOUT after 60 s. */
static uccl_status_t run_blocking(uccl_gpu_stream_t s, uint64_t upto)
{
    uccl_deadline_t deadline = uccl_deadline_in(60000);

    for (;;) {
        run_until(s, upto);
        if (s->done >= upto)
            return UCCL_OK;
        if (uccl_fake_ctx_lost())
            return uccl_fake_ctx_err("cudaStreamSynchronize");
        if (uccl_deadline_passed(&deadline)) {
            uccl_error("fake GPU: stream %p waits on a host flag for 60 s", (void *)s);
            return UCCL_ERR_TIMEOUT;
        }
        pthread_mutex_unlock(&uccl_fake_stream_lock);
        sched_yield();
        pthread_mutex_lock(&uccl_fake_stream_lock);
    }
}

/* ------------------------------------------------------------ streams */

uccl_status_t uccl_gpu_stream_create(uccl_gpu_stream_t *stream)
{
    uccl_gpu_stream_t s;

    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return UCCL_ERR_NO_MEMORY;
    s->device = uccl_fake_current_device();
    uccl_fake_ctx_touch(s->device);
    uccl_list_init(&s->queue);
    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_push_back(&uccl_fake_streams, &s->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    *stream = s;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_stream_destroy(uccl_gpu_stream_t stream)
{
    uccl_list_t *pos;

    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&uccl_fake_stream_lock);
    run_until(stream, stream->issued);
    while (!uccl_list_empty(&stream->queue)) { /* behind a wait never released */
        fake_copy_t *c = uccl_list_first(&stream->queue, fake_copy_t, link);
        uccl_list_del(&c->link);
        free(c);
    }
    stream->done = stream->issued;
    uccl_list_for_each(pos, &fake_events) {
        uccl_gpu_event_t e = uccl_container_of(pos, struct uccl_gpu_event, link);
        if (e->stream == stream)
            event_complete(e);
    }
    uccl_list_del(&stream->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    free(stream);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_stream_sync(uccl_gpu_stream_t stream)
{
    bool failed;

    uccl_status_t st;

    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err("cudaStreamSynchronize");
    pthread_mutex_lock(&uccl_fake_stream_lock);
    if ((st = run_blocking(stream, stream->issued)) != UCCL_OK) {
        pthread_mutex_unlock(&uccl_fake_stream_lock);
        return st;
    }
    failed = fault_in(stream, stream->last_sync, stream->issued);
    stream->last_sync = stream->issued;
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    if (failed)
        uccl_error("fake GPU: stream %p: an async copy failed (injected fault)", (void *)stream);
    return failed ? UCCL_ERR_IO : UCCL_OK;
}

/* Lazy as the rest: a stream holding queued copies (or a wait) says "not
 * yet" and runs nothing; one whose copies ran says done, or UCCL_ERR_IO
 * while a failed copy since its last event record is not reported yet (an
 * event recorded now would report it). */
uccl_status_t uccl_gpu_stream_query(uccl_gpu_stream_t stream)
{
    uccl_status_t st;

    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err("cudaStreamQuery");
    pthread_mutex_lock(&uccl_fake_stream_lock);
    if (stream->done < stream->issued)
        st = UCCL_INPROGRESS;
    else
        st = fault_in(stream, stream->last_record, stream->issued) ? UCCL_ERR_IO : UCCL_OK;
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return st;
}

uccl_status_t uccl_gpu_memcpy_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    fake_copy_t *c;
    uint64_t n;
    bool fail;

    if (stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err("cudaMemcpyAsync");
    pthread_once(&cfg_once, cfg_load);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return UCCL_ERR_NO_MEMORY;
    pthread_mutex_lock(&uccl_fake_stream_lock);
    n = ++copies_issued;
    if (fake_cfg.fail_issue > 0 && n == (uint64_t)fake_cfg.fail_issue) {
        pthread_mutex_unlock(&uccl_fake_stream_lock);
        free(c);
        uccl_error("fake GPU: async copy %llu of %zu bytes refused (injected, UCCL_FAKE_GPU_FAIL_ISSUE)",
                   (unsigned long long)n, len);
        return UCCL_ERR_IO;
    }
    fail = fake_cfg.fail_copy > 0 && n == (uint64_t)fake_cfg.fail_copy;
    *c = (fake_copy_t){.dst = dst, .src = src, .len = len, .seq = ++stream->issued, .fail = fail};
    uccl_list_push_back(&stream->queue, &c->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    if (fail)
        uccl_warn("fake GPU: async copy %llu of %zu bytes will fail (injected, UCCL_FAKE_GPU_FAIL_COPY)",
                  (unsigned long long)n, len);
    uccl_fake_ctx_touch(stream->device);
    return UCCL_OK;
}

int uccl_fake_sm_copy_on(void)
{
    pthread_once(&cfg_once, cfg_load);
    return fake_cfg.sm_copy;
}

size_t uccl_fake_fail_host_register(void)
{
    pthread_once(&cfg_once, cfg_load);
    return fake_cfg.fail_register;
}

/* Read on its own, at the first device query: the rest of the table is
 * read at the first copy, after a test has set its faults. */
static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int fake_count = 2;

static void count_load(void)
{
    fake_cfg_t cfg;

    if (uccl_cfg_parse(&fake_cfg_table, &cfg) != UCCL_OK)
        return;
    if (cfg.count < 1 || cfg.count > FAKE_NDEV)
        uccl_warn("UCCL_FAKE_GPU_COUNT=%zu: not 1..%d; 2 fake GPUs", cfg.count, FAKE_NDEV);
    else
        fake_count = (int)cfg.count;
}

int uccl_fake_count(void)
{
    pthread_once(&count_once, count_load);
    return fake_count;
}

/* The fake has one kind of copy. */
uccl_status_t uccl_gpu_memcpy_dtod_async(void *dst, const void *src, size_t len, uccl_gpu_stream_t stream)
{
    return uccl_gpu_memcpy_async(dst, src, len, stream);
}

/* ------------------------------------------------------------ events */

/* A batch has no order inside: the fake queues its copies last first, so
 * that a caller relying on an order there sees the wrong bytes. */
uccl_status_t uccl_gpu_memcpy_batch_async(void *const *dst, const void *const *src, const size_t *len,
                                          size_t n, uccl_gpu_stream_t stream)
{
    for (size_t i = n; i-- > 0;) {
        uccl_status_t st = uccl_gpu_memcpy_async(dst[i], src[i], len[i], stream);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_create(uccl_gpu_event_t *event, int timing)
{
    uccl_gpu_event_t e;

    (void)timing; /* no clock: elapsed times are 0 */
    if (event == NULL)
        return UCCL_ERR_INVALID_PARAM;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_fake_ctx_touch(uccl_fake_current_device());
    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_push_back(&fake_events, &e->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    *event = e;
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_destroy(uccl_gpu_event_t event)
{
    if (event == NULL)
        return UCCL_ERR_INVALID_PARAM;
    pthread_mutex_lock(&uccl_fake_stream_lock);
    uccl_list_del(&event->link);
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    free(event);
    return UCCL_OK;
}

uccl_status_t uccl_gpu_event_record(uccl_gpu_event_t event, uccl_gpu_stream_t stream)
{
    if (event == NULL || stream == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err("cudaEventRecord");
    pthread_mutex_lock(&uccl_fake_stream_lock);
    event->stream = stream;
    event->since = stream->last_record;
    event->ticket = stream->issued;
    event->polled = false;
    event->status = UCCL_OK;
    stream->last_record = stream->issued;
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return UCCL_OK;
}

/* Query (wait = false: "not yet" once per record) or sync (wait = true). */
static uccl_status_t event_wait(uccl_gpu_event_t e, bool wait)
{
    uccl_status_t st;

    if (e == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (uccl_fake_ctx_lost())
        return uccl_fake_ctx_err(wait ? "cudaEventSynchronize" : "cudaEventQuery");
    pthread_mutex_lock(&uccl_fake_stream_lock);
    if (e->stream != NULL && e->stream->done < e->ticket) {
        if (!wait && !e->polled) {
            e->polled = true;
            pthread_mutex_unlock(&uccl_fake_stream_lock);
            return UCCL_INPROGRESS;
        }
        if (wait && (st = run_blocking(e->stream, e->ticket)) != UCCL_OK) {
            pthread_mutex_unlock(&uccl_fake_stream_lock);
            return st;
        }
        run_until(e->stream, e->ticket);
        if (e->stream->done < e->ticket) { /* behind a wait on a host flag */
            pthread_mutex_unlock(&uccl_fake_stream_lock);
            return UCCL_INPROGRESS;
        }
    }
    if (e->stream != NULL)
        event_complete(e);
    st = e->status;
    pthread_mutex_unlock(&uccl_fake_stream_lock);
    return st;
}

uccl_status_t uccl_gpu_event_query(uccl_gpu_event_t event)
{
    return event_wait(event, false);
}

uccl_status_t uccl_gpu_event_sync(uccl_gpu_event_t event)
{
    return event_wait(event, true);
}

uccl_status_t uccl_gpu_event_elapsed_ms(uccl_gpu_event_t start, uccl_gpu_event_t end, float *ms)
{
    uccl_status_t st = uccl_gpu_event_sync(start);

    if (st == UCCL_OK)
        st = uccl_gpu_event_sync(end);
    if (ms != NULL)
        *ms = 0;
    return st;
}


/* The schedule trace (UCCL_COLL_TRACE=1, off by default): host time of
 * each step of the blocking and non-blocking collectives, from the call's
 * start, summed per op kind and per size class (the bytes one rank
 * receives, rounded down to a power of two) and printed to stderr at exit;
 * each class's first TRACE_SKIP calls are left out.
 * It is there to find where a call's fixed cost goes between GPUs (issue
 * 25: a 1 MiB-per-peer allgather between two H200s took about 10 us more
 * than its copies). Off, each hook costs a test of one flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

#define TRACE_CLASSES 48
#define TRACE_SKIP 4 /* a class's first calls (registration, mapping the peer's memory) are left out */

enum { TR_POST, TR_DONE, TR_N };

typedef struct {
    uint64_t seen; /* calls ended, the skipped ones included */
    uint64_t calls, call_ns, rounds;
    uint64_t ns[COLL_OP_MAPPED + 1][TR_N], n[COLL_OP_MAPPED + 1][TR_N];
    uint64_t late_ns, late_n; /* UCCL_COLL_GPU_COPY_LATE: the posting of the held-back copies */
    uint64_t phase_ns, phase_n, phase_at_ns; /* a phase's post, whole; its end from the call's start */
} trace_class_t;

static trace_class_t classes[TRACE_CLASSES];
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static bool trace_registered;

uint64_t uccl_coll_trace_now(void)
{
    struct timespec ts;

    if (!uccl_coll_trace_on())
        return 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int class_of(const coll_sched_t *s)
{
    size_t b = s->len[COLL_BUF_RECV];
    int c = 0;

    while (b > 1 && c < TRACE_CLASSES - 1) {
        b >>= 1;
        c++;
    }
    return c;
}

static void trace_print(void)
{
    static const char *const kinds[] = {"send", "recv", "copy", "put", "waitput", "mapped"};

    for (int c = 0; c < TRACE_CLASSES; c++) {
        const trace_class_t *t = &classes[c];
        if (t->calls == 0)
            continue;
        fprintf(stderr, "coll trace pid %d: >= %llu B received: %llu calls, %.2f us a call, "
                "%.1f progress rounds a call\n", (int)getpid(), 1ull << c,
                (unsigned long long)t->calls, (double)t->call_ns / (double)t->calls / 1e3,
                (double)t->rounds / (double)t->calls);
        if (t->phase_n > 0)
            fprintf(stderr, "coll trace pid %d:   phases posted in %6.2f us, ended posting at "
                    "%6.2f us from the call's start (%llu)\n", (int)getpid(),
                    (double)t->phase_ns / (double)t->phase_n / 1e3,
                    (double)t->phase_at_ns / (double)t->phase_n / 1e3, (unsigned long long)t->phase_n);
        for (int k = 0; k <= COLL_OP_MAPPED; k++)
            if (t->n[k][TR_POST] > 0 || t->n[k][TR_DONE] > 0)
                fprintf(stderr, "coll trace pid %d:   %-8s posted in %6.2f us (%llu), done at "
                        "%6.2f us from the call's start (%llu)\n", (int)getpid(), kinds[k],
                        t->n[k][TR_POST] ? (double)t->ns[k][TR_POST] / (double)t->n[k][TR_POST] / 1e3 : 0.0,
                        (unsigned long long)t->n[k][TR_POST],
                        t->n[k][TR_DONE] ? (double)t->ns[k][TR_DONE] / (double)t->n[k][TR_DONE] / 1e3 : 0.0,
                        (unsigned long long)t->n[k][TR_DONE]);
        if (t->late_n > 0)
            fprintf(stderr, "coll trace pid %d:   held-back GPU copies posted at %6.2f us from "
                    "the call's start (%llu)\n", (int)getpid(),
                    (double)t->late_ns / (double)t->late_n / 1e3, (unsigned long long)t->late_n);
    }
}

/* s's class, NULL while its first calls are left out */
static trace_class_t *class_get(const coll_sched_t *s)
{
    trace_class_t *t = &classes[class_of(s)];

    pthread_mutex_lock(&trace_lock);
    if (!trace_registered) {
        trace_registered = true;
        atexit(trace_print);
    }
    pthread_mutex_unlock(&trace_lock);
    return t->seen >= TRACE_SKIP ? t : NULL;
}

/* Each hook: t0 from uccl_coll_trace_now (0 = off); the library's own
 * calls are left out. Counters are plain adds under the comm's lock (one
 * collective thread a comm: enough for a profile). */
void uccl_coll_trace_post(const coll_sched_t *s, const coll_op_t *op, uint64_t t0)
{
    trace_class_t *t;

    if (t0 == 0 || s->internal)
        return;
    if ((t = class_get(s)) == NULL)
        return;
    t->ns[op->kind][TR_POST] += uccl_coll_trace_now() - t0;
    t->n[op->kind][TR_POST]++;
}

void uccl_coll_trace_done(const coll_sched_t *s, const coll_op_t *op)
{
    trace_class_t *t;

    if (s->trace_t0 == 0 || s->internal)
        return;
    if ((t = class_get(s)) == NULL)
        return;
    t->ns[op->kind][TR_DONE] += uccl_coll_trace_now() - s->trace_t0;
    t->n[op->kind][TR_DONE]++;
}

void uccl_coll_trace_late(const coll_sched_t *s)
{
    trace_class_t *t;

    if (s->trace_t0 == 0 || s->internal)
        return;
    if ((t = class_get(s)) == NULL)
        return;
    t->late_ns += uccl_coll_trace_now() - s->trace_t0;
    t->late_n++;
}

void uccl_coll_trace_phase(const coll_sched_t *s, uint64_t t0)
{
    trace_class_t *t;
    uint64_t now;

    if (t0 == 0 || s->trace_t0 == 0 || s->internal)
        return;
    if ((t = class_get(s)) == NULL)
        return;
    now = uccl_coll_trace_now();
    t->phase_ns += now - t0;
    t->phase_at_ns += now - s->trace_t0;
    t->phase_n++;
}

void uccl_coll_trace_end(const coll_sched_t *s)
{
    trace_class_t *t;

    if (s->trace_t0 == 0 || s->internal)
        return;
    if ((t = class_get(s)) == NULL) {
        classes[class_of(s)].seen++;
        return;
    }
    t->seen++;
    t->calls++;
    t->call_ns += uccl_coll_trace_now() - s->trace_t0;
    t->rounds += s->rounds;
}

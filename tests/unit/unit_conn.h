/* Helpers of the tests that need live connections: engines restricted to one
 * transport, a connected pair of engines in one process (the accept runs on a
 * helper thread because uccl_connect progresses only its own engine), and a
 * loop that drives both engines until requests finish. */
#ifndef UCCL_TESTS_UNIT_CONN_H
#define UCCL_TESTS_UNIT_CONN_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl.h>

/* Short enough that failure tests finish fast, long enough for a loaded CI box. */
#define UNIT_TIMEOUT_MS 3000
#define UNIT_TIMEOUT_TEXT "3000"

static inline uint64_t unit_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t unit_now_ms(void) { return unit_now_ns() / 1000000u; }

static inline uccl_status_t unit_engine_create(const char *transport, uccl_engine_t **engine)
{
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS,
                                   .transports = transport};
    return uccl_engine_create(&params, engine);
}

typedef struct unit_pair {
    uccl_engine_t *a, *b;
    uccl_conn_t *ab; /* a's end */
    uccl_conn_t *ba; /* b's end */
} unit_pair_t;

typedef struct unit_accept_arg {
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_status_t status;
} unit_accept_arg_t;

static void *unit_accept_main(void *p)
{
    unit_accept_arg_t *arg = p;
    arg->status = uccl_accept(arg->engine, UNIT_TIMEOUT_MS, &arg->conn);
    return NULL;
}

/* Connect engine a to engine b (b accepts on a thread). */
static inline uccl_status_t unit_connect(uccl_engine_t *a, uccl_engine_t *b, uccl_conn_t **ab,
                                         uccl_conn_t **ba)
{
    unit_accept_arg_t arg = {.engine = b, .conn = NULL, .status = UCCL_ERR_IO};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    pthread_t thread;
    uccl_status_t st = uccl_engine_address(b, blob, &len);

    if (st != UCCL_OK)
        return st;
    if (pthread_create(&thread, NULL, unit_accept_main, &arg) != 0)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_connect(a, blob, len, ab);
    pthread_join(thread, NULL);
    if (st != UCCL_OK)
        return st;
    if (arg.status != UCCL_OK) {
        uccl_conn_close(*ab);
        return arg.status;
    }
    *ba = arg.conn;
    return UCCL_OK;
}

/* Engines a and b from their own parameters (e.g. one RDMA device each), connected. */
static inline uccl_status_t unit_pair_open_params(const uccl_engine_params_t *pa,
                                                  const uccl_engine_params_t *pb, unit_pair_t *p)
{
    uccl_status_t st;

    memset(p, 0, sizeof(*p));
    st = uccl_engine_create(pa, &p->a);
    if (st != UCCL_OK)
        return st;
    st = uccl_engine_create(pb, &p->b);
    if (st == UCCL_OK)
        st = unit_connect(p->a, p->b, &p->ab, &p->ba);
    if (st != UCCL_OK) {
        if (p->b != NULL)
            uccl_engine_destroy(p->b);
        uccl_engine_destroy(p->a);
        memset(p, 0, sizeof(*p));
    }
    return st;
}

static inline uccl_status_t unit_pair_open(const char *transport, unit_pair_t *p)
{
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS,
                                   .transports = transport};
    return unit_pair_open_params(&params, &params, p);
}

static inline void unit_pair_close(unit_pair_t *p)
{
    if (p->a != NULL)
        uccl_engine_destroy(p->a);
    if (p->b != NULL)
        uccl_engine_destroy(p->b);
    memset(p, 0, sizeof(*p));
}

/* A connected pair with a source region on a and a destination region on b
 * (src holds garbage, dst zeros). */
typedef struct unit_fixture {
    unit_pair_t p;
    uint8_t *src, *dst;
    uccl_mr_t *src_mr, *dst_mr;
} unit_fixture_t;

static inline void unit_fixture_close(unit_fixture_t *f)
{
    unit_pair_close(&f->p); /* releases the regions too */
    free(f->src);
    free(f->dst);
    memset(f, 0, sizeof(*f));
}

static inline uccl_status_t unit_fixture_open(const char *transport, size_t src_len, size_t dst_len,
                                              unit_fixture_t *f)
{
    uccl_status_t st;

    memset(f, 0, sizeof(*f));
    f->src = malloc(src_len);
    f->dst = calloc(1, dst_len);
    st = f->src == NULL || f->dst == NULL ? UCCL_ERR_NO_MEMORY : unit_pair_open(transport, &f->p);
    if (st == UCCL_OK)
        st = uccl_mr_reg(f->p.a, f->src, src_len, 0, &f->src_mr);
    if (st == UCCL_OK)
        st = uccl_mr_reg(f->p.b, f->dst, dst_len, 0, &f->dst_mr);
    if (st != UCCL_OK)
        unit_fixture_close(f);
    return st;
}

/* Drive both engines until every non-NULL request of reqs is done or the
 * timeout passes. Returns UCCL_OK when all are done (whatever their status),
 * UCCL_ERR_TIMEOUT otherwise. */
static inline uccl_status_t unit_drive(unit_pair_t *p, uccl_req_t **reqs, size_t n, int timeout_ms)
{
    uint64_t deadline = unit_now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        size_t pending = 0;

        uccl_engine_progress(p->a);
        uccl_engine_progress(p->b);
        for (size_t i = 0; i < n; i++) {
            int done = 0;
            if (reqs[i] != NULL) {
                uccl_test(reqs[i], &done);
                pending += !done;
            }
        }
        if (pending == 0)
            return UCCL_OK;
        if (unit_now_ms() >= deadline)
            return UCCL_ERR_TIMEOUT;
    }
}

/* Test data: byte i of pattern seed; unit_mismatches counts the bytes of p
 * that differ from it. */
static inline uint8_t unit_pattern(size_t i, unsigned seed)
{
    return (uint8_t)(i * 131u + seed * 7u + (i >> 12));
}

static inline void unit_fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = unit_pattern(i, seed);
}

static inline size_t unit_mismatches(const uint8_t *p, size_t len, unsigned seed)
{
    size_t bad = 0;
    for (size_t i = 0; i < len; i++)
        bad += p[i] != unit_pattern(i, seed);
    return bad;
}

/* One 4 KiB message a -> b over p's connections (tag), bytes compared: a
 * connection carries data. UCCL_OK, the first failed status,
 * UCCL_ERR_TIMEOUT, or UCCL_ERR_IO when bytes differ. */
static inline uccl_status_t unit_ping(unit_pair_t *p, uint64_t tag)
{
    uint8_t out[4096], in[4096] = {0};
    uccl_mr_t *mo = NULL, *mi = NULL;
    uccl_req_t *r[2] = {NULL, NULL};
    uccl_status_t st = uccl_mr_reg(p->a, out, sizeof(out), 0, &mo);

    unit_fill(out, sizeof(out), 9);
    if (st == UCCL_OK)
        st = uccl_mr_reg(p->b, in, sizeof(in), 0, &mi);
    if (st == UCCL_OK)
        st = uccl_recv(p->ba, mi, 0, sizeof(in), tag, &r[0]);
    if (st == UCCL_OK)
        st = uccl_send(p->ab, mo, 0, sizeof(out), tag, &r[1]);
    if (st == UCCL_OK)
        st = unit_drive(p, r, 2, UNIT_TIMEOUT_MS);
    for (int i = 0; i < 2 && st == UCCL_OK; i++)
        st = uccl_wait(r[i], 0);
    if (st == UCCL_OK && unit_mismatches(in, sizeof(in), 9) != 0)
        st = UCCL_ERR_IO;
    for (int i = 0; i < 2; i++)
        if (r[i] != NULL)
            uccl_req_free(r[i]);
    if (mi != NULL)
        uccl_mr_dereg(mi);
    if (mo != NULL)
        uccl_mr_dereg(mo);
    return st;
}

/* Which transports to run the live suites over; a suite is registered only
 * when an engine with that transport alone can be created here. */
static const char *const unit_transports[] = {"shm", "tcp"};
#define UNIT_NTRANSPORTS (sizeof(unit_transports) / sizeof(unit_transports[0]))

static inline int unit_transport_usable(const char *transport)
{
    uccl_engine_t *e;
    uccl_status_t st = unit_engine_create(transport, &e);

    if (st != UCCL_OK) {
        printf("SKIP: the suites over %s: transport not usable here (%s)\n", transport,
               uccl_status_name(st));
        return 0;
    }
    uccl_engine_destroy(e);
    return 1;
}

#ifdef UCCL_TESTS_UNIT_H /* with unit.h: CUnit programs */
/* The per-transport suites: the transport of the suite that runs now, and
 * the rest of its set-up (unit_tp_suites' init). */
static const char *unit_tp;
static int (*unit_tp_init)(void);

static inline int unit_tp_enter(size_t i)
{
    unit_tp = unit_transports[i];
    return unit_tp_init != NULL ? unit_tp_init() : 0;
}

static inline int unit_tp_enter0(void) { return unit_tp_enter(0); }
static inline int unit_tp_enter1(void) { return unit_tp_enter(1); }

/* One suite "name/<transport>" of tests for every transport of
 * unit_transports usable here, into out (room for UNIT_NTRANSPORTS): each
 * sets unit_tp, then runs init (NULL: nothing more); cleanup may be NULL.
 * Returns how many. */
static inline size_t unit_tp_suites(const char *name, CU_TestInfo *tests, int (*init)(void),
                                    int (*cleanup)(void), CU_SuiteInfo *out)
{
    static int (*const enter[])(void) = {unit_tp_enter0, unit_tp_enter1};
    static char names[UNIT_NTRANSPORTS][64];
    size_t n = 0;

    _Static_assert(sizeof(enter) / sizeof(enter[0]) == UNIT_NTRANSPORTS, "one entry per transport");
    unit_tp_init = init;
    for (size_t i = 0; i < UNIT_NTRANSPORTS; i++) {
        if (!unit_transport_usable(unit_transports[i]))
            continue;
        snprintf(names[i], sizeof(names[i]), "%s/%s", name, unit_transports[i]);
        out[n++] = (CU_SuiteInfo){names[i], enter[i], cleanup, NULL, NULL, tests};
    }
    return n;
}

/* Run unit_tp_suites' suites; UNIT_EXIT_SKIP when no transport is usable. */
static inline int unit_main_tp(const char *name, CU_TestInfo *tests, int (*init)(void),
                               int (*cleanup)(void))
{
    CU_SuiteInfo suites[UNIT_NTRANSPORTS + 1];
    size_t n = unit_tp_suites(name, tests, init, cleanup, suites);

    if (n == 0)
        return UNIT_EXIT_SKIP;
    suites[n] = (CU_SuiteInfo)CU_SUITE_INFO_NULL;
    return unit_main(suites);
}
#endif

#endif

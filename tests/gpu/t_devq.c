/* Device queues (uccl_devq.h) with host threads standing in for kernels:
 * they run the device API of uccl_device.cuh itself, compiled as C. Two
 * processes (a forked receiver, addresses over a socketpair):
 *  - 4 producers x 2500 mixed-size writes (1..4096 bytes) through a 64-entry
 *    ring (wraps ~160 times, full most of the time), each then waits for its
 *    commands (done word) and sends a notification that the receiver's ring
 *    counts and a host thread waits for with uccl_devq_wait_counter; the
 *    receiver checks every byte and every gap, the sender the exact counts;
 *  - ring full: 64 contiguous commands published before the proxy starts
 *    block a 65th producer (tail stays 0) and go out as one merged write;
 *  - the receiver killed mid-run: the error word is set, every producer and
 *    waiter returns an error, uccl_devq_stop reports it;
 *  - the proxy's trace of its first writes (ticket order, times in order);
 * once with the ring and buffers in host memory, once (fake GPU backend) with
 * the ring in mapped memory and the buffers in GPU memory (gpu_ipc). Single
 * process: bad parameters, a malformed command, the device-side spin bound,
 * and stop/fail releasing a waiting kernel. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uccl/uccl.h>
#include <uccl/uccl_device.cuh>

#include "gpu/gpu.h"
#include "proxy/devq.h"
#include "util/sys.h"
#include "check1.h"
#include "devq_pair.h"

#define NT 4
#define PER 2500
#define MAXLEN 4096
#define DST_BYTES ((size_t)NT * PER * MAXLEN)
#define MARK_OFF DST_BYTES            /* NT x 8 bytes: each producer's last write */
#define SCRATCH_OFF (DST_BYTES + 64)  /* 64 x 64 bytes: the ring-full check */
#define DST_ALLOC (DST_BYTES + 64 + 64 * 64)
#define ENTRIES 64

typedef struct dq_mode {
    const char *name;
    uccl_devq_mem_t ring;
    int gpu; /* buffers in (fake) GPU memory: parent GPU 0, child GPU 1 */
} dq_mode_t;

typedef struct peer_hello {
    size_t addr_len;
    uint8_t addr[UCCL_ADDRESS_MAX];
    uccl_rdesc_t rdesc;
} peer_hello_t;

static void *region_alloc(int gpu, size_t len)
{
    void *p = NULL;

    if (!gpu)
        return calloc(1, len);
    if (uccl_gpu_malloc(&p, len) != UCCL_OK || uccl_gpu_memset(p, 0, len) != UCCL_OK)
        return NULL;
    return p;
}

static void region_free(int gpu, void *p)
{
    if (gpu)
        uccl_gpu_free(p);
    else
        free(p);
}

static uccl_engine_t *engine_for(int gpu, int device)
{
    uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = -1};
    uccl_engine_t *e = NULL;

    if (gpu) {
        uccl_gpu_set_device(device);
        ep.gpu_index = device;
    }
    return uccl_engine_create(&ep, &e) == UCCL_OK ? e : NULL;
}

/* ---------------------------------------------------------------- the receiver */

static int child_main(int fd, const dq_mode_t *m, int will_be_killed)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_MEM | UCCL_DEVQ_PARAM_NCOUNTERS |
                                           UCCL_DEVQ_PARAM_NPEERS,
                             .mem = UCCL_DEVQ_MEM_HOST, .ncounters = NT, .npeers = 1};
    uccl_engine_t *e = engine_for(m->gpu, 1);
    peer_hello_t hello = {.addr_len = sizeof(hello.addr)};
    uint8_t *dst = region_alloc(m->gpu, DST_ALLOC), *host = dst;
    uccl_mr_t *mr = NULL;
    uccl_conn_t *conn = NULL;
    uccl_devq_t *q = NULL;
    uccl_devq_handle_t h;
    uccl_devq_stats_t s;
    char bye;

    failures = 0;
    if (e == NULL || dst == NULL || uccl_mr_reg(e, dst, DST_ALLOC, 0, &mr) != UCCL_OK ||
        uccl_mr_pack(mr, 0, DST_ALLOC, &hello.rdesc) != UCCL_OK ||
        uccl_engine_address(e, hello.addr, &hello.addr_len) != UCCL_OK) {
        printf("FAIL: receiver setup\n");
        return 1;
    }
    if (dq_send(fd, &hello, sizeof(hello)) != 0 || uccl_accept(e, 20000, &conn) != UCCL_OK) {
        printf("FAIL: receiver: no connection\n");
        return 1;
    }
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_OK, "receiver: devq_create");
    CHECK(uccl_devq_bind_peer(q, 0, conn) == UCCL_OK, "receiver: bind_peer");
    CHECK(uccl_devq_start(q) == UCCL_OK, "receiver: start");
    uccl_devq_handle(q, &h);
    if (will_be_killed) {
        dq_recv(fd, &bye, 1); /* until the parent kills us */
        return 0;
    }
    for (uint32_t t = 0; t < NT; t++) {
        int rc = uccl_devq_wait_counter(&h, t, 1);
        CHECK(rc == 0, "receiver: counter %u: %s", t, uccl_status_name((uccl_status_t)rc));
    }
    if (m->gpu) {
        host = malloc(DST_ALLOC);
        CHECK(host != NULL && uccl_gpu_memcpy(host, dst, DST_ALLOC) == UCCL_OK, "receiver: copy out");
    }
    if (host != NULL) {
        CHECK(dq_verify(host, NT, PER, MAXLEN) == 0, "receiver: %s: bytes differ", m->name);
        for (uint32_t t = 0; t < NT; t++)
            for (int i = 0; i < 8; i++)
                CHECK(host[MARK_OFF + t * 8 + i] == dq_pattern((uint64_t)i), "receiver: marker %u", t);
        for (int i = 0; i < 64 * 64; i++)
            CHECK(host[SCRATCH_OFF + i] == dq_pattern((uint64_t)i), "receiver: scratch byte %d", i);
    }
    uccl_devq_stats(q, &s);
    CHECK(s.notifs == NT, "receiver: %llu notifications counted, want %d", (unsigned long long)s.notifs, NT);
    for (uint32_t t = 0; t < NT; t++) {
        uint64_t v = 0;
        uccl_devq_counter(q, t, &v);
        CHECK(v == 1, "receiver: counter %u is %llu", t, (unsigned long long)v);
    }
    if (failures == 0)
        printf("ok: receiver (%s): %d x %d writes, every byte and gap checked, %llu notifications\n",
               m->name, NT, PER, (unsigned long long)s.notifs);
    dq_send(fd, &failures, sizeof(failures));
    dq_recv(fd, &bye, 1);
    uccl_devq_destroy(q);
    uccl_conn_close(conn);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    if (host != dst)
        free(host);
    region_free(m->gpu, dst);
    return failures ? 1 : 0;
}

/* ---------------------------------------------------------------- producers */

typedef struct producer {
    uccl_devq_handle_t h;
    uint32_t t;
    int endless; /* until the ring fails (peer-killed case) */
    int rc;
    uint64_t puts;
    pthread_t thread;
} producer_t;

static void *producer_main(void *arg)
{
    producer_t *p = arg;
    uint64_t ticket = 0;
    dq_cmd_t c;

    for (uint32_t k = 0; p->endless || k < PER; k++) {
        dq_cmd(p->t, k % PER, PER, MAXLEN, &c);
        p->rc = uccl_devq_put(&p->h, 0, 0, c.loff, c.roff, c.len, 0, 0, &ticket);
        if (p->rc != 0)
            return NULL;
        p->puts++;
    }
    /* wait for this producer's writes, then say so with a notification */
    p->rc = uccl_devq_wait_done(&p->h, ticket + 1);
    if (p->rc == 0)
        p->rc = uccl_devq_put(&p->h, 0, 0, 0, MARK_OFF + p->t * 8, 8, UCCL_DEVQ_CMD_NOTIFY,
                              UCCL_DEVQ_NOTIF(p->t, 1), &ticket);
    if (p->rc == 0)
        p->rc = uccl_devq_wait_done(&p->h, ticket + 1);
    return NULL;
}

typedef struct blocked {
    uccl_devq_handle_t h;
    atomic_int returned;
    int rc;
} blocked_t;

static void *blocked_main(void *arg)
{
    blocked_t *b = arg;

    b->rc = uccl_devq_put(&b->h, 0, 0, 0, SCRATCH_OFF, 64, 0, 0, NULL);
    atomic_store(&b->returned, 1);
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* 64 contiguous commands before the proxy runs: a 65th producer must block
 * (ring full) until the proxy takes them, as one merged write. */
static void ring_full_check(uccl_devq_t *q, const uccl_devq_handle_t *h)
{
    blocked_t b = {.h = *h};
    uccl_devq_stats_t s;
    pthread_t th;

    for (int i = 0; i < ENTRIES; i++)
        CHECK(uccl_devq_put(h, 0, 0, (uint64_t)i * 64, SCRATCH_OFF + (uint64_t)i * 64, 64, 0, 0, NULL) == 0,
              "fill put %d", i);
    pthread_create(&th, NULL, blocked_main, &b);
    sleep_ms(100);
    CHECK(atomic_load(&b.returned) == 0, "a put into a full ring returned (%d) before the proxy ran", b.rc);
    CHECK(h->ctrl->tail == 0, "tail moved without a proxy");
    CHECK(uccl_devq_start(q) == UCCL_OK, "start");
    pthread_join(th, NULL);
    CHECK(b.rc == 0, "the blocked put: %s", uccl_status_name((uccl_status_t)b.rc));
    CHECK(uccl_devq_wait_done(h, ENTRIES + 1) == 0, "wait_done 65");
    uccl_devq_stats(q, &s);
    CHECK(s.commands == ENTRIES + 1 && s.completed == ENTRIES + 1 && s.writes == 2,
          "ring full: %llu commands, %llu completed in %llu writes (want 65, 65, 2: the first 64 merged)",
          (unsigned long long)s.commands, (unsigned long long)s.completed, (unsigned long long)s.writes);
    if (failures == 0)
        printf("ok: ring full: the 65th put waited; 64 published commands went as 1 write\n");
}

/* batch_bytes closes a batch: 64 contiguous 64-byte commands, 256 bytes a
 * batch, go as 16 writes (a second ring on the same connection). */
static void batch_bytes_check(uccl_engine_t *e, uccl_devq_mem_t mem, uccl_mr_t *mr, uccl_conn_t *conn,
                              const uccl_rdesc_t *rd)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_MEM |
                                           UCCL_DEVQ_PARAM_BATCH_BYTES,
                             .entries = ENTRIES, .mem = mem, .batch_bytes = 256};
    uccl_devq_t *q = NULL;
    uccl_devq_handle_t h;
    uccl_devq_stats_t s;

    if (uccl_devq_create(e, &qp, &q) != UCCL_OK) {
        CHECK(0, "batch_bytes: create");
        return;
    }
    CHECK(uccl_devq_bind_local(q, mr) == UCCL_OK && uccl_devq_bind_peer(q, 0, conn) == UCCL_OK &&
              uccl_devq_bind_rdesc(q, 0, rd) == UCCL_OK, "batch_bytes: bind");
    uccl_devq_handle(q, &h);
    for (int i = 0; i < ENTRIES; i++)
        uccl_devq_put(&h, 0, 0, (uint64_t)i * 64, SCRATCH_OFF + (uint64_t)i * 64, 64, 0, 0, NULL);
    CHECK(uccl_devq_start(q) == UCCL_OK && uccl_devq_wait_done(&h, ENTRIES) == 0, "batch_bytes: writes");
    uccl_devq_stats(q, &s);
    CHECK(s.completed == ENTRIES && s.writes == ENTRIES * 64 / 256,
          "batch_bytes 256: %llu commands in %llu writes, want %d in %d", (unsigned long long)s.completed,
          (unsigned long long)s.writes, ENTRIES, ENTRIES * 64 / 256);
    uccl_devq_destroy(q);
}

/* The trace (proxy/devq.h) of the first TRACE_N writes: in ticket order,
 * back to back, the 64 merged commands of the ring-full check first, each
 * record's times in order (found <= posted <= complete <= published). */
#define TRACE_N 32
static void trace_check(uccl_devq_t *q, const char *name)
{
    uccl_devq_trace_rec_t r[TRACE_N + 1];
    uint32_t n = uccl_devq_trace_read(q, r, TRACE_N + 1);
    int bad = 0;

    CHECK(n == TRACE_N, "%s: %u trace records, want %d", name, n, TRACE_N);
    CHECK(n > 0 && r[0].first == 0 && r[0].ncmds == ENTRIES, "%s: first traced write: ticket %llu, %u commands",
          name, n ? (unsigned long long)r[0].first : 0ull, n ? r[0].ncmds : 0);
    for (uint32_t k = 0; k < n; k++) {
        if (r[k].seen_ns == 0 || r[k].seen_ns > r[k].posted_ns || r[k].posted_ns > r[k].done_ns ||
            r[k].done_ns > r[k].published_ns || r[k].ncmds == 0 ||
            (k > 0 && r[k].first != r[k - 1].first + r[k - 1].ncmds))
            bad++;
    }
    CHECK(bad == 0, "%s: %d trace records out of order", name, bad);
}

static void run_pair(const dq_mode_t *m, int kill_peer)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_MEM |
                                           UCCL_DEVQ_PARAM_NPEERS | UCCL_DEVQ_PARAM_NSLOTS,
                             .entries = ENTRIES, .mem = m->ring, .npeers = 2, .nslots = 2};
    int sv[2], status = 0, child_failures = -1, before = failures, reaped = 0;
    producer_t prod[NT];
    peer_hello_t hello;
    uccl_engine_t *e = NULL;
    uccl_conn_t *conn = NULL;
    uccl_mr_t *mr = NULL;
    uccl_devq_t *q = NULL;
    uccl_devq_handle_t h;
    uccl_devq_stats_t s;
    uint8_t *src = NULL, *pat;
    pid_t pid;

    fflush(stdout);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return;
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(child_main(sv[1], m, kill_peer));
    }
    close(sv[1]);
    e = engine_for(m->gpu, 0);
    src = region_alloc(m->gpu, DQ_LOCAL);
    pat = malloc(DQ_LOCAL);
    for (size_t i = 0; pat != NULL && i < DQ_LOCAL; i++)
        pat[i] = dq_pattern(i);
    if (e == NULL || src == NULL || pat == NULL || dq_recv(sv[0], &hello, sizeof(hello)) != 0) {
        CHECK(0, "%s: sender setup", m->name);
        goto out;
    }
    if (m->gpu)
        uccl_gpu_memcpy(src, pat, DQ_LOCAL);
    else
        memcpy(src, pat, DQ_LOCAL);
    CHECK(uccl_mr_reg(e, src, DQ_LOCAL, 0, &mr) == UCCL_OK, "mr_reg");
    CHECK(uccl_connect(e, hello.addr, hello.addr_len, &conn) == UCCL_OK, "connect");
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_OK, "%s: devq_create", m->name);
    if (failures != before)
        goto out;
    CHECK(uccl_devq_bind_local(q, mr) == UCCL_OK, "bind_local");
    CHECK(uccl_devq_bind_peer(q, 0, conn) == UCCL_OK, "bind_peer");
    CHECK(uccl_devq_bind_rdesc(q, 0, &hello.rdesc) == UCCL_OK, "bind_rdesc");
    uccl_devq_handle(q, &h);
    CHECK(uccl_devq_trace_enable(q, TRACE_N) == UCCL_OK, "trace_enable");
    if (!kill_peer)
        ring_full_check(q, &h);
    else
        CHECK(uccl_devq_start(q) == UCCL_OK, "start");
    for (int t = 0; t < NT; t++) {
        prod[t] = (producer_t){.h = h, .t = (uint32_t)t, .endless = kill_peer};
        pthread_create(&prod[t].thread, NULL, producer_main, &prod[t]);
    }
    if (kill_peer) {
        uint64_t t0 = uccl_time_ms();
        do {
            sleep_ms(5);
            uccl_devq_stats(q, &s);
        } while (s.completed < 3000 && uccl_time_ms() - t0 < 30000);
        CHECK(s.completed >= 3000, "only %llu writes completed before the kill", (unsigned long long)s.completed);
        /* reaped at once, as a launcher reaps a dead rank: a zombie still
         * answers kill(pid, 0), and the shm close fence below would wait the
         * whole UCCL_TIMEOUT_MS (60 s) when the kill caught it mid-copy */
        if (kill(pid, SIGKILL) == 0 && waitpid(pid, &status, 0) == pid)
            reaped = 1;
        t0 = uccl_time_ms();
    }
    for (int t = 0; t < NT; t++)
        pthread_join(prod[t].thread, NULL);
    uccl_devq_stats(q, &s);
    if (kill_peer) {
        uccl_status_t st = uccl_devq_status(q);
        int rc = uccl_devq_wait_done(&h, s.commands + 1000000);

        CHECK(UCCL_STATUS_IS_ERR(st), "peer killed: the ring's error word is %s", uccl_status_name(st));
        for (int t = 0; t < NT; t++)
            CHECK(prod[t].rc != 0, "peer killed: producer %d returned 0", t);
        CHECK(rc == (int)st, "peer killed: wait_done returned %d, error word %d", rc, (int)st);
        CHECK(uccl_devq_stop(q) == st, "peer killed: stop reports the error");
        printf("ok: %s: receiver killed after %llu completed writes: error word %s, "
               "producers and waiters released\n", m->name, (unsigned long long)s.completed,
               uccl_status_name(st));
    } else {
        uint64_t total = ENTRIES + 1 + (uint64_t)NT * (PER + 1);

        for (int t = 0; t < NT; t++)
            CHECK(prod[t].rc == 0, "producer %d: %s", t, uccl_status_name((uccl_status_t)prod[t].rc));
        CHECK(s.commands == total && s.completed == total && h.ctrl->done == total && h.ctrl->tail == total,
              "counts: %llu taken, %llu completed, done word %llu, tail %llu; want %llu",
              (unsigned long long)s.commands, (unsigned long long)s.completed,
              (unsigned long long)h.ctrl->done, (unsigned long long)h.ctrl->tail, (unsigned long long)total);
        batch_bytes_check(e, m->ring, mr, conn, &hello.rdesc); /* same bytes into the scratch area */
        CHECK(dq_recv(sv[0], &child_failures, sizeof(child_failures)) == 0 && child_failures == 0,
              "%s: the receiver found %d failures", m->name, child_failures);
        CHECK(uccl_devq_trace_enable(q, 1) == UCCL_ERR_BUSY, "trace_enable while running: busy");
        CHECK(uccl_devq_stop(q) == UCCL_OK, "stop");
        trace_check(q, m->name);
        {
            uint64_t t = 0;
            int rc = uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, &t);
            CHECK(rc == UCCL_ERR_CANCELED || (rc == 0 && uccl_devq_wait_done(&h, t + 1) == UCCL_ERR_CANCELED),
                  "a put after stop is canceled (%d)", rc);
        }
        printf("ok: %s: %llu commands in %llu writes (%.1f per write), counts exact\n", m->name,
               (unsigned long long)s.commands, (unsigned long long)s.writes,
               (double)s.commands / (double)(s.writes ? s.writes : 1));
    }
out:
    dq_send(sv[0], "x", 1);
    close(sv[0]);
    uccl_devq_destroy(q);
    if (conn != NULL)
        uccl_conn_close(conn);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    if (e != NULL)
        uccl_engine_destroy(e);
    if (src != NULL)
        region_free(m->gpu, src);
    free(pat);
    if (!reaped)
        waitpid(pid, &status, 0);
    if (!kill_peer)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: receiver exit status %d", m->name, status);
}


/* ---------------------------------------------------------------- one process */

typedef struct waiter {
    uccl_devq_handle_t h;
    int rc;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;

    w->rc = uccl_devq_wait_counter(&w->h, 0, 1);
    return NULL;
}

/* A kernel waiting on a counter that never moves is released by stop (or
 * by uccl_devq_fail) with the error word. */
static void release_check(uccl_engine_t *e, int use_fail)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_MEM | UCCL_DEVQ_PARAM_NCOUNTERS,
                             .mem = UCCL_DEVQ_MEM_HOST, .ncounters = 1};
    uccl_devq_t *q = NULL;
    waiter_t w = {.rc = 1};
    pthread_t th;

    if (uccl_devq_create(e, &qp, &q) != UCCL_OK) {
        CHECK(0, "release: create");
        return;
    }
    CHECK(uccl_devq_start(q) == UCCL_OK, "release: start without a local region");
    uccl_devq_handle(q, &w.h);
    pthread_create(&th, NULL, waiter_main, &w);
    sleep_ms(50);
    if (use_fail) {
        CHECK(uccl_devq_fail(q, UCCL_ERR_IO) == UCCL_OK, "fail");
        CHECK(uccl_devq_fail(q, UCCL_OK) == UCCL_ERR_INVALID_PARAM, "fail(OK) refused");
    } else {
        CHECK(uccl_devq_stop(q) == UCCL_OK, "release: stop of a healthy ring");
    }
    pthread_join(th, NULL);
    CHECK(w.rc == (use_fail ? UCCL_ERR_IO : UCCL_ERR_CANCELED), "release by %s: waiter got %d",
          use_fail ? "fail" : "stop", w.rc);
    if (!use_fail) { /* a clean stop may start again */
        CHECK(uccl_devq_start(q) == UCCL_OK && uccl_devq_status(q) == UCCL_OK, "restart after stop");
    } else {
        CHECK(uccl_devq_stop(q) == UCCL_ERR_IO, "stop reports the failure");
    }
    uccl_devq_destroy(q);
}

static void single_process_checks(int fake_gpu)
{
    uccl_devq_params_t qp = {.field_mask = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_MEM,
                             .entries = 2, .mem = UCCL_DEVQ_MEM_HOST};
    uccl_engine_t *e = engine_for(0, 0);
    uint8_t buf[256] = {0};
    uccl_devq_handle_t h;
    uccl_rdesc_t rd;
    uccl_devq_t *q = NULL;
    uccl_mr_t *mr = NULL;
    uint64_t t0;
    int rc;

    if (e == NULL) {
        CHECK(0, "engine");
        return;
    }
    /* parameters */
    qp.entries = 3;
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_ERR_INVALID_PARAM, "entries 3 refused");
    qp.entries = 2;
    qp.field_mask |= 1u << 30;
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_ERR_INVALID_PARAM, "unknown field bit refused");
    qp.field_mask &= ~(1u << 30);
    CHECK(uccl_devq_create(NULL, &qp, &q) == UCCL_ERR_INVALID_PARAM, "NULL engine refused");
    {
        uccl_devq_t *mq = NULL;
        uccl_status_t st = uccl_devq_create(e, NULL, &mq); /* default: mapped memory */
        int ngpu = 0;

        uccl_gpu_count(&ngpu);
        if (ngpu == 0)
            CHECK(st == UCCL_ERR_NO_DEVICE, "a mapped ring without a GPU: %s", uccl_status_name(st));
        else
            CHECK(st == UCCL_OK, "a mapped ring on %s: %s", uccl_gpu_backend(), uccl_status_name(st));
        uccl_devq_destroy(mq);
        (void)fake_gpu;
    }
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_OK, "create");
    memset(&rd, 0x5a, sizeof(rd));
    rc = uccl_devq_bind_rdesc(q, 0, &rd);
    CHECK(rc == UCCL_ERR_BAD_DESC || rc == UCCL_ERR_VERSION, "a garbage descriptor refused: %d", rc);
    CHECK(uccl_devq_bind_peer(q, 16, NULL) == UCCL_ERR_INVALID_PARAM, "peer index past npeers refused");
    CHECK(uccl_mr_reg(e, buf, sizeof(buf), 0, &mr) == UCCL_OK, "mr_reg");
    CHECK(uccl_mr_pack(mr, 0, sizeof(buf), &rd) == UCCL_OK, "pack");
    CHECK(uccl_devq_bind_rdesc(q, 0, &rd) == UCCL_OK, "bind a good descriptor");
    CHECK(uccl_devq_bind_local(q, mr) == UCCL_OK, "bind_local");

    /* the device-side spin bound: no proxy, the ring full, a 50 ms bound */
    uccl_devq_handle(q, &h);
    h.spin_timeout_ns = 50000000ull;
    CHECK(uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, NULL) == 0 && uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, NULL) == 0,
          "two puts fill a 2-entry ring");
    t0 = uccl_time_ms();
    rc = uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, NULL);
    CHECK(rc == UCCL_ERR_TIMEOUT && uccl_time_ms() - t0 < 5000, "a put into a full ring without a proxy: %d after %llu ms",
          rc, (unsigned long long)(uccl_time_ms() - t0));
    CHECK(uccl_devq_status(q) == UCCL_ERR_TIMEOUT, "the spin bound set the error word: %s",
          uccl_status_name(uccl_devq_status(q)));
    CHECK(uccl_devq_start(q) == UCCL_ERR_TIMEOUT, "a failed ring does not start");
    uccl_devq_destroy(q);

    /* a malformed command (peer 0 is not bound) fails the ring */
    q = NULL;
    CHECK(uccl_devq_create(e, &qp, &q) == UCCL_OK, "create");
    if (q == NULL)
        return;
    CHECK(uccl_devq_bind_rdesc(q, 0, &rd) == UCCL_OK && uccl_devq_bind_local(q, mr) == UCCL_OK, "bind");
    uccl_devq_handle(q, &h);
    CHECK(uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, NULL) == 0, "put");
    CHECK(uccl_devq_start(q) == UCCL_OK, "start");
    rc = uccl_devq_wait_done(&h, 1);
    CHECK(rc == UCCL_ERR_INVALID_PARAM, "a command to an unbound peer: wait_done gives %d", rc);
    CHECK(uccl_devq_status(q) == UCCL_ERR_INVALID_PARAM, "status reports the malformed command");
    {
        uint64_t t = 0;
        rc = uccl_devq_put(&h, 0, 0, 0, 0, 8, 0, 0, &t);
        CHECK(rc == UCCL_ERR_INVALID_PARAM || (rc == 0 && uccl_devq_wait_done(&h, t + 1) == UCCL_ERR_INVALID_PARAM),
              "a put into a failed ring: %d", rc);
    }
    CHECK(uccl_devq_stop(q) == UCCL_ERR_INVALID_PARAM, "stop reports it");
    uccl_devq_destroy(q);
    release_check(e, 0);
    release_check(e, 1);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    printf("ok: parameters, a malformed command, the spin bound, stop and fail release waiters\n");
}

int main(void)
{
    static const dq_mode_t host = {"host ring, host memory", UCCL_DEVQ_MEM_HOST, 0};
    static const dq_mode_t fake = {"mapped ring, fake GPU memory", UCCL_DEVQ_MEM_MAPPED, 1};
    int fake_gpu = strcmp(uccl_gpu_backend(), "fake") == 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN); /* the killed receiver's socket */
    alarm(240);              /* a hang is a failure, never a stuck CI */
    run_pair(&host, 0);
    run_pair(&host, 1);
    if (fake_gpu) {
        run_pair(&fake, 0); /* (a killed child would leave its fake GPU memory in /dev/shm) */
    } else {
        printf("SKIP: mapped ring and GPU buffers: needs the fake GPU backend (host threads cannot "
               "reach a real GPU's ticket counter; b_devq covers CUDA)\n");
    }
    single_process_checks(fake_gpu);
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

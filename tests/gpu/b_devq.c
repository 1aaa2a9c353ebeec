/* Device queues on a real GPU (CUDA): two processes on one GPU (a forked
 * receiver; addresses over a socketpair; bytes through gpu_ipc).
 *  1. correctness: 4 blocks, one ring each, issue 4 x 25000 writes of mixed
 *     sizes (1..8192 bytes; warp-wide and per-thread puts), wait for them on
 *     the GPU, then each sends a notification; a receiver kernel waits on the
 *     notification counters and another checks every byte and gap on the GPU;
 *     the counts (taken, completed, notifications, counters) must be exact;
 *  2. benchmark: commands/s and GB/s for 1 KiB..1 MiB issued by a kernel (one
 *     warp, one ring) next to the same writes issued by the host through
 *     uccl_write (64 in flight), median of 3; 1 KiB also with contiguous
 *     commands (merged by the proxy); the issue-to-completion latency of one
 *     4 KiB write from a kernel and from the host (median and p99 of 1000);
 *  3. the receiver killed while a kernel issues writes: the kernel must leave
 *     with the error word, the host API must report it.
 * Usage: b_devq [--json FILE] [--only correctness|bench|kill]. Exit 0 when
 * every check passed; prints "SKIP: ..." and exits 77 without a GPU. */
#include <ctype.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uccl/uccl.h>
#include <uccl/uccl_devq.h>

#include "gpu/gpu.h"
#include "proxy/devq.h"
#include "check1.h"
#include "devq_kernels.h"
#include "devq_pair.h"

#define NT 4
#define PER 25000
#define MAXLEN 8192
#define DST_BYTES ((size_t)NT * PER * MAXLEN)
#define MARK_OFF DST_BYTES
#define WARM_OFF (DST_BYTES + 4096)
#define DST_ALLOC (DST_BYTES + 65536)
#define SRC_BYTES ((size_t)64 << 20)
#define SPAN ((size_t)512 << 20)
#define WINDOW 64

typedef struct hello {
    size_t addr_len;
    uint8_t addr[UCCL_ADDRESS_MAX];
    uccl_rdesc_t rdesc;
} hello_t;

typedef struct verdict {
    int rc;
    unsigned long long bad;
    uint64_t notifs;
    uint64_t counters[NT];
} verdict_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Pin the calling thread (and so every thread it starts later: the engine's,
 * the CUDA driver's, the rings' proxies) to GPU 0's local CPUs, so that the
 * host-issued reference (this thread) and the proxies run on the same CPUs.
 * Unpinned, where a thread happens to land moved the reference by 25-30%
 * from one run to the next. Best effort: prints what it did. */
static void pin_near_gpu(void)
{
    char busid[64], path[160], list[512];
    cpu_set_t set;
    FILE *f;
    int n = 0;

    if (uccl_gpu_pci_bus_id(0, busid, sizeof(busid)) != UCCL_OK)
        return;
    for (char *c = busid; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/local_cpulist", busid);
    if ((f = fopen(path, "r")) == NULL)
        return;
    if (fgets(list, sizeof(list), f) == NULL)
        list[0] = 0;
    fclose(f);
    CPU_ZERO(&set);
    for (char *p = list; *p && *p != '\n';) { /* "0-31,64-95" */
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long c = a; c <= b && c < CPU_SETSIZE; c++, n++)
            CPU_SET((int)c, &set);
        p = *end == ',' ? end + 1 : end;
    }
    list[strcspn(list, "\n")] = 0;
    if (n > 0 && sched_setaffinity(0, sizeof(set), &set) == 0)
        printf("# sender pinned to GPU 0's local CPUs %s (%s)\n", list, busid);
}

/* The sender is on GPU 0; the receiver too, or on GPU B_DEVQ_RX_GPU
 * (several GPUs: kernel-issued writes cross a link; capped to the GPUs). */
static uccl_engine_t *gpu_engine(int gpu)
{
    uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = gpu};
    uccl_engine_t *e = NULL;

    if (uccl_gpu_set_device(gpu) != UCCL_OK)
        return NULL;
    return uccl_engine_create(&ep, &e) == UCCL_OK ? e : NULL;
}

static int rx_gpu(void)
{
    const char *v = getenv("B_DEVQ_RX_GPU");
    int n = 0, g = v ? atoi(v) : 0;

    if (uccl_gpu_count(&n) != UCCL_OK || n == 0)
        return 0;
    return g < 0 ? 0 : g >= n ? n - 1 : g;
}

/* batch_bytes 0: the default */
static uccl_devq_t *ring(uccl_engine_t *e, uint32_t entries, uint32_t ncounters, uint64_t batch_bytes,
                         int timeout_ms)
{
    uccl_devq_params_t p = {.field_mask = UCCL_DEVQ_PARAM_ENTRIES | UCCL_DEVQ_PARAM_NCOUNTERS |
                                          UCCL_DEVQ_PARAM_NPEERS | UCCL_DEVQ_PARAM_NSLOTS |
                                          UCCL_DEVQ_PARAM_TIMEOUT_MS |
                                          (batch_bytes ? UCCL_DEVQ_PARAM_BATCH_BYTES : 0),
                            .entries = entries, .ncounters = ncounters, .npeers = 1, .nslots = 1,
                            .timeout_ms = timeout_ms, .batch_bytes = batch_bytes};
    uccl_devq_t *q = NULL;
    uccl_status_t st = uccl_devq_create(e, &p, &q);

    CHECK(st == UCCL_OK, "devq_create: %s", uccl_status_name(st));
    return q;
}

/* ---------------------------------------------------------------- receiver */

static int receiver(int fd)
{
    uccl_engine_t *e = gpu_engine(rx_gpu());
    hello_t h = {.addr_len = sizeof(h.addr)};
    verdict_t v = {.rc = -1};
    uint8_t *dst = NULL;
    int *rc_dev = NULL;
    unsigned long long *bad_dev = NULL;
    uccl_mr_t *mr = NULL;
    uccl_conn_t *conn = NULL;
    uccl_devq_t *q;
    uccl_devq_handle_t hq;
    uccl_devq_stats_t s;
    char cmd = 0;

    if (e == NULL || uccl_gpu_malloc((void **)&dst, DST_ALLOC) != UCCL_OK ||
        uccl_gpu_memset(dst, 0, DST_ALLOC) != UCCL_OK || uccl_gpu_malloc((void **)&rc_dev, 64) != UCCL_OK ||
        uccl_gpu_malloc((void **)&bad_dev, 64) != UCCL_OK || uccl_gpu_memset(bad_dev, 0, 64) != UCCL_OK ||
        uccl_mr_reg(e, dst, DST_ALLOC, 0, &mr) != UCCL_OK || uccl_mr_pack(mr, 0, DST_ALLOC, &h.rdesc) != UCCL_OK ||
        uccl_engine_address(e, h.addr, &h.addr_len) != UCCL_OK) {
        printf("FAIL: receiver setup\n");
        return 1;
    }
    if (dq_send(fd, &h, sizeof(h)) != 0 || uccl_accept(e, 30000, &conn) != UCCL_OK)
        return 1;
    q = ring(e, 64, NT, 0, 20000);
    if (q == NULL || uccl_devq_bind_peer(q, 0, conn) != UCCL_OK || uccl_devq_start(q) != UCCL_OK)
        return 1;
    uccl_devq_handle(q, &hq);
    while (dq_recv(fd, &cmd, 1) == 0 && cmd == 'c') { /* a correctness round */
        double t0 = now_s();
        int rc = dqk_wait_counters(hq, NT, rc_dev);
        if (rc == 0)
            rc = dqk_verify(dst, NT, PER, MAXLEN, MARK_OFF, bad_dev);
        if (rc == 0)
            rc = dqk_sync();
        uccl_gpu_memcpy(&v.rc, rc_dev, sizeof(int));
        uccl_gpu_memcpy(&v.bad, bad_dev, sizeof(v.bad));
        if (rc != 0)
            v.rc = rc;
        uccl_devq_stats(q, &s);
        v.notifs = s.notifs;
        for (uint32_t t = 0; t < NT; t++)
            uccl_devq_counter(q, t, &v.counters[t]);
        printf("receiver: counters waited for and every byte checked on the GPU in %.2f s\n", now_s() - t0);
        dq_send(fd, &v, sizeof(v));
    }
    /* 'x' (or the parent gone): leave */
    uccl_devq_destroy(q);
    uccl_conn_close(conn);
    uccl_mr_dereg(mr);
    uccl_engine_destroy(e);
    return 0;
}

/* ---------------------------------------------------------------- sender */

typedef struct sender {
    int fd;
    pid_t child;
    uccl_engine_t *e;
    uccl_conn_t *conn;
    uccl_mr_t *mr;
    uint8_t *src;
    hello_t h;
    FILE *json;
} sender_t;

/* trace: record the first trace writes (proxy/devq.h) */
static uccl_devq_t *bound_ring(sender_t *S, uint32_t entries, uint64_t batch_bytes, int timeout_ms,
                               uint32_t trace)
{
    uccl_devq_t *q = ring(S->e, entries, 0, batch_bytes, timeout_ms);

    if (q == NULL)
        return NULL;
    if (uccl_devq_trace_enable(q, trace) != UCCL_OK || uccl_devq_bind_local(q, S->mr) != UCCL_OK || uccl_devq_bind_peer(q, 0, S->conn) != UCCL_OK ||
        uccl_devq_bind_rdesc(q, 0, &S->h.rdesc) != UCCL_OK || uccl_devq_start(q) != UCCL_OK) {
        CHECK(0, "ring setup");
        uccl_devq_destroy(q);
        return NULL;
    }
    return q;
}

static void correctness(sender_t *S)
{
    uccl_devq_t *q[NT] = {0};
    uccl_devq_handle_t hs[NT], *hs_dev = NULL;
    int rc[NT * 32], *rc_dev = NULL, launch;
    verdict_t v;
    double t0, dt;
    uint64_t total = 0, writes = 0;

    for (int t = 0; t < NT; t++) {
        q[t] = bound_ring(S, 1024, 0, 20000, 0);
        if (q[t] == NULL)
            return;
        uccl_devq_handle(q[t], &hs[t]);
    }
    uccl_gpu_malloc((void **)&hs_dev, sizeof(hs));
    uccl_gpu_malloc((void **)&rc_dev, sizeof(rc));
    uccl_gpu_memcpy(hs_dev, hs, sizeof(hs));
    uccl_gpu_memset(rc_dev, 0xff, sizeof(rc));
    dq_send(S->fd, "c", 1);
    t0 = now_s();
    launch = dqk_mixed(hs_dev, NT, PER, MAXLEN, MARK_OFF, rc_dev);
    CHECK(launch == 0 && dqk_sync() == 0, "mixed kernel: cuda error %d", launch);
    dt = now_s() - t0;
    uccl_gpu_memcpy(rc, rc_dev, sizeof(rc));
    for (int i = 0; i < NT * 32; i++)
        CHECK(rc[i] == 0, "producer thread %d: %s", i, uccl_status_name((uccl_status_t)rc[i]));
    for (int t = 0; t < NT; t++) {
        uccl_devq_stats_t s;
        uccl_devq_stats(q[t], &s);
        CHECK(s.commands == PER + 1 && s.completed == PER + 1 && uccl_devq_status(q[t]) == UCCL_OK,
              "ring %d: %llu taken, %llu completed, want %d", t, (unsigned long long)s.commands,
              (unsigned long long)s.completed, PER + 1);
        total += s.completed;
        writes += s.writes;
    }
    CHECK(dq_recv(S->fd, &v, sizeof(v)) == 0, "receiver verdict");
    CHECK(v.rc == 0 && v.bad == 0, "receiver: wait rc %d, %llu bad commands", v.rc, v.bad);
    CHECK(v.notifs == NT, "receiver: %llu notifications, want %d", (unsigned long long)v.notifs, NT);
    for (int t = 0; t < NT; t++)
        CHECK(v.counters[t] == 1, "receiver counter %d = %llu", t, (unsigned long long)v.counters[t]);
    printf("correctness: %llu kernel-issued writes (1..%d bytes, %d rings) in %.2f s as %llu vectored writes; "
           "receiver: %llu bad commands, %llu notifications; %s\n", (unsigned long long)total, MAXLEN, NT, dt,
           (unsigned long long)writes, v.bad, (unsigned long long)v.notifs, failures ? "FAIL" : "PASS");
    if (S->json)
        fprintf(S->json, "  \"correctness\": {\"writes\": %llu, \"vectored\": %llu, \"seconds\": %.3f, "
                "\"bad\": %llu, \"notifs\": %llu, \"pass\": %s},\n", (unsigned long long)total,
                (unsigned long long)writes, dt, v.bad, (unsigned long long)v.notifs, failures ? "false" : "true");
    for (int t = 0; t < NT; t++)
        uccl_devq_destroy(q[t]);
    uccl_gpu_free(hs_dev);
    uccl_gpu_free(rc_dev);
}

#include "b_devq_bench.h"

int main(int argc, char **argv)
{
    const char *json = NULL, *only = NULL;
    sender_t S = {0};
    int sv[2], ngpu = 0, status = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--json") == 0)
            json = argv[i + 1];
        else if (strcmp(argv[i], "--only") == 0)
            only = argv[i + 1];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    alarm(560);
    if (strcmp(uccl_gpu_backend(), "cuda") != 0) {
        printf("SKIP: b_devq needs the CUDA backend (this build: %s)\n", uccl_gpu_backend());
        return 77;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    S.child = fork(); /* before any CUDA call */
    if (S.child == 0) {
        close(sv[0]);
        _exit(receiver(sv[1]));
    }
    close(sv[1]);
    S.fd = sv[0];
    if (uccl_gpu_count(&ngpu) != UCCL_OK || ngpu == 0) {
        printf("SKIP: no GPU\n");
        kill(S.child, SIGKILL);
        return 77;
    }
    pin_near_gpu();
    printf("# sender on GPU 0, receiver on GPU %d (of %d)\n", rx_gpu(), ngpu);
    S.e = gpu_engine(0);
    if (S.e == NULL || uccl_gpu_malloc((void **)&S.src, SRC_BYTES) != UCCL_OK ||
        dq_recv(S.fd, &S.h, sizeof(S.h)) != 0) {
        printf("FAIL: sender setup\n");
        kill(S.child, SIGKILL);
        return 1;
    }
    {
        uint8_t *pat = malloc(DQ_LOCAL);
        for (size_t i = 0; i < DQ_LOCAL; i++)
            pat[i] = dq_pattern(i);
        uccl_gpu_memset(S.src, 0x33, SRC_BYTES);
        uccl_gpu_memcpy(S.src, pat, DQ_LOCAL);
        free(pat);
    }
    CHECK(uccl_mr_reg(S.e, S.src, SRC_BYTES, 0, &S.mr) == UCCL_OK, "mr_reg");
    CHECK(uccl_connect(S.e, S.h.addr, S.h.addr_len, &S.conn) == UCCL_OK, "connect");
    if (failures) {
        kill(S.child, SIGKILL);
        return 1;
    }
    warm_up(&S);
    if (json != NULL && (S.json = fopen(json, "w")) != NULL)
        fprintf(S.json, "{\n");
    if (only == NULL || strcmp(only, "correctness") == 0) {
        printf("# phase: correctness\n");
        correctness(&S);
    }
    if (only == NULL || strcmp(only, "bench") == 0) {
        printf("# phase: benchmark\n");
        bench(&S);
    }
    if (only == NULL || strcmp(only, "kill") == 0) {
        printf("# phase: peer killed\n");
        kill_case(&S); /* kills the receiver */
    } else {
        dq_send(S.fd, "x", 1);
    }
    if (S.json) {
        fprintf(S.json, "  \"failures\": %d\n}\n", failures);
        fclose(S.json);
    }
    waitpid(S.child, &status, 0);
    uccl_conn_close(S.conn);
    uccl_mr_dereg(S.mr);
    uccl_gpu_free(S.src);
    uccl_engine_destroy(S.e);
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

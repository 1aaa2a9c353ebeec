/* b_copy_cost: what the CPU pays to move small GPU buffers, the costs that
 * bound gpu_ipc below a few MiB (run by tests/gpu/run-device.sh, not by
 * make check). A forked child owns the destination buffer and exports it
 * over IPC, as the peer process of a gpu_ipc connection does; the parent
 * copies into that mapping, or into a local buffer, and times:
 *   each:   16 uccl_gpu_memcpy_async calls, then one stream sync
 *   batch:  one uccl_gpu_memcpy_batch_async of the same 16 copies
 *   dtod:   16 uccl_gpu_memcpy_dtod_async calls (the driver's cuMemcpyDtoDAsync)
 *   record / query: cudaEventRecord on an idle stream; cudaEventQuery of a
 *           done event; cudaStreamQuery of an idle stream
 *   w1 sync / w1 event: one copy, then a stream sync / an event record and
 *           query polling (the latency of one transfer)
 * Every figure is the median of 7 runs, in microseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu.h"

#define BUF (64u << 20)
#define WIN 16
#define RUNS 7

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double med(double *t)
{
    qsort(t, RUNS, sizeof(*t), cmp);
    return t[RUNS / 2];
}

static int child(int wfd, int rfd)
{
    uccl_gpu_ipc_handle_t h;
    void *p = NULL;
    char c;
    int ok = uccl_gpu_set_device(0) == UCCL_OK && uccl_gpu_malloc(&p, BUF) == UCCL_OK &&
             uccl_gpu_ipc_get(p, &h) == UCCL_OK;

    if (!ok)
        memset(&h, 0, sizeof(h));
    if (write(wfd, &h, sizeof(h)) != (ssize_t)sizeof(h) || read(rfd, &c, 1) < 0)
        ok = 0;
    if (p != NULL)
        uccl_gpu_free(p);
    return ok ? 0 : 1;
}

/* 16 copies of len into dst (batch: 0 one call each, 1 one batch, 2 one
 * driver dtod call each); us per copy: the
 * issue alone, and the issue plus the stream sync. */
static void window(char *dst, char *src, size_t len, int batch, uccl_gpu_stream_t s, double *issue,
                   double *total)
{
    void *d[WIN];
    const void *sr[WIN];
    size_t l[WIN];
    double ti[RUNS], tt[RUNS];

    for (int k = 0; k < WIN; k++) {
        d[k] = dst + (size_t)k * len % (BUF - len + 1);
        sr[k] = src + (size_t)k * len % (BUF - len + 1);
        l[k] = len;
    }
    for (int r = -1; r < RUNS; r++) {
        double t0 = now_us(), t1;
        if (batch == 1) {
            uccl_gpu_memcpy_batch_async(d, sr, l, WIN, s);
        } else if (batch == 2) {
            for (int k = 0; k < WIN; k++)
                uccl_gpu_memcpy_dtod_async(d[k], sr[k], len, s);
        } else {
            for (int k = 0; k < WIN; k++)
                uccl_gpu_memcpy_async(d[k], sr[k], len, s);
        }
        t1 = now_us();
        uccl_gpu_stream_sync(s);
        if (r >= 0) {
            ti[r] = (t1 - t0) / WIN;
            tt[r] = (now_us() - t0) / WIN;
        }
    }
    *issue = med(ti);
    *total = med(tt);
}

static void latency(char *dst, char *src, size_t len, uccl_gpu_stream_t s, uccl_gpu_event_t ev)
{
    double a[RUNS], b[RUNS];

    for (int r = -1; r < RUNS; r++) {
        double t0 = now_us();
        for (int i = 0; i < 50; i++) {
            uccl_gpu_memcpy_async(dst, src, len, s);
            uccl_gpu_stream_sync(s);
        }
        double t1 = now_us();
        for (int i = 0; i < 50; i++) {
            uccl_gpu_memcpy_async(dst, src, len, s);
            uccl_gpu_event_record(ev, s);
            while (uccl_gpu_event_query(ev) == UCCL_INPROGRESS)
                ;
        }
        if (r >= 0) {
            a[r] = (t1 - t0) / 50;
            b[r] = (now_us() - t1) / 50;
        }
    }
    printf("w1 %8zu B: copy+stream sync %6.2f us, copy+event record+query poll %6.2f us\n", len, med(a),
           med(b));
}

/* The stream form's per-call operations (coll/stream.c, a 2-rank
 * alltoall: a ready and a done write into the peer's words, a met wait on
 * each of ours, the own block and the peer's block copied, 4 KiB) issued
 * as session 9 did (one call each, then an event: a stream query first,
 * then a record) and as batches (uccl_gpu_stream_memops: the two writes
 * and waits, the copies one by one or as one batch, the done write, wait
 * and a host-word write); us of CPU per call, then with the stream sync. */
static void stream_call(char *peer, char *local, char *src, uccl_gpu_stream_t s, uccl_gpu_event_t ev)
{
    uint32_t *pw = (uint32_t *)(peer + BUF - 64), *lw = (uint32_t *)(local + BUF - 64), *hw = NULL;
    void *hdev = NULL;
    double t[4][RUNS], tt[4][RUNS];
    const char *name[4] = {"one call each + event", "memops batched, copies each", "memops and copies batched",
                           "memops batched + event"};
    void *d[2] = {local, peer};
    const void *sr[2] = {src, src + 4096};
    size_t l[2] = {4096, 4096};

    if (uccl_gpu_memset(lw, 0, 8) != UCCL_OK || uccl_gpu_flags_alloc(1, &hw, &hdev) != UCCL_OK) {
        printf("stream call: no host-mapped word\n");
        return;
    }
    for (int r = -1; r < RUNS; r++) {
        for (int m = 0; m < 4; m++) {
            double t0 = now_us(), t1;
            for (int i = 0; i < 100; i++) {
                uint32_t v = (uint32_t)(r + 2) * 1000u + (uint32_t)i;
                uccl_gpu_memop_t a[2] = {{.dev = pw, .value = v, .width = 4}, {.dev = lw, .value = 0, .width = 4, .wait = 1}};
                uccl_gpu_memop_t b[3] = {{.dev = pw + 1, .value = v, .width = 4},
                                         {.dev = lw + 1, .value = 0, .width = 4, .wait = 1},
                                         {.dev = hdev, .value = v, .width = 4}};
                if (m == 0) {
                    uccl_gpu_stream_write(s, pw, v, 4);
                    uccl_gpu_memcpy_async(local, src, 4096, s);
                    uccl_gpu_stream_wait_geq(s, lw, 0, 4);
                    uccl_gpu_memcpy_async(peer, src + 4096, 4096, s);
                    uccl_gpu_stream_write(s, pw + 1, v, 4);
                    uccl_gpu_stream_wait_geq(s, lw + 1, 0, 4);
                    uccl_gpu_stream_query(s);
                    uccl_gpu_event_record(ev, s);
                    continue;
                }
                uccl_gpu_stream_memops(s, a, 2);
                if (m == 2) {
                    uccl_gpu_memcpy_batch_async(d, sr, l, 2, s);
                } else {
                    uccl_gpu_memcpy_async(local, src, 4096, s);
                    uccl_gpu_memcpy_async(peer, src + 4096, 4096, s);
                }
                uccl_gpu_stream_memops(s, b, m == 3 ? 2 : 3);
                if (m == 3)
                    uccl_gpu_event_record(ev, s);
            }
            t1 = now_us();
            uccl_gpu_stream_sync(s);
            if (r >= 0) {
                t[m][r] = (t1 - t0) / 100;
                tt[m][r] = (now_us() - t0) / 100;
            }
        }
    }
    for (int m = 0; m < 4; m++)
        printf("stream call, %-28s: %6.2f us CPU, %6.2f us with the sync (100 calls queued)\n", name[m],
               med(t[m]), med(tt[m]));
    {
        double q[RUNS];
        for (int r = 0; r < RUNS; r++) {
            double t0 = now_us();
            for (int i = 0; i < 100; i++)
                (void)uccl_gpu_stream_query(s);
            q[r] = (now_us() - t0) / 100;
        }
        printf("stream query (idle) %.2f us; host word read: %u\n", med(q), *(volatile uint32_t *)hw);
    }
    uccl_gpu_flags_free(hw);
}

/* What uccl_copy_post pays per call (a collective's own block: GPU to
 * GPU, 1 MiB): its pointer questions (the type alone, as copy.c asks now,
 * and with the allocation range, as it asked before), the runtime's and the
 * driver's copy call, an event record, and the whole post (50 posted, then
 * waited for untimed), then post and wait one at a time; us per call,
 * median of RUNS runs of 50. */
static void post_cost(char *dst, char *src, uccl_gpu_stream_t s, uccl_gpu_event_t ev)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX | UCCL_ENGINE_PARAM_TRANSPORTS,
                              .gpu_index = 0, .transports = "shm"};
    const char *name[7] = {"ptr kind x2", "ptr attr x2", "cudaMemcpyAsync", "cuMemcpyDtoDAsync",
                           "event record", "uccl_copy_post", "post + wait"};
    double t[7][RUNS];
    uccl_engine_t *e = NULL;
    uccl_gpu_ptr_attr_t a;
    uccl_req_t *req[50];

    if (uccl_engine_create(&p, &e) != UCCL_OK) {
        printf("post cost: no engine\n");
        return;
    }
    for (int r = -1; r < RUNS; r++) {
        for (int m = 0; m < 7; m++) {
            double t0 = now_us();
            for (int i = 0; i < 50; i++) {
                if (m == 0) {
                    uccl_gpu_ptr_kind(dst, &a);
                    uccl_gpu_ptr_kind(src, &a);
                } else if (m == 1) {
                    uccl_gpu_ptr_attr(dst, &a);
                    uccl_gpu_ptr_attr(src, &a);
                } else if (m == 2) {
                    uccl_gpu_memcpy_async(dst, src, 1u << 20, s);
                } else if (m == 3) {
                    uccl_gpu_memcpy_dtod_async(dst, src, 1u << 20, s);
                } else if (m == 4) {
                    uccl_gpu_event_record(ev, s);
                } else if (uccl_copy_post(e, dst, src, 1u << 20, &req[i]) != UCCL_OK) {
                    req[i] = NULL;
                } else if (m == 6) {
                    uccl_wait(req[i], -1);
                }
            }
            double t1 = now_us();
            for (int i = 0; m >= 5 && i < 50; i++) /* post alone (5): its waits untimed */
                if (req[i] != NULL) {
                    (void)uccl_wait(req[i], -1);
                    uccl_req_free(req[i]);
                }
            uccl_gpu_stream_sync(s);
            if (r >= 0)
                t[m][r] = (t1 - t0) / 50;
        }
    }
    for (int m = 0; m < 7; m++)
        printf("copy post, %-18s %6.2f us a call\n", name[m], med(t[m]));
    uccl_engine_destroy(e);
}

int main(void)
{
    int up[2], down[2], status = 0;
    uccl_gpu_ipc_handle_t h;
    uccl_gpu_stream_t s;
    uccl_gpu_event_t ev;
    char *src, *local, *peer;
    static const size_t sizes[] = {4096, 65536, 1u << 20, 2u << 20, 4u << 20, 8u << 20};
    pid_t pid;

    if (pipe(up) != 0 || pipe(down) != 0)
        return 1;
    pid = fork();
    if (pid == 0) { /* before any CUDA call in this process */
        close(up[0]);
        close(down[1]);
        _exit(child(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    if (read(up[0], &h, sizeof(h)) != (ssize_t)sizeof(h)) {
        printf("SKIP: the child could not export a GPU buffer\n");
        return 77;
    }
    if (uccl_gpu_set_device(0) != UCCL_OK || uccl_gpu_malloc((void **)&src, BUF) != UCCL_OK ||
        uccl_gpu_malloc((void **)&local, BUF) != UCCL_OK || uccl_gpu_ipc_open(&h, (void **)&peer) != UCCL_OK ||
        uccl_gpu_stream_create(&s) != UCCL_OK || uccl_gpu_event_create(&ev, 0) != UCCL_OK) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    printf("# us per copy, window of %d, median of %d runs; dst in a peer process's buffer (IPC) or local\n",
           WIN, RUNS);
    printf("%10s %-5s %10s %10s %10s %10s %10s %10s\n", "size", "dst", "each iss", "each tot", "batch iss",
           "batch tot", "dtod iss", "dtod tot");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        for (int ipc = 1; ipc >= 0; ipc--) {
            double ei, et, bi, bt, di, dt;
            char *dst = ipc ? peer : local;
            window(dst, src, sizes[i], 0, s, &ei, &et);
            window(dst, src, sizes[i], 1, s, &bi, &bt);
            window(dst, src, sizes[i], 2, s, &di, &dt);
            printf("%10zu %-5s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", sizes[i], ipc ? "ipc" : "local", ei,
                   et, bi, bt, di, dt);
        }
    }
    {
        double rec[RUNS], q[RUNS], sq[RUNS];
        uccl_gpu_stream_sync(s);
        for (int r = 0; r < RUNS; r++) {
            double t0 = now_us();
            for (int i = 0; i < 100; i++)
                uccl_gpu_event_record(ev, s);
            double t1 = now_us();
            uccl_gpu_stream_sync(s);
            double t2 = now_us();
            for (int i = 0; i < 100; i++)
                uccl_gpu_event_query(ev);
            rec[r] = (t1 - t0) / 100;
            q[r] = (now_us() - t2) / 100;
            t2 = now_us();
            for (int i = 0; i < 100; i++)
                uccl_gpu_stream_query(s);
            sq[r] = (now_us() - t2) / 100;
        }
        printf("event record (idle stream) %.2f us, event query (done) %.2f us, stream query (idle) %.2f us\n",
               med(rec), med(q), med(sq));
    }
    stream_call(peer, local, src, s, ev);
    post_cost(local, src, s, ev);
    latency(peer, src, 4096, s, ev);
    latency(peer, src, 1u << 20, s, ev);
    if (write(down[1], "x", 1) != 1)
        status = 1;
    waitpid(pid, &status, 0);
    uccl_gpu_ipc_close(peer);
    return 0;
}

/* b_devq's benchmark and peer-killed case (included once by b_devq.c). */
#ifndef UCCL_TESTS_GPU_B_DEVQ_BENCH_H
#define UCCL_TESTS_GPU_B_DEVQ_BENCH_H

/* One host-issued write first: the transport opens the peer's IPC handle and
 * sets up its streams before any kernel spins. */
static void warm_up(sender_t *S)
{
    uccl_req_t *r = NULL;

    CHECK(uccl_write(S->conn, S->mr, 0, 4096, &S->h.rdesc, WARM_OFF, &r) == UCCL_OK &&
              uccl_wait(r, -1) == UCCL_OK, "warm-up write");
    uccl_req_free(r);
}

/* n host-issued writes of size bytes, WINDOW in flight; seconds. */
static double host_writes(sender_t *S, uint64_t n, uint64_t size, uint64_t stride)
{
    uccl_req_t *r[WINDOW] = {0};
    double t0 = now_s();

    for (uint64_t i = 0; i < n; i++) {
        uccl_req_t **slot = &r[i % WINDOW];
        if (*slot != NULL) {
            CHECK(uccl_wait(*slot, -1) == UCCL_OK, "host write");
            uccl_req_free(*slot);
        }
        if (uccl_write(S->conn, S->mr, (i * size) % SRC_BYTES, size, &S->h.rdesc, (i * stride) % SPAN, slot) !=
            UCCL_OK) {
            CHECK(0, "uccl_write");
            *slot = NULL;
            break;
        }
    }
    for (int k = 0; k < WINDOW; k++)
        if (r[k] != NULL) {
            CHECK(uccl_wait(r[k], -1) == UCCL_OK, "host write");
            uccl_req_free(r[k]);
        }
    return now_s() - t0;
}

/* n kernel-issued writes; seconds. wait: the kernel waits for its writes
 * (its own clock, launch excluded); else it only queues them and the host
 * times launch to the last completion (uccl_devq_stats). */
static double kernel_writes(uccl_devq_t *q, uccl_devq_handle_t h, unsigned long long *out_dev, uint64_t n,
                            uint64_t size, uint64_t stride, int wait)
{
    unsigned long long out[2] = {0, 0};
    uccl_devq_stats_t s;
    double t0;

    uccl_gpu_memset(out_dev, 0, sizeof(out));
    uccl_devq_stats(q, &s);
    uint64_t target = s.completed + n;
    t0 = now_s();
    if (dqk_bench(h, n, size, stride, SRC_BYTES, SPAN, 1, wait, out_dev) != 0) {
        CHECK(0, "bench kernel launch");
        return -1;
    }
    if (!wait) {
        do
            uccl_devq_stats(q, &s);
        while (s.completed < target && uccl_devq_status(q) == UCCL_OK && now_s() - t0 < 60);
    }
    if (dqk_sync() != 0) {
        CHECK(0, "bench kernel");
        return -1;
    }
    double host_s = now_s() - t0;
    uccl_gpu_memcpy(out, out_dev, sizeof(out));
    CHECK(out[1] == 0, "bench kernel: %s", uccl_status_name((uccl_status_t)(int)out[1]));
    return wait ? (double)out[0] * 1e-9 : host_s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median3(double v[3])
{
    qsort(v, 3, sizeof(double), cmp_double);
    return v[1];
}

static void bench_row(sender_t *S, uccl_devq_t *q, uccl_devq_handle_t h, unsigned long long *out_dev,
                      uint64_t size, int merged, int wait, const char *variant, int *first)
{
    uint64_t n = ((uint64_t)256 << 20) / size, stride = merged ? size : 2 * size;
    double th[3], tk[3], h_s, k_s;
    uccl_devq_stats_t s0, s1;

    if (n > 100000)
        n = 100000;
    if (n < 256)
        n = 256;
    uccl_devq_stats(q, &s0);
    for (int r = 0; r < 3; r++) {
        th[r] = host_writes(S, n, size, stride);
        tk[r] = kernel_writes(q, h, out_dev, n, size, stride, wait);
    }
    uccl_devq_stats(q, &s1);
    h_s = median3(th);
    k_s = median3(tk);
    printf("%9llu %-8s %-10s %8llu %12.0f %12.0f %9.2f %9.2f %7.2f %8.1f\n", (unsigned long long)size,
           merged ? "contig" : "strided", variant, (unsigned long long)n, (double)n / k_s, (double)n / h_s,
           (double)n * (double)size / k_s / 1e9, (double)n * (double)size / h_s / 1e9, h_s / k_s,
           (double)(s1.commands - s0.commands) / (double)(s1.writes - s0.writes ? s1.writes - s0.writes : 1));
    if (S->json)
        fprintf(S->json, "%s    {\"size\": %llu, \"layout\": \"%s\", \"variant\": \"%s\", \"n\": %llu, \"kernel_cmds_per_s\": %.0f, "
                "\"host_cmds_per_s\": %.0f, \"kernel_GBps\": %.3f, \"host_GBps\": %.3f, \"ratio\": %.3f, "
                "\"cmds_per_write\": %.1f}", *first ? "" : ",\n", (unsigned long long)size,
                merged ? "contiguous" : "strided", variant, (unsigned long long)n, (double)n / k_s, (double)n / h_s,
                (double)n * (double)size / k_s / 1e9, (double)n * (double)size / h_s / 1e9, h_s / k_s,
                (double)(s1.commands - s0.commands) / (double)(s1.writes - s0.writes ? s1.writes - s0.writes : 1));
    *first = 0;
}

static void latency(sender_t *S, uccl_devq_handle_t h)
{
    enum { ITERS = 1000 };
    unsigned long long *lat_dev = NULL, lat[ITERS];
    double k[ITERS], hs[ITERS];
    int *rc_dev = NULL, rc = -1;

    uccl_gpu_malloc((void **)&lat_dev, sizeof(lat));
    uccl_gpu_malloc((void **)&rc_dev, 64);
    CHECK(dqk_latency(h, 4096, ITERS, lat_dev, rc_dev) == 0 && dqk_sync() == 0, "latency kernel");
    uccl_gpu_memcpy(lat, lat_dev, sizeof(lat));
    uccl_gpu_memcpy(&rc, rc_dev, sizeof(rc));
    CHECK(rc == 0, "latency kernel: %s", uccl_status_name((uccl_status_t)rc));
    for (int i = 0; i < ITERS; i++) {
        uccl_req_t *r = NULL;
        double t0 = now_s();
        k[i] = (double)lat[i] * 1e-3;
        if (uccl_write(S->conn, S->mr, 0, 4096, &S->h.rdesc, 0, &r) == UCCL_OK)
            uccl_wait(r, -1);
        hs[i] = (now_s() - t0) * 1e6;
        uccl_req_free(r);
    }
    qsort(k, ITERS, sizeof(double), cmp_double);
    qsort(hs, ITERS, sizeof(double), cmp_double);
    printf("latency 4 KiB, issue to completion (bytes in the peer's memory): kernel median %.1f us "
           "(p99 %.1f), host uccl_write+uccl_wait median %.1f us (p99 %.1f)\n",
           k[ITERS / 2], k[ITERS * 99 / 100], hs[ITERS / 2], hs[ITERS * 99 / 100]);
    if (S->json)
        fprintf(S->json, "  \"latency_4k_us\": {\"kernel_median\": %.2f, \"kernel_p99\": %.2f, "
                "\"host_median\": %.2f, \"host_p99\": %.2f},\n", k[ITERS / 2], k[ITERS * 99 / 100],
                hs[ITERS / 2], hs[ITERS * 99 / 100]);
    uccl_gpu_free(lat_dev);
    uccl_gpu_free(rc_dev);
}

static void bench(sender_t *S)
{
    static const uint64_t sizes[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    unsigned long long *out_dev = NULL;
    uccl_devq_t *q = bound_ring(S, 4096, 0, 20000);
    uccl_devq_handle_t h;
    int first = 1;

    if (q == NULL)
        return;
    uccl_devq_handle(q, &h);
    uccl_gpu_malloc((void **)&out_dev, 64);
    latency(S, h); /* first: its JSON is not part of the bench array */
    printf("# writes issued by a kernel (1 warp, 1 ring, proxy batching) vs by the host (uccl_write, %d in "
           "flight), same sizes and offsets, median of 3. variant: default (up to 256 commands a write, the "
           "kernel waits for its writes), nowait (the kernel only queues; host clock to the last completion), "
           "cap64k (batch_bytes 64 KiB: large commands one write each)\n", WINDOW);
    printf("%9s %-8s %-10s %8s %12s %12s %9s %9s %7s %8s\n", "bytes", "layout", "variant", "n", "kern cmd/s",
           "host cmd/s", "kern GB/s", "host GB/s", "k/h", "cmd/wr");
    if (S->json)
        fprintf(S->json, "  \"bench\": [\n");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_row(S, q, h, out_dev, sizes[i], 0, 1, "default", &first);
    bench_row(S, q, h, out_dev, 1024, 1, 1, "default", &first);
    bench_row(S, q, h, out_dev, 4096, 1, 1, "default", &first);
    for (size_t i = 3; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_row(S, q, h, out_dev, sizes[i], 0, 0, "nowait", &first);
    CHECK(uccl_devq_status(q) == UCCL_OK, "bench ring: %s", uccl_status_name(uccl_devq_status(q)));
    uccl_devq_destroy(q);
    q = bound_ring(S, 4096, 65536, 20000);
    if (q != NULL) {
        uccl_devq_handle(q, &h);
        for (size_t i = 2; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            bench_row(S, q, h, out_dev, sizes[i], 0, 1, "cap64k", &first);
        bench_row(S, q, h, out_dev, 1024, 1, 1, "cap64k", &first);
        CHECK(uccl_devq_status(q) == UCCL_OK, "bench ring: %s", uccl_status_name(uccl_devq_status(q)));
        uccl_devq_destroy(q);
    }
    if (S->json)
        fprintf(S->json, "\n  ],\n");
    uccl_gpu_free(out_dev);
}

/* A kernel writes without end; the receiver is killed; the kernel must leave
 * with the error word and the host API report it. Over gpu_ipc a write needs
 * the target's grant, so writes to a dead peer stall rather than fail, and
 * the core fails the connection only once it drained or UCCL_TIMEOUT_MS
 * passed: the ring's own timeout (3 s here) bounds the wait. */
#define KILL_TIMEOUT_MS 3000
static void kill_case(sender_t *S)
{
    uccl_devq_t *q = bound_ring(S, 1024, 0, KILL_TIMEOUT_MS);
    unsigned long long *puts_dev = NULL, puts = 0;
    int *rc_dev = NULL, rc = 0, busy = 1;
    uccl_devq_handle_t h;
    uccl_devq_stats_t s;
    double t0, t_kill, t_exit = -1;

    if (q == NULL)
        return;
    uccl_devq_handle(q, &h);
    uccl_gpu_malloc((void **)&rc_dev, 64);
    uccl_gpu_malloc((void **)&puts_dev, 64);
    uccl_gpu_memset(puts_dev, 0, 64);
    CHECK(dqk_endless(h, SPAN, rc_dev, puts_dev) == 0, "endless kernel launch");
    t0 = now_s();
    do {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        uccl_devq_stats(q, &s);
    } while (s.completed < 20000 && now_s() - t0 < 30);
    CHECK(s.completed >= 20000, "only %llu writes before the kill", (unsigned long long)s.completed);
    kill(S->child, SIGKILL);
    t_kill = now_s();
    while (now_s() - t_kill < 60 && (busy = dqk_busy()) == 1) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (busy == 0)
        t_exit = now_s() - t_kill;
    CHECK(busy == 0, "the kernel still runs (or failed: %d) 60 s after the peer was killed", busy);
    uccl_gpu_memcpy(&rc, rc_dev, sizeof(rc));
    uccl_gpu_memcpy(&puts, puts_dev, sizeof(puts));
    CHECK(rc != 0 && rc == (int)uccl_devq_status(q), "the kernel left with %d, the error word is %d", rc,
          (int)uccl_devq_status(q));
    {
        uccl_status_t st = uccl_devq_stop(q);
        CHECK(UCCL_STATUS_IS_ERR(st) && st != UCCL_ERR_CANCELED, "stop reports the failure: %s",
              uccl_status_name(st));
    }
    printf("peer killed after %llu completed writes: the kernel left %.3f s later with %s; uccl_devq_status: %s\n",
           (unsigned long long)s.completed, t_exit, uccl_status_name((uccl_status_t)rc),
           uccl_status_name(uccl_devq_status(q)));
    if (S->json)
        fprintf(S->json, "  \"peer_killed\": {\"completed_before\": %llu, \"kernel_exit_s\": %.3f, "
                "\"kernel_rc\": \"%s\"},\n", (unsigned long long)s.completed, t_exit,
                uccl_status_name((uccl_status_t)rc));
    uccl_devq_destroy(q);
    uccl_gpu_free(rc_dev);
    uccl_gpu_free(puts_dev);
}

#endif

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

/* Until the ring completed target commands (or failed, or 60 s passed from
 * t0): no CUDA call, and a 20 us nap between looks, so that this thread
 * neither enters the driver nor takes a core from the proxy meanwhile. */
static void wait_completed(uccl_devq_t *q, uint64_t target, double t0)
{
    uccl_devq_stats_t s;

    for (;;) {
        struct timespec ts = {0, 20000};
        uccl_devq_stats(q, &s);
        if (s.completed >= target || uccl_devq_status(q) != UCCL_OK || now_s() - t0 > 60)
            return;
        nanosleep(&ts, NULL);
    }
}

/* n kernel-issued writes; seconds. wait: the kernel waits for its writes
 * (its own clock, launch excluded); else it only queues them and the host
 * times launch to the last completion (uccl_devq_stats). hostsync: the host
 * thread sits in cudaDeviceSynchronize while the kernel runs (as the first
 * version of this benchmark did); otherwise it watches the ring's counters,
 * which make no CUDA call, and synchronizes once the writes are done: the
 * host-issued reference has no second thread in the CUDA driver either. */
static double kernel_writes(uccl_devq_t *q, uccl_devq_handle_t h, unsigned long long *out_dev, uint64_t n,
                            uint64_t size, uint64_t stride, int wait, int hostsync)
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
    if (!hostsync)
        wait_completed(q, target, t0);
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

#define ROUNDS 5

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

/* wait: 1 the kernel waits for its writes, 0 it only queues them, 2 it waits
 * and the host sits in cudaDeviceSynchronize meanwhile (kernel_writes). */
static void bench_row(sender_t *S, uccl_devq_t *q, uccl_devq_handle_t h, unsigned long long *out_dev,
                      uint64_t size, int merged, int wait, const char *variant, int *first)
{
    /* at least 4096 writes (about 17 ms at 1 MiB): start-up is no part of it */
    uint64_t n = ((uint64_t)1 << 30) / size, stride = merged ? size : 2 * size;
    double th[ROUNDS], tk[ROUNDS], h_s, k_s;
    uccl_devq_stats_t s0, s1;

    if (n > 100000)
        n = 100000;
    if (n < 4096)
        n = 4096;
    uccl_devq_stats(q, &s0);
    for (int r = 0; r < ROUNDS; r++) { /* alternate which goes first */
        if (r & 1)
            tk[r] = kernel_writes(q, h, out_dev, n, size, stride, wait != 0, wait == 2);
        th[r] = host_writes(S, n, size, stride);
        if (!(r & 1))
            tk[r] = kernel_writes(q, h, out_dev, n, size, stride, wait != 0, wait == 2);
    }
    uccl_devq_stats(q, &s1);
    h_s = median(th, ROUNDS);
    k_s = median(tk, ROUNDS);
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

#define LAT_ITERS 1000

static double med_of(double *v, int n)
{
    return n > 0 ? median(v, n) : -1;
}

/* The 4 KiB issue-to-completion latency from a kernel and from the host, and
 * the kernel's split into parts: the put (GPU clock), publish -> the proxy
 * finds it, the proxy's post (uccl_writemsg), post -> the write completes
 * (bytes in the peer's memory, seen by progress), completion -> done word
 * stored (host clock), done stored -> the kernel sees it. The two crossings
 * compare the GPU's global timer with CLOCK_REALTIME: each carries the
 * clocks' offset, their sum does not. q traces its first LAT_ITERS writes. */
static void latency(sender_t *S, uccl_devq_t *q, uccl_devq_handle_t h)
{
    enum { ITERS = LAT_ITERS };
    static unsigned long long ts[3 * ITERS];
    static uccl_devq_trace_rec_t tr[ITERS];
    static double k[ITERS], hs[ITERS], hpost[ITERS], put[ITERS], in[ITERS], post[ITERS], wr[ITERS], pub[ITERS], out[ITERS],
        cross[ITERS];
    unsigned long long *ts_dev = NULL;
    int *rc_dev = NULL, rc = -1, nb = 0;
    uint32_t ntr;

    uccl_gpu_malloc((void **)&ts_dev, sizeof(ts));
    uccl_gpu_malloc((void **)&rc_dev, 64);
    if (dqk_latency(h, 4096, ITERS, ts_dev, rc_dev) == 0)
        wait_completed(q, ITERS, now_s()); /* the ring is new: its first ITERS commands */
    else
        CHECK(0, "latency kernel launch");
    CHECK(dqk_sync() == 0, "latency kernel");
    uccl_gpu_memcpy(ts, ts_dev, sizeof(ts));
    uccl_gpu_memcpy(&rc, rc_dev, sizeof(rc));
    CHECK(rc == 0, "latency kernel: %s", uccl_status_name((uccl_status_t)rc));
    ntr = uccl_devq_trace_read(q, tr, ITERS);
    for (int i = 0; i < ITERS; i++) {
        uccl_req_t *r = NULL;
        double t0 = now_s(), t1;
        k[i] = (double)(ts[3 * i + 2] - ts[3 * i]) * 1e-3;
        if (uccl_write(S->conn, S->mr, 0, 4096, &S->h.rdesc, 0, &r) == UCCL_OK) {
            t1 = now_s();
            uccl_wait(r, -1);
        } else {
            t1 = now_s();
        }
        hs[i] = (now_s() - t0) * 1e6;
        hpost[i] = (t1 - t0) * 1e6;
        uccl_req_free(r);
        if ((uint32_t)i < ntr && tr[i].first == (uint64_t)i && tr[i].ncmds == 1) {
            double pub_g = (double)ts[3 * i + 1], seen_g = (double)ts[3 * i + 2];
            put[nb] = (double)(ts[3 * i + 1] - ts[3 * i]) * 1e-3;
            in[nb] = ((double)tr[i].seen_ns - pub_g) * 1e-3;
            post[nb] = (double)(tr[i].posted_ns - tr[i].seen_ns) * 1e-3;
            wr[nb] = (double)(tr[i].done_ns - tr[i].posted_ns) * 1e-3;
            pub[nb] = (double)(tr[i].published_ns - tr[i].done_ns) * 1e-3;
            out[nb] = (seen_g - (double)tr[i].published_ns) * 1e-3;
            cross[nb] = in[nb] + out[nb];
            nb++;
        }
    }
    CHECK(nb == ITERS, "latency trace: %d of %d writes traced one command each", nb, ITERS);
    qsort(k, ITERS, sizeof(double), cmp_double);
    qsort(hs, ITERS, sizeof(double), cmp_double);
    printf("latency 4 KiB, issue to completion (bytes in the peer's memory): kernel median %.1f us "
           "(p99 %.1f), host uccl_write+uccl_wait median %.1f us (p99 %.1f)\n",
           k[ITERS / 2], k[ITERS * 99 / 100], hs[ITERS / 2], hs[ITERS * 99 / 100]);
    printf("host: uccl_write returns after %.2f us (median)\n", med_of(hpost, ITERS));
    printf("latency parts (medians, us): kernel put %.2f | publish->proxy finds it %.2f* | proxy posts "
           "the write %.2f | write completes, seen by progress %.2f | done word stored %.2f | "
           "done stored->kernel sees it %.2f* | the two crossings together %.2f (*: GPU timer vs host "
           "clock, offset not removed)\n", med_of(put, nb), med_of(in, nb), med_of(post, nb), med_of(wr, nb),
           med_of(pub, nb), med_of(out, nb), med_of(cross, nb));
    if (S->json)
        fprintf(S->json, "  \"latency_4k_us\": {\"kernel_median\": %.2f, \"kernel_p99\": %.2f, "
                "\"host_median\": %.2f, \"host_p99\": %.2f, \"host_post_median\": %.2f, \"parts_median\": {\"put\": %.2f, "
                "\"publish_to_proxy\": %.2f, \"proxy_post\": %.2f, \"write_complete\": %.2f, "
                "\"done_store\": %.2f, \"done_to_kernel\": %.2f, \"crossings_sum\": %.2f}},\n",
                k[ITERS / 2], k[ITERS * 99 / 100], hs[ITERS / 2], hs[ITERS * 99 / 100], med_of(hpost, ITERS),
                med_of(put, nb),
                med_of(in, nb), med_of(post, nb), med_of(wr, nb), med_of(pub, nb), med_of(out, nb),
                med_of(cross, nb));
    uccl_gpu_free(ts_dev);
    uccl_gpu_free(rc_dev);
}

static void bench(sender_t *S)
{
    static const uint64_t sizes[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    unsigned long long *out_dev = NULL;
    uccl_devq_t *q = bound_ring(S, 4096, 0, 20000, LAT_ITERS);
    uccl_devq_handle_t h;
    int first = 1;

    if (q == NULL)
        return;
    uccl_devq_handle(q, &h);
    uccl_gpu_malloc((void **)&out_dev, 64);
    latency(S, q, h); /* first: its JSON is not part of the bench array */
    printf("# writes issued by a kernel (1 warp, 1 ring, proxy batching) vs by the host (uccl_write, %d in "
           "flight), same sizes and offsets, same count (>= 4096), median of %d, order alternating. variant: "
           "default (up to 256 commands a write, the kernel waits for its writes; the host thread makes no "
           "CUDA call until they are done), hostsync (the same, the host thread in cudaDeviceSynchronize "
           "meanwhile: the earlier benchmark), nowait (the kernel only queues; host clock to the last "
           "completion), cap64k (batch_bytes 64 KiB: large commands one write each)\n", WINDOW, ROUNDS);
    printf("%9s %-8s %-10s %8s %12s %12s %9s %9s %7s %8s\n", "bytes", "layout", "variant", "n", "kern cmd/s",
           "host cmd/s", "kern GB/s", "host GB/s", "k/h", "cmd/wr");
    if (S->json)
        fprintf(S->json, "  \"bench\": [\n");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_row(S, q, h, out_dev, sizes[i], 0, 1, "default", &first);
    bench_row(S, q, h, out_dev, 1024, 1, 1, "default", &first);
    bench_row(S, q, h, out_dev, 4096, 1, 1, "default", &first);
    for (size_t i = 3; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_row(S, q, h, out_dev, sizes[i], 0, 2, "hostsync", &first);
    for (size_t i = 3; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        bench_row(S, q, h, out_dev, sizes[i], 0, 0, "nowait", &first);
    CHECK(uccl_devq_status(q) == UCCL_OK, "bench ring: %s", uccl_status_name(uccl_devq_status(q)));
    uccl_devq_destroy(q);
    q = bound_ring(S, 4096, 65536, 20000, 0);
    if (q != NULL) {
        uccl_devq_handle(q, &h);
        bench_row(S, q, h, out_dev, 65536, 0, 1, "cap64k", &first);
        bench_row(S, q, h, out_dev, 1024, 1, 1, "cap64k", &first);
        CHECK(uccl_devq_status(q) == UCCL_OK, "bench ring: %s", uccl_status_name(uccl_devq_status(q)));
        uccl_devq_destroy(q);
    }
    if (S->json)
        fprintf(S->json, "\n  ],\n");
    uccl_gpu_free(out_dev);
}

/* A kernel writes without end; the receiver is killed; the kernel must leave
 * with the error word and the host API report it. The core fails the
 * connection about 200 ms after the peer's socket closed; the same progress
 * call tears gpu_ipc's endpoint down, whose cudaIpcCloseMemHandle waits for
 * the device, i.e. for this kernel, which waits for the proxy: before the
 * ring's sentinel thread only the ring's timeout (3 s here) ended it. Now
 * the kernel must leave well before that timeout. */
#define KILL_TIMEOUT_MS 3000
static void kill_case(sender_t *S)
{
    uccl_devq_t *q = bound_ring(S, 1024, 0, KILL_TIMEOUT_MS, 0);
    unsigned long long *puts_dev = NULL, puts = 0;
    int *rc_dev = NULL, rc = 0, busy = 1;
    uccl_devq_handle_t h;
    uccl_devq_stats_t s;
    double t0, t_kill, t_exit = -1, t_conn = -1, t_err = -1;
    uccl_status_t first_err = UCCL_OK;

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
        uccl_conn_attr_t a;
        nanosleep(&ts, NULL);
        /* when the connection and the ring were seen failed (the proxy
         * thread owns the engine; reading the state word is enough here) */
        if (t_conn < 0 && uccl_conn_query(S->conn, &a) == UCCL_OK && a.state != UCCL_OK)
            t_conn = now_s() - t_kill;
        if (t_err < 0 && uccl_devq_status(q) != UCCL_OK) {
            t_err = now_s() - t_kill;
            first_err = uccl_devq_status(q);
        }
    }
    if (busy == 0)
        t_exit = now_s() - t_kill;
    CHECK(busy == 0, "the kernel still runs (or failed: %d) 60 s after the peer was killed", busy);
    CHECK(busy == 0 && t_exit < KILL_TIMEOUT_MS * 0.5e-3, "the kernel left %.3f s after the kill: the ring's "
          "timeout (%d ms), not the failed connection, ended it", t_exit, KILL_TIMEOUT_MS);
    uccl_gpu_memcpy(&rc, rc_dev, sizeof(rc));
    uccl_gpu_memcpy(&puts, puts_dev, sizeof(puts));
    CHECK(rc != 0 && rc == (int)uccl_devq_status(q), "the kernel left with %d, the error word is %d", rc,
          (int)uccl_devq_status(q));
    {
        uccl_status_t st = uccl_devq_stop(q);
        CHECK(UCCL_STATUS_IS_ERR(st) && st != UCCL_ERR_CANCELED, "stop reports the failure: %s",
              uccl_status_name(st));
    }
    printf("peer killed after %llu completed writes: the kernel left %.3f s later with %s; uccl_devq_status: %s; "
           "the connection was seen failed after %.3f s, the error word (%s) after %.3f s (-1: not seen)\n",
           (unsigned long long)s.completed, t_exit, uccl_status_name((uccl_status_t)rc),
           uccl_status_name(uccl_devq_status(q)), t_conn, uccl_status_name(first_err), t_err);
    if (S->json)
        fprintf(S->json, "  \"peer_killed\": {\"completed_before\": %llu, \"kernel_exit_s\": %.3f, "
                "\"kernel_rc\": \"%s\", \"conn_failed_s\": %.3f, \"error_word_s\": %.3f},\n",
                (unsigned long long)s.completed, t_exit, uccl_status_name((uccl_status_t)rc), t_conn, t_err);
    uccl_devq_destroy(q);
    uccl_gpu_free(rc_dev);
    uccl_gpu_free(puts_dev);
}

#endif

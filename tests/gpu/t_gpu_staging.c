/* GPU memory staged through pinned host buffers by the shm or tcp transport
 * (argv[1], default shm; UCCL_TRANSPORTS is set to it), two processes: every
 * operation with bytes verified, GPU0->GPU1 and same GPU, GPU<->host,
 * 1 B to 64 MiB + 3, the refused accesses, and a rough bandwidth line.
 * Without a GPU it prints "skipped: no GPU" and exits 77. */
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "gpu/gpu.h"

#define SKIP 77
#define OFF_A 4099           /* first region starts this far into the allocation */
#define MAX_BIG ((64ul << 20) + 3) /* largest transfer */
#define TMO 20000

static int rank, failures;
static uccl_engine_t *eng;
static uccl_conn_t *conn;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            printf("[rank %d] FAIL %s:%d: ", rank, __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)
#define CHECK_ST(call, want)                                                                   \
    do {                                                                                       \
        uccl_status_t st_ = (call);                                                            \
        CHECK(st_ == (want), "%s = %s, want %s", #call, uccl_status_name(st_), uccl_status_name(want)); \
    } while (0)

/* One side's memory: an allocation with two regions inside it. */
typedef struct side {
    char *buf;  /* allocation */
    size_t size;
    int gpu;    /* 1 = device memory */
    uccl_mr_t *mr1, *mr2; /* [OFF_A, OFF_A+half), [OFF_A+half, ...) */
    size_t half;
} side_t;

static uint8_t pat(size_t i, unsigned seed)
{
    return (uint8_t)(((i * 2654435761u) >> 13) ^ seed);
}

static void mem_fill(const side_t *s, size_t off, size_t len, unsigned seed)
{
    uint8_t *h = s->gpu ? malloc(len ? len : 1) : (uint8_t *)s->buf + off;

    for (size_t i = 0; i < len; i++)
        h[i] = pat(i, seed);
    if (s->gpu) {
        uccl_gpu_memcpy(s->buf + off, h, len);
        free(h);
    }
}

static void mem_zero(const side_t *s, size_t off, size_t len)
{
    if (s->gpu)
        uccl_gpu_memset(s->buf + off, 0, len);
    else
        memset(s->buf + off, 0, len);
}

/* Index of the first wrong byte, or -1. */
static long mem_check(const side_t *s, size_t off, size_t len, unsigned seed)
{
    uint8_t *h = s->gpu ? malloc(len ? len : 1) : (uint8_t *)s->buf + off;
    long bad = -1;

    if (s->gpu)
        uccl_gpu_memcpy(h, s->buf + off, len);
    for (size_t i = 0; i < len && bad < 0; i++)
        if (h[i] != pat(i, seed))
            bad = (long)i;
    if (s->gpu)
        free(h);
    return bad;
}

static int side_init(side_t *s, size_t size, int gpu)
{
    memset(s, 0, sizeof(*s));
    s->size = size;
    s->gpu = gpu;
    s->half = (size - OFF_A) / 2;
    if (gpu ? uccl_gpu_malloc((void **)&s->buf, size) != UCCL_OK : (s->buf = malloc(size)) == NULL)
        return -1;
    if (uccl_mr_reg(eng, s->buf + OFF_A, s->half, 0, &s->mr1) != UCCL_OK ||
        uccl_mr_reg(eng, s->buf + OFF_A + s->half, s->half, 0, &s->mr2) != UCCL_OK)
        return -1;
    return 0;
}

static void side_fini(side_t *s)
{
    CHECK_ST(uccl_mr_dereg(s->mr1), UCCL_OK);
    CHECK_ST(uccl_mr_dereg(s->mr2), UCCL_OK);
    if (s->gpu)
        uccl_gpu_free(s->buf);
    else
        free(s->buf);
}

/* A failed post leaves req NULL: report that instead of waiting on nothing. */
static uccl_status_t wait_free(uccl_req_t *req, size_t *bytes)
{
    uccl_status_t st;

    if (req == NULL)
        return UCCL_ERR_INVALID_HANDLE;
    st = uccl_wait(req, TMO);

    if (bytes != NULL)
        uccl_req_bytes(req, bytes);
    uccl_req_free(req);
    return st;
}

/* Rank 1 describes [off, off+len) of its mr1 to rank 0. */
static void share_rdesc(side_t *s, size_t off, size_t len, uccl_rdesc_t *rd)
{
    uccl_rdesc_t mine;

    memset(&mine, 0, sizeof(mine));
    if (rank == 1)
        CHECK_ST(uccl_mr_pack(s->mr1, off, len, &mine), UCCL_OK);
    boot_xchg(eng, &mine, rd, sizeof(*rd));
}

/* ---------------------------------------------------------------- operations */

static void t_sendrecv(side_t *me, size_t len, size_t off, unsigned seed)
{
    uccl_req_t *req = NULL;
    size_t bytes = 0;

    if (rank == 0)
        mem_fill(me, OFF_A + off, len, seed);
    else
        mem_zero(me, OFF_A + off, len);
    boot_barrier(eng);
    if (rank == 0) {
        CHECK_ST(uccl_send(conn, me->mr1, off, len, seed, &req), UCCL_OK);
        CHECK_ST(wait_free(req, &bytes), UCCL_OK);
    } else {
        CHECK_ST(uccl_recv(conn, me->mr1, off, len + 16 <= me->half - off ? len + 16 : len, seed, &req), UCCL_OK);
        CHECK_ST(wait_free(req, &bytes), UCCL_OK);
        CHECK(bytes == len, "recv bytes %zu want %zu", bytes, len);
        long bad = mem_check(me, OFF_A + off, len, seed);
        CHECK(bad < 0, "send/recv %zu B: byte %ld wrong", len, bad);
    }
    boot_barrier(eng);
}

/* rank 0 writes (or reads) len bytes at local off to rank 1's region at roff. */
static void t_rma(side_t *me, const side_t *peer_kind, size_t len, size_t off, size_t roff, int write,
                  int notify, unsigned seed)
{
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;

    (void)peer_kind;
    if ((rank == 0) == (write != 0))
        mem_fill(me, OFF_A + (rank == 0 ? off : roff), len, seed);
    else
        mem_zero(me, OFF_A + (rank == 0 ? off : roff), len);
    share_rdesc(me, 0, me->half, &rd);
    if (rank == 0) {
        if (notify)
            CHECK_ST(uccl_write_notify(conn, me->mr1, off, len, &rd, roff, seed, &req), UCCL_OK);
        else if (write)
            CHECK_ST(uccl_write(conn, me->mr1, off, len, &rd, roff, &req), UCCL_OK);
        else
            CHECK_ST(uccl_read(conn, me->mr1, off, len, &rd, roff, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
        if (!write) {
            long bad = mem_check(me, OFF_A + off, len, seed);
            CHECK(bad < 0, "read %zu B: byte %ld wrong", len, bad);
        }
    } else if (notify) {
        uint64_t v = 0;
        uccl_status_t st;
        while ((st = uccl_notif_poll(conn, &v)) == UCCL_ERR_NOT_FOUND)
            ;
        CHECK(st == UCCL_OK && v == seed, "notification %s %llu", uccl_status_name(st), (unsigned long long)v);
    }
    boot_barrier(eng);
    if (rank == 1 && write) {
        long bad = mem_check(me, OFF_A + roff, len, seed);
        CHECK(bad < 0, "write %zu B: byte %ld wrong", len, bad);
    }
}

/* Vectored: 3 pieces over both regions of one allocation. */
static void t_vectored(side_t *me, size_t len, unsigned seed)
{
    size_t p = len / 3;
    uccl_iov_t iov[3] = {{me->mr1, 7, p}, {me->mr2, 0, p}, {me->mr2, p + 5, len - 2 * p}};
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;
    size_t bytes;

    /* sendv/recvv: rank 0 sends one contiguous piece, rank 1 scatters */
    if (rank == 0)
        mem_fill(me, OFF_A, len, seed);
    boot_barrier(eng);
    if (rank == 0) {
        CHECK_ST(uccl_send(conn, me->mr1, 0, len, 99, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
    } else {
        CHECK_ST(uccl_recvv(conn, iov, 3, 99, &req), UCCL_OK);
        CHECK_ST(wait_free(req, &bytes), UCCL_OK);
        CHECK(bytes == len, "recvv bytes %zu", bytes);
        /* pieces hold the message in order: check through one host copy */
        uint8_t *h = malloc(len), *q = h;
        for (int i = 0; i < 3; i++) {
            char *src = (char *)(iov[i].mr == me->mr1 ? me->buf + OFF_A : me->buf + OFF_A + me->half) + iov[i].off;
            uccl_gpu_memcpy(q, src, iov[i].len);
            q += iov[i].len;
        }
        long bad = -1;
        for (size_t i = 0; i < len && bad < 0; i++)
            if (h[i] != pat(i, seed))
                bad = (long)i;
        CHECK(bad < 0, "recvv %zu B: byte %ld wrong", len, bad);
        free(h);
    }
    boot_barrier(eng);
    /* writev: rank 0 gathers its three pieces into rank 1's contiguous range */
    share_rdesc(me, 0, me->half, &rd);
    if (rank == 0) {
        CHECK_ST(uccl_writev(conn, iov, 3, &rd, 64, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
        CHECK_ST(uccl_readv(conn, iov, 3, &rd, 64, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
    }
    boot_barrier(eng);
}

/* Refused accesses: out of range locally, a region the target released
 * (never granted, and granted then revoked). */
static void t_refused(side_t *me)
{
    uccl_rdesc_t rd, rd2;
    uccl_mr_t *tmp = NULL;
    uccl_req_t *req = NULL;
    uccl_rdesc_t mine;

    share_rdesc(me, 0, 4096, &rd);
    if (rank == 0)
        CHECK_ST(uccl_write(conn, me->mr1, 0, 64, &rd, 4096 - 32, &req), UCCL_ERR_OUT_OF_BOUNDS);
    /* a region packed then deregistered before any access */
    memset(&mine, 0, sizeof(mine));
    if (rank == 1) {
        CHECK_ST(uccl_mr_reg(eng, me->buf + 64, 4096, 0, &tmp), UCCL_OK);
        CHECK_ST(uccl_mr_pack(tmp, 0, 4096, &mine), UCCL_OK);
        CHECK_ST(uccl_mr_dereg(tmp), UCCL_OK);
    }
    boot_xchg(eng, &mine, &rd2, sizeof(rd2));
    if (rank == 0) {
        CHECK_ST(uccl_write(conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_ERR_REMOTE_ACCESS);
    }
    boot_barrier(eng);
    /* granted (one good write), then revoked by dereg */
    if (rank == 1) {
        CHECK_ST(uccl_mr_reg(eng, me->buf + 128, 8192, 0, &tmp), UCCL_OK);
        CHECK_ST(uccl_mr_pack(tmp, 0, 8192, &mine), UCCL_OK);
    }
    boot_xchg(eng, &mine, &rd2, sizeof(rd2));
    if (rank == 0) {
        CHECK_ST(uccl_write(conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
    }
    boot_barrier(eng);
    if (rank == 1)
        CHECK_ST(uccl_mr_dereg(tmp), UCCL_OK);
    boot_barrier(eng);
    if (rank == 0) {
        CHECK_ST(uccl_write(conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_ERR_REMOTE_ACCESS);
    }
    boot_barrier(eng);
    /* truncation: a receive smaller than the message fails, the message stays */
    if (rank == 0) {
        CHECK_ST(uccl_send(conn, me->mr1, 0, 100, 555, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
    } else {
        size_t bytes = 0;
        CHECK_ST(uccl_recv(conn, me->mr1, 0, 50, 555, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_ERR_TRUNCATED);
        CHECK_ST(uccl_recv(conn, me->mr1, 0, 100, 555, &req), UCCL_OK);
        CHECK_ST(wait_free(req, &bytes), UCCL_OK);
        CHECK(bytes == 100, "after truncation got %zu", bytes);
    }
    boot_barrier(eng);
}

/* Two-sided GPU<->host: the same staging transport carries both, so a
 * GPU send meets a host receive and the other way round. */
static void t_sendrecv_mixed(side_t *gpu, side_t *host)
{
    for (int dir = 0; dir < 2; dir++) {
        side_t *me = (rank == 0) == (dir == 0) ? gpu : host;
        t_sendrecv(me, (1u << 20) + 3, 3, 200 + (unsigned)dir);
    }
}

/* Staged send/recv of the largest size, timed on the receiver. */
static void bandwidth(side_t *me, const char *name)
{
    const int iters = 5;
    struct timespec t0, t1;
    uccl_req_t *req = NULL;

    boot_barrier(eng);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) {
        if (rank == 0)
            CHECK_ST(uccl_send(conn, me->mr1, 0, MAX_BIG, 900, &req), UCCL_OK);
        else
            CHECK_ST(uccl_recv(conn, me->mr1, 0, MAX_BIG, 900, &req), UCCL_OK);
        CHECK_ST(wait_free(req, NULL), UCCL_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rank == 1) {
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        printf("bandwidth %s %s: GPU->GPU send/recv %zu B x %d: %.2f GB/s\n",
               getenv("UCCL_TRANSPORTS"), name, (size_t)MAX_BIG, iters,
               (double)MAX_BIG * iters / s / 1e9);
    }
    boot_barrier(eng);
}

static void run_sizes(side_t *me, const size_t *sizes, int n, int big_ops)
{
    for (int i = 0; i < n; i++) {
        size_t len = sizes[i];
        unsigned seed = (unsigned)(i * 7 + 1);
        int small = len < (64u << 20);

        t_sendrecv(me, len, small ? 3 : 0, seed);
        t_rma(me, NULL, len, small ? 3 : 0, small ? 5 : 0, 1, 0, seed + 1);
        if (small || big_ops) {
            t_rma(me, NULL, len, small ? 1 : 0, small ? 2 : 0, 0, 0, seed + 2);
            t_rma(me, NULL, len, 0, 0, 1, 1, seed + 3);
        }
        if (rank == 0)
            printf("%s %zu B: send/recv, write%s\n", failures ? "after failures" : "ok", len,
                   small || big_ops ? ", read, write_notify" : "");
    }
}

static int connect_pair(int gpu)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = gpu};
    char mine[UCCL_ADDRESS_MAX], theirs[UCCL_ADDRESS_MAX];
    size_t len = sizeof(mine);

    if (uccl_gpu_set_device(gpu) != UCCL_OK || uccl_engine_create(&p, &eng) != UCCL_OK)
        return -1;
    memset(mine, 0, sizeof(mine));
    if (uccl_engine_address(eng, mine, &len) != UCCL_OK)
        return -1;
    boot_xchg(NULL, mine, theirs, sizeof(mine));
    if (rank == 0)
        return uccl_connect(eng, theirs, sizeof(theirs), &conn) == UCCL_OK ? 0 : -1;
    return uccl_accept(eng, TMO, &conn) == UCCL_OK ? 0 : -1;
}

static void run_mode(const char *name, int gpu)
{
    static const size_t gsizes[] = {1, 4095, (1u << 20) + 3, MAX_BIG};
    static const size_t hsizes[] = {1, 4095, (1u << 20) + 3, MAX_BIG};
    side_t dev, host;
    int f0 = failures;

    if (connect_pair(gpu) != 0) {
        CHECK(0, "%s: engine/connection setup failed", name);
        return;
    }
    if (side_init(&dev, OFF_A + 2 * (MAX_BIG + (1u << 20)), 1) != 0 ||
        side_init(&host, OFF_A + 2 * (MAX_BIG + (1u << 20)), 0) != 0) {
        CHECK(0, "%s: allocation/registration failed", name);
        return;
    }
    run_sizes(&dev, gsizes, (int)(sizeof(gsizes) / sizeof(gsizes[0])), 1);
    bandwidth(&dev, name);
    t_vectored(&dev, 3u << 20, 41);
    t_refused(&dev);
    /* GPU->host and host->GPU one-sided */
    for (size_t i = 0; i < sizeof(hsizes) / sizeof(hsizes[0]); i++) {
        side_t *a = rank == 0 ? &dev : &host, *b = rank == 0 ? &host : &dev;
        t_rma(a, NULL, hsizes[i], 3, 5, 1, 0, 50 + (unsigned)i);  /* GPU -> remote host: target copies */
        t_rma(a, NULL, hsizes[i], 3, 5, 0, 0, 60 + (unsigned)i);  /* remote host -> GPU */
        t_rma(a, NULL, hsizes[i], 0, 0, 1, 1, 70 + (unsigned)i);  /* with notification */
        t_rma(b, NULL, hsizes[i], 3, 5, 1, 0, 80 + (unsigned)i);  /* host -> remote GPU: initiator copies */
        t_rma(b, NULL, hsizes[i], 3, 5, 0, 0, 90 + (unsigned)i);  /* remote GPU -> host */
    }
    if (rank == 0)
        printf("%s GPU<->host one-sided 1 B .. 64 MiB + 3\n", failures == f0 ? "ok" : "FAILED");
    t_sendrecv_mixed(&dev, &host);
    if (rank == 0)
        printf("%s GPU->host and host->GPU send/recv\n", failures == f0 ? "ok" : "FAILED");
    boot_barrier(eng);
    CHECK_ST(uccl_conn_close(conn), UCCL_OK);
    side_fini(&dev);
    side_fini(&host);
    boot_barrier(NULL);
    CHECK_ST(uccl_engine_destroy(eng), UCCL_OK);
    printf("[rank %d] %s: %s\n", rank, name, failures == f0 ? "PASS" : "FAIL");
}

int main(int argc, char **argv)
{
    int n = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("UCCL_TRANSPORTS", argc > 1 && argv[1][0] != '-' ? argv[1] : "shm", 1);
    rank = boot_init(&argc, &argv); /* before any GPU runtime call */
    if (rank < 0) {
        perror("bootstrap");
        return 1;
    }
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        if (rank == 0)
            printf("skipped: no GPU\n");
        return boot_finish(SKIP);
    }
    if (n >= 2)
        run_mode("GPU0 -> GPU1 (two processes)", rank);
    else if (rank == 0)
        printf("skipped: GPU0 -> GPU1 needs 2 GPUs, %d present\n", n);
    run_mode("same GPU (two processes)", 0);
    return boot_finish(failures ? 1 : 0);
}

/* Shared harness of the two-process GPU transport tests (see gpu_test.h):
 * the operation cases, one run per mode (the sides are in gpu_side.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "gpu/gpu.h"
#include "gpu_test.h"

#define SKIP 77
#define OFF_A GPU_TEST_OFF_A
#define TMO 20000

gpu_test_state_t gpu_test;

/* ---------------------------------------------------------------- operations */

void gpu_test_sendrecv(gpu_test_side_t *me, size_t len, size_t off, unsigned seed)
{
    uccl_req_t *req = NULL;
    size_t bytes = 0;

    if (gpu_test.rank == 0)
        gpu_test_fill(me, OFF_A + off, len, seed);
    else
        gpu_test_zero(me, OFF_A + off, len);
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_send(gpu_test.conn, me->mr1, off, len, seed, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_OK);
    } else {
        CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, off, len + 16 <= me->half - off ? len + 16 : len, seed, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_OK);
        CHECK(bytes == len, "recv bytes %zu want %zu", bytes, len);
        long bad = gpu_test_check(me, OFF_A + off, len, seed);
        CHECK(bad < 0, "send/recv %zu B: byte %ld wrong", len, bad);
    }
    boot_barrier(gpu_test.eng);
}

/* gpu_test.rank 0 writes (or reads) len bytes at local off to gpu_test.rank 1's region at roff. */
static void t_rma(gpu_test_side_t *me, size_t len, size_t off, size_t roff, int write, int notify, unsigned seed)
{
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;

    if ((gpu_test.rank == 0) == (write != 0))
        gpu_test_fill(me, OFF_A + (gpu_test.rank == 0 ? off : roff), len, seed);
    else
        gpu_test_zero(me, OFF_A + (gpu_test.rank == 0 ? off : roff), len);
    gpu_test_share_rdesc(me, 0, me->half, &rd);
    if (gpu_test.rank == 0) {
        if (notify)
            CHECK_ST(uccl_write_notify(gpu_test.conn, me->mr1, off, len, &rd, roff, seed, &req), UCCL_OK);
        else if (write)
            CHECK_ST(uccl_write(gpu_test.conn, me->mr1, off, len, &rd, roff, &req), UCCL_OK);
        else
            CHECK_ST(uccl_read(gpu_test.conn, me->mr1, off, len, &rd, roff, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
        if (!write) {
            long bad = gpu_test_check(me, OFF_A + off, len, seed);
            CHECK(bad < 0, "read %zu B: byte %ld wrong", len, bad);
        }
    } else if (notify) {
        uint64_t v = 0;
        uccl_status_t st;
        while ((st = uccl_notif_poll(gpu_test.conn, &v)) == UCCL_ERR_NOT_FOUND)
            ;
        CHECK(st == UCCL_OK && v == seed, "notification %s %llu", uccl_status_name(st), (unsigned long long)v);
    }
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 1 && write) {
        long bad = gpu_test_check(me, OFF_A + roff, len, seed);
        CHECK(bad < 0, "write %zu B: byte %ld wrong", len, bad);
    }
}

/* Posted together, nothing waited for in between: write A to the peer,
 * read it back, write B over it (mode->rma_in_order). gpu_ipc holds small
 * copies back and issues them as one unordered batch (BATCH_MAX; the fake
 * backend runs a batch last first): the read must still see A, the peer
 * keep B. */
static void t_rma_chain(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req[3] = {NULL, NULL, NULL};
    uccl_rdesc_t rd;
    long bad;

    if (gpu_test.rank == 0) {
        gpu_test_fill(me, OFF_A, len, seed);
        gpu_test_fill(me, OFF_A + len, len, seed + 1);
        gpu_test_zero(me, OFF_A + 2 * len, len);
    } else {
        gpu_test_zero(me, OFF_A, len);
    }
    gpu_test_share_rdesc(me, 0, me->half, &rd);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, 0, len, &rd, 0, &req[0]), UCCL_OK);
        CHECK_ST(uccl_read(gpu_test.conn, me->mr1, 2 * len, len, &rd, 0, &req[1]), UCCL_OK);
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, len, len, &rd, 0, &req[2]), UCCL_OK);
        for (int i = 0; i < 3; i++)
            CHECK_ST(gpu_test_wait_free(req[i], NULL), UCCL_OK);
        bad = gpu_test_check(me, OFF_A + 2 * len, len, seed);
        CHECK(bad < 0, "write, read back, overwrite (%zu B): the read got byte %ld wrong", len, bad);
    }
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 1) {
        bad = gpu_test_check(me, OFF_A, len, seed + 1);
        CHECK(bad < 0, "write, read back, overwrite (%zu B): byte %ld of the target wrong", len, bad);
    }
    boot_barrier(gpu_test.eng);
}

/* Vectored: 3 pieces over both regions of one allocation. */
static void t_vectored(gpu_test_side_t *me, size_t len, unsigned seed)
{
    size_t p = len / 3;
    uccl_iov_t iov[3] = {{me->mr1, 7, p}, {me->mr2, 0, p}, {me->mr2, p + 5, len - 2 * p}};
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;
    size_t bytes;

    /* sendv/recvv: gpu_test.rank 0 sends one contiguous piece, gpu_test.rank 1 scatters */
    if (gpu_test.rank == 0)
        gpu_test_fill(me, OFF_A, len, seed);
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_send(gpu_test.conn, me->mr1, 0, len, 99, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    } else {
        CHECK_ST(uccl_recvv(gpu_test.conn, iov, 3, 99, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_OK);
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
            if (h[i] != gpu_test_pat(i, seed))
                bad = (long)i;
        CHECK(bad < 0, "recvv %zu B: byte %ld wrong", len, bad);
        free(h);
    }
    boot_barrier(gpu_test.eng);
    /* writev: gpu_test.rank 0 gathers its three pieces into gpu_test.rank 1's contiguous range */
    gpu_test_share_rdesc(me, 0, me->half, &rd);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_writev(gpu_test.conn, iov, 3, &rd, 64, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
        CHECK_ST(uccl_readv(gpu_test.conn, iov, 3, &rd, 64, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    }
    boot_barrier(gpu_test.eng);
}

/* Many small messages in flight at once, sent before the receiver looks:
 * more control records than a channel holds (gpu_ipc: 4096 RTS of 72 bytes
 * > the 256 KiB mailbox, so the sender queues the rest and the ring wraps),
 * held as unexpected, then received in order, each
 * into its own slot: slot i holds the first len(i) bytes of the sender's
 * slot i and nothing else. */
#define SMALL_N 4096
#define SMALL_SLOT 16
#define SMALL_LEN(i) (SMALL_SLOT - 1 - (size_t)(i) % 7)

static long many_small_check(const gpu_test_side_t *me, unsigned seed)
{
    size_t total = (size_t)SMALL_N * SMALL_SLOT;
    uint8_t *h = malloc(total);
    long bad = -1;

    if (h == NULL || uccl_gpu_memcpy(h, me->buf + OFF_A, total) != UCCL_OK)
        bad = 0;
    for (size_t k = 0; k < total && bad < 0; k++)
        if (h[k] != (k % SMALL_SLOT < SMALL_LEN(k / SMALL_SLOT) ? gpu_test_pat(k, seed) : 0))
            bad = (long)k;
    free(h);
    return bad;
}

static void t_many_small(gpu_test_side_t *me, unsigned seed)
{
    uccl_req_t **req = calloc(SMALL_N, sizeof(*req));
    int failed = 0;
    long bad;

    if (gpu_test.rank == 0)
        gpu_test_fill(me, OFF_A, (size_t)SMALL_N * SMALL_SLOT, seed);
    else
        gpu_test_zero(me, OFF_A, (size_t)SMALL_N * SMALL_SLOT);
    boot_barrier(gpu_test.eng);
    for (int i = 0; i < SMALL_N && gpu_test.rank == 0; i++)
        CHECK_ST(uccl_send(gpu_test.conn, me->mr1, (size_t)i * SMALL_SLOT, SMALL_LEN(i), 700, &req[i]),
                 UCCL_OK);
    boot_barrier(NULL); /* the receiver has not progressed: the sends wait for room */
    for (int i = 0; i < SMALL_N && gpu_test.rank == 1; i++)
        CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, (size_t)i * SMALL_SLOT, SMALL_SLOT, 700, &req[i]),
                 UCCL_OK);
    for (int i = 0; i < SMALL_N; i++) {
        size_t bytes = 0;
        uccl_status_t st = gpu_test_wait_free(req[i], &bytes);
        if ((st != UCCL_OK || bytes != SMALL_LEN(i)) && failed++ == 0)
            CHECK(0, "small message %d: %s, %zu bytes", i, uccl_status_name(st), bytes);
    }
    free(req);
    if (gpu_test.rank == 1 && (bad = many_small_check(me, seed)) >= 0)
        CHECK(0, "%d small messages in flight: byte %ld wrong (slot %ld)", SMALL_N, bad,
              bad / SMALL_SLOT);
    if (gpu_test.rank == 0)
        printf("%s %d small messages in flight before the receiver looks\n",
               failed ? "FAILED" : "ok", SMALL_N);
    boot_barrier(gpu_test.eng);
}

/* Refused accesses: out of range locally, a region the target released
 * (never granted, and granted then revoked). */
static void t_refused(gpu_test_side_t *me)
{
    uccl_rdesc_t rd, rd2;
    uccl_mr_t *tmp = NULL;
    uccl_req_t *req = NULL;
    uccl_rdesc_t mine;

    gpu_test_share_rdesc(me, 0, 4096, &rd);
    if (gpu_test.rank == 0)
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, 0, 64, &rd, 4096 - 32, &req), UCCL_ERR_OUT_OF_BOUNDS);
    /* a region packed then deregistered before any access */
    memset(&mine, 0, sizeof(mine));
    if (gpu_test.rank == 1) {
        CHECK_ST(uccl_mr_reg(gpu_test.eng, me->buf + 64, 4096, 0, &tmp), UCCL_OK);
        CHECK_ST(uccl_mr_pack(tmp, 0, 4096, &mine), UCCL_OK);
        CHECK_ST(uccl_mr_dereg(tmp), UCCL_OK);
    }
    boot_xchg(gpu_test.eng, &mine, &rd2, sizeof(rd2));
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_ERR_REMOTE_ACCESS);
    }
    boot_barrier(gpu_test.eng);
    /* granted (one good write), then revoked by dereg */
    if (gpu_test.rank == 1) {
        CHECK_ST(uccl_mr_reg(gpu_test.eng, me->buf + 128, 8192, 0, &tmp), UCCL_OK);
        CHECK_ST(uccl_mr_pack(tmp, 0, 8192, &mine), UCCL_OK);
    }
    boot_xchg(gpu_test.eng, &mine, &rd2, sizeof(rd2));
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    }
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 1)
        CHECK_ST(uccl_mr_dereg(tmp), UCCL_OK);
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_write(gpu_test.conn, me->mr1, 0, 64, &rd2, 0, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_ERR_REMOTE_ACCESS);
    }
    boot_barrier(gpu_test.eng);
    /* truncation: a receive smaller than the message fails, the message stays */
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_send(gpu_test.conn, me->mr1, 0, 100, 555, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    } else {
        size_t bytes = 0;
        CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, 0, 50, 555, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_ERR_TRUNCATED);
        CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, 0, 100, 555, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_OK);
        CHECK(bytes == 100, "after truncation got %zu", bytes);
    }
    boot_barrier(gpu_test.eng);
}

/* Two-sided between GPU and host memory on one connection, both ways. The
 * two sides may travel on different transports (gpu_ipc and shm): the
 * core's matching pairs them all the same. */
static void t_sendrecv_host_gpu(gpu_test_side_t *dev, gpu_test_side_t *host, unsigned seed)
{
    static const size_t sizes[] = {1, 4096, 65536 + 3, (1u << 20) + 3, 16u << 20};

    for (int i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++)
        for (int dir = 0; dir < 2; dir++) {
            gpu_test_side_t *me = (gpu_test.rank == 0) == (dir == 0) ? dev : host;
            gpu_test_sendrecv(me, sizes[i], 3, seed + (unsigned)(2 * i + dir));
        }
}

/* Three messages of one tag sent from host, GPU and host memory into
 * receives in GPU, host and GPU memory each land in the receive posted for
 * them, in posting order, with receives posted before the sends
 * (early = 1) or after the messages arrived (early = 0). */
static void t_sendrecv_order(gpu_test_side_t *dev, gpu_test_side_t *host, int early, unsigned seed)
{
    static const size_t len[3] = {(1u << 20) + 5, 3000, 100};
    gpu_test_side_t *src[3] = {host, dev, host}, *dst[3] = {dev, host, dev};
    uccl_req_t *req[3] = {NULL, NULL, NULL};
    size_t bytes;

    for (int i = 0; i < 3; i++) {
        gpu_test_side_t *s = gpu_test.rank == 0 ? src[i] : dst[i];
        uccl_mr_t *mr = i == 2 ? s->mr2 : s->mr1; /* message 2 shares a side with 0 */
        size_t off = OFF_A + (i == 2 ? s->half : 0);

        if (gpu_test.rank == 0) {
            gpu_test_fill(s, off, len[i], seed + (unsigned)i);
        } else {
            gpu_test_zero(s, off, len[i]);
            if (early)
                CHECK_ST(uccl_recv(gpu_test.conn, mr, 0, len[i] + 8, 600, &req[i]), UCCL_OK);
        }
    }
    boot_barrier(gpu_test.eng);
    for (int i = 0; i < 3 && gpu_test.rank == 0; i++)
        CHECK_ST(uccl_send(gpu_test.conn, i == 2 ? src[i]->mr2 : src[i]->mr1, 0, len[i], 600, &req[i]),
                 UCCL_OK);
    boot_barrier(gpu_test.eng); /* progresses: the messages arrive first when !early */
    for (int i = 0; i < 3 && gpu_test.rank == 1 && !early; i++)
        CHECK_ST(uccl_recv(gpu_test.conn, i == 2 ? dst[i]->mr2 : dst[i]->mr1, 0, len[i] + 8, 600,
                           &req[i]), UCCL_OK);
    for (int i = 0; i < 3; i++) {
        bytes = 0;
        CHECK_ST(gpu_test_wait_free(req[i], &bytes), UCCL_OK);
        if (gpu_test.rank == 1) {
            gpu_test_side_t *s = dst[i];
            long bad = gpu_test_check(s, OFF_A + (i == 2 ? s->half : 0), len[i], seed + (unsigned)i);
            CHECK(bytes == len[i], "ordered message %d: %zu bytes, want %zu", i, bytes, len[i]);
            CHECK(bad < 0, "ordered message %d (%s -> %s memory): byte %ld wrong", i,
                  src[i]->gpu ? "GPU" : "host", s->gpu ? "GPU" : "host", bad);
        }
    }
    boot_barrier(gpu_test.eng);
}

/* Every region of the allocation released (the peer is told to unmap it)
 * and registered again: the peer maps it afresh, both directions. */
static void t_reregister(gpu_test_side_t *me, unsigned seed)
{
    for (int round = 0; round < 3; round++) {
        CHECK_ST(uccl_mr_dereg(me->mr1), UCCL_OK);
        CHECK_ST(uccl_mr_dereg(me->mr2), UCCL_OK);
        boot_barrier(gpu_test.eng); /* the peer handles ALLOC_GONE */
        CHECK_ST(uccl_mr_reg(gpu_test.eng, me->buf + OFF_A, me->half, 0, &me->mr1), UCCL_OK);
        CHECK_ST(uccl_mr_reg(gpu_test.eng, me->buf + OFF_A + me->half, me->half, 0, &me->mr2), UCCL_OK);
        gpu_test_sendrecv(me, (size_t)(4096 << round) + 1, 3, seed + (unsigned)round);
        t_rma(me, 65536, 3, 5, 1, 1, seed + 10 + (unsigned)round);
        t_rma(me, (size_t)(1u << 20), 0, 0, 0, 0, seed + 20 + (unsigned)round);
    }
    if (gpu_test.rank == 0)
        printf("%s regions released and registered again, 3 rounds\n", gpu_test.failures ? "after failures" : "ok");
}

/* uccl_mem_free of GPU memory whose regions are still registered (stale,
 * uccl_mr_query says so; deregistered later, as uccl.h allows), then
 * uccl_mem_alloc of the same size (the same address, often): the peer must
 * map the new allocation, never reach the freed one through the old
 * registration's IPC handle; after the stale regions are deregistered the
 * new ones still work. Rank 0 sends and writes, rank 1 receives. */
static void t_realloc_stale(gpu_test_side_t *me, unsigned seed)
{
    gpu_test_side_t s = *me;
    uccl_gpu_ptr_attr_t attr;
    uccl_mr_t *old1, *old2;
    int same = 0;

    s.buf = NULL;
    CHECK_ST(uccl_gpu_ptr_attr(me->buf, &attr), UCCL_OK); /* CUDA or ROCm, as the build */
    CHECK_ST(uccl_mem_alloc(gpu_test.eng, attr.type, s.size, (void **)&s.buf), UCCL_OK);
    if (s.buf == NULL)
        return;
    CHECK_ST(uccl_mr_reg(gpu_test.eng, s.buf + OFF_A, s.half, 0, &s.mr1), UCCL_OK);
    CHECK_ST(uccl_mr_reg(gpu_test.eng, s.buf + OFF_A + s.half, s.half, 0, &s.mr2), UCCL_OK);
    gpu_test_sendrecv(&s, 70000, 3, seed);
    t_rma(&s, 65536, 3, 5, 1, 0, seed + 1);
    for (int round = 0; round < 3; round++) {
        char *old = s.buf;
        uccl_rdesc_t mine, stale; /* rank 1's second region, never granted before */
        uccl_req_t *req = NULL;

        old1 = s.mr1;
        old2 = s.mr2;
        memset(&mine, 0, sizeof(mine));
        if (gpu_test.rank == 1)
            CHECK_ST(uccl_mr_pack(old2, 0, s.half, &mine), UCCL_OK);
        boot_xchg(gpu_test.eng, &mine, &stale, sizeof(stale));
        CHECK_ST(uccl_mem_free(gpu_test.eng, s.buf), UCCL_OK); /* regions stay, stale */
        CHECK_ST(uccl_mem_alloc(gpu_test.eng, attr.type, s.size, (void **)&s.buf), UCCL_OK);
        same += s.buf == old;
        CHECK_ST(uccl_mr_reg(gpu_test.eng, s.buf + OFF_A, s.half, 0, &s.mr1), UCCL_OK);
        CHECK_ST(uccl_mr_reg(gpu_test.eng, s.buf + OFF_A + s.half, s.half, 0, &s.mr2), UCCL_OK);
        boot_barrier(gpu_test.eng);
        gpu_test_sendrecv(&s, 70000, 3, seed + 10 + (unsigned)round);
        t_rma(&s, 65536, 3, 5, 1, 0, seed + 20 + (unsigned)round);
        t_rma(&s, 65536, 1, 2, 0, 0, seed + 30 + (unsigned)round);
        if (gpu_test.rank == 0) { /* a descriptor of freed memory: refused, nothing else hurt */
            CHECK_ST(uccl_write(gpu_test.conn, s.mr1, 0, 4096, &stale, 0, &req), UCCL_OK);
            CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_ERR_REMOTE_ACCESS);
        }
        boot_barrier(gpu_test.eng);
        t_rma(&s, 65536, 3, 5, 1, 0, seed + 35 + (unsigned)round);
        CHECK_ST(uccl_mr_dereg(old1), UCCL_OK);
        CHECK_ST(uccl_mr_dereg(old2), UCCL_OK);
        boot_barrier(gpu_test.eng);
        gpu_test_sendrecv(&s, 70000, 3, seed + 40 + (unsigned)round);
        t_rma(&s, 65536, 3, 5, 1, 0, seed + 50 + (unsigned)round);
    }
    CHECK_ST(uccl_mr_dereg(s.mr1), UCCL_OK);
    CHECK_ST(uccl_mr_dereg(s.mr2), UCCL_OK);
    CHECK_ST(uccl_mem_free(gpu_test.eng, s.buf), UCCL_OK);
    if (gpu_test.rank == 0)
        printf("%s uccl_mem_free under live registrations, allocated again, 3 rounds (%d at the "
               "same address)\n", gpu_test.failures ? "after failures" : "ok", same);
}

static void run_sizes(gpu_test_side_t *me, const size_t *sizes, int n, int big_ops)
{
    for (int i = 0; i < n; i++) {
        size_t len = sizes[i];
        unsigned seed = (unsigned)(i * 7 + 1);
        int small = len < (64u << 20);

        gpu_test_sendrecv(me, len, small ? 3 : 0, seed);
        t_rma(me, len, small ? 3 : 0, small ? 5 : 0, 1, 0, seed + 1);
        if (small || big_ops) {
            t_rma(me, len, small ? 1 : 0, small ? 2 : 0, 0, 0, seed + 2);
            t_rma(me, len, 0, 0, 1, 1, seed + 3);
        }
        if (gpu_test.rank == 0)
            printf("%s %zu B: send/recv, write%s\n", gpu_test.failures ? "after failures" : "ok", len,
                   small || big_ops ? ", read, write_notify" : "");
    }
}

int gpu_test_connect(int gpu, const gpu_test_mode_t *mode)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = gpu};
    char mine[UCCL_ADDRESS_MAX], theirs[UCCL_ADDRESS_MAX];
    size_t len = sizeof(mine);

    if (uccl_gpu_set_device(gpu) != UCCL_OK || uccl_engine_create(&p, &gpu_test.eng) != UCCL_OK)
        return -1;
    if (mode->need_caps != 0)
        CHECK((uccl_engine_caps(gpu_test.eng) & mode->need_caps) == mode->need_caps, "engine has no %s",
              mode->caps_name);
    memset(mine, 0, sizeof(mine));
    if (uccl_engine_address(gpu_test.eng, mine, &len) != UCCL_OK)
        return -1;
    boot_xchg(NULL, mine, theirs, sizeof(mine));
    if (gpu_test.rank == 0)
        return uccl_connect(gpu_test.eng, theirs, sizeof(theirs), &gpu_test.conn) == UCCL_OK ? 0 : -1;
    return uccl_accept(gpu_test.eng, TMO, &gpu_test.conn) == UCCL_OK ? 0 : -1;
}

/* GPU<->host one-sided, each way, from either end. */
static void run_host_sizes(gpu_test_side_t *dev, gpu_test_side_t *host, const gpu_test_mode_t *mode)
{
    gpu_test_side_t *a = gpu_test.rank == 0 ? dev : host, *b = gpu_test.rank == 0 ? host : dev;

    for (int i = 0; i < mode->n_host_sizes; i++) {
        size_t len = mode->host_sizes[i];
        t_rma(a, len, 3, 5, 1, 0, 50 + (unsigned)i); /* GPU -> remote host: target copies */
        t_rma(a, len, 3, 5, 0, 0, 60 + (unsigned)i); /* remote host -> GPU */
        t_rma(a, len, 0, 0, 1, 1, 70 + (unsigned)i); /* with notification */
        t_rma(b, len, 3, 5, 1, 0, 80 + (unsigned)i); /* host -> remote GPU: initiator copies */
        t_rma(b, len, 3, 5, 0, 0, 90 + (unsigned)i); /* remote GPU -> host */
    }
}

static void run_mode(const char *name, int gpu, const gpu_test_mode_t *mode)
{
    gpu_test_side_t dev, host;
    int f0 = gpu_test.failures, f1;

    if (gpu_test_connect(gpu, mode) != 0) {
        CHECK(0, "%s: engine/connection setup failed", name);
        return;
    }
    if (gpu_test_side_init(&dev, mode->gpu_alloc, 1) != 0 || gpu_test_side_init(&host, mode->host_alloc, 0) != 0) {
        CHECK(0, "%s: allocation/registration failed", name);
        return;
    }
    run_sizes(&dev, mode->gpu_sizes, mode->n_gpu_sizes, mode->big_ops);
    if (mode->after_sizes != NULL)
        mode->after_sizes(&dev, name);
    if (mode->rma_in_order) {
        t_rma_chain(&dev, 4096, 37);
        t_rma_chain(&dev, 65539, 39);
    }
    t_vectored(&dev, 3u << 20, 41);
    t_many_small(&dev, 43);
    t_refused(&dev);
    run_host_sizes(&dev, &host, mode);
    if (gpu_test.rank == 0)
        printf("%s GPU<->host one-sided %s\n", gpu_test.failures == f0 ? "ok" : "FAILED", mode->host_range);
    f1 = gpu_test.failures;
    t_sendrecv_host_gpu(&dev, &host, 200);
    t_sendrecv_order(&dev, &host, 1, 220);
    t_sendrecv_order(&dev, &host, 0, 230);
    t_reregister(&dev, 240);
    t_realloc_stale(&dev, 260);
    if (gpu_test.rank == 0)
        printf("%s two-sided GPU<->host 1 B .. 16 MiB, and host/GPU/host messages in order\n",
               gpu_test.failures == f1 ? "ok" : "FAILED");
    gpu_test_teardown(&dev, &host);
    printf("[rank %d] %s: %s\n", gpu_test.rank, name, gpu_test.failures == f0 ? "PASS" : "FAIL");
}

/* The fake GPU backend copies "device" memory with the CPU: there, sizes
 * above mode->fake_max only cost CI time, so they run once at fake_max. */
static gpu_test_mode_t fake_capped(const gpu_test_mode_t *mode, size_t *sizes, int cap)
{
    gpu_test_mode_t m = *mode;
    int n = 0, dropped = 0;

    if (mode->fake_max == 0)
        return m;
    for (int i = 0; i < mode->n_gpu_sizes && n < cap - 1; i++) {
        if (mode->gpu_sizes[i] <= mode->fake_max)
            sizes[n++] = mode->gpu_sizes[i];
        else
            dropped++;
    }
    if (dropped > 0 && (n == 0 || sizes[n - 1] != mode->fake_max))
        sizes[n++] = mode->fake_max;
    m.gpu_sizes = sizes;
    m.n_gpu_sizes = n;
    m.gpu_alloc = mode->fake_gpu_alloc;
    if (gpu_test.rank == 0 && dropped > 0)
        printf("fake GPU backend: sizes capped at %zu B for CI time (%d larger size(s) not run)\n",
               mode->fake_max, dropped);
    return m;
}

int gpu_test_main(int *argc, char ***argv, const gpu_test_mode_t *mode)
{
    size_t fake_sizes[32];
    gpu_test_mode_t capped;
    int n = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    gpu_test.rank = boot_init(argc, argv); /* before any GPU runtime call */
    if (gpu_test.rank < 0) {
        perror("bootstrap");
        return 1;
    }
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        if (gpu_test.rank == 0)
            printf("skipped: no GPU\n");
        return boot_finish(SKIP);
    }
    if (strcmp(uccl_gpu_backend(), "fake") == 0) {
        if (gpu_test.rank == 0)
            printf("fake GPU backend: transport logic only, no real GPU (device memory is host shared "
                   "memory, copies run on the CPU)\n");
        capped = fake_capped(mode, fake_sizes, (int)(sizeof(fake_sizes) / sizeof(fake_sizes[0])));
        mode = &capped;
    }
    if (n >= 2)
        run_mode("GPU0 -> GPU1 (two processes)", gpu_test.rank, mode);
    else if (gpu_test.rank == 0)
        printf("skipped: GPU0 -> GPU1 needs 2 GPUs, %d present\n", n);
    run_mode("same GPU (two processes)", 0, mode);
    return boot_finish(gpu_test.failures ? 1 : 0);
}

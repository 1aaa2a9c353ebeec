/* gpu_ipc ready-to-receive (src/tp/gpu_ipc/ready.c), run by t_gpu_ipc after
 * its sizes: a receive in GPU memory posted before its message lets the
 * send copy into it and complete on its own copy. Each case checks bytes
 * and statuses; boot_barrier(NULL) orders the two processes without
 * progressing either engine. t_gpu_ipc turns the path on
 * (UCCL_GPU_IPC_READY=1); gpu_ipc uses it between two GPUs only, so on
 * one GPU these cases check the usual path, and only for memory the
 * sender has mapped: a 1 MiB message (pushed after a clear-to-send) goes
 * first.
 *  - alone (two GPUs): the receiver posts, then does not progress until
 *    the sender's send completed: only the ready path completes it
 *    (without it the send waits for the receiver's pull and times out);
 *  - crossing: the send's RTS is on its way when the receive is posted, so
 *    the READY crosses it; the next message must not land in that receive;
 *  - another message first: an offer for message n is not used by n+1;
 *  - too small: a send larger than the offered receive goes the usual way
 *    (TRUNCATED, the message waits for the next receive);
 *  - a window of four receives with one tag: messages land in order;
 *  - a persistent receive started again and again, each time alone;
 *  - fresh memory: a receive into memory the sender never mapped, matched
 *    by the send's RTS and freed at once, before the sender looks: no
 *    offer may announce it (the sender could not map it: broken link). */
#include <string.h>
#include <time.h>

#include "boot.h"
#include "gpu_test.h"

#define OFF_A GPU_TEST_OFF_A
#define RTMO 10000 /* ms: a send the ready path should complete at once */

static uccl_conn_t *conn(void) { return gpu_test.conn; }
static int r0(void) { return gpu_test.rank == 0; }

/* rank 1's receive of len bytes at off got message seed. */
static void recv_check(gpu_test_side_t *me, uccl_req_t *req, size_t off, size_t len, unsigned seed,
                       const char *what)
{
    size_t bytes = 0;
    long bad;

    CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_OK);
    CHECK(bytes == len, "%s: %zu bytes received, want %zu", what, bytes, len);
    bad = gpu_test_check(me, OFF_A + off, len, seed);
    CHECK(bad < 0, "%s: byte %ld of %zu wrong", what, bad, len);
}

/* rank 0's send, waited for while rank 1 does not progress (two GPUs;
 * on one, after rank 1 goes on). */
static void send_alone(gpu_test_side_t *me, uccl_req_t **req, size_t off, size_t len, unsigned seed)
{
    uccl_status_t st;

    if (*req == NULL)
        CHECK_ST(uccl_send(conn(), me->mr1, off, len, seed, req), UCCL_OK);
    else
        CHECK_ST(uccl_start(*req), UCCL_OK);
    if (!gpu_test.two_gpus) {
        boot_barrier(NULL);
        CHECK_ST(uccl_wait(*req, RTMO), UCCL_OK);
        return;
    }
    st = uccl_wait(*req, RTMO);
    CHECK(st == UCCL_OK, "a %zu-byte send to a receive posted first did not complete while the "
          "receiver did not progress: %s (the ready-to-receive push should)", len, uccl_status_name(st));
    boot_barrier(NULL);
    if (st != UCCL_OK) /* the receiver progresses from here: the old path finishes it */
        CHECK_ST(uccl_wait(*req, RTMO), UCCL_OK);
}

static void t_alone(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req = NULL;

    if (r0())
        gpu_test_fill(me, OFF_A, len, seed);
    else
        gpu_test_zero(me, OFF_A, len);
    if (!r0())
        CHECK_ST(uccl_recv(conn(), me->mr1, 0, len + 64, seed, &req), UCCL_OK);
    boot_barrier(NULL); /* the receive is posted: its READY is on the ring */
    if (r0()) {
        send_alone(me, &req, 0, len, seed);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    } else {
        boot_barrier(NULL); /* the send is done: progress only now */
        recv_check(me, req, 0, len, seed, "ready alone");
    }
    boot_barrier(gpu_test.eng);
}

/* Message 1 is posted before its receive (its RTS and the READY cross),
 * message 2 after: 2 must land in its own receive, not in 1's. */
static void t_crossing(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req[2] = {NULL, NULL};
    size_t off2 = len + 4096;

    if (r0()) {
        gpu_test_fill(me, OFF_A, len, seed);
        gpu_test_fill(me, OFF_A + off2, len, seed + 1);
        CHECK_ST(uccl_send(conn(), me->mr1, 0, len, seed, &req[0]), UCCL_OK);
    } else {
        gpu_test_zero(me, OFF_A, off2 + len);
    }
    boot_barrier(NULL); /* the RTS of message 1 is on the ring, not seen yet */
    if (!r0())
        CHECK_ST(uccl_recv(conn(), me->mr1, 0, len, seed, &req[0]), UCCL_OK);
    if (r0())
        CHECK_ST(gpu_test_wait_free(req[0], NULL), UCCL_OK);
    else
        recv_check(me, req[0], 0, len, seed, "crossing, message 1");
    boot_barrier(gpu_test.eng);
    if (!r0())
        CHECK_ST(uccl_recv(conn(), me->mr1, off2, len, seed, &req[1]), UCCL_OK);
    boot_barrier(NULL);
    if (r0()) {
        CHECK_ST(uccl_send(conn(), me->mr1, off2, len, seed, &req[1]), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req[1], NULL), UCCL_OK);
    } else {
        recv_check(me, req[1], off2, len, seed + 1, "crossing, message 2");
        long bad = gpu_test_check(me, OFF_A, len, seed);
        CHECK(bad < 0, "crossing: message 1's receive changed after it completed (byte %ld)", bad);
    }
    boot_barrier(gpu_test.eng);
}

/* The receive for tag seed is offered for message n; message n has another
 * tag (seed + 1, received later), n+1 has seed. */
static void t_other_first(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req[2] = {NULL, NULL};
    size_t off2 = len + 4096;

    if (r0()) {
        gpu_test_fill(me, OFF_A, len, seed + 1);
        gpu_test_fill(me, OFF_A + off2, len, seed);
    } else {
        gpu_test_zero(me, OFF_A, off2 + len);
        CHECK_ST(uccl_recv(conn(), me->mr1, off2, len, seed, &req[1]), UCCL_OK);
    }
    boot_barrier(NULL);
    if (r0()) {
        CHECK_ST(uccl_send(conn(), me->mr1, 0, len, seed + 1, &req[0]), UCCL_OK);
        CHECK_ST(uccl_send(conn(), me->mr1, off2, len, seed, &req[1]), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req[0], NULL), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req[1], NULL), UCCL_OK);
    } else {
        recv_check(me, req[1], off2, len, seed, "another message first, the offered receive");
        CHECK_ST(uccl_recv(conn(), me->mr1, 0, len, seed + 1, &req[0]), UCCL_OK);
        recv_check(me, req[0], 0, len, seed + 1, "another message first, the other");
    }
    boot_barrier(gpu_test.eng);
}

/* The offered receive is too small: TRUNCATED, the next receive gets it. */
static void t_too_small(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req = NULL;
    size_t bytes = 0;

    if (r0())
        gpu_test_fill(me, OFF_A, len, seed);
    else
        gpu_test_zero(me, OFF_A, len);
    if (!r0())
        CHECK_ST(uccl_recv(conn(), me->mr1, 0, len / 2, seed, &req), UCCL_OK);
    boot_barrier(NULL);
    if (r0()) {
        CHECK_ST(uccl_send(conn(), me->mr1, 0, len, seed, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    } else {
        CHECK_ST(gpu_test_wait_free(req, &bytes), UCCL_ERR_TRUNCATED);
        CHECK(bytes == len, "too small: TRUNCATED says %zu bytes, want %zu", bytes, len);
        CHECK_ST(uccl_recv(conn(), me->mr1, 0, len, seed, &req), UCCL_OK);
        recv_check(me, req, 0, len, seed, "too small, then a receive that fits");
    }
    boot_barrier(gpu_test.eng);
}

/* Four receives of one tag, then four messages: each in its own, in order. */
static void t_window(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req[4];
    size_t step = len + 256;

    for (int i = 0; i < 4; i++) {
        if (r0())
            gpu_test_fill(me, OFF_A + i * step, len, seed + (unsigned)i);
        else
            gpu_test_zero(me, OFF_A + i * step, len);
        if (!r0())
            CHECK_ST(uccl_recv(conn(), me->mr1, i * step, len, seed, &req[i]), UCCL_OK);
    }
    boot_barrier(NULL);
    for (int i = 0; i < 4 && r0(); i++)
        CHECK_ST(uccl_send(conn(), me->mr1, i * step, len, seed, &req[i]), UCCL_OK);
    for (int i = 0; i < 4; i++) {
        if (r0())
            CHECK_ST(gpu_test_wait_free(req[i], NULL), UCCL_OK);
        else
            recv_check(me, req[i], i * step, len, seed + (unsigned)i, "window of four, one tag");
    }
    boot_barrier(gpu_test.eng);
}

/* A persistent receive, started three times, each time alone. */
static void t_persistent(gpu_test_side_t *me, size_t len, unsigned seed)
{
    uccl_req_t *req = NULL;

    if (!r0())
        CHECK_ST(uccl_recv_init(conn(), me->mr1, 0, len, seed, &req), UCCL_OK);
    else
        CHECK_ST(uccl_send_init(conn(), me->mr1, 0, len, seed, &req), UCCL_OK);
    for (int round = 0; round < 3; round++) {
        if (r0())
            gpu_test_fill(me, OFF_A, len, seed + (unsigned)round);
        else
            gpu_test_zero(me, OFF_A, len);
        if (!r0())
            CHECK_ST(uccl_start(req), UCCL_OK);
        boot_barrier(NULL);
        if (r0()) {
            send_alone(me, &req, 0, len, seed + (unsigned)round);
        } else {
            size_t bytes = 0;
            long bad;

            boot_barrier(NULL);
            CHECK_ST(uccl_wait(req, RTMO), UCCL_OK);
            CHECK_ST(uccl_req_bytes(req, &bytes), UCCL_OK);
            bad = gpu_test_check(me, OFF_A, len, seed + (unsigned)round);
            CHECK(bytes == len && bad < 0, "persistent round %d: %zu bytes, byte %ld wrong", round,
                  bytes, bad);
        }
        boot_barrier(gpu_test.eng);
    }
    CHECK_ST(uccl_req_free(req), UCCL_OK);
}

static void t_fresh(gpu_test_side_t *me, unsigned seed)
{
    gpu_test_side_t fresh;
    uccl_req_t *req = NULL;
    const size_t len = 4096;

    if (r0()) {
        gpu_test_fill(me, OFF_A, len, seed);
        CHECK_ST(uccl_send(conn(), me->mr1, 0, len, seed, &req), UCCL_OK);
    }
    boot_barrier(NULL); /* the RTS is on the ring, not seen yet */
    if (!r0()) {
        if (gpu_test_side_init(&fresh, OFF_A + 2 * len, 1) != 0) {
            CHECK(0, "fresh memory: allocation/registration failed");
        } else {
            gpu_test_zero(&fresh, OFF_A, len);
            CHECK_ST(uccl_recv(conn(), fresh.mr1, 0, len, seed, &req), UCCL_OK);
            recv_check(&fresh, req, 0, len, seed, "fresh memory"); /* our pull: no sender needed */
            gpu_test_side_fini(&fresh);
        }
    }
    boot_barrier(NULL); /* freed: only now does the sender read what came */
    if (r0())
        CHECK_ST(gpu_test_wait_free(req, NULL), UCCL_OK);
    boot_barrier(gpu_test.eng);
    gpu_test_sendrecv(me, len, 0, seed + 1); /* the connection lives on */
}

void gpu_test_ready_cases(gpu_test_side_t *dev, const char *name)
{
    int f0 = gpu_test.failures;
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* an offer names only memory the sender has mapped: a message of
     * PUSH_MIN (512 KiB) or more is pushed after a clear-to-send, which
     * announces the receive's allocation (between two GPUs) */
    gpu_test_sendrecv(dev, 1u << 20, 0, 300);
    t_alone(dev, 4096, 301);
    t_alone(dev, 65539, 302);
    t_crossing(dev, 65536, 303);
    t_other_first(dev, 8192, 305);
    t_too_small(dev, 8192, 307);
    t_window(dev, 4096, 309);
    t_persistent(dev, 65536, 313);
    t_fresh(dev, 317);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (gpu_test.rank == 0)
        printf("%s %s: ready-to-receive (a receive posted first: push, crossing, other message first, "
               "too small, window, persistent, fresh memory; %.2f s)\n", gpu_test.failures == f0 ? "ok" : "FAILED",
               name, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
}

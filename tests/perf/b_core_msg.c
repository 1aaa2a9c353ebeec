/* The core's per-message CPU path, one process, one thread: two engines
 * connected over one transport (shm by default), rank-like roles a (sends)
 * and b (receives). Each window: b posts W receives, a posts W sends, then
 * uccl_wait_all(.., 0) polls each side in turn until all finished, then
 * every request is freed. Run under callgrind, the window loop is the
 * function core_msg_windows (--toggle-collect=core_msg_windows), so its
 * instructions divided by the message count are the cost of one message
 * (post, match, complete, free, on both sides, and the polls).
 *   b_core_msg [BYTES] [WINDOW] [MESSAGES] [TRANSPORT]
 * tests/perf/core-msg-callgrind.sh builds it against a build's libuccl. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl.h>

static void die(const char *what, uccl_status_t st)
{
    fprintf(stderr, "b_core_msg: %s: %s\n", what, uccl_strerror(st));
    exit(1);
}

typedef struct accept_arg {
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_status_t status;
} accept_arg_t;

static void *accept_main(void *p)
{
    accept_arg_t *arg = p;
    arg->status = uccl_accept(arg->engine, 10000, &arg->conn);
    return NULL;
}

/* Poll reqs[0..n) once without blocking; true when all finished. */
static bool poll_done(uccl_req_t **reqs, int n)
{
    uccl_status_t st = uccl_wait_all(reqs, (size_t)n, 0);

    if (st == UCCL_ERR_TIMEOUT)
        return false;
    if (st != UCCL_OK)
        die("wait", st);
    return true;
}

__attribute__((noinline)) void core_msg_windows(uccl_conn_t *ab, uccl_conn_t *ba, uccl_mr_t *smr,
                                                uccl_mr_t *rmr, size_t bytes, int w, long windows,
                                                uccl_req_t **sreq, uccl_req_t **rreq)
{
    uccl_status_t st;

    for (long it = 0; it < windows; it++) {
        bool sdone = false, rdone = false;

        for (int i = 0; i < w; i++)
            if ((st = uccl_recv(ba, rmr, (size_t)i * bytes, bytes, 7, &rreq[i])) != UCCL_OK)
                die("recv", st);
        for (int i = 0; i < w; i++)
            if ((st = uccl_send(ab, smr, (size_t)i * bytes, bytes, 7, &sreq[i])) != UCCL_OK)
                die("send", st);
        while (!sdone || !rdone) {
            sdone = sdone || poll_done(sreq, w);
            rdone = rdone || poll_done(rreq, w);
        }
        for (int i = 0; i < w; i++) {
            uccl_req_free(sreq[i]);
            uccl_req_free(rreq[i]);
        }
    }
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
    int w = argc > 2 ? atoi(argv[2]) : 1;
    long msgs = argc > 3 ? atol(argv[3]) : 20000;
    const char *tp = argc > 4 ? argv[4] : "shm";
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = tp};
    uccl_engine_t *a, *b;
    accept_arg_t arg = {.status = UCCL_ERR_IO};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    pthread_t thread;
    uccl_conn_t *ab;
    uccl_mr_t *smr, *rmr;
    uccl_status_t st;
    uint8_t *sbuf, *rbuf;
    uccl_req_t **sreq, **rreq;
    struct timespec t0, t1;
    long windows;

    if (w < 1 || msgs < w)
        die("arguments", UCCL_ERR_INVALID_PARAM);
    windows = msgs / w;
    if ((st = uccl_engine_create(&params, &a)) != UCCL_OK ||
        (st = uccl_engine_create(&params, &b)) != UCCL_OK)
        die("engine", st);
    arg.engine = b;
    if ((st = uccl_engine_address(b, blob, &len)) != UCCL_OK)
        die("address", st);
    pthread_create(&thread, NULL, accept_main, &arg);
    st = uccl_connect(a, blob, len, &ab);
    pthread_join(thread, NULL);
    if (st != UCCL_OK || arg.status != UCCL_OK)
        die("connect", st != UCCL_OK ? st : arg.status);
    sbuf = calloc((size_t)w, bytes ? bytes : 1);
    rbuf = calloc((size_t)w, bytes ? bytes : 1);
    sreq = calloc((size_t)w, sizeof(*sreq));
    rreq = calloc((size_t)w, sizeof(*rreq));
    for (size_t i = 0; i < (size_t)w * bytes; i++)
        sbuf[i] = (uint8_t)(i * 7 + 1);
    if ((st = uccl_mr_reg(a, sbuf, (size_t)w * bytes, 0, &smr)) != UCCL_OK ||
        (st = uccl_mr_reg(b, rbuf, (size_t)w * bytes, 0, &rmr)) != UCCL_OK)
        die("mr_reg", st);
    core_msg_windows(ab, arg.conn, smr, rmr, bytes, w, 10, sreq, rreq); /* warm up */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    core_msg_windows(ab, arg.conn, smr, rmr, bytes, w, windows, sreq, rreq);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (memcmp(sbuf, rbuf, (size_t)w * bytes) != 0)
        die("bytes differ", UCCL_ERR_TRANSPORT);
    printf("bytes %zu window %d messages %ld: %.3f us/message\n", bytes, w, windows * w,
           ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3) /
               (double)(windows * w));
    uccl_mr_dereg(smr);
    uccl_mr_dereg(rmr);
    uccl_conn_close(ab);
    uccl_conn_close(arg.conn);
    uccl_engine_destroy(a);
    uccl_engine_destroy(b);
    free(sbuf);
    free(rbuf);
    free(sreq);
    free(rreq);
    return 0;
}

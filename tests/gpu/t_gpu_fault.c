/* Failure paths of the gpu_ipc transport that only the fake GPU backend can
 * cause, GPU0 -> GPU1, two processes (the cases marked one_gpu_too again
 * with both on GPU 0, where a copy's end is told by a host word the stream
 * writes: UCCL_GPU_IPC_FLAG_DONE): an injected copy fault (at issue or
 * when the copy runs) on either side of a pulled, pushed or split message,
 * of a write with notification and of a target-side write, and malformed
 * records in the mailbox. Each case runs in its own pair of processes with
 * a timeout and checks the exact status on both sides, that a receive never
 * completes OK with wrong bytes (the message after the fault, same tag, must
 * arrive intact), and that the connection and engine tear down cleanly.
 * Without a GPU it prints "skipped: no GPU",
 * on a real GPU "skipped: fault injection needs the fake GPU backend", and
 * exits 77. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "core/core.h"
#include "gpu/gpu.h"
#include "gpu_test.h"
#include "tp/gpu_ipc/ipc.h"

#define SKIP 77
#define OFF_A GPU_TEST_OFF_A
#define SMALL (64u << 10)    /* pulled by the receiver */
#define SPLIT (2u << 20)     /* >= UCCL_GPU_IPC_PUSH_MIN: pushed, and split */
#define SIDE (OFF_A + 2 * (4u << 20))
#define CASE_TIMEOUT_S 60
#define TAG 1                /* one tag: a lost message would meet the next receive */
#define LIE_LEN (256u << 10) /* what a lying peer claims its SMALL allocation holds */


typedef enum {
    CASE_MSG,
    CASE_NOTIFY,
    CASE_TGT_WRITE,
    CASE_MAILBOX,          /* a bad record, then a send behind it */
    CASE_MAILBOX_INFLIGHT, /* a send, then a bad record right behind it */
    CASE_MAILBOX_LIE,      /* an allocation announced larger than it is, and a message reading it all */
} case_kind_t;

typedef struct fault_case {
    const char *name;
    case_kind_t kind;
    size_t len;
    const char *knob;  /* UCCL_FAKE_GPU_FAIL_COPY or _FAIL_ISSUE, or NULL */
    int fail_rank;     /* the process whose second async copy fails */
    const char *env_name, *env_value; /* set in both processes, or NULL */
    const char *env2_name, *env2_value; /* a second one, or NULL */
    uint32_t rec_len;  /* CASE_MAILBOX: the record header written */
    uint16_t rec_type;
    uccl_status_t want; /* the failed transfer's status on each side that has a request */
    bool one_gpu_too;   /* run again with both processes on GPU 0 */
} fault_case_t;

static bool one_gpu; /* this run of a case: both processes on GPU 0 */

#define COPY "UCCL_FAKE_GPU_FAIL_COPY"
#define ISSUE "UCCL_FAKE_GPU_FAIL_ISSUE"

static const fault_case_t cases[] = {
    {.name = "pulled receive: the receiver's copy fails", .kind = CASE_MSG, .len = SMALL,
     .knob = COPY, .fail_rank = 1, .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    {.name = "pulled receive: the receiver's copy is refused at issue", .kind = CASE_MSG, .len = SMALL,
     .knob = ISSUE, .fail_rank = 1, .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    /* one GPU: the sender waits on the word the receiver's GPU writes into its mailbox
     * (src/tp/gpu_ipc/done.c); the failed copy never writes it: a FIN with the error */
    {.name = "pulled receive, the sender told by the receiver's GPU (PEER_DONE, copy kernel): the "
             "receiver's copy fails", .kind = CASE_MSG, .len = SMALL, .knob = COPY, .fail_rank = 1,
     .env_name = "UCCL_GPU_IPC_PEER_DONE", .env_value = "1", .env2_name = "UCCL_GPU_IPC_PEER_DONE_MIN",
     .env2_value = "0", .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    {.name = "pulled receive, the sender told by the receiver's GPU (PEER_DONE, copy + stream write): the "
             "receiver's copy fails", .kind = CASE_MSG, .len = SMALL, .knob = COPY, .fail_rank = 1,
     .env_name = "UCCL_GPU_IPC_PEER_DONE_MIN", .env_value = "0", /* PEER_DONE is on by default */
     .env2_name = "UCCL_GPU_IPC_FLAG_KERNEL_MAX",
     .env2_value = "0", .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    {.name = "split message: the sender's push of the head fails", .kind = CASE_MSG, .len = SPLIT,
     .knob = COPY, .fail_rank = 0, .want = UCCL_ERR_TRANSPORT},
    {.name = "split message: the receiver's pull of the tail fails", .kind = CASE_MSG, .len = SPLIT,
     .knob = COPY, .fail_rank = 1, .want = UCCL_ERR_TRANSPORT},
    {.name = "split message: the sender's push is refused at issue", .kind = CASE_MSG, .len = SPLIT,
     .knob = ISSUE, .fail_rank = 0, .want = UCCL_ERR_TRANSPORT},
    {.name = "split message: the receiver's pull is refused at issue", .kind = CASE_MSG, .len = SPLIT,
     .knob = ISSUE, .fail_rank = 1, .want = UCCL_ERR_TRANSPORT},
    {.name = "pushed message (SPLIT_PCT=0): the sender's copy fails", .kind = CASE_MSG, .len = SPLIT,
     .knob = COPY, .fail_rank = 0, .env_name = "UCCL_GPU_IPC_SPLIT_PCT", .env_value = "0",
     .want = UCCL_ERR_TRANSPORT},
    {.name = "write_notify to GPU memory: the initiator's copy fails, no notification",
     .kind = CASE_NOTIFY, .len = SMALL, .knob = COPY, .fail_rank = 0, .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    {.name = "write to host memory: the target's copy fails", .kind = CASE_TGT_WRITE, .len = SMALL,
     .knob = COPY, .fail_rank = 1, .want = UCCL_ERR_TRANSPORT, .one_gpu_too = true},
    {.name = "mailbox: record longer than IPC_MSG_MAX", .kind = CASE_MAILBOX,
     .rec_len = IPC_MSG_MAX + 8, .rec_type = IPC_MSG_NOTIF, .want = UCCL_ERR_PEER_FAILED},
    {.name = "mailbox: record length beyond the ring", .kind = CASE_MAILBOX, .rec_len = 0xfffffff8u,
     .rec_type = IPC_MSG_RTS, .want = UCCL_ERR_PEER_FAILED},
    {.name = "mailbox: record of an unknown type", .kind = CASE_MAILBOX, .rec_len = 8,
     .rec_type = 0x7777, .want = UCCL_ERR_PEER_FAILED},
    {.name = "mailbox: allocation announced with a garbage IPC handle", .kind = CASE_MAILBOX,
     .rec_len = sizeof(msg_alloc_t), .rec_type = IPC_MSG_ALLOC, .want = UCCL_ERR_PEER_FAILED},
    {.name = "mailbox: allocation announced larger than it is, then a message reading all of it",
     .kind = CASE_MAILBOX_LIE, .want = UCCL_ERR_PEER_FAILED},
    {.name = "mailbox: bad record right behind a message whose pull is in flight",
     .kind = CASE_MAILBOX_INFLIGHT, .rec_len = IPC_MSG_MAX + 8, .rec_type = IPC_MSG_NOTIF,
     .want = UCCL_ERR_PEER_FAILED},
};


#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* ---------------------------------------------------------------- steps */

/* One message rank 0 -> rank 1 (device mr1 both), statuses as given; a
 * receive that succeeds holds exactly the bytes sent, a failed one none. */
static void msg_step(gpu_test_side_t *me, size_t len, unsigned seed, uccl_status_t want)
{
    uccl_req_t *req = NULL;
    size_t bytes = 77;
    uccl_status_t st;

    if (gpu_test.rank == 0)
        gpu_test_fill(me, OFF_A, len, seed);
    else
        gpu_test_zero(me, OFF_A, len);
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 0) {
        CHECK_ST(uccl_send(gpu_test.conn, me->mr1, 0, len, TAG, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), want);
    } else {
        CHECK_ST(uccl_recv(gpu_test.conn, me->mr1, 0, len, TAG, &req), UCCL_OK);
        st = gpu_test_wait_free(req, &bytes);
        CHECK(st == want, "receive %u: %s, want %s", seed, uccl_status_name(st), uccl_status_name(want));
        if (st == UCCL_OK) {
            long bad = gpu_test_check(me, OFF_A, len, seed);
            CHECK(bytes == len && bad < 0, "receive %u completed OK with %zu bytes, byte %ld wrong", seed,
                  bytes, bad);
        } else {
            CHECK(bytes == 0, "failed receive %u reports %zu bytes", seed, bytes);
        }
    }
    boot_barrier(gpu_test.eng);
}

/* Rank 1 takes notifications until one comes (want_one) or, after the
 * barrier that follows the write, finds none. */
static void notif_expect(int want_one, uint64_t value)
{
    uint64_t v = 0;
    uccl_status_t st = UCCL_ERR_NOT_FOUND;
    time_t t0 = time(NULL);

    for (int i = 0; want_one ? time(NULL) - t0 < 20 : i < 100; i++)
        if ((st = uccl_notif_poll(gpu_test.conn, &v)) != UCCL_ERR_NOT_FOUND)
            break;
    if (want_one)
        CHECK(st == UCCL_OK && v == value, "notification: %s %llu, want %llu", uccl_status_name(st),
              (unsigned long long)v, (unsigned long long)value);
    else
        CHECK(st == UCCL_ERR_NOT_FOUND, "a failed write delivered notification %llu (%s)",
              (unsigned long long)v, uccl_status_name(st));
}

/* Rank 0 writes len bytes of its device mr1 into rank 1's dst mr1 (device:
 * rank 0 copies under a grant; host: rank 1 copies), with a notification
 * when notify; the data and notification arrive only when it succeeded. */
static void write_step(gpu_test_side_t *src, gpu_test_side_t *dst, size_t len, unsigned seed, int notify,
                       uccl_status_t want)
{
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;

    if (gpu_test.rank == 0)
        gpu_test_fill(src, OFF_A, len, seed);
    else
        gpu_test_zero(dst, OFF_A, len);
    gpu_test_share_rdesc(dst, 0, len, &rd);
    if (gpu_test.rank == 0) {
        if (notify)
            CHECK_ST(uccl_write_notify(gpu_test.conn, src->mr1, 0, len, &rd, 0, seed, &req), UCCL_OK);
        else
            CHECK_ST(uccl_write(gpu_test.conn, src->mr1, 0, len, &rd, 0, &req), UCCL_OK);
        CHECK_ST(gpu_test_wait_free(req, NULL), want);
    }
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 1 && notify)
        notif_expect(want == UCCL_OK, seed);
    if (gpu_test.rank == 1 && want == UCCL_OK) {
        long bad = gpu_test_check(dst, OFF_A, len, seed);
        CHECK(bad < 0, "write %u: byte %ld wrong", seed, bad);
    }
    boot_barrier(gpu_test.eng);
}

/* ---------------------------------------------------------------- mailbox */

/* Put a record at the head of the ring rank 0 sends on to rank 1, as
 * ring.h lays records out: a header saying len_field bytes of payload, then
 * plen bytes of it (zeros when payload is NULL); the producer's view of the
 * ring moves past it, as its own push would. */
static void mailbox_put(uint32_t len_field, uint16_t type, const void *payload, size_t plen)
{
    uccl_conn_t *conn = gpu_test.conn;
    uccl_engine_t *eng = gpu_test.eng;
    size_t pos, advance = 8 + ((plen + 7u) & ~(size_t)7u);
    uccl_spsc_hdr_t hdr = {type, len_field + 8};
    ipc_ring_shm_t *s;
    ipc_ring_t *tx;
    uint64_t head;

    uccl_engine_lock(eng);
    CHECK(conn->dev_tp >= 0 && strcmp(eng->tp[conn->dev_tp]->ops->name, "gpu_ipc") == 0,
          "GPU memory does not travel on gpu_ipc");
    tx = &((ipc_ep_t *)conn->ep[conn->dev_tp])->tx;
    s = tx->shm;
    head = atomic_load(&s->ctl.head);
    pos = head % IPC_RING_BYTES;
    CHECK(pos + advance <= IPC_RING_BYTES, "no room to corrupt the ring without wrapping");
    memset(s->data + pos, 0, advance);
    memcpy(s->data + pos, &hdr, sizeof(hdr));
    if (payload != NULL)
        memcpy(s->data + pos + 8, payload, plen);
    tx->view.pos = head + advance;
    atomic_store_explicit(&s->ctl.head, head + advance, memory_order_release);
    uccl_engine_unlock(eng);
}

/* A real allocation of SMALL bytes announced as LIE_LEN, then a message
 * (next message number) that reads all LIE_LEN bytes of it. */
static void *mailbox_lie(void)
{
    struct {
        msg_rts_t rts;
        msg_seg_t seg;
    } m;
    msg_alloc_t a = {.key = 0xfa6e0000u, .size = LIE_LEN};
    void *small = NULL;

    CHECK_ST(uccl_gpu_malloc(&small, SMALL), UCCL_OK);
    CHECK_ST(uccl_gpu_ipc_get(small, &a.handle), UCCL_OK);
    mailbox_put(sizeof(a), IPC_MSG_ALLOC, &a, sizeof(a));
    memset(&m, 0, sizeof(m));
    m.rts = (msg_rts_t){.seq = 1u << 30, .tag = TAG, .len = LIE_LEN, .nseg = 1,
                        .msg_seq = gpu_test.conn->tx_msg_seq++};
    m.seg = (msg_seg_t){.key = a.key, .off = 0, .len = LIE_LEN};
    mailbox_put(sizeof(m), IPC_MSG_RTS, &m, sizeof(m));
    return small;
}

/* The failed request's status. */
static void status_expect(uccl_status_t st, const fault_case_t *c)
{
    CHECK(st == c->want, "failed request: %s, want %s", uccl_status_name(st), uccl_status_name(c->want));
}

/* A good message, then rank 1 waits in a receive while rank 0 corrupts the
 * mailbox and sends behind the bad record (in flight: sends first, and
 * rank 1 reads both only after, so its pull has started when it fails the
 * connection): both fail with PEER_FAILED, the connection says so, and it
 * takes no new work. */
static void mailbox_case(gpu_test_side_t *dev, const fault_case_t *c)
{
    int inflight = c->kind == CASE_MAILBOX_INFLIGHT;
    uccl_req_t *req = NULL, *late = NULL;
    uccl_conn_attr_t attr;
    void *lie = NULL;

    msg_step(dev, SMALL, 11, UCCL_OK);
    if (gpu_test.rank == 1)
        CHECK_ST(uccl_recv(gpu_test.conn, dev->mr1, 0, LIE_LEN, TAG, &req), UCCL_OK);
    boot_barrier(gpu_test.eng);
    if (gpu_test.rank == 0) {
        if (inflight)
            CHECK_ST(uccl_send(gpu_test.conn, dev->mr1, 0, SMALL, TAG, &req), UCCL_OK);
        if (c->kind == CASE_MAILBOX_LIE)
            lie = mailbox_lie();
        else
            mailbox_put(c->rec_len, c->rec_type, NULL, c->rec_len < IPC_RING_BYTES / 2 ? c->rec_len : 0);
        if (!inflight)
            CHECK_ST(uccl_send(gpu_test.conn, dev->mr1, 0, SMALL, TAG, &req), UCCL_OK);
    }
    boot_barrier(NULL); /* no progress here: rank 1 sees both records at once */
    status_expect(gpu_test_wait_free(req, NULL), c);
    if (lie != NULL)
        CHECK_ST(uccl_gpu_free(lie), UCCL_OK);
    CHECK_ST(uccl_conn_query(gpu_test.conn, &attr), UCCL_OK);
    CHECK(attr.state == UCCL_ERR_PEER_FAILED, "connection state %s", uccl_status_name(attr.state));
    CHECK_ST(uccl_send(gpu_test.conn, dev->mr1, 0, SMALL, TAG, &late), UCCL_ERR_PEER_FAILED);
    CHECK(late == NULL, "a send posted on a failed connection returned a request");
}

/* ---------------------------------------------------------------- one case */

static void run_case(const fault_case_t *c, gpu_test_side_t *dev, gpu_test_side_t *host)
{
    switch (c->kind) {
    case CASE_MSG: /* the second copy of fail_rank is the second message's */
        msg_step(dev, c->len, 21, UCCL_OK);
        msg_step(dev, c->len, 22, c->want);
        msg_step(dev, c->len, 23, UCCL_OK);
        break;
    case CASE_NOTIFY:
        write_step(dev, dev, c->len, 31, 1, UCCL_OK);
        write_step(dev, dev, c->len, 32, 1, c->want);
        write_step(dev, dev, c->len, 33, 1, UCCL_OK);
        break;
    case CASE_TGT_WRITE:
        write_step(dev, host, c->len, 41, 0, UCCL_OK);
        write_step(dev, host, c->len, 42, 0, c->want);
        write_step(dev, host, c->len, 43, 0, UCCL_OK);
        break;
    case CASE_MAILBOX:
    case CASE_MAILBOX_INFLIGHT:
    case CASE_MAILBOX_LIE:
        mailbox_case(dev, c);
        break;
    }
}

/* One case in this process and its forked peer: rank r on GPU r (one_gpu:
 * both on GPU 0). */
static int case_main(const fault_case_t *c)
{
    const gpu_test_mode_t mode = {.need_caps = UCCL_CAP_GPU_IPC, .caps_name = "gpu_ipc"};
    gpu_test_side_t dev, host;
    char nth[] = "2";

    gpu_test.rank = boot_init(NULL, NULL);
    if (gpu_test.rank < 0) {
        perror("bootstrap");
        return 1;
    }
    if (c->env_name != NULL)
        setenv(c->env_name, c->env_value, 1);
    if (c->env2_name != NULL)
        setenv(c->env2_name, c->env2_value, 1);
    if (c->knob != NULL && c->fail_rank == gpu_test.rank)
        setenv(c->knob, nth, 1); /* read at this process's first async copy */
    if (gpu_test_connect(one_gpu ? 0 : gpu_test.rank, &mode) != 0 || gpu_test_side_init(&dev, SIDE, 1) != 0 ||
        gpu_test_side_init(&host, SIDE, 0) != 0) {
        CHECK(0, "engine, connection or memory setup failed");
        return boot_finish(1);
    }
    run_case(c, &dev, &host);
    gpu_test_teardown(&dev, &host);
    return boot_finish(gpu_test.failures ? 1 : 0);
}

/* ---------------------------------------------------------------- runner */

/* Run a case in a process group of its own; its exit code, -1 on timeout. */
static int run_isolated(const fault_case_t *c)
{
    time_t t0 = time(NULL);
    pid_t pid;
    int st;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        exit(case_main(c)); /* exit, not _exit: the leak checker runs */
    }
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (time(NULL) - t0 > CASE_TIMEOUT_S) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            printf("timed out after %d s\n", CASE_TIMEOUT_S);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
    int n = 0, failed = 0, ran = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        printf("skipped: no GPU\n");
        return SKIP;
    }
    if (strcmp(uccl_gpu_backend(), "fake") != 0 || n < 2) {
        printf("skipped: fault injection needs the fake GPU backend (configure --without-cuda "
               "--without-rocm --enable-fake-gpu); this build has \"%s\"\n", uccl_gpu_backend());
        return SKIP;
    }
    printf("fake GPU backend: transport logic only, no real GPU (injected faults)\n");
    for (int i = 0, k = 0; i < 2 * NCASES; i++) {
        const fault_case_t *c = &cases[i % NCASES];
        const char *where = i < NCASES ? "" : " (one GPU)";
        int rc;

        one_gpu = i >= NCASES;
        if (one_gpu && !c->one_gpu_too)
            continue;
        k++;
        printf("--- %s%s\n", c->name, where);
        rc = run_isolated(c);
        printf("%s %d - %s%s", rc == 0 ? "ok" : "FAIL", k, c->name, where);
        printf(rc == 0 || rc == -1 ? "\n" : " (exit %d)\n", rc);
        failed += rc != 0;
        ran++;
    }
    printf("t_gpu_fault: %d passed, %d failed\n", ran - failed, failed);
    return failed ? 1 : 0;
}

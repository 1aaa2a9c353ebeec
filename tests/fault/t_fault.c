/* Fault suite (issue 20), mpirun -np 2, over the transport UCCL_TRANSPORTS
 * names. For each operation (send/recv, write, read, writev, allgather) and
 * each fault (kill -9, SIGSTOP), a victim process (a child rank 1 forks, so
 * that mpirun sees no rank die) connects to rank 0 and keeps the operation
 * going; mid-transfer rank 1 delivers the signal. Rank 0 must see
 * UCCL_ERR_PEER_FAILED or UCCL_ERR_TIMEOUT within UCCL_TIMEOUT_MS (plus
 * slack), close the connection cleanly, and its connection to rank 1 must
 * keep working. A stopped victim is resumed after rank 0 gave up on it and
 * must find its connection failed (PEER_FAILED), cleanly, and exit 0.
 * Over verbs a stopped peer's NIC still serves writes and reads (no CPU is
 * needed): those must keep completing for 2 x UCCL_TIMEOUT_MS.
 * Leaks: after each case rank 0's open fds must be back to their count
 * before it, and over FAULT_CYCLES (default 12) more kill -9 send/recv
 * cases its heap (mallinfo2, or ASan's allocator count) must not grow
 * from the second cycle's end to the last's by more than FAULT_HEAP_SLACK
 * bytes (default 16 KiB; a connection's state is far more). FAULT_OPS (op
 * names, comma-separated) and FAULT_SIGS (kill or stop) run some cases only. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../mpi/mpi_test.h"
#include "fault_conn.h"
#include "fault_res.h"

#define MSG (8u << 20)
#define SLACK_MS 2500 /* signal delivery, scheduling on a loaded 2-core box */
enum { OP_SEND, OP_WRITE, OP_READ, OP_WRITEV, OP_ALLGATHER, NOPS };
enum { TAG_DESC = 11, TAG_DATA = 12 };
static const char *const op_names[NOPS] = {"send/recv", "write", "read", "writev", "allgather"};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Both ends of one scenario. */
typedef struct side {
    uccl_engine_t *e;
    uccl_conn_t *conn;
    uccl_comm_t *comm; /* allgather: a 2-rank comm over conn */
    uint8_t *buf;      /* 2 * MSG */
    uccl_mr_t *mr;
    uccl_rdesc_t peer_desc; /* rank 0: the victim's buffer */
} side_t;

/* ---- the victim (a child of rank 1; no MPI here) */

static void victim(const uint8_t *addr, size_t len, int op, int ready_fd)
{
    uint64_t start = now_ms();
    uccl_rdesc_t desc;
    side_t s = {0};
    int rc = 0;

    s.buf = calloc(1, 2 * MSG);
    if (s.buf == NULL || uccl_engine_create(NULL, &s.e) != UCCL_OK ||
        uccl_connect(s.e, addr, len, &s.conn) != UCCL_OK ||
        uccl_mr_reg(s.e, s.buf, 2 * MSG, 0, &s.mr) != UCCL_OK)
        _exit(2);
    if (op == OP_WRITE || op == OP_READ || op == OP_WRITEV) {
        if (uccl_mr_pack(s.mr, 0, 2 * MSG, &desc) != UCCL_OK ||
            fault_small(s.e, s.conn, true, &desc, sizeof(desc), TAG_DESC) != UCCL_OK)
            _exit(2);
    }
    if (op == OP_ALLGATHER && fault_comm(s.e, s.conn, 1, &s.comm) != UCCL_OK)
        _exit(2);
    if (write(ready_fd, "r", 1) != 1)
        _exit(2);
    /* keep at it until the connection fails; a stopped and resumed victim
     * must find it failed by rank 0's close */
    while (now_ms() - start < 90000) {
        uccl_status_t st;
        uccl_req_t *req = NULL;
        uccl_conn_attr_t attr;

        switch (op) {
        case OP_SEND:
            st = uccl_send(s.conn, s.mr, 0, MSG, TAG_DATA, &req);
            if (st == UCCL_OK) {
                st = uccl_wait(req, -1);
                uccl_req_free(req);
            }
            break;
        case OP_ALLGATHER:
            st = uccl_allgather(s.comm, s.buf, s.buf + MSG / 2, MSG / 2);
            break;
        default: /* one-sided: rank 0 does the work, we progress */
            uccl_engine_progress(s.e);
            st = uccl_conn_query(s.conn, &attr) == UCCL_OK ? attr.state : UCCL_ERR_INVALID_HANDLE;
            break;
        }
        if (st == UCCL_ERR_PEER_FAILED)
            _exit(0);
        if (st != UCCL_OK && st != UCCL_ERR_TIMEOUT) {
            fprintf(stderr, "victim: %s ended with %s\n", op_names[op], uccl_status_name(st));
            rc = 4;
            break;
        }
    }
    _exit(rc ? rc : 3);
}

/* ---- rank 1: fork the victim, deliver the fault, judge the victim's end */

static void rank1(mt_ctx_t *c, int op, int sig, int timeout_ms)
{
    uint8_t addr[UCCL_ADDRESS_MAX];
    int len = 0, go = 0, done = 0, status = 0, fds[2];
    bool reaped = false;
    MPI_Status mst;
    char r;
    pid_t pid;
    uint64_t t0;

    MPI_Recv(addr, sizeof(addr), MPI_BYTE, 0, 0, MPI_COMM_WORLD, &mst);
    MPI_Get_count(&mst, MPI_BYTE, &len);
    if (pipe(fds) != 0) {
        mt_fail(c, "pipe");
        return;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        victim(addr, (size_t)len, op, fds[1]);
    }
    close(fds[1]);
    if (pid < 0 || read(fds[0], &r, 1) != 1)
        mt_fail(c, "the victim did not get ready");
    close(fds[0]);
    MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    usleep(20 * 1000); /* the transfer is under way */
    /* a killed victim is reaped at once, as a launcher reaps a dead rank: a
     * zombie still answers kill(pid, 0), so the survivor's shm close fence
     * would wait its whole UCCL_TIMEOUT_MS for a copy that cannot go on
     * (1.5 s a case; the SIGSTOP cases keep that wait, where it is right) */
    if (pid > 0 && kill(pid, sig) == 0 && sig == SIGKILL && waitpid(pid, &status, 0) == pid)
        reaped = true;
    MPI_Recv(&done, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (pid <= 0)
        return;
    if (sig == SIGSTOP)
        kill(pid, SIGCONT);
    t0 = now_ms();
    while (!reaped && waitpid(pid, &status, WNOHANG) == 0) {
        if (now_ms() - t0 > (uint64_t)(3 * timeout_ms + SLACK_MS)) {
            mt_fail(c, "%s: the resumed victim did not end within %d ms", op_names[op],
                    3 * timeout_ms + SLACK_MS);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return;
        }
        usleep(10 * 1000);
    }
    if (sig == SIGKILL && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        mt_fail(c, "%s: the victim ended with %#x before its kill -9", op_names[op], status);
    if (sig == SIGSTOP && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        mt_fail(c, "%s: the resumed victim did not find its connection failed cleanly "
                   "(status %#x)", op_names[op], status);
}

/* ---- rank 0: keep the operation going until the fault shows */

static uccl_status_t one_op(side_t *s, int op)
{
    uccl_iov_t iov[4];
    uccl_req_t *req = NULL;
    uccl_status_t st;

    switch (op) {
    case OP_SEND: st = uccl_recv(s->conn, s->mr, 0, MSG, TAG_DATA, &req); break;
    case OP_WRITE: st = uccl_write(s->conn, s->mr, 0, MSG, &s->peer_desc, 0, &req); break;
    case OP_READ: st = uccl_read(s->conn, s->mr, 0, MSG, &s->peer_desc, MSG, &req); break;
    case OP_WRITEV:
        for (int i = 0; i < 4; i++)
            iov[i] = (uccl_iov_t){s->mr, (size_t)i * (MSG / 2), MSG / 4};
        st = uccl_writev(s->conn, iov, 4, &s->peer_desc, 0, &req);
        break;
    default: return uccl_allgather(s->comm, s->buf, s->buf + MSG, MSG / 2);
    }
    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req); /* a timed-out one is detached; close cancels it */
    return st;
}

static void rank0(mt_ctx_t *c, int op, int sig, int timeout_ms)
{
    const char *tps = getenv("UCCL_TRANSPORTS");
    bool verbs = tps != NULL && strcmp(tps, "verbs") == 0;
    bool one_sided = op == OP_WRITE || op == OP_READ || op == OP_WRITEV;
    /* verbs: the NIC (the kernel, on Soft-RoCE) serves one-sided operations
     * without the target's CPU, so they go on into a stopped peer: checked
     * for 2 x UCCL_TIMEOUT_MS, then the survivor closes */
    bool nic_serves = verbs && sig == SIGSTOP && one_sided;
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t len = sizeof(addr);
    int fds0 = unit_fd_count(), fds = -1;
    side_t s = {.e = c->engine};
    uccl_status_t st = UCCL_OK;
    uint64_t t_go = 0, elapsed;
    int n_ok = 0, go = 1, done = 1;

    s.buf = calloc(1, 2 * MSG);
    mt_expect(c, uccl_engine_address(c->engine, addr, &len), UCCL_OK, "uccl_engine_address");
    MPI_Send(addr, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    /* the victim's start (fork, engine, connect) is not what is timed: under
     * ASan on a loaded 2-core host it once took longer than UCCL_TIMEOUT_MS
     * (1.5 s), and the accept gave up before any fault */
    mt_expect(c, uccl_accept(c->engine, 10 * timeout_ms, &s.conn), UCCL_OK, "accepting the victim");
    mt_expect(c, uccl_mr_reg(c->engine, s.buf, 2 * MSG, 0, &s.mr), UCCL_OK, "uccl_mr_reg");
    if (s.conn != NULL && (op == OP_WRITE || op == OP_READ || op == OP_WRITEV))
        mt_expect(c, fault_small(s.e, s.conn, false, &s.peer_desc, sizeof(s.peer_desc), TAG_DESC),
                  UCCL_OK, "the victim's descriptor");
    if (s.conn != NULL && op == OP_ALLGATHER)
        mt_expect(c, fault_comm(s.e, s.conn, 0, &s.comm), UCCL_OK, "a comm with the victim");
    while (s.conn != NULL && !c->failed && n_ok < 100000) {
        st = one_op(&s, op);
        if (st != UCCL_OK)
            break;
        if (n_ok++ == 0) {
            MPI_Send(&go, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
            t_go = now_ms();
        }
        if (nic_serves && now_ms() - t_go > (uint64_t)(2 * timeout_ms))
            break;
    }
    if (n_ok == 0) { /* never got going: still let rank 1 go on */
        mt_fail(c, "%s: no operation completed before the fault (%s)", op_names[op],
                uccl_status_name(st));
        MPI_Send(&go, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        t_go = now_ms();
    }
    elapsed = now_ms() - t_go;
    /* verbs: a killed process's regions may go (the kernel tears its verbs
     * context down) before its QPs do; an RDMA write or read that meets one
     * (allgather writes too) is refused by the peer's NIC: REMOTE_ACCESS,
     * and the connection ends */
    if (st == UCCL_ERR_REMOTE_ACCESS && sig == SIGKILL && verbs && op != OP_SEND) {
        printf("# %s, kill -9: REMOTE_ACCESS (verbs: the dead peer's key went first)\n",
               op_names[op]);
        st = UCCL_ERR_PEER_FAILED;
    }
    if (nic_serves) {
        if (st != UCCL_OK)
            mt_fail(c, "%s into a stopped verbs peer: ended with %s; its NIC serves one-sided "
                       "operations, they must keep completing", op_names[op], uccl_status_name(st));
        printf("# %s, SIGSTOP: %d operations completed in %llu ms into the stopped peer (verbs: "
               "its NIC serves them, no CPU needed), none failed\n", op_names[op], n_ok,
               (unsigned long long)elapsed);
    } else {
        if (st != UCCL_ERR_PEER_FAILED && st != UCCL_ERR_TIMEOUT)
            mt_fail(c, "%s after %s: ended with %s, not PEER_FAILED or TIMEOUT", op_names[op],
                    sig == SIGKILL ? "kill -9" : "SIGSTOP", uccl_status_name(st));
        if (elapsed > (uint64_t)(timeout_ms + SLACK_MS))
            mt_fail(c, "%s after %s: the error took %llu ms, UCCL_TIMEOUT_MS is %d", op_names[op],
                    sig == SIGKILL ? "kill -9" : "SIGSTOP", (unsigned long long)elapsed,
                    timeout_ms);
        printf("# %s, %s: %s after %llu ms (%d operations before)\n", op_names[op],
               sig == SIGKILL ? "kill -9" : "SIGSTOP", uccl_status_name(st),
               (unsigned long long)elapsed, n_ok);
    }
    /* clean teardown: the comm closes its connection, else we do */
    if (s.comm != NULL)
        mt_expect(c, uccl_comm_destroy(s.comm), UCCL_OK, "uccl_comm_destroy");
    else if (s.conn != NULL)
        mt_expect(c, uccl_conn_close(s.conn), UCCL_OK, "uccl_conn_close");
    if (s.mr != NULL)
        mt_expect(c, uccl_mr_dereg(s.mr), UCCL_OK, "uccl_mr_dereg (nothing left in flight)");
    free(s.buf);
    /* what the connection held is given back: its fds (sockets, shm
     * segments, event fds) close with it (allowing 2 s of progress) */
    for (uint64_t t0 = now_ms(); (fds = unit_fd_count()) != fds0 && now_ms() - t0 < 2000;) {
        uccl_engine_progress(c->engine);
        usleep(10 * 1000);
    }
    if (fds != fds0)
        mt_fail(c, "%s after %s: %d fds open after the close, %d before the case", op_names[op],
                sig == SIGKILL ? "kill -9" : "SIGSTOP", fds, fds0);
    MPI_Send(&done, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
}

/* The kill -9 send/recv case again and again: rank 0's heap must stay flat
 * (its fds are checked in each case). */
static int cycles(mt_ctx_t *c, int timeout_ms)
{
    const char *env = getenv("FAULT_CYCLES"), *slack_env = getenv("FAULT_HEAP_SLACK");
    int n = env != NULL ? atoi(env) : 12;
    long long slack = slack_env != NULL ? atoll(slack_env) : 16 * 1024, growth;
    size_t base = 0, heap;
    char name[128];

    for (int k = 0; k < n; k++) {
        if (c->rank == 0)
            rank0(c, OP_SEND, SIGKILL, timeout_ms);
        else
            rank1(c, OP_SEND, SIGKILL, timeout_ms);
        mt_uccl_barrier(c);
        if (k == 1)
            base = fault_heap_bytes();
    }
    heap = fault_heap_bytes();
    growth = (long long)heap - (long long)base;
    if (c->rank == 0) {
        printf("# %d kill -9 send/recv cycles: heap %zu bytes after the second, %zu after the last "
               "(%+lld)\n", n, base, heap, growth);
        if (n >= 3 && growth > slack)
            mt_fail(c, "the heap grew by %lld bytes over %d fault cycles (allowed: %lld)", growth,
                    n - 2, slack);
    }
    snprintf(name, sizeof(name), "%d kill -9 cycles: fds back after each, heap flat", n);
    return mt_report(c, name);
}

/* Is name one of the comma-separated names of list? */
static bool fault_listed(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *env = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = env ? atoi(env) : 60000;
    const int sigs[2] = {SIGKILL, SIGSTOP};
    int rc, failures = 0;
    mt_ctx_t c;

    signal(SIGPIPE, SIG_IGN);
    MPI_Init(&argc, &argv);
    rc = mt_init(&c, 4096);
    if (rc == 0 && c.size != 2) {
        if (c.rank == 0)
            fprintf(stderr, "t_fault needs -np 2\n");
        rc = 1;
    }
    for (int op = 0; rc == 0 && op < NOPS; op++) {
        const char *only = getenv("FAULT_OPS"); /* e.g. "write,read": those cases only */

        if (only != NULL && !fault_listed(only, op_names[op]))
            continue;
        for (int k = 0; k < 2; k++) {
            const char *sig_only = getenv("FAULT_SIGS"); /* "kill" or "stop": those only */
            char name[96];

            if (sig_only != NULL && strcmp(sig_only, k == 0 ? "kill" : "stop") != 0)
                continue;
            if (c.rank == 0)
                rank0(&c, op, sigs[k], timeout_ms);
            else
                rank1(&c, op, sigs[k], timeout_ms);
            mt_uccl_barrier(&c); /* the other connection still works */
            snprintf(name, sizeof(name), "%s, victim %s: survivor errs in time, other conn intact",
                     op_names[op], sigs[k] == SIGKILL ? "killed (-9)" : "stopped, resumed");
            failures += mt_report(&c, name);
        }
    }
    failures += rc == 0 ? cycles(&c, timeout_ms) : 0;
    mt_fini(&c);
    MPI_Finalize();
    return rc != 0 ? rc : failures != 0;
}

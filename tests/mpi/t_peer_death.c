/* MPI test (-np 2): a peer process dies while rank 0 waits on a receive from
 * it; the wait must end with UCCL_ERR_PEER_FAILED (not a hang, not a
 * timeout), later posts on that conn must fail, and rank 0's other
 * connection to rank 1 must keep working. The dying peer is a child that
 * rank 1 forks, so mpirun sees no rank die. Set UCCL_TIMEOUT_MS small. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mpi_test.h"

enum { TAG_NEVER = 5, TAG_PING = 6 };

/* The child: own engine, connect to rank 0, then die without a goodbye. */
static void child_connect_and_die(const uint8_t *addr, size_t len)
{
    uccl_engine_t *engine;
    uccl_conn_t *conn;

    if (uccl_engine_create(NULL, &engine) != UCCL_OK ||
        uccl_connect(engine, addr, len, &conn) != UCCL_OK)
        _exit(3);
    usleep(300 * 1000); /* let rank 0 post its receive first */
    _exit(0);
}

static void rank1(mt_ctx_t *c)
{
    uint8_t addr[UCCL_ADDRESS_MAX];
    int len = 0, status = 0;
    MPI_Status mst;
    pid_t pid;

    MPI_Recv(addr, sizeof(addr), MPI_BYTE, 0, 0, MPI_COMM_WORLD, &mst);
    MPI_Get_count(&mst, MPI_BYTE, &len);
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        child_connect_and_die(addr, (size_t)len);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        mt_fail(c, "the child did not connect and exit cleanly (status %#x)", status);
    /* The comm conn must still work: echo one message. */
    uccl_req_t *req = NULL;
    mt_expect(c, uccl_recv(uccl_comm_conn(c->comm, 0), c->dst_mr[0], 0, 64, TAG_PING, &req),
              UCCL_OK, "uccl_recv on the surviving conn");
    mt_wait(c, &req, 1, UCCL_OK, "receive on the surviving conn");
}

static void rank0(mt_ctx_t *c, int timeout_ms)
{
    uint8_t addr[UCCL_ADDRESS_MAX];
    size_t len = sizeof(addr);
    uccl_conn_t *dead = NULL;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    time_t t0;

    mt_expect(c, uccl_engine_address(c->engine, addr, &len), UCCL_OK, "uccl_engine_address");
    MPI_Send(addr, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    mt_expect(c, uccl_accept(c->engine, -1, &dead), UCCL_OK, "accepting the child");
    if (dead == NULL)
        return;
    mt_expect(c, uccl_recv(dead, c->dst_mr[1], 0, 64, TAG_NEVER, &req), UCCL_OK, "uccl_recv");
    t0 = time(NULL);
    st = req ? uccl_wait(req, 2 * timeout_ms) : UCCL_ERR_INVALID_HANDLE;
    mt_expect(c, st, UCCL_ERR_PEER_FAILED, "receive from a peer that died");
    if (st == UCCL_ERR_PEER_FAILED && time(NULL) - t0 > timeout_ms / 1000 + 2)
        mt_fail(c, "peer failure took %lds to show, UCCL_TIMEOUT_MS is %d",
                (long)(time(NULL) - t0), timeout_ms);
    if (req != NULL)
        uccl_req_free(req);
    req = NULL;
    st = uccl_send(dead, c->src_mr[1], 0, 8, TAG_NEVER, &req);
    if (st == UCCL_OK) {
        st = uccl_wait(req, -1);
        uccl_req_free(req);
    }
    mt_expect(c, st, UCCL_ERR_PEER_FAILED, "send on the dead conn");
    uccl_conn_close(dead);
    req = NULL;
    mt_expect(c, uccl_send(uccl_comm_conn(c->comm, 1), c->src_mr[1], 0, 64, TAG_PING, &req),
              UCCL_OK, "uccl_send on the surviving conn");
    mt_wait(c, &req, 1, UCCL_OK, "send on the surviving conn");
}

int main(int argc, char **argv)
{
    const char *env = getenv("UCCL_TIMEOUT_MS");
    int timeout_ms = env ? atoi(env) : 60000;
    mt_ctx_t c;
    int rc, failures = 0;

    MPI_Init(&argc, &argv);
    rc = mt_init(&c, 4096);
    if (rc == 0 && c.size != 2) {
        if (c.rank == 0)
            fprintf(stderr, "t_peer_death needs -np 2\n");
        rc = 1;
    }
    if (rc == 0) {
        if (c.rank == 0)
            rank0(&c, timeout_ms > 0 ? timeout_ms : 60000);
        else
            rank1(&c);
        failures = mt_report(&c, "peer death: PEER_FAILED within the timeout, other conn intact");
    }
    mt_fini(&c);
    MPI_Finalize();
    return rc != 0 ? rc : failures != 0;
}

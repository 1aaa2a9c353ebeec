/* Two-process harness of the verbs tests (test_tp_verbs, test_verbs_gpu) and
 * of test_ofi_gpu (the same GPU cases over libfabric, pair_transports "ofi"):
 * the parent (rank 0) and a forked child (rank 1) each open a verbs engine,
 * on $RXE_DEV and $RXE_DEV2 in the Soft-RoCE VM so traffic crosses the veth
 * pair, exchange addresses over a socketpair and connect. Checks in the
 * child count failures into its exit status; the parent uses CUnit. */
#ifndef UCCL_TESTS_UNIT_VERBS_PAIR_H
#define UCCL_TESTS_UNIT_VERBS_PAIR_H

#include <CUnit/Basic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uccl/uccl.h>

typedef struct peer {
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    int sock; /* socketpair to the other process: blobs, descriptors, sync */
    int rank;
} peer_t;

static int child_failures;
/* GPU the engines of run_pair use (UCCL_ENGINE_PARAM_GPU_INDEX); -1 = none. */
static int pair_gpu_index = -1;
/* The engines' UCCL_TRANSPORTS (test_ofi_gpu: "ofi"). */
static const char *pair_transports = "verbs";

#define CHECK(p, cond)                                                                    \
    do {                                                                                  \
        if ((p)->rank == 0) {                                                             \
            CU_ASSERT(cond);                                                              \
        } else if (!(cond)) {                                                             \
            fprintf(stderr, "child: check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            child_failures++;                                                             \
        }                                                                                 \
    } while (0)

static void sock_xfer(int fd, void *buf, size_t len, bool out)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = out ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
        if (n <= 0)
            _exit(3);
        done += (size_t)n;
    }
}

static void sync_peers(peer_t *p)
{
    char c = 's';
    sock_xfer(p->sock, &c, 1, true);
    sock_xfer(p->sock, &c, 1, false);
}

/* An engine of pair_transports only, for rank's device ($RXE_DEV / $RXE_DEV2 when set). */
static uccl_status_t pair_engine_create(int rank, uccl_engine_t **engine)
{
    const char *dev = getenv(rank == 0 ? "RXE_DEV" : "RXE_DEV2");
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = pair_transports};

    if (dev != NULL) {
        params.field_mask |= UCCL_ENGINE_PARAM_NET_DEVICES;
        params.net_devices = dev;
    }
    if (pair_gpu_index >= 0) {
        params.field_mask |= UCCL_ENGINE_PARAM_GPU_INDEX;
        params.gpu_index = pair_gpu_index;
    }
    return uccl_engine_create(&params, engine);
}

static uccl_status_t peer_setup(peer_t *p)
{
    uint8_t blob[UCCL_ADDRESS_MAX], peer_blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob), peer_len;
    uccl_status_t st = pair_engine_create(p->rank, &p->engine);

    if (st != UCCL_OK)
        return st;
    if ((st = uccl_engine_address(p->engine, blob, &len)) != UCCL_OK)
        return st;
    sock_xfer(p->sock, &len, sizeof(len), true);
    sock_xfer(p->sock, blob, len, true);
    sock_xfer(p->sock, &peer_len, sizeof(peer_len), false);
    if (peer_len > sizeof(peer_blob))
        return UCCL_ERR_BAD_ADDRESS;
    sock_xfer(p->sock, peer_blob, peer_len, false);
    if (p->rank == 0)
        return uccl_connect(p->engine, peer_blob, peer_len, &p->conn);
    return uccl_accept(p->engine, -1, &p->conn);
}

/* Run fn in this process (rank 0) and in a forked child (rank 1). */
static void run_pair(void (*fn)(peer_t *p))
{
    int sv[2], status = 0;
    peer_t p = {0};
    pid_t pid;

    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fflush(NULL);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    p.rank = pid == 0;
    p.sock = sv[p.rank];
    close(sv[1 - p.rank]);
    alarm(120);
    if (peer_setup(&p) == UCCL_OK)
        fn(&p);
    else
        CHECK(&p, !"setup failed");
    sync_peers(&p);
    uccl_engine_destroy(p.engine);
    close(p.sock);
    if (pid == 0)
        _exit(child_failures ? 1 : 0);
    alarm(0);
    waitpid(pid, &status, 0);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Wait for and free the request a post filled in; reqp is read only after
 * the post (st is its status) has run. */
static uccl_status_t xfer_wait(uccl_status_t st, uccl_req_t **reqp, size_t *bytes)
{
    uccl_req_t *req;

    if (st != UCCL_OK)
        return st;
    req = *reqp;
    st = uccl_wait(req, -1);
    if (bytes != NULL)
        uccl_req_bytes(req, bytes);
    uccl_req_free(req);
    return st;
}

/* Can an engine of rank 0 open a device of pair_transports here? */
static bool pair_device_present(void)
{
    uccl_engine_t *engine;

    if (pair_engine_create(0, &engine) != UCCL_OK)
        return false;
    uccl_engine_destroy(engine);
    return true;
}

#endif

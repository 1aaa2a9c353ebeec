/* GPU staging (src/tp/staging.c) over tcp when a copy into GPU memory
 * fails as it runs (the fake GPU backend's UCCL_FAKE_GPU_FAIL_COPY): the
 * fault shows on the first event recorded after the copy, often a pool
 * buffer's (a full sink buffer), not the completion's. The transfer must
 * then fail with UCCL_ERR_TRANSPORT, never complete UCCL_OK with bytes
 * missing: a send into GPU memory, a write to a GPU region of the peer (not
 * REMOTE_ACCESS either: that says no byte landed), a read into GPU memory.
 * Two engines in one child process per case (the fault counts the
 * process's copies), GPU 0 and 1 of the fake backend. Exits 77 on any
 * other backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "gpu/gpu.h"
#include "unit.h"
#include "unit_conn.h"

#define LEN ((3u << 20) + 5) /* several 1 MiB staging buffers */

typedef enum { CASE_SEND, CASE_WRITE, CASE_READ } stage_case_t;

/* Child: host memory on engine a, GPU memory on engine b, one transfer that
 * lands in b's GPU memory with b's (or, for write, the target's) second
 * copy failing. Exit 0: failed as it must, or OK with every byte right. */
static int child(stage_case_t kind)
{
    uccl_engine_params_t pa = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS | UCCL_ENGINE_PARAM_GPU_INDEX,
                               .transports = "tcp", .gpu_index = 0};
    uccl_engine_params_t pb = pa;
    uint8_t *host = malloc(LEN), *check = malloc(LEN);
    uccl_mr_t *hmr = NULL, *gmr = NULL;
    uccl_req_t *r[2] = {NULL, NULL};
    uccl_status_t st = UCCL_ERR_IO;
    unit_pair_t p;
    void *gpu = NULL;
    size_t bad = 0;
    int n = 1;

    pb.gpu_index = 1;
    setenv("UCCL_FAKE_GPU_FAIL_COPY", "2", 1);
    if (host == NULL || check == NULL || unit_pair_open_params(&pa, &pb, &p) != UCCL_OK ||
        uccl_mem_alloc(p.b, UCCL_MEM_CUDA, LEN, &gpu) != UCCL_OK ||
        uccl_mr_reg(p.a, host, LEN, 0, &hmr) != UCCL_OK || uccl_mr_reg(p.b, gpu, LEN, 0, &gmr) != UCCL_OK)
        return 10;
    for (size_t i = 0; i < LEN; i++)
        host[i] = (uint8_t)(i * 7 + 1);
    if (kind == CASE_SEND) {
        n = 2;
        if (uccl_recv(p.ba, gmr, 0, LEN, 5, &r[0]) != UCCL_OK ||
            uccl_send(p.ab, hmr, 0, LEN, 5, &r[1]) != UCCL_OK)
            return 11;
    } else {
        uccl_rdesc_t rd;
        /* write: a's host bytes into b's GPU region; read: b reads a's host bytes */
        uccl_mr_t *target = kind == CASE_WRITE ? gmr : hmr;
        uccl_conn_t *conn = kind == CASE_WRITE ? p.ab : p.ba;

        if (uccl_mr_pack(target, 0, LEN, &rd) != UCCL_OK)
            return 12;
        st = kind == CASE_WRITE ? uccl_write(conn, hmr, 0, LEN, &rd, 0, &r[0])
                                : uccl_read(conn, gmr, 0, LEN, &rd, 0, &r[0]);
        if (st != UCCL_OK)
            return 13;
    }
    if (unit_drive(&p, r, (size_t)n, 20000) != UCCL_OK)
        return 14;
    st = uccl_wait(r[0], 0);
    if (uccl_gpu_memcpy(check, gpu, LEN) != UCCL_OK)
        return 15;
    for (size_t i = 0; i < LEN; i++)
        bad += check[i] != host[i];
    printf(" [%s: %s, %zu bytes wrong] ", kind == CASE_SEND ? "send" : kind == CASE_WRITE ? "write" : "read",
           uccl_status_name(st), bad);
    fflush(stdout);
    for (int i = 0; i < n; i++)
        uccl_req_free(r[i]);
    uccl_mr_dereg(hmr);
    uccl_mr_dereg(gmr);
    uccl_mem_free(p.b, gpu);
    unit_pair_close(&p);
    free(host);
    free(check);
    if (bad == 0)
        return 3; /* the fault missed this transfer: the case tests nothing */
    if (st == UCCL_OK)
        return 1; /* completed OK with bytes missing */
    return st == UCCL_ERR_TRANSPORT ? 0 : 4; /* a write's too, not REMOTE_ACCESS ("none landed") */
}

static int run_case(stage_case_t kind)
{
    int status;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0)
        _exit(child(kind));
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

static void test_send(void) { CU_ASSERT_EQUAL(run_case(CASE_SEND), 0); }
static void test_write(void) { CU_ASSERT_EQUAL(run_case(CASE_WRITE), 0); }
static void test_read(void) { CU_ASSERT_EQUAL(run_case(CASE_READ), 0); }

int main(void)
{
    CU_TestInfo tests[] = {
        {"send into GPU memory, a copy in fails: not OK", test_send},
        {"write to a GPU region, a copy in fails: not OK", test_write},
        {"read into GPU memory, a copy in fails: not OK", test_read},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"stage_fault", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    if (strcmp(uccl_gpu_backend(), "fake") != 0) {
        printf("skipped: needs the fake GPU backend's copy faults; this one is %s\n",
               uccl_gpu_backend());
        return UNIT_EXIT_SKIP;
    }
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "20000", 1);
    return unit_main(suites);
}

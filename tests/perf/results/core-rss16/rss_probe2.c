/* Two processes (fork): the parent writes windows of W writes of 1 KiB to
 * the child's region and prints, every STEP windows, its heap (mallinfo2),
 * RSS, RssAnon and RssShmem; the child progresses and prints its own at the
 * end. Not part of the build; see README.md for the command line. */
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uccl/uccl.h>

static long status_kib(const char *key)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0)
            v = atol(line + strlen(key));
    if (f)
        fclose(f);
    return v;
}

static void report(const char *who, long w)
{
    struct mallinfo2 m = mallinfo2();
    printf("%-6s %7ld %9zu %9zu %8ld %8ld %8ld\n", who, w, m.uordblks, m.hblkhd,
           status_kib("VmRSS:"), status_kib("RssAnon:"), status_kib("RssShmem:"));
    fflush(stdout);
}

static uccl_engine_t *engine(const char *tp)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = tp};
    uccl_engine_t *e = NULL;
    if (uccl_engine_create(&p, &e) != UCCL_OK)
        exit(1);
    return e;
}

int main(int argc, char **argv)
{
    const char *tp = argc > 1 ? argv[1] : "shm";
    long windows = argc > 2 ? atol(argv[2]) : 10000, step = argc > 3 ? atol(argv[3]) : 1000;
    int W = argc > 4 ? atoi(argv[4]) : 16, up[2], down[2];
    size_t n = 1024;
    uint8_t *buf = calloc(1, n), addr[UCCL_ADDRESS_MAX];
    uccl_mr_t *mr;
    uccl_rdesc_t desc;
    uccl_conn_t *conn;
    uccl_req_t *reqs[1024];
    if (pipe(up) || pipe(down) || W > 1024)
        return 1;
    printf("%-6s %7s %9s %9s %8s %8s %8s\n", "who", "windows", "uordblks", "hblkhd", "rssKiB",
           "anonKiB", "shmemKiB");
    fflush(stdout);
    if (fork() == 0) { /* target */
        uccl_engine_t *e = engine(tp);
        size_t len = sizeof(addr);
        struct pollfd pfd = {.fd = down[0], .events = POLLIN};
        uccl_engine_address(e, addr, &len);
        uccl_mr_reg(e, buf, n, 0, &mr);
        uccl_mr_pack(mr, 0, n, &desc);
        if (write(up[1], &len, sizeof(len)) < 0 || write(up[1], addr, len) < 0 ||
            write(up[1], &desc, sizeof(desc)) < 0)
            return 1;
        report("target", 0);
        if (uccl_accept(e, 10000, &conn) != UCCL_OK)
            return 2;
        while (poll(&pfd, 1, 0) == 0)
            uccl_engine_progress(e);
        report("target", windows);
        uccl_engine_destroy(e);
        return 0;
    }
    uccl_engine_t *e = engine(tp);
    size_t len;
    if (read(up[0], &len, sizeof(len)) != sizeof(len) || read(up[0], addr, len) != (ssize_t)len ||
        read(up[0], &desc, sizeof(desc)) != sizeof(desc))
        return 1;
    uccl_mr_reg(e, buf, n, 0, &mr);
    if (uccl_connect(e, addr, len, &conn) != UCCL_OK)
        return 2;
    for (long w = 0; w <= windows; w++) {
        if (w % step == 0)
            report("writer", w);
        for (int i = 0; i < W; i++)
            if (uccl_write(conn, mr, 0, n, &desc, 0, &reqs[i]) != UCCL_OK)
                return 3;
        if (uccl_wait_all(reqs, (size_t)W, 10000) != UCCL_OK)
            return 4;
        for (int i = 0; i < W; i++)
            uccl_req_free(reqs[i]);
    }
    if (write(down[1], "x", 1) < 0)
        return 1;
    wait(NULL);
    uccl_engine_destroy(e);
    return 0;
}

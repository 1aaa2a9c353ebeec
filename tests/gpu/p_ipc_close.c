/* What cudaIpcCloseMemHandle (uccl_gpu_ipc_close, src/gpu/rt_common.h) and
 * the exporter's cudaFree do to copies the importer queued into the
 * mapping, measured on a real GPU (the CUDA documentation does not say).
 * A standalone probe, not part of make check: two processes on GPU 0,
 * forked before CUDA init, for each case a fresh pair:
 *   A  close while copies into the mapping are queued on a stream of the
 *      importer: does close wait for them (event done when close returns)?
 *   B  close while a copy into the mapping sits behind cuStreamWaitValue32
 *      on a host word nobody sets yet (a watchdog sets it after 2 s): does
 *      close block until then (it would hang without the watchdog)?
 *   C  the exporter cudaFree's its allocation while the importer's copies
 *      into it are queued behind such a gate: does free wait, do the copies
 *      land in memory that stays until the importer closes?
 *   D  as B, but the gated copies go to the importer's own memory, not into
 *      the mapping: does close wait for unrelated work (a device-wide sync)?
 * After each: the stream's status, cudaGetLastError, a fresh allocation and
 * memset (a poisoned context fails there), the bytes the exporter sees.
 * Build (tests/gpu/ipc-close-device.sh): gcc -I$CUDA/include p_ipc_close.c
 * -L$CUDA/lib64 -lcudart -lcuda -lpthread. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIZE ((size_t)256 << 20)
#define NCOPY 1000

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("  [%s] %s failed: %s\n", who, #call, cudaGetErrorString(e_));                  \
            fflush(stdout);                                                                        \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

static void xwrite(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n)
        _exit(3);
}

static void xread(int fd, void *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            _exit(3);
        got += (size_t)r;
    }
}

static volatile uint32_t *gate;
static double gate_set_at;

static void *watchdog(void *arg)
{
    (void)arg;
    usleep(2000 * 1000);
    gate_set_at = now_ms();
    __atomic_store_n(gate, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void exporter(char kase, int rd, int wr)
{
    const char *who = "exporter";
    cudaIpcMemHandle_t h;
    unsigned char b = 0;
    void *buf, *buf2;
    char msg;
    double t0;

    CK(cudaSetDevice(0));
    CK(cudaMalloc(&buf, SIZE));
    CK(cudaMemset(buf, 0, SIZE));
    CK(cudaDeviceSynchronize());
    CK(cudaIpcGetMemHandle(&h, buf));
    xwrite(wr, &h, sizeof(h));
    xread(rd, &msg, 1);
    if (kase == 'C' && msg == 'Q') { /* the importer's copies are queued behind its gate */
        t0 = now_ms();
        CK(cudaFree(buf));
        printf("  [exporter] cudaFree took %.1f ms while the importer's copies were queued\n", now_ms() - t0);
        CK(cudaMalloc(&buf2, SIZE));
        CK(cudaMemset(buf2, 0x11, SIZE));
        CK(cudaDeviceSynchronize());
        printf("  [exporter] a new %zu MiB allocation: %s address, set to 0x11\n", SIZE >> 20,
               buf2 == buf ? "the same" : "another");
        fflush(stdout);
        xwrite(wr, "F", 1);
        xread(rd, &msg, 1);
        CK(cudaMemcpy(&b, (char *)buf2 + SIZE - 1, 1, cudaMemcpyDeviceToHost));
        printf("  [exporter] last byte of the new allocation after the importer's copies: 0x%02x\n", b);
    } else {
        CK(cudaMemcpy(&b, (char *)buf + SIZE - 1, 1, cudaMemcpyDeviceToHost));
        printf("  [exporter] last byte of its allocation after the importer finished: 0x%02x "
               "(0xa5: the importer's copies landed)\n", b);
    }
    fflush(stdout);
}

static void importer(char kase, int rd, int wr)
{
    const char *who = "importer";
    cudaIpcMemHandle_t h;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    void *map, *src, *dst, *chk, *tgt;
    uint32_t *word;
    CUdeviceptr dword;
    pthread_t wd;
    cudaError_t qe, se, le;
    unsigned char b = 0;
    float copy_ms = -1;
    double t0, t1, t2;
    char msg;

    xread(rd, &h, sizeof(h));
    CK(cudaSetDevice(0));
    CK(cudaIpcOpenMemHandle(&map, h, cudaIpcMemLazyEnablePeerAccess));
    CK(cudaMalloc(&src, SIZE));
    CK(cudaMalloc(&dst, 4096));
    tgt = map;
    if (kase == 'D')
        CK(cudaMalloc(&tgt, SIZE));
    CK(cudaMemset(src, 0xa5, SIZE));
    CK(cudaMemset(dst, 0, 4096));
    CK(cudaHostAlloc((void **)&word, 4, cudaHostAllocMapped | cudaHostAllocPortable));
    *word = 0;
    gate = word;
    CK(cudaHostGetDevicePointer((void **)&dword, word, 0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaDeviceSynchronize());

    if (kase != 'A') {
        CUresult r = cuStreamWaitValue32(s, dword, 1, CU_STREAM_WAIT_VALUE_GEQ);
        if (r != CUDA_SUCCESS) {
            printf("  [importer] cuStreamWaitValue32 failed: CUresult %d\n", (int)r);
            _exit(2);
        }
    }
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < NCOPY; i++)
        CK(cudaMemcpyAsync(tgt, src, SIZE, cudaMemcpyDeviceToDevice, s));
    if (kase == 'C')
        CK(cudaMemcpyAsync(dst, (char *)map + SIZE - 4096, 4096, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    printf("  [importer] %d copies of %zu MiB into %s queued%s\n", NCOPY, SIZE >> 20,
           kase == 'D' ? "its own memory (not the mapping)" : "the mapping",
           kase == 'A' ? "" : " behind cuStreamWaitValue32 on an unset host word");
    fflush(stdout);
    if (kase != 'A')
        pthread_create(&wd, NULL, watchdog, NULL);
    t0 = now_ms();
    if (kase == 'C') {
        xwrite(wr, "Q", 1);
        xread(rd, &msg, 1); /* the exporter freed and reallocated */
        pthread_join(wd, NULL);
        printf("  [importer] gate set %.1f ms after queueing\n", gate_set_at - t0);
        se = cudaStreamSynchronize(s);
        qe = cudaSuccess;
        t1 = t2 = now_ms();
        CK(cudaMemcpy(&b, dst, 1, cudaMemcpyDeviceToHost));
        printf("  [importer] its copies after the exporter's free: stream %s, read back 0x%02x "
               "(0xa5: the freed allocation stayed mapped)\n", cudaGetErrorString(se), b);
        t0 = now_ms();
        se = cudaIpcCloseMemHandle(map);
        printf("  [importer] cudaIpcCloseMemHandle after that: %s, %.1f ms\n", cudaGetErrorString(se),
               now_ms() - t0);
    } else {
        se = cudaIpcCloseMemHandle(map);
        t1 = now_ms();
        qe = cudaEventQuery(e1);
        printf("  [importer] cudaIpcCloseMemHandle returned %s after %.1f ms; the copies' end event then: %s\n",
               cudaGetErrorString(se), t1 - t0, qe == cudaSuccess ? "DONE (close waited)" : cudaGetErrorString(qe));
        if (kase == 'B' || kase == 'D') {
            pthread_join(wd, NULL);
            printf("  [importer] the watchdog set the gate %.1f ms after close began (close returned %s it)\n",
                   gate_set_at - t0, t1 >= gate_set_at ? "AFTER" : "BEFORE");
        }
        fflush(stdout);
        se = cudaStreamSynchronize(s);
        t2 = now_ms();
        printf("  [importer] cudaStreamSynchronize after close: %s (%.1f ms more)\n", cudaGetErrorString(se),
               t2 - t1);
    }
    le = cudaGetLastError();
    if (cudaEventElapsedTime(&copy_ms, e0, e1) == cudaSuccess)
        printf("  [importer] the copies took %.1f ms on the GPU\n", copy_ms);
    else
        (void)cudaGetLastError();
    printf("  [importer] cudaGetLastError: %s\n", cudaGetErrorString(le));
    se = cudaMalloc(&chk, 4096);
    if (se == cudaSuccess)
        se = cudaMemset(chk, 0, 4096);
    if (se == cudaSuccess)
        se = cudaDeviceSynchronize();
    printf("  [importer] context afterwards (malloc+memset+sync): %s\n", cudaGetErrorString(se));
    fflush(stdout);
    xwrite(wr, "D", 1);
}

static int run_case(char kase, const char *what)
{
    int e2i[2], i2e[2], st, rc = 0;
    pid_t pe, pi;

    printf("=== case %c: %s\n", kase, what);
    fflush(stdout);
    if (pipe(e2i) != 0 || pipe(i2e) != 0)
        return 1;
    pe = fork();
    if (pe == 0) {
        exporter(kase, i2e[0], e2i[1]);
        _exit(0);
    }
    pi = fork();
    if (pi == 0) {
        alarm(30);
        importer(kase, e2i[0], i2e[1]);
        _exit(0);
    }
    close(e2i[0]);
    close(e2i[1]);
    close(i2e[0]);
    close(i2e[1]);
    for (int i = 0; i < 2; i++) {
        pid_t p = wait(&st);
        printf("  [%s] exit %s %d\n", p == pe ? "exporter" : "importer",
               WIFEXITED(st) ? "code" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    fflush(stdout);
    return rc;
}

int main(int argc, char **argv)
{
    const char *cases = argc > 1 ? argv[1] : "ABCD";
    int rc = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (const char *c = cases; *c; c++) {
        if (*c == 'A')
            rc |= run_case('A', "importer closes the mapping while copies into it are queued");
        else if (*c == 'B')
            rc |= run_case('B', "importer closes the mapping while a copy into it waits on an unset host word");
        else if (*c == 'C')
            rc |= run_case('C', "exporter frees the allocation while the importer's copies into it are queued");
        else if (*c == 'D')
            rc |= run_case('D', "importer closes the mapping while unrelated copies wait on an unset host word");
    }
    return rc;
}

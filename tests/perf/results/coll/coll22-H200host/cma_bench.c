/* coll22: what one thread's copy of a peer's block costs, per way of reaching
 * it, with N processes (one per core) doing it at once as in an allgather or
 * alltoall of N ranks. Each process, per iteration, copies the N-1 peers'
 * blocks of SIZE bytes into its own (pre-touched, malloc'd) buffer, one after
 * the other:
 *   cma   process_vm_readv from the peer's malloc'd buffer (what ob1/vader,
 *         UCX and uccl's shm transport do for malloc'd memory);
 *   map   memcpy from the peer's block in a MAP_SHARED mapping (what uccl does
 *         for uccl_mem_alloc memory);
 *   ring  two copies, as a staged path through shared memory moves a block:
 *         memcpy of SIZE bytes into a shared buffer, then out of another;
 *   local memcpy within the process (the rate a thread copies at).
 * N = 1 runs local only. Prints each process's mean time per iteration (the
 * slowest and the mean over processes) and GB/s per process (bytes copied
 * in per iteration / time).
 * Build: cc -O2 -o cma_bench cma_bench.c; run: ./cma_bench [sizes...] */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NMAX 8
#define SMAX ((size_t)1 << 20)

typedef struct {
    atomic_int arrive, leave;
    pid_t pid[NMAX];
    char *addr[NMAX];
    double us[NMAX];
    int bad;
} ctl_t;

static ctl_t *ctl;
static char *shared; /* NMAX x NMAX blocks of SMAX: [writer][reader] */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void barrier(atomic_int *c, int n)
{
    atomic_fetch_add(c, 1);
    while (atomic_load(c) < n)
        ;
}

static void child(const char *mode, int n, int i, size_t size, int iters)
{
    cpu_set_t set;
    char *src, *dst;
    size_t blk = n > 1 ? (size_t)(n - 1) : 1;

    CPU_ZERO(&set);
    CPU_SET(i, &set);
    sched_setaffinity(0, sizeof(set), &set);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
    src = aligned_alloc(4096, (size_t)NMAX * SMAX);
    dst = aligned_alloc(4096, (size_t)NMAX * SMAX);
    memset(src, i + 1, (size_t)NMAX * SMAX);
    memset(dst, 0, (size_t)NMAX * SMAX);
    ctl->pid[i] = getpid();
    ctl->addr[i] = src;
    barrier(&ctl->arrive, n);
    double t0 = 0;
    for (int it = -3; it < iters; it++) {
        if (it == 0)
            t0 = now_us();
        if (strcmp(mode, "local") == 0) {
            for (size_t k = 0; k < blk; k++)
                memcpy(dst + k * size, src + k * size, size);
            continue;
        }
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            if (strcmp(mode, "cma") == 0) {
                struct iovec l = {dst + j * size, size}, r = {ctl->addr[j] + i * size, size};
                if (process_vm_readv(ctl->pid[j], &l, 1, &r, 1, 0) != (ssize_t)size)
                    ctl->bad = 1;
            } else if (strcmp(mode, "map") == 0) {
                memcpy(dst + j * size, shared + ((size_t)j * NMAX + i) * SMAX, size);
            } else { /* ring: into my shared slot for j, out of j's slot for me */
                memcpy(shared + ((size_t)i * NMAX + j) * SMAX, src + j * size, size);
                memcpy(dst + j * size, shared + ((size_t)j * NMAX + i) * SMAX, size);
            }
        }
    }
    ctl->us[i] = (now_us() - t0) / iters;
    if (strcmp(mode, "cma") == 0 && (unsigned char)dst[(i == 0 ? 1 : 0) * size] !=
                                        (unsigned char)((i == 0 ? 1 : 0) + 1))
        ctl->bad = 1;
    barrier(&ctl->leave, n); /* peers may still read my memory */
    exit(0);
}

static void run(const char *mode, int n, size_t size)
{
    size_t blk = n > 1 ? (size_t)(n - 1) : 1;
    size_t per = blk * size;
    int iters = (int)((64u << 20) / per);
    double mx = 0, sum = 0;

    iters = iters < 20 ? 20 : iters > 100000 ? 100000 : iters;
    memset(ctl, 0, sizeof(*ctl));
    for (int i = 0; i < n; i++)
        if (fork() == 0)
            child(mode, n, i, size, iters);
    for (int i = 0; i < n; i++)
        wait(NULL);
    for (int i = 0; i < n; i++) {
        mx = ctl->us[i] > mx ? ctl->us[i] : mx;
        sum += ctl->us[i];
    }
    printf("%-6s n=%d size=%8zu  blocks/iter=%zu  iters=%6d  slowest %9.2f us  mean %9.2f us"
           "  per block %8.3f us  %6.2f GB/s per process%s\n",
           mode, n, size, blk, iters, mx, sum / n, sum / n / (double)blk, per / (sum / n) / 1e3,
           ctl->bad ? "  BAD" : "");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    size_t def[] = {64, 4096, 65536, 262144, 1048576};
    size_t sizes[16];
    int ns = 0;
    const char *modes[] = {"local", "cma", "map", "ring"};

    for (int a = 1; a < argc && ns < 16; a++)
        sizes[ns++] = strtoul(argv[a], NULL, 0);
    if (ns == 0)
        for (ns = 0; ns < 5; ns++)
            sizes[ns] = def[ns];
    ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared = mmap(NULL, (size_t)NMAX * NMAX * SMAX, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED || shared == MAP_FAILED)
        return 1;
    memset(shared, 7, (size_t)NMAX * NMAX * SMAX);
    for (int s = 0; s < ns; s++) {
        if (sizes[s] > SMAX || sizes[s] == 0)
            continue;
        run("local", 1, sizes[s]);
        for (int n = 2; n <= 4; n += 2)
            for (int m = 0; m < 4; m++)
                run(modes[m], n, sizes[s]);
    }
    return 0;
}

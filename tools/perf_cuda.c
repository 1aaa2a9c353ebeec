/* GPU references for the benchmarks (see perf_cuda.h), on src/gpu/gpu.h;
 * NCCL through dlopen with the few prototypes it needs declared here. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "perf_cuda.h"

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

typedef struct plain_export {
    uccl_gpu_ipc_handle_t handle;
    size_t off; /* dst's offset inside its allocation */
    int ok;
} plain_export_t;

double perf_cuda_plain(int rank, void *src, void *dst, size_t len, int iters, perf_xchg_fn xchg)
{
    plain_export_t mine, theirs;
    uccl_gpu_ptr_attr_t attr;
    uccl_gpu_stream_t s;
    void *mapped;
    double t0, us = -1, peer_us = -1;

    memset(&mine, 0, sizeof(mine));
    if (rank == 1 && uccl_gpu_ptr_attr(dst, &attr) == UCCL_OK && uccl_gpu_ipc_get(attr.base, &mine.handle) == UCCL_OK) {
        mine.off = (size_t)((char *)dst - (char *)attr.base);
        mine.ok = 1;
    }
    xchg(&mine, &theirs, sizeof(mine));
    if (rank == 0 && theirs.ok && uccl_gpu_ipc_open(&theirs.handle, &mapped) == UCCL_OK) {
        if (uccl_gpu_stream_create(&s) == UCCL_OK) {
            char *d = (char *)mapped + theirs.off;
            uccl_gpu_memcpy_async(d, src, len, s);
            uccl_gpu_stream_sync(s);
            t0 = now_us();
            for (int i = 0; i < iters; i++) {
                uccl_gpu_memcpy_async(d, src, len, s);
                uccl_gpu_stream_sync(s);
            }
            us = (now_us() - t0) / iters;
            uccl_gpu_stream_destroy(s);
        }
        uccl_gpu_ipc_close(mapped);
    }
    xchg(&us, &peer_us, sizeof(us)); /* rank 1 waits here until rank 0 is done */
    return rank == 0 ? us : peer_us;
}

int perf_cuda_count(void)
{
    int n = 0;

    return uccl_gpu_count(&n) == UCCL_OK ? n : 0;
}

int perf_cuda_set_device(int gpu)
{
    return uccl_gpu_set_device(gpu) == UCCL_OK ? 0 : -1;
}

double perf_cuda_copy_s(void *dst, const void *src, size_t len, int iters)
{
    static uccl_gpu_stream_t s; /* one per process, kept for every size */
    double t0;

    if (len == 0)
        return 0;
    if (s == NULL && uccl_gpu_stream_create(&s) != UCCL_OK)
        return -1;
    if (uccl_gpu_memcpy_async(dst, src, len, s) != UCCL_OK || uccl_gpu_stream_sync(s) != UCCL_OK)
        return -1;
    t0 = now_us();
    for (int i = 0; i < iters; i++) {
        uccl_gpu_memcpy_async(dst, src, len, s);
        uccl_gpu_stream_sync(s);
    }
    return (now_us() - t0) / iters * 1e-6;
}

/* ---------------------------------------------------------------- NCCL */

typedef struct { char internal[128]; } nccl_id_t;
typedef void *nccl_comm_t;
typedef int (*get_id_fn)(nccl_id_t *);
typedef int (*init_rank_fn)(nccl_comm_t *, int, nccl_id_t, int);
typedef int (*p2p_fn)(void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*destroy_fn)(nccl_comm_t);

double perf_cuda_nccl(int rank, void *buf, size_t len, int iters, perf_xchg_fn xchg)
{
    static void *lib;
    static nccl_comm_t comm;
    nccl_id_t id;
    uccl_gpu_stream_t s;
    double t0 = 0, us = -1;
    int ok;

    if (lib == NULL)
        lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    ok = lib != NULL;
    {
        int peer_ok;
        xchg(&ok, &peer_ok, sizeof(ok));
        if (!ok || !peer_ok)
            return -1;
    }
    get_id_fn get_id = (get_id_fn)dlsym(lib, "ncclGetUniqueId");
    init_rank_fn init_rank = (init_rank_fn)dlsym(lib, "ncclCommInitRank");
    p2p_fn send = (p2p_fn)dlsym(lib, "ncclSend"), recv = (p2p_fn)dlsym(lib, "ncclRecv");
    if (comm == NULL) {
        nccl_id_t peer_id;
        memset(&id, 0, sizeof(id));
        if (rank == 0)
            get_id(&id);
        xchg(&id, &peer_id, sizeof(id));
        if (init_rank(&comm, 2, rank == 0 ? id : peer_id, rank) != 0)
            return -1;
    }
    if (uccl_gpu_stream_create(&s) != UCCL_OK)
        return -1;
    for (int i = -1; i < iters; i++) {
        if (i == 0) {
            uccl_gpu_stream_sync(s);
            xchg(&ok, &ok, sizeof(ok));
            t0 = now_us();
        }
        if (rank == 0)
            send(buf, len, 0 /* ncclInt8 */, 1, comm, s);
        else
            recv(buf, len, 0, 0, comm, s);
    }
    uccl_gpu_stream_sync(s);
    us = (now_us() - t0) / iters;
    uccl_gpu_stream_destroy(s);
    return us;
}

/* ---------------------------------------------------------------- windowed */

/* Host flags both ranks map (perf_cuda_told_window): a count each way, on
 * cache lines of their own. */
typedef struct perf_flags {
    _Alignas(64) atomic_uint_fast64_t told; /* rank 0: windows copied */
    _Alignas(64) atomic_uint_fast64_t ack;  /* rank 1: windows acknowledged */
} perf_flags_t;

struct perf_cuda {
    int rank, gpu;
    perf_xchg_fn xchg;
    size_t len;
    void *buf;         /* ours, on gpu */
    void *peer_map;    /* the peer's buffer mapped here, NULL if it failed */
    uccl_gpu_stream_t stream;
    nccl_comm_t nccl;  /* NULL when NCCL is absent */
    p2p_fn nccl_send, nccl_recv;
    perf_flags_t *flags; /* shared with the peer (perf_cuda_told_window), NULL if not */
};

static int nccl_setup(perf_cuda_t *g)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    int ok = lib != NULL, peer_ok = 0;
    get_id_fn get_id = NULL;
    init_rank_fn init_rank = NULL;
    nccl_id_t id, peer_id;

    if (ok) {
        get_id = (get_id_fn)dlsym(lib, "ncclGetUniqueId");
        init_rank = (init_rank_fn)dlsym(lib, "ncclCommInitRank");
        g->nccl_send = (p2p_fn)dlsym(lib, "ncclSend");
        g->nccl_recv = (p2p_fn)dlsym(lib, "ncclRecv");
        ok = get_id && init_rank && g->nccl_send && g->nccl_recv;
    }
    g->xchg(&ok, &peer_ok, sizeof(ok));
    if (!ok || !peer_ok)
        return 0;
    memset(&id, 0, sizeof(id));
    if (g->rank == 0 && get_id(&id) != 0)
        memset(&id, 0, sizeof(id));
    g->xchg(&id, &peer_id, sizeof(id));
    if (init_rank(&g->nccl, 2, g->rank == 0 ? id : peer_id, g->rank) != 0) {
        fprintf(stderr, "perf: ncclCommInitRank failed; no NCCL reference\n");
        g->nccl = NULL;
    }
    return 0;
}

/* Export our buffer, map the peer's. */
static int plain_setup(perf_cuda_t *g)
{
    plain_export_t mine, theirs;

    memset(&mine, 0, sizeof(mine));
    mine.ok = uccl_gpu_ipc_get(g->buf, &mine.handle) == UCCL_OK;
    g->xchg(&mine, &theirs, sizeof(mine));
    if (theirs.ok && uccl_gpu_ipc_open(&theirs.handle, &g->peer_map) != UCCL_OK)
        g->peer_map = NULL;
    return 0;
}

/* Rank 0 makes a shared-memory object, rank 1 maps it by name, then the
 * name goes (the mappings stay). */
static void flags_setup(perf_cuda_t *g)
{
    char name[64], theirs[64];
    int fd = -1, ok = 0, peer_ok = 0;
    void *p = MAP_FAILED;

    snprintf(name, sizeof(name), "/uccl_perf_flags.%d", (int)getpid());
    if (g->rank == 0) {
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && ftruncate(fd, sizeof(perf_flags_t)) != 0) {
            close(fd);
            fd = -1;
        }
    }
    g->xchg(name, theirs, sizeof(name));
    if (g->rank == 1)
        fd = shm_open(theirs, O_RDWR, 0);
    if (fd >= 0)
        p = mmap(NULL, sizeof(perf_flags_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    ok = p != MAP_FAILED;
    g->xchg(&ok, &peer_ok, sizeof(ok));
    if (g->rank == 0)
        shm_unlink(name);
    if (ok && peer_ok) {
        g->flags = p;
        return;
    }
    if (ok)
        munmap(p, sizeof(perf_flags_t));
}

int perf_cuda_setup(int rank, int local_rank, size_t len, perf_xchg_fn xchg, perf_cuda_t **out)
{
    perf_cuda_t *g = calloc(1, sizeof(*g));
    int n = 0;

    if (g == NULL)
        return -1;
    g->rank = rank;
    g->xchg = xchg;
    g->len = len;
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        fprintf(stderr, "perf: --mem cuda needs a GPU (%s backend found none)\n", uccl_gpu_backend());
        free(g);
        return -1;
    }
    g->gpu = local_rank % n;
    if (uccl_gpu_set_device(g->gpu) != UCCL_OK || uccl_gpu_malloc(&g->buf, len) != UCCL_OK ||
        uccl_gpu_memset(g->buf, 0, len) != UCCL_OK || uccl_gpu_stream_create(&g->stream) != UCCL_OK) {
        fprintf(stderr, "perf: cannot set up %zu bytes on GPU %d\n", len, g->gpu);
        if (g->buf != NULL)
            uccl_gpu_free(g->buf);
        free(g);
        return -1;
    }
    plain_setup(g);
    flags_setup(g);
    nccl_setup(g);
    *out = g;
    return 0;
}

void *perf_cuda_buf(const perf_cuda_t *g)
{
    return g->buf;
}

int perf_cuda_gpu(const perf_cuda_t *g)
{
    return g->gpu;
}

int perf_cuda_have_nccl(const perf_cuda_t *g)
{
    return g->nccl != NULL;
}

void perf_cuda_describe(const perf_cuda_t *g, char *buf, size_t len)
{
    char bus[UCCL_GPU_BUS_ID_MAX] = "?";

    uccl_gpu_pci_bus_id(g->gpu, bus, sizeof(bus));
    snprintf(buf, len, "GPU %d (%s)", g->gpu, bus);
}

int perf_cuda_upload(perf_cuda_t *g, const void *host, size_t len)
{
    return uccl_gpu_memcpy(g->buf, host, len) == UCCL_OK ? 0 : -1;
}

int perf_cuda_download(perf_cuda_t *g, void *host, size_t len)
{
    return uccl_gpu_memcpy(host, g->buf, len) == UCCL_OK ? 0 : -1;
}

/* Both ranks: barrier, rank 0's timed body, then rank 0's result to both. */
static double timed(perf_cuda_t *g, double secs)
{
    double peer = -1;

    g->xchg(&secs, &peer, sizeof(secs));
    return g->rank == 0 ? secs : peer;
}

double perf_cuda_plain_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters)
{
    int ok = 1, peer_ok = 0;
    double t0, secs = -1;

    g->xchg(&ok, &peer_ok, sizeof(ok));
    if (g->rank == 0 && g->peer_map != NULL) {
        char *dst = from_rank0 ? g->peer_map : g->buf;
        const char *src = from_rank0 ? g->buf : g->peer_map;
        t0 = now_us();
        for (int i = 0; i < iters && ok; i++) {
            for (int k = 0; k < window && ok; k++)
                ok = uccl_gpu_memcpy_async(dst, src, len, g->stream) == UCCL_OK;
            ok = ok && uccl_gpu_stream_sync(g->stream) == UCCL_OK;
        }
        secs = ok ? (now_us() - t0) / 1e6 : -1;
    }
    return timed(g, secs);
}

/* Spin until *word >= want; 0, or -1 after 60 s. */
static int flag_wait(atomic_uint_fast64_t *word, uint64_t want)
{
    double deadline = now_us() + 60e6;

    for (unsigned k = 0; atomic_load_explicit(word, memory_order_acquire) < want; k++)
        if ((k & 1023) == 0 && now_us() > deadline)
            return -1;
    return 0;
}

double perf_cuda_told_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters)
{
    int ok = g->flags != NULL && g->peer_map != NULL, peer_ok = 0;
    double t0, secs = -1;
    char *dst = from_rank0 ? g->peer_map : g->buf;
    const char *src = from_rank0 ? g->buf : g->peer_map;

    g->xchg(&ok, &peer_ok, sizeof(ok));
    if (!ok || !peer_ok)
        return -1;
    atomic_store(&g->flags->told, 0);
    atomic_store(&g->flags->ack, 0);
    g->xchg(&ok, &peer_ok, sizeof(ok)); /* both reset before either counts */
    t0 = now_us();
    for (uint64_t i = 1; i <= (uint64_t)iters && ok; i++) {
        if (g->rank == 1) {
            ok = flag_wait(&g->flags->told, i) == 0;
            atomic_store_explicit(&g->flags->ack, i, memory_order_release);
            continue;
        }
        for (int k = 0; k < window && ok; k++)
            ok = uccl_gpu_memcpy_async(dst, src, len, g->stream) == UCCL_OK;
        ok = ok && uccl_gpu_stream_sync(g->stream) == UCCL_OK;
        atomic_store_explicit(&g->flags->told, ok ? i : UINT64_MAX, memory_order_release);
        ok = ok && flag_wait(&g->flags->ack, i) == 0;
    }
    secs = ok ? (now_us() - t0) / 1e6 : -1;
    return timed(g, secs);
}

double perf_cuda_nccl_window(perf_cuda_t *g, int from_rank0, size_t len, int window, int iters)
{
    int sender = from_rank0 ? 0 : 1, ok = 1, peer_ok = 0;
    double t0, secs = -1;

    if (g->nccl == NULL)
        return -1;
    g->xchg(&ok, &peer_ok, sizeof(ok));
    t0 = now_us();
    for (int i = 0; i < iters && ok; i++) {
        for (int k = 0; k < window && ok; k++)
            ok = (g->rank == sender ? g->nccl_send(g->buf, len, 0 /* ncclInt8 */, 1 - g->rank, g->nccl, g->stream)
                                    : g->nccl_recv(g->buf, len, 0, 1 - g->rank, g->nccl, g->stream)) == 0;
        /* the ack: the receiver says it has the whole window */
        ok = ok && (g->rank == sender ? g->nccl_recv(g->buf, 1, 0, 1 - g->rank, g->nccl, g->stream)
                                      : g->nccl_send(g->buf, 1, 0, 1 - g->rank, g->nccl, g->stream)) == 0;
        ok = ok && uccl_gpu_stream_sync(g->stream) == UCCL_OK;
    }
    secs = ok ? (now_us() - t0) / 1e6 : -1;
    return timed(g, secs);
}

void perf_cuda_teardown(perf_cuda_t *g)
{
    if (g == NULL)
        return;
    if (g->nccl != NULL) {
        void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        destroy_fn destroy = lib ? (destroy_fn)dlsym(lib, "ncclCommDestroy") : NULL;
        if (destroy)
            destroy(g->nccl);
    }
    if (g->peer_map != NULL)
        uccl_gpu_ipc_close(g->peer_map);
    if (g->flags != NULL)
        munmap(g->flags, sizeof(perf_flags_t));
    uccl_gpu_stream_destroy(g->stream);
    uccl_gpu_free(g->buf);
    free(g);
}

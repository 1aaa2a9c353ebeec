/* uccl_perf coll --mem cuda: the references beside the local copy, for
 * ranks on several GPUs (tools/perf_coll.c runs them in turns with uccl):
 * - the peer-copy ceiling: every rank copies count bytes to every other
 *   rank's GPU buffer (CUDA IPC mapping, plain cudaMemcpyAsync, one stream
 *   per peer, all peers at once, so every link carries both directions),
 *   each call waited for as a blocking collective is;
 * - the kernel ceiling: the same copies by the library's copy kernel
 *   (uccl_gpu_sm_copy_async, what gpu_ipc's UCCL_GPU_IPC_COPY=sm runs), with
 *   the job's UCCL_GPU_IPC_SM_BLOCKS / SM_UNROLL; 0 where a rank has no
 *   kernel (no nvcc at build, the fake GPU without one) or count is not a
 *   multiple of 16;
 * - NCCL's own collective on the same buffers (libnccl.so.2 through dlopen):
 *   ncclAllGather, ncclBroadcast, and alltoall(v) as grouped ncclSend /
 *   ncclRecv (as nccl-tests does), timed twice: each call waited for (as
 *   uccl's blocking call) and nccl-tests style (iters calls queued, one
 *   stream sync).
 * NCCL is left out (its columns read 0, the header says why) when the
 * library is missing, on the fake GPU backend, when ranks share a GPU (NCCL
 * refuses that), or when ncclCommInitRank fails on any rank. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "perf_coll.h"

typedef struct { char internal[128]; } nccl_id_t;
typedef void *nccl_comm_t;
typedef int (*nccl_get_id_fn)(nccl_id_t *);
typedef int (*nccl_init_fn)(nccl_comm_t *, int, nccl_id_t, int);
typedef int (*nccl_allgather_fn)(const void *, void *, size_t, int, nccl_comm_t, void *);
typedef int (*nccl_bcast_fn)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_p2p_fn)(const void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_group_fn)(void);
typedef int (*nccl_destroy_fn)(nccl_comm_t);
typedef int (*nccl_version_fn)(int *);

struct coll_gpu {
    int gpu;
    uccl_gpu_stream_t stream;   /* NCCL's */
    uccl_gpu_stream_t *streams; /* one per peer: the ceiling's copies */
    void *dpeer;                /* the ceiling's target here: n * max bytes */
    char **peer_map;            /* every peer's dpeer mapped here (NULL: self) */
    size_t max;
    int sm_ok, sm_blocks, sm_unroll; /* the kernel ceiling: loaded on every rank; its shape */
    nccl_comm_t nccl;
    nccl_allgather_fn allgather;
    nccl_bcast_fn bcast;
    nccl_p2p_fn send, recv;
    nccl_group_fn group_start, group_end;
    nccl_destroy_fn destroy;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every rank's peer-copy target mapped here; 0, or -1 on any rank. */
static int peer_setup(coll_ctx_t *c, coll_gpu_t *g)
{
    uccl_gpu_ipc_handle_t mine, *all = calloc((size_t)c->n, sizeof(*all));
    int bad = 0, any = 0;

    g->peer_map = calloc((size_t)c->n, sizeof(*g->peer_map));
    g->streams = calloc((size_t)c->n, sizeof(*g->streams));
    memset(&mine, 0, sizeof(mine));
    bad = all == NULL || g->peer_map == NULL || g->streams == NULL ||
          uccl_gpu_malloc(&g->dpeer, (size_t)c->n * g->max) != UCCL_OK ||
          uccl_gpu_ipc_get(g->dpeer, &mine) != UCCL_OK;
    MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int p = 0; !bad && p < c->n; p++) {
        void *m = NULL;
        bad = uccl_gpu_stream_create(&g->streams[p]) != UCCL_OK; /* self: mode "self" */
        if (p == c->rank || bad)
            continue;
        bad = uccl_gpu_ipc_open(&all[p], &m) != UCCL_OK;
        g->peer_map[p] = m;
    }
    free(all);
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any ? -1 : 0;
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

/* The copy kernel on every rank, or the kernel column reads 0. */
static void kern_setup(coll_gpu_t *g)
{
    int ok, all_ok = 0;

    g->sm_blocks = env_int("UCCL_GPU_IPC_SM_BLOCKS", 32);
    g->sm_unroll = env_int("UCCL_GPU_IPC_SM_UNROLL", 4);
    ok = uccl_gpu_sm_copy_load(g->gpu) == UCCL_OK &&
         uccl_gpu_sm_copy_args_ok(g->dpeer, g->dpeer, g->sm_blocks, g->sm_unroll);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    g->sm_ok = all_ok;
}

const char *perf_coll_gpu_kern_text(const coll_ctx_t *c)
{
    static char text[96];
    const coll_gpu_t *g = c->gref;

    if (g == NULL || !g->sm_ok)
        return "no copy kernel on every rank: 0";
    snprintf(text, sizeof(text), "copy kernel, %d blocks of 512 threads, %d words in flight", g->sm_blocks,
             g->sm_unroll);
    return text;
}

/* NCCL on every rank, or on none (the reason in c->nccl_why). */
static void nccl_setup(coll_ctx_t *c, coll_gpu_t *g, int ngpu)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    nccl_get_id_fn get_id = lib ? (nccl_get_id_fn)dlsym(lib, "ncclGetUniqueId") : NULL;
    nccl_init_fn init = lib ? (nccl_init_fn)dlsym(lib, "ncclCommInitRank") : NULL;
    nccl_version_fn version = lib ? (nccl_version_fn)dlsym(lib, "ncclGetVersion") : NULL;
    nccl_id_t id;
    int ok, all_ok = 0, v = 0;

    if (c->o.op == UCCL_COLL_GATHER || c->o.op == UCCL_COLL_SCATTER) { /* nccl_call has none */
        snprintf(c->nccl_why, sizeof(c->nccl_why), "NCCL has no %s: no NCCL column",
                 uccl_coll_op_name(c->o.op));
        return;
    }
    if (lib != NULL) {
        g->allgather = (nccl_allgather_fn)dlsym(lib, "ncclAllGather");
        g->bcast = (nccl_bcast_fn)dlsym(lib, "ncclBroadcast");
        g->send = (nccl_p2p_fn)dlsym(lib, "ncclSend");
        g->recv = (nccl_p2p_fn)dlsym(lib, "ncclRecv");
        g->group_start = (nccl_group_fn)dlsym(lib, "ncclGroupStart");
        g->group_end = (nccl_group_fn)dlsym(lib, "ncclGroupEnd");
        g->destroy = (nccl_destroy_fn)dlsym(lib, "ncclCommDestroy");
    }
    ok = get_id && init && g->allgather && g->bcast && g->send && g->recv && g->group_start &&
         g->group_end && g->destroy && uccl_gpu_stream_create(&g->stream) == UCCL_OK;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        snprintf(c->nccl_why, sizeof(c->nccl_why), "libnccl.so.2 not loadable on every rank");
        return;
    }
    if (strcmp(uccl_gpu_backend(), "fake") == 0) {
        snprintf(c->nccl_why, sizeof(c->nccl_why), "not on the fake GPU backend");
        return;
    }
    if (ngpu < c->n) {
        snprintf(c->nccl_why, sizeof(c->nccl_why), "%d ranks share %d GPU(s): NCCL needs one "
                 "GPU per rank", c->n, ngpu);
        return;
    }
    memset(&id, 0, sizeof(id));
    if (c->rank == 0 && get_id(&id) != 0)
        memset(&id, 0, sizeof(id));
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ok = init(&g->nccl, c->n, id, c->rank) == 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        snprintf(c->nccl_why, sizeof(c->nccl_why), "ncclCommInitRank failed");
        if (ok)
            g->destroy(g->nccl);
        g->nccl = NULL;
        return;
    }
    if (version != NULL)
        version(&v);
    snprintf(c->nccl_why, sizeof(c->nccl_why), "NCCL %d.%d.%d", v / 10000, v / 100 % 100,
             v % 100);
}

int perf_coll_gpu_setup(coll_ctx_t *c, int gpu, int ngpu)
{
    coll_gpu_t *g = calloc(1, sizeof(*g));
    int bad = g == NULL, any = 0;

    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        free(g);
        return -1;
    }
    c->gref = g;
    g->gpu = gpu;
    g->max = c->o.max;
    snprintf(c->nccl_why, sizeof(c->nccl_why), "one rank");
    if (c->n < 2)
        return 0;
    if (uccl_gpu_set_device(gpu) != UCCL_OK || peer_setup(c, g) != 0) {
        if (c->rank == 0)
            fprintf(stderr, "uccl_perf coll: the peer-copy reference could not map every "
                            "rank's GPU buffer\n");
        return -1;
    }
    kern_setup(g);
    nccl_setup(c, g, ngpu);
    return 0;
}

int perf_coll_gpu_have_nccl(const coll_ctx_t *c)
{
    return c->gref != NULL && c->gref->nccl != NULL;
}

/* The ceiling's pattern, PERF_PEER_MODE (for probing what bounds it; the
 * header names it): "streams" (default) push to every peer, a stream per
 * peer; "one": the same pushes one after another on one stream; "pull":
 * copy from every peer's buffer into ours, a stream per peer; "self": the
 * pushes plus this rank's own block copied locally on a stream of its own
 * (what an out-of-place allgather must also do). */
const char *perf_coll_gpu_peer_mode(void)
{
    const char *m = getenv("PERF_PEER_MODE");

    return m != NULL && (strcmp(m, "one") == 0 || strcmp(m, "pull") == 0 ||
                         strcmp(m, "self") == 0) ? m : "streams";
}

/* One ceiling call: count bytes from here to every peer, all at once
 * (alltoall: block p of the source to peer p; else the same block), by the
 * copy engines or (kern) the copy kernel. */
static int peer_once(coll_ctx_t *c, coll_gpu_t *g, size_t count, int kern)
{
    int ok = 1, a2a = c->o.op == UCCL_COLL_ALLTOALL || c->o.op == UCCL_COLL_ALLTOALLV;
    const char *mode = perf_coll_gpu_peer_mode();
    int one = strcmp(mode, "one") == 0, pull = strcmp(mode, "pull") == 0;
    const char *src = c->dsrc;

    for (int p = 0; p < c->n && ok; p++) {
        uccl_gpu_stream_t s = g->streams[one ? (c->rank + 1) % c->n : p];
        char *d;
        const char *from;

        if (p == c->rank) {
            if (strcmp(mode, "self") == 0)
                ok = uccl_gpu_memcpy_async((char *)g->dpeer + (size_t)p * count,
                                           src + (a2a ? (size_t)p * count : 0), count,
                                           s) == UCCL_OK;
            continue;
        }
        d = pull ? (char *)g->dpeer + (size_t)p * count : g->peer_map[p] + (size_t)c->rank * count;
        from = pull ? g->peer_map[p] + (size_t)c->rank * count : src + (a2a ? (size_t)p * count : 0);
        ok = (kern ? uccl_gpu_sm_copy_async(g->gpu, d, from, count, g->sm_blocks, g->sm_unroll, s)
                   : uccl_gpu_memcpy_async(d, from, count, s)) == UCCL_OK;
    }
    for (int p = 0; p < c->n; p++)
        ok = uccl_gpu_stream_sync(g->streams[p]) == UCCL_OK && ok;
    return ok ? 0 : -1;
}

static double peer_time(coll_ctx_t *c, size_t count, int iters, int kern)
{
    coll_gpu_t *g = c->gref;
    double t = 0, tmax = 0;
    int bad = 0;

    if (g == NULL || c->n < 2 || count == 0 || (kern && (!g->sm_ok || count % UCCL_GPU_SM_COPY_ALIGN)))
        return 0;
    for (int i = 0; i < c->o.warmup && !bad; i++)
        bad = peer_once(c, g, count, kern);
    MPI_Barrier(MPI_COMM_WORLD);
    t = now_s();
    for (int i = 0; i < iters && !bad; i++)
        bad = peer_once(c, g, count, kern);
    t = bad ? -1 : (now_s() - t) / iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

double perf_coll_gpu_peer_s(coll_ctx_t *c, size_t count, int iters)
{
    return peer_time(c, count, iters, 0);
}

double perf_coll_gpu_kern_s(coll_ctx_t *c, size_t count, int iters)
{
    return peer_time(c, count, iters, 1);
}

/* One NCCL call on the benchmark's buffers (ncclInt8 = 0), queued. */
static int nccl_call(coll_ctx_t *c, coll_gpu_t *g, size_t count)
{
    int rc = 0;

    switch (c->o.op) {
    case UCCL_COLL_ALLGATHER:
    case UCCL_COLL_ALLGATHERV:
        return g->allgather(c->send, c->recv, count, 0, g->nccl, g->stream);
    case UCCL_COLL_BCAST: return g->bcast(c->recv, c->recv, count, 0, 0, g->nccl, g->stream);
    case UCCL_COLL_ALLTOALL:
    case UCCL_COLL_ALLTOALLV:
        rc = g->group_start();
        for (int p = 0; p < c->n && rc == 0; p++) {
            rc = g->send(c->send + (size_t)p * count, count, 0, p, g->nccl, g->stream);
            if (rc == 0)
                rc = g->recv(c->recv + (size_t)p * count, count, 0, p, g->nccl, g->stream);
        }
        return g->group_end() != 0 ? -1 : rc;
    default: return -1;
    }
}

double perf_coll_gpu_nccl_s(coll_ctx_t *c, size_t count, int iters, int queued)
{
    coll_gpu_t *g = c->gref;
    double t = 0, tmax = 0;
    int bad = 0;

    if (!perf_coll_gpu_have_nccl(c) || count == 0)
        return 0;
    if (uccl_gpu_set_device(g->gpu) != UCCL_OK)
        bad = 1;
    for (int i = 0; i < c->o.warmup && !bad; i++)
        bad = nccl_call(c, g, count) != 0;
    bad = bad || uccl_gpu_stream_sync(g->stream) != UCCL_OK;
    MPI_Barrier(MPI_COMM_WORLD);
    t = now_s();
    for (int i = 0; i < iters && !bad; i++) {
        bad = nccl_call(c, g, count) != 0;
        if (!queued && !bad)
            bad = uccl_gpu_stream_sync(g->stream) != UCCL_OK;
    }
    bad = bad || uccl_gpu_stream_sync(g->stream) != UCCL_OK;
    t = bad ? -1 : (now_s() - t) / iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

void perf_coll_gpu_teardown(coll_ctx_t *c)
{
    coll_gpu_t *g = c->gref;

    if (g == NULL)
        return;
    if (g->nccl != NULL)
        g->destroy(g->nccl);
    for (int p = 0; g->peer_map != NULL && p < c->n; p++) {
        if (g->peer_map[p] != NULL)
            uccl_gpu_ipc_close(g->peer_map[p]);
        if (g->streams[p] != NULL)
            uccl_gpu_stream_destroy(g->streams[p]);
    }
    /* every rank has closed its mapping of ours before it goes */
    MPI_Barrier(MPI_COMM_WORLD);
    if (g->dpeer != NULL)
        uccl_gpu_free(g->dpeer);
    if (g->stream != NULL)
        uccl_gpu_stream_destroy(g->stream);
    free(g->peer_map);
    free(g->streams);
    free(g);
    c->gref = NULL;
}

double perf_coll_stream_host_s;

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uccl_status_t perf_coll_gpu_stream_call(coll_ctx_t *c, const uccl_coll_args_t *a)
{
    static uccl_gpu_stream_t s;
    uccl_status_t st = s == NULL ? uccl_gpu_stream_create(&s) : UCCL_OK;
    uccl_req_t *req = NULL;
    double t0 = mono_s();

    if (st == UCCL_OK)
        st = uccl_coll_post_stream(c->comm, a, s, &req);
    perf_coll_stream_host_s += mono_s() - t0;
    if (st == UCCL_OK)
        st = uccl_gpu_stream_sync(s);
    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req);
    return st;
}

/* GPU memory in the collective test (t_coll_gpu): the case's host buffers
 * (inputs and Open MPI's reference stay on the host) are staged into GPU
 * memory with uccl_copy, the collective runs on the GPU copies, and the
 * receive buffer comes back for the byte comparison. T_COLL_MEM=gpu puts
 * both buffers on the GPU; mixed puts the send buffer of even ranks and the
 * receive buffer of odd ranks there (host <-> GPU in both directions, and
 * ranks of different types). CT_STREAM runs the case in the stream form.
 * Built twice: with T_COLL_GPU (t_coll_gpu, internal library for the
 * streams), and without (t_coll: host memory only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_test.h"
#ifdef T_COLL_GPU
#include "gpu/gpu.h"
#endif

#ifndef T_COLL_GPU
ct_mem_t ct_mem(void) { return CT_MEM_HOST; }
const char *ct_mem_name(void) { return "host"; }
int ct_mem_init(int rank) { (void)rank; return 0; }
void ct_mem_fini(void) {}
uccl_status_t ct_gpu_run(mt_ctx_t *c, ct_case_t *k, ct_mode_t mode)
{
    (void)c, (void)k, (void)mode;
    return UCCL_ERR_UNSUPPORTED;
}
void ct_stream_order(mt_ctx_t *c) { (void)c; }
void ct_gpu_refused(mt_ctx_t *c) { (void)c; }
void ct_gpu_auto_small(mt_ctx_t *c) { (void)c; }
void *ct_stream(void) { return NULL; }
#else

static ct_mem_t mem = CT_MEM_HOST;
static uccl_gpu_stream_t stream;

void *ct_stream(void)
{
    return stream;
}

ct_mem_t ct_mem(void)
{
    return mem;
}

const char *ct_mem_name(void)
{
    return mem == CT_MEM_GPU ? "gpu" : mem == CT_MEM_MIXED ? "mixed" : "host";
}

/* Rank r's GPU: local rank % GPUs (one process a GPU where there are
 * enough, as NCCL users run), or GPU 0 for every rank with
 * T_COLL_GPUS=same (processes sharing one GPU). */
static int pick_gpu(int rank, int n)
{
    const char *v = getenv("T_COLL_GPUS");
    MPI_Comm node;
    int local = 0, nlocal = 1;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &nlocal);
    MPI_Comm_free(&node);
    if (v != NULL && strcmp(v, "same") == 0)
        local = 0;
    if (rank == 0)
        printf("# GPUs: %d here, %s\n", n, v != NULL && strcmp(v, "same") == 0 ?
               "every rank on GPU 0 (T_COLL_GPUS=same)" : "rank on GPU local_rank % GPUs");
    return local % n;
}

int ct_mem_init(int rank)
{
    static uccl_engine_params_t ep = {.field_mask = UCCL_ENGINE_PARAM_GPU_INDEX, .gpu_index = 0};
    const char *v = getenv("T_COLL_MEM");
    int n = 0;

    mem = v && strcmp(v, "mixed") == 0 ? CT_MEM_MIXED : v && strcmp(v, "host") == 0 ? CT_MEM_HOST
                                                                                      : CT_MEM_GPU;
    if (mem == CT_MEM_HOST)
        return 0;
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        if (rank == 0)
            printf("SKIP: no GPU for T_COLL_MEM=%s\n", ct_mem_name());
        return MT_SKIP;
    }
    ep.gpu_index = pick_gpu(rank, n);
    if (uccl_gpu_set_device(ep.gpu_index) != UCCL_OK || uccl_gpu_stream_create(&stream) != UCCL_OK) {
        printf("FAIL: rank %d: no stream on GPU %d\n", rank, ep.gpu_index);
        return 1;
    }
    mt_engine_params = &ep; /* the stream and the engine on the rank's GPU */
    return 0;
}

void ct_mem_fini(void)
{
    if (stream != NULL)
        uccl_gpu_stream_destroy(stream);
    stream = NULL;
}

static bool on_gpu(const mt_ctx_t *c, bool send)
{
    return mem == CT_MEM_GPU || (mem == CT_MEM_MIXED && (c->rank % 2 == 0) != send);
}

/* A GPU copy of len + 1 bytes of host (the byte past the end is the
 * guard the comparison checks), or NULL when it stays on the host. */
static void *stage(mt_ctx_t *c, const void *host, size_t len, bool gpu)
{
    void *d = NULL;

    if (!gpu || len == 0 || host == NULL || host == UCCL_IN_PLACE)
        return NULL;
    if (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len + 1, &d) != UCCL_OK) {
        mt_fail(c, "uccl_mem_alloc of %zu bytes", len + 1);
        return NULL;
    }
    mt_expect(c, uccl_copy(c->engine, d, host, len + 1), UCCL_OK, "uccl_copy host -> GPU");
    return d;
}

static uccl_status_t run_stream(mt_ctx_t *c, const uccl_coll_args_t *a)
{
    uccl_req_t *req = NULL;
    uccl_status_t st = uccl_coll_post_stream(c->comm, a, stream, &req);

    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req);
    mt_expect(c, uccl_gpu_stream_sync(stream), UCCL_OK, "the stream goes on");
    return st;
}

uccl_status_t ct_gpu_run(mt_ctx_t *c, ct_case_t *k, ct_mode_t mode)
{
    uccl_coll_args_t a = k->args;
    uccl_coll_plan_t *plan = NULL;
    uccl_req_t *req = NULL;
    void *ds = stage(c, k->sbuf, k->slen, on_gpu(c, true));
    void *dr = stage(c, k->rbuf, k->rlen, on_gpu(c, false));
    uccl_status_t st;

    if (ds != NULL && a.sendbuf == k->sbuf)
        a.sendbuf = ds;
    if (dr != NULL && a.recvbuf == k->rbuf)
        a.recvbuf = dr;
    if (mode == CT_STREAM) {
        st = run_stream(c, &a);
    } else if (mode == CT_BLOCKING) {
        st = uccl_coll(c->comm, &a);
    } else {
        st = mode == CT_NONBLOCKING ? uccl_coll_post(c->comm, &a, &req)
                                    : uccl_coll_init(c->comm, &a, &plan);
        if (st == UCCL_OK && plan != NULL)
            st = uccl_coll_start(plan, &req);
        if (st == UCCL_OK)
            st = uccl_wait(req, -1);
        if (req != NULL)
            uccl_req_free(req);
        if (plan != NULL)
            mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "uccl_coll_plan_free");
    }
    if (dr != NULL)
        mt_expect(c, uccl_copy(c->engine, k->rbuf, dr, k->rlen + 1), UCCL_OK,
                  "uccl_copy GPU -> host");
    /* the comm caches registrations: forget them before the memory goes */
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
    if (ds != NULL)
        uccl_mem_free(c->engine, ds);
    if (dr != NULL)
        uccl_mem_free(c->engine, dr);
    return st;
}

/* allgather of n*LEN bytes in the stream form: the producer (a copy of the
 * rank's block into the GPU send buffer, queued on the stream, lazy on the
 * fake backend) must land before the collective reads it, and the
 * consumer (a copy of the result, queued after) must wait for the result,
 * with nothing but engine progress to drive it (no wait on the request). */
#define SO_LEN 4099
void ct_stream_order(mt_ctx_t *c)
{
    int n = c->size;
    size_t rlen = (size_t)n * SO_LEN;
    uint8_t *h = malloc(SO_LEN), *back = malloc(rlen);
    void *ds = NULL, *dr = NULL, *dc = NULL;
    uccl_gpu_event_t ev = NULL;
    uccl_req_t *req = NULL;
    uccl_status_t st = UCCL_OK;
    int done = 0;

    for (size_t i = 0; i < SO_LEN; i++)
        h[i] = (uint8_t)(i * 3 + (size_t)c->rank * 41 + 1);
    if (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, SO_LEN, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dc) != UCCL_OK ||
        uccl_gpu_event_create(&ev, 0) != UCCL_OK) {
        mt_fail(c, "GPU buffers and an event");
        goto out;
    }
    mt_expect(c, uccl_gpu_memcpy_async(ds, h, SO_LEN, stream), UCCL_OK, "producer");
    st = uccl_coll_post_stream(c->comm, &(uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER,
                                                            .sendbuf = ds, .recvbuf = dr,
                                                            .count = SO_LEN},
                               stream, &req);
    mt_expect(c, st, UCCL_OK, "uccl_coll_post_stream");
    mt_expect(c, uccl_gpu_memcpy_async(dc, dr, rlen, stream), UCCL_OK, "consumer");
    mt_expect(c, uccl_gpu_event_record(ev, stream), UCCL_OK, "event after the consumer");
    if (st != UCCL_OK)
        goto out;
    /* the hold keeps the consumer queued until the collective is done (the
     * engine's hold helper thread may finish it meanwhile: then the request
     * must be done too) */
    for (int i = 0; i < 3; i++)
        if (uccl_gpu_event_query(ev) != UCCL_INPROGRESS &&
            (uccl_test(req, &done) != UCCL_OK || !done))
            mt_fail(c, "query %d: the consumer ran before the collective", i);
    done = 0;
    for (long spins = 0; !done && spins < 100000000L; spins++) {
        uccl_engine_progress(c->engine);
        st = uccl_gpu_event_query(ev);
        done = st != UCCL_INPROGRESS;
    }
    mt_expect(c, st, UCCL_OK, "the consumer ran, driven by engine progress alone");
    mt_expect(c, uccl_test(req, &done), UCCL_OK, "the collective's request");
    if (!done)
        mt_fail(c, "the stream went on before the collective's request was done");
    mt_expect(c, uccl_copy(c->engine, back, dc, rlen), UCCL_OK, "result back");
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < SO_LEN; i++)
            if (back[(size_t)r * SO_LEN + i] != (uint8_t)(i * 3 + (size_t)r * 41 + 1)) {
                mt_fail(c, "block %d byte %zu: 0x%02x (the producer's data or the result "
                           "was not waited for)", r, i, back[(size_t)r * SO_LEN + i]);
                r = n;
                break;
            }
    /* an NCCL-style caller: synchronize the stream right after the call,
     * before any wait or progress call of its own (the engine has no
     * progress thread: its hold helper thread must drive the collective,
     * else the sync waits for the hold until the fake's 60 s limit) */
    {
        uccl_req_t *r3 = NULL;
        mt_expect(c, uccl_coll_post_stream(c->comm, &(uccl_coll_args_t){
                                               .op = UCCL_COLL_ALLGATHER, .sendbuf = ds,
                                               .recvbuf = dc, .count = SO_LEN},
                                           stream, &r3),
                  UCCL_OK, "uccl_coll_post_stream, then a stream sync");
        mt_expect(c, uccl_gpu_stream_sync(stream), UCCL_OK,
                  "stream sync with no wait of ours: the hold helper progressed it");
        if (r3 != NULL) {
            mt_expect(c, uccl_test(r3, &done), UCCL_OK, "its request");
            if (!done)
                mt_fail(c, "the stream went on before the request was done");
            uccl_req_free(r3);
        }
        done = 0;
        mt_expect(c, uccl_copy(c->engine, back, dc, rlen), UCCL_OK, "result back");
        for (size_t i = 0; i < rlen; i++)
            if (back[i] != (uint8_t)((i % SO_LEN) * 3 + (i / SO_LEN) * 41 + 1)) {
                mt_fail(c, "sync-first allgather: byte %zu is 0x%02x", i, back[i]);
                break;
            }
    }
    /* detached: req NULL; a persistent plan in the stream form */
    mt_expect(c, uccl_coll_post_stream(c->comm, &(uccl_coll_args_t){.op = UCCL_COLL_BCAST,
                                                                    .recvbuf = dr, .count = rlen},
                                       stream, NULL),
              UCCL_OK, "uccl_coll_post_stream, no request");
    {
        uccl_coll_plan_t *plan = NULL;
        uccl_req_t *r2 = NULL;
        uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = ds, .recvbuf = dr,
                              .count = SO_LEN};
        mt_expect(c, uccl_coll_init(c->comm, &a, &plan), UCCL_OK, "plan");
        for (int i = 0; plan != NULL && i < 3; i++) {
            mt_expect(c, uccl_coll_start_stream(plan, stream, &r2), UCCL_OK, "start_stream");
            mt_expect(c, uccl_wait(r2, -1), UCCL_OK, "its request");
            uccl_req_free(r2);
        }
        mt_expect(c, uccl_gpu_stream_sync(stream), UCCL_OK, "stream after the plan");
        if (plan != NULL)
            mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "plan free");
    }
out:
    if (req != NULL)
        uccl_req_free(req);
    /* the detached bcast: progress until the stream has passed it */
    if (ev != NULL && uccl_gpu_event_record(ev, stream) == UCCL_OK)
        for (long spins = 0; uccl_gpu_event_query(ev) == UCCL_INPROGRESS && spins < 100000000L;
             spins++)
            uccl_engine_progress(c->engine);
    mt_uccl_barrier(c);
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
    if (ev != NULL)
        uccl_gpu_event_destroy(ev);
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
    uccl_mem_free(c->engine, dc);
    free(h);
    free(back);
}

/* GPU buffers on a comm whose engines have no GPU (so no connection moves
 * GPU memory): DIRECT's write is refused, and every rank fails with
 * UCCL_ERR_UNSUPPORTED at once (the writer tells the receiver through its
 * sink), not with a timeout. */
void ct_gpu_refused(mt_ctx_t *c)
{
    size_t len = 4096 * (size_t)c->size;
    uccl_comm_t *comm = NULL;
    void *ds = NULL, *dr = NULL;
    struct timespec t0, t1;
    uccl_status_t st;

    if (uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm) != UCCL_OK) {
        mt_fail(c, "a comm of host-only engines");
        return;
    }
    if (uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, 4096, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len, &dr) != UCCL_OK) {
        mt_fail(c, "GPU buffers");
    } else if (c->size > 1) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = uccl_coll(comm, &(uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO,
                                                 .op = UCCL_COLL_ALLGATHER, .sendbuf = ds,
                                                 .recvbuf = dr, .count = 4096,
                                                 .algo = UCCL_COLL_ALGO_DIRECT});
        clock_gettime(CLOCK_MONOTONIC, &t1);
        mt_expect(c, st, UCCL_ERR_UNSUPPORTED, "DIRECT on GPU memory without a GPU transport");
        if (t1.tv_sec - t0.tv_sec > 5)
            mt_fail(c, "the refusal took %ld s (a timeout, not the peer's word)",
                    (long)(t1.tv_sec - t0.tv_sec));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uccl_comm_destroy(comm);
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
}
/* AUTO on small blocks where every rank reaches every peer by gpu_ipc:
 * once MAPPED's setup has run (on the first call that picks it), the table
 * leaves MAPPED out, since GPU buffers would be staged through its host
 * segments (2x H200: 24-34 us a call at 4-16 KiB against 11-22 us for
 * linear's IPC copies). The verdict is the same on every rank, from the
 * setup's agreement (a comm with some peer not over gpu_ipc keeps the
 * table's choice: t_coll's layout check). */
void ct_gpu_auto_small(mt_ctx_t *c)
{
    const size_t len = 64;
    int mine = c->size > 1, all = 0;
    uint8_t *host = malloc(len * (size_t)c->size), *back = malloc(len * (size_t)c->size);
    void *ds = NULL, *dr = NULL;
    uccl_coll_algo_t algo;

    for (int j = 0; j < c->size; j++) {
        uccl_conn_attr_t attr;
        if (j != c->rank && (uccl_conn_query(uccl_comm_conn(c->comm, j), &attr) != UCCL_OK ||
                             strcmp(attr.gpu_transport, "gpu_ipc") != 0))
            mine = 0;
    }
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (host == NULL || back == NULL ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len, &ds) != UCCL_OK ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len * (size_t)c->size, &dr) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    for (size_t i = 0; i < len; i++)
        host[i] = (uint8_t)(i * 7 + (size_t)c->rank * 13 + 1);
    mt_expect(c, uccl_copy(c->engine, ds, host, len), UCCL_OK, "send buffer to the GPU");
    for (int round = 0; round < 2; round++) { /* the first may set MAPPED up */
        mt_expect(c, uccl_coll(c->comm, &(uccl_coll_args_t){.op = UCCL_COLL_ALLGATHER,
                                                            .sendbuf = ds, .recvbuf = dr,
                                                            .count = len}),
                  UCCL_OK, "AUTO allgather of 64 bytes a rank, GPU buffers");
        mt_expect(c, uccl_copy(c->engine, back, dr, len * (size_t)c->size), UCCL_OK, "result back");
        for (size_t i = 0; i < len * (size_t)c->size; i++)
            if (back[i] != (uint8_t)((i % len) * 7 + (i / len) * 13 + 1)) {
                mt_fail(c, "round %d: byte %zu is 0x%02x", round, i, back[i]);
                break;
            }
    }
    /* forced: MAPPED still runs on GPU buffers when asked for (one host) */
    if (all)
        mt_expect(c, uccl_coll(c->comm, &(uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ALGO,
                                                            .op = UCCL_COLL_ALLGATHER,
                                                            .sendbuf = ds, .recvbuf = dr,
                                                            .count = len,
                                                            .algo = UCCL_COLL_ALGO_MAPPED}),
                  UCCL_OK, "MAPPED asked for on GPU buffers");
    algo = uccl_coll_algo_select(c->comm, UCCL_COLL_ALLGATHER, len);
    if (getenv("UCCL_COLL_ALGO") == NULL && all && algo == UCCL_COLL_ALGO_MAPPED)
        mt_fail(c, "every peer over gpu_ipc, yet AUTO still picks mapped at 64 B");
    if (c->rank == 0)
        printf("# every peer over gpu_ipc: %s; AUTO at 64 B after a call: %s\n", all ? "yes" : "no",
               uccl_coll_algo_name(algo));
out:
    mt_uccl_barrier(c);
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
    free(host);
    free(back);
}
#endif

/* Shared harness of the two-process GPU transport tests (t_gpu_ipc,
 * t_gpu_staging, and the sides and checks of t_gpu_fault): checks, GPU and
 * host sides, the operation cases, and the run over GPU0->GPU1 and same
 * GPU; each program describes what differs. */
#ifndef UCCL_TESTS_GPU_GPU_TEST_H
#define UCCL_TESTS_GPU_GPU_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uccl/uccl.h>

#define GPU_TEST_OFF_A 4099 /* first region starts this far into the allocation */

/* The state of this process: one engine and one connection at a time. */
typedef struct gpu_test_state {
    int rank;     /* 0 or 1 */
    int failures; /* CHECKs failed so far */
    uccl_engine_t *eng;
    uccl_conn_t *conn;
} gpu_test_state_t;

extern gpu_test_state_t gpu_test;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            gpu_test.failures++;                                                \
            printf("[rank %d] FAIL %s:%d: ", gpu_test.rank, __FILE__, __LINE__); \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
        }                                                                       \
    } while (0)
#define CHECK_ST(call, want)                                                                   \
    do {                                                                                       \
        uccl_status_t st_ = (call);                                                            \
        CHECK(st_ == (want), "%s = %s, want %s", #call, uccl_status_name(st_), uccl_status_name(want)); \
    } while (0)

/* One side's memory: an allocation with two regions inside it. */
typedef struct gpu_test_side {
    char *buf; /* allocation */
    size_t size;
    int gpu;                                 /* 1 = device memory */
    uccl_mr_t *mr1, *mr2; /* [OFF_A, OFF_A+half), [OFF_A+half, ...) */
    size_t half;
} gpu_test_side_t;

/* What one program runs on each pair of engines. */
typedef struct gpu_test_mode {
    const size_t *gpu_sizes; /* every operation on GPU memory, at each size */
    int n_gpu_sizes;
    int big_ops;              /* read and write_notify also from 64 MiB up */
    const size_t *host_sizes; /* one-sided GPU<->host, at each size */
    int n_host_sizes;
    const char *host_range;  /* names host_sizes in the summary line */
    size_t gpu_alloc;        /* bytes of the GPU side's allocation */
    size_t host_alloc;       /* bytes of the host side's allocation */
    uint64_t need_caps;      /* engine capabilities checked after create, or 0 */
    const char *caps_name;   /* names need_caps in the failure */
    /* On the fake GPU backend (CI without a GPU): the largest transfer, and
     * the largest allocation that needs, or 0 to run every size. Larger
     * sizes are left out and this size is run once in their place. */
    size_t fake_max;
    size_t fake_gpu_alloc;
    /* Optional: runs on the GPU side after the sizes. */
    void (*after_sizes)(gpu_test_side_t *gpu, const char *name);
    /* The transport keeps write, read back, overwrite of one remote range,
     * posted together, in order (gpu_ipc does; the API does not promise it,
     * and shm and tcp staging do not). */
    int rma_in_order;
} gpu_test_mode_t;

/* Byte patterns (gpu_side.c): byte i of the pattern of seed; fill [off,
 * off+len) of a side with it, zero it, or find the first byte that differs
 * from it (-1: none). */
uint8_t gpu_test_pat(size_t i, unsigned seed);
void gpu_test_fill(const gpu_test_side_t *s, size_t off, size_t len, unsigned seed);
void gpu_test_zero(const gpu_test_side_t *s, size_t off, size_t len);
long gpu_test_check(const gpu_test_side_t *s, size_t off, size_t len, unsigned seed);
/* Allocate size bytes (device memory when gpu) and register the two
 * regions on gpu_test.eng; -1 on failure. fini deregisters and frees. */
int gpu_test_side_init(gpu_test_side_t *s, size_t size, int gpu);
void gpu_test_side_fini(gpu_test_side_t *s);
/* Both ranks: close the connection, free both sides, destroy the engine
 * (statuses checked), with a barrier before and between. */
void gpu_test_teardown(gpu_test_side_t *dev, gpu_test_side_t *host);
/* Rank 1 describes [off, off+len) of its mr1; rank 0 gets it in rd. */
void gpu_test_share_rdesc(gpu_test_side_t *s, size_t off, size_t len, uccl_rdesc_t *rd);
/* Engine on GPU gpu, connected to the peer rank (mode: need_caps only);
 * sets gpu_test.eng and gpu_test.conn; -1 on failure. */
int gpu_test_connect(int gpu, const gpu_test_mode_t *mode);
/* Waits for req (NULL after a failed post: UCCL_ERR_INVALID_HANDLE), stores
 * its byte count in bytes (may be NULL), frees it. */
uccl_status_t gpu_test_wait_free(uccl_req_t *req, size_t *bytes);
/* rank 0 sends len bytes at off of its mr1 to rank 1's mr1 at off; checked. */
void gpu_test_sendrecv(gpu_test_side_t *me, size_t len, size_t off, unsigned seed);
/* The whole program: bootstrap, skip (77) without a GPU, GPU0->GPU1 when
 * there are two, same GPU; returns the exit code. */
int gpu_test_main(int *argc, char ***argv, const gpu_test_mode_t *mode);

#endif

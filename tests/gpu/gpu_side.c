/* The GPU tests' sides (see gpu_test.h): byte patterns on GPU or host
 * memory, the two regions of a side, teardown, waiting, descriptors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "gpu/gpu.h"
#include "gpu_test.h"

#define OFF_A GPU_TEST_OFF_A
#define TMO 20000

uint8_t gpu_test_pat(size_t i, unsigned seed)
{
    return (uint8_t)(((i * 2654435761u) >> 13) ^ seed);
}

void gpu_test_fill(const gpu_test_side_t *s, size_t off, size_t len, unsigned seed)
{
    uint8_t *h = s->gpu ? malloc(len ? len : 1) : (uint8_t *)s->buf + off;

    for (size_t i = 0; i < len; i++)
        h[i] = gpu_test_pat(i, seed);
    if (s->gpu) {
        uccl_gpu_memcpy(s->buf + off, h, len);
        free(h);
    }
}

void gpu_test_zero(const gpu_test_side_t *s, size_t off, size_t len)
{
    if (s->gpu)
        uccl_gpu_memset(s->buf + off, 0, len);
    else
        memset(s->buf + off, 0, len);
}

/* Index of the first wrong byte, or -1. */
long gpu_test_check(const gpu_test_side_t *s, size_t off, size_t len, unsigned seed)
{
    uint8_t *h = s->gpu ? malloc(len ? len : 1) : (uint8_t *)s->buf + off;
    long bad = -1;

    if (s->gpu)
        uccl_gpu_memcpy(h, s->buf + off, len);
    for (size_t i = 0; i < len && bad < 0; i++)
        if (h[i] != gpu_test_pat(i, seed))
            bad = (long)i;
    if (s->gpu)
        free(h);
    return bad;
}

int gpu_test_side_init(gpu_test_side_t *s, size_t size, int gpu)
{
    memset(s, 0, sizeof(*s));
    s->size = size;
    s->gpu = gpu;
    s->half = (size - OFF_A) / 2;
    if (gpu ? uccl_gpu_malloc((void **)&s->buf, size) != UCCL_OK : (s->buf = malloc(size)) == NULL)
        return -1;
    if (uccl_mr_reg(gpu_test.eng, s->buf + OFF_A, s->half, 0, &s->mr1) != UCCL_OK ||
        uccl_mr_reg(gpu_test.eng, s->buf + OFF_A + s->half, s->half, 0, &s->mr2) != UCCL_OK)
        return -1;
    return 0;
}

void gpu_test_side_fini(gpu_test_side_t *s)
{
    CHECK_ST(uccl_mr_dereg(s->mr1), UCCL_OK);
    CHECK_ST(uccl_mr_dereg(s->mr2), UCCL_OK);
    if (s->gpu)
        uccl_gpu_free(s->buf);
    else
        free(s->buf);
}

void gpu_test_teardown(gpu_test_side_t *dev, gpu_test_side_t *host)
{
    boot_barrier(gpu_test.eng);
    CHECK_ST(uccl_conn_close(gpu_test.conn), UCCL_OK);
    gpu_test_side_fini(dev);
    gpu_test_side_fini(host);
    boot_barrier(NULL);
    CHECK_ST(uccl_engine_destroy(gpu_test.eng), UCCL_OK);
}

/* A failed post leaves req NULL: report that instead of waiting on nothing. */
uccl_status_t gpu_test_wait_free(uccl_req_t *req, size_t *bytes)
{
    uccl_status_t st;

    if (req == NULL)
        return UCCL_ERR_INVALID_HANDLE;
    st = uccl_wait(req, TMO);

    if (bytes != NULL)
        uccl_req_bytes(req, bytes);
    uccl_req_free(req);
    return st;
}

/* Rank 1 describes [off, off+len) of its mr1 to gpu_test.rank 0. */
void gpu_test_share_rdesc(gpu_test_side_t *s, size_t off, size_t len, uccl_rdesc_t *rd)
{
    uccl_rdesc_t mine;

    memset(&mine, 0, sizeof(mine));
    if (gpu_test.rank == 1)
        CHECK_ST(uccl_mr_pack(s->mr1, off, len, &mine), UCCL_OK);
    boot_xchg(gpu_test.eng, &mine, rd, sizeof(*rd));
}

/* More cases of the direct stream path (coll/stream.c) in t_coll_gpu:
 * a wide comm. Stubs in t_coll. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_test.h"
#ifdef T_COLL_GPU
#include "gpu/gpu.h"
#endif

#ifndef T_COLL_GPU
void ct_stream_wide(mt_ctx_t *c) { (void)c; }
#else

static uint8_t pat(int r, int call, size_t k)
{
    return (uint8_t)(r * 37 + call * 11 + (int)k * 5 + 3);
}

/* rlen bytes of an allgather of call's blocks (len bytes each) at dev, as expected. */
static void check_gather(mt_ctx_t *c, const void *dev, size_t len, int call, const char *what)
{
    size_t rlen = (size_t)c->size * len;
    uint8_t *back = malloc(rlen);

    if (back == NULL || uccl_copy(c->engine, back, dev, rlen) != UCCL_OK) {
        mt_fail(c, "%s: the result back", what);
        free(back);
        return;
    }
    for (size_t k = 0; k < rlen; k++)
        if (back[k] != pat((int)(k / len), call, k % len)) {
            mt_fail(c, "%s: byte %zu (rank %zu's block): 0x%02x, want 0x%02x", what, k, k / len, back[k],
                    pat((int)(k / len), call, k % len));
            break;
        }
    free(back);
}

/* A GPU buffer of len bytes holding call's pattern for this rank. */
static void *send_buf(mt_ctx_t *c, size_t len, int call)
{
    uint8_t *h = malloc(len);
    void *d = NULL;

    if (h == NULL || uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, len, &d) != UCCL_OK) {
        free(h);
        return NULL;
    }
    for (size_t k = 0; k < len; k++)
        h[k] = pat(c->rank, call, k);
    if (uccl_copy(c->engine, d, h, len) != UCCL_OK) {
        uccl_mem_free(c->engine, d);
        d = NULL;
    }
    free(h);
    return d;
}

/* An allgather on the test's stream, every peer on the direct path, where
 * every rank writes into every peer and waits for every peer: the most
 * stream operations a call enqueues (coll-gpu-stream-np8.sh: 8 ranks,
 * as on a host of 8 GPUs). Bytes compared, twice (an exchange, a hit). */
#define WIDE_LEN 1024
void ct_stream_wide(mt_ctx_t *c)
{
    size_t rlen = (size_t)c->size * WIDE_LEN;
    void *ds = NULL, *dr = NULL, *s = ct_stream();
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .count = WIDE_LEN};
    uccl_coll_stats_t s0, s1;

    if (!ct_fake_direct(c, "stream form, every peer written and waited for"))
        return;
    if ((ds = send_buf(c, WIDE_LEN, 5)) == NULL ||
        uccl_mem_alloc(c->engine, UCCL_MEM_CUDA, rlen, &dr) != UCCL_OK) {
        mt_fail(c, "buffers");
        goto out;
    }
    a.sendbuf = ds;
    a.recvbuf = dr;
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s0), UCCL_OK, "stats");
    for (int i = 0; i < 2; i++) {
        mt_expect(c, uccl_gpu_memset(dr, 0, rlen), UCCL_OK, "receive buffer cleared");
        mt_expect(c, uccl_coll_post_stream(c->comm, &a, s, NULL), UCCL_OK, "uccl_coll_post_stream");
        mt_expect(c, uccl_gpu_stream_sync(s), UCCL_OK, "stream");
        check_gather(c, dr, WIDE_LEN, 5, i == 0 ? "first call" : "second call");
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mt_expect(c, uccl_comm_coll_stats(c->comm, &s1), UCCL_OK, "stats");
    if (s1.stream_direct - s0.stream_direct != 2)
        mt_fail(c, "%llu of 2 calls took the direct path",
                (unsigned long long)(s1.stream_direct - s0.stream_direct));
out:
    mt_uccl_barrier(c);
    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
    uccl_mem_free(c->engine, ds);
    uccl_mem_free(c->engine, dr);
}
#endif

/* Two engines connected over the ofi transport, each with an AREA-byte
 * registered host buffer (pa in P.a's ma, pb in P.b's mb), for the ofi unit
 * tests of one protocol path (test_ofi_tmsg, test_ofi_direct, test_ofi_unexp). Include after
 * tp/ofi/ofi.h, unit.h and unit_conn.h, with AREA defined. */
#ifndef UCCL_TEST_OFI_PAIR_H
#define UCCL_TEST_OFI_PAIR_H

#include <stdlib.h>
#include <string.h>

extern const struct uccl_tp_ops uccl_tp_ofi_ops;

static unit_pair_t P;
static uint8_t *pa, *pb;
static uccl_mr_t *ma, *mb;

static tp_ofi_t *ofi_of(uccl_engine_t *e)
{
    for (int i = 0; i < e->ntp; i++)
        if (e->tp[i]->ops == &uccl_tp_ofi_ops)
            return (tp_ofi_t *)e->tp[i];
    return NULL;
}

/* env: setting names and values in turn, then NULL; set while the pair
 * opens. false: the provider is not usable here (the caller skips). */
static bool ofi_pair_open(const char *const *env)
{
    uccl_status_t st;

    for (int i = 0; env[i] != NULL; i += 2)
        setenv(env[i], env[i + 1], 1);
    st = unit_pair_open("ofi", &P);
    for (int i = 0; env[i] != NULL; i += 2)
        unsetenv(env[i]);
    if (st != UCCL_OK)
        return false;
    pa = aligned_alloc(4096, AREA);
    pb = aligned_alloc(4096, AREA);
    CU_ASSERT_FATAL(pa != NULL && pb != NULL);
    UNIT_ASSERT_STATUS(uccl_mr_reg(P.a, pa, AREA, 0, &ma), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(P.b, pb, AREA, 0, &mb), UCCL_OK);
    return true;
}

/* rounds progress calls of each engine in turn. */
static void ofi_pair_progress(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        uccl_engine_progress(P.a);
        uccl_engine_progress(P.b);
    }
}

/* A window of n sends of len bytes with one tag from P.a to P.b, each its
 * own bytes at i * stride of pa, into n receives posted first at i * stride
 * of pb (zeroed): reqs[0..n) the sends, reqs[n..2n) the receives. */
static inline void ofi_pair_post_window(uccl_req_t **reqs, int n, size_t len, size_t stride, uint64_t tag)
{
    for (int i = 0; i < n; i++)
        unit_fill(pa + (size_t)i * stride, len, 100u + (unsigned)i);
    memset(pb, 0, AREA);
    for (int i = 0; i < n; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * stride, len, tag, &reqs[n + i]), UCCL_OK);
    for (int i = 0; i < n; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * stride, len, tag, &reqs[i]), UCCL_OK);
}

/* After the window's requests completed: each message in its own receive. */
static inline void ofi_pair_check_window(int n, size_t len, size_t stride)
{
    for (int i = 0; i < n; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * stride, pa + (size_t)i * stride, len) == 0);
}

static void ofi_pair_close(void)
{
    uccl_mr_dereg(ma);
    uccl_mr_dereg(mb);
    free(pa);
    free(pb);
    unit_pair_close(&P);
}

#endif

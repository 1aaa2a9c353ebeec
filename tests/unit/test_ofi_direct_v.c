/* Direct sends of several pieces (uccl_sendv into uccl_recvv, ofi_direct.c)
 * on shm and tcp;ofi_rxm, receives posted one message ahead
 * (UCCL_OFI_DIRECT_DEPTH=1) and 16 ahead: messages of 2, 3, 4 and 8 pieces
 * into receives of as many pieces cut elsewhere, the receives posted before
 * the sends and after them (the sends waiting in the provider). Sends of up
 * to UCCL_OFI_MAX_IOV pieces (the provider's iov_limit) go directly, longer
 * ones by the rendezvous. Every message in its receive byte for byte, the
 * bytes around the pieces untouched, within UNIT_TIMEOUT_MS (a stall fails
 * the test, never hangs it). Session 13 kept direct sends to one piece after
 * a 3-piece one stalled shm in t_p2p (libfabric 1.17). */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (8u << 20)
#define MSG (64u * 1024 + 5) /* above the eager limit, below UCCL_OFI_DIRECT_MAX */
#define N 6
#define STRIDE (AREA / 8)
#define MAXP 8

#include "ofi_pair.h"

static const char *const provs[] = {"shm", "tcp;ofi_rxm"};

/* Message i cut into np pieces at base + i * STRIDE: piece j starts 4099 * j
 * + skew bytes past the previous piece's end (gaps stay untouched), the
 * first np - 1 pieces len / (2 np) + j * 97 + skew bytes, the last the rest. */
static int cut(uccl_iov_t *iov, uccl_mr_t *mr, int i, int np, size_t skew)
{
    size_t off = (size_t)i * STRIDE + skew, left = MSG;

    for (int j = 0; j < np; j++) {
        size_t len = j + 1 < np ? MSG / (2 * (size_t)np) + (size_t)j * 97 + skew : left;

        iov[j] = (uccl_iov_t){mr, off, len};
        left -= len;
        off += len + 4099 * (size_t)(j + 1) + skew;
    }
    return np;
}

/* The bytes of message i, piece by piece, against what landed. */
static void check_bytes(int np)
{
    uccl_iov_t s[MAXP], r[MAXP];
    uint8_t *want = malloc(MSG), *got = malloc(MSG);
    size_t at;

    CU_ASSERT_FATAL(want != NULL && got != NULL);
    for (int i = 0; i < N; i++) {
        cut(s, ma, i, np, 1);
        cut(r, mb, i, np, 3);
        at = 0;
        for (int j = 0; j < np; j++) {
            memcpy(want + at, pa + s[j].off, s[j].len);
            at += s[j].len;
        }
        at = 0;
        for (int j = 0; j < np; j++) {
            memcpy(got + at, pb + r[j].off, r[j].len);
            at += r[j].len;
            /* the gap after each piece stays zero */
            CU_ASSERT(pb[r[j].off + r[j].len] == 0 && pb[r[j].off + r[j].len + 4098] == 0);
        }
        CU_ASSERT(memcmp(want, got, MSG) == 0);
    }
    free(want);
    free(got);
}

/* N messages of np pieces, receives posted first or after the sends wait. */
static bool check_v(int np, bool recv_first)
{
    tp_ofi_t *ta = ofi_of(P.a), *tb = ofi_of(P.b);
    uint64_t sent = ta->direct_sent, placed = tb->direct_placed;
    uccl_req_t *reqs[2 * N];
    uccl_iov_t iov[MAXP];
    uccl_status_t st;

    unit_fill(pa, AREA, 500u + (unsigned)np);
    memset(pb, 0, AREA);
    for (int k = 0; k < 2; k++) {
        bool recvs = (k == 0) == recv_first;

        for (int i = 0; i < N; i++) {
            if (recvs)
                UNIT_ASSERT_STATUS(uccl_recvv(P.ba, iov, cut(iov, mb, i, np, 3), 21, &reqs[N + i]),
                                   UCCL_OK);
            else
                UNIT_ASSERT_STATUS(uccl_sendv(P.ab, iov, cut(iov, ma, i, np, 1), 21, &reqs[i]),
                                   UCCL_OK);
        }
        if (!recv_first && k == 0)
            ofi_pair_progress(2000); /* the sends reach B before its receives */
    }
    st = unit_drive(&P, reqs, 2 * N, UNIT_TIMEOUT_MS);
    UNIT_ASSERT_STATUS(st, UCCL_OK); /* UCCL_ERR_TIMEOUT: a stall */
    if (st != UCCL_OK)
        return false; /* the pair is torn down with its requests */
    for (int i = 0; i < 2 * N; i++) {
        size_t bytes = 0;

        UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[i], &bytes), UCCL_OK);
        CU_ASSERT_EQUAL(bytes, MSG);
        uccl_req_free(reqs[i]);
    }
    check_bytes(np);
    /* up to the provider's iov_limit pieces: every message went directly */
    CU_ASSERT_EQUAL(ta->direct_sent - sent, np <= ta->cfg.max_iov ? (uint64_t)N : 0);
    /* receives posted first with room for the bounce after their pieces:
     * every message straight into its receive's pieces */
    if (recv_first && np < tb->cfg.max_iov)
        CU_ASSERT_EQUAL(tb->direct_placed - placed, (uint64_t)N);
    return true;
}

static void test_v(const char *depth)
{
    static const int pieces[] = {2, 3, 4, 8};

    for (int p = 0; p < 2; p++) {
        const char *env[] = {"UCCL_OFI_PROVIDER", provs[p], "UCCL_OFI_DIRECT", "1",
                             "UCCL_OFI_DIRECT_DEPTH", depth, NULL};

        if (!ofi_pair_open(env)) {
            fprintf(stderr, "libfabric's %s provider is not usable here: skipped\n", provs[p]);
            continue;
        }
        /* the 8-piece case is the rendezvous only where the provider takes fewer */
        CU_ASSERT(ofi_of(P.a)->cfg.max_iov >= 2);
        for (int k = 0; k < 8; k++) {
            int np = pieces[k / 2];

            if (!check_v(np, k % 2 == 0)) {
                fprintf(stderr, "\n    %s, depth %s: %d pieces, receives %s: stalled\n",
                        provs[p], depth, np, k % 2 == 0 ? "first" : "after the sends");
                break; /* the connection is not usable after a stall */
            }
        }
        ofi_pair_close();
    }
}

static void test_v_depth1(void)
{
    test_v("1");
}

static void test_v_depth16(void)
{
    test_v("16");
}

static CU_TestInfo v_tests[] = {
    {"sendv/recvv of 2-8 pieces, depth 1 (shm, tcp;ofi_rxm)", test_v_depth1},
    {"sendv/recvv of 2-8 pieces, depth 16 (shm, tcp;ofi_rxm)", test_v_depth16},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_direct_v", NULL, NULL, NULL, NULL, v_tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

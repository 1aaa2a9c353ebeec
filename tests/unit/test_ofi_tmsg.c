/* The ofi transport's tagged rendezvous (ofi_tmsg.c, RTS_TMSG), byte for
 * byte on tcp;ofi_rxm and shm: a send above UCCL_OFI_EAGER from one piece
 * into a receive posted first or after the RTS_TMSG was held; a window of
 * sends with one tag, in order, each into its own buffer; a receive of
 * more pieces than one operation takes (the bounce, copied, the bytes
 * next to each piece untouched); a send of more pieces than one operation
 * takes (falls back to CTS + write); UCCL_OFI_TAGGED=0 (CTS + write, shm); the
 * setting left unset or -1 (the quirk table: push here), 2 and -2 refused. Which
 * path ran is checked by the transport's operation counters. */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (8u << 20)
#define MSG (200u * 1024 + 3) /* above the eager limit, odd */
#define WINDOW 8
#define MANY (OFI_IOV_MAX + 3) /* pieces: more than any provider's operation takes here */

#include "ofi_pair.h"

static bool open_pair(const char *prov, const char *tagged)
{
    /* UCCL_OFI_DIRECT=0: shm's default would send these directly */
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, "UCCL_OFI_TAGGED", tagged,
                         "UCCL_OFI_DIRECT", "0", NULL};
    return ofi_pair_open(env);
}

static void drive(uccl_req_t **reqs, size_t n)
{
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, n, UNIT_TIMEOUT_MS), UCCL_OK);
    for (size_t i = 0; i < n; i++) {
        UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), UCCL_OK);
        uccl_req_free(reqs[i]);
    }
}

/* Pieces of len bytes in all over n pieces at off, a gap of 3 bytes after each. */
static void pieces(uccl_mr_t *mr, size_t off, size_t len, int n, uccl_iov_t *iov)
{
    for (int i = 0; i < n; i++) {
        size_t l = i + 1 == n ? len - (len / (size_t)n) * (size_t)(n - 1) : len / (size_t)n;

        iov[i] = (uccl_iov_t){mr, off, l};
        off += l + 3;
    }
}

/* A's nsend pieces to B's nrecv pieces, the receive posted first or once
 * the RTS was held; bytes compared, the gaps untouched. tagged: the tagged
 * path is expected (else CTS + write). */
static void check_one(int nsend, int nrecv, bool unexpected, bool tagged)
{
    tp_ofi_t *ta = ofi_of(P.a), *tb = ofi_of(P.b);
    uint64_t ta0 = ta->tmsg_posted, tb0 = tb->tmsg_posted, wa0 = ta->rma_posted;
    uccl_iov_t siov[MANY], riov[MANY];
    uccl_req_t *reqs[2];
    size_t at = 0, got = 0;
    static uint8_t flat[MSG];

    pieces(ma, 5, MSG, nsend, siov);
    pieces(mb, 9, MSG, nrecv, riov);
    unit_fill(pa, AREA, (unsigned)(nsend * 31 + nrecv));
    memset(pb, 0xee, AREA);
    if (!unexpected)
        UNIT_ASSERT_STATUS(uccl_recvv(P.ba, riov, nrecv, 4, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_sendv(P.ab, siov, nsend, 4, &reqs[0]), UCCL_OK);
    if (unexpected) {
        ofi_pair_progress(200); /* the RTS reaches B, held */
        UNIT_ASSERT_STATUS(uccl_recvv(P.ba, riov, nrecv, 4, &reqs[1]), UCCL_OK);
    }
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[1], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[1], &got), UCCL_OK);
    CU_ASSERT_EQUAL(got, MSG);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
    for (int i = 0; i < nsend; i++) /* A's pieces gathered */
        for (size_t k = 0; k < siov[i].len; k++)
            flat[at++] = pa[siov[i].off + k];
    at = 0;
    for (int i = 0; i < nrecv; i++) { /* equal B's pieces in order, nothing past each */
        CU_ASSERT(memcmp(pb + riov[i].off, flat + at, riov[i].len) == 0);
        CU_ASSERT_EQUAL(pb[riov[i].off + riov[i].len], 0xee);
        at += riov[i].len;
    }
    CU_ASSERT_EQUAL(pb[riov[0].off - 1], 0xee);
    CU_ASSERT_EQUAL(ta->tmsg_posted - ta0, tagged ? 1u : 0u);
    CU_ASSERT_EQUAL(tb->tmsg_posted - tb0, tagged ? 1u : 0u);
    CU_ASSERT_EQUAL(ta->rma_posted > wa0, !tagged);
}

/* WINDOW sends with one tag, each of its own bytes, into WINDOW receives
 * posted first: matched in order, each message in its own receive. */
static void check_window(void)
{
    uccl_req_t *reqs[2 * WINDOW];
    size_t stride = AREA / WINDOW;

    ofi_pair_post_window(reqs, WINDOW, MSG, stride, 6);
    drive(reqs, 2 * WINDOW);
    ofi_pair_check_window(WINDOW, MSG, stride);
}

/* push: also once with UCCL_OFI_TAGGED=0 (CTS + write; on shm only: a
 * second tcp;ofi_rxm pair costs a second, and the setting is the same) */
static void check_provider(const char *prov, bool push)
{
    if (!open_pair(prov, "1"))
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    CU_ASSERT_FATAL(ofi_of(P.a) != NULL && ofi_of(P.a)->cfg.max_iov < MANY);
    check_one(1, 1, false, true);
    check_one(1, 1, true, true);
    check_one(2, 1, true, true);
    check_one(1, MANY, false, true); /* into a bounce, copied */
    check_one(1, MANY, true, true);
    check_one(MANY, 2, false, false); /* too many pieces: CTS + write */
    check_window();
    ofi_pair_close();
    if (!push)
        return;
    if (!open_pair(prov, "0"))
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    check_one(1, 1, false, false);
    check_one(1, 1, true, false);
    ofi_pair_close();
}

static void test_tmsg_tcp(void)
{
    check_provider("tcp;ofi_rxm", false);
}

static void test_tmsg_shm(void)
{
    check_provider("shm", true);
}

static void test_tmsg_setting(void)
{
    static const char *const bad[] = {"2", "-2"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uccl_engine_t *e = NULL;

        setenv("UCCL_OFI_PROVIDER", "tcp;ofi_rxm", 1);
        setenv("UCCL_OFI_TAGGED", bad[i], 1);
        UNIT_ASSERT_STATUS(unit_engine_create("ofi", &e), UCCL_ERR_INVALID_PARAM);
        CU_ASSERT(e == NULL);
        unsetenv("UCCL_OFI_TAGGED");
        unsetenv("UCCL_OFI_PROVIDER");
    }
}

/* UCCL_OFI_TAGGED unset (-1): the provider's quirk row chooses (push on
 * both providers here: tests/perf/results/ofi/s12-README.md); 0 and 1 force
 * either (2 and -2 are refused: test_tmsg_setting). */
static void quirk_choice(const char *prov, const char *tagged, bool want)
{
    uccl_engine_t *e = NULL;
    uccl_status_t st;

    setenv("UCCL_OFI_PROVIDER", prov, 1);
    if (tagged != NULL)
        setenv("UCCL_OFI_TAGGED", tagged, 1);
    else
        unsetenv("UCCL_OFI_TAGGED");
    st = unit_engine_create("ofi", &e);
    CU_ASSERT(st != UCCL_ERR_INVALID_PARAM); /* every value here is a valid setting */
    if (st != UCCL_OK) {
        unsetenv("UCCL_OFI_TAGGED");
        unsetenv("UCCL_OFI_PROVIDER");
        if (st != UCCL_ERR_INVALID_PARAM)
            UNIT_SKIP("libfabric's %s provider is not usable here", prov);
        return;
    }
    CU_ASSERT_FATAL(ofi_of(e) != NULL);
    CU_ASSERT(ofi_of(e)->tmsg == want);
    uccl_engine_destroy(e);
    unsetenv("UCCL_OFI_TAGGED");
    unsetenv("UCCL_OFI_PROVIDER");
}

static void test_tmsg_default(void)
{
    quirk_choice("shm", NULL, false);
    quirk_choice("tcp;ofi_rxm", NULL, false);
    quirk_choice("shm", "-1", false);
    quirk_choice("shm", "1", true);
    quirk_choice("shm", "0", false);
    quirk_choice("tcp;ofi_rxm", "1", true);
}

static CU_TestInfo tmsg_tests[] = {
    {"UCCL_OFI_TAGGED=2 or -2 -> INVALID_PARAM", test_tmsg_setting},
    {"UCCL_OFI_TAGGED unset or -1: the quirk table's row (push here)", test_tmsg_default},
    {"tagged rendezvous, byte-verified: tcp;ofi_rxm", test_tmsg_tcp},
    {"tagged rendezvous, byte-verified: shm", test_tmsg_shm},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_tmsg", NULL, NULL, NULL, NULL, tmsg_tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

/* The shared rendezvous protocol (src/tp/common/rndv.c) as ofi runs it, on
 * shm and tcp;ofi_rxm, direct sends and the tagged rendezvous off (RTS,
 * CTS, writes closed by immediates): a receive matched to an RTS that cannot
 * take the message (here: every receive id of the receiver's endpoint in
 * use, UCCL_RNDV_ID_INDEX_BITS) fails, and so does the send, which was left
 * waiting for a CTS for ever before (a FIN naming its send id now tells
 * it); the connection then still carries a rendezvous message byte for
 * byte; and a late FIN naming a receive id whose slot now serves another
 * receive leaves that one alone (it ended it before its data came, with
 * UCCL_OK, and the data's immediate then failed the connection). Every wait
 * is bounded (UNIT_TIMEOUT_MS): a stall fails the test. */
#include <stdlib.h>
#include <string.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (1u << 20)
#define MSG (64u * 1024 + 5) /* above the eager limit */

#include "ofi_pair.h"

static const char *const provs[] = {"shm", "tcp;ofi_rxm"};

static bool open_rndv_pair(const char *prov)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, "UCCL_OFI_DIRECT", "0",
                         "UCCL_OFI_TAGGED", "0", NULL};
    return ofi_pair_open(env);
}

/* The receiver's one ofi endpoint. */
static tp_ofi_ep_t *ep_b(void)
{
    tp_ofi_t *tb = ofi_of(P.b);

    CU_ASSERT_FATAL(tb != NULL && !uccl_list_empty(&tb->eps));
    return uccl_container_of(tb->eps.next, tp_ofi_ep_t, link);
}

/* One message of len bytes A -> B (receive posted after the send was
 * progressed: the RTS waits in the core), both statuses returned. */
static uccl_status_t one_msg(size_t len, uccl_status_t *send_st, uccl_status_t *recv_st)
{
    uccl_req_t *reqs[2];
    uccl_status_t st;

    unit_fill(pa, len, 77);
    memset(pb, 0, len);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, len, 5, &reqs[0]), UCCL_OK);
    ofi_pair_progress(200);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, len, 5, &reqs[1]), UCCL_OK);
    st = unit_drive(&P, reqs, 2, UNIT_TIMEOUT_MS);
    if (st != UCCL_OK)
        return st; /* the pair is torn down with its requests */
    *send_st = uccl_wait(reqs[0], 0);
    *recv_st = uccl_wait(reqs[1], 0);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
    return UCCL_OK;
}

static void check_refused(void)
{
    static int dummy;
    uccl_idmap_t *ids = &ep_b()->rndv.ids;
    uint64_t *held = malloc(sizeof(uint64_t) << UCCL_RNDV_ID_INDEX_BITS);
    uccl_status_t st, sst = UCCL_OK, rst = UCCL_OK;
    size_t n = 0;

    CU_ASSERT_FATAL(held != NULL);
    /* what 2^17 receives waiting for their data would hold */
    while (uccl_idmap_insert(ids, &dummy, &held[n]) == UCCL_OK)
        n++;
    CU_ASSERT_EQUAL(n, (size_t)1 << UCCL_RNDV_ID_INDEX_BITS);
    st = one_msg(MSG, &sst, &rst);
    UNIT_ASSERT_STATUS(st, UCCL_OK); /* UCCL_ERR_TIMEOUT: the send waited for a CTS */
    for (size_t i = 0; i < n; i++)
        uccl_idmap_remove(ids, held[i]);
    free(held);
    if (st != UCCL_OK)
        return;
    UNIT_ASSERT_STATUS(rst, UCCL_ERR_NO_MEMORY);
    UNIT_ASSERT_STATUS(sst, UCCL_ERR_NO_MEMORY);
    /* ids free again: the connection carries the next message */
    UNIT_ASSERT_STATUS(one_msg(MSG, &sst, &rst), UCCL_OK);
    UNIT_ASSERT_STATUS(sst, UCCL_OK);
    UNIT_ASSERT_STATUS(rst, UCCL_OK);
    CU_ASSERT(memcmp(pa, pb, MSG) == 0);
}

/* The id of B's first receive waiting for its data, after its CTS. */
static uint64_t first_waiting_id(void)
{
    uccl_rndv_t *r = &ep_b()->rndv;

    if (uccl_list_empty(&r->recv_wait_fin))
        return 0;
    return uccl_list_first(&r->recv_wait_fin, uccl_req_t, tp_link)->tp_data[UCCL_RNDV_RD_ID];
}

/* A late FIN (a verbs sender closes a write whose lane failed with FIN
 * {receive id, len, UCCL_OK}, though its immediates may all have come and
 * ended the receive) naming a receive that ended, after LATE_ROUNDS other
 * rendezvous receives (B's ids in 64 slots, reused oldest first): it must
 * not end the receive that now has that id (25-bit ids came round after
 * 64 * 255), whose data is not there yet. */
#define LATE_ROUNDS (64 * 255 - 1) /* the ids given in between */
#define LATE_WIN 32
#define LATE_LEN (8u * 1024 + 8) /* above the eager limit and shm's inject size */

static void check_late_fin(void)
{
    uccl_req_t *reqs[2 * LATE_WIN];
    uint64_t old_id = 0, id = 0;
    int done = 0;
    uccl_status_t st = UCCL_OK;

    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, LATE_LEN, 5, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, LATE_LEN, 5, &reqs[0]), UCCL_OK);
    for (int i = 0; i < 1000 && old_id == 0; i++) {
        uccl_engine_progress(P.a);
        uccl_engine_progress(P.b);
        old_id = first_waiting_id();
    }
    CU_ASSERT_FATAL(old_id != 0);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
    for (int left = LATE_ROUNDS, n; left > 0 && st == UCCL_OK; left -= n) {
        n = left < LATE_WIN ? left : LATE_WIN;
        ofi_pair_post_window(reqs, n, LATE_LEN, LATE_LEN, 6);
        st = unit_drive(&P, reqs, 2 * (size_t)n, UNIT_TIMEOUT_MS);
        for (int i = 0; i < 2 * n && st == UCCL_OK; i++) {
            UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), UCCL_OK);
            uccl_req_free(reqs[i]);
        }
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    if (st != UCCL_OK)
        return;
    /* the next message: its RTS, B's CTS; A does not see the CTS yet */
    unit_fill(pa, LATE_LEN, 91);
    memset(pb, 0, LATE_LEN);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, LATE_LEN, 7, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, LATE_LEN, 7, &reqs[0]), UCCL_OK);
    uccl_engine_progress(P.a);
    for (int i = 0; i < 1000 && id == 0; i++) {
        uccl_engine_progress(P.b);
        id = first_waiting_id();
    }
    CU_ASSERT_FATAL(id != 0);
    /* the old receive's slot (with 25-bit ids: its very id) */
    CU_ASSERT_EQUAL(id & ((1u << UCCL_RNDV_ID_INDEX_BITS) - 1),
                    old_id & ((1u << UCCL_RNDV_ID_INDEX_BITS) - 1));
    /* the late FIN, as A's rndv sends one */
    UNIT_ASSERT_STATUS(uccl_rndv_ctrl_send(&uccl_container_of(ofi_of(P.a)->eps.next, tp_ofi_ep_t,
                                                              link)->rndv,
                                           UCCL_RNDV_MSG_FIN, UCCL_OK, old_id, LATE_LEN, 0, NULL),
                       UCCL_OK);
    /* B takes the FIN; its receive's data is not there (A has not seen the CTS) */
    for (int i = 0; i < 1000 && !done; i++) {
        uccl_engine_progress(P.b);
        uccl_test(reqs[1], &done);
    }
    CU_ASSERT(!done);
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[0], 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(reqs[1], 0), UCCL_OK);
    uccl_req_free(reqs[0]);
    uccl_req_free(reqs[1]);
    CU_ASSERT(memcmp(pa, pb, LATE_LEN) == 0); /* not ended before its data came */
    UNIT_ASSERT_STATUS(uccl_conn_status(P.ba), UCCL_OK);
}

static void test_late_fin(void)
{
    if (!open_rndv_pair("shm")) {
        fprintf(stderr, "libfabric's shm provider is not usable here: skipped\n");
        return;
    }
    check_late_fin();
    ofi_pair_close();
}

static void test_refused(void)
{
    for (int i = 0; i < 2; i++) {
        if (!open_rndv_pair(provs[i])) {
            fprintf(stderr, "libfabric's %s provider is not usable here: skipped\n", provs[i]);
            continue;
        }
        check_refused();
        ofi_pair_close();
    }
}

static CU_TestInfo rndv_tests[] = {
    {"receive refused after its RTS: the send fails too (shm, tcp;ofi_rxm)", test_refused},
    {"a late FIN for a receive id used again (shm)", test_late_fin},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_rndv", NULL, NULL, NULL, NULL, rndv_tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

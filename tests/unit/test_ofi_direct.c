/* The ofi transport's direct sends (ofi_direct.c, UCCL_OFI_DIRECT), byte for
 * byte on shm and tcp;ofi_rxm: a send above UCCL_OFI_EAGER as one tagged
 * message placed straight into a receive posted first, or posted after the
 * message waited in the provider; a window of sends with one tag, each in
 * its own receive; messages whose receives are posted in another order
 * than their tags came (through the bounce, matched as the core says); a
 * message longer than the first receive of its tag (that one fails
 * TRUNCATED, the next gets the message whole); UCCL_OFI_DIRECT=0; the
 * default by provider; receives posted for the next messages ahead
 * (UCCL_OFI_DIRECT_DEPTH), also when the core gives a message landed ahead
 * to another receive, and left alone while nothing changes; bad settings
 * refused. Which path ran is checked by the transport's counters. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp/ofi/ofi.h"
#include "unit.h"
#include "core/core.h"
#include "unit_conn.h"

#define AREA (8u << 20)
#define MSG (200u * 1024 + 3) /* above the eager limit, below UCCL_OFI_DIRECT_MAX, odd */
#define WINDOW 8
#define STRIDE (AREA / WINDOW)

#include "ofi_pair.h"

/* wait: UCCL_OFI_DIRECT_WAIT (microseconds before the bounce receive) */
static bool open_pair(const char *prov, const char *direct, const char *wait)
{
    const char *env[] = {"UCCL_OFI_PROVIDER", prov, "UCCL_OFI_DIRECT", direct,
                         "UCCL_OFI_DIRECT_WAIT", wait, NULL};
    return ofi_pair_open(env);
}

/* Drive reqs to completion; check each status and received length (0: skip). */
static void drive(uccl_req_t **reqs, size_t n, const uccl_status_t *want, const size_t *bytes)
{
    UNIT_ASSERT_STATUS(unit_drive(&P, reqs, n, UNIT_TIMEOUT_MS), UCCL_OK);
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;

        UNIT_ASSERT_STATUS(uccl_wait(reqs[i], 0), want != NULL ? want[i] : UCCL_OK);
        if (bytes != NULL && bytes[i] > 0) {
            UNIT_ASSERT_STATUS(uccl_req_bytes(reqs[i], &got), UCCL_OK);
            CU_ASSERT_EQUAL(got, bytes[i]);
        }
        uccl_req_free(reqs[i]);
    }
}

/* One message of MSG bytes, its receive posted first or once the message
 * waited in the provider (B progressing, no receive): placed in either case
 * (the bounce receive is a second away). */
static void check_one(bool late)
{
    tp_ofi_t *ta = ofi_of(P.a), *tb = ofi_of(P.b);
    uint64_t sent = ta->direct_sent, placed = tb->direct_placed, wa = ta->rma_posted;
    uccl_req_t *reqs[2];
    size_t bytes[2] = {0, MSG};

    unit_fill(pa, MSG, late ? 3 : 4);
    memset(pb, 0xee, MSG + 64);
    if (!late)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG + 64, 4, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG, 4, &reqs[0]), UCCL_OK);
    if (late) {
        ofi_pair_progress(300);
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG + 64, 4, &reqs[1]), UCCL_OK);
    }
    drive(reqs, 2, NULL, bytes);
    CU_ASSERT(memcmp(pb, pa, MSG) == 0);
    CU_ASSERT_EQUAL(pb[MSG], 0xee);
    CU_ASSERT_EQUAL(ta->direct_sent - sent, 1u);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, 1u);
    CU_ASSERT_EQUAL(ta->rma_posted, wa); /* no CTS + write */
}

/* WINDOW sends with one tag, each of its own bytes, into WINDOW receives
 * posted first: in order, each in its own receive, all placed. */
static void check_window(void)
{
    tp_ofi_t *tb = ofi_of(P.b);
    uint64_t placed = tb->direct_placed;
    uccl_req_t *reqs[2 * WINDOW];

    ofi_pair_post_window(reqs, WINDOW, MSG, STRIDE, 6);
    drive(reqs, 2 * WINDOW, NULL, NULL);
    ofi_pair_check_window(WINDOW, MSG, STRIDE);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, (uint64_t)WINDOW);
}

/* Tags 5 then 7 sent, the receive for 7 posted first and the one for 5
 * after both messages waited: 5 does not fit the receive for 7 and comes
 * through the bounce (held, then the late receive gets it); 7 lands in its
 * receive. Order of one tag kept: a second 7 goes to a second receive. */
static void check_other_tag(void)
{
    tp_ofi_t *tb = ofi_of(P.b);
    uint64_t copied = tb->direct_copied;
    uccl_req_t *reqs[6];

    for (int i = 0; i < 3; i++)
        unit_fill(pa + (size_t)i * STRIDE, MSG, 200u + (unsigned)i);
    memset(pb, 0, AREA);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, STRIDE, MSG, 7, &reqs[3]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 2 * STRIDE, MSG, 7, &reqs[4]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG, 5, &reqs[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, STRIDE, MSG, 7, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 2 * STRIDE, MSG, 7, &reqs[2]), UCCL_OK);
    ofi_pair_progress(300);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG, 5, &reqs[5]), UCCL_OK);
    drive(reqs, 6, NULL, NULL);
    for (int i = 0; i < 3; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)i * STRIDE, MSG) == 0);
    CU_ASSERT(tb->direct_copied - copied >= 1u);
}

/* A receive shorter than the message fails TRUNCATED with the message's
 * length and loses nothing: the next receive of the tag gets it whole. */
static void check_longer(void)
{
    uccl_req_t *reqs[3];
    const uccl_status_t want[3] = {UCCL_OK, UCCL_ERR_TRUNCATED, UCCL_OK};
    const size_t bytes[3] = {0, MSG, MSG};

    unit_fill(pa, MSG, 9);
    memset(pb, 0, AREA);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, STRIDE, MSG - 100, 8, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG, 8, &reqs[0]), UCCL_OK);
    ofi_pair_progress(300);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG, 8, &reqs[2]), UCCL_OK);
    drive(reqs, 3, want, bytes);
    CU_ASSERT(memcmp(pb, pa, MSG) == 0);
}

static void check_provider(const char *prov)
{
    if (!open_pair(prov, "1", "1000000"))
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    CU_ASSERT_FATAL(ofi_of(P.a) != NULL);
    if (ofi_of(P.a)->direct_max == 0) {
        ofi_pair_close();
        UNIT_SKIP("libfabric's %s provider has less than 8 bytes of CQ data", prov);
    }
    check_one(false);
    check_one(true);
    check_window();
    check_longer();
    ofi_pair_close();
    if (!open_pair(prov, "1", "0"))
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    check_other_tag();
    check_window();
    check_longer();
    ofi_pair_close();
}

static void test_direct_shm(void)
{
    check_provider("shm");
}

static void test_direct_tcp(void)
{
    check_provider("tcp;ofi_rxm");
}

/* Direct receives B has posted into receives' pieces (UCCL_OFI_DIRECT_DEPTH). */
static int slots_posted(void)
{
    tp_ofi_t *tb = ofi_of(P.b);
    uccl_list_t *pos;
    int n = 0;

    uccl_list_for_each(pos, &tb->eps) {
        tp_ofi_ep_t *ep = uccl_container_of(pos, tp_ofi_ep_t, link);

        for (int k = 0; k < OFI_DDEPTH_MAX; k++)
            n += ep->dslot[k].op != NULL;
    }
    return n;
}

/* Receives posted ahead (depth >= 3): receives of tags 6 6 6 9 6 6 get
 * direct receives for the first three messages before any is sent (the run
 * of the oldest receive's tag), all six messages land in their receives.
 * Then tags 7 6 6 6 into receives 6 6 6 (7's posted last): the 6s do not
 * land ahead in the 2nd-4th receives (their runs say a 7 came before); 7
 * comes through the bounce, then each 6 lands in the receive the core
 * gives it (1st-3rd), byte for byte, none copied. */
static void check_ahead(void)
{
    static const uint64_t tags[6] = {6, 6, 6, 9, 6, 6}, tags2[4] = {7, 6, 6, 6};
    tp_ofi_t *tb = ofi_of(P.b);
    uint64_t placed = tb->direct_placed, copied;
    uccl_req_t *reqs[12];

    for (int i = 0; i < 6; i++)
        unit_fill(pa + (size_t)i * STRIDE, MSG, 40u + (unsigned)i);
    memset(pb, 0, AREA);
    for (int i = 0; i < 6; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, MSG, tags[i], &reqs[6 + i]),
                           UCCL_OK);
    ofi_pair_progress(50);
    CU_ASSERT_EQUAL(slots_posted(), 3);
    for (int i = 0; i < 6; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, MSG, tags[i], &reqs[i]),
                           UCCL_OK);
    drive(reqs, 12, NULL, NULL);
    for (int i = 0; i < 6; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)i * STRIDE, MSG) == 0);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, 6u);

    copied = tb->direct_copied;
    placed = tb->direct_placed;
    memset(pb, 0, AREA);
    for (int i = 0; i < 3; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, MSG, 6, &reqs[4 + i]),
                           UCCL_OK);
    ofi_pair_progress(50);
    for (int i = 0; i < 4; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, MSG, tags2[i], &reqs[i]),
                           UCCL_OK);
    ofi_pair_progress(300);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 3 * STRIDE, MSG, 7, &reqs[7]), UCCL_OK);
    drive(reqs, 8, NULL, NULL);
    for (int i = 0; i < 3; i++) /* the i-th receive of 6: message i + 1 */
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)(i + 1) * STRIDE, MSG) == 0);
    CU_ASSERT(memcmp(pb + 3 * STRIDE, pa, MSG) == 0);
    CU_ASSERT_EQUAL(tb->direct_copied - copied, 1u);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, 3u);
}

/* Receives posted ahead, then nothing happens: progress leaves the slots
 * alone without looking at each (a pass over all of them was most of an
 * idle progress call); a receive posted, or a message landed, and the next
 * progress call puts the slots right. Four receives of tag 6, settled; 1000
 * rounds of progress: no pass. A fifth: posted at the next call. Five
 * messages: each placed in its receive, byte for byte. Two more receives:
 * their slots at the next call. */
static void check_settled(void)
{
    tp_ofi_t *tb = ofi_of(P.b);
    uint64_t placed = tb->direct_placed, passes;
    uccl_req_t *reqs[12];
    int depth = tb->direct_depth < 5 ? tb->direct_depth : 5;

    for (int i = 0; i < 5; i++)
        unit_fill(pa + (size_t)i * STRIDE, MSG, 70u + (unsigned)i);
    memset(pb, 0, AREA);
    for (int i = 0; i < 4; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, MSG, 6, &reqs[5 + i]),
                           UCCL_OK);
    ofi_pair_progress(5);
    usleep(2000); /* past UCCL_OFI_DIRECT_WAIT (20 us): the bounce's receive goes in */
    ofi_pair_progress(5);
    CU_ASSERT_EQUAL(slots_posted(), depth < 4 ? depth : 4);
    passes = tb->direct_passes;
    ofi_pair_progress(1000);
    CU_ASSERT(tb->direct_passes - passes <= 1);
    CU_ASSERT_EQUAL(slots_posted(), depth < 4 ? depth : 4);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 4 * STRIDE, MSG, 6, &reqs[9]), UCCL_OK);
    uccl_engine_progress(P.b);
    CU_ASSERT_EQUAL(slots_posted(), depth);
    for (int i = 0; i < 5; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, MSG, 6, &reqs[i]), UCCL_OK);
    drive(reqs, 10, NULL, NULL);
    for (int i = 0; i < 5; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)i * STRIDE, MSG) == 0);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, 5u);
    ofi_pair_progress(5);
    CU_ASSERT_EQUAL(slots_posted(), 0);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG, 6, &reqs[10]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, STRIDE, MSG, 6, &reqs[11]), UCCL_OK);
    uccl_engine_progress(P.b);
    CU_ASSERT_EQUAL(slots_posted(), depth < 2 ? depth : 2);
    for (int i = 0; i < 2; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, MSG, 6, &reqs[i]), UCCL_OK);
    reqs[2] = reqs[10];
    reqs[3] = reqs[11];
    drive(reqs, 4, NULL, NULL);
    for (int i = 0; i < 2; i++)
        CU_ASSERT(memcmp(pb + (size_t)i * STRIDE, pa + (size_t)i * STRIDE, MSG) == 0);
    CU_ASSERT_EQUAL(tb->direct_placed - placed, 7u);
}

/* The pair of the receives-ahead cases: shm (i 0) at the quirk row's
 * depth (16), tcp;ofi_rxm (i 1) at UCCL_OFI_DIRECT_DEPTH=4; false (the
 * case skipped) where the provider is not usable. */
static const char *const ahead_provs[2] = {"shm", "tcp;ofi_rxm"};

static bool open_ahead_pair(int i)
{
    bool ok;

    if (i == 1)
        setenv("UCCL_OFI_DIRECT_DEPTH", "4", 1);
    ok = open_pair(ahead_provs[i], "1", "20");
    unsetenv("UCCL_OFI_DIRECT_DEPTH");
    return ok;
}

static void test_direct_ahead(void)
{
    for (int i = 0; i < 2; i++) {
        if (!open_ahead_pair(i))
            UNIT_SKIP("libfabric's %s provider is not usable here", ahead_provs[i]);
        CU_ASSERT_EQUAL(ofi_of(P.b)->direct_depth, i == 0 ? 16 : 4);
        check_ahead();
        check_settled();
        ofi_pair_close();
    }
}

/* ------------------------------------------------ bytes past a message's length */

#define SHORT (MSG / 2)
#define UNTOUCHED 0xee

/* pb[off, off + len) still holds UNTOUCHED */
static bool untouched(size_t off, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (pb[off + i] != UNTOUCHED)
            return false;
    return true;
}

/* Two tags that the provider tag of main (6a11a53) could not tell apart
 * (its 14-bit fingerprint of the tag: 2954 for both): the message of
 * COLLIDE_B, sent first, must not land in the receive of COLLIDE_A; that
 * receive then gets a shorter message of its own tag, and its bytes past
 * that length stay as they were. */
#define COLLIDE_A 10
#define COLLIDE_B 17721

static void check_collision(void)
{
    uccl_req_t *reqs[4];
    const size_t bytes[4] = {0, 0, SHORT, MSG};

    unit_fill(pa, MSG, 51);
    unit_fill(pa + STRIDE, SHORT, 52);
    memset(pb, UNTOUCHED, AREA);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG, COLLIDE_A, &reqs[2]), UCCL_OK);
    ofi_pair_progress(50);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG, COLLIDE_B, &reqs[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, STRIDE, SHORT, COLLIDE_A, &reqs[1]), UCCL_OK);
    ofi_pair_progress(300);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, STRIDE, MSG, COLLIDE_B, &reqs[3]), UCCL_OK);
    drive(reqs, 4, NULL, bytes);
    CU_ASSERT(memcmp(pb, pa + STRIDE, SHORT) == 0);
    CU_ASSERT(untouched(SHORT, MSG - SHORT));
    CU_ASSERT(memcmp(pb + STRIDE, pa, MSG) == 0);
}

/* Receives of tag 6, 6 posted ahead; tags 7 6 6 sent, the last one short:
 * the core gives the first 6 to the first receive, the short one to the
 * second, whose bytes past SHORT stay as they were (the first 6 must not
 * land in the second receive, where a receive posted ahead for its number
 * waits, on its way to the first). */
static void check_position(void)
{
    static const uint64_t tags[3] = {7, 6, 6};
    static const size_t lens[3] = {MSG, MSG, SHORT};
    uccl_req_t *reqs[6];
    const size_t bytes[6] = {0, 0, 0, MSG, SHORT, MSG};

    for (int i = 0; i < 3; i++)
        unit_fill(pa + (size_t)i * STRIDE, lens[i], 60u + (unsigned)i);
    memset(pb, UNTOUCHED, AREA);
    for (int i = 0; i < 2; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, MSG, 6, &reqs[3 + i]),
                           UCCL_OK);
    ofi_pair_progress(50);
    for (int i = 0; i < 3; i++)
        UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, (size_t)i * STRIDE, lens[i], tags[i], &reqs[i]),
                           UCCL_OK);
    ofi_pair_progress(300);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 2 * STRIDE, MSG, 7, &reqs[5]), UCCL_OK);
    drive(reqs, 6, NULL, bytes);
    CU_ASSERT(memcmp(pb, pa + STRIDE, MSG) == 0);
    CU_ASSERT(memcmp(pb + STRIDE, pa + 2 * STRIDE, SHORT) == 0);
    CU_ASSERT(untouched(STRIDE + SHORT, MSG - SHORT));
    CU_ASSERT(memcmp(pb + 2 * STRIDE, pa, MSG) == 0);
}

/* Receives of tag 12 of MSG and MSG + 200 bytes, then one of 3 * MSG / 2;
 * messages of MSG + 100 and MSG + 200 bytes: the first fails the first
 * receive (TRUNCATED, it may hold anything) and goes to the second, whose
 * bytes past MSG + 100 stay as they were (the second message must not land
 * there ahead); the second message goes to the third receive. */
static void check_shift(void)
{
    static const size_t rlens[3] = {MSG, MSG + 200, 3 * (size_t)MSG / 2};
    uccl_req_t *reqs[5];
    const uccl_status_t want[5] = {UCCL_OK, UCCL_OK, UCCL_ERR_TRUNCATED, UCCL_OK, UCCL_OK};
    const size_t bytes[5] = {0, 0, MSG + 100, MSG + 100, MSG + 200};

    unit_fill(pa, MSG + 100, 71);
    unit_fill(pa + STRIDE, MSG + 200, 72);
    memset(pb, UNTOUCHED, AREA);
    for (int i = 0; i < 3; i++)
        UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, (size_t)i * STRIDE, rlens[i], 12, &reqs[2 + i]),
                           UCCL_OK);
    ofi_pair_progress(50);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG + 100, 12, &reqs[0]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, STRIDE, MSG + 200, 12, &reqs[1]), UCCL_OK);
    drive(reqs, 5, want, bytes);
    CU_ASSERT(memcmp(pb + STRIDE, pa, MSG + 100) == 0);
    CU_ASSERT(untouched(STRIDE + MSG + 100, 100));
    CU_ASSERT(memcmp(pb + 2 * STRIDE, pa + STRIDE, MSG + 200) == 0);
    CU_ASSERT(untouched(2 * STRIDE + MSG + 200, rlens[2] - MSG - 200));
}

/* Each check on a fresh pair (open_ahead_pair), and again after it. */
static void test_direct_untouched(void)
{
    for (int i = 0; i < 2; i++) {
        if (!open_ahead_pair(i))
            UNIT_SKIP("libfabric's %s provider is not usable here", ahead_provs[i]);
        for (int round = 0; round < 2; round++) {
            check_collision();
            check_position();
            check_shift();
        }
        ofi_pair_close();
    }
}

/* UCCL_OFI_DIRECT=0: the same message goes the rendezvous (CTS + write). */
static void test_direct_off(void)
{
    tp_ofi_t *ta;
    uint64_t wa;
    uccl_req_t *reqs[2];

    if (!open_pair("shm", "0", "20"))
        UNIT_SKIP("libfabric's shm provider is not usable here");
    ta = ofi_of(P.a);
    wa = ta->rma_posted;
    CU_ASSERT_EQUAL(ta->direct_max, 0u);
    unit_fill(pa, MSG, 11);
    UNIT_ASSERT_STATUS(uccl_recv(P.ba, mb, 0, MSG, 4, &reqs[1]), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_send(P.ab, ma, 0, MSG, 4, &reqs[0]), UCCL_OK);
    drive(reqs, 2, NULL, NULL);
    CU_ASSERT(memcmp(pb, pa, MSG) == 0);
    CU_ASSERT_EQUAL(ta->direct_sent, 0u);
    CU_ASSERT(ta->rma_posted > wa);
    ofi_pair_close();
}

static void test_direct_setting(void)
{
    static const char *const bad[][2] = {{"UCCL_OFI_DIRECT", "2"},
                                         {"UCCL_OFI_DIRECT", "-2"},
                                         {"UCCL_OFI_DIRECT_MAX", "1K"},
                                         {"UCCL_OFI_DIRECT_WAIT", "-1"},
                                         {"UCCL_OFI_DIRECT_DEPTH", "17"},
                                         {"UCCL_OFI_DIRECT_DEPTH", "-1"}};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uccl_engine_t *e = NULL;

        setenv("UCCL_OFI_PROVIDER", "tcp;ofi_rxm", 1);
        setenv(bad[i][0], bad[i][1], 1);
        UNIT_ASSERT_STATUS(unit_engine_create("ofi", &e), UCCL_ERR_INVALID_PARAM);
        CU_ASSERT(e == NULL);
        unsetenv(bad[i][0]);
        unsetenv("UCCL_OFI_PROVIDER");
    }
}

/* UCCL_OFI_DIRECT and _DEPTH unset: the provider's quirk row (on for shm,
 * 16 ahead; off for tcp;ofi_rxm: tests/perf/results/ofi/s13-README.md). */
static void direct_choice(const char *prov, bool want)
{
    uccl_engine_t *e = NULL;

    setenv("UCCL_OFI_PROVIDER", prov, 1);
    unsetenv("UCCL_OFI_DIRECT");
    if (unit_engine_create("ofi", &e) != UCCL_OK) {
        unsetenv("UCCL_OFI_PROVIDER");
        UNIT_SKIP("libfabric's %s provider is not usable here", prov);
    }
    CU_ASSERT_FATAL(ofi_of(e) != NULL);
    CU_ASSERT_EQUAL(ofi_of(e)->direct_max > 0, want);
    CU_ASSERT_EQUAL(ofi_of(e)->direct_depth, want ? 16 : 1); /* receives posted ahead */
    uccl_engine_destroy(e);
    unsetenv("UCCL_OFI_PROVIDER");
}

static void test_direct_default(void)
{
    direct_choice("shm", true);
    direct_choice("tcp;ofi_rxm", false);
}

static CU_TestInfo direct_tests[] = {
    {"UCCL_OFI_DIRECT unset: the quirk table's row (shm on, 16 ahead; tcp;ofi_rxm off)",
     test_direct_default},
    {"UCCL_OFI_DIRECT, _MAX, _WAIT, _DEPTH out of range -> INVALID_PARAM", test_direct_setting},
    {"UCCL_OFI_DIRECT=0: rendezvous", test_direct_off},
    {"direct sends, byte-verified: shm", test_direct_shm},
    {"direct sends, byte-verified: tcp;ofi_rxm", test_direct_tcp},
    {"direct receives posted ahead (UCCL_OFI_DIRECT_DEPTH), byte-verified", test_direct_ahead},
    {"a receive's bytes past its message's length stay as they were (tags the old fingerprint "
     "could not tell apart, a message landed ahead, a receive failed as too short)",
     test_direct_untouched},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {{"ofi_direct", NULL, NULL, NULL, NULL, direct_tests},
                             CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

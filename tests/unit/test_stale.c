/* Stale incarnations and forged descriptors (issue 20), over shm and tcp.
 * A peer restarts at the same address (UCCL_OOB_PORT): the connection to the
 * old incarnation fails with PEER_FAILED, its address blob is refused with
 * UCCL_ERR_STALE, the new incarnation connects; its old descriptors are
 * refused with UCCL_ERR_STALE by the initiator and, forged to name the new
 * engine, by the target. Forged descriptors (range widened or moved, region
 * id made up, region deregistered) are refused by the target with
 * UCCL_ERR_REMOTE_ACCESS. The target's memory is never touched, and the
 * connection keeps working after every refusal. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"
#include "unit_conn.h"

#define TLEN 4096
#define GUARD 4096

/* A free TCP port on the address engines advertise (the OS picks it). */
static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1, one = 1;

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static uccl_status_t engine_at_port(int port, uccl_engine_t **e)
{
    char text[16];
    uccl_status_t st;

    snprintf(text, sizeof(text), "%d", port);
    setenv("UCCL_OOB_PORT", text, 1);
    st = unit_engine_create(unit_tp, e);
    unsetenv("UCCL_OOB_PORT");
    return st;
}

/* Run one one-sided op and return its final status (driving both engines). */
static uccl_status_t rma(unit_pair_t *p, bool is_read, uccl_mr_t *mr, size_t len,
                         const uccl_rdesc_t *d, size_t roff)
{
    uccl_req_t *req = NULL;
    uccl_status_t st = is_read ? uccl_read(p->ab, mr, 0, len, d, roff, &req)
                               : uccl_write(p->ab, mr, 0, len, d, roff, &req);

    if (st != UCCL_OK)
        return st;
    if (unit_drive(p, &req, 1, UNIT_TIMEOUT_MS) != UCCL_OK)
        st = UCCL_ERR_TIMEOUT;
    else
        st = uccl_wait(req, 0);
    uccl_req_free(req);
    return st;
}

/* d with its fields changed by edit (a forger's work: the codec is public knowledge). */
#define FORGE(out, in, edit)                                                         \
    do {                                                                             \
        uccl_rdesc_fields_t f_;                                                      \
        CU_ASSERT_EQUAL_FATAL(uccl_rdesc_decode(in, &f_), UCCL_OK);                  \
        edit;                                                                        \
        CU_ASSERT_EQUAL_FATAL(uccl_rdesc_encode(&f_, out), UCCL_OK);                 \
    } while (0)

/* The target's region sits between guards; none of it may change. */
typedef struct target {
    uint8_t *mem; /* GUARD | TLEN region | GUARD */
    uccl_mr_t *mr;
    uccl_rdesc_t desc;
} target_t;

static bool target_untouched(const target_t *t)
{
    return unit_mismatches(t->mem, GUARD + TLEN + GUARD, 9) == 0;
}

static bool guards_untouched(const target_t *t)
{
    for (size_t i = 0; i < GUARD + TLEN + GUARD; i++)
        if ((i < GUARD || i >= GUARD + TLEN) && t->mem[i] != unit_pattern(i, 9))
            return false;
    return true;
}

static void *accept_short(void *p)
{
    unit_accept_arg_t *arg = p;
    arg->status = uccl_accept(arg->engine, 500, &arg->conn);
    return NULL;
}

static void test_restart_same_address(void)
{
    uccl_engine_t *a = NULL, *b1 = NULL;
    uint8_t blob1[UCCL_ADDRESS_MAX], blob2[UCCL_ADDRESS_MAX];
    size_t len1 = sizeof(blob1), len2 = sizeof(blob2);
    uint8_t *src = calloc(1, 2 * TLEN), b1buf[TLEN];
    uccl_mr_t *smr = NULL, *b1mr = NULL;
    uccl_rdesc_t d1, forged;
    uccl_conn_t *c = NULL;
    unit_pair_t p1, p2;
    target_t t = {.mem = malloc(GUARD + TLEN + GUARD)};
    int port = free_port();
    uint64_t b1_id;

    memset(&p1, 0, sizeof(p1));
    memset(&p2, 0, sizeof(p2));
    CU_ASSERT_FATAL(port > 0 && src != NULL && t.mem != NULL);
    UNIT_ASSERT_STATUS(unit_engine_create(unit_tp, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(engine_at_port(port, &b1), UCCL_OK);
    if (a == NULL || b1 == NULL)
        goto out;
    p1.a = a;
    p1.b = b1;
    UNIT_ASSERT_STATUS(unit_connect(a, b1, &p1.ab, &p1.ba), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_address(b1, blob1, &len1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(a, src, 2 * TLEN, 0, &smr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(b1, b1buf, TLEN, 0, &b1mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(b1mr, 0, TLEN, &d1), UCCL_OK);
    unit_fill(src, 2 * TLEN, 4);
    UNIT_ASSERT_STATUS(rma(&p1, false, smr, TLEN, &d1, 0), UCCL_OK); /* works while alive */
    b1_id = uccl_engine_id(b1);

    /* the peer goes (its regions with it) and comes back at the same address */
    uccl_engine_destroy(b1);
    b1 = NULL;
    p1.b = NULL;
    UNIT_ASSERT_STATUS(engine_at_port(port, &p2.b), UCCL_OK);
    if (p2.b == NULL)
        goto out;
    p2.a = a;
    UNIT_ASSERT_STATUS(uccl_engine_address(p2.b, blob2, &len2), UCCL_OK);
    CU_ASSERT(uccl_engine_id(p2.b) != b1_id);
    CU_ASSERT_EQUAL(p2.b->oob_addr.sin_port, htons((uint16_t)port));

    /* the old connection: failed, never re-attached to the new incarnation */
    UNIT_ASSERT_STATUS(rma(&p1, false, smr, TLEN, &d1, 0), UCCL_ERR_PEER_FAILED);
    /* the old address: STALE at the new incarnation */
    {
        unit_accept_arg_t none = {.engine = p2.b, .status = UCCL_OK};
        pthread_t th;
        CU_ASSERT_FATAL(pthread_create(&th, NULL, accept_short, &none) == 0);
        UNIT_ASSERT_STATUS(uccl_connect(a, blob1, len1, &c), UCCL_ERR_STALE);
        pthread_join(th, NULL);
        CU_ASSERT_EQUAL(none.status, UCCL_ERR_TIMEOUT); /* nothing was admitted */
    }
    CU_ASSERT_PTR_NULL(c);
    /* the new one connects */
    UNIT_ASSERT_STATUS(unit_connect(a, p2.b, &p2.ab, &p2.ba), UCCL_OK);
    if (p2.ab == NULL)
        goto out;
    unit_fill(t.mem, GUARD + TLEN + GUARD, 9);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p2.b, t.mem + GUARD, TLEN, 0, &t.mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, TLEN, &t.desc), UCCL_OK);

    /* an old descriptor: refused by the initiator */
    UNIT_ASSERT_STATUS(rma(&p2, false, smr, 64, &d1, 0), UCCL_ERR_STALE);
    UNIT_ASSERT_STATUS(rma(&p2, true, smr, 64, &d1, 0), UCCL_ERR_STALE);
    /* forged to name the new engine, pointed at the new region: the target
     * refuses it, for its region id is of the old incarnation */
    FORGE(&forged, &d1, (f_.engine_id = uccl_engine_id(p2.b),
                         f_.addr = (uint64_t)(uintptr_t)(t.mem + GUARD)));
    UNIT_ASSERT_STATUS(rma(&p2, false, smr, 64, &forged, 0), UCCL_ERR_STALE);
    UNIT_ASSERT_STATUS(rma(&p2, true, smr, 64, &forged, 0), UCCL_ERR_STALE);
    CU_ASSERT(target_untouched(&t));
    /* the connection still works */
    UNIT_ASSERT_STATUS(rma(&p2, false, smr, 64, &t.desc, 0), UCCL_OK);
    CU_ASSERT(memcmp(t.mem + GUARD, src, 64) == 0);
out:
    if (t.mr != NULL)
        uccl_mr_dereg(t.mr);
    if (smr != NULL)
        uccl_mr_dereg(smr);
    if (p2.b != NULL)
        uccl_engine_destroy(p2.b);
    if (b1 != NULL)
        uccl_engine_destroy(b1);
    if (a != NULL)
        uccl_engine_destroy(a);
    free(src);
    free(t.mem);
}

/* Forged descriptors of the right engine: the target checks every access
 * against its live regions. */
static void test_forged(void)
{
    static const size_t sizes[] = {64, 2 * TLEN};
    uint8_t *src = malloc(2 * TLEN);
    target_t t = {.mem = malloc(GUARD + TLEN + GUARD)};
    uccl_mr_t *smr = NULL, *gone = NULL;
    uccl_rdesc_t forged, gone_desc;
    uint64_t base;
    unit_pair_t p;

    UNIT_ASSERT_STATUS(unit_pair_open(unit_tp, &p), UCCL_OK);
    if (p.a == NULL)
        goto out;
    unit_fill(t.mem, GUARD + TLEN + GUARD, 9);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, src, 2 * TLEN, 0, &smr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, t.mem + GUARD, TLEN, 0, &t.mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(t.mr, 0, TLEN, &t.desc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, t.mem, GUARD, 0, &gone), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(gone, 0, GUARD, &gone_desc), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(gone), UCCL_OK);
    base = (uint64_t)(uintptr_t)(t.mem + GUARD);
    unit_fill(src, 2 * TLEN, 5);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        for (int rd = 0; rd < 2; rd++) {
            /* widened past the region's end */
            FORGE(&forged, &t.desc, f_.len = 2 * TLEN);
            UNIT_ASSERT_STATUS(rma(&p, rd, smr, n < TLEN ? n : TLEN, &forged, TLEN - 32),
                               UCCL_ERR_REMOTE_ACCESS);
            /* moved to start before the region */
            FORGE(&forged, &t.desc, (f_.addr = base - GUARD, f_.len = GUARD + TLEN));
            UNIT_ASSERT_STATUS(rma(&p, rd, smr, n < GUARD ? n : GUARD, &forged, 0),
                               UCCL_ERR_REMOTE_ACCESS);
            /* a region id never handed out */
            FORGE(&forged, &t.desc, f_.region_id += 1000);
            UNIT_ASSERT_STATUS(rma(&p, rd, smr, n < TLEN ? n : TLEN, &forged, 0),
                               UCCL_ERR_REMOTE_ACCESS);
            /* a region deregistered (its memory still mapped) */
            UNIT_ASSERT_STATUS(rma(&p, rd, smr, n < GUARD ? n : GUARD, &gone_desc, 0),
                               UCCL_ERR_REMOTE_ACCESS);
            CU_ASSERT(target_untouched(&t));
            if (rd)
                CU_ASSERT_EQUAL(unit_mismatches(src, 2 * TLEN, 5), 0); /* nothing read in */
        }
    }
    /* still a working connection, and the real descriptor works */
    UNIT_ASSERT_STATUS(rma(&p, false, smr, TLEN, &t.desc, 0), UCCL_OK);
    CU_ASSERT(memcmp(t.mem + GUARD, src, TLEN) == 0);
    CU_ASSERT(guards_untouched(&t));
    /* the same descriptor's bytes changed in place after it was used (the
     * initiator keeps the last one it read, xfer.c): read again, refused */
    t.desc.bytes[30] ^= 0x40;
    UNIT_ASSERT_STATUS(rma(&p, false, smr, 64, &t.desc, 0), UCCL_ERR_BAD_DESC);
    t.desc.bytes[30] ^= 0x40;
    FORGE(&t.desc, &t.desc, f_.len = 64); /* re-signed, narrowed: in place */
    UNIT_ASSERT_STATUS(rma(&p, true, smr, 128, &t.desc, 0), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(rma(&p, true, smr, 64, &t.desc, 0), UCCL_OK);
out:
    if (t.mr != NULL)
        uccl_mr_dereg(t.mr);
    if (smr != NULL)
        uccl_mr_dereg(smr);
    unit_pair_close(&p);
    free(src);
    free(t.mem);
}


static CU_TestInfo cases[] = {
    {"peer restarted at the same address: STALE", test_restart_same_address},
    {"forged descriptors refused by the target", test_forged},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    setenv("UCCL_TIMEOUT_MS", UNIT_TIMEOUT_TEXT, 0);
    return unit_main_tp("stale", cases, NULL, NULL);
}

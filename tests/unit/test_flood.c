/* A peer that floods a receiver which never posts receives (issue 20): the
 * messages no receive took are capped per connection (UCCL_UNEXPECTED_MAX,
 * 4 MiB here); past it the receiver's connection fails with NO_MEMORY and
 * its memory stays bounded: the process's RSS grows by a few MiB, not by the
 * 128 MiB the sender offers. The messages that arrived before are still
 * there for receives, intact. shm and tcp, 4 KiB eager messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "unit_conn.h"

#define MSG 4096u
#define FLOOD 32768u /* 128 MiB offered */
#define CAP (4u << 20)

static void test_flood(void)
{
    unit_fixture_t f;
    uccl_conn_attr_t attr = {.state = UCCL_OK};
    uccl_req_t *req;
    uccl_status_t st = UCCL_OK;
    unsigned sent = 0;
    long rss0;

    UNIT_ASSERT_STATUS(unit_fixture_open(unit_tp, MSG, MSG, &f), UCCL_OK);
    if (f.p.a == NULL)
        return;
    rss0 = unit_rss_kib();
    for (; sent < FLOOD; sent++) {
        memset(f.src, (int)(sent & 0xff), MSG);
        st = uccl_send(f.p.ab, f.src_mr, 0, MSG, 1, &req);
        if (st != UCCL_OK)
            break;
        st = unit_drive(&f.p, &req, 1, 2000);
        uccl_req_free(req);
        uccl_engine_progress(f.p.b);
        if (uccl_conn_query(f.p.ba, &attr) != UCCL_OK || attr.state != UCCL_OK || st != UCCL_OK)
            break;
    }
    printf(" [%s: %u sends of %u B, receiver's connection %s, RSS +%ld KiB] ", unit_tp, sent,
           MSG, uccl_status_name(attr.state), unit_rss_kib() - rss0);
    CU_ASSERT_EQUAL(attr.state, UCCL_ERR_NO_MEMORY);
    CU_ASSERT(sent >= CAP / MSG / 2 && sent <= 2 * CAP / MSG + 64);
    CU_ASSERT(unit_rss_kib() - rss0 < 32 * 1024);
    /* what arrived before the cap is still offered, in order */
    UNIT_ASSERT_STATUS(uccl_recv(f.p.ba, f.dst_mr, 0, MSG, 1, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&f.p, &req, 1, 2000), UCCL_OK);
    uccl_req_free(req);
    CU_ASSERT(f.dst[0] == 0 && f.dst[MSG - 1] == 0);
    unit_fixture_close(&f);
}

static CU_TestInfo tests[] = {
    {"never-receiving peer flooded: capped, NO_MEMORY, RSS bounded", test_flood},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "10000", 1);
    setenv("UCCL_UNEXPECTED_MAX", "4M", 1);
    return unit_main_tp("flood", tests, NULL, NULL);
}

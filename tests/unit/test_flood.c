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

static const char *transport;

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f != NULL)
        fclose(f);
    return v;
}

static void test_flood(void)
{
    uint8_t *buf = malloc(MSG), *got = calloc(1, MSG);
    unit_pair_t p;
    uccl_mr_t *mr, *rmr;
    uccl_conn_attr_t attr = {.state = UCCL_OK};
    uccl_req_t *req;
    uccl_status_t st = UCCL_OK;
    unsigned sent = 0;
    long rss0;

    UNIT_ASSERT_STATUS(unit_pair_open(transport, &p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, buf, MSG, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, got, MSG, 0, &rmr), UCCL_OK);
    rss0 = rss_kib();
    for (; sent < FLOOD; sent++) {
        memset(buf, (int)(sent & 0xff), MSG);
        st = uccl_send(p.ab, mr, 0, MSG, 1, &req);
        if (st != UCCL_OK)
            break;
        st = unit_drive(&p, &req, 1, 2000);
        uccl_req_free(req);
        uccl_engine_progress(p.b);
        if (uccl_conn_query(p.ba, &attr) != UCCL_OK || attr.state != UCCL_OK || st != UCCL_OK)
            break;
    }
    printf(" [%s: %u sends of %u B, receiver's connection %s, RSS +%ld KiB] ", transport, sent,
           MSG, uccl_status_name(attr.state), rss_kib() - rss0);
    CU_ASSERT_EQUAL(attr.state, UCCL_ERR_NO_MEMORY);
    CU_ASSERT(sent >= CAP / MSG / 2 && sent <= 2 * CAP / MSG + 64);
    CU_ASSERT(rss_kib() - rss0 < 32 * 1024);
    /* what arrived before the cap is still offered, in order */
    UNIT_ASSERT_STATUS(uccl_recv(p.ba, rmr, 0, MSG, 1, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(unit_drive(&p, &req, 1, 2000), UCCL_OK);
    uccl_req_free(req);
    CU_ASSERT(got[0] == 0 && got[MSG - 1] == 0);
    uccl_mr_dereg(mr);
    uccl_mr_dereg(rmr);
    unit_pair_close(&p);
    free(buf);
    free(got);
}

static int suite_init_shm(void)
{
    transport = "shm";
    return 0;
}

static int suite_init_tcp(void)
{
    transport = "tcp";
    return 0;
}

static CU_TestInfo tests[] = {
    {"never-receiving peer flooded: capped, NO_MEMORY, RSS bounded", test_flood},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo per_tp[] = {
        {"flood/shm", suite_init_shm, NULL, NULL, NULL, tests},
        {"flood/tcp", suite_init_tcp, NULL, NULL, NULL, tests},
    };

    unsetenv("UCCL_TRANSPORTS");
    setenv("UCCL_TIMEOUT_MS", "10000", 1);
    setenv("UCCL_UNEXPECTED_MAX", "4M", 1);
    return unit_main_per_transport(per_tp);
}

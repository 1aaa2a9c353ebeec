/* UCCL_PORT_RANGE (firewalled clusters): every listener of a tcp engine (the
 * setup listener and the tcp transport's) takes a port of the range, the
 * first free first; a pair in the range connects and moves bytes; an engine
 * that finds the range full fails with UCCL_ERR_IO and a line naming the
 * variable; malformed ranges are refused with UCCL_ERR_INVALID_PARAM. */
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "unit_conn.h"

#define NPORTS 4 /* two engines, two listeners each */
#define MSG (64u << 10)

static int range_lo;
static char last_error[512];

static void sink(void *arg, uccl_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)file, (void)line;
    if (level == UCCL_LOG_ERROR)
        snprintf(last_error, sizeof(last_error), "%s", msg);
}

/* NPORTS consecutive ports below the ephemeral range that are free now
 * (a later test of another program may still take one: the caller retries). */
static int free_range(unsigned seed)
{
    for (int tries = 0; tries < 200; tries++) {
        int lo = 20000 + (int)((seed * 7919u + (unsigned)tries * 104729u) % 10000u), ok = 1;
        for (int p = lo; p < lo + NPORTS && ok; p++) {
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
            if (fd >= 0)
                close(fd);
        }
        if (ok)
            return lo;
    }
    return -1;
}

/* The local ports of this process's listening TCP sockets (at most max). */
static int listening_ports(int *ports, int max)
{
    unsigned long inodes[256];
    int ninodes = 0, n = 0;
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *de;
    char path[300], link[64], line[512];
    FILE *f;

    while (dir != NULL && (de = readdir(dir)) != NULL && ninodes < 256) {
        ssize_t len;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        len = readlink(path, link, sizeof(link) - 1);
        if (len > 0) {
            link[len] = '\0';
            if (sscanf(link, "socket:[%lu]", &inodes[ninodes]) == 1)
                ninodes++;
        }
    }
    if (dir != NULL)
        closedir(dir);
    f = fopen("/proc/self/net/tcp", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned port, state;
        unsigned long inode;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &port, &state,
                   &inode) != 3 || state != 0x0A)
            continue;
        for (int i = 0; i < ninodes; i++)
            if (inodes[i] == inode && n < max)
                ports[n++] = (int)port;
    }
    if (f != NULL)
        fclose(f);
    return n;
}

static void test_malformed(void)
{
    static const char *const bad[] = {"abc", "5", "5-", "-5", "0-10", "10-5", "1-70000",
                                      "100-200x", "-1-5", "100 200", "65536-65536", "1-2-3",
                                      /* sscanf's %u skips blanks and takes a sign */
                                      " 50000-50100", "50000- 50100", "+50000-50100", "+1-5",
                                      "1-+5", "50000-+50100", "50000 -50100"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uccl_engine_t *e = NULL;
        last_error[0] = '\0';
        setenv("UCCL_PORT_RANGE", bad[i], 1);
        UNIT_ASSERT_STATUS(unit_engine_create("tcp", &e), UCCL_ERR_INVALID_PARAM);
        CU_ASSERT_PTR_NULL(e);
        CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "UCCL_PORT_RANGE"));
        if (e != NULL) {
            fprintf(stderr, "\n  UCCL_PORT_RANGE='%s' accepted\n", bad[i]);
            uccl_engine_destroy(e);
        }
    }
    unsetenv("UCCL_PORT_RANGE");
}

/* Two engines fill the range: every listener is in it, bytes move between
 * them, and a third engine finds no port. */
static void test_in_range(void)
{
    char text[32];
    unit_pair_t p = {0};
    uccl_engine_t *third = NULL;
    uccl_status_t st = UCCL_ERR_IO;
    int ports[16], n;

    for (unsigned attempt = 0; attempt < 5 && st != UCCL_OK; attempt++) {
        range_lo = free_range((unsigned)getpid() + attempt);
        CU_ASSERT_FATAL(range_lo > 0);
        snprintf(text, sizeof(text), "%d-%d", range_lo, range_lo + NPORTS - 1);
        setenv("UCCL_PORT_RANGE", text, 1);
        st = unit_pair_open("tcp", &p); /* retried if another program took a port meanwhile */
        if (st != UCCL_OK)
            unit_pair_close(&p);
    }
    UNIT_ASSERT_STATUS(st, UCCL_OK);
    if (st != UCCL_OK)
        goto out;
    n = listening_ports(ports, 16);
    CU_ASSERT_EQUAL(n, NPORTS);
    for (int i = 0; i < n; i++)
        CU_ASSERT(ports[i] >= range_lo && ports[i] < range_lo + NPORTS);

    {
        uint8_t *src = malloc(MSG), *dst = calloc(1, MSG);
        uccl_mr_t *ms = NULL, *md = NULL;
        uccl_req_t *reqs[2] = {NULL, NULL};
        unit_fill(src, MSG, 5);
        UNIT_ASSERT_STATUS(uccl_mr_reg(p.a, src, MSG, 0, &ms), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_mr_reg(p.b, dst, MSG, 0, &md), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_recv(p.ba, md, 0, MSG, 9, &reqs[1]), UCCL_OK);
        UNIT_ASSERT_STATUS(uccl_send(p.ab, ms, 0, MSG, 9, &reqs[0]), UCCL_OK);
        UNIT_ASSERT_STATUS(unit_drive(&p, reqs, 2, UNIT_TIMEOUT_MS), UCCL_OK);
        for (int i = 0; i < 2; i++) {
            int done = 0;
            UNIT_ASSERT_STATUS(uccl_test(reqs[i], &done), UCCL_OK);
            uccl_req_free(reqs[i]);
        }
        CU_ASSERT_EQUAL(unit_mismatches(dst, MSG, 5), 0);
        uccl_mr_dereg(ms);
        uccl_mr_dereg(md);
        free(src);
        free(dst);
    }

    last_error[0] = '\0';
    UNIT_ASSERT_STATUS(unit_engine_create("tcp", &third), UCCL_ERR_IO);
    CU_ASSERT_PTR_NULL(third);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "UCCL_PORT_RANGE"));
out:
    unit_pair_close(&p);
    unsetenv("UCCL_PORT_RANGE");
}

static CU_TestInfo tests[] = {
    {"malformed ranges are refused naming the variable", test_malformed},
    {"two engines fill a range of 4, bytes move, a third finds none", test_in_range},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    CU_SuiteInfo suites[] = {
        {"port range", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };

    unsetenv("UCCL_TRANSPORTS");
    unsetenv("UCCL_OOB_PORT");
    setenv("UCCL_OOB_IFADDR", "127.0.0.1", 1);
    uccl_log_set_sink(sink, NULL);
    return unit_main(suites);
}

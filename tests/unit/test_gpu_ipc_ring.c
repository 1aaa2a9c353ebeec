/* The gpu_ipc mailbox ring (src/tp/gpu_ipc/ring.c): records in order across
 * many wraps, a full ring refusing more, attach checks, and every kind of
 * garbage a peer can leave in the shared memory (lengths, indexes, a record
 * changed after it was read). Both ends live in this process. */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tp/gpu_ipc/ring.h"
#include "unit.h"

/* A consumer ring and a producer attached to it. */
static void ring_pair(ipc_ring_t *rx, ipc_ring_t *tx)
{
    memset(rx, 0, sizeof(*rx));
    memset(tx, 0, sizeof(*tx));
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_create(rx), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_attach(tx, rx->name), UCCL_OK);
    CU_ASSERT_FALSE(tx->linked); /* the producer unlinked the name */
}

static void ring_pair_free(ipc_ring_t *rx, ipc_ring_t *tx)
{
    uccl_gpu_ipc_ring_destroy(tx);
    uccl_gpu_ipc_ring_destroy(rx);
}

/* Write a record header (as ring.h lays it out) at the producer's head and
 * advance the head by adv bytes. */
static void raw_record(ipc_ring_t *tx, uint32_t len, uint16_t type, uint64_t adv)
{
    uint64_t head = atomic_load(&tx->shm->ctl.head);
    uint8_t *p = tx->shm->data + head % IPC_RING_BYTES;
    uccl_spsc_hdr_t hdr = {type, (uint32_t)(len + sizeof(hdr))}; /* may wrap: garbage */

    memcpy(p, &hdr, sizeof(hdr));
    atomic_store(&tx->shm->ctl.head, head + adv);
}

static void test_order_and_wrap(void)
{
    static uint8_t buf[IPC_MSG_MAX];
    ipc_ring_t rx, tx;
    unsigned sent = 0, got = 0;

    ring_pair(&rx, &tx);
    /* sizes 0..IPC_MSG_MAX in a mix; the producer runs ahead until full */
    while (got < 20000) {
        while (sent < 20000) {
            size_t len = (sent * 997u) % (sent % 3 ? 200 : IPC_MSG_MAX + 1);
            memset(buf, (int)(sent & 0xff), len);
            if (len >= 4)
                memcpy(buf, &sent, 4); /* the record's number first, then the fill */
            if (!uccl_gpu_ipc_ring_push(&tx, (uint16_t)(sent % 7 + 1), buf, len / 2, buf + len / 2, len - len / 2))
                break;
            sent++;
        }
        for (int k = 0; k < 37 && got < sent; k++) {
            const uint8_t *p;
            size_t len, want = (got * 997u) % (got % 3 ? 200 : IPC_MSG_MAX + 1);
            uint16_t type;
            unsigned id = ~0u;

            UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &type, (const void **)&p, &len), UCCL_OK);
            CU_ASSERT_EQUAL_FATAL(len, want);
            CU_ASSERT_EQUAL(type, got % 7 + 1);
            if (len >= 4) {
                memcpy(&id, p, 4);
                CU_ASSERT_EQUAL_FATAL(id, got);
            }
            CU_ASSERT(len <= 4 || (p[4] == (got & 0xff) && p[len - 1] == (got & 0xff)));
            uccl_gpu_ipc_ring_pop(&rx, len);
            got++;
        }
    }
    CU_ASSERT(atomic_load(&tx.shm->ctl.head) > 10ull * IPC_RING_BYTES); /* it wrapped many times */
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &(uint16_t){0}, &(const void *){NULL}, &(size_t){0}),
                       UCCL_ERR_NOT_FOUND);
    ring_pair_free(&rx, &tx);
}

static void test_full(void)
{
    static uint8_t buf[IPC_MSG_MAX];
    ipc_ring_t rx, tx;
    const void *p;
    size_t len;
    uint16_t type;
    int n = 0;

    ring_pair(&rx, &tx);
    while (uccl_gpu_ipc_ring_push(&tx, 1, buf, sizeof(buf), NULL, 0))
        n++;
    CU_ASSERT_EQUAL(n, IPC_RING_BYTES / (IPC_MSG_MAX + 8)); /* whole records only */
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &type, &p, &len), UCCL_OK);
    uccl_gpu_ipc_ring_pop(&rx, len);
    CU_ASSERT_TRUE(uccl_gpu_ipc_ring_push(&tx, 2, buf, 16, NULL, 0)); /* room again */
    ring_pair_free(&rx, &tx);
}

static void test_attach_refused(void)
{
    ipc_ring_t r;
    char name[IPC_RING_NAME_MAX];
    int fd;

    memset(&r, 0, sizeof(r));
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_attach(&r, "/not-ours"), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_attach(&r, "/uccl-gpuipc-none-0-0"), UCCL_ERR_IO);
    snprintf(name, sizeof(name), "/uccl-gpuipc-test-%d", (int)getpid());
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    CU_ASSERT_FATAL(fd >= 0 && ftruncate(fd, 4096) == 0);
    close(fd);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_attach(&r, name), UCCL_ERR_IO); /* wrong size */
    shm_unlink(name);
}

/* Each kind of garbage the producer side can hold: peek says
 * UCCL_ERR_PEER_FAILED and touches nothing outside the ring. */
static void test_garbage(void)
{
    struct {
        const char *what;
        uint32_t len;
        uint16_t type;
        uint64_t adv;
    } bad[] = {
        {"length over IPC_MSG_MAX", IPC_MSG_MAX + 8, 1, IPC_MSG_MAX + 16},
        {"length beyond the ring", 0xfffffff8u, 1, 8},
        {"record longer than what the head covers", 64, 1, 16},
        {"head less than a header ahead", 0, 1, 4},
        {"head more than the ring ahead", 0, 1, IPC_RING_BYTES + 8},
    };
    const void *p;
    size_t len;
    uint16_t type;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ipc_ring_t rx, tx;
        ring_pair(&rx, &tx);
        raw_record(&tx, bad[i].len, bad[i].type, bad[i].adv);
        if (uccl_gpu_ipc_ring_peek(&rx, &type, &p, &len) != UCCL_ERR_PEER_FAILED)
            printf("\n    not refused: %s ", bad[i].what);
        UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &type, &p, &len), UCCL_ERR_PEER_FAILED);
        ring_pair_free(&rx, &tx);
    }
}

/* A record changed by the peer after peek read it: pop moves past what
 * peek checked, not past what the shared memory says now. */
static void test_changed_after_peek(void)
{
    ipc_ring_t rx, tx;
    uint32_t huge = 0x7ffffff0u;
    const void *p;
    size_t len;
    uint16_t type;

    ring_pair(&rx, &tx);
    CU_ASSERT_TRUE(uccl_gpu_ipc_ring_push(&tx, 1, "0123456789abcdef", 16, NULL, 0));
    CU_ASSERT_TRUE(uccl_gpu_ipc_ring_push(&tx, 2, "next", 4, NULL, 0));
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &type, &p, &len), UCCL_OK);
    CU_ASSERT_EQUAL(len, 16);
    memcpy(tx.shm->data + 4, &huge, 4); /* the first record's size, rewritten */
    uccl_gpu_ipc_ring_pop(&rx, len);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_peek(&rx, &type, &p, &len), UCCL_OK);
    CU_ASSERT(type == 2 && len == 4 && memcmp(p, "next", 4) == 0);
    ring_pair_free(&rx, &tx);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"records in order over many wraps", test_order_and_wrap},
        {"a full ring refuses, then takes more", test_full},
        {"attach refuses foreign, missing and wrong-size objects", test_attach_refused},
        {"garbage lengths and indexes are refused", test_garbage},
        {"a record changed after peek", test_changed_after_peek},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"gpu_ipc_ring", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

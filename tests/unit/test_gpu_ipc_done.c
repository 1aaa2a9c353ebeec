/* gpu_ipc's PEER_DONE words (src/tp/gpu_ipc/done.c), the sender's side: a
 * send that claims a word of its mailbox completes when the word reaches
 * its value (the send's number + 1, 32 bits, compared cyclically), and only
 * then, whatever the connection's count of sends and writes before it: a
 * word the receiver's GPU last wrote 2^31 numbers or more earlier (or never:
 * a fresh page's 0) must not read as this send's. The engine and endpoint
 * are built by hand around a real mailbox ring; no GPU is used (the
 * receiver's GPU write is a store here). */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "tp/gpu_ipc/ipc.h"
#include "unit.h"

#define LEN (4u << 20) /* a send at PEER_DONE_MIN */

typedef struct {
    ipc_tp_t tp;
    ipc_ep_t ep;
} done_pair_t;

static void pair_init(done_pair_t *p)
{
    memset(p, 0, sizeof(*p));
    p->tp.cfg.peer_done = 1;
    p->tp.cfg.peer_done_min = LEN;
    p->ep.tp = &p->tp;
    for (int i = 0; i < IPC_WAIT_N; i++)
        uccl_hmap_init(&p->ep.waits[i]);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_ring_create(&p->ep.rx), UCCL_OK); /* its done page reads 0 */
}

static void pair_fini(done_pair_t *p)
{
    for (int i = 0; i < IPC_WAIT_N; i++)
        uccl_hmap_fini(&p->ep.waits[i]);
    uccl_gpu_ipc_ring_destroy(&p->ep.rx);
}

/* The receiver's GPU writes the word of slot (1-based) for send seq. */
static void gpu_writes(done_pair_t *p, uint32_t slot, uint64_t seq)
{
    __atomic_store_n(&p->ep.rx.shm->done[slot - 1], (uint32_t)(seq + 1), __ATOMIC_RELEASE);
}

/* Claim a word for send seq; it must not read done before its write, and
 * must once written. */
static void claim_then_done(done_pair_t *p, uint64_t seq)
{
    uint32_t slot = uccl_gpu_ipc_done_claim(&p->ep, seq, LEN);

    CU_ASSERT_FATAL(slot >= 1 && slot <= IPC_DONE_SLOTS);
    CU_ASSERT_EQUAL(uccl_gpu_ipc_done_poll(&p->ep), 0); /* nothing written for it yet */
    CU_ASSERT_TRUE((p->ep.done_busy & (1ull << (slot - 1))) != 0);
    gpu_writes(p, slot, seq);
    CU_ASSERT_EQUAL(uccl_gpu_ipc_done_poll(&p->ep), 1);
    CU_ASSERT_EQUAL(p->ep.done_busy, 0);
}

/* The first sends of a connection, and the floor. */
static void test_first_sends(void)
{
    done_pair_t p;

    pair_init(&p);
    CU_ASSERT_EQUAL(uccl_gpu_ipc_done_claim(&p.ep, 0, LEN - 1), 0); /* below PEER_DONE_MIN: FIN */
    CU_ASSERT_EQUAL(uccl_gpu_ipc_done_claim(&p.ep, 0, 0), 0);
    for (uint64_t seq = 0; seq < 3 * IPC_DONE_SLOTS; seq++)
        claim_then_done(&p, seq);
    pair_fini(&p);
}

/* A connection's first large send after 2^31 small ones (or writes/reads):
 * the word of a slot never written reads 0, which the cyclic compare takes
 * for "at or past" any value from 2^31 + 1 on. */
static void test_fresh_word_late(void)
{
    done_pair_t p;

    pair_init(&p);
    claim_then_done(&p, (1ull << 31) + 5);
    claim_then_done(&p, (1ull << 32) - 1); /* value 0, what a fresh page holds */
    claim_then_done(&p, (3ull << 31) + 7);
    claim_then_done(&p, (1ull << 40) + 3);
    pair_fini(&p);
}

/* A slot written long ago, claimed again 2^31 numbers later. */
static void test_stale_word(void)
{
    done_pair_t p;
    uint64_t seq = 100;

    pair_init(&p);
    for (int k = 0; k < IPC_DONE_SLOTS; k++)
        claim_then_done(&p, seq++);
    seq += (1ull << 31) + 17; /* that many small sends: no slot claimed */
    for (int k = 0; k < 2 * IPC_DONE_SLOTS; k++)
        claim_then_done(&p, seq++);
    pair_fini(&p);
}

/* Several held at once, written out of order: each completes on its own. */
static void test_out_of_order(void)
{
    done_pair_t p;
    uint64_t base = (1ull << 31) + 1000;
    uint32_t slot[8];

    pair_init(&p);
    for (int k = 0; k < 8; k++)
        slot[k] = uccl_gpu_ipc_done_claim(&p.ep, base + (uint64_t)k, LEN);
    CU_ASSERT_EQUAL(uccl_gpu_ipc_done_poll(&p.ep), 0);
    for (int k = 7; k >= 0; k -= 2) {
        gpu_writes(&p, slot[k], base + (uint64_t)k);
        CU_ASSERT_EQUAL(uccl_gpu_ipc_done_poll(&p.ep), 1);
    }
    CU_ASSERT_EQUAL(__builtin_popcountll(p.ep.done_busy), 4);
    pair_fini(&p);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"the first sends and the size floor", test_first_sends},
        {"a never-written word after 2^31 numbers", test_fresh_word_late},
        {"a word last written 2^31 numbers before", test_stale_word},
        {"words written out of order", test_out_of_order},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"gpu_ipc_done", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}

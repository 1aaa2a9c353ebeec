/* gpu_ipc sends told done by the receiver's GPU (UCCL_GPU_IPC_PEER_DONE).
 *
 * A message the receiver pulls used to end with three steps after its
 * copy: the receiver's progress sees the fence's host word (flag.c), sends
 * FIN through the mailbox, and the sender's progress takes the FIN. Here
 * the fence's word is a word of the SENDER's mailbox segment, which both
 * processes map: the receiver's GPU writes it after the copy (the copy
 * kernel's last block, or a stream write), and both progress loops read
 * it. The receiver sends FIN only when the copy failed (the word never
 * lands: a fault stops the stream, flag.c's late stream query fails the
 * fence) or when its fence could not write the word (another flagged
 * fence in flight, copies on several streams or to another GPU, more than
 * one op, no mapping); the sender takes whichever comes.
 *
 * The words: IPC_DONE_SLOTS in a page of each ring segment (ring.h). The
 * side that created a ring owns its words: a send claims one (round
 * robin, so every slot keeps being reused), names it in its RTS
 * (done_slot, 1-based) and holds it until its word, a FIN or a CTS comes.
 * The value is the send's number + 1 (never the zero a fresh page holds),
 * compared cyclically: a slot is written only for the send that holds it,
 * and the numbers grow, so a word at or past the value says that send's
 * copy is done. Nobody but the receiver's GPU writes a word (but a claim
 * of a word 2^31 numbers behind: done_rebase), so the
 * receiver can still read it after the sender has seen it and claimed the
 * slot again (the next value lands only after the receiver saw this one:
 * one flagged fence at a time, flag.c). The side that attached a ring
 * registers the word page for its GPU when it connects
 * (uccl_gpu_host_register_mapped, as NCCL registers its shared memory);
 * without that page the receiver answers with FIN as before.
 *
 * What it saves (one H100, two processes on GPU 0, window 1,
 * tests/gpu/results/1xH100-gpu15): the receiver's op finish 345 -> 90 ns
 * (the FIN record no longer goes before the receive completes and its ack
 * can go) and one of the sender's two records per transfer; send 0.02
 * closer to a plain copy on average over three calls (+0.031, +0.036,
 * -0.007: the size of one call's noise). The rest of the window-1 gap is
 * the RTS and ack hops and the mid-size copies (same README). On one H200
 * (tests/gpu/results/1xH200-s21) it costs window-1 sends of 4 KiB-1 MiB
 * 0.07-0.10x a plain copy, while a bcast of 4-64 MiB, whose root waits for its
 * send to end before the next call, gains 0.03-0.07x: sends below
 * PEER_DONE_MIN (4 MiB) keep the FIN. */
#include <stdlib.h>
#include <sys/mman.h>

#include "tp/gpu_ipc/ipc.h"

/* Runs where the connection is made: in uccl_connect, or in progress when
 * accepted (a lazy comm's first collective, the progress thread), on a
 * thread whose current GPU may be another: the registration runs on the
 * engine's (elsewhere it would create a context on that GPU, and map the
 * page for it). A failure only costs the word: sends end with FIN. */
void uccl_gpu_ipc_done_setup(ipc_ep_t *ep)
{
    ipc_tp_t *tp = ep->tp;

    if (!tp->cfg.peer_done || tp->device < 0 || ep->tx.shm == NULL || ep->done_dev != NULL)
        return;
    if (uccl_gpu_ipc_use_device(tp, -1) != UCCL_OK ||
        uccl_gpu_host_register_mapped(ep->tx.shm->done, sizeof(ep->tx.shm->done), &ep->done_dev) != UCCL_OK) {
        ep->done_dev = NULL;
        uccl_warn("gpu_ipc: UCCL_GPU_IPC_PEER_DONE=1, but pid %d's mailbox cannot be mapped for GPU %d: "
                  "its sends here end with FIN", ep->peer_pid, tp->device);
    }
}

/* Unregistering a page synchronizes the device (cudaHostUnregister): while
 * a caller's stream waits on this engine's progress (a stream-ordered call
 * whose flag only this progress writes, after the failed connection's
 * requests end), or while the caller's streams have not passed every
 * stream-ordered call (one waits on a word a dead peer's GPU would have
 * written), that never returns. A peer dying under a stream-ordered
 * collective hung its survivors here (one H200, t_gpu_stream_kill with
 * PEER_DONE=1, session 16; the fake backend now aborts there). Then the
 * ring's mapping goes to the tp's done_orphans, unregistered and unmapped
 * once the streams passed (progress) or with the tp. */
typedef struct done_orphan {
    uccl_list_t link;
    ipc_ring_shm_t *shm;
} done_orphan_t;

static void done_unregister(ipc_tp_t *tp, ipc_ring_shm_t *shm)
{
    uccl_gpu_ipc_use_device(tp, -1); /* teardown may run on another thread */
    uccl_gpu_host_unregister(shm->done);
}

void uccl_gpu_ipc_done_close(ipc_ep_t *ep)
{
    ipc_tp_t *tp = ep->tp;
    uccl_engine_t *engine = tp->base.engine;
    done_orphan_t *o;

    if (ep->done_dev == NULL)
        return;
    ep->done_dev = NULL;
    if (uccl_engine_stream_holds(engine) > 0 || !uccl_engine_streams_passed(engine)) {
        if ((o = malloc(sizeof(*o))) != NULL) {
            o->shm = ep->tx.shm;
            ep->tx.shm = NULL; /* the ring's end leaves the mapping to us */
            uccl_list_push_back(&tp->done_orphans, &o->link);
            return;
        }
        uccl_warn("gpu_ipc: no memory to defer a word page's unregistration: done now");
    }
    done_unregister(tp, ep->tx.shm);
}

void uccl_gpu_ipc_done_orphans_close(ipc_tp_t *tp)
{
    while (!uccl_list_empty(&tp->done_orphans)) {
        done_orphan_t *o = uccl_list_first(&tp->done_orphans, done_orphan_t, link);

        uccl_list_del(&o->link);
        done_unregister(tp, o->shm);
        munmap(o->shm, sizeof(*o->shm));
        free(o);
    }
}

static uint32_t done_value(uint64_t seq)
{
    return (uint32_t)(seq + 1);
}

/* The compare is cyclic: a word left 2^31 numbers or more behind the value
 * (a slot idle that long; a connection's first large send after 2^31 small
 * ones or writes, its word still the fresh page's 0) reads as at or past
 * it, and the send would complete (and the receiver's fence pass) before
 * its copy. Such a word is set just below the value first. A free slot has
 * no write of the receiver's GPU to come (its last holder saw its word, or
 * a FIN or CTS came instead), and the RTS that names it goes after this
 * store (the ring's release). */
static void done_rebase(uint32_t *word, uint32_t value)
{
    if ((int32_t)(__atomic_load_n(word, __ATOMIC_RELAXED) - value) >= 0)
        __atomic_store_n(word, value - 1, __ATOMIC_RELAXED);
}

uint32_t uccl_gpu_ipc_done_claim(ipc_ep_t *ep, uint64_t seq, size_t len)
{
    if (!ep->tp->cfg.peer_done || len == 0 || len < ep->tp->cfg.peer_done_min || ep->rx.shm == NULL ||
        ep->done_busy == UINT64_MAX)
        return 0;
    for (unsigned k = 0; k < IPC_DONE_SLOTS; k++) {
        unsigned s = (ep->done_next + k) % IPC_DONE_SLOTS;

        if (ep->done_busy & (1ull << s))
            continue;
        done_rebase(&ep->rx.shm->done[s], done_value(seq));
        ep->done_busy |= 1ull << s;
        ep->done_seq[s] = seq;
        ep->done_next = s + 1;
        return s + 1;
    }
    return 0;
}

void uccl_gpu_ipc_done_release(ipc_ep_t *ep, uint64_t seq)
{
    for (uint64_t busy = ep->done_busy; busy != 0; busy &= busy - 1) {
        int s = __builtin_ctzll(busy);

        if (ep->done_seq[s] == seq) {
            ep->done_busy &= ~(1ull << s);
            return;
        }
    }
}

int uccl_gpu_ipc_done_poll(ipc_ep_t *ep)
{
    int events = 0;

    for (uint64_t busy = ep->done_busy; busy != 0; busy &= busy - 1) {
        int s = __builtin_ctzll(busy);
        uint32_t now = __atomic_load_n(&ep->rx.shm->done[s], __ATOMIC_ACQUIRE);
        uint64_t t0;

        if ((int32_t)(now - done_value(ep->done_seq[s])) < 0)
            continue;
        t0 = IPC_PROF_T0(ep->tp->cfg.prof);
        ep->done_busy &= ~(1ull << s);
        uccl_gpu_ipc_send_done(ep, ep->done_seq[s]);
        IPC_PROF_ADD(&ep->tp->prof, IPC_PROF_PEER_DONE, t0, 1);
        events++;
    }
    if (events == 0 && ep->done_busy != 0)
        uccl_gpu_flags_poll(); /* the fake backend runs its streams here */
    return events;
}

void uccl_gpu_ipc_done_join(ipc_ep_t *ep, ipc_op_t *op, ipc_fence_t *f)
{
    uint32_t s = op->done_slot;

    if (f->refs == 1 && op->kind == OP_RECV && s >= 1 && s <= IPC_DONE_SLOTS && ep->done_dev != NULL) {
        f->done_dev = (char *)ep->done_dev + (s - 1) * sizeof(uint32_t);
        f->done_host = &ep->tx.shm->done[s - 1];
        f->done_value = done_value(op->seq);
        f->done_op = op;
        return;
    }
    f->done_dev = NULL; /* a second op: the fence's own word, and FIN for both */
    f->done_host = NULL;
    f->done_op = NULL;
}

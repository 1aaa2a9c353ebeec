/* MAPPED: small collectives through shared segments that every rank maps
 * (uccl_rdesc_ptr), the way Open MPI's coll/sm and UCC's shm team work.
 *
 * Each rank owns one segment (uccl_mem_alloc: shared memory), registered
 * and described to the peers once per communicator (mapped_setup, the
 * first call that picks MAPPED; the ranks agree whether every peer maps).
 * A call's writer copies its outgoing blocks into slots of its own
 * segment and publishes each with the call's number (release stores: one
 * flag in each cache line of a small block, beside 56 of its bytes; see
 * coll/mapped_slot.h); readers acquire them, copy straight out of the
 * writer's segment into their buffer and store their ack in the writer's
 * segment. A ring of buffers (call m uses buffer m % depth; depth
 * 2..RING_MAX, as many as RING_BUDGET holds): a writer reuses one only once every reader of its
 * last use acked, so a root runs up to depth calls ahead of its readers,
 * and it reads a reader's ack line only then (an ack it saw covers every
 * earlier call): the reader's ack stores stay in its own cache meanwhile.
 * Calls run their writes, then their reads, in call order.
 * Segment: ack[n] (a cache line each, written by reader j), then the
 * small slots [n][depth] (up to SMALL_CAP bytes and the flags; a lane's
 * consecutive buffers side by side), then the big slots
 * [depth][n] (the bytes of a block above SMALL_CAP).
 * Blocks larger than a slot go two-sided: whole collectives are built as
 * LINEAR when every rank knows the size, alltoallv pair by pair (sender
 * and receiver both know the pair's count). GPU buffers are staged through
 * the temporary (host) with the schedule's copies. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mapped_slot.h"

static _Atomic uint64_t *ack_word(char *seg, int j)
{
    return (_Atomic uint64_t *)(seg + (size_t)j * LINE);
}

/* After a read, the reader prefetches the same slot this many buffers on
 * (fewer on a shorter ring): 2 measured faster than 1 (coll14-H200host). */
#ifndef MAPPED_PF_AHEAD
#define MAPPED_PF_AHEAD 2
#endif

/* Does this processor prefetch for writing (x86: CPUID PRFCHW)? */
static bool has_prefetchw(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
#else
    return true;
#endif
}

size_t uccl_coll_mapped_slot(int n)
{
    size_t s = SEG_BUDGET / (size_t)n;

    s = s > SLOT_MAX ? SLOT_MAX : s < SLOT_MIN ? SLOT_MIN : s;
    return s & ~(size_t)(LINE - 1);
}

/* Buffers per writer: UCCL_COLL_MAPPED_DEPTH (RING_MAX by default) or
 * fewer where RING_BUDGET holds fewer, at least 2. The ranks compare
 * theirs in mapped_setup. */
static int ring_depth(int n, size_t slot)
{
    const char *v = getenv("UCCL_COLL_MAPPED_DEPTH");
    size_t d = RING_BUDGET / ((size_t)n * (SMALL_STRIDE + big_stride(slot))), want = RING_MAX;

    if (v != NULL && *v != '\0') {
        want = strtoul(v, NULL, 10);
        if (want < 2 || want > RING_MAX) {
            coll_error("UCCL_COLL_MAPPED_DEPTH=%s: expected 2..%d; using %d", v, RING_MAX,
                       RING_MAX);
            want = RING_MAX;
        }
    }
    d = d < want ? d : want;
    return d < 2 ? 2 : (int)d;
}

/* ------------------------------------------------------------------ setup */

void uccl_coll_mapped_destroy(coll_state_t *cs)
{
    coll_mapped_t *M = cs->mapped;

    if (M == NULL)
        return;
    if (M->mr != NULL)
        uccl_mr_dereg(M->mr);
    if (M->seg != NULL)
        uccl_mem_free(cs->engine, M->seg);
    free(M->peer);
    free(M->readers);
    free(M->acked);
    free(M);
    cs->mapped = NULL;
}

/* One blocking LINEAR allgather of len bytes per rank (setup only: the
 * library's own, not counted). */
static uccl_status_t setup_allgather(coll_state_t *cs, const void *mine, void *all, size_t len)
{
    uccl_coll_args_t a = {
        .field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER, .algo = UCCL_COLL_ALGO_LINEAR,
        .sendbuf = mine, .recvbuf = all, .count = len,
    };
    return uccl_coll_internal(cs->comm, &a);
}

/* Does this rank reach every peer through gpu_ipc (GPU engines on one
 * host)? Then GPU buffers would go through MAPPED's host segments by two
 * staged copies: on 2x H200, 24-34 us a call at 4-16 KiB, where linear's
 * IPC copies took 11-22 us (tests/gpu/results/2xH200-s11). */
static bool all_gpu_ipc(const coll_state_t *cs)
{
    for (int j = 0; j < cs->size; j++) {
        uccl_conn_attr_t attr;
        if (j != cs->rank && (uccl_conn_query(uccl_comm_conn(cs->comm, j), &attr) != UCCL_OK ||
                              attr.gpu_transport == NULL || strcmp(attr.gpu_transport, "gpu_ipc") != 0))
            return false;
    }
    return cs->size > 1;
}

#define MAPPED_GPU_BIT 0x80 /* beside the depth (<= RING_MAX) in the agreement byte */

/* Collective, on the first call that picks MAPPED: every rank's segment
 * made, described, mapped by every peer. cs->mapped_ok: 1 yes, -1 no;
 * cs->mapped_gpu: every rank reaches every peer by gpu_ipc. */
static uccl_status_t mapped_setup(coll_state_t *cs)
{
    int n = cs->size, r = cs->rank;
    coll_mapped_t *M = calloc(1, sizeof(*M));
    uccl_rdesc_t *descs = calloc((size_t)n + 1, sizeof(*descs));
    uint8_t *ok = calloc((size_t)n + 1, 1);
    uint8_t mine;
    uccl_status_t st = UCCL_ERR_NO_MEMORY;

    if (M == NULL || descs == NULL || ok == NULL ||
        (M->peer = calloc((size_t)n, sizeof(*M->peer))) == NULL ||
        (M->readers = calloc((size_t)n * RING_MAX, 1)) == NULL ||
        (M->acked = calloc((size_t)n, sizeof(*M->acked))) == NULL)
        goto out;
    cs->mapped = M;
    M->slot = uccl_coll_mapped_slot(n);
    M->depth = ring_depth(n, M->slot);
    mine = (uint8_t)M->depth; /* 0: this rank cannot map some peer */
    M->seg_len = seg_bytes(n, M->depth, M->slot);
    M->next_m = M->next_write = M->next_read = 1;
    M->prefetchw = has_prefetchw();
    if (uccl_mem_alloc(cs->engine, UCCL_MEM_HOST, M->seg_len, (void **)&M->seg) != UCCL_OK ||
        uccl_mr_reg(cs->engine, M->seg, M->seg_len, 0, &M->mr) != UCCL_OK ||
        uccl_mr_pack(M->mr, 0, M->seg_len, &descs[n]) != UCCL_OK) {
        mine = 0;
        memset(&descs[n], 0, sizeof(descs[n]));
    } else {
        memset(M->seg, 0, M->seg_len);
    }
    M->peer[r] = M->seg;
    if ((st = setup_allgather(cs, &descs[n], descs, sizeof(*descs))) != UCCL_OK)
        goto out;
    for (int j = 0; j < n && mine; j++) {
        void *p = NULL;
        if (j == r)
            continue;
        st = uccl_rdesc_ptr(uccl_comm_conn(cs->comm, j), &descs[j], &p);
        if (st != UCCL_OK) {
            coll_debug("mapped: rank %d cannot map rank %d's segment: %s", r, j,
                       uccl_strerror(st));
            mine = 0;
        }
        M->peer[j] = p;
    }
    if (all_gpu_ipc(cs))
        mine |= MAPPED_GPU_BIT;
    if ((st = setup_allgather(cs, &mine, ok, 1)) != UCCL_OK)
        goto out;
    cs->mapped_ok = 1;
    cs->mapped_gpu = true;
    for (int j = 0; j < n; j++) {
        cs->mapped_gpu = cs->mapped_gpu && (ok[j] & MAPPED_GPU_BIT);
        ok[j] &= (uint8_t)~MAPPED_GPU_BIT;
    }
    for (int j = 0; j < n; j++)
        if (ok[j] != M->depth)
            cs->mapped_ok = ok[j] == 0 || cs->mapped_ok == -2 ? -2 : -1;
    if (cs->mapped_ok == -2)
        coll_debug("mapped: some rank cannot map every peer's memory; not used on this comm");
    else if (cs->mapped_ok < 0)
        coll_error("mapped: the ranks' UCCL_COLL_MAPPED_DEPTH differ; not used on this comm");
    cs->mapped_ok = cs->mapped_ok < 0 ? -1 : 1;
out:
    free(descs);
    free(ok);
    if (st != UCCL_OK && cs->mapped == NULL)
        free(M);
    return st;
}

uccl_status_t uccl_coll_mapped_ready(coll_state_t *cs)
{
    uccl_status_t st = UCCL_OK;

    if (cs->mapped_ok == 0) {
        st = mapped_setup(cs);
        if (st != UCCL_OK) {
            coll_error("mapped: setting up the shared segments failed: %s", uccl_strerror(st));
            return st;
        }
    }
    return cs->mapped_ok > 0 ? UCCL_OK : UCCL_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------------ running */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void uccl_coll_mapped_start(coll_sched_t *s)
{
    coll_mapped_run_t *run = s->mapped;

    run->m = s->cs->mapped->next_m++;
    run->p = (int)(run->m % (uint64_t)s->cs->mapped->depth);
    run->state = 0;
    run->waiting_on = -1;
    run->polls = 0;
    run->soft = UCCL_OK;
    for (int i = 0; i < run->nr; i++)
        run->rs[i].done = false;
}

static bool peer_failed(coll_sched_t *s, int peer, int waited)
{
    uccl_conn_attr_t attr;

    if (peer < 0 || peer == s->cs->rank ||
        uccl_conn_query(uccl_comm_conn(s->cs->comm, peer), &attr) != UCCL_OK ||
        attr.state == UCCL_OK)
        return false;
    coll_error("collective %u: rank %d failed (%s) while rank %d waited for rank %d", s->seq,
               peer, uccl_strerror(attr.state), s->cs->rank, waited);
    s->mapped->soft = attr.state;
    return true;
}

/* Still waiting for peer: now and then its connection's error (it died),
 * and in turn every other peer's: a rank that died anywhere stops the
 * comm's calls (a root waiting for a dead reader's ack stops writing, so
 * its other readers would wait for it in vain). */
static uccl_status_t waiting(coll_sched_t *s, int peer)
{
    coll_mapped_run_t *run = s->mapped;

    run->waiting_on = peer;
    if ((++run->polls & 255) != 0)
        return UCCL_INPROGRESS;
    if (peer_failed(s, peer, peer) ||
        peer_failed(s, (int)((run->polls >> 8) % (unsigned)s->cs->size), peer))
        return run->soft;
    return UCCL_INPROGRESS;
}

/* Every reader of this buffer's last write has acked it? Else who not.
 * A reader's ack line is read only when the copy of it seen last does not
 * cover the buffer; then the writer waits until the reader also acked its
 * calls up to ACK_AHEAD buffers later (calls it read from this writer and
 * that were written already, so it does ack them), so that the next read
 * of that line comes that many calls later, not at every call once the
 * ring is full (the line would move to and fro at every ack). Not below 4
 * buffers: there it would hold the writer to the reader's pace. */
#define ACK_AHEAD(depth) ((depth) >= 4 ? (depth) / 2 : 0)
static int acks_missing(coll_state_t *cs, int p)
{
    coll_mapped_t *M = cs->mapped;
    size_t n = (size_t)cs->size;

    for (size_t j = 0; j < n; j++) {
        uint64_t want = M->last_write[p], a;
        if (!M->readers[(size_t)p * n + j] || M->acked[j] >= want)
            continue; /* known without touching the reader's line */
        for (int k = 1; k <= ACK_AHEAD(M->depth); k++) {
            int q = (p + k) % M->depth;
            if (M->readers[(size_t)q * n + j] && M->last_write[q] > want)
                want = M->last_write[q];
        }
        a = atomic_load_explicit(ack_word(M->seg, (int)j), memory_order_acquire);
        if (a < want)
            return (int)j; /* M->acked[j] stays: the next look wants as much */
        M->acked[j] = a;
    }
    return -1;
}

/* Did every reader of buffer p's last write ack it, as far as the local
 * copy of the acks says? */
static bool acked_here(const coll_mapped_t *M, int n, int p)
{
    for (int j = 0; j < n; j++)
        if (M->readers[(size_t)p * (size_t)n + (size_t)j] && M->acked[j] < M->last_write[p])
            return false;
    return true;
}

/* After the writes of buffer p: the same slots of the next buffer for
 * writing, where it is free (the next call of a run of alike calls
 * writes them; MAPPED_PREFETCHW). */
static void prefetch_next_writes(const coll_mapped_t *M, const coll_mapped_run_t *run, int n, int p)
{
    int q = (p + 1) % M->depth;

    if (!MAPPED_PREFETCHW || !M->prefetchw || !acked_here(M, n, q))
        return;
    for (int i = 0; i < run->nw; i++)
        slot_prefetch(M, M->seg, n, q, run->ws[i].slot, run->ws[i].len, true);
}

static uccl_status_t run_writes(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    coll_mapped_t *M = cs->mapped;
    coll_mapped_run_t *run = s->mapped;
    int n = cs->size, p = run->p, j;

    if (M->next_write != run->m)
        return waiting(s, -1); /* an earlier call writes first */
    if (run->writer) {
        if ((j = acks_missing(cs, p)) >= 0)
            return waiting(s, j);
        for (int i = 0; i < run->nw; i++) {
            const mw_t *w = &run->ws[i];
            slot_write(slot_hdr(M, M->seg, n, p, w->slot), slot_big(M, M->seg, n, p, w->slot),
                       s->addr[w->buf] + w->off, w->len, run->m);
        }
        M->last_write[p] = run->m;
        memcpy(M->readers + (size_t)p * (size_t)n, run->readers, (size_t)n);
        prefetch_next_writes(M, run, n, p);
    }
    M->next_write++;
    for (int i = 0; i < run->nc; i++) {
        const mcp_t *c = &run->cs[i];
        memmove(s->addr[c->dbuf] + c->doff, s->addr[c->sbuf] + c->soff, c->len);
    }
    run->state = 1;
    return UCCL_OK;
}

/* After a read: the same slot MAPPED_PF_AHEAD buffers on (at most depth -
 * 1: not the buffer just read), as many lines as this call read (up to
 * PF_READ_MAX): in a run of calls of one root it is often written already, and
 * its lines then come while the calls between run. */
static void prefetch_next(const coll_mapped_t *M, char *seg, int n, int p, int slot, size_t len)
{
    int ahead = M->depth > MAPPED_PF_AHEAD ? MAPPED_PF_AHEAD : M->depth - 1;

    slot_prefetch(M, seg, n, (p + ahead) % M->depth, slot, len, false);
}

static uccl_status_t run_reads(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    coll_mapped_t *M = cs->mapped;
    coll_mapped_run_t *run = s->mapped;
    int n = cs->size, p = run->p, missing = -1;

    if (M->next_read != run->m)
        return waiting(s, -1);
    for (int i = 0; i < run->nr; i++) {
        mrd_t *rd = &run->rs[i];
        char *seg = M->peer[rd->from], *h;
        size_t len, wlen;

        if (rd->done)
            continue;
        h = slot_hdr(M, seg, n, p, rd->slot);
        if (!slot_ready(h, run->m, rd->len, &wlen)) {
            if (missing < 0)
                missing = rd->from;
            continue;
        }
        len = wlen;
        if (wlen != rd->len) {
            coll_error("rank %d sent %zu bytes where rank %d expects %zu", rd->from, wlen,
                       cs->rank, rd->len);
            run->soft = UCCL_ERR_TRUNCATED;
            len = wlen < rd->len ? wlen : rd->len;
        }
        if (len > 0) /* where the writer's length says it put the bytes */
            slot_read(s->addr[rd->buf] + rd->off, h, slot_big(M, seg, n, p, rd->slot), wlen, len);
        rd->done = true;
        atomic_store_explicit(ack_word(seg, cs->rank), run->m, memory_order_release);
        prefetch_next(M, seg, n, p, rd->slot, len);
    }
    if (missing >= 0)
        return waiting(s, missing);
    M->next_read++;
    run->state = 2;
    return run->soft;
}

uccl_status_t uccl_coll_mapped_advance(coll_sched_t *s, coll_op_t *op)
{
    coll_mapped_run_t *run = s->mapped;
    uccl_status_t st = UCCL_OK;

    (void)op;
    if (run->state < 2 && s->cs->mapped->failed != UCCL_OK)
        return s->cs->mapped->failed;
    if (run->state == 0 && (st = run_writes(s)) != UCCL_OK)
        return st;
    if (run->state == 1)
        st = run_reads(s);
    return st;
}

void uccl_coll_mapped_end(coll_sched_t *s, uccl_status_t st)
{
    coll_mapped_t *M = s->cs->mapped;

    if (s->mapped->state < 2 && st != UCCL_OK && M != NULL && M->failed == UCCL_OK) {
        coll_debug("mapped: collective %u failed midway (%s); the comm's later mapped calls "
                   "fail too", s->seq, uccl_strerror(st));
        M->failed = st;
    }
}

/* Blocking, one phase holding only the MAPPED op: spin on the flags with
 * cs->lock released between polls (non-blocking collectives in flight
 * advance from the engine's progress, run every few polls: it also
 * notices a peer's death), bounded by UCCL_TIMEOUT_MS without progress. */
uccl_status_t uccl_coll_mapped_run(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    coll_mapped_run_t *run = s->mapped;
    uint64_t deadline = 0;
    unsigned spins = 0, yield_after = cs->oversubscribed ? 1 : 256;
    int last_state = -1;
    uccl_status_t st;

    for (;;) {
        st = uccl_coll_mapped_advance(s, &s->ops[0]);
        if (st != UCCL_INPROGRESS)
            break;
        if (run->state != last_state) { /* progress: a new deadline */
            last_state = run->state;
            deadline = now_ms() + (uint64_t)uccl_coll_timeout_ms();
        }
        pthread_mutex_unlock(&cs->lock);
        if (++spins % (cs->oversubscribed ? 16 : 64) == 0)
            uccl_engine_progress(cs->engine);
        if (spins >= yield_after && spins % yield_after == 0) {
            sched_yield();
            if (now_ms() > deadline) {
                pthread_mutex_lock(&cs->lock);
                coll_error("collective %u: no progress for %d ms (waiting for rank %d)", s->seq,
                           uccl_coll_timeout_ms(), run->waiting_on);
                st = UCCL_ERR_TIMEOUT;
                break;
            }
        }
        pthread_mutex_lock(&cs->lock);
    }
    return st;
}

/* What uccl_coll_sched_start, uccl_coll_sched_run_locked and the end of
 * the schedule do for a finished one-op MAPPED schedule kept pinned (a
 * plan-cache hit), less the rest: no op request to reset or free, one
 * phase, no stream gate, no trace, and off the running list (which only
 * the comm's destroy and flush read, never during a collective call).
 * Costs 150-200 instructions where that path took about 500 (coll19). */
uccl_status_t uccl_coll_mapped_call(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    uccl_status_t st;

    s->seq = cs->seq++;
    uccl_coll_mapped_start(s);
    cs->stats.calls += !s->internal;
    s->status = UCCL_INPROGRESS;
    st = uccl_coll_mapped_run(s);
    uccl_coll_mapped_end(s, st);
    s->status = st;
    return st;
}

/* MAPPED: small collectives through shared segments that every rank maps
 * (uccl_rdesc_ptr), the way Open MPI's coll/sm and UCC's shm team work.
 *
 * Each rank owns one segment (uccl_mem_alloc: shared memory), registered
 * and described to the peers once per communicator (mapped_setup, the
 * first call that picks MAPPED; the ranks agree whether every peer maps).
 * A call's writer copies its outgoing blocks into slots of its own
 * segment and publishes each with the call's number (a release store in
 * the slot's first cache line, beside its length and first 48 bytes);
 * readers acquire it, copy straight out of the writer's segment into their
 * buffer and store their ack in the writer's segment. A ring of buffers
 * (call m uses buffer m % depth; depth 2..RING_MAX, as many as
 * RING_BUDGET holds): a writer reuses one only once every reader of its
 * last use acked, so a root runs up to depth calls ahead of its readers,
 * and it reads a reader's ack line only then (an ack it saw covers every
 * earlier call): the reader's ack stores stay in its own cache meanwhile.
 * Calls run their writes, then their reads, in call order.
 * Segment: ack[n] (a cache line each, written by reader j), then the
 * small slots [n][depth] (call number, length and up to SMALL_CAP bytes;
 * a lane's consecutive buffers side by side), then the big slots
 * [depth][n] (the bytes of a block above SMALL_CAP).
 * Blocks larger than a slot go two-sided: whole collectives are built as
 * LINEAR when every rank knows the size, alltoallv pair by pair (sender
 * and receiver both know the pair's count). GPU buffers are staged through
 * the temporary (host) with the schedule's copies. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mapped.h"

static _Atomic uint64_t *ack_word(char *seg, int j)
{
    return (_Atomic uint64_t *)(seg + (size_t)j * LINE);
}

/* A slot's header: the call number that published it (release store
 * last) and the length, in the first cache line of its small slot. A
 * block of up to SMALL_CAP bytes follows the header in the small slot's
 * consecutive lines (48 bytes share the flag's line); a larger one lies in
 * the slot's own region (big_data). The small slots of one writer's lane
 * (the slot index k) lie side by side for consecutive calls (buffer p, p +
 * 1, ...), 128-byte aligned: a reader going through a run of calls walks
 * forward through a few KiB, and the lines of one block come as adjacent
 * pairs. */
#define SLOT_HDR 16
#ifndef SMALL_LINES
#define SMALL_LINES 6 /* a small slot: 384 bytes, up to 368 of them data */
#endif
#define SMALL_STRIDE ((size_t)SMALL_LINES * LINE)
#define SMALL_CAP (SMALL_STRIDE - SLOT_HDR)
/* The reader, on each look at a slot not published yet, prefetches the
 * lines the block will be read from: when the call number comes, they are
 * in flight with it, not fetched after it (one line transfer, not two). */
#ifndef MAPPED_POLL_PREFETCH
#define MAPPED_POLL_PREFETCH 1
#endif
/* After a read, the reader prefetches the same slot this many buffers on
 * (fewer on a shorter ring): 2 measured faster than 1 (coll14-H200host). */
#ifndef MAPPED_PF_AHEAD
#define MAPPED_PF_AHEAD 2
#endif
#define PF_MAX 1024 /* bytes of a block prefetched at most */

/* The acks' lines, rounded up to 128 bytes. */
static size_t ack_area(int n)
{
    return (size_t)((n + 1) & ~1) * LINE;
}

/* A big slot's stride: the slot, plus two lines so that the slots of one
 * buffer do not all start in the same cache set. */
static size_t big_stride(size_t slot)
{
    return slot + 2 * LINE;
}

static size_t seg_bytes(int n, int depth, size_t slot)
{
    return ack_area(n) + (size_t)depth * (size_t)n * (SMALL_STRIDE + big_stride(slot));
}

static char *slot_hdr(const coll_mapped_t *M, char *seg, int n, int p, int k)
{
    return seg + ack_area(n) + ((size_t)k * (size_t)M->depth + (size_t)p) * SMALL_STRIDE;
}

/* Where a block of len bytes lies: after the header, or in its big slot. */
static char *slot_data(const coll_mapped_t *M, char *seg, int n, int p, int k, size_t len)
{
    if (len <= SMALL_CAP)
        return slot_hdr(M, seg, n, p, k) + SLOT_HDR;
    return seg + ack_area(n) + (size_t)M->depth * (size_t)n * SMALL_STRIDE +
           ((size_t)p * (size_t)n + (size_t)k) * big_stride(M->slot);
}

static _Atomic uint64_t *slot_seq(char *h)
{
    return (_Atomic uint64_t *)h;
}

/* Prefetch the lines of slot (p, k) that a block of len bytes is read
 * from (up to PF_MAX bytes of it), and the header's line where hdr. */
static void prefetch_slot(const coll_mapped_t *M, char *seg, int n, int p, int k, size_t len,
                          bool hdr)
{
    const char *d = slot_data(M, seg, n, p, k, len);
    size_t end = len < PF_MAX ? len : PF_MAX;

    if (hdr)
        __builtin_prefetch(slot_hdr(M, seg, n, p, k), 0, 3);
    for (const char *l = d - (uintptr_t)d % LINE; l < d + end; l += LINE)
        __builtin_prefetch(l, 0, 3);
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
            char *h = slot_hdr(M, M->seg, n, p, w->slot);
            *(uint64_t *)(h + 8) = w->len;
            if (w->len > 0)
                memcpy(slot_data(M, M->seg, n, p, w->slot, w->len), s->addr[w->buf] + w->off,
                       w->len);
            atomic_store_explicit(slot_seq(h), run->m, memory_order_release);
        }
        M->last_write[p] = run->m;
        memcpy(M->readers + (size_t)p * (size_t)n, run->readers, (size_t)n);
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
 * PF_MAX): in a run of calls of one root it is often written already, and
 * its lines then come while the calls between run. */
static void prefetch_next(const coll_mapped_t *M, char *seg, int n, int p, int slot, size_t len)
{
    int ahead = M->depth > MAPPED_PF_AHEAD ? MAPPED_PF_AHEAD : M->depth - 1;

    prefetch_slot(M, seg, n, (p + ahead) % M->depth, slot, len, true);
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
        uint64_t len;

        if (rd->done)
            continue;
        h = slot_hdr(M, seg, n, p, rd->slot);
        if (MAPPED_POLL_PREFETCH && rd->len > LINE - SLOT_HDR) /* past the flag's line */
            prefetch_slot(M, seg, n, p, rd->slot, rd->len, false);
        if (atomic_load_explicit(slot_seq(h), memory_order_acquire) != run->m) {
            if (missing < 0)
                missing = rd->from;
            continue;
        }
        len = *(const uint64_t *)(h + 8);
        if (len != rd->len) {
            coll_error("rank %d sent %llu bytes where rank %d expects %zu", rd->from,
                       (unsigned long long)len, cs->rank, rd->len);
            run->soft = UCCL_ERR_TRUNCATED;
            len = len < rd->len ? len : rd->len;
        }
        if (len > 0) /* where the writer's length says it put the bytes */
            memcpy(s->addr[rd->buf] + rd->off,
                   slot_data(M, seg, n, p, rd->slot, *(const uint64_t *)(h + 8)), len);
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

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
 * buffer and store their ack in the writer's segment. Two buffers alternate by
 * the call's parity; a writer reuses one only once every reader of its
 * last use acked. Calls run their writes, then their reads, in call order.
 * Segment: ack[n] (a cache line each, written by reader j), then [2][n]
 * slots (call number, length, bytes; cache-line aligned).
 * Blocks larger than a slot go two-sided: whole collectives are built as
 * LINEAR when every rank knows the size, alltoallv pair by pair (sender
 * and receiver both know the pair's count). GPU buffers are staged through
 * the temporary (host) with the schedule's copies. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define LINE 64
#define SLOT_MAX (64u * 1024)
#define SLOT_MIN 4096u
#define SEG_BUDGET (4u << 20) /* slot bytes per buffer and rank: n slots share it */

struct coll_mapped {
    char *seg;
    size_t seg_len, slot;
    uccl_mr_t *mr;
    char **peer;          /* [n] segments mapped here; peer[rank] = seg */
    uint64_t next_m;      /* number of the next call started */
    uint64_t next_write, next_read; /* call whose writes / reads may run */
    uint64_t last_write[2];
    uint8_t *readers[2];  /* [n]: who read the buffer's last write */
    uint64_t *acked;      /* [n]: the latest ack seen of each reader (a local copy) */
    uccl_status_t failed; /* a call failed midway: the order is lost, every later
                           * call fails with this at once */
};

typedef struct { int slot; uint8_t buf; size_t off, len; } mw_t;
typedef struct { int from, slot; uint8_t buf; size_t off, len; bool done; } mrd_t;
typedef struct { uint8_t dbuf, sbuf; size_t doff, soff, len; } mcp_t;

struct coll_mapped_run {
    uint64_t m;
    int state; /* 0 write, 1 read, 2 done */
    int nw, nr, nc;
    mw_t *ws;
    mrd_t *rs;
    mcp_t *cs;
    uint8_t *readers; /* [n]: who reads this rank's segment in this call */
    bool writer;
    int waiting_on;   /* a peer this call waits for (-1 none) */
    unsigned polls;
    uccl_status_t soft;
};

static _Atomic uint64_t *ack_word(char *seg, int j)
{
    return (_Atomic uint64_t *)(seg + (size_t)j * LINE);
}

/* A slot: the call number that published it (release store last), the
 * length, then the bytes: up to 48 of them share the flag's cache line,
 * so that a small block reaches its reader in one line transfer. */
#define SLOT_HDR 16

static size_t slot_stride(size_t slot)
{
    return (SLOT_HDR + slot + LINE - 1) & ~(size_t)(LINE - 1);
}

static char *slot_hdr(const coll_mapped_t *M, char *seg, int n, int p, int k)
{
    return seg + (size_t)n * LINE + ((size_t)p * (size_t)n + (size_t)k) * slot_stride(M->slot);
}

static _Atomic uint64_t *slot_seq(char *h)
{
    return (_Atomic uint64_t *)h;
}

size_t uccl_coll_mapped_slot(int n)
{
    size_t s = SEG_BUDGET / (size_t)n;

    s = s > SLOT_MAX ? SLOT_MAX : s < SLOT_MIN ? SLOT_MIN : s;
    return s & ~(size_t)(LINE - 1);
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
    free(M->readers[0]);
    free(M->readers[1]);
    free(M->acked);
    free(M);
    cs->mapped = NULL;
}

/* One blocking LINEAR allgather of len bytes per rank (setup only). */
static uccl_status_t setup_allgather(coll_state_t *cs, const void *mine, void *all, size_t len)
{
    uccl_coll_args_t a = {
        .field_mask = UCCL_COLL_ARG_ALGO, .op = UCCL_COLL_ALLGATHER, .algo = UCCL_COLL_ALGO_LINEAR,
        .sendbuf = mine, .recvbuf = all, .count = len,
    };
    return uccl_coll(cs->comm, &a);
}

/* Collective, on the first call that picks MAPPED: every rank's segment
 * made, described, mapped by every peer. cs->mapped_ok: 1 yes, -1 no. */
static uccl_status_t mapped_setup(coll_state_t *cs)
{
    int n = cs->size, r = cs->rank;
    coll_mapped_t *M = calloc(1, sizeof(*M));
    uccl_rdesc_t *descs = calloc((size_t)n + 1, sizeof(*descs));
    uint8_t *ok = calloc((size_t)n + 1, 1);
    uint8_t mine = 1;
    uccl_status_t st = UCCL_ERR_NO_MEMORY;

    if (M == NULL || descs == NULL || ok == NULL ||
        (M->peer = calloc((size_t)n, sizeof(*M->peer))) == NULL ||
        (M->readers[0] = calloc((size_t)n, 1)) == NULL ||
        (M->readers[1] = calloc((size_t)n, 1)) == NULL ||
        (M->acked = calloc((size_t)n, sizeof(*M->acked))) == NULL)
        goto out;
    cs->mapped = M;
    M->slot = uccl_coll_mapped_slot(n);
    M->seg_len = (size_t)n * LINE + 2 * (size_t)n * slot_stride(M->slot);
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
    if ((st = setup_allgather(cs, &mine, ok, 1)) != UCCL_OK)
        goto out;
    cs->mapped_ok = 1;
    for (int j = 0; j < n; j++)
        if (!ok[j])
            cs->mapped_ok = -1;
    if (cs->mapped_ok < 0)
        coll_debug("mapped: some rank cannot map every peer's memory; not used on this comm");
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

/* ------------------------------------------------------------------ building */

void uccl_coll_mapped_run_free(coll_mapped_run_t *run)
{
    if (run == NULL)
        return;
    free(run->ws);
    free(run->rs);
    free(run->cs);
    free(run->readers);
    free(run);
}

static size_t blk(const size_t *counts, size_t count, int i)
{
    return counts != NULL ? counts[i] : count;
}

static size_t dsp(const size_t *displs, size_t count, int i)
{
    return displs != NULL ? displs[i] : (size_t)i * count;
}

static bool host_mem(const void *p)
{
    uccl_mem_type_t t = UCCL_MEM_HOST;
    int dev;

    return p == NULL || (uccl_mem_query(p, &t, &dev) == UCCL_OK && t == UCCL_MEM_HOST);
}

typedef struct {
    coll_mapped_run_t *run;
    int n;
    uccl_status_t st;
} mb_t;

static void add_w(mb_t *b, int slot, int buf, size_t off, size_t len)
{
    b->run->ws[b->run->nw++] = (mw_t){slot, (uint8_t)buf, off, len};
    b->run->writer = true;
}

static void add_r(mb_t *b, int from, int slot, int buf, size_t off, size_t len)
{
    b->run->rs[b->run->nr++] = (mrd_t){from, slot, (uint8_t)buf, off, len, false};
}

static void add_c(mb_t *b, int dbuf, size_t doff, int sbuf, size_t soff, size_t len)
{
    if (len > 0 && !(dbuf == sbuf && doff == soff))
        b->run->cs[b->run->nc++] = (mcp_t){(uint8_t)dbuf, (uint8_t)sbuf, doff, soff, len};
}

/* The writes, reads and local copies of one call on this rank. sbuf/rbuf:
 * where the blocks are read from and stored to (the user's buffers, or the
 * temporary staging GPU memory); large alltoallv pairs are left out (the
 * caller sends them two-sided). */
static void plan_blocks(coll_sched_t *s, const coll_args_t *a, mb_t *b, int sbuf, size_t soff,
                        int rbuf, size_t roff, size_t slot)
{
    int n = s->cs->size, r = s->cs->rank, root = a->root;
    const size_t *rc = a->recvcounts, *rd = a->rdispls, c = a->count;
    const size_t *sc = a->in_place ? a->recvcounts : a->sendcounts;
    const size_t *sd = a->in_place ? a->rdispls : a->sdispls;

    switch (a->op) {
    case UCCL_COLL_ALLGATHER:
    case UCCL_COLL_ALLGATHERV:
        /* in place, my block is already in rbuf at its offset */
        add_w(b, 0, a->in_place ? rbuf : sbuf, a->in_place ? roff + dsp(rd, c, r) : soff,
              blk(rc, c, r));
        if (!a->in_place)
            add_c(b, rbuf, roff + dsp(rd, c, r), sbuf, soff, blk(rc, c, r));
        for (int j = 0; j < n; j++) {
            b->run->readers[j] = j != r;
            if (j != r)
                add_r(b, j, 0, rbuf, roff + dsp(rd, c, j), blk(rc, c, j));
        }
        break;
    case UCCL_COLL_ALLTOALL:
    case UCCL_COLL_ALLTOALLV: {
        int src = sbuf; /* in place: the caller's source of the blocks */
        size_t so = soff;
        for (int j = 0; j < n; j++) {
            b->run->readers[j] = j != r && blk(sc, c, j) <= slot; /* others receive two-sided */
            if (j == r) {
                add_c(b, rbuf, roff + dsp(rd, c, r), src, so + dsp(sd, c, r), blk(rc, c, r));
                continue;
            }
            if (blk(sc, c, j) <= slot)
                add_w(b, j, src, so + dsp(sd, c, j), blk(sc, c, j));
            if (blk(rc, c, j) <= slot)
                add_r(b, j, r, rbuf, roff + dsp(rd, c, j), blk(rc, c, j));
        }
        b->run->writer = true; /* readers wait on this rank's flag either way */
        break;
    }
    case UCCL_COLL_BCAST:
        if (r == root) {
            add_w(b, 0, rbuf, roff, c);
            for (int j = 0; j < n; j++)
                b->run->readers[j] = j != r;
        } else {
            add_r(b, root, 0, rbuf, roff, c);
        }
        break;
    case UCCL_COLL_GATHER:
        if (r != root) {
            add_w(b, 0, sbuf, soff, c);
            b->run->readers[root] = 1;
            break;
        }
        if (!a->in_place)
            add_c(b, rbuf, roff + (size_t)r * c, sbuf, soff, c);
        for (int j = 0; j < n; j++)
            if (j != r)
                add_r(b, j, 0, rbuf, roff + (size_t)j * c, c);
        break;
    default: /* scatter */
        if (r != root) {
            add_r(b, root, r, rbuf, roff, c);
            break;
        }
        for (int j = 0; j < n; j++) {
            b->run->readers[j] = j != r;
            if (j != r)
                add_w(b, j, sbuf, soff + (size_t)j * c, c);
        }
        if (!a->in_place)
            add_c(b, rbuf, roff, sbuf, soff + (size_t)r * c, c);
        break;
    }
}

/* The largest block of the call when every rank knows it (0: alltoallv,
 * decided pair by pair). */
static size_t known_block(const coll_state_t *cs, const coll_args_t *a)
{
    size_t m = 0;

    if (a->op == UCCL_COLL_ALLTOALLV)
        return 0;
    if (a->op != UCCL_COLL_ALLGATHERV)
        return a->count;
    for (int i = 0; i < cs->size; i++)
        m = a->recvcounts[i] > m ? a->recvcounts[i] : m;
    return m;
}

/* Extents of the send and receive buffers this rank touches. */
static void extents(const coll_state_t *cs, const coll_args_t *a, size_t *sext, size_t *rext)
{
    int n = cs->size;
    bool root = a->root == cs->rank;
    const size_t *sc = a->sendcounts, *sd = a->sdispls;

    *sext = *rext = 0;
    for (int j = 0; j < n; j++) {
        size_t rb = blk(a->recvcounts, a->count, j), rdp = dsp(a->rdispls, a->count, j);
        if (a->op <= UCCL_COLL_ALLTOALLV && rb > 0 && rdp + rb > *rext)
            *rext = rdp + rb;
        if ((a->op == UCCL_COLL_ALLTOALL || a->op == UCCL_COLL_ALLTOALLV) && !a->in_place &&
            blk(sc, a->count, j) > 0 && dsp(sd, a->count, j) + blk(sc, a->count, j) > *sext)
            *sext = dsp(sd, a->count, j) + blk(sc, a->count, j);
    }
    switch (a->op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLGATHERV:
        *sext = a->in_place ? 0 : blk(a->recvcounts, a->count, cs->rank);
        break;
    case UCCL_COLL_BCAST: *rext = a->count; break;
    case UCCL_COLL_GATHER:
        *sext = a->in_place ? 0 : a->count;
        *rext = root ? a->count * (size_t)n : 0;
        break;
    case UCCL_COLL_SCATTER:
        *sext = root ? a->count * (size_t)n : 0;
        *rext = a->in_place ? 0 : a->count;
        break;
    default: break;
    }
    if (a->sendbuf == NULL)
        *sext = 0;
    if (a->recvbuf == NULL)
        *rext = 0;
}

uccl_status_t uccl_coll_build_mapped(coll_sched_t *s, const coll_args_t *a)
{
    coll_state_t *cs = s->cs;
    coll_mapped_t *M = cs->mapped;
    int n = cs->size, sbuf = COLL_BUF_SEND, rbuf = COLL_BUF_RECV, ipbuf;
    size_t sext, rext, soff = 0, roff = 0, ipoff;
    bool big = false, gpu_s, gpu_r, ip_copy, ip_src;
    const size_t *sc = a->in_place ? a->recvcounts : a->sendcounts;
    const size_t *sd = a->in_place ? a->rdispls : a->sdispls;
    mb_t b = {0};
    uccl_status_t st = UCCL_OK;

    if (M == NULL || known_block(cs, a) > M->slot) { /* every rank decides alike */
        coll_args_t lin = *a;
        lin.algo = UCCL_COLL_ALGO_LINEAR;
        return uccl_coll_build(s, &lin);
    }
    extents(cs, a, &sext, &rext);
    s->addr[COLL_BUF_SEND] = (char *)a->sendbuf;
    s->addr[COLL_BUF_RECV] = a->recvbuf;
    gpu_s = sext > 0 && !host_mem(a->sendbuf);
    gpu_r = rext > 0 && !host_mem(a->recvbuf);
    for (int j = 0; a->op == UCCL_COLL_ALLTOALLV && j < n; j++)
        big = big || (j != cs->rank && (sc[j] > M->slot || a->recvcounts[j] > M->slot));
    ip_copy = big && a->in_place; /* receives would overwrite what is still to be sent */
    /* registered like every schedule's (once per cached or persistent
     * plan): uccl_mem_free of a buffer then stops a plan (UCCL_ERR_STALE) */
    s->len[COLL_BUF_SEND] = sext;
    s->len[COLL_BUF_RECV] = rext;
    /* the temporary (host): [send staging][receive staging][in-place source] */
    s->len[COLL_BUF_TMP] = (gpu_s ? sext : 0) + (gpu_r ? rext : 0) + (ip_copy ? rext : 0);
    if (gpu_s) {
        st = coll_copy(s, COLL_BUF_TMP, 0, COLL_BUF_SEND, 0, sext);
        sbuf = COLL_BUF_TMP;
    }
    if (gpu_r) {
        rbuf = COLL_BUF_TMP;
        roff = gpu_s ? sext : 0;
        /* the staging starts as the receive buffer: in place its blocks are
         * sent, and the v-variants' gaps between blocks are copied back as
         * they were */
        if (st == UCCL_OK && (a->in_place || a->op == UCCL_COLL_BCAST ||
                              a->op == UCCL_COLL_ALLGATHERV || a->op == UCCL_COLL_ALLTOALLV))
            st = coll_copy(s, COLL_BUF_TMP, roff, COLL_BUF_RECV, 0, rext);
    }
    ipbuf = rbuf;
    ipoff = roff;
    if (ip_copy) {
        ipbuf = COLL_BUF_TMP;
        ipoff = (gpu_s ? sext : 0) + (gpu_r ? rext : 0);
        if (st == UCCL_OK)
            st = coll_copy(s, COLL_BUF_TMP, ipoff, COLL_BUF_RECV, 0, rext);
    }
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    b.n = n;
    b.run = calloc(1, sizeof(*b.run));
    if (st != UCCL_OK || b.run == NULL ||
        (b.run->ws = calloc((size_t)n + 1, sizeof(mw_t))) == NULL ||
        (b.run->rs = calloc((size_t)n + 1, sizeof(mrd_t))) == NULL ||
        (b.run->cs = calloc(2, sizeof(mcp_t))) == NULL ||
        (b.run->readers = calloc((size_t)n, 1)) == NULL) {
        uccl_coll_mapped_run_free(b.run);
        return st != UCCL_OK ? st : UCCL_ERR_NO_MEMORY;
    }
    /* in place, alltoall(v) sends from the receive buffer (or its copy) */
    ip_src = a->in_place && (a->op == UCCL_COLL_ALLTOALL || a->op == UCCL_COLL_ALLTOALLV);
    plan_blocks(s, a, &b, ip_src ? ipbuf : sbuf, ip_src ? ipoff : soff, rbuf, roff, M->slot);
    s->mapped = b.run;
    st = uccl_coll_sched_op(s, (coll_op_t){.kind = COLL_OP_MAPPED, .peer = -1});
    /* alltoallv pairs above a slot: two-sided, in the same phase */
    for (int j = 0; big && j < n && st == UCCL_OK; j++) {
        if (j == cs->rank)
            continue;
        if (a->recvcounts[j] > M->slot)
            st = coll_recv(s, j, rbuf, roff + a->rdispls[j], a->recvcounts[j]);
        if (st == UCCL_OK && sc[j] > M->slot)
            st = a->in_place ? coll_send(s, j, ipbuf, ipoff + sd[j], sc[j])
                             : coll_send(s, j, sbuf, soff + sd[j], sc[j]);
    }
    if (st == UCCL_OK && gpu_r && (st = uccl_coll_sched_phase(s)) == UCCL_OK)
        st = coll_copy(s, COLL_BUF_RECV, 0, COLL_BUF_TMP, roff, rext);
    return st;
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
    run->state = 0;
    run->waiting_on = -1;
    run->polls = 0;
    run->soft = UCCL_OK;
    for (int i = 0; i < run->nr; i++)
        run->rs[i].done = false;
}

/* Still waiting for peer: its connection's error (it died) now and then. */
static uccl_status_t waiting(coll_sched_t *s, int peer)
{
    coll_mapped_run_t *run = s->mapped;
    uccl_conn_attr_t attr;

    run->waiting_on = peer;
    if (peer >= 0 && (++run->polls & 255) == 0 &&
        uccl_conn_query(uccl_comm_conn(s->cs->comm, peer), &attr) == UCCL_OK &&
        attr.state != UCCL_OK) {
        coll_error("collective %u: rank %d failed (%s) while rank %d waited for it", s->seq,
                   peer, uccl_strerror(attr.state), s->cs->rank);
        return attr.state;
    }
    return UCCL_INPROGRESS;
}

/* Every reader of this buffer's last write has acked it? Else who not. */
static int acks_missing(coll_state_t *cs, int p)
{
    coll_mapped_t *M = cs->mapped;

    for (int j = 0; j < cs->size; j++) {
        if (!M->readers[p][j] || M->acked[j] >= M->last_write[p])
            continue; /* known without touching the reader's line */
        M->acked[j] = atomic_load_explicit(ack_word(M->seg, j), memory_order_acquire);
        if (M->acked[j] < M->last_write[p])
            return j;
    }
    return -1;
}

static uccl_status_t run_writes(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    coll_mapped_t *M = cs->mapped;
    coll_mapped_run_t *run = s->mapped;
    int n = cs->size, p = (int)(run->m & 1), j;

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
                memcpy(h + SLOT_HDR, s->addr[w->buf] + w->off, w->len);
            atomic_store_explicit(slot_seq(h), run->m, memory_order_release);
        }
        M->last_write[p] = run->m;
        memcpy(M->readers[p], run->readers, (size_t)n);
    }
    M->next_write++;
    for (int i = 0; i < run->nc; i++) {
        const mcp_t *c = &run->cs[i];
        memmove(s->addr[c->dbuf] + c->doff, s->addr[c->sbuf] + c->soff, c->len);
    }
    run->state = 1;
    return UCCL_OK;
}

static uccl_status_t run_reads(coll_sched_t *s)
{
    coll_state_t *cs = s->cs;
    coll_mapped_t *M = cs->mapped;
    coll_mapped_run_t *run = s->mapped;
    int n = cs->size, p = (int)(run->m & 1), missing = -1;

    if (M->next_read != run->m)
        return waiting(s, -1);
    for (int i = 0; i < run->nr; i++) {
        mrd_t *rd = &run->rs[i];
        char *seg = M->peer[rd->from], *h;
        uint64_t len;

        if (rd->done)
            continue;
        h = slot_hdr(M, seg, n, p, rd->slot);
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
        if (len > 0)
            memcpy(s->addr[rd->buf] + rd->off, h + SLOT_HDR, len);
        rd->done = true;
        atomic_store_explicit(ack_word(seg, cs->rank), run->m, memory_order_release);
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
    unsigned spins = 0, yield_after = cs->oversubscribed ? 1 : 64;
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
        if (++spins % 16 == 0)
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

/* MAPPED's plans (see coll/mapped.c): what one call on this rank writes
 * into its segment's slots, reads from which peer's slot into which
 * buffer, and copies locally; GPU buffers staged through the temporary,
 * alltoallv pairs above a slot sent two-sided, larger collectives built
 * as LINEAR. */
#include <stdlib.h>
#include <string.h>

#include "mapped.h"

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

/* bcast: binomial tree (small), scatter then ring allgather of n chunks
 * (large), direct (the root writes into every rank's buffer), linear (the
 * root sends to every rank), hierarchical (the root sends each other
 * host's leader, leaders send their host). Ranks are renumbered so the
 * root is 0. */
#include "coll.h"

static uccl_status_t build_binomial(coll_sched_t *s, size_t count, int root)
{
    int n = s->cs->size, vr = (s->cs->rank - root + n) % n, mask = 1;
    uccl_status_t st = UCCL_OK;

    for (; mask < n; mask <<= 1) {
        if (vr & mask) {
            st = coll_recv(s, coll_real_rank(vr - mask, root, n), COLL_BUF_RECV, 0, count);
            break;
        }
    }
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    for (mask >>= 1; mask > 0 && st == UCCL_OK; mask >>= 1)
        if (vr + mask < n)
            st = coll_send(s, coll_real_rank(vr + mask, root, n), COLL_BUF_RECV, 0, count);
    return st;
}

static void chunk(size_t count, int n, int i, size_t *off, size_t *len)
{
    size_t cs = (count + (size_t)n - 1) / (size_t)n, b = cs * (size_t)i;

    *off = b < count ? b : count;
    *len = b < count ? (count - b < cs ? count - b : cs) : 0;
}

/* Chunk i belongs to renumbered rank i: the root sends each its chunk, then
 * a ring passes the chunks on (the root takes nothing back). */
static uccl_status_t build_scatter_allgather(coll_sched_t *s, size_t count, int root)
{
    int n = s->cs->size, vr = (s->cs->rank - root + n) % n;
    size_t off, len;
    uccl_status_t st = UCCL_OK;

    for (int i = 1; i < n && st == UCCL_OK; i++) {
        chunk(count, n, vr == 0 ? i : vr, &off, &len);
        if (vr == 0)
            st = coll_send(s, coll_real_rank(i, root, n), COLL_BUF_RECV, off, len);
        else if (i == 1)
            st = coll_recv(s, root, COLL_BUF_RECV, off, len);
    }
    for (int k = 0; k < n - 1 && st == UCCL_OK; k++) {
        int right = (vr + 1) % n;
        if ((st = uccl_coll_sched_phase(s)) != UCCL_OK)
            break;
        chunk(count, n, (vr - k + n) % n, &off, &len);
        if (right != 0)
            st = coll_send(s, coll_real_rank(right, root, n), COLL_BUF_RECV, off, len);
        chunk(count, n, (vr - k - 1 + n) % n, &off, &len);
        if (vr != 0 && st == UCCL_OK)
            st = coll_recv(s, coll_real_rank(vr - 1, root, n), COLL_BUF_RECV, off, len);
    }
    return st;
}

static uccl_status_t build_flat(coll_sched_t *s, size_t count, int root, bool direct)
{
    int n = s->cs->size, r = s->cs->rank;
    uccl_status_t st = UCCL_OK;

    for (int p = 0; p < n && st == UCCL_OK; p++) {
        if (p == r || (r != root && p != root))
            continue;
        if (r == root)
            st = direct ? coll_put(s, p, COLL_BUF_RECV, 0, count)
                        : coll_send(s, p, COLL_BUF_RECV, 0, count);
        else
            st = direct ? coll_waitput(s, root, COLL_BUF_RECV, 0, count)
                        : coll_recv(s, root, COLL_BUF_RECV, 0, count);
    }
    return st;
}

static uccl_status_t build_hier(coll_sched_t *s, size_t count, int root)
{
    const coll_state_t *cs = s->cs;
    int n = cs->size, r = cs->rank, lead = uccl_coll_host_leader(cs, r, root);
    uccl_status_t st = UCCL_OK;

    for (int l = 0; l < n && st == UCCL_OK && r == root; l++)
        if (l != r && uccl_coll_host_leader(cs, l, root) == l)
            st = coll_send(s, l, COLL_BUF_RECV, 0, count);
    if (lead == r && r != root)
        st = coll_recv(s, root, COLL_BUF_RECV, 0, count);
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    for (int q = 0; q < n && st == UCCL_OK && lead == r; q++)
        if (q != r && uccl_coll_host_leader(cs, q, root) == r)
            st = coll_send(s, q, COLL_BUF_RECV, 0, count);
    if (st == UCCL_OK && lead != r)
        st = coll_recv(s, lead, COLL_BUF_RECV, 0, count);
    return st;
}

uccl_status_t uccl_coll_build_bcast(coll_sched_t *s, const coll_args_t *a)
{
    s->addr[COLL_BUF_RECV] = a->recvbuf;
    s->len[COLL_BUF_RECV] = a->count;
    switch (a->algo) {
    case UCCL_COLL_ALGO_BINOMIAL: return build_binomial(s, a->count, a->root);
    case UCCL_COLL_ALGO_SCATTER_ALLGATHER: return build_scatter_allgather(s, a->count, a->root);
    case UCCL_COLL_ALGO_DIRECT: return build_flat(s, a->count, a->root, true);
    case UCCL_COLL_ALGO_HIER: return build_hier(s, a->count, a->root);
    default: return build_flat(s, a->count, a->root, false);
    }
}

/* allgather and allgatherv: direct (every rank writes its block into every
 * peer's receive buffer), ring (n-1 steps to the right neighbour), linear
 * (two-sided to every peer at once), hierarchical (blocks gathered by each
 * host's leader, exchanged among leaders, passed back inside hosts). */
#include "coll.h"

static size_t rcount(const coll_args_t *a, int r)
{
    return a->op == UCCL_COLL_ALLGATHERV ? a->recvcounts[r] : a->count;
}

static size_t rdispl(const coll_args_t *a, int r)
{
    return a->op == UCCL_COLL_ALLGATHERV ? a->rdispls[r] : (size_t)r * a->count;
}

static size_t recv_extent(const coll_args_t *a, int n)
{
    size_t ext = 0;

    for (int r = 0; r < n; r++)
        if (rcount(a, r) > 0 && rdispl(a, r) + rcount(a, r) > ext)
            ext = rdispl(a, r) + rcount(a, r);
    return ext;
}

/* Own block: from sendbuf (count bytes) or, in place, already in recvbuf. */
static void own_block(const coll_sched_t *s, const coll_args_t *a, int *buf, size_t *off,
                      size_t *len)
{
    int r = s->cs->rank;

    *buf = a->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    *off = a->in_place ? rdispl(a, r) : 0;
    *len = a->in_place ? rcount(a, r) : a->count;
}

static uccl_status_t build_direct(coll_sched_t *s, const coll_args_t *a, bool two_sided)
{
    int n = s->cs->size, r = s->cs->rank, buf;
    size_t off, len;
    uccl_status_t st = UCCL_OK;

    own_block(s, a, &buf, &off, &len);
    if (!a->in_place)
        st = coll_copy(s, COLL_BUF_RECV, rdispl(a, r), buf, off, len);
    for (int k = 1; k < n && st == UCCL_OK; k++) {
        int to = (r + k) % n, from = (r - k + n) % n;
        if (two_sided) {
            st = coll_recv(s, from, COLL_BUF_RECV, rdispl(a, from), rcount(a, from));
            if (st == UCCL_OK)
                st = coll_send(s, to, buf, off, len);
        } else {
            st = coll_waitput(s, from, COLL_BUF_RECV, rdispl(a, from), rcount(a, from));
            if (st == UCCL_OK)
                st = coll_put(s, to, buf, off, len);
        }
    }
    return st;
}

/* Step k: pass block (r-k) to the right, take block (r-k-1) from the left. */
static uccl_status_t build_ring(coll_sched_t *s, const coll_args_t *a)
{
    int n = s->cs->size, r = s->cs->rank, right = (r + 1) % n, left = (r - 1 + n) % n, buf;
    size_t off, len;
    uccl_status_t st;

    own_block(s, a, &buf, &off, &len);
    if (!a->in_place && (st = coll_copy(s, COLL_BUF_RECV, rdispl(a, r), buf, off, len)) != UCCL_OK)
        return st;
    for (int k = 0; k < n - 1; k++) {
        int sb = (r - k + n) % n, rb = (r - k - 1 + n) % n;
        if (k > 0) {
            buf = COLL_BUF_RECV;
            off = rdispl(a, sb);
            len = rcount(a, sb);
        }
        if ((st = uccl_coll_sched_phase(s)) != UCCL_OK ||
            (st = coll_send(s, right, buf, off, len)) != UCCL_OK ||
            (st = coll_recv(s, left, COLL_BUF_RECV, rdispl(a, rb), rcount(a, rb))) != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

/* Leader L sends every block of its host to each other leader, in rank
 * order, and takes theirs in the same order. */
static uccl_status_t hier_leaders(coll_sched_t *s, const coll_args_t *a)
{
    const coll_state_t *cs = s->cs;
    int n = cs->size, r = cs->rank;
    uccl_status_t st = UCCL_OK;

    for (int l = 0; l < n && st == UCCL_OK; l++) {
        if (l == r || uccl_coll_host_leader(cs, l, -1) != l)
            continue;
        for (int q = 0; q < n && st == UCCL_OK; q++) {
            if (uccl_coll_host_leader(cs, q, -1) == r)
                st = coll_send(s, l, COLL_BUF_RECV, rdispl(a, q), rcount(a, q));
            else if (uccl_coll_host_leader(cs, q, -1) == l)
                st = coll_recv(s, l, COLL_BUF_RECV, rdispl(a, q), rcount(a, q));
        }
    }
    return st;
}

static uccl_status_t build_hier(coll_sched_t *s, const coll_args_t *a)
{
    const coll_state_t *cs = s->cs;
    int n = cs->size, r = cs->rank, lead = uccl_coll_host_leader(cs, r, -1), buf;
    size_t off, len;
    uccl_status_t st = UCCL_OK;

    own_block(s, a, &buf, &off, &len);
    if (!a->in_place)
        st = coll_copy(s, COLL_BUF_RECV, rdispl(a, r), buf, off, len);
    if (st == UCCL_OK && lead != r)
        st = coll_send(s, lead, buf, off, len);
    for (int q = 0; q < n && st == UCCL_OK && lead == r; q++)
        if (q != r && uccl_coll_host_leader(cs, q, -1) == r)
            st = coll_recv(s, q, COLL_BUF_RECV, rdispl(a, q), rcount(a, q));
    if (st == UCCL_OK && (st = uccl_coll_sched_phase(s)) == UCCL_OK && lead == r)
        st = hier_leaders(s, a);
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    for (int q = 0; q < n && st == UCCL_OK; q++) { /* leader -> its host, block by block */
        if (lead == r && q != r && uccl_coll_host_leader(cs, q, -1) == r) {
            for (int b = 0; b < n && st == UCCL_OK; b++)
                if (b != q)
                    st = coll_send(s, q, COLL_BUF_RECV, rdispl(a, b), rcount(a, b));
        } else if (lead != r && q != r) {
            st = coll_recv(s, lead, COLL_BUF_RECV, rdispl(a, q), rcount(a, q));
        }
    }
    return st;
}

uccl_status_t uccl_coll_build_allgather(coll_sched_t *s, const coll_args_t *a)
{
    s->addr[COLL_BUF_SEND] = (char *)a->sendbuf;
    s->len[COLL_BUF_SEND] = a->in_place ? 0 : a->count;
    s->addr[COLL_BUF_RECV] = a->recvbuf;
    s->len[COLL_BUF_RECV] = recv_extent(a, s->cs->size);
    switch (a->algo) {
    case UCCL_COLL_ALGO_RING: return build_ring(s, a);
    case UCCL_COLL_ALGO_DIRECT: return build_direct(s, a, false);
    case UCCL_COLL_ALGO_HIER: return build_hier(s, a);
    default: return build_direct(s, a, true);
    }
}

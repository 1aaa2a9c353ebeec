/* scatter: linear and direct (the root sends / writes each rank its
 * block), binomial tree (the root reorders the blocks in a temporary in
 * renumbered order; each rank keeps its block and passes halves down). */
#include "coll.h"

static uccl_status_t build_binomial(coll_sched_t *s, const coll_args_t *a)
{
    int n = s->cs->size, r = s->cs->rank, root = a->root, vr = (r - root + n) % n, mask = 1;
    size_t c = a->count, sub;
    uccl_status_t st = UCCL_OK;

    if (vr == 0) {
        while (mask < n)
            mask <<= 1;
        sub = (size_t)n;
    } else {
        mask = vr & -vr;
        sub = (size_t)mask < (size_t)(n - vr) ? (size_t)mask : (size_t)(n - vr);
    }
    s->len[COLL_BUF_TMP] = sub * c;
    for (int i = 0; i < n && vr == 0 && st == UCCL_OK; i++)
        st = coll_copy(s, COLL_BUF_TMP, (size_t)i * c, COLL_BUF_SEND,
                       (size_t)coll_real_rank(i, root, n) * c, c);
    if (vr != 0)
        st = coll_recv(s, coll_real_rank(vr - mask, root, n), COLL_BUF_TMP, 0, sub * c);
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    for (int m = mask >> 1; m > 0 && st == UCCL_OK; m >>= 1) {
        if (vr + m < n) {
            size_t give = (size_t)(n - vr - m) < (size_t)m ? (size_t)(n - vr - m) : (size_t)m;
            st = coll_send(s, coll_real_rank(vr + m, root, n), COLL_BUF_TMP, (size_t)m * c,
                           give * c);
        }
    }
    if (st == UCCL_OK && !a->in_place)
        st = coll_copy(s, COLL_BUF_RECV, 0, COLL_BUF_TMP, 0, c);
    return st;
}

uccl_status_t uccl_coll_build_scatter(coll_sched_t *s, const coll_args_t *a)
{
    bool root = s->cs->rank == a->root;

    s->addr[COLL_BUF_SEND] = (char *)a->sendbuf;
    s->len[COLL_BUF_SEND] = root ? a->count * (size_t)s->cs->size : 0;
    s->addr[COLL_BUF_RECV] = a->recvbuf;
    s->len[COLL_BUF_RECV] = a->in_place ? 0 : a->count;
    switch (a->algo) {
    case UCCL_COLL_ALGO_BINOMIAL: return build_binomial(s, a);
    case UCCL_COLL_ALGO_DIRECT: return uccl_coll_build_rooted_flat(s, a, true, false);
    default: return uccl_coll_build_rooted_flat(s, a, false, false);
    }
}

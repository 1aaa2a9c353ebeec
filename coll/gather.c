/* gather: linear and direct (every rank sends / writes its block to the
 * root), binomial tree (subtrees collect their blocks in a temporary,
 * in renumbered order, and pass them up). */
#include "coll.h"

/* gather (gather true) and scatter, linear and direct: block p of the
 * root's buffer moves between the root and rank p (to the root in a gather,
 * from it in a scatter); the root copies its own block unless in place. */
uccl_status_t uccl_coll_build_rooted_flat(coll_sched_t *s, const coll_args_t *a, bool direct,
                                          bool gather)
{
    int n = s->cs->size, r = s->cs->rank, root = a->root;
    size_t c = a->count;
    /* the op of the side that gives a block, and of the side that takes it */
    coll_op_kind_t give = direct ? COLL_OP_PUT : COLL_OP_SEND;
    coll_op_kind_t take = direct ? COLL_OP_WAITPUT : COLL_OP_RECV;
    uccl_status_t st = UCCL_OK;

    if (r != root)
        return gather ? coll_peer_op(s, give, root, COLL_BUF_SEND, 0, c)
                      : coll_peer_op(s, take, root, COLL_BUF_RECV, 0, c);
    if (!a->in_place)
        st = gather ? coll_copy(s, COLL_BUF_RECV, (size_t)r * c, COLL_BUF_SEND, 0, c)
                    : coll_copy(s, COLL_BUF_RECV, 0, COLL_BUF_SEND, (size_t)r * c, c);
    for (int p = 0; p < n && st == UCCL_OK; p++) {
        if (p != r)
            st = gather ? coll_peer_op(s, take, p, COLL_BUF_RECV, (size_t)p * c, c)
                        : coll_peer_op(s, give, p, COLL_BUF_SEND, (size_t)p * c, c);
    }
    return st;
}

static uccl_status_t build_binomial(coll_sched_t *s, const coll_args_t *a)
{
    int n = s->cs->size, r = s->cs->rank, root = a->root, vr = (r - root + n) % n, mask;
    size_t c = a->count, sub;
    uccl_status_t st;

    sub = vr == 0 ? (size_t)n : (size_t)(vr & -vr) < (size_t)(n - vr) ? (size_t)(vr & -vr)
                                                                        : (size_t)(n - vr);
    s->len[COLL_BUF_TMP] = sub * c;
    st = a->in_place ? coll_copy(s, COLL_BUF_TMP, 0, COLL_BUF_RECV, (size_t)r * c, c)
                     : coll_copy(s, COLL_BUF_TMP, 0, COLL_BUF_SEND, 0, c);
    for (mask = 1; mask < n && st == UCCL_OK; mask <<= 1) {
        size_t have = (size_t)mask < (size_t)(n - vr) ? (size_t)mask : (size_t)(n - vr);
        if ((st = uccl_coll_sched_phase(s)) != UCCL_OK)
            break;
        if (vr & mask) {
            st = coll_send(s, coll_real_rank(vr - mask, root, n), COLL_BUF_TMP, 0, have * c);
            break;
        }
        if (vr + mask < n) {
            size_t more = (size_t)(n - vr - mask) < (size_t)mask ? (size_t)(n - vr - mask)
                                                                 : (size_t)mask;
            st = coll_recv(s, coll_real_rank(vr + mask, root, n), COLL_BUF_TMP, (size_t)mask * c,
                           more * c);
        }
    }
    if (vr != 0 || st != UCCL_OK)
        return st;
    if ((st = uccl_coll_sched_phase(s)) != UCCL_OK)
        return st;
    for (int i = 0; i < n && st == UCCL_OK; i++)
        st = coll_copy(s, COLL_BUF_RECV, (size_t)coll_real_rank(i, root, n) * c, COLL_BUF_TMP,
                       (size_t)i * c, c);
    return st;
}

uccl_status_t uccl_coll_build_gather(coll_sched_t *s, const coll_args_t *a)
{
    bool root = s->cs->rank == a->root;

    s->addr[COLL_BUF_SEND] = (char *)a->sendbuf;
    s->len[COLL_BUF_SEND] = a->in_place ? 0 : a->count;
    s->addr[COLL_BUF_RECV] = a->recvbuf;
    s->len[COLL_BUF_RECV] = root ? a->count * (size_t)s->cs->size : 0;
    switch (a->algo) {
    case UCCL_COLL_ALGO_BINOMIAL: return build_binomial(s, a);
    case UCCL_COLL_ALGO_DIRECT: return uccl_coll_build_rooted_flat(s, a, true, true);
    default: return uccl_coll_build_rooted_flat(s, a, false, true);
    }
}

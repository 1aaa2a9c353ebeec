/* alltoall and alltoallv: direct (one-sided writes into every peer's
 * receive buffer), pairwise (n-1 steps, send to rank+k, receive from
 * rank-k), Bruck (alltoall: log2(n) steps of packed blocks, for small
 * blocks on many ranks), linear (two-sided to every peer at once).
 * In place, the receive buffer is first copied to a temporary and sent
 * from there. */
#include "coll.h"

static size_t rcount(const coll_args_t *a, int r)
{
    return a->op == UCCL_COLL_ALLTOALLV ? a->recvcounts[r] : a->count;
}

static size_t rdispl(const coll_args_t *a, int r)
{
    return a->op == UCCL_COLL_ALLTOALLV ? a->rdispls[r] : (size_t)r * a->count;
}

static size_t scount(const coll_args_t *a, int r)
{
    if (a->in_place)
        return rcount(a, r);
    return a->op == UCCL_COLL_ALLTOALLV ? a->sendcounts[r] : a->count;
}

static size_t sdispl(const coll_args_t *a, int r)
{
    if (a->in_place)
        return rdispl(a, r);
    return a->op == UCCL_COLL_ALLTOALLV ? a->sdispls[r] : (size_t)r * a->count;
}

static size_t extent(const coll_args_t *a, int n, bool send)
{
    size_t ext = 0;

    for (int r = 0; r < n; r++) {
        size_t c = send ? scount(a, r) : rcount(a, r), d = send ? sdispl(a, r) : rdispl(a, r);
        if (c > 0 && d + c > ext)
            ext = d + c;
    }
    return ext;
}

static uccl_status_t build_pairs(coll_sched_t *s, const coll_args_t *a, int sbuf,
                                 uccl_coll_algo_t algo)
{
    int n = s->cs->size, r = s->cs->rank;
    uccl_status_t st;

    if ((st = coll_copy(s, COLL_BUF_RECV, rdispl(a, r), sbuf, sdispl(a, r), rcount(a, r))) !=
        UCCL_OK)
        return st;
    if (scount(a, r) != rcount(a, r)) {
        coll_error("alltoallv: rank %d sends itself %zu bytes but expects %zu", r, scount(a, r),
                   rcount(a, r));
        return UCCL_ERR_TRUNCATED;
    }
    for (int k = 1; k < n; k++) {
        int to = (r + k) % n, from = (r - k + n) % n;
        /* the own block's copy runs in the first exchange's phase */
        if (algo == UCCL_COLL_ALGO_PAIRWISE && k > 1 && (st = uccl_coll_sched_phase(s)) != UCCL_OK)
            return st;
        if (algo == UCCL_COLL_ALGO_DIRECT) {
            st = coll_waitput(s, from, COLL_BUF_RECV, rdispl(a, from), rcount(a, from));
            if (st == UCCL_OK)
                st = coll_put(s, to, sbuf, sdispl(a, to), scount(a, to));
        } else {
            st = coll_recv(s, from, COLL_BUF_RECV, rdispl(a, from), rcount(a, from));
            if (st == UCCL_OK)
                st = coll_send(s, to, sbuf, sdispl(a, to), scount(a, to));
        }
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

/* Bruck over TMP = [rotated n blocks][send pack][receive pack], each pack
 * room for ceil(n/2) blocks: rotate, log2(n) exchanges of the blocks whose
 * index has bit k, rotate back into recvbuf. */
static uccl_status_t build_bruck(coll_sched_t *s, const coll_args_t *a, int sbuf)
{
    int n = s->cs->size, r = s->cs->rank;
    size_t c = a->count, half = (size_t)(n + 1) / 2 * c, spack = (size_t)n * c,
           rpack = spack + half;
    uccl_status_t st = uccl_coll_sched_phase(s);

    s->len[COLL_BUF_TMP] = spack + 2 * half;
    for (int i = 0; i < n && st == UCCL_OK; i++)
        st = coll_copy(s, COLL_BUF_TMP, (size_t)i * c, sbuf, (size_t)((r + i) % n) * c, c);
    for (int k = 1; k < n && st == UCCL_OK; k <<= 1) {
        size_t packed = 0;
        st = uccl_coll_sched_phase(s);
        for (int i = 1; i < n && st == UCCL_OK; i++)
            if (i & k) {
                st = coll_copy(s, COLL_BUF_TMP, spack + packed, COLL_BUF_TMP, (size_t)i * c, c);
                packed += c;
            }
        if (st == UCCL_OK && (st = uccl_coll_sched_phase(s)) == UCCL_OK)
            st = coll_send(s, (r + k) % n, COLL_BUF_TMP, spack, packed);
        if (st == UCCL_OK)
            st = coll_recv(s, (r - k + n) % n, COLL_BUF_TMP, rpack, packed);
        if (st == UCCL_OK)
            st = uccl_coll_sched_phase(s);
        packed = 0;
        for (int i = 1; i < n && st == UCCL_OK; i++)
            if (i & k) {
                st = coll_copy(s, COLL_BUF_TMP, (size_t)i * c, COLL_BUF_TMP, rpack + packed, c);
                packed += c;
            }
    }
    if (st == UCCL_OK)
        st = uccl_coll_sched_phase(s);
    for (int i = 0; i < n && st == UCCL_OK; i++)
        st = coll_copy(s, COLL_BUF_RECV, (size_t)((r - i + n) % n) * c, COLL_BUF_TMP,
                       (size_t)i * c, c);
    return st;
}

uccl_status_t uccl_coll_build_alltoall(coll_sched_t *s, const coll_args_t *a)
{
    int n = s->cs->size, sbuf = COLL_BUF_SEND;
    size_t rext = extent(a, n, false);
    uccl_status_t st;

    s->addr[COLL_BUF_RECV] = a->recvbuf;
    s->len[COLL_BUF_RECV] = rext;
    s->addr[COLL_BUF_SEND] = (char *)a->sendbuf;
    s->len[COLL_BUF_SEND] = a->in_place ? 0 : extent(a, n, true);
    if (a->algo == UCCL_COLL_ALGO_BRUCK) /* reads everything before recvbuf is written */
        return build_bruck(s, a, a->in_place ? COLL_BUF_RECV : COLL_BUF_SEND);
    if (a->in_place) {
        /* the blocks keep their recvbuf offsets in the temporary */
        s->len[COLL_BUF_TMP] = rext;
        sbuf = COLL_BUF_TMP;
        if ((st = coll_copy(s, COLL_BUF_TMP, 0, COLL_BUF_RECV, 0, rext)) != UCCL_OK ||
            (st = uccl_coll_sched_phase(s)) != UCCL_OK)
            return st;
    }
    return build_pairs(s, a, sbuf, a->algo);
}

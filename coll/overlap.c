/* The send and receive buffers of allgather(v) and alltoall(v) called
 * without UCCL_IN_PLACE must not overlap: peers write a receive block
 * while the send blocks are still read (the result would depend on
 * timing). One overlap is harmless and allowed, as many MPI codes use it:
 * this rank's own block read from where it lands. */
#include "coll.h"

typedef struct coll_block {
    uintptr_t addr;
    size_t len;
    int peer; /* rank it goes to (send) or comes from (receive) */
} coll_block_t;

static int send_blocks(const coll_state_t *cs, const coll_args_t *a)
{
    return a->op == UCCL_COLL_ALLGATHER || a->op == UCCL_COLL_ALLGATHERV ? 1 : cs->size;
}

static coll_block_t send_block(const coll_state_t *cs, const coll_args_t *a, int i)
{
    uintptr_t base = (uintptr_t)a->sendbuf;

    switch (a->op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLGATHERV:
        return (coll_block_t){base, a->count, cs->rank};
    case UCCL_COLL_ALLTOALL:
        return (coll_block_t){base + (size_t)i * a->count, a->count, i};
    default:
        return (coll_block_t){base + a->sdispls[i], a->sendcounts[i], i};
    }
}

static coll_block_t recv_block(const coll_args_t *a, int j)
{
    uintptr_t base = (uintptr_t)a->recvbuf;

    if (a->op == UCCL_COLL_ALLGATHERV || a->op == UCCL_COLL_ALLTOALLV)
        return (coll_block_t){base + a->rdispls[j], a->recvcounts[j], j};
    return (coll_block_t){base + (size_t)j * a->count, a->count, j};
}

static bool blocks_meet(coll_block_t x, coll_block_t y)
{
    return x.len > 0 && y.len > 0 && x.addr < y.addr + y.len && y.addr < x.addr + x.len;
}

/* [lo, hi) around every non-empty block */
static void hull(const coll_state_t *cs, const coll_args_t *a, bool send, uintptr_t *lo,
                 uintptr_t *hi)
{
    int nb = send ? send_blocks(cs, a) : cs->size;

    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < nb; i++) {
        coll_block_t b = send ? send_block(cs, a, i) : recv_block(a, i);
        if (b.len == 0)
            continue;
        *lo = b.addr < *lo ? b.addr : *lo;
        *hi = b.addr + b.len > *hi ? b.addr + b.len : *hi;
    }
}

uccl_status_t uccl_coll_args_overlap(const coll_state_t *cs, const coll_args_t *a)
{
    uintptr_t slo, shi, rlo, rhi;
    int ns = send_blocks(cs, a);

    if (a->in_place || a->sendbuf == NULL || a->recvbuf == NULL ||
        a->op > UCCL_COLL_ALLTOALLV)
        return UCCL_OK;
    hull(cs, a, true, &slo, &shi);
    hull(cs, a, false, &rlo, &rhi);
    if (slo >= rhi || rlo >= shi) /* the usual case: apart */
        return UCCL_OK;
    for (int i = 0; i < ns; i++) {
        coll_block_t s = send_block(cs, a, i);
        for (int j = 0; j < cs->size; j++) {
            coll_block_t r = recv_block(a, j);
            if (!blocks_meet(s, r) ||
                (s.peer == cs->rank && r.peer == cs->rank && s.addr == r.addr &&
                 s.len == r.len))
                continue;
            coll_error("%s: send block %d overlaps receive block %d (use UCCL_IN_PLACE)",
                       uccl_coll_op_name(a->op), i, j);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    return UCCL_OK;
}

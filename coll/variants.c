/* The named collectives: thin wrappers that fill a uccl_coll_args_t and
 * call uccl_coll (blocking) or uccl_coll_post (non-blocking). */
#include "coll.h"

static uccl_status_t run(uccl_comm_t *comm, const uccl_coll_args_t *a, uccl_req_t **req)
{
    return req == NULL ? uccl_coll(comm, a) : uccl_coll_post(comm, a, req);
}

static uccl_status_t allgather(uccl_comm_t *comm, const void *sb, void *rb, size_t count,
                               uccl_req_t **req)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER, .sendbuf = sb, .recvbuf = rb,
                          .count = count};
    return run(comm, &a, req);
}

static uccl_status_t allgatherv(uccl_comm_t *comm, const void *sb, size_t count, void *rb,
                                const size_t *rcounts, const size_t *rdispls, uccl_req_t **req)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHERV, .sendbuf = sb, .recvbuf = rb,
                          .count = count, .recvcounts = rcounts, .rdispls = rdispls};
    return run(comm, &a, req);
}

static uccl_status_t alltoall(uccl_comm_t *comm, const void *sb, void *rb, size_t count,
                              uccl_req_t **req)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLTOALL, .sendbuf = sb, .recvbuf = rb,
                          .count = count};
    return run(comm, &a, req);
}

static uccl_status_t alltoallv(uccl_comm_t *comm, const void *sb, const size_t *scounts,
                               const size_t *sdispls, void *rb, const size_t *rcounts,
                               const size_t *rdispls, uccl_req_t **req)
{
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLTOALLV, .sendbuf = sb, .recvbuf = rb,
                          .sendcounts = scounts, .sdispls = sdispls, .recvcounts = rcounts,
                          .rdispls = rdispls};
    return run(comm, &a, req);
}

static uccl_status_t rooted(uccl_comm_t *comm, uccl_coll_op_t op, const void *sb, void *rb,
                            size_t count, int root, uccl_req_t **req)
{
    uccl_coll_args_t a = {.field_mask = UCCL_COLL_ARG_ROOT, .op = op, .sendbuf = sb,
                          .recvbuf = rb, .count = count, .root = root};
    return run(comm, &a, req);
}

uccl_status_t uccl_allgather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count)
{
    return allgather(comm, sendbuf, recvbuf, count, NULL);
}

uccl_status_t uccl_allgatherv(uccl_comm_t *comm, const void *sendbuf, size_t count,
                              void *recvbuf, const size_t *recvcounts, const size_t *rdispls)
{
    return allgatherv(comm, sendbuf, count, recvbuf, recvcounts, rdispls, NULL);
}

uccl_status_t uccl_alltoall(uccl_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count)
{
    return alltoall(comm, sendbuf, recvbuf, count, NULL);
}

uccl_status_t uccl_alltoallv(uccl_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                             const size_t *rdispls)
{
    return alltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, NULL);
}

uccl_status_t uccl_bcast(uccl_comm_t *comm, void *buf, size_t count, int root)
{
    return rooted(comm, UCCL_COLL_BCAST, NULL, buf, count, root, NULL);
}

uccl_status_t uccl_gather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                          int root)
{
    return rooted(comm, UCCL_COLL_GATHER, sendbuf, recvbuf, count, root, NULL);
}

uccl_status_t uccl_scatter(uccl_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                           int root)
{
    return rooted(comm, UCCL_COLL_SCATTER, sendbuf, recvbuf, count, root, NULL);
}

/* Non-blocking: a NULL req would select the blocking path, so refuse it. */
#define NEED_REQ(req)                      \
    do {                                   \
        if ((req) == NULL)                 \
            return UCCL_ERR_INVALID_PARAM; \
    } while (0)

uccl_status_t uccl_iallgather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t count, uccl_req_t **req)
{
    NEED_REQ(req);
    return allgather(comm, sendbuf, recvbuf, count, req);
}

uccl_status_t uccl_iallgatherv(uccl_comm_t *comm, const void *sendbuf, size_t count,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               uccl_req_t **req)
{
    NEED_REQ(req);
    return allgatherv(comm, sendbuf, count, recvbuf, recvcounts, rdispls, req);
}

uccl_status_t uccl_ialltoall(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t count, uccl_req_t **req)
{
    NEED_REQ(req);
    return alltoall(comm, sendbuf, recvbuf, count, req);
}

uccl_status_t uccl_ialltoallv(uccl_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                              const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                              const size_t *rdispls, uccl_req_t **req)
{
    NEED_REQ(req);
    return alltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, req);
}

uccl_status_t uccl_ibcast(uccl_comm_t *comm, void *buf, size_t count, int root,
                          uccl_req_t **req)
{
    NEED_REQ(req);
    return rooted(comm, UCCL_COLL_BCAST, NULL, buf, count, root, req);
}

uccl_status_t uccl_igather(uccl_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                           int root, uccl_req_t **req)
{
    NEED_REQ(req);
    return rooted(comm, UCCL_COLL_GATHER, sendbuf, recvbuf, count, root, req);
}

uccl_status_t uccl_iscatter(uccl_comm_t *comm, const void *sendbuf, void *recvbuf,
                            size_t count, int root, uccl_req_t **req)
{
    NEED_REQ(req);
    return rooted(comm, UCCL_COLL_SCATTER, sendbuf, recvbuf, count, root, req);
}

/* What t_fault and t_netfault do on a connection besides the fault under
 * test: one small blocking message (a descriptor handed to the peer), and
 * a 2-rank comm over the connection for the allgather cases. Header-only. */
#ifndef UCCL_TESTS_FAULT_CONN_H
#define UCCL_TESTS_FAULT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <uccl/uccl.h>
#include <uccl/uccl_coll.h>

/* Send (sending) or receive len bytes at p on conn with tag, registered for
 * the call, waiting as long as it takes; the operation's status. */
static inline uccl_status_t fault_small(uccl_engine_t *e, uccl_conn_t *conn, bool sending, void *p,
                                        size_t len, uint64_t tag)
{
    uccl_mr_t *mr = NULL;
    uccl_req_t *req = NULL;
    uccl_status_t st = uccl_mr_reg(e, p, len, 0, &mr);

    if (st == UCCL_OK)
        st = sending ? uccl_send(conn, mr, 0, len, tag, &req) : uccl_recv(conn, mr, 0, len, tag, &req);
    if (st == UCCL_OK)
        st = uccl_wait(req, -1);
    if (req != NULL)
        uccl_req_free(req);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    return st;
}

/* *comm := a 2-rank comm over conn, this side rank (0 or 1); the comm
 * owns conn from then on. */
static inline uccl_status_t fault_comm(uccl_engine_t *e, uccl_conn_t *conn, int rank, uccl_comm_t **comm)
{
    uccl_conn_t *conns[2] = {NULL, NULL};
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK |
                                          UCCL_COMM_PARAM_SIZE | UCCL_COMM_PARAM_CONNS,
                            .engine = e, .rank = rank, .size = 2, .conns = conns};

    conns[1 - rank] = conn;
    return uccl_comm_create(&p, comm);
}

#endif

/* uccl_rdesc_ptr: direct access to peer memory through the transport that
 * carries the connection's traffic for that memory type (host or GPU),
 * when it can map it (tp ops remote_ptr). */
#include <sched.h>

#include "core.h"

/* The op, asked again while it says the peer has to answer first
 * (UCCL_INPROGRESS), with the engine progressed in between; engine lock
 * held (dropped while yielding). The connection's failure or
 * UCCL_TIMEOUT_MS ends it. */
static uccl_status_t remote_ptr_wait(uccl_conn_t *conn, uccl_tp_ep_t *ep, const uccl_req_remote_t *remote,
                                     void **ptr)
{
    uccl_engine_t *engine = conn->engine;
    uccl_deadline_t deadline = uccl_deadline_in((uint64_t)engine->cfg.timeout_ms);
    uccl_status_t st;

    while ((st = ep->tp->ops->remote_ptr(ep, remote, ptr)) == UCCL_INPROGRESS) {
        if (uccl_deadline_passed(&deadline))
            return UCCL_ERR_TIMEOUT;
        if (uccl_engine_progress_locked(engine) == 0) {
            uccl_engine_unlock(engine);
            sched_yield();
            uccl_engine_lock(engine);
            if (uccl_conn_check(conn) != UCCL_OK) /* closed by another thread meanwhile */
                return UCCL_ERR_INVALID_HANDLE;
        }
        if (conn->state != UCCL_OK)
            return conn->state;
    }
    return st;
}

uccl_status_t uccl_rdesc_ptr(uccl_conn_t *conn, const uccl_rdesc_t *rdesc, void **ptr)
{
    uccl_req_remote_t remote = {0};
    uccl_rdesc_fields_t fields;
    uccl_tp_ep_t *ep = NULL;
    uccl_status_t st = uccl_conn_check(conn);
    int slot;

    if (st != UCCL_OK)
        return st;
    if (rdesc == NULL || ptr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    *ptr = NULL;
    uccl_engine_lock(conn->engine);
    st = conn->state;
    if (st == UCCL_OK)
        st = uccl_remote_decode(conn, rdesc, 0, 0, &remote, &fields);
    if (st == UCCL_OK) {
        remote.len = fields.len; /* the whole described range */
        slot = remote.mem_type == UCCL_MEM_HOST ? conn->host_tp : conn->dev_tp;
        ep = slot >= 0 ? conn->ep[slot] : NULL;
        if (ep == NULL || ep->tp->ops->remote_ptr == NULL) {
            uccl_debug("uccl_rdesc_ptr: %s cannot map peer %s memory",
                       ep != NULL ? ep->tp->ops->name : "no transport",
                       remote.mem_type == UCCL_MEM_HOST ? "host" : "GPU");
            st = UCCL_ERR_UNSUPPORTED;
        }
    }
    if (st == UCCL_OK) {
        uccl_remote_pick_key(&fields, ep, &remote);
        st = remote_ptr_wait(conn, ep, &remote, ptr);
    }
    uccl_engine_unlock(conn->engine);
    return st;
}

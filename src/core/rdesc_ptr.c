/* uccl_rdesc_ptr (uccl.h): the peer's memory mapped here, through the
 * optional rdesc_ptr op of the connection's GPU transport. */
#include <sched.h>

#include "core.h"

uccl_status_t uccl_rdesc_ptr(uccl_conn_t *conn, const uccl_rdesc_t *rdesc, void **ptr)
{
    uccl_status_t st = uccl_conn_check(conn);
    uccl_req_remote_t remote = {0};
    uccl_rdesc_fields_t f;
    uccl_engine_t *engine;
    uccl_tp_ep_t *ep;
    uint64_t deadline;

    if (st != UCCL_OK)
        return st;
    if (rdesc == NULL || ptr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if ((st = uccl_rdesc_decode(rdesc, &f)) != UCCL_OK)
        return st;
    if (f.engine_id != conn->peer_id)
        return UCCL_ERR_STALE;
    remote.addr = f.addr;
    remote.len = f.len;
    remote.region_id = f.region_id;
    remote.mem_type = f.mem_type;
    remote.device = f.device;
    engine = conn->engine;
    deadline = uccl_time_ms() + (uint64_t)engine->cfg.timeout_ms;
    uccl_engine_lock(engine);
    for (;;) {
        if (conn->state != UCCL_OK) {
            st = conn->state;
            break;
        }
        ep = conn->dev_tp >= 0 ? conn->ep[conn->dev_tp] : NULL;
        if (ep == NULL || !UCCL_TP_HAS_OP(ep->tp->ops, rdesc_ptr)) {
            st = UCCL_ERR_UNSUPPORTED;
            break;
        }
        st = ep->tp->ops->rdesc_ptr(ep, &remote, ptr);
        if (st != UCCL_INPROGRESS)
            break;
        if (uccl_time_ms() >= deadline) {
            st = UCCL_ERR_TIMEOUT;
            break;
        }
        if (uccl_engine_progress_locked(engine) == 0) {
            uccl_engine_unlock(engine);
            sched_yield();
            uccl_engine_lock(engine);
            if (uccl_conn_check(conn) != UCCL_OK) {
                uccl_engine_unlock(engine);
                return UCCL_ERR_INVALID_HANDLE;
            }
        }
    }
    uccl_engine_unlock(engine);
    return st;
}

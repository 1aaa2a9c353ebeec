/* Connections: the object, failure and deferred teardown, liveness from
 * the setup socket, close and query. Setup itself (the handshake over the
 * engine's setup socket) is in conn_setup.c. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "oob.h"

/* After the peer's setup socket closes, transports get this long to deliver
 * what the peer sent before it went away; then the connection fails. */
#define PEER_GONE_GRACE_MS 200

/* ------------------------------------------------------------------ conn object */

uccl_conn_t *uccl_conn_alloc(uccl_engine_t *engine)
{
    uccl_conn_t *conn = uccl_pool_get(&engine->conn_pool);

    if (conn == NULL)
        return NULL;
    memset(conn, 0, offsetof(uccl_conn_t, pool_link));
    conn->magic = UCCL_MAGIC_CONN;
    conn->engine = engine;
    conn->state = UCCL_OK;
    conn->oob_fd = -1;
    conn->host_tp = conn->dev_tp = -1;
    uccl_list_init(&conn->reqs);
    uccl_list_init(&conn->posted);
    uccl_list_init(&conn->held);
    uccl_list_init(&conn->salvaged);
    uccl_list_init(&conn->link);
    return conn;
}

uccl_status_t uccl_conn_check(const uccl_conn_t *conn)
{
    if (conn == NULL || conn->magic != UCCL_MAGIC_CONN)
        return UCCL_ERR_INVALID_HANDLE;
    return UCCL_OK;
}

/* Release endpoints and fail every request still on the connection. */
static void conn_release_endpoints(uccl_conn_t *conn, uccl_status_t reason)
{
    uccl_msg_forget(conn);
    for (int i = 0; i < UCCL_TP_MAX; i++) {
        if (conn->ep[i] != NULL) {
            conn->ep[i]->tp->ops->ep_destroy(conn->ep[i]);
            conn->ep[i] = NULL;
        }
    }
    while (!uccl_list_empty(&conn->reqs)) {
        uccl_req_t *req = uccl_list_first(&conn->reqs, uccl_req_t, conn_link);
        uccl_req_complete(req, reason, 0);
    }
    if (conn->oob_fd >= 0) {
        close(conn->oob_fd);
        conn->oob_fd = -1;
    }
}

void uccl_conn_destroy(uccl_conn_t *conn, uccl_status_t reason)
{
    if (conn->teardown_pending) {
        conn->teardown_pending = false;
        conn->engine->teardowns_pending--;
    }
    conn_release_endpoints(conn, reason);
    uccl_msg_salvaged_free(conn);
    uccl_list_del(&conn->link);
    free(conn->notifs);
    conn->notifs = NULL;
    conn->magic = UCCL_MAGIC_DEAD;
    uccl_pool_put(&conn->engine->conn_pool, conn);
}

void uccl_conn_fail(uccl_conn_t *conn, uccl_status_t status)
{
    if (conn->state != UCCL_OK)
        return;
    uccl_warn("connection to %s (pid %d, engine %016llx) failed: %s", conn->peer_host, conn->peer_pid,
              (unsigned long long)conn->peer_id, uccl_strerror(status));
    conn->state = status;
    conn->match_gen++; /* uccl_msg_next gives no receive now */
    conn->teardown_pending = true;
    conn->engine->teardowns_pending++;
}

static void release_failed(uccl_list_t *list)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, list) {
        uccl_conn_t *conn = uccl_container_of(pos, uccl_conn_t, link);
        if (conn->teardown_pending) {
            conn->teardown_pending = false;
            uccl_msg_salvage(conn);
            conn_release_endpoints(conn, conn->state);
        }
    }
}

void uccl_conn_progress_teardown(uccl_engine_t *engine)
{
    if (engine->teardowns_pending == 0) /* the common case: nothing to scan */
        return;
    release_failed(&engine->conns);
    release_failed(&engine->accept_q);
    engine->teardowns_pending = 0;
}

/* ------------------------------------------------------------------ liveness, close */

/* Has every endpoint handed over what the departed peer sent before it went?
 * (Transports without ep_drained get the grace period alone.) */
static bool conn_drained(uccl_conn_t *conn)
{
    for (int i = 0; i < UCCL_TP_MAX; i++) {
        uccl_tp_ep_t *ep = conn->ep[i];
        if (ep != NULL && UCCL_TP_HAS_OP(ep->tp->ops, ep_drained) && !ep->tp->ops->ep_drained(ep))
            return false;
    }
    return true;
}

void uccl_conn_progress_liveness(uccl_engine_t *engine)
{
    uccl_list_t *pos;

    uccl_list_for_each(pos, &engine->conns) {
        uccl_conn_t *conn = uccl_container_of(pos, uccl_conn_t, link);
        uint64_t now;

        if (conn->state != UCCL_OK || conn->oob_fd < 0)
            continue;
        if (conn->peer_gone_ms == 0) {
            if (!uccl_oob_peer_closed(conn->oob_fd))
                continue;
            conn->peer_gone_ms = uccl_time_ms();
            uccl_debug("setup socket of %s pid %d closed; draining", conn->peer_host, conn->peer_pid);
        }
        now = uccl_time_ms();
        if (now - conn->peer_gone_ms < PEER_GONE_GRACE_MS)
            continue;
        if (conn_drained(conn) || now - conn->peer_gone_ms >= (uint64_t)engine->cfg.timeout_ms)
            uccl_conn_fail(conn, UCCL_ERR_PEER_FAILED);
    }
}

uccl_status_t uccl_conn_close(uccl_conn_t *conn)
{
    uccl_status_t st = uccl_conn_check(conn);
    uccl_engine_t *engine;

    if (st != UCCL_OK)
        return st;
    engine = conn->engine;
    uccl_engine_lock(engine);
    uccl_conn_destroy(conn, UCCL_ERR_CANCELED);
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

static const char *slot_name(const uccl_conn_t *conn, int slot)
{
    return slot >= 0 ? conn->engine->tp[slot]->ops->name : "none";
}

uccl_status_t uccl_conn_query(const uccl_conn_t *conn, uccl_conn_attr_t *attr)
{
    uccl_status_t st = uccl_conn_check(conn);

    if (st != UCCL_OK)
        return st;
    if (attr == NULL)
        return UCCL_ERR_INVALID_PARAM;
    attr->peer_id = conn->peer_id;
    attr->transport = slot_name(conn, conn->host_tp);
    attr->gpu_transport = slot_name(conn, conn->dev_tp);
    attr->same_host = conn->same_host;
    attr->state = conn->state;
    attr->host_id = conn->peer_host_id;
    return UCCL_OK;
}

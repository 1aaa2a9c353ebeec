/* Notifications: values a peer's write_notify delivers after its data
 * landed, queued per connection in delivery order, popped by
 * uccl_notif_poll (once) or uccl_notif_wait (bounded). */
#include <sched.h>
#include <stdlib.h>

#include "core.h"

/* Empty polls before a waiter yields the CPU (as uccl_wait does). */
#define NOTIF_SPINS_BEFORE_YIELD 256

uccl_status_t uccl_conn_notif_push(uccl_conn_t *conn, uint64_t value)
{
    if (conn->notif_count == conn->notif_cap) {
        size_t cap = conn->notif_cap ? conn->notif_cap * 2 : 64;
        uint64_t *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return UCCL_ERR_NO_MEMORY;
        for (size_t i = 0; i < conn->notif_count; i++)
            ring[i] = conn->notifs[(conn->notif_head + i) % conn->notif_cap];
        free(conn->notifs);
        conn->notifs = ring;
        conn->notif_cap = cap;
        conn->notif_head = 0;
    }
    conn->notifs[(conn->notif_head + conn->notif_count) % conn->notif_cap] = value;
    conn->notif_count++;
    return UCCL_OK;
}

/* Pop the oldest notification: UCCL_OK, else the connection's error, else
 * UCCL_ERR_NOT_FOUND. Values that arrived before a failure come first. */
static uccl_status_t notif_pop(uccl_conn_t *conn, uint64_t *value)
{
    if (conn->notif_count == 0)
        return conn->state != UCCL_OK ? conn->state : UCCL_ERR_NOT_FOUND;
    *value = conn->notifs[conn->notif_head];
    conn->notif_head = (conn->notif_head + 1) % conn->notif_cap;
    conn->notif_count--;
    return UCCL_OK;
}

uccl_status_t uccl_notif_poll(uccl_conn_t *conn, uint64_t *value)
{
    uccl_status_t st = uccl_conn_check(conn);

    if (st != UCCL_OK)
        return st;
    if (value == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(conn->engine);
    uccl_engine_progress_locked(conn->engine);
    st = notif_pop(conn, value);
    uccl_engine_unlock(conn->engine);
    return st;
}

uccl_status_t uccl_notif_wait(uccl_conn_t *conn, uint64_t *value, int timeout_ms)
{
    uccl_status_t st = uccl_conn_check(conn);
    uccl_engine_t *engine;
    uccl_deadline_t deadline;
    unsigned idle = 0;

    if (st != UCCL_OK)
        return st;
    if (value == NULL)
        return UCCL_ERR_INVALID_PARAM;
    engine = conn->engine;
    deadline = uccl_deadline_in((uint64_t)(timeout_ms < 0 ? engine->cfg.timeout_ms : timeout_ms));
    uccl_engine_lock(engine);
    /* progress first, the deadline after: a zero timeout polls once */
    for (;;) {
        idle = uccl_engine_progress_locked(engine) > 0 ? 0 : idle + 1;
        st = notif_pop(conn, value);
        if (st != UCCL_ERR_NOT_FOUND)
            break;
        if (uccl_deadline_passed(&deadline)) {
            st = UCCL_ERR_TIMEOUT;
            break;
        }
        if (engine->has_progress_thread || idle >= NOTIF_SPINS_BEFORE_YIELD) {
            uccl_engine_unlock(engine);
            sched_yield();
            uccl_engine_lock(engine);
            idle = 0;
            /* another thread may have closed conn meanwhile */
            if (uccl_conn_check(conn) != UCCL_OK) {
                uccl_engine_unlock(engine);
                return UCCL_ERR_INVALID_HANDLE;
            }
        }
    }
    uccl_engine_unlock(engine);
    return st;
}

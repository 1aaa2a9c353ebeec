/* Persistent send and receive requests (MPI_Send_init / MPI_Start style):
 * built once by uccl_send_init / uccl_recv_init (xfer.c: arguments checked,
 * regions held), then started again and again, many under one engine
 * lock: a start pays neither the checks nor a request allocation. */
#include <string.h>

#include "core.h"

/* A finished persistent request as freshly posted (what uccl_req_alloc
 * and xfer.c set for a new one), with tag. */
static void preq_reset(uccl_req_t *req, uint64_t tag)
{
    req->done = false;
    req->status = UCCL_INPROGRESS;
    req->bytes = 0;
    req->tag = tag;
    req->msg_seq = 0;
    uccl_list_init(&req->tp_link);
    memset(req->tp_data, 0, sizeof(req->tp_data));
    req->tp_ptr = NULL;
    uccl_list_init(&req->conn_link);
    uccl_list_init(&req->match_link);
}

static uccl_status_t preq_check(uccl_req_t **reqs, size_t n, uccl_engine_t **engine)
{
    *engine = NULL;
    if (reqs == NULL && n > 0)
        return UCCL_ERR_INVALID_PARAM;
    for (size_t i = 0; i < n; i++) {
        uccl_status_t st = uccl_req_check(reqs[i]);
        if (st != UCCL_OK)
            return st;
        if (!reqs[i]->persistent || (*engine != NULL && reqs[i]->engine != *engine))
            return UCCL_ERR_INVALID_PARAM;
        *engine = reqs[i]->engine;
    }
    return UCCL_OK;
}

/* Is reqs[n] among reqs[0..n)? */
static bool preq_listed(uccl_req_t *const *reqs, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (reqs[j] == reqs[n])
            return true;
    return false;
}

uccl_status_t uccl_start_all(uccl_req_t **reqs, size_t n, const uint64_t *tags)
{
    uccl_engine_t *engine;
    uccl_status_t st = preq_check(reqs, n, &engine);
    size_t i;

    if (st != UCCL_OK || engine == NULL)
        return st;
    uccl_engine_lock(engine);
    /* None starts unless all can: each inactive, and named once (a request
     * posted twice would be linked twice). Each is marked (done = false) as
     * it is checked, so a second entry of it is seen; a refusal unmarks. */
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i]->done) {
            st = preq_listed(reqs, i) ? UCCL_ERR_INVALID_PARAM : UCCL_ERR_BUSY;
            if (st == UCCL_ERR_INVALID_PARAM)
                uccl_error("uccl_start_all: request %p is in the list twice", (void *)reqs[i]);
            while (i-- > 0)
                reqs[i]->done = true;
            uccl_engine_unlock(engine);
            return st;
        }
        reqs[i]->done = false;
    }
    for (i = 0; i < n; i++) {
        uccl_req_t *req = reqs[i];
        if (uccl_conn_check(req->conn) != UCCL_OK) {
            st = UCCL_ERR_INVALID_HANDLE;
            break;
        }
        preq_reset(req, tags != NULL ? tags[i] : req->tag);
        if ((st = uccl_xfer_restart_locked(req)) != UCCL_OK) {
            req->status = st;
            break;
        }
    }
    for (; i < n; i++) /* the failing one and those after: inactive again */
        reqs[i]->done = true;
    uccl_engine_unlock(engine);
    return st;
}

uccl_status_t uccl_start(uccl_req_t *req)
{
    if (req == NULL)
        return UCCL_ERR_INVALID_HANDLE;
    return uccl_start_all(&req, 1, NULL);
}

/* Generalized requests: requests whose work is a caller's progress callback
 * (collectives, bindings), run from every round of engine progress until the
 * caller finishes them. */
#include "core.h"

uccl_status_t uccl_req_create(uccl_engine_t *engine, uccl_req_progress_fn_t progress, void *arg,
                              uccl_req_t **out)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_req_t *req;

    if (st != UCCL_OK)
        return st;
    if (progress == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_engine_lock(engine);
    req = uccl_req_alloc(engine);
    if (req != NULL) {
        req->op = UCCL_OP_USER;
        req->user_progress = progress;
        req->user_arg = arg;
        uccl_list_push_back(&engine->user_reqs, &req->conn_link);
    }
    uccl_engine_unlock(engine);
    if (req == NULL)
        return UCCL_ERR_NO_MEMORY;
    *out = req;
    return UCCL_OK;
}

uccl_status_t uccl_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes)
{
    uccl_engine_t *engine;

    /* not uccl_req_check: the creator may finish a request the user freed */
    if (req == NULL || req->magic != UCCL_MAGIC_REQ)
        return UCCL_ERR_INVALID_HANDLE;
    engine = req->engine;
    uccl_engine_lock(engine);
    if (req->op != UCCL_OP_USER || req->done) {
        uccl_engine_unlock(engine);
        uccl_error("uccl_req_finish: request %p is %s", (void *)req,
                   req->done ? "finished already" : "not a generalized request");
        return UCCL_ERR_INVALID_PARAM;
    }
    if (status == UCCL_INPROGRESS)
        status = UCCL_ERR_INVALID_PARAM; /* a finished request has a final status */
    uccl_req_complete(req, status, bytes); /* leaves user_reqs; recycles a detached one */
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

/* A callback may finish, create or free any generalized request, itself
 * included: walk a private list, moving each request back to the engine's
 * before its callback runs, so whatever it changes stays consistent. */
int uccl_greq_progress(uccl_engine_t *engine)
{
    uccl_list_t run;
    uccl_list_t *e;
    int events = 0;

    if (uccl_list_empty(&engine->user_reqs))
        return 0;
    uccl_list_init(&run);
    while ((e = uccl_list_pop_front(&engine->user_reqs)) != NULL)
        uccl_list_push_back(&run, e);
    while ((e = uccl_list_pop_front(&run)) != NULL) {
        uccl_req_t *req = uccl_container_of(e, uccl_req_t, conn_link);
        int n;

        uccl_list_push_back(&engine->user_reqs, e);
        n = req->user_progress(req, req->user_arg);
        events += n > 0 ? n : 0;
    }
    return events;
}

void uccl_greq_cancel_all(uccl_engine_t *engine)
{
    uccl_list_t *e;

    while ((e = uccl_list_pop_front(&engine->user_reqs)) != NULL) {
        uccl_req_t *req = uccl_container_of(e, uccl_req_t, conn_link);
        uccl_list_init(e);
        uccl_req_complete(req, UCCL_ERR_CANCELED, 0);
    }
}

/* Request lifecycle: allocation from the engine pool, completion, test,
 * wait, free. */
#include <sched.h>
#include <string.h>

#include "core.h"

uccl_req_t *uccl_req_alloc(uccl_engine_t *engine)
{
    uccl_req_t *req = uccl_pool_get(&engine->req_pool);

    if (req == NULL)
        return NULL;
    req->magic = UCCL_MAGIC_REQ;
    req->done = false;
    req->detached = false;
    req->persistent = false;
    req->engine = engine;
    req->conn = NULL;
    req->ep = NULL;
    req->status = UCCL_INPROGRESS;
    req->bytes = 0;
    req->tag = 0;
    req->len = 0;
    req->gpu_caps = 0;
    req->iovcnt = 0;
    memset(&req->remote, 0, sizeof(req->remote));
    req->nrseg = 0;
    req->has_notif = false;
    req->notif = 0;
    req->msg_seq = 0;
    req->user_progress = NULL;
    req->user_arg = NULL;
    req->parent = NULL;
    req->children = 0;
    req->children_status = UCCL_OK;
    req->tail = NULL;
    uccl_list_init(&req->tp_link);
    memset(req->tp_data, 0, sizeof(req->tp_data));
    req->tp_ptr = NULL;
    uccl_list_init(&req->conn_link);
    uccl_list_init(&req->match_link);
    return req;
}

void uccl_req_release(uccl_req_t *req)
{
    if (req->persistent) /* its regions were in use for its whole life */
        for (int i = 0; i < req->iovcnt; i++)
            if (req->iov[i].mr != NULL)
                req->iov[i].mr->inflight--;
    req->magic = UCCL_MAGIC_REQ_FREE;
    uccl_pool_put(&req->engine->req_pool, req);
}

uccl_status_t uccl_req_check(const uccl_req_t *req)
{
    /* a detached request is no longer the caller's: treat it as freed */
    if (req == NULL || req->magic != UCCL_MAGIC_REQ || req->detached)
        return UCCL_ERR_INVALID_HANDLE;
    return UCCL_OK;
}

void uccl_req_complete(uccl_req_t *req, uccl_status_t status, size_t bytes)
{
    if (req->done) {
        uccl_error("request %p completed twice (internal error)", (void *)req);
        return;
    }
    req->done = true;
    req->status = status;
    req->bytes = bytes;
    for (int i = 0; i < req->iovcnt && !req->persistent; i++)
        if (req->iov[i].mr != NULL)
            req->iov[i].mr->inflight--;
    uccl_list_del(&req->conn_link);
    if (!uccl_list_empty(&req->match_link)) { /* a receive still posted */
        uccl_list_del(&req->match_link);
        req->conn->match_gen++;
    }
    if (status != UCCL_OK)
        uccl_debug("request %p (op %d) failed: %s", (void *)req, (int)req->op, uccl_strerror(status));
    if (req->parent != NULL)
        uccl_rma_msg_piece_done(req->parent, status, bytes);
    if (req->detached)
        uccl_req_release(req);
}

/* Copy between a flat buffer and bytes [off, off+len) of the request's
 * pieces; to_iov picks the direction. */
static void iov_copy(const uccl_req_t *req, size_t off, char *flat, size_t len, bool to_iov)
{
    uccl_req_cur_t cur;
    uint8_t *addr;
    size_t n;

    if (req->iovcnt == 1 && off <= req->iov[0].len && len <= req->iov[0].len - off) {
        /* one piece (nearly every message): no walk */
        addr = (uint8_t *)req->iov[0].addr + off;
        if (len > 0)
            memcpy(to_iov ? addr : (uint8_t *)flat, to_iov ? (uint8_t *)flat : addr, len);
        return;
    }
    uccl_req_cur_init(&cur, req, off);
    while ((n = uccl_req_cur_next(&cur, len, &addr, NULL)) > 0) {
        if (to_iov)
            memcpy(addr, flat, n);
        else
            memcpy(flat, addr, n);
        flat += n;
        len -= n;
    }
}

void uccl_req_iov_copy_in(uccl_req_t *req, size_t off, const void *src, size_t len)
{
    iov_copy(req, off, (char *)src, len, true);
}

void uccl_req_iov_copy_out(const uccl_req_t *req, size_t off, void *dst, size_t len)
{
    iov_copy(req, off, dst, len, false);
}

uccl_status_t uccl_test(uccl_req_t *req, int *done)
{
    uccl_status_t st = uccl_req_check(req);
    uccl_engine_t *engine;

    if (st != UCCL_OK || done == NULL)
        return st != UCCL_OK ? st : UCCL_ERR_INVALID_PARAM;
    engine = req->engine;
    uccl_engine_lock(engine);
    if (!req->done)
        uccl_engine_progress_locked(engine);
    *done = req->done;
    st = req->done ? req->status : UCCL_INPROGRESS;
    uccl_engine_unlock(engine);
    return st;
}

#define UCCL_WAIT_SPINS_BEFORE_YIELD 256

static int effective_timeout(const uccl_engine_t *engine, int timeout_ms)
{
    return timeout_ms < 0 ? engine->cfg.timeout_ms : timeout_ms;
}

uccl_status_t uccl_wait(uccl_req_t *req, int timeout_ms)
{
    /* wait_all skips NULL entries; a single NULL request is a bad handle */
    if (req == NULL)
        return UCCL_ERR_INVALID_HANDLE;
    return uccl_wait_all(&req, 1, timeout_ms);
}

uccl_status_t uccl_wait_all(uccl_req_t **reqs, size_t n, int timeout_ms)
{
    uccl_engine_t *engine = NULL;
    uccl_deadline_t deadline = {0};
    bool polled = false;
    unsigned rounds = 0;
    uccl_status_t st;

    if (reqs == NULL && n > 0)
        return UCCL_ERR_INVALID_PARAM;
    for (size_t i = 0; i < n; i++) {
        if (reqs[i] == NULL)
            continue;
        if ((st = uccl_req_check(reqs[i])) != UCCL_OK)
            return st;
        if (engine == NULL)
            engine = reqs[i]->engine;
        else if (reqs[i]->engine != engine)
            return UCCL_ERR_INVALID_PARAM; /* one engine per call */
    }
    if (engine == NULL)
        return UCCL_OK;
    uccl_engine_lock(engine);
    /* a request done stays done: each round looks from the first not done on */
    for (size_t first = 0, idle = 0;;) {
        while (first < n && (reqs[first] == NULL || reqs[first]->done))
            first++;
        if (first == n)
            break;
        /* The deadline is tested after a round of progress, never before the
         * first: a zero timeout polls once (and a poll loop of wait(0) makes
         * progress like one of uccl_test). The clock is read first after
         * that round (a wait that one round finishes, the common case with a
         * window of one, reads none), then every 16th round. A long one (as
         * UCCL_TIMEOUT_MS) is on the coarse clock: in a Soft-RoCE guest's
         * emulated CPU the precise one is a system call, ~10 a 64 KiB
         * message at the receiver; without them its kernel time a message
         * fell by 40 % (tests/perf/results/cluster/vm20). */
        if (polled && timeout_ms == 0)
            goto timeout;
        if (polled && deadline.at_ms == 0)
            deadline = uccl_deadline_in((uint64_t)effective_timeout(engine, timeout_ms));
        else if (polled && ++rounds % 16 == 0 && uccl_deadline_passed(&deadline))
            goto timeout;
        polled = true;
        idle = uccl_engine_progress_locked(engine) > 0 ? 0 : idle + 1;
        /* Yield after a run of empty polls: an oversubscribed peer (or the
         * progress thread) then gets the CPU it needs to make the progress
         * we wait for; a busy wait pays nothing. */
        if (engine->has_progress_thread || idle >= UCCL_WAIT_SPINS_BEFORE_YIELD) {
            uccl_engine_unlock(engine);
            sched_yield();
            uccl_engine_lock(engine);
            idle = 0;
        }
    }
    st = UCCL_OK;
    for (size_t i = 0; i < n && st == UCCL_OK; i++)
        if (reqs[i] != NULL)
            st = reqs[i]->status;
    uccl_engine_unlock(engine);
    return st;
timeout:
    uccl_engine_unlock(engine);
    return UCCL_ERR_TIMEOUT;
}

uccl_status_t uccl_req_bytes(const uccl_req_t *req, size_t *bytes)
{
    uccl_status_t st = uccl_req_check(req);

    if (st != UCCL_OK)
        return st;
    if (bytes == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (!req->done)
        return UCCL_INPROGRESS;
    *bytes = req->bytes;
    return UCCL_OK;
}

uccl_status_t uccl_req_free(uccl_req_t *req)
{
    uccl_status_t st = uccl_req_check(req);
    uccl_engine_t *engine;

    if (st != UCCL_OK)
        return st;
    engine = req->engine;
    uccl_engine_lock(engine);
    if (req->done)
        uccl_req_release(req);
    else
        req->detached = true;
    uccl_engine_unlock(engine);
    return UCCL_OK;
}

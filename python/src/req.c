/* uccl.Request: one posted operation. It keeps its connection and regions
 * alive until it finishes; dropped in flight, it becomes an engine orphan. */
#include "args.h"

#include <string.h>
#include <time.h>

/* Freed Request objects kept for the next ones (a window of operations
 * makes and drops one per operation): no allocator call either way. Under
 * the GIL. */
#ifdef Py_GIL_DISABLED
#define REQ_FREE_MAX 0 /* free-threaded CPython: no GIL guards the list */
#else
#define REQ_FREE_MAX 64
#endif
static upy_req_t *req_free_list[REQ_FREE_MAX + 1];
static int req_free_n;

static upy_req_t *req_alloc(void)
{
    upy_req_t *r;
    if (req_free_n == 0)
        return PyObject_New(upy_req_t, &upy_req_type);
    r = req_free_list[--req_free_n];
    (void)PyObject_Init((PyObject *)r, &upy_req_type);
    return r;
}

PyObject *upy_req_new_of(upy_engine_t *e, uccl_req_t *req, PyObject *owner, PyObject *keep,
                         const char *op)
{
    upy_req_t *r = req_alloc();
    if (!r) {
        /* cannot track it: let it finish in the background */
        upy_engine_orphan(e, req, keep);
        return NULL;
    }
    Py_INCREF(e);
    r->engine = e;
    r->req = req;
    r->group = NULL;
    r->ngroup = 0;
    Py_XINCREF(keep);
    r->keep = keep;
    Py_XINCREF(owner);
    r->owner = owner;
    r->done = 0;
    r->waiting = 0;
    r->status = UCCL_INPROGRESS;
    r->nbytes = 0;
    r->op = op;
    return (PyObject *)r;
}

PyObject *upy_req_new(upy_engine_t *e, uccl_req_t *req, PyObject *keep, const char *op)
{
    return upy_req_new_of(e, req, NULL, keep, op);
}

PyObject *upy_req_new_group(upy_engine_t *e, uccl_req_t **reqs, size_t n, PyObject *owner,
                            PyObject *keep, const char *op)
{
    upy_req_t *r = (upy_req_t *)upy_req_new_of(e, reqs[0], owner, keep, op);
    if (!r) { /* reqs[0] is an orphan already */
        for (size_t i = 1; i < n; i++)
            upy_engine_orphan(e, reqs[i], keep);
        PyMem_Free(reqs);
        return NULL;
    }
    r->group = reqs;
    r->ngroup = n;
    return (PyObject *)r;
}

/* Every request of group r finished: 1 and *st the first error in order
 * (else UCCL_OK); 0 while one still runs. Progresses through uccl_test. */
static int group_test(upy_req_t *r, uccl_status_t *st)
{
    uccl_status_t first = UCCL_OK;
    for (size_t i = 0; i < r->ngroup; i++) {
        int done = 0;
        uccl_status_t s = uccl_test(r->group[i], &done);
        if (!done)
            return 0;
        if (first == UCCL_OK)
            first = s;
    }
    *st = first;
    return 1;
}

/* The request finished with st: record it and let go of what it held. */
static void req_finish(upy_req_t *r, uccl_status_t st)
{
    r->done = 1;
    r->status = st;
    if (r->group) { /* the sum of the group's bytes */
        size_t b;
        r->nbytes = 0;
        for (size_t i = 0; i < r->ngroup; i++) {
            if (st == UCCL_OK && uccl_req_bytes(r->group[i], &b) == UCCL_OK)
                r->nbytes += b;
            uccl_req_free(r->group[i]);
        }
        PyMem_Free(r->group);
        r->group = NULL;
        r->ngroup = 0;
    } else {
        if (st == UCCL_OK && uccl_req_bytes(r->req, &r->nbytes) != UCCL_OK)
            r->nbytes = 0;
        uccl_req_free(r->req);
    }
    r->req = NULL;
    Py_CLEAR(r->keep);
    Py_CLEAR(r->owner);
}

static PyObject *req_result(upy_req_t *r)
{
    if (r->status != UCCL_OK)
        return upy_raise(r->status, r->op);
    return PyLong_FromSize_t(r->nbytes);
}

static int req_check(upy_req_t *r)
{
    if (r->done)
        return 0;
    return upy_engine_check(r->engine);
}

/* Wait up to ms (-2: no limit). 1 = done, 0 = still running, -1 = error set. */
static int req_wait_ms(upy_req_t *r, long long ms)
{
    uccl_status_t st;
    int done = 0;
    if (r->done)
        return 1;
    if (req_check(r) < 0)
        return -1;
    if (r->waiting) {
        upy_raise(UCCL_ERR_BUSY, "Request.wait (another thread is waiting on it)");
        return -1;
    }
    r->waiting++;
    st = r->group ? upy_wait_many(r->engine, r->group, r->ngroup, ms)
                  : upy_wait(r->engine, r->req, ms);
    r->waiting--;
    if (st == UPY_WAIT_INTERRUPTED)
        return -1;
    if (r->group && st == UCCL_ERR_TIMEOUT && !group_test(r, &st))
        return 0;
    if (!r->group && st == UCCL_ERR_TIMEOUT) { /* ran out of time, or failed with a timeout? */
        st = uccl_test(r->req, &done);
        if (!done)
            return 0;
    }
    req_finish(r, st);
    return 1;
}

static PyObject *req_wait(upy_req_t *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    static const char *const names[] = {"timeout"};
    static const upy_sig_t sig = {"wait", names, 1, 1, 0};
    PyObject *timeout;
    long long ms;
    int rc;
    if (upy_parse(&sig, args, nargs, kwnames, &timeout) < 0 || upy_timeout_ms(timeout, &ms) < 0)
        return NULL;
    rc = req_wait_ms(self, ms);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return upy_raise(UCCL_ERR_TIMEOUT, "Request.wait");
    return req_result(self);
}

static PyObject *req_test(upy_req_t *self, PyObject *unused)
{
    uccl_status_t st;
    int done = 0;
    (void)unused;
    if (!self->done) {
        if (req_check(self) < 0)
            return NULL;
        if (self->waiting) /* another thread's wait finishes it */
            Py_RETURN_FALSE;
        if (self->group)
            done = group_test(self, &st);
        else
            st = uccl_test(self->req, &done);
        if (!done)
            Py_RETURN_FALSE;
        req_finish(self, st);
    }
    if (self->status != UCCL_OK)
        return upy_raise(self->status, self->op);
    Py_RETURN_TRUE;
}

PyObject *upy_req_block(upy_engine_t *e, uccl_req_t *req, PyObject *keep, const char *op)
{
    size_t n = 0;
    uccl_status_t st = upy_wait(e, req, -2);
    if (st == UPY_WAIT_INTERRUPTED) {
        upy_engine_orphan(e, req, keep);
        return NULL;
    }
    if (st == UCCL_OK)
        uccl_req_bytes(req, &n);
    uccl_req_free(req);
    if (st != UCCL_OK)
        return upy_raise(st, op);
    return PyLong_FromSize_t(n);
}

double upy_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* An item of wait_all: a Request, or a PersistentRequest (prep.c, session
 * 15) that was started. Its engine and its libuccl requests in flight. */
static int item_pending(PyObject *o, upy_engine_t **e, uccl_req_t ***reqs, size_t *n)
{
    if (Py_TYPE(o) == &upy_req_type) {
        upy_req_t *r = (upy_req_t *)o;
        *e = r->engine;
        *n = r->done ? 0 : r->group ? r->ngroup : 1;
        *reqs = r->group ? r->group : &r->req;
        return 1;
    }
    if (Py_TYPE(o) == &upy_prep_type) {
        upy_prep_t *p = (upy_prep_t *)o;
        if (p->starting)
            return 0; /* the loop says why */
        *n = (size_t)p->nposted;
        *e = *n ? p->conn->engine : NULL;
        *reqs = p->reqs;
        return 1;
    }
    return 0;
}

/* The waits running on item o (upy_req_t's and upy_prep_t's waiting). */
static int *item_waiting(PyObject *o)
{
    return Py_TYPE(o) == &upy_req_type ? &((upy_req_t *)o)->waiting
                                       : &((upy_prep_t *)o)->waiting;
}

/* Requests of one open engine, several still in flight: one uccl_wait_all
 * for all of them (one GIL release, as uccl_perf waits for a window), then
 * each records its end. Anything else (one request, several engines, a
 * timeout, an item another thread waits on) is left to the loop of
 * wait_all, request by request. Only the items in flight here are marked
 * waiting and finished after: one another thread starts meanwhile is not
 * ours. -1: a signal handler raised. */
static int wait_together(PyObject *seq, long long ms)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    upy_engine_t *e = NULL, *ie;
    uccl_req_t *stack[64], **reqs = stack, **ir;
    PyObject *stack_items[64], **items = stack_items; /* the items waited on */
    size_t k = 0, m = 0, in;
    uccl_status_t st;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!item_pending(o, &ie, &ir, &in))
            return 0; /* the loop says what is wrong */
        if (in == 0)
            continue;
        if ((e && ie != e) || !ie->engine || *item_waiting(o))
            return 0;
        e = ie;
        k += in;
    }
    if (k < 2)
        return 0;
    if (k > 64) { /* k >= the items in flight: room for both */
        if (!(reqs = PyMem_Malloc(k * (sizeof(*reqs) + sizeof(*items)))))
            return 0;
        items = (PyObject **)(reqs + k);
    }
    k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        item_pending(o, &ie, &ir, &in);
        if (in == 0)
            continue;
        memcpy(reqs + k, ir, in * sizeof(*reqs));
        k += in;
        items[m++] = o;
        ++*item_waiting(o);
    }
    st = upy_wait_many(e, reqs, k, ms);
    for (size_t j = 0; j < m; j++)
        --*item_waiting(items[j]);
    for (size_t j = 0; st != UPY_WAIT_INTERRUPTED && st != UCCL_ERR_TIMEOUT && j < m; j++) {
        PyObject *o = items[j];
        upy_req_t *r = (upy_req_t *)o;
        int done = 0;
        uccl_status_t rs;
        if (Py_TYPE(o) == &upy_prep_type) {
            upy_prep_after_wait((upy_prep_t *)o, st);
            continue;
        }
        if (r->done) /* an item listed twice */
            continue;
        if (st == UCCL_OK) { /* every one finished and succeeded: no need to ask */
            req_finish(r, UCCL_OK);
            continue;
        }
        if (r->group)
            done = group_test(r, &rs);
        else
            rs = uccl_test(r->req, &done);
        if (done)
            req_finish(r, rs);
    }
    if (reqs != stack)
        PyMem_Free(reqs);
    return st == UPY_WAIT_INTERRUPTED ? -1 : 0;
}

/* The result of a finished item: its byte count (an int object), or raise. */
static PyObject *item_result(PyObject *o)
{
    if (Py_TYPE(o) == &upy_prep_type)
        return upy_prep_result((upy_prep_t *)o);
    return req_result((upy_req_t *)o);
}

PyObject *upy_wait_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    static const char *const names[] = {"requests", "timeout"};
    static const upy_sig_t sig = {"wait_all", names, 2, 2, 1};
    PyObject *a[2], *reqs, *seq, *out = NULL;
    long long ms;
    double deadline;
    (void)self;
    if (upy_parse(&sig, args, nargs, kwnames, a) < 0 || upy_timeout_ms(a[1], &ms) < 0)
        return NULL;
    reqs = a[0];
    seq = PySequence_Fast(reqs, "wait_all: requests must be a sequence of uccl.Request or "
                                "uccl.PersistentRequest");
    if (!seq)
        return NULL;
    deadline = ms == -2 ? 0 : upy_now_s() + (double)ms / 1000.0; /* no limit: no clock */
    if (wait_together(seq, ms) < 0)
        goto out;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        long long left = ms == -2 ? -2 : (long long)((deadline - upy_now_s()) * 1000.0);
        if (ms != -2 && left < 0)
            left = 0; /* time is up: poll once */
        int rc;
        if (Py_TYPE(o) == &upy_prep_type) {
            rc = upy_prep_wait_ms((upy_prep_t *)o, left);
        } else if (Py_TYPE(o) == &upy_req_type) {
            rc = req_wait_ms((upy_req_t *)o, left);
        } else {
            PyErr_Format(PyExc_TypeError, "wait_all: expected uccl.Request or "
                         "uccl.PersistentRequest, got '%.100s'", Py_TYPE(o)->tp_name);
            goto out;
        }
        if (rc < 0)
            goto out;
        if (rc == 0) {
            upy_raise(UCCL_ERR_TIMEOUT, "wait_all");
            goto out;
        }
    }
    out = PyList_New(PySequence_Fast_GET_SIZE(seq));
    for (Py_ssize_t i = 0; out && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i), *n;
        PyObject *prev = i > 0 ? PyList_GET_ITEM(out, i - 1) : NULL;
        upy_req_t *r = (upy_req_t *)o;
        upy_req_t *p = prev ? (upy_req_t *)PySequence_Fast_GET_ITEM(seq, i - 1) : NULL;
        /* a window of equal operations: one int object for equal counts */
        if (p && Py_TYPE(o) == &upy_req_type && Py_TYPE(p) == &upy_req_type &&
            r->status == UCCL_OK && p->status == UCCL_OK && r->nbytes == p->nbytes)
            n = (Py_INCREF(prev), prev);
        else
            n = item_result(o);
        if (!n) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, n);
    }
out:
    Py_DECREF(seq);
    return out;
}

static void req_dealloc(upy_req_t *self)
{
    if (self->group) { /* each of the group on its own */
        for (size_t i = 0; self->engine->engine && i < self->ngroup; i++)
            upy_engine_orphan(self->engine, self->group[i], self->keep);
        PyMem_Free(self->group);
        self->group = NULL;
    } else if (self->req && self->engine->engine) {
        upy_engine_orphan(self->engine, self->req, self->keep);
    }
    Py_XDECREF(self->keep);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->engine);
    if (req_free_n < REQ_FREE_MAX)
        req_free_list[req_free_n++] = self;
    else
        PyObject_Free(self);
}

static PyObject *req_get(upy_req_t *self, void *closure)
{
    if (closure) /* done */
        return PyBool_FromLong(self->done);
    if (!self->done) {
        PyErr_SetString(PyExc_ValueError, "the request is still in flight: wait() first");
        return NULL;
    }
    return req_result(self);
}

static PyMethodDef req_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))req_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait(timeout=None) -> int\n\nWait (GIL released) until the request finishes; return "
     "the bytes moved or raise its error. timeout in seconds (None: no limit); "
     "uccl.TimeoutError leaves the request valid."},
    {"test", (PyCFunction)req_test, METH_NOARGS,
     "test() -> bool\n\nProgress once; True when finished (raises its error if it failed)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef req_getset[] = {
    {"nbytes", (getter)req_get, NULL,
     "Bytes moved (for a receive: the message length); ValueError while in flight.", NULL},
    {"done", (getter)req_get, NULL, "True once wait() or test() saw it finish.", (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject upy_req_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.Request",
    .tp_basicsize = sizeof(upy_req_t),
    .tp_dealloc = (destructor)req_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A posted operation (returned by the Conn methods). Dropped in flight, it "
              "still completes in the background, its regions kept alive until then.",
    .tp_methods = req_methods,
    .tp_getset = req_getset,
};

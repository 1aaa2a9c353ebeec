/* uccl.PersistentRequest (session 15): a list of operations on one
 * connection, checked and parsed once by Conn.send_init / recv_init /
 * write_init / read_init, then posted with start() and finished with wait()
 * as often as wanted (MPI_Send_init / MPI_Start / MPI_Wait's pattern).
 *
 * A window of a Conn.*_many(group=True) loop parses its list, makes a
 * Request and a tuple of what it keeps, and drops them when it finishes;
 * the receiver of a send loop also parses its ack's arguments. Here a
 * window costs start() and wait(), two calls without arguments that make
 * no object (wait() returns the same int object while the byte count is
 * the same), and the ack is a PersistentRequest of its own.
 *
 * The object keeps its connection and regions alive. start() checks that
 * the connection and every region are still open (a released region raises
 * ValueError, nothing posted) and posts in order; a failure only libuccl
 * sees (a stale descriptor, a failed connection) stops at that entry: the
 * exception names it, and the entries before it stay posted, finished by
 * wait(). Dropped or closed while started, its operations finish in the
 * background (engine orphans) with the regions kept until then. */
#include "args.h"

#include <string.h>

static const char *const init_names[] = {"send_init", "recv_init", "write_init", "read_init"};

/* The connection and every region still open. */
static int prep_regions_live(upy_prep_t *p)
{
    Py_ssize_t n = PyTuple_GET_SIZE(p->keep);
    if (upy_conn_check(p->conn) < 0)
        return -1;
    for (Py_ssize_t i = 1; i < n; i++) { /* keep: (conn, regions...) */
        upy_mr_t *m = (upy_mr_t *)PyTuple_GET_ITEM(p->keep, i);
        if (!m->mr) {
            PyErr_Format(PyExc_ValueError, "PersistentRequest.start: a region of its %s is "
                         "released", init_names[p->op]);
            return -1;
        }
    }
    return 0;
}

PyObject *upy_prep_new(upy_conn_t *c, PyObject *ops, int op)
{
    PyObject *seq;
    upy_entry_t *en = NULL;
    Py_ssize_t *at = NULL, n, u = 0, d = 0;
    upy_prep_t *p = NULL;
    if (upy_conn_check(c) < 0)
        return NULL;
    seq = upy_ops_seq(ops, op);
    if (!seq)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "%s: ops must hold at least one operation",
                     init_names[op]);
        goto fail;
    }
    en = PyMem_Malloc((size_t)n * sizeof(*en));
    at = PyMem_Malloc((size_t)n * sizeof(*at));
    if (!en || !at) {
        PyErr_NoMemory();
        goto fail;
    }
    if (upy_entries(c, op + UPY_OP_INIT, seq, en, at, &u) < 0)
        goto fail;
    p = PyObject_New(upy_prep_t, &upy_prep_type);
    if (!p)
        goto fail;
    p->conn = NULL;
    p->keep = p->result = p->weakrefs = NULL;
    p->reqs = NULL;
    p->nposted = 0;
    p->started = p->starting = p->waiting = 0;
    p->status = UCCL_OK;
    p->nbytes = 0;
    p->op = op;
    p->n = n;
    p->ops = PyMem_Malloc((size_t)n * sizeof(*p->ops));
    p->reqs = PyMem_Calloc((size_t)n, sizeof(*p->reqs));
    for (Py_ssize_t i = 1; i < u; i++) /* each distinct region once in keep */
        d += en[i].m != en[i - 1].m;
    p->keep = PyTuple_New(d + 2);
    if (!p->ops || !p->reqs || !p->keep) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    Py_INCREF(c);
    p->conn = c;
    Py_INCREF(c);
    PyTuple_SET_ITEM(p->keep, 0, (PyObject *)c);
    d = 0;
    for (Py_ssize_t i = 0; i < u; i++) {
        if (i == 0 || en[i].m != en[i - 1].m) {
            Py_INCREF(en[i].m);
            PyTuple_SET_ITEM(p->keep, ++d, (PyObject *)en[i].m);
        }
    }
    p->len_sum = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* m: borrowed from keep from now on */
        p->ops[i] = en[at[i]];
        p->len_sum += p->ops[i].len;
    }
    for (Py_ssize_t i = 0; i < u; i++)
        Py_DECREF(en[i].m);
    PyMem_Free(en);
    PyMem_Free(at);
    Py_DECREF(seq);
    return (PyObject *)p;
fail:
    for (Py_ssize_t i = 0; i < u; i++)
        Py_DECREF(en[i].m);
    PyMem_Free(en);
    PyMem_Free(at);
    Py_XDECREF(p);
    Py_DECREF(seq);
    return NULL;
}

/* The posted requests finished with st (their first error in order, else
 * UCCL_OK): record it and the bytes, free them. A send, write or read that
 * succeeded moved its whole range (the lengths' sum, when every entry was
 * posted); a receive's message may be shorter: asked per request. */
static void prep_finish(upy_prep_t *p, uccl_status_t st)
{
    size_t sum = 0, b;
    Py_ssize_t n = p->nposted;
    uccl_req_t **reqs = p->reqs;
    if (st == UCCL_OK && (p->op == UPY_OP_RECV || n < p->n)) {
        for (Py_ssize_t i = 0; i < n; i++) { /* one pass: asked, then freed */
            if (uccl_req_bytes(reqs[i], &b) == UCCL_OK)
                sum += b;
            uccl_req_free(reqs[i]);
        }
    } else {
        sum = st == UCCL_OK ? p->len_sum : 0;
        for (Py_ssize_t i = 0; i < n; i++)
            uccl_req_free(reqs[i]);
    }
    p->nposted = 0;
    p->status = st;
    p->nbytes = sum;
}

/* 1 and *st their first error (else UCCL_OK) when every posted request
 * finished; 0 while one runs. Progresses through uccl_test. */
static int prep_all_done(upy_prep_t *p, uccl_status_t *st)
{
    uccl_status_t first = UCCL_OK;
    for (Py_ssize_t i = 0; i < p->nposted; i++) {
        int done = 0;
        uccl_status_t s = uccl_test(p->reqs[i], &done);
        if (!done)
            return 0;
        if (first == UCCL_OK)
            first = s;
    }
    *st = first;
    return 1;
}

void upy_prep_after_wait(upy_prep_t *p, uccl_status_t st)
{
    if (p->nposted == 0)
        return;
    if (st == UCCL_OK || prep_all_done(p, &st))
        prep_finish(p, st);
}

static int prep_not_started(upy_prep_t *p, const char *what)
{
    if (p->starting) { /* another thread's start() is posting */
        char msg[64];
        snprintf(msg, sizeof(msg), "PersistentRequest.%s (another thread is starting it)", what);
        upy_raise(UCCL_ERR_BUSY, msg);
        return -1;
    }
    if (p->started)
        return 0;
    PyErr_Format(PyExc_ValueError, "PersistentRequest.%s: not started (start() first)", what);
    return -1;
}

int upy_prep_wait_alone(upy_prep_t *p, long long ms, int *alone)
{
    uccl_status_t st;
    if (prep_not_started(p, "wait") < 0)
        return -1;
    if (p->nposted == 0)
        return 1;
    if (upy_engine_check(p->conn->engine) < 0)
        return -1;
    if (p->waiting) {
        upy_raise(UCCL_ERR_BUSY, "PersistentRequest.wait (another thread is waiting on it)");
        return -1;
    }
    p->waiting++;
    st = upy_wait_many_alone(p->conn->engine, p->reqs, (size_t)p->nposted, ms, alone);
    p->waiting--;
    if (st == UPY_WAIT_INTERRUPTED)
        return -1;
    if (st == UCCL_ERR_TIMEOUT && !prep_all_done(p, &st))
        return 0;
    prep_finish(p, st);
    return 1;
}

int upy_prep_wait_ms(upy_prep_t *p, long long ms)
{
    int alone = -1;
    return upy_prep_wait_alone(p, ms, &alone);
}

PyObject *upy_prep_result(upy_prep_t *p)
{
    if (p->status != UCCL_OK)
        return upy_raise(p->status, init_names[p->op]);
    if (!p->result || p->result_n != p->nbytes) {
        Py_XSETREF(p->result, PyLong_FromSize_t(p->nbytes));
        if (!p->result)
            return NULL;
        p->result_n = p->nbytes;
    }
    Py_INCREF(p->result);
    return p->result;
}

/* Post ops[0..n) in order until one fails (*st): how many were posted. One
 * loop per operation (the libuccl call chosen once, not per entry), each
 * calling libuccl directly (session 17: not through upy_entry_post, a call
 * and a switch per entry). */
static Py_ssize_t post_ops(uccl_conn_t *conn, int op, const upy_entry_t *e, Py_ssize_t n,
                           uccl_req_t **reqs, uccl_status_t *st)
{
    Py_ssize_t i = 0;
    *st = UCCL_OK;
    switch (op) {
    case UPY_OP_SEND:
        for (; i < n; i++)
            if ((*st = uccl_send(conn, e[i].m->mr, e[i].off, e[i].len, e[i].tag, &reqs[i])) != 0)
                break;
        break;
    case UPY_OP_RECV:
        for (; i < n; i++)
            if ((*st = uccl_recv(conn, e[i].m->mr, e[i].off, e[i].len, e[i].tag, &reqs[i])) != 0)
                break;
        break;
    case UPY_OP_WRITE:
        for (; i < n; i++)
            if ((*st = uccl_write(conn, e[i].m->mr, e[i].off, e[i].len, &e[i].rd, e[i].roff,
                                  &reqs[i])) != UCCL_OK)
                break;
        break;
    default:
        for (; i < n; i++)
            if ((*st = uccl_read(conn, e[i].m->mr, e[i].off, e[i].len, &e[i].rd, e[i].roff,
                                 &reqs[i])) != UCCL_OK)
                break;
    }
    return i;
}

/* Post every operation in order; -1 + exception (the entries before a
 * failed one stay posted). */
int upy_prep_start(upy_prep_t *p)
{
    int alone = -1;
    return upy_prep_start_alone(p, &alone);
}

int upy_prep_start_alone(upy_prep_t *p, int *alone)
{
    uccl_status_t st = UCCL_OK;
    Py_ssize_t i;
    uccl_conn_t *conn;
    upy_engine_t *e;
    if (!p->conn) {
        PyErr_SetString(PyExc_ValueError, "PersistentRequest.start: closed");
        return -1;
    }
    if (p->nposted > 0 || p->starting) {
        PyErr_SetString(PyExc_ValueError,
                        "PersistentRequest.start: still started (wait() for it first)");
        return -1;
    }
    if (prep_regions_live(p) < 0)
        return -1;
    conn = p->conn->conn;
    e = p->conn->engine;
    p->starting = 1;
    e->busy++;
    e->posting++;
    if (*alone < 0)
        *alone = upy_gil_alone();
    if (*alone) { /* nobody to let run (session 14) */
        upy_gil_kept++;
        i = post_ops(conn, p->op, p->ops, p->n, p->reqs, &st);
    } else {
        upy_gil_released++;
        Py_BEGIN_ALLOW_THREADS
        i = post_ops(conn, p->op, p->ops, p->n, p->reqs, &st);
        Py_END_ALLOW_THREADS
    }
    e->posting--;
    e->busy--;
    p->starting = 0;
    p->nposted = i;
    p->started |= i > 0;
    if (st != UCCL_OK) {
        char what[128];
        snprintf(what, sizeof(what), "PersistentRequest.start: %s entry %zd (entries before it "
                 "were posted: wait() finishes them)", init_names[p->op], i);
        upy_raise(st, what);
        return -1;
    }
    return 0;
}

/* Started and dropped or closed: its requests finish in the background,
 * the regions kept until then. */
static void prep_orphan(upy_prep_t *p)
{
    for (Py_ssize_t i = 0; i < p->nposted; i++)
        upy_engine_orphan(p->conn->engine, p->reqs[i], p->keep);
    p->nposted = 0;
}

/* ---------------------------------------------------------------- methods */

static PyObject *prep_start(upy_prep_t *self, PyObject *unused)
{
    (void)unused;
    if (upy_prep_start(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *prep_wait(upy_prep_t *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    static const char *const names[] = {"timeout"};
    static const upy_sig_t sig = {"wait", names, 1, 1, 0};
    PyObject *timeout = NULL;
    long long ms = -2;
    int rc;
    if ((nargs || kwnames) &&
        (upy_parse(&sig, args, nargs, kwnames, &timeout) < 0 || upy_timeout_ms(timeout, &ms) < 0))
        return NULL;
    rc = upy_prep_wait_ms(self, ms);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return upy_raise(UCCL_ERR_TIMEOUT, "PersistentRequest.wait");
    return upy_prep_result(self);
}

static PyObject *prep_test(upy_prep_t *self, PyObject *unused)
{
    uccl_status_t st;
    (void)unused;
    if (prep_not_started(self, "test") < 0)
        return NULL;
    if (self->nposted > 0) {
        if (upy_engine_check(self->conn->engine) < 0)
            return NULL;
        if (self->waiting) /* another thread's wait finishes it */
            Py_RETURN_FALSE;
        if (!prep_all_done(self, &st))
            Py_RETURN_FALSE;
        prep_finish(self, st);
    }
    if (self->status != UCCL_OK)
        return upy_raise(self->status, init_names[self->op]);
    Py_RETURN_TRUE;
}

static PyObject *prep_close(upy_prep_t *self, PyObject *unused)
{
    (void)unused;
    if (self->nposted > 0 || self->starting)
        return upy_raise(UCCL_ERR_BUSY, "PersistentRequest.close (started: wait() first)");
    Py_CLEAR(self->keep);
    Py_CLEAR(self->conn);
    Py_RETURN_NONE;
}

static PyObject *prep_enter(upy_prep_t *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *prep_exit(upy_prep_t *self, PyObject *args)
{
    (void)args;
    if (self->starting || self->waiting)
        return upy_raise(UCCL_ERR_BUSY, "PersistentRequest.__exit__ (another thread is "
                                        "starting or waiting on it)");
    if (self->nposted > 0) /* leaving early (an exception): let them finish */
        prep_orphan(self);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->conn);
    Py_RETURN_FALSE;
}

static void prep_dealloc(upy_prep_t *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->nposted > 0 && self->conn)
        prep_orphan(self);
    Py_XDECREF(self->keep);
    Py_XDECREF(self->conn);
    Py_XDECREF(self->result);
    PyMem_Free(self->ops);
    PyMem_Free(self->reqs);
    PyObject_Free(self);
}

static Py_ssize_t prep_len(upy_prep_t *self)
{
    return self->n;
}

static PyObject *prep_get(upy_prep_t *self, void *closure)
{
    const char *which = closure;
    if (!strcmp(which, "active"))
        return PyBool_FromLong(self->nposted > 0);
    if (!strcmp(which, "closed"))
        return PyBool_FromLong(!self->conn);
    if (!strcmp(which, "op"))
        return PyUnicode_FromString(init_names[self->op]);
    if (prep_not_started(self, "nbytes") < 0)
        return NULL;
    if (self->nposted > 0) {
        PyErr_SetString(PyExc_ValueError, "the operations are still in flight: wait() first");
        return NULL;
    }
    return upy_prep_result(self);
}

/* uccl.start_all(requests): start() each PersistentRequest in order. */
PyObject *upy_start_all(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "start_all: requests must be a sequence of "
                                         "uccl.PersistentRequest");
    (void)self;
    if (!seq)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &upy_prep_type)) {
            PyErr_Format(PyExc_TypeError, "start_all: expected uccl.PersistentRequest, got "
                         "'%.100s' (item %zd; those before it were started)",
                         Py_TYPE(o)->tp_name, i);
            Py_DECREF(seq);
            return NULL;
        }
        if (upy_prep_start((upy_prep_t *)o) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyMethodDef prep_methods[] = {
    {"start", (PyCFunction)prep_start, METH_NOARGS,
     "start() -> None\n\nPost every operation, in order (the GIL kept where no other thread "
     "could take it). ValueError while started (wait() first), once closed, or when a region "
     "was released (nothing posted). A failure only the library sees stops at that entry and "
     "raises; the entries before it stay posted and wait() finishes them."},
    {"wait", (PyCFunction)(void (*)(void))prep_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait(timeout=None) -> int\n\nWait (as Request.wait) until every operation of the last "
     "start() finished; the bytes moved (a receive: the message lengths), or the first error in "
     "order. Again after that: the same result. uccl.TimeoutError leaves it started."},
    {"test", (PyCFunction)prep_test, METH_NOARGS,
     "test() -> bool\n\nProgress once; True when the last start()'s operations finished "
     "(raises their error if one failed)."},
    {"close", (PyCFunction)prep_close, METH_NOARGS,
     "close()\n\nLet go of the connection and regions. uccl.BusyError while started. "
     "Idempotent."},
    {"__enter__", (PyCFunction)prep_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)prep_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef prep_getset[] = {
    {"active", (getter)prep_get, NULL, "True from start() until wait() or test() saw the "
     "operations finish.", "active"},
    {"closed", (getter)prep_get, NULL, "True once closed.", "closed"},
    {"op", (getter)prep_get, NULL, "The method that made it: 'send_init', ...", "op"},
    {"nbytes", (getter)prep_get, NULL, "Bytes the last start() moved; ValueError while "
     "started or before the first start().", "nbytes"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods prep_as_seq = {.sq_length = (lenfunc)prep_len};

PyTypeObject upy_prep_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.PersistentRequest",
    .tp_basicsize = sizeof(upy_prep_t),
    .tp_dealloc = (destructor)prep_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A list of operations on one connection, checked once (Conn.send_init, "
              "recv_init, write_init, read_init) and posted again and again: start(), then "
              "wait() or test(), as often as wanted; uccl.start_all and uccl.wait_all take "
              "several. len() is the number of operations. Keeps its connection and regions "
              "alive; a context manager (closed on exit). Dropped while started, its "
              "operations still finish in the background.",
    .tp_weaklistoffset = offsetof(upy_prep_t, weakrefs),
    .tp_methods = prep_methods,
    .tp_getset = prep_getset,
    .tp_as_sequence = &prep_as_seq,
};

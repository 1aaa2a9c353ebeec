/* uccl.Comm: a libuccl communicator (uccl_coll.h) bootstrapped by
 * uccl_comm_init over a Python allgather callable (mpi4py, a torch store, any
 * launcher), its connections as Conn objects, and the collectives (coll.c). */
#include "upy.h"

#include <string.h>

/* The bootstrap callback's context: the Python callable, and the first
 * exception it raised (re-raised once uccl_comm_init returns). */
typedef struct {
    PyObject *fn;
    int size;
    PyObject *exc_type, *exc_value, *exc_tb;
} upy_boot_t;

/* fn(bytes) must return size blocks of `bytes` bytes: one bytes-like object
 * of size * bytes, or a sequence of size bytes-like objects. */
static int copy_blocks(PyObject *res, void *recv, size_t bytes, int size)
{
    Py_buffer b;
    PyObject *seq;
    if (PyObject_CheckBuffer(res)) {
        if (PyObject_GetBuffer(res, &b, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        if ((size_t)b.len != bytes * (size_t)size) {
            PyErr_Format(PyExc_ValueError, "allgather returned %zd bytes, not %zu (%d x %zu)",
                         b.len, bytes * (size_t)size, size, bytes);
            PyBuffer_Release(&b);
            return -1;
        }
        memcpy(recv, b.buf, (size_t)b.len);
        PyBuffer_Release(&b);
        return 0;
    }
    seq = PySequence_Fast(res, "allgather must return bytes or a sequence of bytes");
    if (!seq)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != size) {
        PyErr_Format(PyExc_ValueError, "allgather returned %zd blocks, not %d",
                     PySequence_Fast_GET_SIZE(seq), size);
        Py_DECREF(seq);
        return -1;
    }
    for (int r = 0; r < size; r++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, r), &b, PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if ((size_t)b.len != bytes) {
            PyErr_Format(PyExc_ValueError, "allgather: block %d has %zd bytes, not %zu", r,
                         b.len, bytes);
            PyBuffer_Release(&b);
            Py_DECREF(seq);
            return -1;
        }
        memcpy((char *)recv + (size_t)r * bytes, b.buf, bytes);
        PyBuffer_Release(&b);
    }
    Py_DECREF(seq);
    return 0;
}

/* Runs on the thread of uccl_comm_init, which released the GIL. */
static uccl_status_t boot_allgather(const void *send, void *recv, size_t bytes, void *ctx)
{
    upy_boot_t *b = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *res = PyObject_CallFunction(b->fn, "y#", (const char *)send, (Py_ssize_t)bytes);
    int rc = res ? copy_blocks(res, recv, bytes, b->size) : -1;
    Py_XDECREF(res);
    if (rc < 0) {
        if (!b->exc_type)
            PyErr_Fetch(&b->exc_type, &b->exc_value, &b->exc_tb);
        else
            PyErr_Clear();
    }
    PyGILState_Release(g);
    return rc < 0 ? UCCL_ERR_IO : UCCL_OK;
}

int upy_comm_check(upy_comm_t *c)
{
    if (!c->comm) {
        PyErr_SetString(PyExc_ValueError, "the communicator is closed");
        return -1;
    }
    if (upy_engine_check(c->engine) < 0)
        return -1;
    upy_engine_reap(c->engine);
    return 0;
}

static int comm_init(upy_comm_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"rank", "size", "allgather", "engine", "gpu", "transports",
                             "net_devices", "progress_thread", NULL};
    int rank, size, gpu = -1;
    PyObject *fn, *engine = Py_None, *progress = Py_None, *transports = Py_None,
                  *net_devices = Py_None;
    uccl_comm_params_t p = {0};
    upy_boot_t boot = {0};
    uccl_status_t st;

    if (self->comm || self->engine) {
        PyErr_SetString(PyExc_RuntimeError, "Comm.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiO|O$iOOO:Comm", kwlist, &rank, &size, &fn,
                                     &engine, &gpu, &transports, &net_devices, &progress))
        return -1;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "allgather must be callable: fn(bytes) -> size blocks");
        return -1;
    }
    if (size < 1 || rank < 0 || rank >= size) {
        PyErr_Format(PyExc_ValueError, "rank %d out of range for size %d", rank, size);
        return -1;
    }
    if (engine == Py_None) {
        PyObject *ekw = Py_BuildValue("{s:i,s:O,s:O,s:O}", "gpu", gpu, "transports", transports,
                                      "net_devices", net_devices, "progress_thread", progress);
        PyObject *none = PyTuple_New(0);
        engine = ekw && none ? PyObject_Call((PyObject *)&upy_engine_type, none, ekw) : NULL;
        Py_XDECREF(ekw);
        Py_XDECREF(none);
        if (!engine)
            return -1;
        self->owns_engine = 1;
    } else if (!PyObject_TypeCheck(engine, &upy_engine_type)) {
        PyErr_Format(PyExc_TypeError, "engine must be a uccl.Engine, not '%.100s'",
                     Py_TYPE(engine)->tp_name);
        return -1;
    } else {
        Py_INCREF(engine);
    }
    self->engine = (upy_engine_t *)engine;
    if (upy_engine_check(self->engine) < 0)
        return -1;
    boot.fn = fn;
    boot.size = size;
    p.field_mask = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |
                   UCCL_COMM_PARAM_ALLGATHER;
    p.engine = self->engine->engine;
    p.rank = rank;
    p.size = size;
    p.allgather = boot_allgather;
    p.allgather_ctx = &boot;
    self->engine->busy++;
    Py_BEGIN_ALLOW_THREADS
    st = uccl_comm_init(&p, &self->comm);
    Py_END_ALLOW_THREADS
    self->engine->busy--;
    if (st != UCCL_OK) {
        self->comm = NULL;
        if (boot.exc_type) { /* the callback's own exception says most */
            PyErr_Restore(boot.exc_type, boot.exc_value, boot.exc_tb);
            return -1;
        }
        upy_raise(st, "uccl_comm_init");
        return -1;
    }
    Py_XDECREF(boot.exc_type); /* failed in the last round on this rank only */
    Py_XDECREF(boot.exc_value);
    Py_XDECREF(boot.exc_tb);
    self->rank = rank;
    self->size = size;
    self->engine->n_comms++;
    return 0;
}

/* dealloc: NULL called from Python, self from comm_dealloc */
static PyObject *comm_close(upy_comm_t *self, PyObject *dealloc)
{
    uccl_comm_t *comm = self->comm;
    uccl_status_t st;
    if (comm) {
        if (self->busy)
            return upy_raise(UCCL_ERR_BUSY, "Comm.close (another thread is waiting on it)");
        /* maybe on one of its connections, as Conn.close refuses; not in
         * comm_dealloc: each Conn of the comm holds it, so none is alive
         * to post on */
        if (self->engine->posting && dealloc != (PyObject *)self)
            return upy_raise(UCCL_ERR_BUSY, "Comm.close (another thread is posting a list of "
                                            "operations on its engine)");
        self->comm = NULL; /* its Conn objects see a closed comm from now on */
        self->engine->n_comms--;
        st = uccl_comm_destroy(comm);
        upy_engine_reap(self->engine); /* canceled collectives drop what they kept */
        if (st != UCCL_OK)
            return upy_raise(st, "uccl_comm_destroy");
    }
    if (self->owns_engine && self->engine && !self->engine->n_comms) {
        PyObject *r = PyObject_CallMethod((PyObject *)self->engine, "close", NULL);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static void comm_dealloc(upy_comm_t *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->comm || self->owns_engine) {
        PyObject *r, *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb); /* a failed __init__'s exception, say */
        self->busy = 0; /* nobody can wait on an object being freed */
        r = comm_close(self, (PyObject *)self);
        if (!r)
            PyErr_WriteUnraisable((PyObject *)self);
        Py_XDECREF(r);
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(self->engine);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *comm_conn(upy_comm_t *self, PyObject *arg)
{
    long r = PyLong_AsLong(arg);
    uccl_conn_t *conn;
    if (r == -1 && PyErr_Occurred())
        return NULL;
    if (upy_comm_check(self) < 0)
        return NULL;
    if (r < 0 || r >= self->size) {
        PyErr_Format(PyExc_IndexError, "rank %ld out of range [0, %d)", r, self->size);
        return NULL;
    }
    if (r == self->rank)
        Py_RETURN_NONE;
    self->engine->busy++;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    conn = uccl_comm_conn(self->comm, (int)r);
    Py_END_ALLOW_THREADS
    self->busy--;
    self->engine->busy--;
    if (!conn)
        return upy_raise(UCCL_ERR_PEER_FAILED, "Comm.conn (no connection to that rank)");
    return upy_conn_new(self->engine, conn, self);
}

static PyObject *comm_same_host(upy_comm_t *self, PyObject *arg)
{
    long r = PyLong_AsLong(arg);
    if (r == -1 && PyErr_Occurred())
        return NULL;
    if (upy_comm_check(self) < 0)
        return NULL;
    if (r < 0 || r >= self->size) {
        PyErr_Format(PyExc_IndexError, "rank %ld out of range [0, %d)", r, self->size);
        return NULL;
    }
    return PyBool_FromLong(uccl_comm_same_host(self->comm, (int)r));
}

static PyObject *comm_stats(upy_comm_t *self, PyObject *unused)
{
    uccl_coll_stats_t s;
    uccl_status_t st;
    (void)unused;
    if (upy_comm_check(self) < 0)
        return NULL;
    st = uccl_comm_coll_stats(self->comm, &s);
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_comm_coll_stats");
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "calls", (unsigned long long)s.calls,
                         "buf_regs", (unsigned long long)s.buf_regs, "buf_hits",
                         (unsigned long long)s.buf_hits, "desc_sent",
                         (unsigned long long)s.desc_sent, "desc_reused",
                         (unsigned long long)s.desc_reused, "plan_hits",
                         (unsigned long long)s.plan_hits);
}

static PyObject *comm_flush(upy_comm_t *self, PyObject *unused)
{
    uccl_status_t st;
    (void)unused;
    if (upy_comm_check(self) < 0)
        return NULL;
    st = uccl_comm_coll_flush(self->comm);
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_comm_coll_flush");
    Py_RETURN_NONE;
}

static PyObject *comm_enter(upy_comm_t *self, PyObject *unused)
{
    (void)unused;
    if (upy_comm_check(self) < 0)
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *comm_exit(upy_comm_t *self, PyObject *args)
{
    PyObject *r = comm_close(self, NULL);
    (void)args;
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *comm_get(upy_comm_t *self, void *closure)
{
    const char *which = closure;
    if (!strcmp(which, "closed"))
        return PyBool_FromLong(self->comm == NULL);
    if (!strcmp(which, "engine")) {
        PyObject *e = self->engine ? (PyObject *)self->engine : Py_None;
        Py_INCREF(e);
        return e;
    }
    return PyLong_FromLong(!strcmp(which, "rank") ? self->rank : self->size);
}

extern PyMethodDef upy_coll_methods[]; /* coll.c */

static PyMethodDef comm_methods[] = {
    {"conn", (PyCFunction)comm_conn, METH_O,
     "conn(r) -> Conn | None\n\nThe connection to rank r (None for this rank), owned by the "
     "Comm (closed with it; a new Conn object each call). Collectives use the reserved tag bits, so the caller's own "
     "tags never meet theirs; write notifications on these connections belong to the "
     "collectives while one is in flight."},
    {"same_host", (PyCFunction)comm_same_host, METH_O,
     "same_host(r) -> bool\n\nTrue when rank r runs on this rank's host."},
    {"coll_stats", (PyCFunction)comm_stats, METH_NOARGS,
     "coll_stats() -> dict\n\nCounters of the collectives: calls, buf_regs (cache misses), "
     "buf_hits, desc_sent, desc_reused, plan_hits."},
    {"flush", (PyCFunction)comm_flush, METH_NOARGS,
     "flush()\n\nForget the cached registrations of the buffers collectives used (call it "
     "after freeing such buffers, before new memory may appear at their addresses)."},
    {"close", (PyCFunction)comm_close, METH_NOARGS,
     "close()\n\nDestroy the communicator (collectives in flight end with "
     "uccl.CanceledError) and, when the Comm made it, its engine. Idempotent."},
    {"__enter__", (PyCFunction)comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)comm_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get, NULL, "This rank.", "rank"},
    {"size", (getter)comm_get, NULL, "Number of ranks.", "size"},
    {"engine", (getter)comm_get, NULL, "The Engine (register buffers with it).", "engine"},
    {"closed", (getter)comm_get, NULL, "True once close() ran.", "closed"},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject upy_comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl._uccl.Comm",
    .tp_basicsize = sizeof(upy_comm_t),
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Comm(rank, size, allgather, engine=None, *, gpu=-1, transports=None, "
              "net_devices=None, progress_thread=None)\n\n"
              "A libuccl communicator, made collectively by uccl_comm_init: allgather(data: "
              "bytes) must return every rank's data in rank order (one bytes object of "
              "size * len(data), or a list of size bytes objects), e.g. mpi4py's "
              "comm.allgather. engine: use this Engine (else one is made with the keyword "
              "arguments and closed with the Comm). The GIL is released while connecting; "
              "an exception raised by allgather is re-raised. Use uccl.Comm.from_mpi.",
    .tp_weaklistoffset = offsetof(upy_comm_t, weakrefs),
    .tp_methods = NULL, /* comm_methods + upy_coll_methods, joined by upy_comm_type_init */
    .tp_getset = comm_getset,
    .tp_init = (initproc)comm_init,
    .tp_new = PyType_GenericNew,
};

int upy_comm_type_init(void)
{
    size_t a = sizeof(comm_methods) / sizeof(comm_methods[0]) - 1, b = 0;
    PyMethodDef *all;
    if (upy_comm_type.tp_methods)
        return 0;
    while (upy_coll_methods[b].ml_name)
        b++;
    all = PyMem_Calloc(a + b + 1, sizeof(*all));
    if (!all)
        return -1;
    memcpy(all, comm_methods, a * sizeof(*all));
    memcpy(all + a, upy_coll_methods, b * sizeof(*all));
    upy_comm_type.tp_methods = all;
    return 0;
}

/* uccl.Engine: one libuccl engine, its address, connect/accept, memory
 * registration, and the requests dropped while in flight (orphans). */
#include "upy.h"

#include <limits.h>
#include <string.h>
#include <time.h>

int upy_engine_check(upy_engine_t *e)
{
    if (e->engine)
        return 0;
    PyErr_SetString(PyExc_ValueError, "the engine is closed");
    return -1;
}

/* keep = (conn, regions...) or one region: an orphan keeps only the
 * regions, so that dropping the connection still closes it (and cancels
 * the request). */
void upy_engine_orphan(upy_engine_t *e, uccl_req_t *req, PyObject *keep)
{
    if (!e->engine) /* destroyed: the request is gone with it */
        return;
    if (keep && PyTuple_Check(keep) && PyTuple_GET_SIZE(keep) > 1) {
        PyObject *regions = PyTuple_New(PyTuple_GET_SIZE(keep) - 1);
        if (!regions) { /* cannot keep them for a while: pin them for good */
            Py_INCREF(keep);
            uccl_req_free(req);
            return;
        }
        for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(keep); i++) {
            Py_INCREF(PyTuple_GET_ITEM(keep, i));
            PyTuple_SET_ITEM(regions, i - 1, PyTuple_GET_ITEM(keep, i));
        }
        keep = regions;
    } else if (keep && !PyTuple_Check(keep)) { /* the one region of a Conn operation */
        Py_INCREF(keep);
    } else {
        keep = NULL;
    }
    if (e->n_orphans == e->cap_orphans) {
        size_t cap = e->cap_orphans ? 2 * e->cap_orphans : 16;
        upy_orphan_t *o = PyMem_Realloc(e->orphans, cap * sizeof(*o));
        if (!o) {
            /* Cannot track it: keep its objects alive for good rather than
             * let the library touch freed memory. */
            uccl_req_free(req); /* keep's reference is never dropped */
            return;
        }
        e->orphans = o;
        e->cap_orphans = cap;
    }
    e->orphans[e->n_orphans].req = req;
    e->orphans[e->n_orphans].keep = keep;
    e->n_orphans++;
}

/* Free the orphans that finished, and drop what they kept alive. */
void upy_engine_reap(upy_engine_t *e)
{
    size_t j = 0;
    for (size_t i = 0; i < e->n_orphans; i++) {
        upy_orphan_t o = e->orphans[i];
        int done = 0;
        if (e->engine)
            uccl_test(o.req, &done);
        if (!e->engine || done) {
            if (e->engine)
                uccl_req_free(o.req);
            Py_XDECREF(o.keep);
        } else {
            e->orphans[j++] = o;
        }
    }
    e->n_orphans = j;
}

int upy_timeout_ms(PyObject *timeout, long long *ms)
{
    double s;
    if (!timeout || timeout == Py_None) {
        *ms = -2;
        return 0;
    }
    s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (!(s >= 0)) {
        PyErr_SetString(PyExc_ValueError, "timeout must be None or a number of seconds >= 0");
        return -1;
    }
    *ms = s * 1000.0 > (double)LLONG_MAX / 2 ? LLONG_MAX / 2 : (long long)(s * 1000.0);
    return 0;
}

#define UPY_SLICE_MS 100 /* longest time without checking for signals */
/* The longest a wait keeps the GIL without looking for another thread: a
 * thread that wants the GIL waits at most this (CPython's switch interval,
 * 5 ms, is what a thread running Python code makes it wait). */
#define UPY_ALONE_SLICE_MS 1

unsigned long long upy_gil_kept, upy_gil_released, upy_rdesc_hits, upy_gil_asks;

int upy_gil_alone(void)
{
    upy_gil_asks++;
#ifdef Py_GIL_DISABLED
    return 0;
#else
    PyThreadState *ts = PyThreadState_Get();
    PyInterpreterState *in = PyThreadState_GetInterpreter(ts);
    return PyInterpreterState_Head() == in && PyInterpreterState_Next(in) == NULL &&
           PyInterpreterState_ThreadHead(in) == ts && PyThreadState_Next(ts) == NULL;
#endif
}

/* Every request of reqs already finished (read without progress, as
 * uccl_req_bytes answers): nothing to wait for. */
static int all_done(uccl_req_t **reqs, size_t n)
{
    size_t b;
    for (size_t i = 0; i < n; i++)
        if (reqs[i] && uccl_req_bytes(reqs[i], &b) == UCCL_INPROGRESS)
            return 0;
    return 1;
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uccl_status_t upy_wait_many_alone(upy_engine_t *e, uccl_req_t **reqs, size_t n, long long ms,
                                  int *alone)
{
    uccl_status_t st;
    long long end;
    int first = 1;
    /* finished already (an eager send, a window's last completions): their
     * statuses without releasing and taking back the GIL, and without a
     * round of progress under it */
    if (all_done(reqs, n))
        return uccl_wait_all(reqs, n, 0);
    /* a limit counts from here on the clock: slices of 1 ms (alone) would
     * each round the library's millisecond deadline */
    end = ms == -2 ? 0 : mono_ms() + ms;
    for (;;) {
        int a = first && *alone >= 0 ? *alone : upy_gil_alone(), cap;
        long long left = ms == -2 ? -2 : end - mono_ms();
        int slice;
        *alone = a;
        first = 0;
        cap = a ? UPY_ALONE_SLICE_MS : UPY_SLICE_MS;
        slice = left == -2 || left > cap ? cap : left < 0 ? 0 : (int)left;
        e->busy++;
        if (a) { /* nobody to let run: no drop and take of the GIL */
            upy_gil_kept++;
            st = uccl_wait_all(reqs, n, slice);
        } else {
            upy_gil_released++;
            Py_BEGIN_ALLOW_THREADS
            st = uccl_wait_all(reqs, n, slice);
            Py_END_ALLOW_THREADS
        }
        e->busy--;
        if (st != UCCL_ERR_TIMEOUT || (left != -2 && left <= slice))
            return st;
        if (PyErr_CheckSignals() < 0)
            return UPY_WAIT_INTERRUPTED;
    }
}

uccl_status_t upy_wait_many(upy_engine_t *e, uccl_req_t **reqs, size_t n, long long ms)
{
    int alone = -1;
    return upy_wait_many_alone(e, reqs, n, ms, &alone);
}

uccl_status_t upy_wait(upy_engine_t *e, uccl_req_t *req, long long ms)
{
    return upy_wait_many(e, &req, 1, ms); /* uccl_wait_all of one: that request's status */
}

/* ---------------------------------------------------------------- methods */

static int engine_init(upy_engine_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"gpu", "transports", "net_devices", "progress_thread", "secret", NULL};
    int gpu = -1;
    const char *transports = NULL, *net_devices = NULL, *secret = NULL;
    Py_ssize_t secret_len = 0;
    PyObject *progress = Py_None;
    uccl_engine_params_t p = {0};
    uccl_status_t st;

    if (self->engine) {
        PyErr_SetString(PyExc_RuntimeError, "Engine.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|izzOz#:Engine", kwlist, &gpu, &transports,
                                     &net_devices, &progress, &secret, &secret_len))
        return -1;
    if (secret != NULL) { /* the job's admission secret */
        if (secret_len != UCCL_SECRET_SIZE) {
            PyErr_Format(PyExc_ValueError, "secret must be %d bytes, not %zd", UCCL_SECRET_SIZE,
                         secret_len);
            return -1;
        }
        p.field_mask |= UCCL_ENGINE_PARAM_SECRET;
        memcpy(p.secret, secret, UCCL_SECRET_SIZE);
    }
    p.field_mask |= UCCL_ENGINE_PARAM_GPU_INDEX; /* keeps SECRET set above */
    p.gpu_index = gpu;
    if (transports) {
        p.field_mask |= UCCL_ENGINE_PARAM_TRANSPORTS;
        p.transports = transports;
    }
    if (net_devices) {
        p.field_mask |= UCCL_ENGINE_PARAM_NET_DEVICES;
        p.net_devices = net_devices;
    }
    if (progress != Py_None) {
        int on = PyObject_IsTrue(progress);
        if (on < 0)
            return -1;
        p.field_mask |= UCCL_ENGINE_PARAM_PROGRESS_THREAD;
        p.progress_thread = on;
    }
    Py_BEGIN_ALLOW_THREADS
    st = uccl_engine_create(&p, &self->engine);
    Py_END_ALLOW_THREADS
    if (st != UCCL_OK) {
        self->engine = NULL;
        upy_raise(st, "uccl_engine_create");
        return -1;
    }
    return 0;
}

static PyObject *engine_close(upy_engine_t *self, PyObject *unused)
{
    uccl_engine_t *engine = self->engine;
    uccl_status_t st;
    (void)unused;
    if (!engine)
        Py_RETURN_NONE;
    if (self->busy) {
        return upy_raise(UCCL_ERR_BUSY, "Engine.close (another thread is waiting on it)");
    }
    if (self->n_comms)
        return upy_raise(UCCL_ERR_BUSY, "Engine.close (a Comm uses it: close the Comm first)");
    self->engine = NULL; /* children see a closed engine from now on */
    Py_BEGIN_ALLOW_THREADS
    st = uccl_engine_destroy(engine);
    Py_END_ALLOW_THREADS
    upy_engine_reap(self); /* drops what the orphans kept */
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_engine_destroy");
    Py_RETURN_NONE;
}

static void engine_dealloc(upy_engine_t *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->engine) {
        uccl_engine_t *engine = self->engine;
        self->engine = NULL;
        uccl_engine_destroy(engine);
    }
    upy_engine_reap(self);
    PyMem_Free(self->orphans);
    Py_CLEAR(self->address);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *engine_get_address(upy_engine_t *self, void *closure)
{
    char buf[UCCL_ADDRESS_MAX];
    size_t len = sizeof(buf);
    uccl_status_t st;
    (void)closure;
    if (upy_engine_check(self) < 0)
        return NULL;
    if (!self->address) {
        st = uccl_engine_address(self->engine, buf, &len);
        if (st != UCCL_OK)
            return upy_raise(st, "uccl_engine_address");
        self->address = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
        if (!self->address)
            return NULL;
    }
    Py_INCREF(self->address);
    return self->address;
}

static PyObject *engine_get_u64(upy_engine_t *self, void *closure)
{
    uint64_t v;
    if (upy_engine_check(self) < 0)
        return NULL;
    if (closure == (void *)0)
        v = uccl_engine_id(self->engine);
    else if (closure == (void *)1)
        v = uccl_engine_host_id(self->engine);
    else
        v = uccl_engine_caps(self->engine);
    return PyLong_FromUnsignedLongLong(v);
}

static PyObject *engine_get_closed(upy_engine_t *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->engine == NULL);
}

static PyObject *engine_connect(upy_engine_t *self, PyObject *arg)
{
    Py_buffer addr;
    uccl_conn_t *conn = NULL;
    uccl_status_t st;
    if (upy_engine_check(self) < 0)
        return NULL;
    if (PyObject_GetBuffer(arg, &addr, PyBUF_SIMPLE) < 0)
        return NULL;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    st = uccl_connect(self->engine, addr.buf, (size_t)addr.len, &conn);
    Py_END_ALLOW_THREADS
    self->busy--;
    PyBuffer_Release(&addr);
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_connect");
    return upy_conn_new(self, conn, NULL);
}

static PyObject *engine_accept(upy_engine_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"timeout", NULL};
    PyObject *timeout = Py_None;
    long long ms;
    uccl_conn_t *conn = NULL;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:accept", kwlist, &timeout))
        return NULL;
    if (upy_timeout_ms(timeout, &ms) < 0 || upy_engine_check(self) < 0)
        return NULL;
    for (;;) { /* slices, so that Ctrl-C gets through an endless accept */
        int slice = ms == -2 || ms > UPY_SLICE_MS ? UPY_SLICE_MS : (int)ms;
        self->busy++;
        Py_BEGIN_ALLOW_THREADS
        st = uccl_accept(self->engine, slice, &conn);
        Py_END_ALLOW_THREADS
        self->busy--;
        if (st != UCCL_ERR_TIMEOUT || (ms != -2 && ms <= slice))
            break;
        if (ms != -2)
            ms -= slice;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_accept");
    return upy_conn_new(self, conn, NULL);
}

static PyObject *engine_register(upy_engine_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"obj", "local_only", NULL};
    PyObject *obj;
    int local_only = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p:register", kwlist, &obj, &local_only))
        return NULL;
    if (upy_engine_check(self) < 0)
        return NULL;
    return upy_mr_register(self, obj, local_only);
}

static PyObject *engine_progress(upy_engine_t *self, PyObject *unused)
{
    int n;
    (void)unused;
    if (upy_engine_check(self) < 0)
        return NULL;
    n = uccl_engine_progress(self->engine);
    upy_engine_reap(self);
    return PyLong_FromLong(n);
}

static PyObject *engine_enter(upy_engine_t *self, PyObject *unused)
{
    (void)unused;
    if (upy_engine_check(self) < 0)
        return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *engine_exit(upy_engine_t *self, PyObject *args)
{
    PyObject *r = engine_close(self, NULL);
    (void)args;
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyMethodDef engine_methods[] = {
    {"connect", (PyCFunction)engine_connect, METH_O,
     "connect(address) -> Conn\n\nConnect to the engine whose address (bytes) is given. "
     "Blocks up to UCCL_TIMEOUT_MS without holding the GIL."},
    {"accept", (PyCFunction)(void (*)(void))engine_accept, METH_VARARGS | METH_KEYWORDS,
     "accept(timeout=None) -> Conn\n\nThe next incoming connection; timeout in seconds "
     "(None: no limit). Raises uccl.TimeoutError. The GIL is released while waiting."},
    {"register", (PyCFunction)(void (*)(void))engine_register, METH_VARARGS | METH_KEYWORDS,
     "register(obj, local_only=False) -> MemoryRegion\n\nRegister obj's memory, zero-copy: "
     "anything with the buffer protocol (bytes, bytearray, numpy), __cuda_array_interface__ "
     "or __dlpack__. It must be contiguous; the region keeps obj alive."},
    {"progress", (PyCFunction)engine_progress, METH_NOARGS,
     "progress() -> int\n\nDrive every transport once; the number of events handled."},
    {"close", (PyCFunction)engine_close, METH_NOARGS,
     "close()\n\nDestroy the engine: its connections, regions and requests become unusable "
     "(their methods raise ValueError). Idempotent."},
    {"__enter__", (PyCFunction)engine_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)engine_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef engine_getset[] = {
    {"address", (getter)engine_get_address, NULL,
     "This engine's address blob (bytes): send it to peers by any means.", NULL},
    {"id", (getter)engine_get_u64, NULL, "Random 64-bit incarnation id.", (void *)0},
    {"host_id", (getter)engine_get_u64, NULL, "Host identity (equal = same host).", (void *)1},
    {"caps", (getter)engine_get_u64, NULL, "Bitmask of uccl.CAP_*.", (void *)2},
    {"closed", (getter)engine_get_closed, NULL, "True once close() ran.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject upy_engine_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.Engine",
    .tp_basicsize = sizeof(upy_engine_t),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(gpu=-1, transports=None, net_devices=None, progress_thread=None)\n\n"
              "A libuccl engine: opens the usable transports (transports: a comma list such "
              "as 'shm,tcp', default UCCL_TRANSPORTS). A context manager (closes on exit).",
    .tp_weaklistoffset = offsetof(upy_engine_t, weakrefs),
    .tp_methods = engine_methods,
    .tp_getset = engine_getset,
    .tp_init = (initproc)engine_init,
    .tp_new = PyType_GenericNew,
};

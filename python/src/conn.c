/* uccl.Conn: a connection; two-sided send/recv(v), notifications, close and
 * attributes here, the one-sided operations in conn_rma.c. */
#include "args.h"

#include <string.h>

PyObject *upy_conn_new(upy_engine_t *e, uccl_conn_t *conn, upy_comm_t *comm)
{
    upy_conn_t *c = PyObject_New(upy_conn_t, &upy_conn_type);
    if (!c) {
        if (!comm)
            uccl_conn_close(conn);
        return NULL;
    }
    Py_INCREF(e);
    c->engine = e;
    c->conn = conn;
    Py_XINCREF(comm);
    c->comm = comm;
    c->weakrefs = NULL;
    c->rd_valid = 0;
    return (PyObject *)c;
}

static PyObject *conn_close(upy_conn_t *self, PyObject *unused)
{
    uccl_conn_t *conn = self->conn;
    uccl_status_t st;
    (void)unused;
    if (conn && self->engine->posting)
        return upy_raise(UCCL_ERR_BUSY, "Conn.close (another thread is posting a list of "
                                        "operations on its engine)");
    self->conn = NULL;
    if (!conn || !self->engine->engine || self->comm) /* a Comm's: it closes it */
        Py_RETURN_NONE;
    st = uccl_conn_close(conn);
    upy_engine_reap(self->engine); /* its orphans were canceled */
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_conn_close");
    Py_RETURN_NONE;
}

static void conn_dealloc(upy_conn_t *self)
{
    PyObject *r;
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    r = conn_close(self, NULL);
    if (!r)
        PyErr_WriteUnraisable((PyObject *)self);
    Py_XDECREF(r);
    Py_XDECREF(self->comm);
    Py_XDECREF(self->engine);
    PyObject_Free(self);
}

/* send/recv(mr, offset=0, length=None, tag=0, *, block=False): fast-call
 * methods (the per-operation path: no argument tuple, no format parsing) */
static const char *const two_sided_names[] = {"mr", "offset", "length", "tag", "block"};
static const upy_sig_t send_sig = {"send", two_sided_names, 5, 4, 1};
static const upy_sig_t recv_sig = {"recv", two_sided_names, 5, 4, 1};

static PyObject *two_sided(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, int recv)
{
    const char *op = recv ? "recv" : "send";
    PyObject *a[5];
    Py_ssize_t off = 0;
    unsigned long long tag = 0;
    int block = 0;
    uccl_iov_t l;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (upy_parse(recv ? &recv_sig : &send_sig, args, nargs, kwnames, a) < 0 ||
        upy_ssize_arg(a[1], &off) < 0 || upy_u64_arg(a[3], &tag) < 0 ||
        upy_bool_arg(a[4], &block) < 0)
        return NULL;
    if (upy_conn_check(self) < 0 || upy_local(self, a[0], off, a[2], recv, &l, op) < 0)
        return NULL;
    st = recv ? uccl_recv(self->conn, l.mr, l.off, l.len, tag, &req)
              : uccl_send(self->conn, l.mr, l.off, l.len, tag, &req);
    return upy_posted(self, st, req, a[0], block, op);
}

static PyObject *conn_send(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    return two_sided(self, args, nargs, kwnames, 0);
}

static PyObject *conn_recv(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    return two_sided(self, args, nargs, kwnames, 1);
}

/* sendv/recvv(iov, tag=0, *, block=False) */
static PyObject *two_sided_v(upy_conn_t *self, PyObject *args, PyObject *kwds, int recv)
{
    static char *kwlist[] = {"iov", "tag", "block", NULL};
    const char *op = recv ? "recvv" : "sendv";
    PyObject *list, *res = NULL;
    unsigned long long tag = 0;
    int block = 0;
    upy_pieces_t p = {.iovcnt = 0};
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, recv ? "O|K$p:recvv" : "O|K$p:sendv", kwlist,
                                     &list, &tag, &block))
        return NULL;
    if (upy_conn_check(self) < 0 || upy_iov(self, list, recv, &p, op) < 0)
        goto out;
    st = recv ? uccl_recvv(self->conn, p.iov, p.iovcnt, tag, &req)
              : uccl_sendv(self->conn, p.iov, p.iovcnt, tag, &req);
    res = upy_posted(self, st, req, p.keep, block, op);
out:
    upy_pieces_free(&p);
    return res;
}

static PyObject *conn_sendv(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return two_sided_v(self, args, kwds, 0);
}

static PyObject *conn_recvv(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return two_sided_v(self, args, kwds, 1);
}

static PyObject *conn_poll_notif(upy_conn_t *self, PyObject *unused)
{
    uint64_t v;
    uccl_status_t st;
    (void)unused;
    if (upy_conn_check(self) < 0)
        return NULL;
    st = uccl_notif_poll(self->conn, &v);
    if (st == UCCL_ERR_NOT_FOUND)
        Py_RETURN_NONE;
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_notif_poll");
    return PyLong_FromUnsignedLongLong(v);
}

static PyObject *conn_enter(upy_conn_t *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *conn_exit(upy_conn_t *self, PyObject *args)
{
    PyObject *r = conn_close(self, NULL);
    (void)args;
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *conn_get(upy_conn_t *self, void *closure)
{
    const char *which = closure;
    uccl_conn_attr_t a;
    uccl_status_t st;
    if (!strcmp(which, "closed"))
        return PyBool_FromLong(!self->conn || !self->engine->engine ||
                               (self->comm && !self->comm->comm));
    if (upy_conn_check(self) < 0)
        return NULL;
    st = uccl_conn_query(self->conn, &a);
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_conn_query");
    if (!strcmp(which, "peer_id"))
        return PyLong_FromUnsignedLongLong(a.peer_id);
    if (!strcmp(which, "host_id"))
        return PyLong_FromUnsignedLongLong(a.host_id);
    if (!strcmp(which, "transport"))
        return PyUnicode_FromString(a.transport ? a.transport : "none");
    if (!strcmp(which, "gpu_transport"))
        return PyUnicode_FromString(a.gpu_transport ? a.gpu_transport : "none");
    if (!strcmp(which, "same_host"))
        return PyBool_FromLong(a.same_host);
    return PyLong_FromLong((long)a.state);
}

extern PyMethodDef upy_conn_rma_methods[];  /* conn_rma.c */
extern PyMethodDef upy_conn_many_methods[]; /* conn_many.c */

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FAST (METH_FASTCALL | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef conn_methods[] = {
    {"send", FN(conn_send), FAST,
     "send(mr, offset=0, length=None, tag=0, *, block=False) -> Request | int\n\n"
     "Send [offset, offset+length) of region mr as one message (length None: to the end). "
     "Returns a Request, or with block=True waits (GIL released) and returns the bytes sent."},
    {"recv", FN(conn_recv), FAST,
     "recv(mr, offset=0, length=None, tag=0, *, block=False) -> Request | int\n\n"
     "Receive the next message with this tag into the range; the request's nbytes is the "
     "message length. A smaller range fails with uccl.TruncatedError. mr must be writable."},
    {"sendv", FN(conn_sendv), KW,
     "sendv(iov, tag=0, *, block=False)\n\nGather pieces into one message; iov is a list of "
     "MemoryRegion or (MemoryRegion, offset, length) tuples (1..IOV_MAX)."},
    {"recvv", FN(conn_recvv), KW,
     "recvv(iov, tag=0, *, block=False)\n\nScatter one message into the pieces."},
    {"poll_notif", (PyCFunction)conn_poll_notif, METH_NOARGS,
     "poll_notif() -> int | None\n\nProgress once and pop the oldest notification of this "
     "connection (write_notify / writemsg with notify), None when none is pending."},
    {"close", (PyCFunction)conn_close, METH_NOARGS,
     "close()\n\nClose: requests in flight complete with uccl.CanceledError, the peer's "
     "with uccl.PeerFailedError. Idempotent. A connection of a Comm (Comm.conn) closes "
     "with the Comm: close() only makes this object unusable."},
    {"__enter__", (PyCFunction)conn_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)conn_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef conn_getset[] = {
    {"peer_id", (getter)conn_get, NULL, "The peer engine's incarnation id.", "peer_id"},
    {"host_id", (getter)conn_get, NULL, "The peer engine's host identity.", "host_id"},
    {"transport", (getter)conn_get, NULL, "Transport moving host memory.", "transport"},
    {"gpu_transport", (getter)conn_get, NULL, "Transport moving GPU memory.", "gpu_transport"},
    {"same_host", (getter)conn_get, NULL, "True when the peer runs on this host.", "same_host"},
    {"state", (getter)conn_get, NULL, "0, or the status that failed the connection.", "state"},
    {"closed", (getter)conn_get, NULL, "True once closed (or its engine is).", "closed"},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject upy_conn_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.Conn",
    .tp_basicsize = sizeof(upy_conn_t),
    .tp_dealloc = (destructor)conn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A connection (Engine.connect / Engine.accept). Keeps its engine alive; a "
              "context manager (closed on exit). Every transfer method returns a Request, or "
              "with block=True the bytes moved.",
    .tp_weaklistoffset = offsetof(upy_conn_t, weakrefs),
    .tp_methods = conn_methods,
    .tp_getset = conn_getset,
};

/* The type's method table is conn_methods followed by conn_rma.c's and
 * conn_many.c's; joined once at module init. */
int upy_conn_type_init(void)
{
    size_t a = sizeof(conn_methods) / sizeof(conn_methods[0]) - 1, b = 0, c = 0;
    PyMethodDef *all;
    if (upy_conn_type.tp_methods != conn_methods)
        return 0; /* joined already */
    while (upy_conn_rma_methods[b].ml_name)
        b++;
    while (upy_conn_many_methods[c].ml_name)
        c++;
    all = PyMem_Calloc(a + b + c + 1, sizeof(*all));
    if (!all)
        return -1;
    memcpy(all, conn_methods, a * sizeof(*all));
    memcpy(all + a, upy_conn_rma_methods, b * sizeof(*all));
    memcpy(all + a + b, upy_conn_many_methods, c * sizeof(*all));
    upy_conn_type.tp_methods = all;
    return 0;
}

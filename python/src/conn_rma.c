/* uccl.Conn one-sided methods: write/read, writev/readv, write_notify and
 * the general writemsg/readmsg with remote pieces. */
#include "args.h"

/* write/read(mr, desc, offset=0, length=None, roffset=0, *, block=False):
 * fast-call methods, as send/recv */
static const char *const rma_names[] = {"mr", "desc", "offset", "length", "roffset", "block"};
static const upy_sig_t write_sig = {"write", rma_names, 6, 5, 2};
static const upy_sig_t read_sig = {"read", rma_names, 6, 5, 2};

static PyObject *rma(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, int read)
{
    const char *op = read ? "read" : "write";
    PyObject *a[6];
    Py_ssize_t off = 0, roff = 0;
    int block = 0;
    uccl_iov_t l;
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (upy_parse(read ? &read_sig : &write_sig, args, nargs, kwnames, a) < 0 ||
        upy_ssize_arg(a[2], &off) < 0 || upy_ssize_arg(a[4], &roff) < 0 ||
        upy_bool_arg(a[5], &block) < 0)
        return NULL;
    if (upy_conn_check(self) < 0 || upy_local(self, a[0], off, a[3], read, &l, op) < 0 ||
        upy_rdesc(a[1], &rd) < 0)
        return NULL;
    if (roff < 0)
        return upy_raise(UCCL_ERR_OUT_OF_BOUNDS, op);
    st = read ? uccl_read(self->conn, l.mr, l.off, l.len, &rd, (size_t)roff, &req)
              : uccl_write(self->conn, l.mr, l.off, l.len, &rd, (size_t)roff, &req);
    return upy_posted(self, st, req, a[0], block, op);
}

static PyObject *conn_write(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    return rma(self, args, nargs, kwnames, 0);
}

static PyObject *conn_read(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    return rma(self, args, nargs, kwnames, 1);
}

/* writev/readv(iov, desc, roffset=0, *, block=False) */
static PyObject *rma_v(upy_conn_t *self, PyObject *args, PyObject *kwds, int read)
{
    static char *kwlist[] = {"iov", "desc", "roffset", "block", NULL};
    const char *op = read ? "readv" : "writev";
    PyObject *list, *desc, *res = NULL;
    Py_ssize_t roff = 0;
    int block = 0;
    upy_pieces_t p = {.iovcnt = 0};
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, read ? "OO|n$p:readv" : "OO|n$p:writev",
                                     kwlist, &list, &desc, &roff, &block))
        return NULL;
    if (upy_conn_check(self) < 0 || upy_rdesc(desc, &rd) < 0 ||
        upy_iov(self, list, read, &p, op) < 0)
        goto out;
    if (roff < 0) {
        upy_raise(UCCL_ERR_OUT_OF_BOUNDS, op);
        goto out;
    }
    st = read ? uccl_readv(self->conn, p.iov, p.iovcnt, &rd, (size_t)roff, &req)
              : uccl_writev(self->conn, p.iov, p.iovcnt, &rd, (size_t)roff, &req);
    res = upy_posted(self, st, req, p.keep, block, op);
out:
    upy_pieces_free(&p);
    return res;
}

static PyObject *conn_writev(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return rma_v(self, args, kwds, 0);
}

static PyObject *conn_readv(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return rma_v(self, args, kwds, 1);
}

/* write_notify(mr, desc, notif, offset=0, length=None, roffset=0, *, block=False) */
static PyObject *conn_write_notify(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mr", "desc", "notif", "offset", "length", "roffset", "block",
                             NULL};
    PyObject *mr, *desc, *length = Py_None;
    Py_ssize_t off = 0, roff = 0;
    unsigned long long notif;
    int block = 0;
    uccl_iov_t l;
    uccl_rdesc_t rd;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOK|nOn$p:write_notify", kwlist, &mr, &desc,
                                     &notif, &off, &length, &roff, &block))
        return NULL;
    if (upy_conn_check(self) < 0 || upy_local(self, mr, off, length, 0, &l, "write_notify") < 0 ||
        upy_rdesc(desc, &rd) < 0)
        return NULL;
    if (roff < 0)
        return upy_raise(UCCL_ERR_OUT_OF_BOUNDS, "write_notify");
    st = uccl_write_notify(self->conn, l.mr, l.off, l.len, &rd, (size_t)roff, notif, &req);
    return upy_posted(self, st, req, mr, block, "write_notify");
}

/* writemsg/readmsg(iov, riov, notify=None, *, block=False) */
static PyObject *rma_msg(upy_conn_t *self, PyObject *args, PyObject *kwds, int read)
{
    static char *kwlist[] = {"iov", "riov", "notify", "block", NULL};
    const char *op = read ? "readmsg" : "writemsg";
    PyObject *list, *rlist, *notify = Py_None, *res = NULL;
    int block = 0;
    upy_pieces_t p = {.iovcnt = 0};
    uccl_rma_msg_t msg = {0};
    uccl_req_t *req = NULL;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, read ? "OO|O$p:readmsg" : "OO|O$p:writemsg",
                                     kwlist, &list, &rlist, &notify, &block))
        return NULL;
    if (notify != Py_None) {
        msg.notif = PyLong_AsUnsignedLongLong(notify);
        if (PyErr_Occurred())
            return NULL;
        msg.flags = UCCL_RMA_NOTIFY;
    }
    if (upy_conn_check(self) < 0 || upy_iov(self, list, read, &p, op) < 0 ||
        upy_riov(rlist, &p, op) < 0)
        goto out;
    msg.iov = p.iov;
    msg.iovcnt = p.iovcnt;
    msg.riov = p.riov;
    msg.riovcnt = p.riovcnt;
    st = read ? uccl_readmsg(self->conn, &msg, &req) : uccl_writemsg(self->conn, &msg, &req);
    res = upy_posted(self, st, req, p.keep, block, op);
out:
    upy_pieces_free(&p);
    return res;
}

static PyObject *conn_writemsg(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return rma_msg(self, args, kwds, 0);
}

static PyObject *conn_readmsg(upy_conn_t *self, PyObject *args, PyObject *kwds)
{
    return rma_msg(self, args, kwds, 1);
}

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FAST (METH_FASTCALL | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))

PyMethodDef upy_conn_rma_methods[] = {
    {"write", FN(conn_write), FAST,
     "write(mr, desc, offset=0, length=None, roffset=0, *, block=False)\n\n"
     "Write [offset, offset+length) of mr to the peer range desc (64 bytes from "
     "MemoryRegion.descriptor) at roffset. Returns a Request, or with block=True the bytes."},
    {"read", FN(conn_read), FAST,
     "read(mr, desc, offset=0, length=None, roffset=0, *, block=False)\n\n"
     "Read from the peer range desc at roffset into [offset, offset+length) of mr."},
    {"writev", FN(conn_writev), KW,
     "writev(iov, desc, roffset=0, *, block=False)\n\nGather local pieces into the "
     "contiguous peer range starting at roffset."},
    {"readv", FN(conn_readv), KW,
     "readv(iov, desc, roffset=0, *, block=False)\n\nScatter the contiguous peer range "
     "starting at roffset into local pieces."},
    {"write_notify", FN(conn_write_notify), KW,
     "write_notify(mr, desc, notif, offset=0, length=None, roffset=0, *, block=False)\n\n"
     "Write, then deliver the 64-bit notif to the peer (its Conn.poll_notif) once the data "
     "landed."},
    {"writemsg", FN(conn_writemsg), KW,
     "writemsg(iov, riov, notify=None, *, block=False)\n\nThe general one-sided write: "
     "local pieces (gathered in order) to remote pieces (filled in order), same total. riov "
     "is a list of descriptors or (descriptor, roffset, length) tuples (1..RIOV_MAX), "
     "descriptors of the peer engine. notify: a 64-bit value delivered after every byte."},
    {"readmsg", FN(conn_readmsg), KW,
     "readmsg(iov, riov, notify=None, *, block=False)\n\nThe general one-sided read: remote "
     "pieces into local pieces."},
    {NULL, NULL, 0, NULL},
};

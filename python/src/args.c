/* Argument conversion shared by the Conn methods: local ranges and pieces of
 * regions, remote descriptors and pieces, and what a posted request keeps. */
#include "args.h"

#include <string.h>

static int out_of_bounds(const char *what)
{
    upy_raise(UCCL_ERR_OUT_OF_BOUNDS, what);
    return -1;
}

/* length None: from off to the end of a range of total bytes. */
static int range_len(size_t total, Py_ssize_t off, PyObject *length, size_t *len,
                     const char *what)
{
    Py_ssize_t l;
    if (off < 0 || (size_t)off > total)
        return out_of_bounds(what);
    if (!length || length == Py_None) {
        *len = total - (size_t)off;
        return 0;
    }
    if (upy_ssize_arg(length, &l) < 0) /* any __index__ (numpy integers) */
        return -1;
    if (l < 0)
        return out_of_bounds(what);
    *len = (size_t)l;
    return 0;
}

/* key (a str) == name (ASCII): a compact ASCII str holds its characters
 * NUL-terminated right after its header, so one strcmp (session 14: the
 * generic comparison cost about 50 instructions a name, and send(...,
 * block=True) tried five); a str that is not ASCII cannot equal it. */
static int key_is(PyObject *key, const char *name)
{
    if (PyUnicode_IS_COMPACT_ASCII(key))
        return strcmp((const char *)PyUnicode_DATA(key), name) == 0;
    return PyUnicode_CompareWithASCIIString(key, name) == 0;
}

int upy_parse(const upy_sig_t *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
              PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > sig->npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     sig->fn, sig->npos, nargs);
        return -1;
    }
    for (int i = 0; i < sig->n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < sig->n && !key_is(key, sig->names[i]))
            i++;
        if (i == sig->n) {
            PyErr_Format(PyExc_TypeError, "'%U' is an invalid keyword argument for %s()", key,
                         sig->fn);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "argument for %s() given by name ('%s') and position "
                                          "(%d)", sig->fn, sig->names[i], i + 1);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (int i = 0; i < sig->nreq; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)",
                         sig->fn, sig->names[i], i + 1);
            return -1;
        }
    }
    return 0;
}

int upy_ssize_arg(PyObject *o, Py_ssize_t *v)
{
    PyObject *i;
    if (!o)
        return 0;
    if (PyLong_CheckExact(o)) {
        *v = PyLong_AsSsize_t(o);
        return *v == -1 && PyErr_Occurred() ? -1 : 0;
    }
    i = PyNumber_Index(o); /* as PyArg's 'n': any __index__, TypeError otherwise */
    if (!i)
        return -1;
    *v = PyLong_AsSsize_t(i);
    Py_DECREF(i);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

int upy_u64_arg(PyObject *o, unsigned long long *v)
{
    PyObject *i;
    if (!o)
        return 0;
    if (!(i = PyNumber_Index(o)))
        return -1;
    *v = PyLong_AsUnsignedLongLongMask(i);
    Py_DECREF(i);
    return *v == (unsigned long long)-1 && PyErr_Occurred() ? -1 : 0;
}

int upy_bool_arg(PyObject *o, int *v)
{
    if (!o)
        return 0;
    *v = PyObject_IsTrue(o);
    return *v < 0 ? -1 : 0;
}

int upy_local(upy_conn_t *c, PyObject *mr, Py_ssize_t off, PyObject *length, int writable,
              uccl_iov_t *iov, const char *what)
{
    upy_mr_t *m = upy_mr_arg(mr, c->engine, writable);
    if (!m)
        return -1;
    iov->mr = m->mr;
    iov->off = (size_t)off;
    return range_len(m->len, off, length, &iov->len, what);
}

int upy_iov(upy_conn_t *c, PyObject *list, int writable, upy_pieces_t *p, const char *what)
{
    PyObject *seq = PySequence_Fast(list, "iov must be a list of MemoryRegion or "
                                          "(MemoryRegion, offset, length) tuples");
    Py_ssize_t n;
    int rc = -1;
    if (!seq)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > UCCL_IOV_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: 1 to %d local pieces, not %zd", what, UCCL_IOV_MAX,
                     n);
        goto out;
    }
    p->keep = PyTuple_New(n + 1);
    if (!p->keep)
        goto out;
    Py_INCREF(c);
    PyTuple_SET_ITEM(p->keep, 0, (PyObject *)c);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i), *mr = it, *length = Py_None;
        Py_ssize_t off = 0;
        if (PyTuple_Check(it) && !PyArg_ParseTuple(it, "O|nO:iov piece", &mr, &off, &length))
            goto out;
        if (upy_local(c, mr, off, length, writable, &p->iov[i], what) < 0)
            goto out;
        Py_INCREF(mr);
        PyTuple_SET_ITEM(p->keep, i + 1, mr);
    }
    p->iovcnt = (int)n;
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

int upy_rdesc(PyObject *obj, uccl_rdesc_t *rd)
{
    Py_buffer b;
    if (PyBytes_CheckExact(obj) && PyBytes_GET_SIZE(obj) == UCCL_RDESC_SIZE) {
        memcpy(rd->bytes, PyBytes_AS_STRING(obj), UCCL_RDESC_SIZE); /* as descriptor() gives */
        return 0;
    }
    if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "a remote descriptor is 64 bytes, not '%.100s'",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (b.len != UCCL_RDESC_SIZE) {
        PyErr_Format(PyExc_ValueError, "a remote descriptor is 64 bytes, not %zd", b.len);
        PyBuffer_Release(&b);
        return -1;
    }
    memcpy(rd->bytes, b.buf, UCCL_RDESC_SIZE);
    PyBuffer_Release(&b);
    return 0;
}

int upy_riov(PyObject *list, upy_pieces_t *p, const char *what)
{
    PyObject *seq = PySequence_Fast(list, "riov must be a list of descriptors or "
                                          "(descriptor, roffset, length) tuples");
    Py_ssize_t n;
    int rc = -1;
    if (!seq)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > UCCL_RIOV_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: 1 to %d remote pieces, not %zd", what,
                     UCCL_RIOV_MAX, n);
        goto out;
    }
    p->rdesc = PyMem_Malloc((size_t)n * sizeof(*p->rdesc));
    p->riov = PyMem_Malloc((size_t)n * sizeof(*p->riov));
    if (!p->rdesc || !p->riov) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i), *desc = it, *length = Py_None;
        Py_ssize_t roff = 0;
        uccl_rdesc_info_t info;
        uccl_status_t st;
        if (PyTuple_Check(it) && !PyArg_ParseTuple(it, "O|nO:riov piece", &desc, &roff, &length))
            goto out;
        if (upy_rdesc(desc, &p->rdesc[i]) < 0)
            goto out;
        st = uccl_rdesc_info(&p->rdesc[i], &info);
        if (st != UCCL_OK) {
            upy_raise(st, what);
            goto out;
        }
        p->riov[i].rdesc = &p->rdesc[i];
        p->riov[i].roff = (size_t)roff;
        if (range_len((size_t)info.len, roff, length, &p->riov[i].len, what) < 0)
            goto out;
    }
    p->riovcnt = (int)n;
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

void upy_pieces_free(upy_pieces_t *p)
{
    PyMem_Free(p->rdesc);
    PyMem_Free(p->riov);
    Py_CLEAR(p->keep);
}

PyObject *upy_posted(upy_conn_t *c, uccl_status_t st, uccl_req_t *req, PyObject *keep,
                     int block, const char *op)
{
    if (st != UCCL_OK)
        return upy_raise(st, op);
    if (block)
        return upy_req_block(c->engine, req, keep, op);
    return upy_req_new_of(c->engine, req, (PyObject *)c, keep, op);
}

int upy_conn_check(upy_conn_t *c)
{
    if (upy_engine_check(c->engine) < 0)
        return -1;
    if (!c->conn) {
        PyErr_SetString(PyExc_ValueError, "the connection is closed");
        return -1;
    }
    if (c->comm && !c->comm->comm) {
        PyErr_SetString(PyExc_ValueError, "the connection is closed (its Comm is closed)");
        return -1;
    }
    if (c->engine->n_orphans) /* nothing to look at: no call (session 17) */
        upy_engine_reap(c->engine);
    return 0;
}

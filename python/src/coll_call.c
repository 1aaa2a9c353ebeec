/* The argument checks and the posting of uccl.Comm's collectives (coll.h):
 * buffers (MemoryRegions or objects exporting their memory, zero-copy),
 * counts and displacements, algorithm names, the stream= keyword, and the
 * blocking or Request-returning post after the producers' streams. */
#include "coll.h"

#include <stdarg.h>
#include <string.h>

/* The stream= keyword, taken out of the keywords by the method wrappers
 * (PAIR in coll.c) and handed to upy_coll_start of the same call on this
 * thread. */
static _Thread_local struct {
    int has;
    void *stream;
} next_stream;

int upy_coll_bounds(coll_call_t *k, const char *fmt, ...)
{
    char msg[256];
    int n = PyOS_snprintf(msg, sizeof(msg), "%s: ", k->op);
    va_list ap;
    va_start(ap, fmt);
    PyOS_vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    upy_raise(UCCL_ERR_OUT_OF_BOUNDS, msg);
    return -1;
}

/* A buffer argument: None (no bytes), uccl.IN_PLACE (when allowed), a
 * MemoryRegion of this engine, or any object exporting its memory. */
int upy_coll_buf(coll_call_t *k, PyObject *o, int writable, int in_place_ok, coll_buf_t *b)
{
    upy_mr_t *m;
    b->addr = NULL;
    b->len = 0;
    if (o == Py_None)
        return 0;
    if (o == upy_in_place) {
        if (!in_place_ok) {
            PyErr_Format(PyExc_ValueError, "%s: uccl.IN_PLACE is not allowed here", k->op);
            return -1;
        }
        b->addr = UCCL_IN_PLACE;
        return 0;
    }
    if (PyObject_TypeCheck(o, &upy_mr_type)) {
        PyObject *held;
        int added;
        m = upy_mr_arg(o, k->c->engine, writable);
        if (!m || !(held = upy_mr_hold(m)))
            return -1;
        b->addr = m->addr;
        b->len = m->len;
        k->gpu |= m->mem_type != UCCL_MEM_HOST;
        added = PyList_Append(k->keep, held); /* dropped when the call finishes */
        Py_DECREF(held);
        return added;
    } else {
        unsigned long long t0 = UPY_T0();
        upy_mr_t tv;
        /* a torch CUDA tensor (tensor.c): no view object, the call keeps
         * the tensor itself */
        int rc = upy_tensor_view(&tv, o, &k->ord);
        upy_prof_add(UPY_P_TORCH, t0);
        if (rc == 0) {
            upy_prof_add(UPY_P_VIEW, t0);
            b->addr = tv.addr;
            b->len = tv.len;
            k->gpu = 1;
            return PyList_Append(k->keep, o);
        }
        m = upy_mr_view(o, &k->ord);
        upy_prof_add(UPY_P_VIEW, t0);
        if (!m)
            return -1;
        if (writable && m->readonly) {
            Py_DECREF(m);
            PyErr_Format(PyExc_ValueError, "%s: the receive buffer is read-only", k->op);
            return -1;
        }
    }
    b->addr = m->addr;
    b->len = m->len;
    k->gpu |= m->mem_type != UCCL_MEM_HOST;
    if (PyList_Append(k->keep, (PyObject *)m) < 0) {
        Py_DECREF(m);
        return -1;
    }
    Py_DECREF(m);
    return 0;
}

/* n counts (any sequence of ints >= 0, numpy arrays included) times unit;
 * None: NULL (the caller packs). */
int upy_coll_counts(coll_call_t *k, int slot, PyObject *o, size_t unit, const char *what)
{
    PyObject *seq;
    int n = k->c->size;
    size_t *out;
    if (o == Py_None)
        return 0;
    seq = PySequence_Fast(o, "counts and displacements must be sequences of ints");
    if (!seq)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd entries, not %d (the comm's size)", k->op,
                     what, PySequence_Fast_GET_SIZE(seq), n);
        Py_DECREF(seq);
        return -1;
    }
    out = PyMem_Malloc((size_t)n * sizeof(*out));
    if (!out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    k->arrays[slot] = out;
    for (int r = 0; r < n; r++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, r), *idx = PyNumber_Index(it);
        long long v = idx ? PyLong_AsLongLong(idx) : -1;
        Py_XDECREF(idx);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (v < 0 || (unit && (unsigned long long)v > SIZE_MAX / unit)) {
            PyErr_Format(PyExc_ValueError, "%s: %s[%d] = %lld is out of range", k->op, what, r, v);
            Py_DECREF(seq);
            return -1;
        }
        out[r] = (size_t)v * unit;
    }
    Py_DECREF(seq);
    return 0;
}

/* Displacements absent: blocks packed in rank order. */
int upy_coll_packed(coll_call_t *k, int slot, const size_t *counts)
{
    size_t *d = PyMem_Malloc((size_t)k->c->size * sizeof(*d)), off = 0;
    if (!d) {
        PyErr_NoMemory();
        return -1;
    }
    for (int r = 0; r < k->c->size; r++) {
        d[r] = off;
        off += counts[r];
    }
    k->arrays[slot] = d;
    return 0;
}

/* Every block [displs[r], +counts[r]) inside a buffer of len bytes. */
int upy_coll_fits(coll_call_t *k, const size_t *counts, const size_t *displs, size_t len,
                     const char *what)
{
    for (int r = 0; r < k->c->size; r++) {
        if (counts[r] && (displs[r] > len || counts[r] > len - displs[r]))
            return upy_coll_bounds(k, "block %d of %s ([%zu, +%zu)) is outside its %zu bytes",
                                   r, what, displs[r], counts[r], len);
    }
    return 0;
}

void upy_coll_free(coll_call_t *k)
{
    unsigned long long t0 = UPY_T0();
    for (int i = 0; i < 4; i++)
        PyMem_Free(k->arrays[i]);
    Py_CLEAR(k->keep); /* the call's views: DLPack deleters, buffer releases */
    upy_prof_add(UPY_P_FREE, t0);
    upy_prof_add(UPY_P_CALL, k->t0);
}

int upy_coll_start(coll_call_t *k, upy_comm_t *c, const char *op)
{
    memset(k, 0, sizeof(*k));
    k->t0 = UPY_T0();
    k->c = c;
    k->op = op;
    k->has_stream = next_stream.has;
    k->stream = next_stream.stream;
    k->ord.stream_form = k->has_stream;
    k->ord.stream = k->stream;
    next_stream.has = 0;
    if (upy_comm_check(c) < 0)
        return -1;
    if (c->busy) {
        upy_raise(UCCL_ERR_BUSY, "a collective of this Comm is being waited on by another "
                                 "thread (one collective call at a time per Comm)");
        return -1;
    }
    k->keep = PyList_New(1);
    if (!k->keep)
        return -1;
    Py_INCREF(c);
    PyList_SET_ITEM(k->keep, 0, (PyObject *)c);
    return 0;
}

int upy_coll_algo(coll_call_t *k, PyObject *algo, uccl_coll_args_t *a)
{
    const char *name;
    if (!algo || algo == Py_None)
        return 0;
    name = PyUnicode_AsUTF8(algo);
    if (!name)
        return -1;
    if (uccl_coll_algo_parse(name, &a->algo) != UCCL_OK) {
        PyErr_Format(PyExc_ValueError, "%s: unknown algorithm '%s'", k->op, name);
        return -1;
    }
    a->field_mask |= UCCL_COLL_ARG_ALGO;
    return 0;
}

/* Post; then a Request, or (block) wait without the GIL and return None. */
PyObject *upy_coll_run(coll_call_t *k, uccl_coll_args_t *a, int block)
{
    upy_comm_t *c = k->c;
    upy_engine_t *e = c->engine;
    uccl_req_t *req = NULL;
    PyObject *keep = NULL, *res = NULL;
    uccl_status_t st;
    /* GPU objects: after their producers' streams (host-ordered: the host
     * waits for them here; stream form: the stream does) */
    unsigned long long t0 = UPY_T0();
    if (k->ord.n > 0 && upy_order_apply(e, &k->ord) < 0)
        return NULL;
    upy_prof_add(UPY_P_ORDER, t0);
    t0 = UPY_T0();
    if (k->has_stream) /* stream-ordered: never waits, always a Request */
        block = 0;
    if (block) {
        /* libuccl's blocking call, as uccl_perf makes it, without the GIL:
         * the call's own references keep the buffers alive meanwhile; a
         * signal is seen when it returns (a collective that makes no
         * progress fails after UCCL_TIMEOUT_MS) */
        c->busy++;
        e->busy++;
        Py_BEGIN_ALLOW_THREADS
        st = uccl_coll(c->comm, a);
        Py_END_ALLOW_THREADS
        e->busy--;
        c->busy--;
        if (st == UCCL_OK && PyErr_CheckSignals() == 0) {
            Py_INCREF(Py_None);
            res = Py_None;
        }
    } else {
        keep = PyList_AsTuple(k->keep);
        if (!keep)
            return NULL;
        st = k->has_stream ? uccl_coll_post_stream(c->comm, a, k->stream, &req)
                           : uccl_coll_post(c->comm, a, &req);
        if (st == UCCL_OK)
            res = upy_req_new(e, req, keep, k->op);
        /* the stream is held until progress ends the collective: libuccl
         * drives progress from a helper thread meanwhile (uccl_stream_hold) */
    }
    upy_prof_add(UPY_P_COLL, t0);
    if (st != UCCL_OK) {
        char what[160];
        if (st == UCCL_ERR_UNSUPPORTED && k->gpu)
            PyOS_snprintf(what, sizeof(what), "%s on GPU memory: this libuccl's collectives "
                                              "move host memory only", k->op);
        else
            PyOS_snprintf(what, sizeof(what), "%s", k->op);
        upy_raise(st, what);
    }
    Py_XDECREF(keep);
    return res;
}

/* stream= of a call: None (host-ordered), an int (a cudaStream_t or
 * hipStream_t value), or an object with .cuda_stream (torch.cuda.Stream) or
 * .ptr (cupy.cuda.Stream). Returns the keywords without it (a new
 * reference, or NULL with an exception) and sets next_stream. */
PyObject *upy_coll_stream_take(PyObject *kwds)
{
    PyObject *o, *rest;
    next_stream.has = 0;
    if (!kwds || !(o = PyDict_GetItemString(kwds, "stream"))) {
        Py_XINCREF(kwds);
        return kwds;
    }
    rest = PyDict_Copy(kwds);
    if (!rest || PyDict_DelItemString(rest, "stream") < 0 || upy_coll_stream_set(o) < 0) {
        Py_XDECREF(rest);
        return NULL;
    }
    return rest;
}

/* o.name, or NULL without an exception when o has no such attribute (one
 * lookup: a torch stream's .cuda_stream each call, session 12). */
static PyObject *attr_or_null(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

int upy_coll_stream_set(PyObject *o)
{
    PyObject *v = NULL;
    next_stream.has = 0;
    if (!o || o == Py_None)
        return 0;
    if (PyLong_Check(o))
        v = (Py_INCREF(o), o);
    else if ((v = attr_or_null(o, "cuda_stream")) == NULL && !PyErr_Occurred())
        v = attr_or_null(o, "ptr");
    if (!v || !PyLong_Check(v)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "stream: expected None, an int or a CUDA/HIP stream "
                                          "object (torch .cuda_stream, cupy .ptr), got %s",
                         Py_TYPE(o)->tp_name);
        Py_XDECREF(v);
        return -1;
    }
    next_stream.stream = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    if (PyErr_Occurred())
        return -1;
    next_stream.has = 1;
    return 0;
}

void upy_coll_stream_clear(void)
{
    next_stream.has = 0;
}

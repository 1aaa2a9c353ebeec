/* The collectives of uccl.Comm (uccl_coll.h): allgather(v), alltoall(v),
 * bcast, gather, scatter, blocking (GIL released while waiting) and
 * non-blocking (i-prefixed, returning a Request). Buffers are MemoryRegions
 * of the comm's engine or any object with the buffer protocol,
 * __cuda_array_interface__ or __dlpack__ (zero-copy); lengths come from the
 * objects and are checked here, counts and displacements are in bytes, or
 * in units of `unit` bytes. */
#include "upy.h"

#include <stdarg.h>
#include <string.h>

/* One call: the buffers it keeps alive (comm first), and whether any of
 * them is GPU memory (for the message of UCCL_ERR_UNSUPPORTED). */
typedef struct {
    upy_comm_t *c;
    const char *op;
    PyObject *keep; /* list */
    int gpu;
    size_t *arrays[4]; /* counts and displacements, PyMem */
    int has_stream;    /* stream= given: the stream-ordered form */
    void *stream;      /* cudaStream_t / hipStream_t (0 = the legacy default stream) */
    upy_order_t ord;   /* producer streams of the GPU objects to order after */
} coll_call_t;

/* The stream= keyword, taken out of the keywords by the method wrappers
 * (PAIR below) and handed to coll_start of the same call on this thread. */
static _Thread_local struct {
    int has;
    void *stream;
} next_stream;

typedef struct {
    void *addr;
    size_t len;
} coll_buf_t;

static int bounds(coll_call_t *k, const char *fmt, ...)
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
static int coll_buf(coll_call_t *k, PyObject *o, int writable, int in_place_ok, coll_buf_t *b)
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
        m = upy_mr_arg(o, k->c->engine, writable);
        if (!m)
            return -1;
        Py_INCREF(o);
    } else {
        m = upy_mr_view(o, &k->ord);
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
static int coll_counts(coll_call_t *k, int slot, PyObject *o, size_t unit, const char *what)
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
static int coll_packed(coll_call_t *k, int slot, const size_t *counts)
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
static int coll_fits(coll_call_t *k, const size_t *counts, const size_t *displs, size_t len,
                     const char *what)
{
    for (int r = 0; r < k->c->size; r++) {
        if (counts[r] && (displs[r] > len || counts[r] > len - displs[r]))
            return bounds(k, "block %d of %s ([%zu, +%zu)) is outside its %zu bytes", r, what,
                          displs[r], counts[r], len);
    }
    return 0;
}

static void coll_free(coll_call_t *k)
{
    for (int i = 0; i < 4; i++)
        PyMem_Free(k->arrays[i]);
    Py_CLEAR(k->keep);
}

static int coll_start(coll_call_t *k, upy_comm_t *c, const char *op)
{
    memset(k, 0, sizeof(*k));
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

static int coll_algo(coll_call_t *k, PyObject *algo, uccl_coll_args_t *a)
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
static PyObject *coll_run(coll_call_t *k, uccl_coll_args_t *a, int block)
{
    upy_comm_t *c = k->c;
    upy_engine_t *e = c->engine;
    uccl_req_t *req = NULL;
    PyObject *keep = NULL, *res = NULL;
    uccl_status_t st;
    /* GPU objects: after their producers' streams (host-ordered: the host
     * waits for them here; stream form: the stream does) */
    if (k->ord.n > 0 && upy_order_apply(e, &k->ord) < 0)
        return NULL;
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

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyObject *allgather(upy_comm_t *self, PyObject *args, PyObject *kwds, int block)
{
    static char *kwlist[] = {"sendbuf", "recvbuf", "algo", NULL};
    PyObject *so, *ro, *algo = Py_None, *res = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER};
    coll_buf_t s, r;
    coll_call_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O", kwlist, &so, &ro, &algo))
        return NULL;
    if (coll_start(&k, self, block ? "allgather" : "iallgather") < 0 ||
        coll_buf(&k, so, 0, 1, &s) < 0 || coll_buf(&k, ro, 1, 0, &r) < 0 ||
        coll_algo(&k, algo, &a) < 0)
        goto out;
    a.count = s.addr == UCCL_IN_PLACE ? r.len / (size_t)self->size : s.len;
    if (r.len < a.count * (size_t)self->size) {
        bounds(&k, "recvbuf holds %zu bytes, needs %d x %zu", r.len, self->size, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

static PyObject *allgatherv(upy_comm_t *self, PyObject *args, PyObject *kwds, int block)
{
    static char *kwlist[] = {"sendbuf", "recvbuf", "recvcounts", "rdispls", "unit", "algo",
                             NULL};
    PyObject *so, *ro, *rc, *rd = Py_None, *algo = Py_None, *res = NULL;
    Py_ssize_t unit = 1;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHERV};
    coll_buf_t s, r;
    coll_call_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O$nO", kwlist, &so, &ro, &rc, &rd, &unit,
                                     &algo))
        return NULL;
    if (coll_start(&k, self, block ? "allgatherv" : "iallgatherv") < 0 || unit < 0 ||
        coll_buf(&k, so, 0, 1, &s) < 0 || coll_buf(&k, ro, 1, 0, &r) < 0 ||
        coll_algo(&k, algo, &a) < 0 || coll_counts(&k, 0, rc, (size_t)unit, "recvcounts") < 0 ||
        !k.arrays[0] || coll_counts(&k, 1, rd, (size_t)unit, "rdispls") < 0 ||
        (!k.arrays[1] && coll_packed(&k, 1, k.arrays[0]) < 0) ||
        coll_fits(&k, k.arrays[0], k.arrays[1], r.len, "recvbuf") < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: recvcounts are required, unit >= 0", k.op);
        goto out;
    }
    a.count = k.arrays[0][self->rank];
    if (s.addr != UCCL_IN_PLACE && s.len < a.count) {
        bounds(&k, "sendbuf holds %zu bytes, recvcounts[%d] says %zu", s.len, self->rank,
               a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    a.recvcounts = k.arrays[0];
    a.rdispls = k.arrays[1];
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

static PyObject *alltoall(upy_comm_t *self, PyObject *args, PyObject *kwds, int block)
{
    static char *kwlist[] = {"sendbuf", "recvbuf", "algo", NULL};
    PyObject *so, *ro, *algo = Py_None, *res = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLTOALL};
    coll_buf_t s, r;
    coll_call_t k;
    size_t n = (size_t)self->size, src;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$O", kwlist, &so, &ro, &algo))
        return NULL;
    if (coll_start(&k, self, block ? "alltoall" : "ialltoall") < 0 ||
        coll_buf(&k, so, 0, 1, &s) < 0 || coll_buf(&k, ro, 1, 0, &r) < 0 ||
        coll_algo(&k, algo, &a) < 0)
        goto out;
    src = s.addr == UCCL_IN_PLACE ? r.len : s.len;
    if (src % n) {
        bounds(&k, "%s holds %zu bytes, not a multiple of %zu blocks",
               s.addr == UCCL_IN_PLACE ? "recvbuf" : "sendbuf", src, n);
        goto out;
    }
    a.count = src / n;
    if (r.len < a.count * n) {
        bounds(&k, "recvbuf holds %zu bytes, needs %zu x %zu", r.len, n, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

static PyObject *alltoallv(upy_comm_t *self, PyObject *args, PyObject *kwds, int block)
{
    static char *kwlist[] = {"sendbuf", "recvbuf", "sendcounts", "recvcounts", "sdispls",
                             "rdispls", "unit", "algo", NULL};
    PyObject *so, *ro, *sc, *rc, *sd = Py_None, *rd = Py_None, *algo = Py_None, *res = NULL;
    Py_ssize_t unit = 1;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLTOALLV};
    coll_buf_t s, r;
    coll_call_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|OO$nO", kwlist, &so, &ro, &sc, &rc, &sd,
                                     &rd, &unit, &algo))
        return NULL;
    if (coll_start(&k, self, block ? "alltoallv" : "ialltoallv") < 0 || unit < 0 ||
        coll_buf(&k, so, 0, 1, &s) < 0 || coll_buf(&k, ro, 1, 0, &r) < 0 ||
        coll_algo(&k, algo, &a) < 0 || coll_counts(&k, 0, sc, (size_t)unit, "sendcounts") < 0 ||
        coll_counts(&k, 1, rc, (size_t)unit, "recvcounts") < 0 || !k.arrays[0] ||
        !k.arrays[1] || coll_counts(&k, 2, sd, (size_t)unit, "sdispls") < 0 ||
        coll_counts(&k, 3, rd, (size_t)unit, "rdispls") < 0 ||
        (!k.arrays[2] && coll_packed(&k, 2, k.arrays[0]) < 0) ||
        (!k.arrays[3] && coll_packed(&k, 3, k.arrays[1]) < 0) ||
        coll_fits(&k, k.arrays[1], k.arrays[3], r.len, "recvbuf") < 0 ||
        (s.addr != UCCL_IN_PLACE &&
         coll_fits(&k, k.arrays[0], k.arrays[2], s.len, "sendbuf") < 0)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: sendcounts and recvcounts are required, "
                                           "unit >= 0", k.op);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    a.sendcounts = k.arrays[0];
    a.recvcounts = k.arrays[1];
    a.sdispls = k.arrays[2];
    a.rdispls = k.arrays[3];
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

static int root_arg(coll_call_t *k, int root, uccl_coll_args_t *a)
{
    if (root < 0 || root >= k->c->size) {
        PyErr_Format(PyExc_ValueError, "%s: root %d out of range [0, %d)", k->op, root,
                     k->c->size);
        return -1;
    }
    a->root = root;
    a->field_mask |= UCCL_COLL_ARG_ROOT;
    return 0;
}

static PyObject *bcast(upy_comm_t *self, PyObject *args, PyObject *kwds, int block)
{
    static char *kwlist[] = {"buf", "root", "algo", NULL};
    PyObject *bo, *algo = Py_None, *res = NULL;
    int root = 0;
    uccl_coll_args_t a = {.op = UCCL_COLL_BCAST};
    coll_buf_t b;
    coll_call_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|i$O", kwlist, &bo, &root, &algo))
        return NULL;
    if (coll_start(&k, self, block ? "bcast" : "ibcast") < 0 || root_arg(&k, root, &a) < 0 ||
        coll_buf(&k, bo, root != self->rank, 0, &b) < 0 || coll_algo(&k, algo, &a) < 0)
        goto out;
    a.recvbuf = b.addr;
    a.count = b.len;
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

/* gather (scatter = 0) and scatter: the root's big buffer holds size blocks
 * of count bytes; count comes from the small buffer (or, IN_PLACE at the
 * root, from the big one). */
static PyObject *rooted(upy_comm_t *self, PyObject *args, PyObject *kwds, int block, int scatter)
{
    static char *kwlist[] = {"sendbuf", "recvbuf", "root", "algo", NULL};
    PyObject *so = Py_None, *ro = Py_None, *algo = Py_None, *res = NULL;
    int root = 0, at_root;
    uccl_coll_args_t a = {.op = scatter ? UCCL_COLL_SCATTER : UCCL_COLL_GATHER};
    coll_buf_t s, r, *small, *big;
    coll_call_t k;
    size_t n = (size_t)self->size;
    const char *op = scatter ? (block ? "scatter" : "iscatter") : (block ? "gather" : "igather");
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|Oi$O", kwlist, &so, &ro, &root, &algo))
        return NULL;
    if (coll_start(&k, self, op) < 0 || root_arg(&k, root, &a) < 0)
        goto out;
    at_root = root == self->rank;
    if (coll_buf(&k, so, 0, !scatter && at_root, &s) < 0 ||
        coll_buf(&k, ro, 1, scatter && at_root, &r) < 0 || coll_algo(&k, algo, &a) < 0)
        goto out;
    small = scatter ? &r : &s;
    big = scatter ? &s : &r;
    if (small->addr == UCCL_IN_PLACE) {
        if (big->len % n) {
            bounds(&k, "the root's buffer holds %zu bytes, not a multiple of %zu blocks",
                   big->len, n);
            goto out;
        }
        a.count = big->len / n;
    } else {
        a.count = small->len;
    }
    if (at_root && big->len < a.count * n) {
        bounds(&k, "the root's %s holds %zu bytes, needs %zu x %zu",
               scatter ? "sendbuf" : "recvbuf", big->len, n, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = coll_run(&k, &a, block);
out:
    coll_free(&k);
    return res;
}

static PyObject *gather(upy_comm_t *s, PyObject *a, PyObject *k, int block)
{
    return rooted(s, a, k, block, 0);
}

static PyObject *scatter(upy_comm_t *s, PyObject *a, PyObject *k, int block)
{
    return rooted(s, a, k, block, 1);
}

/* stream= of a call: None (host-ordered), an int (a cudaStream_t or
 * hipStream_t value), or an object with .cuda_stream (torch.cuda.Stream) or
 * .ptr (cupy.cuda.Stream). Returns the keywords without it (a new
 * reference, or NULL with an exception) and sets next_stream. */
static PyObject *stream_take(PyObject *kwds)
{
    PyObject *o, *v = NULL, *rest;
    next_stream.has = 0;
    if (!kwds || !(o = PyDict_GetItemString(kwds, "stream"))) {
        Py_XINCREF(kwds);
        return kwds;
    }
    rest = PyDict_Copy(kwds);
    if (!rest || PyDict_DelItemString(rest, "stream") < 0) {
        Py_XDECREF(rest);
        return NULL;
    }
    if (o == Py_None)
        return rest;
    if (PyLong_Check(o))
        v = (Py_INCREF(o), o);
    else if (PyObject_HasAttrString(o, "cuda_stream"))
        v = PyObject_GetAttrString(o, "cuda_stream");
    else if (PyObject_HasAttrString(o, "ptr"))
        v = PyObject_GetAttrString(o, "ptr");
    if (!v || !PyLong_Check(v)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "stream: expected None, an int or a CUDA/HIP stream "
                                          "object (torch .cuda_stream, cupy .ptr), got %s",
                         Py_TYPE(o)->tp_name);
        Py_XDECREF(v);
        Py_DECREF(rest);
        return NULL;
    }
    next_stream.stream = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    if (PyErr_Occurred()) {
        Py_DECREF(rest);
        return NULL;
    }
    next_stream.has = 1;
    return rest;
}

static PyObject *with_stream(PyObject *(*fn)(upy_comm_t *, PyObject *, PyObject *, int),
                             upy_comm_t *s, PyObject *a, PyObject *k, int block)
{
    PyObject *rest = stream_take(k), *res;
    if (!rest && PyErr_Occurred())
        return NULL;
    res = fn(s, a, rest, block);
    next_stream.has = 0;
    Py_XDECREF(rest);
    return res;
}

#define PAIR(name)                                                                       \
    static PyObject *m_##name(upy_comm_t *s, PyObject *a, PyObject *k)                   \
    {                                                                                    \
        return with_stream(name, s, a, k, 1);                                            \
    }                                                                                    \
    static PyObject *m_i##name(upy_comm_t *s, PyObject *a, PyObject *k)                  \
    {                                                                                    \
        return with_stream(name, s, a, k, 0);                                            \
    }
PAIR(allgather)
PAIR(allgatherv)
PAIR(alltoall)
PAIR(alltoallv)
PAIR(bcast)
PAIR(gather)
PAIR(scatter)

#define NB "\n\nThe i-form posts the collective and returns a uccl.Request; the plain form " \
           "waits without the GIL and returns None. algo: an algorithm name ('ring', ...). " \
           "stream: a CUDA/HIP stream (torch.cuda.Stream, cupy Stream or an int): the " \
           "stream-ordered form, which starts after the work queued on that stream, holds " \
           "the stream's later work until it is done, and returns a Request at once in " \
           "both forms (the binding drives progress from a thread of its own meanwhile). " \
           "Array objects (not MemoryRegions) are ordered after their producer's stream " \
           "(__cuda_array_interface__ v3 'stream', DLPack's stream handshake): the host " \
           "waits for it, or with stream= that stream does."
#define DEF(name, sig, doc)                                                              \
    {#name, FN(m_##name), KW, #name sig "\n\n" doc NB},                                   \
    {"i" #name, FN(m_i##name), KW, "i" #name sig " -> Request\n\n" doc NB}

PyMethodDef upy_coll_methods[] = {
    DEF(allgather, "(sendbuf, recvbuf, *, algo=None, stream=None)",
        "Every rank's sendbuf, in rank order, into recvbuf (size x len(sendbuf) bytes). "
        "sendbuf may be uccl.IN_PLACE (own block already in recvbuf)."),
    DEF(allgatherv,
        "(sendbuf, recvbuf, recvcounts, rdispls=None, *, unit=1, algo=None, stream=None)",
        "Rank r's recvcounts[r] bytes land at rdispls[r] of recvbuf (None: packed). Counts "
        "and displacements are in units of `unit` bytes."),
    DEF(alltoall, "(sendbuf, recvbuf, *, algo=None, stream=None)",
        "Block r of sendbuf (len/size bytes each) goes to rank r; block r of recvbuf comes "
        "from rank r. sendbuf may be uccl.IN_PLACE."),
    DEF(alltoallv, "(sendbuf, recvbuf, sendcounts, recvcounts, sdispls=None, rdispls=None, *, "
                   "unit=1, algo=None, stream=None)",
        "sendcounts[r] units from sdispls[r] go to rank r, recvcounts[r] units from rank r "
        "land at rdispls[r] (displacements None: packed). sendbuf may be uccl.IN_PLACE."),
    DEF(bcast, "(buf, root=0, *, algo=None, stream=None)",
        "The root's buf into every rank's buf."),
    DEF(gather, "(sendbuf, recvbuf=None, root=0, *, algo=None, stream=None)",
        "Every rank's sendbuf into the root's recvbuf, in rank order (recvbuf only at the "
        "root; sendbuf uccl.IN_PLACE at the root)."),
    DEF(scatter, "(sendbuf, recvbuf, root=0, *, algo=None, stream=None)",
        "Block r of the root's sendbuf into rank r's recvbuf (sendbuf only at the root; "
        "recvbuf uccl.IN_PLACE at the root)."),
    {NULL, NULL, 0, NULL},
};

/* The collectives of uccl.Comm (uccl_coll.h): allgather(v), alltoall(v),
 * bcast, gather, scatter, blocking (GIL released while waiting) and
 * non-blocking (i-prefixed, returning a Request). Buffers are MemoryRegions
 * of the comm's engine or any object with the buffer protocol,
 * __cuda_array_interface__ or __dlpack__ (zero-copy); lengths come from the
 * objects and are checked here, counts and displacements are in bytes, or
 * in units of `unit` bytes. */
#include "args.h"
#include "coll.h"

#define KW (METH_VARARGS | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))

/* allgather and alltoall(sendbuf, recvbuf, *, algo=None, stream=None):
 * fast-call methods (the object path's per-call cost: no argument tuple, no
 * keyword dict, no format parsing) */
static const char *const pair_names[] = {"sendbuf", "recvbuf", "algo", "stream"};

static PyObject *allgather(upy_comm_t *self, PyObject *so, PyObject *ro, PyObject *algo,
                           int block)
{
    PyObject *res = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLGATHER};
    coll_buf_t s, r;
    coll_call_t k;
    if (upy_coll_start(&k, self, block ? "allgather" : "iallgather") < 0 ||
        upy_coll_buf(&k, so, 0, 1, &s) < 0 || upy_coll_buf(&k, ro, 1, 0, &r) < 0 ||
        upy_coll_algo(&k, algo, &a) < 0)
        goto out;
    a.count = s.addr == UCCL_IN_PLACE ? r.len / (size_t)self->size : s.len;
    if (r.len < a.count * (size_t)self->size) {
        upy_coll_bounds(&k, "recvbuf holds %zu bytes, needs %d x %zu", r.len, self->size, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
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
    if (upy_coll_start(&k, self, block ? "allgatherv" : "iallgatherv") < 0 || unit < 0 ||
        upy_coll_buf(&k, so, 0, 1, &s) < 0 || upy_coll_buf(&k, ro, 1, 0, &r) < 0 ||
        upy_coll_algo(&k, algo, &a) < 0 ||
        upy_coll_counts(&k, 0, rc, (size_t)unit, "recvcounts") < 0 ||
        !k.arrays[0] || upy_coll_counts(&k, 1, rd, (size_t)unit, "rdispls") < 0 ||
        (!k.arrays[1] && upy_coll_packed(&k, 1, k.arrays[0]) < 0) ||
        upy_coll_fits(&k, k.arrays[0], k.arrays[1], r.len, "recvbuf") < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: recvcounts are required, unit >= 0", k.op);
        goto out;
    }
    a.count = k.arrays[0][self->rank];
    if (s.addr != UCCL_IN_PLACE && s.len < a.count) {
        upy_coll_bounds(&k, "sendbuf holds %zu bytes, recvcounts[%d] says %zu", s.len, self->rank,
                        a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    a.recvcounts = k.arrays[0];
    a.rdispls = k.arrays[1];
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
    return res;
}

static PyObject *alltoall(upy_comm_t *self, PyObject *so, PyObject *ro, PyObject *algo,
                          int block)
{
    PyObject *res = NULL;
    uccl_coll_args_t a = {.op = UCCL_COLL_ALLTOALL};
    coll_buf_t s, r;
    coll_call_t k;
    size_t n = (size_t)self->size, src;
    if (upy_coll_start(&k, self, block ? "alltoall" : "ialltoall") < 0 ||
        upy_coll_buf(&k, so, 0, 1, &s) < 0 || upy_coll_buf(&k, ro, 1, 0, &r) < 0 ||
        upy_coll_algo(&k, algo, &a) < 0)
        goto out;
    src = s.addr == UCCL_IN_PLACE ? r.len : s.len;
    if (src % n) {
        upy_coll_bounds(&k, "%s holds %zu bytes, not a multiple of %zu blocks",
                        s.addr == UCCL_IN_PLACE ? "recvbuf" : "sendbuf", src, n);
        goto out;
    }
    a.count = src / n;
    if (r.len < a.count * n) {
        upy_coll_bounds(&k, "recvbuf holds %zu bytes, needs %zu x %zu", r.len, n, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
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
    if (upy_coll_start(&k, self, block ? "alltoallv" : "ialltoallv") < 0 || unit < 0 ||
        upy_coll_buf(&k, so, 0, 1, &s) < 0 || upy_coll_buf(&k, ro, 1, 0, &r) < 0 ||
        upy_coll_algo(&k, algo, &a) < 0 ||
        upy_coll_counts(&k, 0, sc, (size_t)unit, "sendcounts") < 0 ||
        upy_coll_counts(&k, 1, rc, (size_t)unit, "recvcounts") < 0 || !k.arrays[0] ||
        !k.arrays[1] || upy_coll_counts(&k, 2, sd, (size_t)unit, "sdispls") < 0 ||
        upy_coll_counts(&k, 3, rd, (size_t)unit, "rdispls") < 0 ||
        (!k.arrays[2] && upy_coll_packed(&k, 2, k.arrays[0]) < 0) ||
        (!k.arrays[3] && upy_coll_packed(&k, 3, k.arrays[1]) < 0) ||
        upy_coll_fits(&k, k.arrays[1], k.arrays[3], r.len, "recvbuf") < 0 ||
        (s.addr != UCCL_IN_PLACE &&
         upy_coll_fits(&k, k.arrays[0], k.arrays[2], s.len, "sendbuf") < 0)) {
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
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
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
    if (upy_coll_start(&k, self, block ? "bcast" : "ibcast") < 0 || root_arg(&k, root, &a) < 0 ||
        upy_coll_buf(&k, bo, root != self->rank, 0, &b) < 0 || upy_coll_algo(&k, algo, &a) < 0)
        goto out;
    a.recvbuf = b.addr;
    a.count = b.len;
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
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
    if (upy_coll_start(&k, self, op) < 0 || root_arg(&k, root, &a) < 0)
        goto out;
    at_root = root == self->rank;
    if (upy_coll_buf(&k, so, 0, !scatter && at_root, &s) < 0 ||
        upy_coll_buf(&k, ro, 1, scatter && at_root, &r) < 0 || upy_coll_algo(&k, algo, &a) < 0)
        goto out;
    small = scatter ? &r : &s;
    big = scatter ? &s : &r;
    if (small->addr == UCCL_IN_PLACE) {
        if (big->len % n) {
            upy_coll_bounds(&k, "the root's buffer holds %zu bytes, not a multiple of %zu blocks",
                            big->len, n);
            goto out;
        }
        a.count = big->len / n;
    } else {
        a.count = small->len;
    }
    if (at_root && big->len < a.count * n) {
        upy_coll_bounds(&k, "the root's %s holds %zu bytes, needs %zu x %zu",
                        scatter ? "sendbuf" : "recvbuf", big->len, n, a.count);
        goto out;
    }
    a.sendbuf = s.addr;
    a.recvbuf = r.addr;
    res = upy_coll_run(&k, &a, block);
out:
    upy_coll_free(&k);
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

static PyObject *with_stream(PyObject *(*fn)(upy_comm_t *, PyObject *, PyObject *, int),
                             upy_comm_t *s, PyObject *a, PyObject *k, int block)
{
    PyObject *rest = upy_coll_stream_take(k), *res;
    if (!rest && PyErr_Occurred())
        return NULL;
    res = fn(s, a, rest, block);
    upy_coll_stream_clear();
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
/* The fast-call pair of a (sendbuf, recvbuf, *, algo, stream) collective. */
static PyObject *fast_pair(PyObject *(*fn)(upy_comm_t *, PyObject *, PyObject *, PyObject *, int),
                           const char *name, upy_comm_t *s, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames, int block)
{
    const upy_sig_t sig = {name, pair_names, 4, 2, 2};
    PyObject *a[4], *res;
    if (upy_parse(&sig, args, nargs, kwnames, a) < 0 || upy_coll_stream_set(a[3]) < 0)
        return NULL;
    res = fn(s, a[0], a[1], a[2], block);
    upy_coll_stream_clear();
    return res;
}

#define FAST_PAIR(name)                                                                  \
    static PyObject *m_##name(upy_comm_t *s, PyObject *const *a, Py_ssize_t n, PyObject *kw) \
    {                                                                                    \
        return fast_pair(name, #name, s, a, n, kw, 1);                                   \
    }                                                                                    \
    static PyObject *m_i##name(upy_comm_t *s, PyObject *const *a, Py_ssize_t n, PyObject *kw) \
    {                                                                                    \
        return fast_pair(name, "i" #name, s, a, n, kw, 0);                               \
    }
FAST_PAIR(allgather)
PAIR(allgatherv)
FAST_PAIR(alltoall)
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
#define DEFF(name, sig, doc, flags)                                                      \
    {#name, FN(m_##name), flags, #name sig "\n\n" doc NB},                                \
    {"i" #name, FN(m_i##name), flags, "i" #name sig " -> Request\n\n" doc NB}
#define DEF(name, sig, doc) DEFF(name, sig, doc, KW)
#define FAST (METH_FASTCALL | METH_KEYWORDS)

PyMethodDef upy_coll_methods[] = {
    DEFF(allgather, "(sendbuf, recvbuf, *, algo=None, stream=None)",
         "Every rank's sendbuf, in rank order, into recvbuf (size x len(sendbuf) bytes). "
         "sendbuf may be uccl.IN_PLACE (own block already in recvbuf).", FAST),
    DEF(allgatherv,
        "(sendbuf, recvbuf, recvcounts, rdispls=None, *, unit=1, algo=None, stream=None)",
        "Rank r's recvcounts[r] bytes land at rdispls[r] of recvbuf (None: packed). Counts "
        "and displacements are in units of `unit` bytes."),
    DEFF(alltoall, "(sendbuf, recvbuf, *, algo=None, stream=None)",
         "Block r of sendbuf (len/size bytes each) goes to rank r; block r of recvbuf comes "
         "from rank r. sendbuf may be uccl.IN_PLACE.", FAST),
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

/* uccl.Conn's batch forms: send_many, recv_many, write_many, read_many. One
 * Python call posts a list of operations, each entry the positional
 * arguments of the one-operation method, and returns their Requests: the
 * per-operation cost of a window (a method call, argument parsing, a Python
 * loop) is paid once per list (session 13: a window of 16 one-by-one calls
 * cost 0.2-0.36 us an operation over C's loop).
 *
 * Two phases. Every entry is checked first, with the GIL: regions (live, of
 * this engine, writable where they receive), local ranges, descriptors and
 * remote ranges; a bad entry raises ("write_many: entry 3: ...") and nothing
 * of the list is posted. Then the whole list is posted with the GIL
 * released once. A failure only libuccl sees (a stale descriptor, a failed
 * connection) stops the posting there: the exception says which entry, and
 * its .requests holds the Requests of the entries before it, which were
 * posted and run on (the GIL is kept where no other thread could take it,
 * upy_gil_alone). group=True returns one Request for the whole list
 * (req.c: a group of libuccl requests, waited with one uccl_wait_all), so a
 * window costs one Python object instead of one per operation. While a list is posted, MemoryRegion.release and
 * Conn.close from other threads raise uccl.BusyError (the regions cannot go:
 * this call holds them). */
#include "args.h"

#include <string.h>

enum { OP_SEND = UPY_OP_SEND, OP_RECV = UPY_OP_RECV, OP_WRITE = UPY_OP_WRITE,
       OP_READ = UPY_OP_READ };
/* for messages: op, or op + UPY_OP_INIT (prep.c's Conn.*_init) */
static const char *const op_names[] = {"send_many", "recv_many", "write_many", "read_many",
                                       "send_init", "recv_init", "write_init", "read_init"};
static const char *const req_names[] = {"send", "recv", "write", "read"};

typedef upy_entry_t entry_t;

#define STACK_ENTRIES 32

/* The pending exception, its message prefixed with "op: entry i: " (same
 * type; the status attributes of a uccl.Error are on its class). */
static int entry_error(int op, Py_ssize_t i)
{
    PyObject *type, *value, *tb, *msg;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    msg = value ? PyObject_Str(value) : NULL;
    if (msg)
        PyErr_Format(type, "%s: entry %zd: %U", op_names[op], i, msg);
    else
        PyErr_Restore(type, value, tb), type = value = tb = NULL;
    Py_XDECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
}

static int out_of_bounds(int op, Py_ssize_t i, const char *which)
{
    char what[96];
    snprintf(what, sizeof(what), "%s: entry %zd: %s", op_names[op], i, which);
    upy_raise(UCCL_ERR_OUT_OF_BOUNDS, what);
    return -1;
}

static int shape_error(int op, Py_ssize_t i, PyObject *it)
{
    static const char *const shapes[] = {
        "a MemoryRegion or a tuple (mr[, offset[, length[, tag]]])",
        "a MemoryRegion or a tuple (mr[, offset[, length[, tag]]])",
        "a tuple (mr, desc[, offset[, length[, roffset]]])",
        "a tuple (mr, desc[, offset[, length[, roffset]]])",
    };
    PyErr_Format(PyExc_TypeError, "%s: entry %zd: expected %s, got '%.100s'", op_names[op], i,
                 shapes[op & 3], Py_TYPE(it)->tp_name);
    return -1;
}

/* [off, off + length) within total bytes (length absent or None: to the end). */
static int range(size_t total, PyObject *off_o, PyObject *len_o, size_t *off, size_t *len,
                 int op, Py_ssize_t i, const char *which)
{
    int has_len = len_o && len_o != Py_None;
    Py_ssize_t o = 0, l = 0;
    if (upy_ssize_arg(off_o, &o) < 0 || (has_len && upy_ssize_arg(len_o, &l) < 0))
        return entry_error(op, i);
    if (o < 0 || (size_t)o > total || l < 0)
        return out_of_bounds(op, i, which);
    *off = (size_t)o;
    *len = has_len ? (size_t)l : total - (size_t)o;
    if (*len > total - *off)
        return out_of_bounds(op, i, which);
    return 0;
}

/* Descriptor obj's bytes and remote length. The connection remembers the
 * last descriptor it decoded (session 14: a window's list names the same
 * one each time, and uccl_rdesc_info checks and decodes all of it; the
 * same 64 bytes decode the same, and a stale one still fails where libuccl
 * posts it). */
static int rdesc_of(upy_conn_t *c, PyObject *obj, uccl_rdesc_t *rd, uint64_t *len, int op,
                    Py_ssize_t i)
{
    uccl_rdesc_info_t info;
    uccl_status_t st;
    if (upy_rdesc(obj, rd) < 0)
        return entry_error(op, i);
    if (c->rd_valid && memcmp(rd->bytes, c->rd.bytes, UCCL_RDESC_SIZE) == 0) {
        upy_rdesc_hits++;
        *len = c->rd_len;
        return 0;
    }
    st = uccl_rdesc_info(rd, &info);
    if (st != UCCL_OK) {
        char what[64];
        snprintf(what, sizeof(what), "%s: entry %zd", op_names[op], i);
        upy_raise(st, what);
        return -1;
    }
    *len = info.len;
    c->rd = *rd;
    c->rd_len = info.len;
    c->rd_valid = 1;
    return 0;
}

/* List item i into *en (en->m strong on success). prev: the entry parsed
 * before (NULL for the first), whose descriptor object *desc_seen is
 * reused when this one names the same. */
static int parse_entry(upy_conn_t *c, int op, Py_ssize_t i, PyObject *it, entry_t *en,
                       const entry_t *prev, PyObject **desc_seen)
{
    int kind = op & 3, rma = kind >= OP_WRITE, writable = kind == OP_RECV || kind == OP_READ;
    PyObject *f[5] = {NULL, NULL, NULL, NULL, NULL}; /* the entry's fields */
    Py_ssize_t n = 1;
    upy_mr_t *m;
    if (PyTuple_Check(it)) {
        n = PyTuple_GET_SIZE(it);
        if (n < 1 + rma || n > 4 + rma)
            return shape_error(op, i, it);
        for (Py_ssize_t k = 0; k < n; k++)
            f[k] = PyTuple_GET_ITEM(it, k);
    } else if (!rma && PyObject_TypeCheck(it, &upy_mr_type)) {
        f[0] = it;
    } else {
        return shape_error(op, i, it);
    }
    if (!(m = upy_mr_arg(f[0], c->engine, writable)))
        return entry_error(op, i);
    en->tag = 0;
    en->roff = 0;
    en->rlen = 0;
    if (!rma) {
        if (range(m->len, f[1], f[2], &en->off, &en->len, op, i,
                  "offset/length past the region") < 0)
            return -1;
        if (upy_u64_arg(f[3], &en->tag) < 0)
            return entry_error(op, i);
    } else {
        uint64_t rlen = 0;
        size_t roff, rest;
        if (range(m->len, f[2], f[3], &en->off, &en->len, op, i,
                  "offset/length past the region") < 0)
            return -1;
        if (prev && f[1] == *desc_seen) {
            en->rd = prev->rd;
            rlen = prev->rlen;
        } else if (rdesc_of(c, f[1], &en->rd, &rlen, op, i) < 0) {
            return -1;
        }
        en->rlen = rlen;
        if (range((size_t)rlen, f[4], NULL, &roff, &rest, op, i,
                  "roffset past the remote range") < 0)
            return -1;
        if (en->len > rest)
            return out_of_bounds(op, i, "roffset+length past the remote range");
        en->roff = roff;
        *desc_seen = f[1];
    }
    Py_INCREF(m);
    en->m = m;
    return 0;
}

PyObject *upy_ops_seq(PyObject *ops, int op)
{
    return PySequence_Fast(ops, (op & 3) >= OP_WRITE ? "ops must be a list of (mr, desc[, offset[, "
                                                      "length[, roffset]]]) tuples"
                                                    : "ops must be a list of MemoryRegions or (mr[, "
                                                      "offset[, length[, tag]]]) tuples");
}

int upy_entries(upy_conn_t *c, int op, PyObject *seq, entry_t *en, Py_ssize_t *at,
                Py_ssize_t *u)
{
    PyObject *desc_seen = NULL;
    *u = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (i > 0 && it == PySequence_Fast_GET_ITEM(seq, i - 1)) {
            at[i] = *u - 1;
            continue;
        }
        if (parse_entry(c, op, i, it, &en[*u], *u ? &en[*u - 1] : NULL, &desc_seen) < 0) {
            for (Py_ssize_t k = 0; k < *u; k++)
                Py_DECREF(en[k].m);
            *u = 0;
            return -1;
        }
        at[i] = (*u)++;
    }
    return 0;
}

uccl_status_t upy_entry_post(uccl_conn_t *conn, int op, const entry_t *en, uccl_req_t **req)
{
    switch (op & 3) {
    case OP_SEND: return uccl_send(conn, en->m->mr, en->off, en->len, en->tag, req);
    case OP_RECV: return uccl_recv(conn, en->m->mr, en->off, en->len, en->tag, req);
    case OP_WRITE:
        return uccl_write(conn, en->m->mr, en->off, en->len, &en->rd, en->roff, req);
    default: return uccl_read(conn, en->m->mr, en->off, en->len, &en->rd, en->roff, req);
    }
}

/* Post the n operations in order (operation i: entry en[at[i]]) until one
 * fails (*st): how many were posted. */
static Py_ssize_t post_all(uccl_conn_t *conn, int op, const entry_t *en, const Py_ssize_t *at,
                           uccl_req_t **reqs, Py_ssize_t n, uccl_status_t *st)
{
    Py_ssize_t i = 0;
    for (*st = UCCL_OK; i < n; i++)
        if ((*st = upy_entry_post(conn, op, &en[at[i]], &reqs[i])) != UCCL_OK)
            break;
    return i;
}

/* Requests of the first n entries (posted) into a new list; a Request that
 * cannot be made leaves its operation to finish in the background. */
static PyObject *wrap(upy_conn_t *c, int op, const entry_t *en, const Py_ssize_t *at,
                      uccl_req_t **reqs, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = list ? upy_req_new_of(c->engine, reqs[i], (PyObject *)c,
                                            (PyObject *)en[at[i]].m, req_names[op])
                           : NULL;
        if (!r) {
            if (list) /* the rest: orphans too */
                Py_CLEAR(list);
            else
                upy_engine_orphan(c->engine, reqs[i], (PyObject *)en[at[i]].m);
            continue;
        }
        PyList_SET_ITEM(list, i, r);
    }
    return list;
}

/* group=True: one Request for the n posted requests of the u entries en,
 * keeping the connection and the regions (each once where entries in a row
 * name one). */
static PyObject *wrap_group(upy_conn_t *c, int op, const entry_t *en, const Py_ssize_t *at,
                            Py_ssize_t u, uccl_req_t **reqs, Py_ssize_t n)
{
    uccl_req_t **g = n ? PyMem_Malloc((size_t)n * sizeof(*g)) : NULL;
    PyObject *keep = NULL;
    Py_ssize_t d = 1;
    upy_req_t *r;
    if (n == 0) { /* nothing to wait for: a finished Request of 0 bytes */
        r = (upy_req_t *)upy_req_new_of(c->engine, NULL, NULL, NULL, req_names[op]);
        if (r) {
            r->done = 1;
            r->status = UCCL_OK;
        }
        return (PyObject *)r;
    }
    for (Py_ssize_t i = 1; i < u; i++)
        d += en[i].m != en[i - 1].m;
    if (g)
        keep = PyTuple_New(d + 1);
    if (!g || !keep) { /* cannot track them: let them finish in the background */
        for (Py_ssize_t i = 0; i < n; i++)
            upy_engine_orphan(c->engine, reqs[i], (PyObject *)en[at[i]].m);
        PyMem_Free(g);
        Py_XDECREF(keep);
        return PyErr_NoMemory();
    }
    Py_INCREF(c);
    PyTuple_SET_ITEM(keep, 0, (PyObject *)c);
    d = 0;
    for (Py_ssize_t i = 0; i < u; i++) {
        if (i == 0 || en[i].m != en[i - 1].m) {
            Py_INCREF(en[i].m);
            PyTuple_SET_ITEM(keep, ++d, (PyObject *)en[i].m);
        }
    }
    memcpy(g, reqs, (size_t)n * sizeof(*g));
    r = (upy_req_t *)upy_req_new_group(c->engine, g, (size_t)n, (PyObject *)c, keep,
                                       req_names[op]);
    Py_DECREF(keep);
    return (PyObject *)r;
}

/* The failed post of entry k: raise its status, the Requests of entries
 * 0..k-1 (posted) in the exception's .requests. */
static PyObject *post_failed(upy_conn_t *c, int op, const entry_t *en, const Py_ssize_t *at,
                             uccl_req_t **reqs, Py_ssize_t k, uccl_status_t st)
{
    PyObject *posted = wrap(c, op, en, at, reqs, k), *type, *value, *tb;
    char what[128];
    snprintf(what, sizeof(what), "%s: entry %zd (entries before it were posted: the "
             "exception's .requests)", op_names[op], k);
    if (!posted)
        return NULL;
    upy_raise(st, what);
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value)
        PyObject_SetAttrString(value, "requests", posted);
    PyErr_Restore(type, value, tb);
    Py_DECREF(posted);
    return NULL;
}

static PyObject *post_many(upy_conn_t *c, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, int op)
{
    static const char *const names[] = {"ops", "group"};
    static const upy_sig_t sigs[] = {{"send_many", names, 2, 1, 1}, {"recv_many", names, 2, 1, 1},
                                     {"write_many", names, 2, 1, 1}, {"read_many", names, 2, 1, 1}};
    PyObject *a[2], *ops;
    int group = 0;
    /* en: the distinct entries (an item that is the same object as the one
     * before it, as in [args] * n, is parsed once: at[i] says which entry
     * list item i is) */
    entry_t stack_en[STACK_ENTRIES], *en = stack_en;
    Py_ssize_t stack_at[STACK_ENTRIES], *at = stack_at;
    uccl_req_t *stack_req[STACK_ENTRIES], **reqs = stack_req;
    PyObject *seq, *res = NULL;
    Py_ssize_t n, u = 0, posted = 0;
    uccl_status_t st = UCCL_OK;
    if (upy_parse(&sigs[op], args, nargs, kwnames, a) < 0 || upy_bool_arg(a[1], &group) < 0 ||
        upy_conn_check(c) < 0)
        return NULL;
    ops = a[0];
    seq = upy_ops_seq(ops, op);
    if (!seq)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > STACK_ENTRIES) {
        en = PyMem_Malloc((size_t)n * sizeof(*en));
        at = PyMem_Malloc((size_t)n * sizeof(*at));
        reqs = PyMem_Malloc((size_t)n * sizeof(*reqs));
        if (!en || !at || !reqs) {
            PyErr_NoMemory();
            goto out;
        }
    }
    if (upy_entries(c, op, seq, en, at, &u) < 0)
        goto out;
    /* Every region is held (en[].m); release and close wait for this. */
    c->engine->busy++;
    c->engine->posting++;
    if (upy_gil_alone()) { /* nobody to let run (session 14) */
        upy_gil_kept++;
        posted = post_all(c->conn, op, en, at, reqs, n, &st);
    } else {
        upy_gil_released++;
        Py_BEGIN_ALLOW_THREADS
        posted = post_all(c->conn, op, en, at, reqs, n, &st);
        Py_END_ALLOW_THREADS
    }
    c->engine->posting--;
    c->engine->busy--;
    if (st != UCCL_OK)
        res = post_failed(c, op, en, at, reqs, posted, st);
    else
        res = group ? wrap_group(c, op, en, at, u, reqs, n) : wrap(c, op, en, at, reqs, n);
out:
    for (Py_ssize_t i = 0; i < u; i++)
        Py_DECREF(en[i].m);
    if (en != stack_en)
        PyMem_Free(en);
    if (at != stack_at)
        PyMem_Free(at);
    if (reqs != stack_req)
        PyMem_Free(reqs);
    Py_DECREF(seq);
    return res;
}

static PyObject *conn_send_many(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return post_many(self, args, nargs, kwnames, OP_SEND);
}

static PyObject *conn_recv_many(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return post_many(self, args, nargs, kwnames, OP_RECV);
}

static PyObject *conn_write_many(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return post_many(self, args, nargs, kwnames, OP_WRITE);
}

static PyObject *conn_read_many(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return post_many(self, args, nargs, kwnames, OP_READ);
}

/* send_init/recv_init/write_init/read_init(ops): prep.c */
static PyObject *init(upy_conn_t *c, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      int op)
{
    static const char *const names[] = {"ops"};
    static const upy_sig_t sigs[] = {{"send_init", names, 1, 1, 1}, {"recv_init", names, 1, 1, 1},
                                     {"write_init", names, 1, 1, 1}, {"read_init", names, 1, 1, 1}};
    PyObject *ops;
    if (upy_parse(&sigs[op], args, nargs, kwnames, &ops) < 0)
        return NULL;
    return upy_prep_new(c, ops, op);
}

static PyObject *conn_send_init(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return init(self, args, nargs, kwnames, OP_SEND);
}

static PyObject *conn_recv_init(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return init(self, args, nargs, kwnames, OP_RECV);
}

static PyObject *conn_write_init(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    return init(self, args, nargs, kwnames, OP_WRITE);
}

static PyObject *conn_read_init(upy_conn_t *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return init(self, args, nargs, kwnames, OP_READ);
}

#define FAST (METH_FASTCALL | METH_KEYWORDS)
#define FN(f) ((PyCFunction)(void (*)(void))(f))
#define MANY_DOC                                                                            \
    "Every entry is checked first; a bad one raises (the message names the entry) and "    \
    "nothing of the list is posted. The list is then posted with the GIL released once. "  \
    "A failure only the library sees stops the posting at that entry: the exception's "    \
    ".requests holds the Requests of the entries before it (posted). An entry that is the " \
    "same object as the one before it ([args] * n) is read once. Wait with "                \
    "uccl.wait_all(requests). group=True: one Request for the whole list (finished when "   \
    "all are, nbytes their sum, its error the first in order): one object a list."

#define INIT_DOC                                                                            \
    "A bad entry raises here (the message names it). The regions, the connection and the " \
    "parsed entries (descriptors decoded once) are kept until close(): a loop that moves "  \
    "the same ranges every time then parses nothing and makes no object per round "          \
    "(MPI_Send_init / MPI_Start's pattern)."

PyMethodDef upy_conn_many_methods[] = {
    {"send_many", FN(conn_send_many), FAST,
     "send_many(ops, *, group=False) -> list[Request] | Request\n\nPost one send per entry of ops, in order: each a "
     "MemoryRegion or a tuple (mr[, offset[, length[, tag]]]) of send()'s arguments. " MANY_DOC},
    {"recv_many", FN(conn_recv_many), FAST,
     "recv_many(ops, *, group=False) -> list[Request] | Request\n\nPost one receive per entry of ops, in order: each a "
     "MemoryRegion or a tuple (mr[, offset[, length[, tag]]]) of recv()'s arguments. " MANY_DOC},
    {"write_many", FN(conn_write_many), FAST,
     "write_many(ops, *, group=False) -> list[Request] | Request\n\nPost one write per entry of ops, in order: each a "
     "tuple (mr, desc[, offset[, length[, roffset]]]) of write()'s arguments. " MANY_DOC},
    {"read_many", FN(conn_read_many), FAST,
     "read_many(ops, *, group=False) -> list[Request] | Request\n\nPost one read per entry of ops, in order: each a "
     "tuple (mr, desc[, offset[, length[, roffset]]]) of read()'s arguments. " MANY_DOC},
    {"send_init", FN(conn_send_init), FAST,
     "send_init(ops) -> PersistentRequest\n\nsend_many's list, checked once, as a "
     "PersistentRequest: start() posts the sends, wait() finishes them, again and again. "
     INIT_DOC},
    {"recv_init", FN(conn_recv_init), FAST,
     "recv_init(ops) -> PersistentRequest\n\nrecv_many's list, checked once, as a "
     "PersistentRequest: start() posts the receives, wait() finishes them. " INIT_DOC},
    {"write_init", FN(conn_write_init), FAST,
     "write_init(ops) -> PersistentRequest\n\nwrite_many's list, checked once, as a "
     "PersistentRequest: start() posts the writes, wait() finishes them. " INIT_DOC},
    {"read_init", FN(conn_read_init), FAST,
     "read_init(ops) -> PersistentRequest\n\nread_many's list, checked once, as a "
     "PersistentRequest: start() posts the reads, wait() finishes them. " INIT_DOC},
    {NULL, NULL, 0, NULL},
};

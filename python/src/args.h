/* Argument conversion shared by the Conn methods (args.c). */
#ifndef UCCL_PY_ARGS_H
#define UCCL_PY_ARGS_H

#include "upy.h"

/* Local and remote pieces of one call, and the tuple (conn, regions...)
 * its request keeps alive. */
typedef struct {
    uccl_iov_t iov[UCCL_IOV_MAX];
    int iovcnt;
    uccl_rdesc_t *rdesc; /* riovcnt copies, PyMem */
    uccl_riov_t *riov;
    int riovcnt;
    PyObject *keep;
} upy_pieces_t;

/* The arguments of a METH_FASTCALL | METH_KEYWORDS method, without
 * PyArg_ParseTupleAndKeywords' format parsing on every call: names are the
 * n parameters in order, the first npos may be positional (the rest are
 * keyword-only), the first nreq are required. out[i] is the argument
 * (borrowed) or NULL when absent. -1 + TypeError as CPython words it. */
typedef struct {
    const char *fn;           /* "write", for messages */
    const char *const *names; /* n names */
    int n, npos, nreq;
} upy_sig_t;
int upy_parse(const upy_sig_t *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
              PyObject **out);
/* o absent (NULL): *v unchanged; else an int (__index__) into *v. */
int upy_ssize_arg(PyObject *o, Py_ssize_t *v);
int upy_u64_arg(PyObject *o, unsigned long long *v); /* 'K': masked */
int upy_bool_arg(PyObject *o, int *v);               /* 'p' */

int upy_conn_check(upy_conn_t *c);
/* [off, off+length) of region mr (length None: to its end) into *iov. */
int upy_local(upy_conn_t *c, PyObject *mr, Py_ssize_t off, PyObject *length, int writable,
              uccl_iov_t *iov, const char *what);
int upy_iov(upy_conn_t *c, PyObject *list, int writable, upy_pieces_t *p, const char *what);
int upy_riov(PyObject *list, upy_pieces_t *p, const char *what);
int upy_rdesc(PyObject *obj, uccl_rdesc_t *rd);
void upy_pieces_free(upy_pieces_t *p);
/* After posting: raise st, or return a Request (keeping c and keep: the
 * pieces' tuple, or the one region) / the blocking result. */
PyObject *upy_posted(upy_conn_t *c, uccl_status_t st, uccl_req_t *req, PyObject *keep,
                     int block, const char *op);

/* conn_many.c: the entries of a list of operations (Conn.*_many, and the
 * persistent Conn.*_init of prep.c). op: UPY_OP_*, plus UPY_OP_INIT for
 * the *_init names in messages. */
enum { UPY_OP_SEND, UPY_OP_RECV, UPY_OP_WRITE, UPY_OP_READ, UPY_OP_INIT = 4 };
typedef struct {
    upy_mr_t *m; /* strong */
    size_t off, len, roff;
    unsigned long long tag;
    uccl_rdesc_t rd;
    uint64_t rlen; /* the remote range's length (write, read) */
} upy_entry_t;
/* Every item of seq (PySequence_Fast) checked and parsed: en[0..*u) the
 * distinct entries (an item that is the same object as the one before it
 * is the entry before; at[i]: item i's entry), each en[].m strong. -1 with
 * an exception naming the item, nothing held. */
/* ops as a PySequence_Fast (new reference), or NULL with a TypeError
 * naming the item forms op takes. */
PyObject *upy_ops_seq(PyObject *ops, int op);
int upy_entries(upy_conn_t *c, int op, PyObject *seq, upy_entry_t *en, Py_ssize_t *at,
                Py_ssize_t *u);
/* Post one entry (op & 3: UPY_OP_SEND...). */
uccl_status_t upy_entry_post(uccl_conn_t *conn, int op, const upy_entry_t *en,
                             uccl_req_t **req);

/* prep.c: uccl.PersistentRequest, a list of operations parsed once
 * (Conn.send_init / recv_init / write_init / read_init) and posted again
 * and again (start, then wait). */
typedef struct {
    PyObject_HEAD
    upy_conn_t *conn;     /* strong; NULL once closed */
    int op;               /* UPY_OP_SEND... */
    int started;          /* a start() posted something */
    int starting;         /* a start() is posting without the GIL */
    int waiting;          /* a wait runs on reqs: as upy_req_t's */
    Py_ssize_t n;         /* operations */
    upy_entry_t *ops;     /* n (PyMem); ops[].m borrowed from keep */
    PyObject *keep;       /* tuple (conn, the distinct regions...) */
    uccl_req_t **reqs;    /* n (PyMem): the last start()'s while in flight */
    Py_ssize_t nposted;   /* > 0: started, not yet seen finished */
    size_t len_sum;       /* the lengths' sum: the bytes of a send, write, read */
    uccl_status_t status; /* the last finished start()'s */
    size_t nbytes;
    PyObject *result;     /* the last result's int (the same object while equal) */
    size_t result_n;      /* its value */
    PyObject *weakrefs;
} upy_prep_t;
extern PyTypeObject upy_prep_type;
PyObject *upy_prep_new(upy_conn_t *c, PyObject *ops, int op); /* Conn.*_init */
int upy_prep_start(upy_prep_t *p);                             /* -1 + exception */
/* Wait up to ms (-2: no limit): 1 finished (or nothing in flight), 0 still
 * running, -1 error set (not started, interrupted). */
int upy_prep_wait_ms(upy_prep_t *p, long long ms);
/* The same two with upy_gil_alone()'s answer carried in *alone (-1: not
 * known yet; see upy_wait_many_alone): PersistentGroup's calls ask once. */
int upy_prep_start_alone(upy_prep_t *p, int *alone);
int upy_prep_wait_alone(upy_prep_t *p, long long ms, int *alone);
/* After a uccl_wait_all of its requests with others (uccl.wait_all) that
 * returned st: finished, when they all are. */
void upy_prep_after_wait(upy_prep_t *p, uccl_status_t st);
PyObject *upy_prep_result(upy_prep_t *p); /* the bytes, or raise the error */
PyObject *upy_start_all(PyObject *self, PyObject *arg);
/* pgroup.c: uccl.PersistentGroup, PersistentRequests started and waited
 * as one (session 16). */
extern PyTypeObject upy_pgroup_type;

#endif /* UCCL_PY_ARGS_H */

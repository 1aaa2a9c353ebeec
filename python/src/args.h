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

#endif /* UCCL_PY_ARGS_H */

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

int upy_conn_check(upy_conn_t *c);
/* [off, off+length) of region mr (length None: to its end) into *iov. */
int upy_local(upy_conn_t *c, PyObject *mr, Py_ssize_t off, PyObject *length, int writable,
              uccl_iov_t *iov, const char *what);
int upy_iov(upy_conn_t *c, PyObject *list, int writable, upy_pieces_t *p, const char *what);
int upy_riov(PyObject *list, upy_pieces_t *p, const char *what);
int upy_rdesc(PyObject *obj, uccl_rdesc_t *rd);
void upy_pieces_free(upy_pieces_t *p);
PyObject *upy_keep2(upy_conn_t *c, PyObject *mr);
/* After posting: raise st, or return a Request / the blocking result. */
PyObject *upy_posted(upy_conn_t *c, uccl_status_t st, uccl_req_t *req, PyObject *keep,
                     int block, const char *op);

#endif /* UCCL_PY_ARGS_H */

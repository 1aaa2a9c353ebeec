/* The call state shared by the collectives of uccl.Comm (coll.c, the
 * methods) and their argument checks and posting (coll_call.c). */
#ifndef UCCL_PY_COLL_H
#define UCCL_PY_COLL_H

#include "upy.h"

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
    unsigned long long t0; /* UPY_T0() at the start (the breakdown's "call") */
} coll_call_t;

typedef struct {
    void *addr;
    size_t len;
} coll_buf_t;

/* Start a call of comm c (-1 + exception): takes the stream= that
 * upy_coll_stream_take set for it on this thread. */
int upy_coll_start(coll_call_t *k, upy_comm_t *c, const char *op);
void upy_coll_free(coll_call_t *k);
/* UCCL_ERR_OUT_OF_BOUNDS with "op: message"; -1. */
int upy_coll_bounds(coll_call_t *k, const char *fmt, ...);
/* A buffer argument: None (no bytes), uccl.IN_PLACE (when allowed), a
 * MemoryRegion of this engine, or any object exporting its memory. */
int upy_coll_buf(coll_call_t *k, PyObject *o, int writable, int in_place_ok, coll_buf_t *b);
/* n counts (any sequence of ints >= 0) times unit into k->arrays[slot];
 * None: NULL (the caller packs). */
int upy_coll_counts(coll_call_t *k, int slot, PyObject *o, size_t unit, const char *what);
/* Displacements absent: blocks packed in rank order. */
int upy_coll_packed(coll_call_t *k, int slot, const size_t *counts);
/* Every block [displs[r], +counts[r]) inside a buffer of len bytes. */
int upy_coll_fits(coll_call_t *k, const size_t *counts, const size_t *displs, size_t len,
                  const char *what);
int upy_coll_algo(coll_call_t *k, PyObject *algo, uccl_coll_args_t *a);
/* Post; then a Request, or (block) wait without the GIL and return None. */
PyObject *upy_coll_run(coll_call_t *k, uccl_coll_args_t *a, int block);
/* The keywords without stream= (a new reference, or NULL + exception);
 * the stream goes to the next upy_coll_start on this thread. */
PyObject *upy_coll_stream_take(PyObject *kwds);
/* The same for the stream= argument o itself (NULL or None: none). */
int upy_coll_stream_set(PyObject *o);
void upy_coll_stream_clear(void);

#endif /* UCCL_PY_COLL_H */

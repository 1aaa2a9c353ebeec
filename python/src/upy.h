/* Private declarations of the uccl._uccl extension: the object layouts of
 * Engine, Conn, MemoryRegion and Request and the helpers they share.
 * Built on the public headers (include/uccl/) and the CPython API only. */
#ifndef UCCL_PY_UCCL_H
#define UCCL_PY_UCCL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <uccl/uccl.h>

/* A request dropped while still in flight: the library finishes it in the
 * background, so what it reads or writes must stay alive until then. */
typedef struct {
    uccl_req_t *req;
    PyObject *keep; /* tuple of the objects the request uses */
} upy_orphan_t;

typedef struct {
    PyObject_HEAD
    uccl_engine_t *engine; /* NULL once closed */
    PyObject *address;     /* bytes, cached */
    int busy;              /* calls running without the GIL */
    int posting;           /* Conn.*_many posting without the GIL: regions and
                            * connections cannot be released or closed */
    int n_comms;           /* open Comms on this engine: it cannot close before them */
    upy_orphan_t *orphans;
    size_t n_orphans, cap_orphans;
    PyObject *weakrefs;
} upy_engine_t;

struct upy_comm;

typedef struct {
    PyObject_HEAD
    upy_engine_t *engine; /* strong */
    uccl_conn_t *conn;    /* NULL once closed */
    struct upy_comm *comm; /* strong; set: the Comm owns the connection */
    PyObject *weakrefs;
    /* conn_many.c: the last descriptor a write/read list decoded (the same
     * 64 bytes decode the same) */
    int rd_valid;
    uccl_rdesc_t rd;
    uint64_t rd_len;
} upy_conn_t;

#include <uccl/uccl_coll.h>

/* uccl.Comm: a libuccl communicator (uccl_coll.h) on an Engine object. */
typedef struct upy_comm {
    PyObject_HEAD
    upy_engine_t *engine; /* strong */
    uccl_comm_t *comm;    /* NULL once closed */
    int owns_engine;      /* made by the Comm: closed with it */
    int busy;             /* collectives waited on without the GIL */
    int rank, size;
    PyObject *weakrefs;
} upy_comm_t;

/* Where the registered memory came from, and what to release with it. */
enum { UPY_SRC_BUFFER = 1, UPY_SRC_CAI = 2, UPY_SRC_DLPACK = 3, UPY_SRC_TENSOR = 4 };

typedef struct {
    PyObject_HEAD
    upy_engine_t *engine; /* strong */
    uccl_mr_t *mr;        /* NULL once released */
    int source;           /* UPY_SRC_* (0 once released) */
    Py_buffer view;       /* UPY_SRC_BUFFER */
    PyObject *obj;        /* the registered object (kept alive) */
    PyObject *capsule;    /* UPY_SRC_DLPACK: the consumed capsule */
    void *addr;
    size_t len;
    int readonly;
    uccl_mem_type_t mem_type;
    int device;
    int holds;            /* collectives in flight given this region (upy_mr_hold) */
    PyObject *weakrefs;
} upy_mr_t;

typedef struct {
    PyObject_HEAD
    upy_engine_t *engine; /* strong */
    uccl_req_t *req;      /* NULL once freed; a group: group[0] */
    uccl_req_t **group;   /* a group (Conn.*_many(group=True)): its ngroup
                           * requests (PyMem), one Request for all; else NULL */
    size_t ngroup;
    PyObject *keep;       /* tuple (connection, regions...), or the one region of a
                           * Conn operation; dropped when done */
    PyObject *owner;      /* the Conn of a Conn operation (strong), else NULL */
    int done;
    int waiting;          /* a wait runs on its libuccl requests (maybe without the
                           * GIL): it alone finishes and frees them (test() from
                           * another thread says False, a second wait raises
                           * uccl.BusyError) */
    uccl_status_t status;
    size_t nbytes;
    const char *op;       /* for messages: "send", "write", ... */
} upy_req_t;

extern PyTypeObject upy_engine_type;
extern PyTypeObject upy_conn_type;
extern PyTypeObject upy_mr_type;
extern PyTypeObject upy_req_type;
extern PyTypeObject upy_comm_type;
extern PyObject *upy_in_place; /* uccl.IN_PLACE */

/* errors.c: raise the exception class mapped from status ("what: text"). */
PyObject *upy_raise(uccl_status_t status, const char *what);
int upy_errors_init(PyObject *module);

/* engine.c */
int upy_engine_check(upy_engine_t *e);       /* -1 + ValueError when closed */
void upy_engine_orphan(upy_engine_t *e, uccl_req_t *req, PyObject *keep);
void upy_engine_reap(upy_engine_t *e);
/* Seconds (None = no limit) to milliseconds; -2 = no limit. -1 + error. */
int upy_timeout_ms(PyObject *timeout, long long *ms);
/* req.c: CLOCK_MONOTONIC in seconds (the deadlines of waits over several). */
double upy_now_s(void);
/* Session 14: 1 while this thread is the only one that could take the
 * GIL (one interpreter, one thread state: a thread that wants the GIL
 * makes its thread state first, PyGILState_Ensure included). Releasing
 * the GIL then lets nobody run and costs a drop and a take (2 of them a
 * window of send_many and its wait); 0 on free-threaded builds. */
int upy_gil_alone(void);
/* Counts of the per-window shortcuts (session 14): waits and list posts
 * that kept the GIL (alone) and that released it, list entries whose
 * descriptor was the connection's last one; _fast_stats(reset=False). */
extern unsigned long long upy_gil_kept, upy_gil_released, upy_rdesc_hits;
extern unsigned long long upy_gil_asks; /* upy_gil_alone() calls (session 17) */
PyObject *upy_fast_stats(PyObject *self, PyObject *args, PyObject *kwds);
/* Wait for req without the GIL, in slices that let signals through (with
 * the GIL while upy_gil_alone(), in 1 ms slices that look again).
 * Returns the request's status or UCCL_ERR_TIMEOUT; -1000 = a Python
 * exception is set (a signal handler raised). */
#define UPY_WAIT_INTERRUPTED ((uccl_status_t)-1000)
uccl_status_t upy_wait(upy_engine_t *e, uccl_req_t *req, long long ms);
/* The same for n requests of engine e at once (uccl_wait_all). */
uccl_status_t upy_wait_many(upy_engine_t *e, uccl_req_t **reqs, size_t n, long long ms);
/* The same with *alone, upy_gil_alone()'s answer when >= 0 (-1: not known),
 * used for the first slice instead of asking again; set to the last answer
 * (session 17: a call that waits and then posts asks once, not per step). */
uccl_status_t upy_wait_many_alone(upy_engine_t *e, uccl_req_t **reqs, size_t n, long long ms,
                                  int *alone);

/* The producer streams a call on GPU objects orders after: the CUDA array
 * interface v3 'stream' of each object, or the stream DLPack's handshake
 * named (coll.c collects them through upy_mr_view; order.c applies them). */
#define UPY_ORDER_MAX 8
typedef struct {
    int stream_form; /* 1: the call runs on stream (stream=); 0: host-ordered */
    void *stream;
    int n;
    void *after[UPY_ORDER_MAX];
    int tdev_set;     /* tensor.c: torch's current stream on device tdev, */
    long long tdev;   /* read once per call */
    void *tstream;
} upy_order_t;
/* Host-ordered: wait (GIL released) until every producer stream has run
 * what it queued; stream form: make the call's stream wait for each
 * (an event, a hold released by progress), the host waits for nothing.
 * -1 with an exception set. */
int upy_order_apply(upy_engine_t *e, upy_order_t *ord);
/* A producer stream the call must order after (once each). */
void upy_order_add(upy_order_t *ord, void *stream);
/* CUDA's legacy default stream has two names (0 and cudaStreamLegacy = 1). */
void *upy_stream_norm(void *s);
/* After a stream-ordered call on stream: engine progress from a native
 * thread until the stream has passed it (-1 + exception). Stop (joins the
 * thread) before the engine is destroyed. */

/* mr.c: a live region of engine e (TypeError / ValueError otherwise). */
upy_mr_t *upy_mr_arg(PyObject *obj, upy_engine_t *e, int need_writable);
PyObject *upy_mr_register(upy_engine_t *e, PyObject *obj, int local_only);
/* The memory of obj without registering it (engine NULL, mr NULL): addr,
 * len, readonly, a mem_type hint; the view keeps obj (and its buffer) alive.
 * ord (may be NULL): a GPU object goes through DLPack's stream handshake
 * when it has one, and its producer stream is added to ord. */
upy_mr_t *upy_mr_view(PyObject *obj, upy_order_t *ord);
/* A collective's hold on region m (new reference): the collective reaches
 * the memory by address, which libuccl cannot see in use, so release()
 * raises uccl.BusyError until the last hold is dropped with what the call
 * keeps. */
extern PyTypeObject upy_mr_hold_type;
PyObject *upy_mr_hold(upy_mr_t *m);

/* req.c: wrap a posted request (steals req; keep is borrowed, may be NULL:
 * a tuple (owner, regions...) or one region). */
PyObject *upy_req_new(upy_engine_t *e, uccl_req_t *req, PyObject *keep, const char *op);
/* The same for an operation of connection owner (borrowed; kept alive). */
PyObject *upy_req_new_of(upy_engine_t *e, uccl_req_t *req, PyObject *owner, PyObject *keep,
                         const char *op);
/* The blocking form: wait, free, return the byte count (or raise). */
PyObject *upy_req_block(upy_engine_t *e, uccl_req_t *req, PyObject *keep, const char *op);
/* One Request for the n posted requests of reqs (a PyMem array it takes,
 * n >= 1), of connection owner, keeping keep (a tuple (owner, regions...))
 * alive: finished when all are, nbytes their sum, its error the first in
 * order. On failure every request is left to finish in the background. */
PyObject *upy_req_new_group(upy_engine_t *e, uccl_req_t **reqs, size_t n, PyObject *owner,
                            PyObject *keep, const char *op);
PyObject *upy_wait_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames); /* METH_FASTCALL | METH_KEYWORDS */

/* comm.c */
int upy_comm_check(upy_comm_t *c); /* -1 + ValueError when closed */
int upy_comm_type_init(void);      /* joins comm.c and coll.c methods */

/* conn.c; comm: the owner of conn (NULL: the Conn owns it) */
PyObject *upy_conn_new(upy_engine_t *e, uccl_conn_t *conn, upy_comm_t *comm);
int upy_conn_type_init(void); /* joins conn.c, conn_rma.c and conn_many.c methods */

/* prof.c: the time breakdown of a collective's object path (off unless
 * uccl._uccl._profile(True)); UPY_T0() is 0 while off, and adding a 0
 * start does nothing. */
enum {
    UPY_P_CALL, UPY_P_VIEW, UPY_P_TORCH, UPY_P_DLDEV, UPY_P_DLPACK, UPY_P_CAI,
    UPY_P_ORDER, UPY_P_EVENT, UPY_P_WAIT, UPY_P_COLL, UPY_P_FREE, UPY_P_N
};
extern int upy_prof_on;
unsigned long long upy_prof_now(void);
void upy_prof_add(int stage, unsigned long long t0);
#define UPY_T0() (upy_prof_on ? upy_prof_now() : 0ull)
PyObject *upy_prof(PyObject *self, PyObject *args, PyObject *kwds);

/* bench.c: uccl_perf's point-to-point loop in C (python -m uccl.bench). */
PyObject *upy_p2p_loop(PyObject *self, PyObject *args);
PyObject *upy_p2p_loop_split(PyObject *self, PyObject *unused);
PyObject *upy_stream_query_cost(PyObject *self, PyObject *args);

/* tensor.c: a torch CUDA tensor's memory and producer stream from torch's
 * own C-level methods, without DLPack's handshake (the collectives' object
 * path): 0 done, 1 not such a tensor or a case left to DLPack, -1 error. */
int upy_tensor_view(upy_mr_t *m, PyObject *obj, upy_order_t *ord);
/* _tensor_cache(clear=False) -> (hits, misses, live entries): the tensors
 * remembered by the fast path (tests). */
PyObject *upy_tensor_cache(PyObject *self, PyObject *args, PyObject *kwds);

#endif /* UCCL_PY_UCCL_H */

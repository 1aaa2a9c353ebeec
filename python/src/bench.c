/* uccl._uccl._p2p_loop: uccl_perf's point-to-point pattern (tools/uccl_perf.c,
 * uccl_window / uccl_phase) in C, on the connection, regions and descriptor
 * of the calling Python process, for python -m uccl.bench: the C side and the
 * Python side of the comparison then run in one process, on one connection
 * and one buffer, interleaved, so that only the binding differs (separate
 * processes differ by placement and page layout more than by the binding).
 * The GIL is released for the whole loop. Not a public API. */
#include "args.h"

#include <string.h>
#include <time.h>

enum { TAG_DATA = 1, TAG_ACK = 2, TAG_FIN = 3 };
enum { OP_SEND, OP_WRITE, OP_READ };
#define LOOP_WINDOW_MAX 1024
#define IDLE_SPIN_S 1e-3 /* as uccl_perf's idle_wait */
#define IDLE_PAUSE_MIN_NS 10000L
#define IDLE_PAUSE_MAX_NS 1000000L

typedef struct {
    uccl_engine_t *engine;
    uccl_conn_t *conn;
    uccl_mr_t *mr, *ctl;
    uccl_rdesc_t desc;
    size_t size;
    int op, rank, window, iters;
    uccl_req_t *reqs[LOOP_WINDOW_MAX + 1];
} loop_t;

/* Where rank 0's windows spent their time (session 12): posting the data
 * transfers, and waiting for the window (uccl_wait_all and the frees), in
 * seconds, summed over the last _p2p_loop (_p2p_loop_split). Two clock
 * reads a window. */
static double split_post, split_wait;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uccl_status_t wait_free(loop_t *l, int n)
{
    uccl_status_t st = uccl_wait_all(l->reqs, (size_t)n, -1);
    for (int i = 0; i < n; i++)
        uccl_req_free(l->reqs[i]);
    return st;
}

static uccl_status_t ctl_msg(loop_t *l, int send, uint64_t tag)
{
    uccl_status_t st = send ? uccl_send(l->conn, l->ctl, 0, 0, tag, &l->reqs[0])
                            : uccl_recv(l->conn, l->ctl, 0, 0, tag, &l->reqs[0]);
    return st != UCCL_OK ? st : wait_free(l, 1);
}

static uccl_status_t post_data(loop_t *l, uccl_req_t **req)
{
    switch (l->op) {
    case OP_SEND:
        return l->rank == 0 ? uccl_send(l->conn, l->mr, 0, l->size, TAG_DATA, req)
                            : uccl_recv(l->conn, l->mr, 0, l->size, TAG_DATA, req);
    case OP_WRITE: return uccl_write(l->conn, l->mr, 0, l->size, &l->desc, 0, req);
    default: return uccl_read(l->conn, l->mr, 0, l->size, &l->desc, 0, req);
    }
}

/* One window: as uccl_perf's uccl_window. */
static uccl_status_t window(loop_t *l)
{
    uccl_status_t st = UCCL_OK;
    int n = 0;
    double t0 = now_s(), t1;
    if (l->rank == 0 && l->op == OP_SEND)
        st = uccl_recv(l->conn, l->ctl, 0, 0, TAG_ACK, &l->reqs[n++]);
    for (int i = 0; st == UCCL_OK && i < l->window; i++)
        if ((st = post_data(l, &l->reqs[n])) == UCCL_OK)
            n++;
    if (st != UCCL_OK) { /* what was posted still completes before it is freed */
        wait_free(l, n);
        return st;
    }
    t1 = now_s();
    split_post += t1 - t0;
    st = wait_free(l, n);
    split_wait += now_s() - t1;
    if (st == UCCL_OK && l->rank == 1)
        st = ctl_msg(l, 1, TAG_ACK);
    return st;
}

/* The passive rank of a one-sided loop: progress while the engine has work,
 * else asleep, until the fin (uccl_perf's idle_wait). */
static uccl_status_t await_fin(loop_t *l)
{
    uccl_req_t *req = NULL;
    uccl_status_t st = uccl_recv(l->conn, l->ctl, 0, 0, TAG_FIN, &req);
    double last = now_s();
    long pause = 0;
    while (st == UCCL_OK) {
        int events = uccl_engine_progress(l->engine), done = 0;
        double t = now_s();
        st = uccl_test(req, &done);
        if (done || st < 0)
            break;
        st = UCCL_OK;
        if (events > 0) {
            last = t;
            pause = 0;
            continue;
        }
        if (t - last < IDLE_SPIN_S)
            continue;
        pause = pause == 0 ? IDLE_PAUSE_MIN_NS : pause * 2;
        if (pause > IDLE_PAUSE_MAX_NS)
            pause = IDLE_PAUSE_MAX_NS;
        nanosleep(&(struct timespec){.tv_nsec = pause}, NULL);
    }
    if (req)
        uccl_req_free(req);
    return st;
}

static uccl_status_t run(loop_t *l, double *secs)
{
    uccl_status_t st = UCCL_OK;
    double t0 = now_s();
    *secs = 0;
    if (l->rank == 1 && l->op != OP_SEND)
        return await_fin(l);
    for (int i = 0; st == UCCL_OK && i < l->iters; i++)
        st = window(l);
    *secs = now_s() - t0;
    if (st == UCCL_OK && l->rank == 0 && l->op != OP_SEND)
        st = ctl_msg(l, 1, TAG_FIN);
    return st;
}

static int region(PyObject *o, upy_engine_t *e, uccl_mr_t **out)
{
    upy_mr_t *m;
    *out = NULL;
    if (o == Py_None)
        return 0;
    m = upy_mr_arg(o, e, 0);
    if (!m)
        return -1;
    *out = m->mr;
    return 0;
}

/* _p2p_loop(conn, op, rank, mr, ctl, desc, size, window, iters) -> seconds:
 * rank 0 (the initiator) times iters windows of window transfers of size
 * bytes from offset 0 of mr (op 'send', 'write' or 'read'); rank 1 receives
 * and acks each window (send) or idles until rank 0's fin (write, read; its
 * result is 0.0). ctl: the region of the 0-byte acks and fin (None: no
 * region); desc: the peer's descriptor (write, read; else None). The caller
 * aligns the ranks first (a barrier), as uccl_perf does. */
PyObject *upy_p2p_loop(PyObject *self, PyObject *args)
{
    PyObject *conn_o, *mr_o, *ctl_o, *desc_o;
    const char *op;
    Py_ssize_t size;
    upy_conn_t *c;
    loop_t *l;
    uccl_status_t st;
    double secs = 0;
    int rank, win, iters;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!siOOOnii:_p2p_loop", &upy_conn_type, &conn_o, &op, &rank,
                          &mr_o, &ctl_o, &desc_o, &size, &win, &iters))
        return NULL;
    l = PyMem_Calloc(1, sizeof(*l));
    if (!l)
        return PyErr_NoMemory();
    c = (upy_conn_t *)conn_o;
    l->rank = rank;
    l->window = win;
    l->iters = iters;
    l->op = !strcmp(op, "send") ? OP_SEND : !strcmp(op, "write") ? OP_WRITE
            : !strcmp(op, "read") ? OP_READ : -1;
    if (l->op < 0 || (l->rank != 0 && l->rank != 1) || size < 0 || l->window < 1 ||
        l->window > LOOP_WINDOW_MAX || l->iters < 0) {
        PyErr_SetString(PyExc_ValueError, "_p2p_loop: op send|write|read, rank 0|1, size >= 0, "
                                          "1 <= window <= 1024, iters >= 0");
        goto fail;
    }
    if (!c->conn || upy_engine_check(c->engine) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "the connection is closed");
        goto fail;
    }
    if (region(mr_o, c->engine, &l->mr) < 0 || region(ctl_o, c->engine, &l->ctl) < 0 ||
        (l->op != OP_SEND && upy_rdesc(desc_o, &l->desc) < 0))
        goto fail;
    if (!l->mr) {
        PyErr_SetString(PyExc_TypeError, "_p2p_loop: mr must be a MemoryRegion");
        goto fail;
    }
    l->engine = c->engine->engine;
    l->conn = c->conn;
    l->size = (size_t)size;
    split_post = split_wait = 0;
    /* the objects stay alive: the caller holds them for the call */
    c->engine->busy++;
    Py_BEGIN_ALLOW_THREADS
    st = run(l, &secs);
    Py_END_ALLOW_THREADS
    c->engine->busy--;
    PyMem_Free(l);
    if (st != UCCL_OK)
        return upy_raise(st, "_p2p_loop");
    return PyFloat_FromDouble(secs);
fail:
    PyMem_Free(l);
    return NULL;
}

/* _p2p_loop_split() -> (post_s, wait_s): the last _p2p_loop's split. */
PyObject *upy_p2p_loop_split(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(dd)", split_post, split_wait);
}

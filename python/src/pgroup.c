/* uccl.PersistentGroup (session 16): PersistentRequests of one engine
 * started and waited as one, by one call each.
 *
 * uccl.start_all(reqs) and uccl.wait_all(reqs) take any sequence each
 * call: they make it a PySequence_Fast, check every item's type, parse
 * wait_all's arguments, gather the items' requests into an array and
 * return a new list of results. A loop that starts and waits the same
 * requests every round pays that every round; the group checks them once
 * and keeps a C array for the requests of all its members.
 *
 * Two forms:
 * - together (chain=False): start() starts every member in order (as
 *   start_all), wait() waits for all of them with one uccl_wait_all (as
 *   wait_all); the sender of a window and its ack's receive.
 * - chain=True: start() starts the first member; wait() waits for each
 *   member in order and starts the next one when the one before it
 *   finished without error; a receiver's window and then its ack.
 * wait() returns the bytes of all members summed, or raises the first
 * member's error in order; wait_start() is wait() and then start() in one
 * call, the steady state of a loop that repeats its transfers. The members
 * stay usable on their own while the group is not started. One thread at a
 * time waits on a group (another's wait() raises uccl.BusyError: the
 * first one frees the requests when they finish). */
#include "args.h"

typedef struct {
    PyObject_HEAD
    PyObject *members;    /* tuple of PersistentRequests */
    upy_engine_t *engine; /* strong: the members' engine */
    int chain;
    int progress;         /* start() ends with a round of the engine's progress */
    int state;            /* 0 not started, 1 started, 2 finished */
    int waiting;          /* a wait() runs (maybe without the GIL) */
    Py_ssize_t cur;       /* chain: the member running; together: members started */
    uccl_req_t **reqs;    /* together: room for every member's operations (PyMem) */
    uccl_status_t status; /* finished: the first error in order, else UCCL_OK */
    size_t nbytes;
    PyObject *result;     /* the last result's int (the same object while equal) */
    size_t result_n;
    PyObject *weakrefs;
} upy_pgroup_t;

#define MEMBER(g, i) ((upy_prep_t *)PyTuple_GET_ITEM((g)->members, (i)))

/* Every item of tup a PersistentRequest, open, once, of one engine (*eng,
 * borrowed); *total: their operations. -1 + exception naming the item. */
static int pgroup_check(PyObject *tup, upy_engine_t **eng, Py_ssize_t *total)
{
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "PersistentGroup: requests must hold at least one "
                                          "uccl.PersistentRequest");
        return -1;
    }
    *eng = NULL;
    *total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(tup, i);
        upy_prep_t *p = (upy_prep_t *)o;
        if (!PyObject_TypeCheck(o, &upy_prep_type)) {
            PyErr_Format(PyExc_TypeError, "PersistentGroup: expected uccl.PersistentRequest, "
                         "got '%.100s' (item %zd)", Py_TYPE(o)->tp_name, i);
            return -1;
        }
        if (!p->conn) {
            PyErr_Format(PyExc_ValueError, "PersistentGroup: item %zd is closed", i);
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyTuple_GET_ITEM(tup, j) == o) {
                PyErr_Format(PyExc_ValueError, "PersistentGroup: item %zd is item %zd again "
                             "(each request once)", i, j);
                return -1;
            }
        if (*eng && p->conn->engine != *eng) {
            PyErr_Format(PyExc_ValueError, "PersistentGroup: item %zd is of another Engine "
                         "(one engine for all)", i);
            return -1;
        }
        *eng = p->conn->engine;
        *total += p->n;
    }
    return 0;
}

static PyObject *pgroup_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"requests", "chain", "progress", NULL};
    PyObject *reqs, *tup;
    int chain = 0, progress = 0;
    Py_ssize_t total;
    upy_engine_t *eng;
    upy_pgroup_t *g;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|pp:PersistentGroup", kwlist, &reqs, &chain,
                                     &progress))
        return NULL;
    tup = PySequence_Tuple(reqs);
    if (!tup)
        return NULL;
    if (pgroup_check(tup, &eng, &total) < 0)
        goto fail;
    g = (upy_pgroup_t *)type->tp_alloc(type, 0);
    if (!g)
        goto fail;
    g->reqs = PyMem_Calloc((size_t)total, sizeof(*g->reqs));
    if (!g->reqs) {
        Py_DECREF(g);
        PyErr_NoMemory();
        goto fail;
    }
    g->members = tup;
    Py_INCREF(eng);
    g->engine = eng;
    g->chain = chain;
    g->progress = progress;
    return (PyObject *)g;
fail:
    Py_DECREF(tup);
    return NULL;
}

/* The members of this round finished (every one, or a chain up to one that
 * failed): the group's result. */
static void pgroup_finish(upy_pgroup_t *g, Py_ssize_t upto)
{
    size_t sum = 0;
    g->status = UCCL_OK;
    for (Py_ssize_t i = 0; i < upto; i++) {
        upy_prep_t *p = MEMBER(g, i);
        if (p->status != UCCL_OK) {
            g->status = p->status;
            break;
        }
        sum += p->nbytes;
    }
    g->nbytes = sum;
    g->state = 2;
}

static PyObject *pgroup_result(upy_pgroup_t *g)
{
    if (g->status != UCCL_OK)
        return upy_raise(g->status, "PersistentGroup");
    if (!g->result || g->result_n != g->nbytes) {
        Py_XSETREF(g->result, PyLong_FromSize_t(g->nbytes));
        if (!g->result)
            return NULL;
        g->result_n = g->nbytes;
    }
    Py_INCREF(g->result);
    return g->result;
}

/* progress=True: one round of the engine's progress once the members are
 * posted. A transport may hold a posted transfer back until progress
 * (gpu_ipc issues a window's copies as one batch there): C's loop waits
 * right after posting, so its first progress comes at once, while a Python
 * loop returns to the interpreter first (session 17, py17: about 0.5 us a
 * window, all of it before the GPU starts). Its own result (requests done)
 * is wait()'s to see. */
static void pgroup_started(upy_pgroup_t *g, int *alone)
{
    if (g->progress && g->engine->engine) {
        g->engine->busy++;
        if (*alone < 0)
            *alone = upy_gil_alone();
        if (*alone) {
            uccl_engine_progress(g->engine->engine);
        } else {
            Py_BEGIN_ALLOW_THREADS
            uccl_engine_progress(g->engine->engine);
            Py_END_ALLOW_THREADS
        }
        g->engine->busy--;
    }
}

/* *alone: upy_gil_alone()'s answer once asked in this call (-1: not yet;
 * session 17: wait_start() asks once for its wait and its posts). 0, or -1
 * with an exception. */
static int pgroup_start_alone(upy_pgroup_t *g, int *alone)
{
    Py_ssize_t n = PyTuple_GET_SIZE(g->members);
    if (g->state == 1) {
        PyErr_SetString(PyExc_ValueError, "PersistentGroup.start: still started (wait() for "
                                          "it first)");
        return -1;
    }
    g->cur = 0;
    if (g->chain) {
        if (upy_prep_start_alone(MEMBER(g, 0), alone) < 0)
            return -1;
        g->state = 1;
        pgroup_started(g, alone);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        upy_prep_t *p = MEMBER(g, i);
        int idle = p->nposted == 0; /* not started on its own */
        if (upy_prep_start_alone(p, alone) < 0) {
            /* those before it, and its entries that were posted, are
             * finished by wait() */
            g->cur = i + (idle && p->nposted > 0);
            g->state = g->cur > 0;
            return -1;
        }
    }
    g->cur = n;
    g->state = 1;
    pgroup_started(g, alone);
    return 0;
}

static PyObject *pgroup_start(upy_pgroup_t *g, PyObject *unused)
{
    int alone = -1;
    (void)unused;
    if (pgroup_start_alone(g, &alone) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Together: one uccl_wait_all over the started members' operations.
 * 1 finished, 0 out of time, -1 error set. */
static int pgroup_wait_together(upy_pgroup_t *g, long long ms, int *alone)
{
    size_t k = 0;
    uccl_status_t st;
    uccl_req_t **reqs = g->reqs;
    if (g->cur == 1) { /* one member: its own array (session 17: no copy) */
        reqs = MEMBER(g, 0)->reqs;
        k = (size_t)MEMBER(g, 0)->nposted;
    } else {
        for (Py_ssize_t i = 0; i < g->cur; i++) {
            upy_prep_t *p = MEMBER(g, i);
            for (Py_ssize_t j = 0; j < p->nposted; j++)
                g->reqs[k++] = p->reqs[j];
        }
    }
    if (k > 0) {
        if (upy_engine_check(g->engine) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < g->cur; i++) {
            if (MEMBER(g, i)->waiting) {
                upy_raise(UCCL_ERR_BUSY, "PersistentGroup.wait (another thread is waiting on "
                                         "a member)");
                return -1;
            }
        }
        for (Py_ssize_t i = 0; i < g->cur; i++)
            MEMBER(g, i)->waiting++;
        st = upy_wait_many_alone(g->engine, reqs, k, ms, alone);
        for (Py_ssize_t i = 0; i < g->cur; i++)
            MEMBER(g, i)->waiting--;
        if (st == UPY_WAIT_INTERRUPTED)
            return -1;
        for (Py_ssize_t i = 0; i < g->cur; i++) {
            upy_prep_t *p = MEMBER(g, i);
            upy_prep_after_wait(p, st);
            if (p->nposted > 0)
                k = 0; /* one still running: out of time */
        }
        if (k == 0)
            return 0;
    }
    pgroup_finish(g, g->cur);
    return 1;
}

/* Chain: each member in turn, the next started once the one before it
 * finished without error. */
static int pgroup_wait_chain(upy_pgroup_t *g, long long ms, int *alone)
{
    Py_ssize_t n = PyTuple_GET_SIZE(g->members);
    double end = ms == -2 ? 0 : upy_now_s() + (double)ms / 1000.0; /* no limit: no clock */
    for (;;) {
        upy_prep_t *p = MEMBER(g, g->cur);
        long long left = ms == -2 ? -2 : (long long)((end - upy_now_s()) * 1000.0);
        int rc = upy_prep_wait_alone(p, ms != -2 && left < 0 ? 0 : left, alone);
        if (rc <= 0)
            return rc;
        if (p->status != UCCL_OK || g->cur + 1 == n) {
            pgroup_finish(g, g->cur + 1);
            return 1;
        }
        g->cur++;
        if (upy_prep_start_alone(MEMBER(g, g->cur), alone) < 0) {
            /* entries it posted before the failure: its own wait() */
            g->state = 0;
            return -1;
        }
    }
}

/* wait() with a limit of ms (-2: none); *alone as in pgroup_start_alone. */
static PyObject *pgroup_wait_alone(upy_pgroup_t *g, long long ms, int *alone)
{
    int rc;
    if (g->state == 0) {
        PyErr_SetString(PyExc_ValueError, "PersistentGroup.wait: not started (start() first)");
        return NULL;
    }
    if (g->waiting)
        return upy_raise(UCCL_ERR_BUSY, "PersistentGroup.wait (another thread is waiting)");
    if (g->state == 1) {
        g->waiting = 1;
        rc = g->chain ? pgroup_wait_chain(g, ms, alone) : pgroup_wait_together(g, ms, alone);
        g->waiting = 0;
        if (rc < 0)
            return NULL;
        if (rc == 0)
            return upy_raise(UCCL_ERR_TIMEOUT, "PersistentGroup.wait");
    }
    return pgroup_result(g);
}

static PyObject *pgroup_wait(upy_pgroup_t *g, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"timeout"};
    static const upy_sig_t sig = {"wait", names, 1, 1, 0};
    PyObject *timeout = NULL;
    long long ms = -2;
    int alone = -1;
    if ((nargs || kwnames) &&
        (upy_parse(&sig, args, nargs, kwnames, &timeout) < 0 || upy_timeout_ms(timeout, &ms) < 0))
        return NULL;
    return pgroup_wait_alone(g, ms, &alone);
}

/* wait(), then start() again: one call a round where a loop repeats the
 * same transfers (no timeout: a round that cannot finish is an error).
 * Whether another thread could want the GIL is asked once for both
 * (session 17), not by the wait and by each member's posting. */
static PyObject *pgroup_wait_start(upy_pgroup_t *g, PyObject *unused)
{
    PyObject *r;
    int alone = -1;
    (void)unused;
    r = pgroup_wait_alone(g, -2, &alone);
    if (!r)
        return NULL;
    if (pgroup_start_alone(g, &alone) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

static PyObject *pgroup_get(upy_pgroup_t *g, void *closure)
{
    const char *which = closure;
    if (which[0] == 'a')
        return PyBool_FromLong(g->state == 1);
    if (which[0] == 'c')
        return PyBool_FromLong(g->chain);
    if (which[0] == 'p')
        return PyBool_FromLong(g->progress);
    Py_INCREF(g->members);
    return g->members;
}

static Py_ssize_t pgroup_len(upy_pgroup_t *g)
{
    return PyTuple_GET_SIZE(g->members);
}

static void pgroup_dealloc(upy_pgroup_t *g)
{
    if (g->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)g);
    Py_XDECREF(g->members); /* a started member finishes in the background */
    Py_XDECREF((PyObject *)g->engine);
    Py_XDECREF(g->result);
    PyMem_Free(g->reqs);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyMethodDef pgroup_methods[] = {
    {"start", (PyCFunction)pgroup_start, METH_NOARGS,
     "start() -> None\n\nTogether: start() every member, in order (as uccl.start_all); a "
     "member that fails to start raises, and wait() finishes those started before it. Chain: "
     "start() the first member. ValueError while started."},
    {"wait", (PyCFunction)(void (*)(void))pgroup_wait, METH_FASTCALL | METH_KEYWORDS,
     "wait(timeout=None) -> int\n\nTogether: wait for every started member at once (as "
     "uccl.wait_all). Chain: wait for each member in order, starting the next when the one "
     "before it finished without error (a failure to start it raises; the group is then not "
     "started). The members' bytes summed, or the first member's error in order; again "
     "after that: the same result. uccl.TimeoutError leaves it started (wait() goes on)."},
    {"wait_start", (PyCFunction)pgroup_wait_start, METH_NOARGS,
     "wait_start() -> int\n\nwait() without a limit, then start() again, in one call: a "
     "loop that repeats the same transfers calls start() once, wait_start() each round after "
     "it, and wait() after the last. Returns what wait() returned; an error of wait() "
     "raises before anything starts, an error of start() raises as start()'s."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pgroup_getset[] = {
    {"active", (getter)pgroup_get, NULL, "True from start() until wait() finished it.",
     "active"},
    {"chain", (getter)pgroup_get, NULL, "True: members run one after another.", "chain"},
    {"progress", (getter)pgroup_get, NULL, "True: start() ends with a round of progress.",
     "progress"},
    {"requests", (getter)pgroup_get, NULL, "The members (a tuple).", "requests"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods pgroup_as_seq = {.sq_length = (lenfunc)pgroup_len};

PyTypeObject upy_pgroup_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.PersistentGroup",
    .tp_basicsize = sizeof(upy_pgroup_t),
    .tp_dealloc = (destructor)pgroup_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PersistentGroup(requests, chain=False, progress=False): uccl.PersistentRequests of one Engine "
              "(each once) started and waited by one call each, checked once. Together "
              "(default): start() starts all, wait() waits for all (uccl.start_all and "
              "uccl.wait_all without their per-call checks and list). chain=True: start() "
              "starts the first, wait() waits for each in order and starts the next after "
              "it. wait() returns the bytes summed. progress=True: start() ends with one "
              "round of the engine's progress, so that transfers a transport holds back "
              "until then (gpu_ipc's batched copies) go before start() returns. len() is "
              "the number of members; the members stay usable on their own while the group "
              "is not started.",
    .tp_weaklistoffset = offsetof(upy_pgroup_t, weakrefs),
    .tp_new = pgroup_new,
    .tp_methods = pgroup_methods,
    .tp_getset = pgroup_getset,
    .tp_as_sequence = &pgroup_as_seq,
};

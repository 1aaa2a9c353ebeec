/* The binding's own time breakdown, switched on at run time
 * (uccl._uccl._profile(True)): monotonic nanoseconds summed per stage of a
 * collective's object path (the buffers' interfaces, the producer-stream
 * ordering, libuccl's call, the release of what the call kept). Off, each
 * stage costs one test of a global. */
#include "upy.h"

#include <string.h>
#include <time.h>

int upy_prof_on;

static const char *const stage_names[UPY_P_N] = {
    [UPY_P_CALL] = "call",        [UPY_P_VIEW] = "view",     [UPY_P_TORCH] = "torch",
    [UPY_P_DLDEV] = "dlpack_device", [UPY_P_DLPACK] = "dlpack", [UPY_P_CAI] = "cai",
    [UPY_P_ORDER] = "order",      [UPY_P_EVENT] = "event",   [UPY_P_WAIT] = "wait",
    [UPY_P_COLL] = "coll",        [UPY_P_FREE] = "free",
};

static struct {
    unsigned long long n, ns;
} stages[UPY_P_N];

unsigned long long upy_prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void upy_prof_add(int stage, unsigned long long t0)
{
    if (!t0 || stage < 0 || stage >= UPY_P_N)
        return;
    stages[stage].n++;
    stages[stage].ns += upy_prof_now() - t0;
}

/* _profile(enable=None, reset=False) -> {stage: (count, seconds)}: the sums
 * so far (before a reset); enable True/False switches the timing. */
PyObject *upy_prof(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"enable", "reset", NULL};
    PyObject *enable = Py_None, *out;
    int reset = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Op:_profile", kwlist, &enable, &reset))
        return NULL;
    out = PyDict_New();
    for (int i = 0; out && i < UPY_P_N; i++) {
        PyObject *v;
        if (!stages[i].n)
            continue;
        v = Py_BuildValue("(Kd)", stages[i].n, (double)stages[i].ns * 1e-9);
        if (!v || PyDict_SetItemString(out, stage_names[i], v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(v);
    }
    if (out && reset)
        memset(stages, 0, sizeof(stages));
    if (out && enable != Py_None) {
        int on = PyObject_IsTrue(enable);
        if (on < 0)
            Py_CLEAR(out);
        else
            upy_prof_on = on;
    }
    return out;
}

/* _stream_query_cost(engine, stream, n) -> seconds per uccl_stream_query
 * (session 12): the host-ordered producer-stream step's floor, timed in C
 * without the binding around it. The GIL is kept (n short calls). */
PyObject *upy_stream_query_cost(PyObject *self, PyObject *args)
{
    upy_engine_t *e;
    PyObject *stream_o;
    void *stream;
    int n;
    unsigned long long t0;
    uccl_status_t st = UCCL_OK;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!Oi:_stream_query_cost", &upy_engine_type, &e, &stream_o, &n))
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "_stream_query_cost: n >= 1");
        return NULL;
    }
    stream = PyLong_AsVoidPtr(stream_o);
    if (PyErr_Occurred() || upy_engine_check(e) < 0)
        return NULL;
    t0 = upy_prof_now();
    for (int i = 0; i < n && (st == UCCL_OK || st == UCCL_INPROGRESS); i++)
        st = uccl_stream_query(e->engine, stream);
    if (st != UCCL_OK && st != UCCL_INPROGRESS)
        return upy_raise(st, "uccl_stream_query");
    return PyFloat_FromDouble((double)(upy_prof_now() - t0) * 1e-9 / n);
}

/* _fast_stats(reset=False) -> {"gil_kept", "gil_released", "rdesc_hits",
 * "gil_asks"}: waits and list posts that kept the GIL (no other thread) and
 * that released it, list entries that reused the connection's last decoded
 * descriptor, since the last reset (session 14; the tests check which path
 * a call took); the times upy_gil_alone() was asked (session 17). */
PyObject *upy_fast_stats(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"reset", NULL};
    PyObject *out;
    int reset = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:_fast_stats", kwlist, &reset))
        return NULL;
    out = Py_BuildValue("{sKsKsKsK}", "gil_kept", upy_gil_kept, "gil_released",
                        upy_gil_released, "rdesc_hits", upy_rdesc_hits, "gil_asks", upy_gil_asks);
    if (out && reset)
        upy_gil_kept = upy_gil_released = upy_rdesc_hits = upy_gil_asks = 0;
    return out;
}

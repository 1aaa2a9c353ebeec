/* The uccl._uccl extension module: types, exceptions, constants. */
#include "args.h"

PyObject *upy_in_place;

static PyObject *mod_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(uccl_version());
}

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
    long v = PyLong_AsLong(arg);
    (void)self;
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(uccl_strerror((uccl_status_t)v));
}

static PyMethodDef module_methods[] = {
    {"version", mod_version, METH_NOARGS, "version() -> str\n\nlibuccl's version."},
    {"strerror", mod_strerror, METH_O, "strerror(status) -> str\n\nText of a status."},
    {"wait_all", (PyCFunction)(void (*)(void))upy_wait_all, METH_FASTCALL | METH_KEYWORDS,
     "wait_all(requests, timeout=None) -> list[int]\n\nWait for every Request or started "
     "PersistentRequest (GIL released); the bytes of each, or the first error in order."},
    {"start_all", upy_start_all, METH_O,
     "start_all(requests) -> None\n\nstart() each uccl.PersistentRequest of the sequence, in "
     "order (an error stops there: those before it were started)."},
    {"_profile", (PyCFunction)(void (*)(void))upy_prof, METH_VARARGS | METH_KEYWORDS,
     "_profile(enable=None, reset=False) -> dict\n\nThe binding's time per stage of "
     "the collectives' object path so far, {stage: (count, seconds)}; enable True/False "
     "switches the timing (off by default: python -m uccl.bench --profile)."},
    {"_tensor_cache", (PyCFunction)(void (*)(void))upy_tensor_cache,
     METH_VARARGS | METH_KEYWORDS,
     "_tensor_cache(clear=False) -> (hits, misses, live)\n\nThe torch tensors the "
     "collectives' fast path remembers (tests); clear forgets them."},
    {"_fast_stats", (PyCFunction)(void (*)(void))upy_fast_stats, METH_VARARGS | METH_KEYWORDS,
     "_fast_stats(reset=False) -> dict\n\nSince the last reset: waits and list posts that "
     "kept the GIL (no other thread could take it), that released it, and list entries that "
     "reused their connection's last decoded descriptor, and gil_asks: how often a call asked "
     "whether another thread could take the GIL (tests)."},
    {"_p2p_loop", upy_p2p_loop, METH_VARARGS,
     "_p2p_loop(conn, op, rank, mr, ctl, desc, size, window, iters) -> float\n\n"
     "uccl_perf's point-to-point loop in C on these objects, without the GIL: rank 0's "
     "seconds (python -m uccl.bench compares it with the same loop in Python)."},
    {"_p2p_loop_split", upy_p2p_loop_split, METH_NOARGS,
     "_p2p_loop_split() -> (post_s, wait_s)\n\nThe last _p2p_loop's rank-side time posting "
     "its windows' transfers and waiting for them (python -m uccl.bench --split)."},
    {"_stream_query_cost", upy_stream_query_cost, METH_VARARGS,
     "_stream_query_cost(engine, stream, n) -> float\n\nSeconds per uccl_stream_query of "
     "stream (an int: cudaStream_t) over n calls in C (the floor of a host-ordered "
     "collective's producer-stream step; tests/gpu/py_object_cost.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "uccl._uccl",
    .m_doc = "libuccl's C API for Python (use the uccl package).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
    if (PyType_Ready(t) < 0)
        return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

static int add_constants(PyObject *m)
{
    static const struct {
        const char *name;
        long long value;
    } c[] = {
        {"IOV_MAX", UCCL_IOV_MAX},       {"RIOV_MAX", UCCL_RIOV_MAX},
        {"RDESC_SIZE", UCCL_RDESC_SIZE}, {"ADDRESS_MAX", UCCL_ADDRESS_MAX},
        {"CAP_SHM", UCCL_CAP_SHM},       {"CAP_TCP", UCCL_CAP_TCP},
        {"CAP_VERBS", UCCL_CAP_VERBS},   {"CAP_OFI", UCCL_CAP_OFI},
        {"CAP_GPU_IPC", UCCL_CAP_GPU_IPC}, {"CAP_CUDA", UCCL_CAP_CUDA},
        {"CAP_ROCM", UCCL_CAP_ROCM},     {"CAP_HWLOC", UCCL_CAP_HWLOC},
        {"CAP_MPI", UCCL_CAP_MPI},
    };
    PyObject *v;
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        if (PyModule_AddIntConstant(m, c[i].name, (long)c[i].value) < 0)
            return -1;
    /* uccl.IN_PLACE: "send from the receive buffer" of the collectives */
    if (!upy_in_place)
        upy_in_place = PyObject_CallObject((PyObject *)&PyBaseObject_Type, NULL);
    if (!upy_in_place)
        return -1;
    Py_INCREF(upy_in_place);
    if (PyModule_AddObject(m, "IN_PLACE", upy_in_place) < 0) {
        Py_DECREF(upy_in_place);
        return -1;
    }
    v = PyLong_FromUnsignedLongLong(UCCL_TAG_USER_MAX);
    if (!v || PyModule_AddObject(m, "TAG_USER_MAX", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__uccl(void)
{
    PyObject *m;
    if (upy_conn_type_init() < 0 || upy_comm_type_init() < 0)
        return PyErr_NoMemory();
    if (PyType_Ready(&upy_mr_hold_type) < 0)
        return NULL;
    m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (add_type(m, &upy_engine_type, "Engine") < 0 || add_type(m, &upy_conn_type, "Conn") < 0 ||
        add_type(m, &upy_mr_type, "MemoryRegion") < 0 ||
        add_type(m, &upy_req_type, "Request") < 0 || add_type(m, &upy_comm_type, "Comm") < 0 ||
        add_type(m, &upy_prep_type, "PersistentRequest") < 0 ||
        add_type(m, &upy_pgroup_type, "PersistentGroup") < 0 ||
        upy_errors_init(m) < 0 || add_constants(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

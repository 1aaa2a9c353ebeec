/* uccl.MemoryRegion: memory of a Python object registered zero-copy, from the
 * buffer protocol, __cuda_array_interface__ or __dlpack__, and its 64-byte
 * remote descriptors. */
#include "upy.h"

#include "dlpack_abi.h"

#include <string.h>

static int set_err(PyObject *type, const char *msg)
{
    PyErr_SetString(type, msg);
    return -1;
}

/* Product of a shape tuple times itemsize; -1 + error on overflow/bad shape. */
static int cai_nbytes(PyObject *shape, Py_ssize_t itemsize, size_t *out)
{
    size_t n = (size_t)itemsize;
    if (!PyTuple_Check(shape))
        return set_err(PyExc_TypeError, "__cuda_array_interface__['shape'] is not a tuple");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (d < 0)
            return PyErr_Occurred() ? -1 : set_err(PyExc_ValueError, "negative dimension");
        if (d && n > SIZE_MAX / (size_t)d)
            return set_err(PyExc_OverflowError, "array too large");
        n *= (size_t)d;
    }
    *out = n;
    return 0;
}

/* strides None, or C-contiguous strides for shape. */
static int cai_contiguous(PyObject *shape, PyObject *strides, Py_ssize_t itemsize)
{
    long long expect = itemsize;
    if (!strides || strides == Py_None)
        return 1;
    if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != PyTuple_GET_SIZE(shape))
        return 0;
    for (Py_ssize_t i = PyTuple_GET_SIZE(shape) - 1; i >= 0; i--) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
        if (PyErr_Occurred())
            return -1;
        if (d > 1 && s != expect)
            return 0;
        expect *= d;
    }
    return 1;
}

/* A buffer of Python objects (struct format 'O', e.g. a numpy object
 * array, alone or as a field): its bytes are object pointers, which a
 * receive would overwrite (the owner then dereferences garbage) and a send
 * would hand to another process. Field names (":name:") are skipped. */
static int format_has_objects(const char *f)
{
    for (int in_name = 0; f && *f; f++) {
        if (*f == ':')
            in_name = !in_name;
        else if (*f == 'O' && !in_name)
            return 1;
    }
    return 0;
}

static int from_cai(upy_mr_t *m, PyObject *cai)
{
    PyObject *data, *shape, *typestr, *strides;
    long itemsize;
    if (!PyDict_Check(cai))
        return set_err(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
    data = PyDict_GetItemString(cai, "data");
    shape = PyDict_GetItemString(cai, "shape");
    typestr = PyDict_GetItemString(cai, "typestr");
    strides = PyDict_GetItemString(cai, "strides");
    if (!data || !shape || !typestr || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 ||
        !PyUnicode_Check(typestr) || PyUnicode_GET_LENGTH(typestr) < 3)
        return set_err(PyExc_TypeError, "malformed __cuda_array_interface__ (data, shape, typestr)");
    if (!PyUnicode_AsUTF8(typestr))
        return -1;
    itemsize = strtol(PyUnicode_AsUTF8(typestr) + 2, NULL, 10);
    if (itemsize <= 0)
        return set_err(PyExc_TypeError, "__cuda_array_interface__: bad typestr");
    if (cai_nbytes(shape, itemsize, &m->len) < 0)
        return -1;
    switch (cai_contiguous(shape, strides, itemsize)) {
    case -1: return -1;
    case 0: return set_err(PyExc_ValueError, "cannot register a non-contiguous array");
    }
    m->addr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred())
        return -1;
    m->readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    m->source = UPY_SRC_CAI;
    return m->readonly < 0 ? -1 : 0;
}

/* Call the producer's deleter; runs on error paths too, so the pending
 * exception is kept. */
static void dlpack_release(upy_mr_t *m)
{
    PyObject *type, *value, *tb;
    DLManagedTensor *t;
    PyErr_Fetch(&type, &value, &tb);
    t = PyCapsule_GetPointer(m->capsule, "used_dltensor");
    if (t && t->deleter)
        t->deleter(t);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

static int from_dlpack(upy_mr_t *m, PyObject *capsule)
{
    DLManagedTensor *t;
    DLTensor *d;
    size_t n;
    if (!PyCapsule_IsValid(capsule, "dltensor"))
        return set_err(PyExc_TypeError, "__dlpack__() did not return a 'dltensor' capsule");
    t = PyCapsule_GetPointer(capsule, "dltensor");
    if (PyCapsule_SetName(capsule, "used_dltensor") < 0)
        return -1;
    m->capsule = capsule;
    Py_INCREF(capsule);
    m->source = UPY_SRC_DLPACK; /* from now on release() calls the deleter */
    d = &t->dl_tensor;
    n = ((size_t)d->dtype.bits * d->dtype.lanes + 7) / 8;
    for (int i = 0; i < d->ndim; i++)
        n *= (size_t)d->shape[i];
    if (d->strides) {
        int64_t expect = 1;
        for (int i = d->ndim - 1; i >= 0; i--) {
            if (d->shape[i] > 1 && d->strides[i] != expect)
                return set_err(PyExc_ValueError, "cannot register a non-contiguous tensor");
            expect *= d->shape[i];
        }
    }
    m->addr = (char *)d->data + d->byte_offset;
    m->len = n;
    switch (d->device.device_type) {
    case 1: case 3: case 11: break; /* CPU, CUDA host, ROCm host */
    case 2: case 13: m->mem_type = UCCL_MEM_CUDA; break; /* kDLCUDA, managed */
    case 10: m->mem_type = UCCL_MEM_ROCM; break;
    default: /* OpenCL, Vulkan, Metal, oneAPI, ...: not memory libuccl can touch */
        PyErr_Format(PyExc_TypeError, "cannot register DLPack memory of device type %d "
                     "(host, CUDA or ROCm memory only)", (int)d->device.device_type);
        return -1;
    }
    return 0;
}

/* obj.name, or *out = NULL when obj has no such attribute. */
static int optional_attr(PyObject *obj, const char *name, PyObject **out)
{
    *out = PyObject_GetAttrString(obj, name);
    if (*out)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* GPU memory through DLPack's stream handshake: we name the stream our
 * work runs on (the call's stream=, else the default stream, which we then
 * wait for on the host) and the producer makes that stream wait for its
 * own. Returns 1 when obj is not such an object (or refuses the stream:
 * the CUDA array interface is tried next), 0 when done, -1 on error. */
static int from_dlpack_ordered(upy_mr_t *m, PyObject *obj, upy_order_t *ord)
{
    PyObject *dev, *fn, *kw, *args, *capsule;
    long type;
    void *want;
    int rc;
    unsigned long long t0;
    if (!PyObject_HasAttrString(obj, "__dlpack_device__") ||
        !PyObject_HasAttrString(obj, "__dlpack__"))
        return 1;
    t0 = UPY_T0();
    dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    type = dev && PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) >= 1
               ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0))
               : -1;
    Py_XDECREF(dev);
    if (PyErr_Occurred())
        PyErr_Clear();
    upy_prof_add(UPY_P_DLDEV, t0);
    if (type != 2 /* kDLCUDA */ && type != 13 /* managed */ && type != 10 /* kDLROCM */)
        return 1;
    if (ord->stream_form) /* DLPack forbids 0 on CUDA: the legacy stream is 1 */
        want = type == 10 ? ord->stream : upy_stream_norm(ord->stream);
    else
        want = (void *)(uintptr_t)(type == 10 ? 0 : 1); /* the default stream */
    t0 = UPY_T0();
    fn = PyObject_GetAttrString(obj, "__dlpack__");
    args = PyTuple_New(0);
    kw = Py_BuildValue("{s:N}", "stream", PyLong_FromVoidPtr(want));
    capsule = fn && args && kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    upy_prof_add(UPY_P_DLPACK, t0);
    if (!capsule) {
        /* no stream argument, or a tensor it will not export that way */
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            return 1;
        }
        return -1;
    }
    rc = from_dlpack(m, capsule);
    Py_DECREF(capsule);
    if (rc == 0 && !ord->stream_form)
        upy_order_add(ord, want);
    return rc;
}

/* CUDA array interface v3: 'stream' (absent or None: nothing to wait for)
 * is where the producer's work on the memory was queued. */
static int cai_stream(PyObject *cai, upy_order_t *ord)
{
    PyObject *s = PyDict_GetItemString(cai, "stream");
    void *p;
    if (!ord || !s || s == Py_None)
        return 0;
    p = PyLong_AsVoidPtr(s);
    if (PyErr_Occurred())
        return -1;
    if (!ord->stream_form || upy_stream_norm(p) != upy_stream_norm(ord->stream))
        upy_order_add(ord, p);
    return 0;
}

static int from_object(upy_mr_t *m, PyObject *obj, upy_order_t *ord)
{
    PyObject *cai, *capsule, *type, *value, *tb;
    unsigned long long t0;
    int rc;
    /* The buffer protocol first: a slot call, while probing for a missing
     * __cuda_array_interface__ raises (and clears) an AttributeError, a
     * microsecond on every collective call with a numpy array. A GPU array
     * may export a buffer that refuses CPU access (CuPy raises TypeError):
     * then the GPU interfaces are tried, and the buffer's error is kept
     * for when they are absent too. */
    type = value = tb = NULL;
    /* (torch CUDA tensors: upy_coll_buf tried tensor.c's path first) */
    if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &m->view, PyBUF_FULL_RO) == 0) {
            m->source = UPY_SRC_BUFFER;
            if (!PyBuffer_IsContiguous(&m->view, 'A'))
                return set_err(PyExc_ValueError, "cannot register a non-contiguous buffer");
            if (format_has_objects(m->view.format))
                return set_err(PyExc_TypeError, "cannot register a buffer of Python objects "
                                                "(format 'O', e.g. dtype=object): its bytes "
                                                "are object pointers");
            m->addr = m->view.buf;
            m->len = (size_t)m->view.len;
            m->readonly = m->view.readonly;
            return 0;
        }
        PyErr_Fetch(&type, &value, &tb);
    }
    if (ord) {
        rc = from_dlpack_ordered(m, obj, ord);
        if (rc <= 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return rc;
        }
    }
    t0 = UPY_T0();
    if (optional_attr(obj, "__cuda_array_interface__", &cai) < 0)
        goto out;
    if (cai) {
        rc = from_cai(m, cai);
        if (rc == 0)
            rc = cai_stream(cai, ord);
        Py_DECREF(cai);
        upy_prof_add(UPY_P_CAI, t0);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return rc;
    }
    if (PyObject_HasAttrString(obj, "__dlpack__")) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
        if (!capsule)
            return -1;
        rc = from_dlpack(m, capsule);
        Py_DECREF(capsule);
        return rc;
    }
    if (type) { /* the buffer's own error says most */
        PyErr_Restore(type, value, tb);
        return -1;
    }
    PyErr_Format(PyExc_TypeError,
                 "cannot register a '%.100s': it has neither the buffer protocol, "
                 "__cuda_array_interface__ nor __dlpack__",
                 Py_TYPE(obj)->tp_name);
    return -1;
out:
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
}

/* Give back what the region holds of its object (the region itself is
 * deregistered, or gone with its engine, before this). */
static void release_source(upy_mr_t *m)
{
    if (m->source == UPY_SRC_BUFFER)
        PyBuffer_Release(&m->view);
    else if (m->source == UPY_SRC_DLPACK)
        dlpack_release(m);
    m->source = 0;
    Py_CLEAR(m->capsule);
    Py_CLEAR(m->obj);
}

upy_mr_t *upy_mr_view(PyObject *obj, upy_order_t *ord)
{
    upy_mr_t *m = PyObject_New(upy_mr_t, &upy_mr_type);
    if (!m)
        return NULL;
    memset((char *)m + sizeof(PyObject), 0, sizeof(*m) - sizeof(PyObject));
    Py_INCREF(obj);
    m->obj = obj;
    m->device = -1;
    if (from_object(m, obj, ord) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (m->source == UPY_SRC_CAI) /* CUDA array interface: device memory */
        m->mem_type = UCCL_MEM_CUDA;
    return m;
}

PyObject *upy_mr_register(upy_engine_t *e, PyObject *obj, int local_only)
{
    upy_mr_t *m = upy_mr_view(obj, NULL);
    uccl_mr_attr_t attr;
    uccl_status_t st;
    if (!m)
        return NULL;
    Py_INCREF(e);
    m->engine = e;
    if (m->len == 0) {
        PyErr_SetString(PyExc_ValueError, "cannot register an empty buffer");
        goto err;
    }
    st = uccl_mr_reg(e->engine, m->addr, m->len, local_only ? UCCL_MR_LOCAL_ONLY : 0, &m->mr);
    if (st != UCCL_OK) {
        m->mr = NULL;
        upy_raise(st, "uccl_mr_reg");
        goto err;
    }
    if (uccl_mr_query(m->mr, &attr) == UCCL_OK) {
        m->mem_type = attr.mem_type;
        m->device = attr.device;
    }
    return (PyObject *)m;
err:
    Py_DECREF(m);
    return NULL;
}

upy_mr_t *upy_mr_arg(PyObject *obj, upy_engine_t *e, int need_writable)
{
    upy_mr_t *m = (upy_mr_t *)obj;
    if (!PyObject_TypeCheck(obj, &upy_mr_type)) {
        PyErr_Format(PyExc_TypeError, "expected a uccl.MemoryRegion, got '%.100s'",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (!m->mr || !m->engine->engine) {
        PyErr_SetString(PyExc_ValueError, m->mr ? "the region's engine is closed"
                                                : "the memory region is released");
        return NULL;
    }
    if (m->engine != e) {
        PyErr_SetString(PyExc_ValueError, "the memory region belongs to another engine");
        return NULL;
    }
    if (need_writable && m->readonly) {
        PyErr_SetString(PyExc_ValueError,
                        "the memory region is read-only: it cannot receive data");
        return NULL;
    }
    return m;
}

typedef struct {
    PyObject_HEAD
    upy_mr_t *m; /* strong */
} upy_mr_hold_t;

PyObject *upy_mr_hold(upy_mr_t *m)
{
    upy_mr_hold_t *h = PyObject_New(upy_mr_hold_t, &upy_mr_hold_type);
    if (!h)
        return NULL;
    Py_INCREF(m);
    h->m = m;
    m->holds++;
    return (PyObject *)h;
}

static void mr_hold_dealloc(upy_mr_hold_t *h)
{
    h->m->holds--;
    Py_DECREF(h->m);
    PyObject_Free(h);
}

PyTypeObject upy_mr_hold_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl._uccl._RegionHold",
    .tp_basicsize = sizeof(upy_mr_hold_t),
    .tp_dealloc = (destructor)mr_hold_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* ---------------------------------------------------------------- methods */

static PyObject *mr_release(upy_mr_t *self, PyObject *unused)
{
    uccl_status_t st;
    (void)unused;
    if (self->mr && self->engine->engine) {
        if (self->holds)
            return upy_raise(UCCL_ERR_BUSY, "MemoryRegion.release (a collective in flight "
                                            "uses it)");
        if (self->engine->posting)
            return upy_raise(UCCL_ERR_BUSY, "MemoryRegion.release (another thread is posting "
                                            "a list of operations on its engine)");
        upy_engine_reap(self->engine);
        st = uccl_mr_dereg(self->mr);
        if (st != UCCL_OK)
            return upy_raise(st, "uccl_mr_dereg");
    }
    self->mr = NULL;
    release_source(self);
    Py_RETURN_NONE;
}

static void mr_dealloc(upy_mr_t *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->mr && self->engine->engine && uccl_mr_dereg(self->mr) != UCCL_OK) {
        /* Requests of it still run (only possible for orphans): leave the
         * memory registered and its object alive rather than free it. */
        self->mr = NULL;
        Py_XDECREF(self->engine);
        Py_TYPE(self)->tp_free((PyObject *)self);
        return;
    }
    release_source(self);
    Py_XDECREF(self->engine);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *mr_descriptor(upy_mr_t *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"offset", "length", NULL};
    Py_ssize_t off = 0;
    PyObject *length = Py_None;
    size_t len;
    uccl_rdesc_t rd;
    uccl_status_t st;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|nO:descriptor", kwlist, &off, &length))
        return NULL;
    if (!upy_mr_arg((PyObject *)self, self->engine, 0))
        return NULL;
    if (off < 0 || (size_t)off > self->len)
        return upy_raise(UCCL_ERR_OUT_OF_BOUNDS, "MemoryRegion.descriptor");
    if (length == Py_None) {
        len = self->len - (size_t)off;
    } else {
        Py_ssize_t l = PyLong_AsSsize_t(length);
        if (l == -1 && PyErr_Occurred())
            return NULL;
        if (l < 0)
            return upy_raise(UCCL_ERR_OUT_OF_BOUNDS, "MemoryRegion.descriptor");
        len = (size_t)l;
    }
    st = uccl_mr_pack(self->mr, (size_t)off, len, &rd);
    if (st != UCCL_OK)
        return upy_raise(st, "uccl_mr_pack");
    return PyBytes_FromStringAndSize((const char *)rd.bytes, UCCL_RDESC_SIZE);
}

static PyObject *mr_enter(upy_mr_t *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *mr_exit(upy_mr_t *self, PyObject *args)
{
    PyObject *r = mr_release(self, NULL);
    (void)args;
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *mr_get(upy_mr_t *self, void *closure)
{
    const char *which = closure;
    if (!strcmp(which, "released"))
        return PyBool_FromLong(self->mr == NULL);
    if (!strcmp(which, "nbytes"))
        return PyLong_FromSize_t(self->len);
    if (!strcmp(which, "ptr"))
        return PyLong_FromVoidPtr(self->addr);
    if (!strcmp(which, "readonly"))
        return PyBool_FromLong(self->readonly);
    if (!strcmp(which, "device"))
        return PyLong_FromLong(self->device);
    if (!strcmp(which, "obj")) {
        PyObject *o = self->obj ? self->obj : Py_None;
        Py_INCREF(o);
        return o;
    }
    return PyUnicode_FromString(self->mem_type == UCCL_MEM_CUDA   ? "cuda"
                                : self->mem_type == UCCL_MEM_ROCM ? "rocm"
                                                                  : "host");
}

static PyMethodDef mr_methods[] = {
    {"descriptor", (PyCFunction)(void (*)(void))mr_descriptor, METH_VARARGS | METH_KEYWORDS,
     "descriptor(offset=0, length=None) -> bytes\n\n64 bytes describing [offset, "
     "offset+length) of the region for one-sided access by a peer (length None: to the "
     "end). Raises uccl.OutOfBoundsError, ValueError for a released region."},
    {"release", (PyCFunction)mr_release, METH_NOARGS,
     "release()\n\nDeregister now and let go of the object. Raises uccl.BusyError while "
     "requests on it are in flight. Idempotent."},
    {"__enter__", (PyCFunction)mr_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)mr_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef mr_getset[] = {
    {"nbytes", (getter)mr_get, NULL, "Registered length in bytes.", "nbytes"},
    {"ptr", (getter)mr_get, NULL, "Address of the first byte (int).", "ptr"},
    {"readonly", (getter)mr_get, NULL, "True when the memory cannot receive.", "readonly"},
    {"mem_type", (getter)mr_get, NULL, "'host', 'cuda' or 'rocm' (detected).", "mem_type"},
    {"device", (getter)mr_get, NULL, "GPU ordinal, -1 for host memory.", "device"},
    {"obj", (getter)mr_get, NULL, "The registered object (None once released).", "obj"},
    {"released", (getter)mr_get, NULL, "True once released.", "released"},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject upy_mr_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uccl.MemoryRegion",
    .tp_basicsize = sizeof(upy_mr_t),
    .tp_dealloc = (destructor)mr_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Registered memory (made by Engine.register). Keeps its object and engine "
              "alive; a context manager (released on exit).",
    .tp_weaklistoffset = offsetof(upy_mr_t, weakrefs),
    .tp_methods = mr_methods,
    .tp_getset = mr_getset,
};

/* A torch CUDA tensor given to a collective as an object: its memory and
 * its producer stream from torch's C-level tensor methods and
 * torch._C._cuda_getCurrentRawStream, instead of __dlpack_device__ and
 * __dlpack__(stream=...), which are Python code in torch (session 8,
 * tests/gpu/results: most of the +40 us per call of the object path).
 * The ordering is the same as the handshake's (python/README.md, producer
 * streams): the stream current when the collective is called is the
 * producer's; the host-ordered form waits for it on the host; the stream
 * form needs nothing when the call's stream is that stream, and leaves any
 * other stream to DLPack's handshake (torch then orders the call's stream
 * on the GPU). Tensors DLPack would refuse (requiring grad, conjugate or
 * negative bit, not contiguous), subclasses and anything else go the
 * general way too, with its messages. UCCL_PY_TORCH_FAST=0 turns this off.
 *
 * Tensors seen before (session 9): a few recent tensor objects are
 * remembered by identity through a weak reference, which dies with the
 * object, so a new tensor at a freed object's address is never taken for
 * it, with the data_ptr() and device they had. A call reads data_ptr()
 * first: the same object at the same address (nothing moved it: set_,
 * resize_ growing, .data = ...) keeps its device, CUDA and no conjugate or
 * negative bit, and reads again only what in-place ops change without
 * moving it: nbytes (resize_ shrinking), is_contiguous() (t_, transpose_,
 * as_strided_) and requires_grad (requires_grad_); anything else takes the
 * whole path. The one case a hit cannot see: `.data =` a conjugate or
 * negative view of the same memory (complex tensors), whose bytes then go
 * unconjugated, as a MemoryRegion of it would. A hit makes 4 calls into
 * torch instead of 8, and torch's current stream is read once per device
 * per call.
 *
 * Session 11: those calls go through the type's own descriptors, looked
 * up once (desc_lookup below); UCCL_PY_TORCH_DESC=0 keeps the generic
 * attribute calls (for comparison). */
#include "upy.h"

#include <stdlib.h>
#include <string.h>

static int state; /* 0: not looked up; 1: ready; -1: off or no torch API */
static PyTypeObject *tensor_type;
static PyObject *raw_stream; /* torch._C._cuda_getCurrentRawStream */
static uccl_mem_type_t mem_type;
static PyObject *s_is_cuda, *s_requires_grad, *s_is_contiguous, *s_is_conj, *s_is_neg,
    *s_data_ptr, *s_nbytes, *s_get_device;

/* The Tensor type's own descriptors for those names (session 11): torch's
 * C methods (method descriptors, called with the tensor as their first
 * argument) and C attributes (getset descriptors, their getter asked
 * directly). This skips the generic lookup of each call, the type's MRO
 * cache and the tensor's instance __dict__: an instance attribute of one
 * of these names would shadow a method only through that __dict__, and
 * torch never sets one. A name whose descriptor is anything else (a
 * Python override in torch.Tensor, a property) keeps the generic call. */
#define DESC_N 8
static PyObject *desc[DESC_N]; /* in desc_names' order; NULL: the generic call */
static void desc_lookup(void);

static int intern(PyObject **s, const char *name)
{
    *s = PyUnicode_InternFromString(name);
    return *s ? 0 : -1;
}

/* Once torch is imported (never imported here: without it no object is a
 * tensor): its Tensor type and raw-stream call. */
static int lookup(void)
{
    static PyObject *s_torch;
    PyObject *torch, *c, *version, *hip;
    const char *env;
    if (!s_torch) {
        env = getenv("UCCL_PY_TORCH_FAST");
        if ((env && !strcmp(env, "0")) || intern(&s_torch, "torch") < 0) {
            PyErr_Clear();
            return state = -1;
        }
    }
    torch = PyDict_GetItemWithError(PyImport_GetModuleDict(), s_torch);
    if (!torch) {
        PyErr_Clear();
        return 0; /* not imported (yet): ask again next time */
    }
    c = PyObject_GetAttrString(torch, "_C");
    tensor_type = (PyTypeObject *)PyObject_GetAttrString(torch, "Tensor");
    raw_stream = c ? PyObject_GetAttrString(c, "_cuda_getCurrentRawStream") : NULL;
    version = PyObject_GetAttrString(torch, "version");
    hip = version ? PyObject_GetAttrString(version, "hip") : NULL;
    Py_XDECREF(c);
    Py_XDECREF(version);
    if (!tensor_type || !PyType_Check(tensor_type) || !raw_stream || !hip ||
        intern(&s_is_cuda, "is_cuda") || intern(&s_requires_grad, "requires_grad") ||
        intern(&s_is_contiguous, "is_contiguous") || intern(&s_is_conj, "is_conj") ||
        intern(&s_is_neg, "is_neg") || intern(&s_data_ptr, "data_ptr") ||
        intern(&s_nbytes, "nbytes") || intern(&s_get_device, "get_device")) {
        PyErr_Clear();
        Py_XDECREF(hip);
        return state = -1;
    }
    mem_type = hip == Py_None ? UCCL_MEM_CUDA : UCCL_MEM_ROCM;
    Py_DECREF(hip);
    if (!getenv("UCCL_PY_TORCH_DESC") || strcmp(getenv("UCCL_PY_TORCH_DESC"), "0"))
        desc_lookup();
    return state = 1;
}

static PyObject **const desc_names[DESC_N] = {&s_is_cuda, &s_requires_grad, &s_is_contiguous,
                                               &s_is_conj, &s_is_neg, &s_data_ptr, &s_nbytes,
                                               &s_get_device};

/* Looked up once with the type: a descriptor kept only when it is torch's
 * C method or C attribute. */
static void desc_lookup(void)
{
    for (int i = 0; i < DESC_N; i++) {
        PyObject *d = PyObject_GetAttr((PyObject *)tensor_type, *desc_names[i]);
        if (d && (Py_IS_TYPE(d, &PyMethodDescr_Type) || Py_IS_TYPE(d, &PyGetSetDescr_Type)))
            desc[i] = d;
        else
            Py_XDECREF(d);
    }
    PyErr_Clear();
}

/* obj.name (call: obj.name()) through the kept descriptor, else generic. */
static PyObject *get(PyObject *obj, PyObject *name, int call)
{
    PyObject *d = NULL;
    for (int i = 0; i < DESC_N; i++)
        if (*desc_names[i] == name) {
            d = desc[i];
            break;
        }
    if (d && call && Py_IS_TYPE(d, &PyMethodDescr_Type))
        return PyObject_Vectorcall(d, &obj, 1, NULL);
    if (d && !call && Py_IS_TYPE(d, &PyGetSetDescr_Type))
        return Py_TYPE(d)->tp_descr_get(d, obj, (PyObject *)Py_TYPE(obj));
    return call ? PyObject_CallMethodNoArgs(obj, name) : PyObject_GetAttr(obj, name);
}

/* A boolean attribute (call: a method without arguments): 1, 0, -1. */
static int flag(PyObject *obj, PyObject *name, int call)
{
    PyObject *v = get(obj, name, call);
    int r = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    return r;
}

/* An integer attribute or method result, as a long long / pointer. */
static int number(PyObject *obj, PyObject *name, int call, long long *out)
{
    PyObject *v = get(obj, name, call);
    if (!v)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static void *current_stream(long long device)
{
    PyObject *d = PyLong_FromLongLong(device), *v;
    void *p;
    if (!d)
        return NULL;
    /* one argument, a vector call: no tuple, no format string */
    v = PyObject_Vectorcall(raw_stream, &d, 1, NULL);
    Py_DECREF(d);
    p = v ? PyLong_AsVoidPtr(v) : NULL;
    Py_XDECREF(v);
    return p;
}

/* The remembered tensors: a weak reference (no callback) to each; an entry
 * whose reference is dead is free. Under the GIL. */
#define SEEN_N 16
static struct {
    PyObject *ref;
    long long ptr, device;
} seen[SEEN_N];
static unsigned seen_next;
static unsigned long long seen_hits, seen_misses;

/* What ref points to, for comparison only (Py_None once dead). */
static PyObject *ref_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(ref, &o) < 0) {
        PyErr_Clear();
        return Py_None;
    }
    Py_XDECREF(o); /* alive elsewhere when it is the object asked about */
    return o ? o : Py_None;
#else
    return PyWeakref_GetObject(ref);
#endif
}

static int seen_find(PyObject *obj)
{
    for (int i = 0; i < SEEN_N; i++) {
        PyObject *o;
        if (!seen[i].ref)
            continue;
        o = ref_target(seen[i].ref);
        if (o == obj)
            return i;
    }
    return -1;
}

static void seen_add(PyObject *obj, long long ptr, long long device)
{
    PyObject *ref = PyWeakref_NewRef(obj, NULL);
    unsigned i = seen_next++ % SEEN_N;
    if (!ref) { /* no weak references: nothing remembered */
        PyErr_Clear();
        return;
    }
    for (int k = 0; k < SEEN_N; k++) /* a dead entry first */
        if (!seen[k].ref || ref_target(seen[k].ref) == Py_None) {
            i = (unsigned)k;
            break;
        }
    Py_XDECREF(seen[i].ref);
    seen[i].ref = ref;
    seen[i].ptr = ptr;
    seen[i].device = device;
}

/* _tensor_cache(clear=False) -> (hits, misses, live entries). */
PyObject *upy_tensor_cache(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"clear", NULL};
    int clear = 0, live = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:_tensor_cache", kwlist, &clear))
        return NULL;
    for (int i = 0; i < SEEN_N; i++) {
        if (seen[i].ref && clear)
            Py_CLEAR(seen[i].ref);
        live += seen[i].ref && ref_target(seen[i].ref) != Py_None;
    }
    return Py_BuildValue("(KKi)", seen_hits, seen_misses, live);
}

/* torch's current stream on device, read once per call (ord). */
static int call_stream(upy_order_t *ord, long long device, void **cur)
{
    if (ord->tdev_set && ord->tdev == device) {
        *cur = ord->tstream;
        return 0;
    }
    *cur = current_stream(device);
    if (PyErr_Occurred())
        return -1;
    ord->tdev_set = 1;
    ord->tdev = device;
    ord->tstream = *cur;
    return 0;
}

int upy_tensor_view(upy_mr_t *m, PyObject *obj, upy_order_t *ord)
{
    long long ptr, nbytes, device;
    void *cur;
    int hit;
    if (state == 0 && lookup() <= 0)
        return 1;
    if (state < 0 || !ord || Py_TYPE(obj) != tensor_type)
        return 1;
    hit = seen_find(obj);
    if (number(obj, s_data_ptr, 1, &ptr) < 0)
        goto general;
    if (hit >= 0 && seen[hit].ptr == ptr) {
        /* the same object at the same address: what in-place ops change
         * without moving it, read again */
        if (flag(obj, s_requires_grad, 0) != 0 || flag(obj, s_is_contiguous, 1) != 1)
            goto general;
        device = seen[hit].device;
        seen_hits++;
    } else {
        if (flag(obj, s_is_cuda, 0) != 1 || flag(obj, s_requires_grad, 0) != 0 ||
            flag(obj, s_is_contiguous, 1) != 1 || flag(obj, s_is_conj, 1) != 0 ||
            flag(obj, s_is_neg, 1) != 0)
            goto general; /* DLPack's handshake says what is wrong, if anything */
        if (number(obj, s_get_device, 1, &device) < 0)
            goto general;
        seen_misses++;
    }
    if (number(obj, s_nbytes, 0, &nbytes) < 0 || nbytes < 0)
        goto general;
    if (hit >= 0)
        seen[hit].ptr = ptr, seen[hit].device = device;
    else
        seen_add(obj, ptr, device);
    if (call_stream(ord, device, &cur) < 0)
        goto general;
    if (ord->stream_form) {
        if (upy_stream_norm(cur) != upy_stream_norm(ord->stream))
            return 1; /* another stream: torch's event through the handshake */
    } else {
        if (ord->n == UPY_ORDER_MAX)
            return 1;
        upy_order_add(ord, cur);
    }
    m->addr = (void *)(uintptr_t)ptr;
    m->len = (size_t)nbytes;
    m->readonly = 0;
    m->mem_type = mem_type;
    m->source = UPY_SRC_TENSOR;
    return 0;
general:
    PyErr_Clear();
    return 1;
}

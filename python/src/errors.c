/* Exceptions of the uccl module, generated from UCCL_STATUS_MAP: uccl.Error
 * (with .status and .name), uccl.PeerError for the peer/link range, and one
 * subclass per error status (UCCL_ERR_TIMEOUT -> uccl.TimeoutError). */
#include "upy.h"

#include <ctype.h>
#include <string.h>

typedef struct {
    const char *name; /* "ERR_TIMEOUT" */
    int value;
    const char *text;
} upy_status_entry_t;

static const upy_status_entry_t status_table[] = {
#define UPY_STATUS_ENTRY_(name, value, text) {#name, value, text},
    UCCL_STATUS_MAP(UPY_STATUS_ENTRY_)
#undef UPY_STATUS_ENTRY_
};
#define N_STATUS (sizeof(status_table) / sizeof(status_table[0]))

static PyObject *error_base;         /* uccl.Error */
static PyObject *peer_error_base;    /* uccl.PeerError */
static PyObject *classes[N_STATUS]; /* NULL for OK and INPROGRESS */

/* "ERR_OUT_OF_BOUNDS" -> "OutOfBoundsError" */
static void class_name(const char *status_name, char *out, size_t size)
{
    const char *p = strncmp(status_name, "ERR_", 4) == 0 ? status_name + 4 : status_name;
    size_t n = 0;
    int upper = 1;
    for (; *p && n + 6 < size; p++) {
        if (*p == '_') {
            upper = 1;
            continue;
        }
        out[n++] = (char)(upper ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
        upper = 0;
    }
    memcpy(out + n, "Error", 6);
}

/* A new exception class with class attributes .status and .name (the
 * status value and "UCCL_ERR_..." for a status class, None for the bases). */
static PyObject *make_class(const char *qualname, const char *doc, PyObject *bases,
                            const upy_status_entry_t *status)
{
    PyObject *dict = PyDict_New(), *v = NULL, *n = NULL, *cls = NULL;
    char name[64];
    if (!dict)
        return NULL;
    if (status) {
        snprintf(name, sizeof(name), "UCCL_%s", status->name);
        v = PyLong_FromLong(status->value);
        n = PyUnicode_FromString(name);
    } else {
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
        v = n = Py_None;
    }
    if (v && n && PyDict_SetItemString(dict, "status", v) == 0 &&
        PyDict_SetItemString(dict, "name", n) == 0)
        cls = PyErr_NewExceptionWithDoc(qualname, doc, bases, dict);
    Py_XDECREF(v);
    Py_XDECREF(n);
    Py_DECREF(dict);
    return cls;
}

static int add_status_class(PyObject *module, size_t i)
{
    const upy_status_entry_t *s = &status_table[i];
    char name[64], qual[80], doc[256];
    PyObject *bases;
    class_name(s->name, name, sizeof(name));
    snprintf(qual, sizeof(qual), "uccl.%s", name);
    snprintf(doc, sizeof(doc), "UCCL_%s: %s.", s->name, s->text);
    bases = UCCL_STATUS_IS_PEER_ERROR(s->value) ? peer_error_base : error_base;
    classes[i] = make_class(qual, doc, bases, s);
    if (!classes[i])
        return -1;
    Py_INCREF(classes[i]);
    return PyModule_AddObject(module, name, classes[i]) < 0 ? (Py_DECREF(classes[i]), -1) : 0;
}

int upy_errors_init(PyObject *module)
{
    error_base = make_class("uccl.Error",
                            "A libuccl call failed. .status is the uccl_status_t value, "
                            ".name its symbolic name (UCCL_ERR_...).",
                            PyExc_Exception, NULL);
    if (!error_base)
        return -1;
    Py_INCREF(error_base);
    if (PyModule_AddObject(module, "Error", error_base) < 0)
        return -1;
    peer_error_base = make_class("uccl.PeerError",
                                 "The peer or the link failed (statuses -100..-199).",
                                 error_base, NULL);
    if (!peer_error_base)
        return -1;
    Py_INCREF(peer_error_base);
    if (PyModule_AddObject(module, "PeerError", peer_error_base) < 0)
        return -1;
    for (size_t i = 0; i < N_STATUS; i++) {
        if (status_table[i].value < 0 && add_status_class(module, i) < 0)
            return -1;
        if (PyModule_AddIntConstant(module, status_table[i].name, status_table[i].value) < 0)
            return -1;
    }
    return 0;
}

PyObject *upy_raise(uccl_status_t status, const char *what)
{
    PyObject *cls = error_base, *exc, *v;
    for (size_t i = 0; i < N_STATUS; i++)
        if (status_table[i].value == (int)status && classes[i])
            cls = classes[i];
    exc = PyObject_CallFunction(cls, "s", "");
    if (!exc)
        return NULL;
    v = PyUnicode_FromFormat("%s: %s (%s)", what, uccl_strerror(status),
                             uccl_status_name(status));
    if (v) {
        PyObject *args = PyTuple_Pack(1, v);
        if (args) {
            PyObject_SetAttrString(exc, "args", args);
            Py_DECREF(args);
        }
        Py_DECREF(v);
    }
    v = PyLong_FromLong((long)status);
    if (v) {
        PyObject_SetAttrString(exc, "status", v);
        Py_DECREF(v);
    }
    v = PyUnicode_FromString(uccl_status_name(status));
    if (v) {
        PyObject_SetAttrString(exc, "name", v);
        Py_DECREF(v);
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

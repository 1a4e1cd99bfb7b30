/* The simulator's native kernels as a Python module. Each kernel takes the address of its
 * description (an int64 array packed by toolkit/sim/native) and int64 arguments (addresses of
 * memory regions and decoded streams): one call per NPU operation, so the call itself must be
 * cheap (a ctypes call of nine arguments cost 3 us, more than a small operation's work). The
 * kernels hold no Python object; the GIL is released while they run. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

int etk_conv(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t weights, int64_t bias,
             int64_t scale, int64_t shift, int64_t right, int64_t lut_mem);
int64_t etk_conv_desc_words(void);
int etk_elementwise(const void *desc, int64_t ifm_mem, int64_t ifm2_mem, int64_t ofm_mem,
                    int64_t lut_mem);
int64_t etk_elementwise_desc_words(void);
int etk_pool(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t lut_mem);
int64_t etk_pool_desc_words(void);

/* args as int64 into `out`, or 0 with the exception set */
static int int64_args(PyObject *const *args, Py_ssize_t n, Py_ssize_t expected, int64_t *out,
                      const char *name) {
    if (n != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", name, expected, n);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return 0;
    }
    return 1;
}

static PyObject *finished(int status, const char *name) {
    if (status) return PyErr_Format(PyExc_MemoryError, "%s could not allocate its buffers", name);
    Py_RETURN_NONE;
}

static PyObject *conv(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    int64_t v[9];
    if (!int64_args(args, n, 9, v, "conv")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_conv((const void *)(intptr_t)v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
    Py_END_ALLOW_THREADS
    return finished(status, "conv");
}

static PyObject *elementwise(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    int64_t v[5];
    if (!int64_args(args, n, 5, v, "elementwise")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_elementwise((const void *)(intptr_t)v[0], v[1], v[2], v[3], v[4]);
    Py_END_ALLOW_THREADS
    return finished(status, "elementwise");
}

static PyObject *pool(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    int64_t v[4];
    if (!int64_args(args, n, 4, v, "pool")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_pool((const void *)(intptr_t)v[0], v[1], v[2], v[3]);
    Py_END_ALLOW_THREADS
    return finished(status, "pool");
}

static PyMethodDef methods[] = {
    {"conv", (PyCFunction)(void (*)(void))conv, METH_FASTCALL,
     "conv(desc, ifm_mem, ofm_mem, weights, bias, scale, shift, right, lut_mem): conv.c"},
    {"elementwise", (PyCFunction)(void (*)(void))elementwise, METH_FASTCALL,
     "elementwise(desc, ifm_mem, ifm2_mem, ofm_mem, lut_mem): elementwise.c"},
    {"pool", (PyCFunction)(void (*)(void))pool, METH_FASTCALL,
     "pool(desc, ifm_mem, ofm_mem, lut_mem): pool.c"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The simulator's native kernels (toolkit/sim/native).",
    -1, methods, NULL, NULL, NULL, NULL,
};

/* DESC_WORDS: each kernel's description size, which the Python packer checks its layout against */
PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *words = Py_BuildValue("{s:L,s:L,s:L}", "conv", (long long)etk_conv_desc_words(),
                                    "elementwise", (long long)etk_elementwise_desc_words(),
                                    "pool", (long long)etk_pool_desc_words());
    if (words == NULL || PyModule_AddObject(m, "DESC_WORDS", words) < 0) {
        Py_XDECREF(words);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

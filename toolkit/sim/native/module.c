/* The simulator's native kernels as one library (conv.c, ...). The module has no Python
 * functions: Python calls the kernels through ctypes (toolkit/sim/native), so nothing in them
 * holds a Python object or the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The simulator's native kernels, called through ctypes.",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }

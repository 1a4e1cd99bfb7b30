/* The simulator's native kernels as a Python module. Each kernel takes the address of its
 * description (an int64 array packed by toolkit/sim/native) and int64 arguments (addresses of
 * memory regions and decoded streams): one call per NPU operation, so the call itself must be
 * cheap (a ctypes call of nine arguments cost 3 us, more than a small operation's work). The
 * kernels hold no Python object; the GIL is released while they run. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

int etk_conv(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t weights, int64_t bias,
             int64_t scale, int64_t shift, int64_t right, int64_t lut_mem);
int64_t etk_conv_desc_words(void);
int etk_elementwise(const void *desc, int64_t ifm_mem, int64_t ifm2_mem, int64_t ofm_mem,
                    int64_t lut_mem);
int64_t etk_elementwise_desc_words(void);
int etk_pool(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t lut_mem);
int64_t etk_pool_desc_words(void);
int etk_copy(const void *desc, int64_t src_mem, int64_t dst_mem, int64_t table);
int64_t etk_copy_desc_words(void);
PyObject *etk_parse_bin_stream(PyObject *self, PyObject *raw);

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

static PyObject *copy(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    int64_t v[4];
    if (!int64_args(args, n, 4, v, "copy")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_copy((const void *)(intptr_t)v[0], v[1], v[2], v[3]);
    Py_END_ALLOW_THREADS
    return finished(status, "copy");
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

/* A batch: `rows` operations, each ROW_WORDS int64 words (native/batch.py packs them): kernel,
 * the slots of IFM, IFM2, OFM and LUT memory (-1: none) in `memory` (regions 0-7 then the
 * SHRAM), then the addresses: the description, and the weights, bias, scale, shift and
 * right-shift arrays of a convolution, or a copy's byte table (copy.c: IFM slot the source, OFM
 * slot the destination), or a check row's expected bytes.
 * Runs them in turn and stops at the first that fails, or at a check row whose bytes changed:
 * then returns that row's number (the caller runs the rest another way), else None. */
enum { KERNEL_CONV = 0, KERNEL_ELEMENTWISE = 1, KERNEL_POOL = 2, KERNEL_COPY = 3, KERNEL_CHECK = 4 };
#define STALE 2 /* a check row's bytes differ: run_batch returns the row's number */
#define ROW_WORDS 11
#define MEMORY_SLOTS 9

/* A check row: whether `length` bytes at `offset` of its IFM slot's memory are still the
 * `expected` ones (row[6]) that the rows after it were made with (a stream Vela DMAs in). */
#define CHECK_WORDS 2 /* offset, length */
static int check(const int64_t *desc, int64_t memory, int64_t expected) {
    const uint8_t *at = (const uint8_t *)(intptr_t)memory + desc[0];
    return memcmp(at, (const void *)(intptr_t)expected, (size_t)desc[1]) ? STALE : 0;
}

static int run_row(const int64_t *row, const int64_t *memory) {
    int64_t at[4];
    for (int i = 0; i < 4; i++) at[i] = row[1 + i] < 0 ? 0 : memory[row[1 + i]];
    const void *desc = (const void *)(intptr_t)row[5];
    switch (row[0]) {
    case KERNEL_CONV:
        return etk_conv(desc, at[0], at[2], row[6], row[7], row[8], row[9], row[10], at[3]);
    case KERNEL_ELEMENTWISE:
        return etk_elementwise(desc, at[0], at[1], at[2], at[3]);
    case KERNEL_POOL:
        return etk_pool(desc, at[0], at[2], at[3]);
    case KERNEL_COPY:
        return etk_copy(desc, at[0], at[2], row[6]);
    case KERNEL_CHECK:
        return check(desc, at[0], row[6]);
    default:
        return -1;
    }
}

static PyObject *run_batch(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    int64_t v[2 + MEMORY_SLOTS];
    if (!int64_args(args, n, 2 + MEMORY_SLOTS, v, "run_batch")) return NULL;
    const int64_t *table = (const int64_t *)(intptr_t)v[0];
    for (int64_t r = 0; r < v[1]; r++) {
        const int64_t *row = table + r * ROW_WORDS;
        if (row[0] < KERNEL_CONV || row[0] > KERNEL_CHECK)
            return PyErr_Format(PyExc_ValueError, "run_batch: row %lld names no kernel", r);
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = run_row(row, v + 2);
        Py_END_ALLOW_THREADS
        if (status == STALE) return PyLong_FromLongLong(r);
        if (status) return finished(status, "run_batch");
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"conv", (PyCFunction)(void (*)(void))conv, METH_FASTCALL,
     "conv(desc, ifm_mem, ofm_mem, weights, bias, scale, shift, right, lut_mem): conv.c"},
    {"elementwise", (PyCFunction)(void (*)(void))elementwise, METH_FASTCALL,
     "elementwise(desc, ifm_mem, ifm2_mem, ofm_mem, lut_mem): elementwise.c"},
    {"pool", (PyCFunction)(void (*)(void))pool, METH_FASTCALL,
     "pool(desc, ifm_mem, ofm_mem, lut_mem): pool.c"},
    {"copy", (PyCFunction)(void (*)(void))copy, METH_FASTCALL,
     "copy(desc, src_mem, dst_mem, table): copy.c"},
    {"run_batch", (PyCFunction)(void (*)(void))run_batch, METH_FASTCALL,
     "run_batch(table, rows, memory0, ..., memory7, shram): rows of kernel calls in turn"},
    {"parse_bin_stream", etk_parse_bin_stream, METH_O,
     "parse_bin_stream(raw): a vela_bin_stream's parts, or None (payload.c)"},
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
    PyObject *words = Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L}", "conv", (long long)etk_conv_desc_words(), "elementwise",
        (long long)etk_elementwise_desc_words(), "pool", (long long)etk_pool_desc_words(),
        "copy", (long long)etk_copy_desc_words(), "check", (long long)CHECK_WORDS, "run_batch",
        (long long)ROW_WORDS);
    if (words == NULL || PyModule_AddObject(m, "DESC_WORDS", words) < 0) {
        Py_XDECREF(words);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

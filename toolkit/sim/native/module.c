/* The simulator's native kernels as a Python module. Each kernel takes the address of its
 * description (an int64 array packed by toolkit/sim/native) and int64 arguments (addresses of
 * memory regions and decoded streams): one call per NPU operation, so the call itself must be
 * cheap (a ctypes call takes longer than a small operation's work). The
 * kernels hold no Python object; the GIL is released while they run. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "table.h"

/* Each kernel takes the sizes of the memories it is given and returns OUTSIDE, touching
 * nothing, where its description reaches past them (native.h). */
int etk_conv(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t weights, int64_t bias,
             int64_t scale, int64_t shift, int64_t right, int64_t lut_mem, const int64_t sizes[4]);
int etk_elementwise(const void *desc, int64_t ifm_mem, int64_t ifm2_mem, int64_t ofm_mem,
                    int64_t lut_mem, const int64_t sizes[4]);
int etk_pool(const void *desc, int64_t ifm_mem, int64_t ofm_mem, int64_t lut_mem,
             const int64_t sizes[4]);
int etk_copy(const void *desc, int64_t src_mem, int64_t dst_mem, int64_t table, int64_t src_size,
             int64_t dst_size);

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

#define OUTSIDE 3 /* native.h */

/* None, or the exception of a kernel's status: ValueError where its description reaches
 * outside its memory (the Python side names the operation), MemoryError where it could not
 * allocate */
static PyObject *finished(int status, const char *name) {
    if (status == OUTSIDE)
        return PyErr_Format(PyExc_ValueError, "%s: the description reaches outside its memory",
                            name);
    if (status) return PyErr_Format(PyExc_MemoryError, "%s could not allocate its buffers", name);
    Py_RETURN_NONE;
}

static PyObject *conv(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t n) {
    int64_t v[12];
    if (!int64_args(args, n, 12, v, "conv")) return NULL;
    int64_t sizes[4] = {v[9], 0, v[10], v[11]};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_conv((const void *)(intptr_t)v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                      sizes);
    Py_END_ALLOW_THREADS
    return finished(status, "conv");
}

static PyObject *elementwise(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t n) {
    int64_t v[9];
    if (!int64_args(args, n, 9, v, "elementwise")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_elementwise((const void *)(intptr_t)v[0], v[1], v[2], v[3], v[4], v + 5);
    Py_END_ALLOW_THREADS
    return finished(status, "elementwise");
}

static PyObject *copy(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t n) {
    int64_t v[6];
    if (!int64_args(args, n, 6, v, "copy")) return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_copy((const void *)(intptr_t)v[0], v[1], v[2], v[3], v[4], v[5]);
    Py_END_ALLOW_THREADS
    return finished(status, "copy");
}

static PyObject *pool(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t n) {
    int64_t v[7];
    if (!int64_args(args, n, 7, v, "pool")) return NULL;
    int64_t sizes[4] = {v[4], 0, v[5], v[6]};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = etk_pool((const void *)(intptr_t)v[0], v[1], v[2], v[3], sizes);
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
#define STALE 2 /* a check row's bytes differ: run_batch returns the row's number */

/* A check row: whether `length` bytes at `offset` of its IFM slot's memory (size bytes) are
 * still the `expected` ones (row[6]) that the rows after it were made with (a stream Vela DMAs
 * in). */
static int check(const int64_t *desc, int64_t memory, int64_t size, int64_t expected) {
    if (desc[0] < 0 || desc[1] < 0 || desc[0] > size || desc[1] > size - desc[0]) return OUTSIDE;
    const uint8_t *at = (const uint8_t *)(intptr_t)memory + desc[0];
    return memcmp(at, (const void *)(intptr_t)expected, (size_t)desc[1]) ? STALE : 0;
}

static int run_row(const int64_t *row, const int64_t *memory, const int64_t *memory_sizes) {
    int64_t at[4], sizes[4];
    for (int i = 0; i < 4; i++) {
        int64_t slot = row[1 + i];
        if (slot >= MEMORY_SLOTS) return OUTSIDE;
        at[i] = slot < 0 ? 0 : memory[slot];
        sizes[i] = slot < 0 ? 0 : memory_sizes[slot];
    }
    const void *desc = (const void *)(intptr_t)row[5];
    switch (row[0]) {
    case KERNEL_CONV:
        return etk_conv(desc, at[0], at[2], row[6], row[7], row[8], row[9], row[10], at[3], sizes);
    case KERNEL_ELEMENTWISE:
        return etk_elementwise(desc, at[0], at[1], at[2], at[3], sizes);
    case KERNEL_POOL:
        return etk_pool(desc, at[0], at[2], at[3], sizes);
    case KERNEL_COPY:
        return etk_copy(desc, at[0], at[2], row[6], sizes[0], sizes[2]);
    case KERNEL_CHECK:
        return check(desc, at[0], sizes[0], row[6]);
    default:
        return -1;
    }
}

/* run_batch(table, memory0, ..., memory7, shram): the rows of table (any buffer of int64 words,
 * ROW_WORDS a row) in turn. memory0-7 and shram: each the buffer of a memory slot the rows use,
 * or None (a row that names a slot given as None is refused: size 0). */
#define RUN_BATCH_ARGS (1 + MEMORY_SLOTS)
static PyObject *run_batch(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t n) {
    if (n != RUN_BATCH_ARGS)
        return PyErr_Format(PyExc_TypeError, "run_batch takes %d arguments, got %zd",
                            RUN_BATCH_ARGS, n);
    Py_buffer buffers[RUN_BATCH_ARGS];
    int64_t memory[MEMORY_SLOTS] = {0}, sizes[MEMORY_SLOTS] = {0};
    Py_ssize_t got = 0;
    for (; got < RUN_BATCH_ARGS; got++) {
        buffers[got].obj = NULL;
        if (got >= 1 && args[got] == Py_None) continue;
        if (PyObject_GetBuffer(args[got], &buffers[got], PyBUF_SIMPLE) < 0) break;
        if (got >= 1) {
            memory[got - 1] = (int64_t)(intptr_t)buffers[got].buf;
            sizes[got - 1] = (int64_t)buffers[got].len;
        }
    }
    PyObject *result = NULL;
    if (got < RUN_BATCH_ARGS) goto done;
    const Py_buffer *table = &buffers[0];
    int64_t rows = table->len / (ROW_WORDS * 8);
    for (int64_t r = 0; r < rows; r++) {
        int64_t row[ROW_WORDS];
        memcpy(row, (const int64_t *)table->buf + r * ROW_WORDS, sizeof row);
        if (row[0] < KERNEL_CONV || row[0] > KERNEL_CHECK) {
            PyErr_Format(PyExc_ValueError, "run_batch: row %lld names no kernel", r);
            goto done;
        }
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = run_row(row, memory, sizes);
        Py_END_ALLOW_THREADS
        if (status == STALE) {
            result = PyLong_FromLongLong(r);
            goto done;
        }
        if (status) {
            result = finished(status, "run_batch");
            goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        if (buffers[i].obj != NULL) PyBuffer_Release(&buffers[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"conv", (PyCFunction)(void (*)(void))conv, METH_FASTCALL,
     "conv(desc, ifm_mem, ofm_mem, weights, bias, scale, shift, right, lut_mem, ifm_size, "
     "ofm_size, lut_size): conv.c"},
    {"elementwise", (PyCFunction)(void (*)(void))elementwise, METH_FASTCALL,
     "elementwise(desc, ifm_mem, ifm2_mem, ofm_mem, lut_mem, ifm_size, ifm2_size, ofm_size, "
     "lut_size): elementwise.c"},
    {"pool", (PyCFunction)(void (*)(void))pool, METH_FASTCALL,
     "pool(desc, ifm_mem, ofm_mem, lut_mem, ifm_size, ofm_size, lut_size): pool.c"},
    {"copy", (PyCFunction)(void (*)(void))copy, METH_FASTCALL,
     "copy(desc, src_mem, dst_mem, table, src_size, dst_size): copy.c"},
    {"run_batch", (PyCFunction)(void (*)(void))run_batch, METH_FASTCALL,
     "run_batch(table, memory0, ..., memory7, shram): rows of kernel calls in turn"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The simulator's native kernels (toolkit/sim/native).",
    -1, methods, NULL, NULL, NULL, NULL,
};

/* DESC_WORDS: each kernel's description size, which the Python packer checks its layout
 * against, and the module's interface (table.h) */
PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *words = Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "conv", (long long)etk_conv_desc_words(), "elementwise",
        (long long)etk_elementwise_desc_words(), "pool", (long long)etk_pool_desc_words(),
        "copy", (long long)etk_copy_desc_words(), "check", (long long)CHECK_WORDS, "run_batch",
        (long long)ROW_WORDS, "interface", (long long)INTERFACE);
    if (words == NULL || PyModule_AddObject(m, "DESC_WORDS", words) < 0) {
        Py_XDECREF(words);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

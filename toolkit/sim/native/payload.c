/* A vela_bin_stream's blocks, read in one call (payload.py's _load_bin_stream, which stays the
 * reference and gives the error messages): a first inference of a small program spent a fifth
 * of its time walking the payload's blocks in Python. Anything out of the ordinary (a truncated
 * or malformed block, an unknown driver action, a bad tensor record) returns None, and the
 * Python parser says what is wrong. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define HEADER 32
#define NAME 16
#define IO_RECORD 36 /* 9 int32: shape[6], element size, offset, region */
enum { DA_CONFIG = 1, DA_CMDSTREAM = 2, DA_READ_APB = 3, DA_DUMP_SHRAM = 4, DA_NOP = 5 };

typedef struct {
    const uint8_t *at;
    Py_ssize_t length;
} block;

static uint32_t u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int named(const uint8_t *header, const char *name) {
    size_t n = strlen(name);
    return memcmp(header, name, n) == 0 && (n == NAME || header[n] == 0);
}

/* A tensor's bytes: the product of its element size and shape, in Python ints past 62 bits */
static PyObject *tensor_bytes(const int32_t *v) {
    int64_t bytes = v[6];
    for (int k = 0; k < 6 && bytes >= 0; k++)
        bytes = v[k] > 0 && bytes > ((int64_t)1 << 62) / v[k] ? -1 : bytes * v[k];
    if (bytes >= 0) return PyLong_FromLongLong(bytes);
    PyObject *product = PyLong_FromLong(v[6]);
    for (int k = 0; product != NULL && k < 6; k++) {
        PyObject *dim = PyLong_FromLong(v[k]);
        PyObject *next = dim == NULL ? NULL : PyNumber_Multiply(product, dim);
        Py_XDECREF(dim);
        Py_SETREF(product, next);
    }
    return product;
}

/* A NamedTuple `type` of these fields (its reference taken), as type._make makes it:
 * tuple.__new__(type, fields) */
static PyObject *made(PyObject *type, PyObject *fields) {
    if (fields == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, fields);
    Py_DECREF(fields);
    PyObject *result = args == NULL ? NULL : PyTuple_Type.tp_new((PyTypeObject *)type, args, NULL);
    Py_XDECREF(args);
    return result;
}

/* The tensors of an inputs/outputs block as `type` (payload.IOTensor) of ((shape), element
 * size, offset, region, bytes, (shape without its leading ones)), or NULL (no exception set)
 * when the block is not well formed. */
static PyObject *tensors(block b, PyObject *type) {
    if (b.length < 4) return NULL;
    int32_t count = (int32_t)u32(b.at);
    if (count < 0 || 4 + (Py_ssize_t)count * IO_RECORD != b.length) return NULL;
    PyObject *out = PyTuple_New(count);
    if (out == NULL) return NULL;
    for (int32_t i = 0; i < count; i++) {
        int32_t v[9];
        for (int k = 0; k < 9; k++) v[k] = (int32_t)u32(b.at + 4 + i * IO_RECORD + 4 * k);
        int bad = (v[6] != 1 && v[6] != 2 && v[6] != 4) || v[7] < 0;
        for (int k = 0; k < 6; k++) bad |= v[k] < 0;
        int first = 0;
        while (first < 5 && v[first] == 1) first++;
        PyObject *squeezed = bad ? NULL : PyTuple_New(6 - first);
        for (int k = first; squeezed != NULL && k < 6; k++) {
            PyObject *n = PyLong_FromLong(v[k]);
            if (n == NULL) Py_CLEAR(squeezed);
            else PyTuple_SET_ITEM(squeezed, k - first, n);
        }
        PyObject *bytes = squeezed == NULL ? NULL : tensor_bytes(v);
        PyObject *t = bytes == NULL ? NULL
                                    : made(type, Py_BuildValue("((iiiiii)iiiNN)", v[0], v[1],
                                                               v[2], v[3], v[4], v[5], v[6], v[7],
                                                               v[8], bytes, squeezed));
        if (t == NULL && bytes == NULL) Py_XDECREF(squeezed);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, t);
    }
    return out;
}

/* parse_bin_stream(raw, tensor_type, config_type) -> (command stream, weights, scratch size,
 * inputs, outputs, config or None), or None: inputs and outputs as tensors() gives them, the
 * config as config_type (payload.DriverConfig) of (MACs per cycle log2, SHRAM KB, product) */
PyObject *etk_parse_bin_stream(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "parse_bin_stream takes 3 arguments, got %zd",
                            nargs);
    PyObject *raw = args[0], *tensor_type = args[1], *config_type = args[2];
    for (int i = 1; i < 3; i++)
        if (!PyType_Check(args[i]) || !PyType_IsSubtype((PyTypeObject *)args[i], &PyTuple_Type))
            return PyErr_Format(PyExc_TypeError, "parse_bin_stream: %R is not a tuple type",
                                args[i]);
    Py_buffer view;
    if (PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *data = view.buf;
    Py_ssize_t size = view.len, pos = 0;
    block cmd = {0}, weights = {0}, scratch = {0}, inputs = {0}, outputs = {0};
    int found = 0, ended = 0;
    PyObject *result = NULL;
    while (pos + HEADER <= size) {
        const uint8_t *header = data + pos;
        Py_ssize_t length = u32(header + NAME);
        if ((pos == 0 && !named(header, "vela_bin_stream")) || header[NAME + 4] ||
            length > size - pos - HEADER)
            goto done;
        block b = {header + HEADER, length};
        if (named(header, "cmd_data")) cmd = b, found |= 1;
        else if (named(header, "weight_data")) weights = b, found |= 2;
        else if (named(header, "scratch_size")) scratch = b, found |= 4;
        else if (named(header, "inputs")) inputs = b, found |= 8;
        else if (named(header, "outputs")) outputs = b, found |= 16;
        pos += HEADER + (length + 15) / 16 * 16;
        if (named(header, "vela_end_stream")) {
            ended = 1;
            break;
        }
    }
    if (!ended || found != 31 || scratch.length != 4 || cmd.length % 4 || cmd.length < 4 ||
        memcmp(cmd.at, "COP1", 4))
        goto done;
    Py_ssize_t words = cmd.length / 4, i = 1;
    long long config = -1;
    block stream = {0};
    while (i < words && stream.at == NULL) {
        uint32_t tag = u32(cmd.at + 4 * i), action = tag & 0xFF;
        if (action == DA_CONFIG) {
            if (i + 2 >= words) goto done;
            config = u32(cmd.at + 4 * i + 4);
            i += 3;
        } else if (action == DA_CMDSTREAM) {
            Py_ssize_t length = (Py_ssize_t)((tag >> 16) | ((tag >> 8) & 0xFF) << 16) * 4;
            Py_ssize_t start = (i + 1) * 4;
            if (start + length > cmd.length) goto done;
            stream.at = cmd.at + start;
            stream.length = length;
        } else if (action == DA_NOP || action == DA_READ_APB || action == DA_DUMP_SHRAM) {
            i += 1;
        } else {
            goto done;
        }
    }
    if (stream.at == NULL) goto done;
    PyObject *ins = tensors(inputs, tensor_type);
    PyObject *outs = ins == NULL ? NULL : tensors(outputs, tensor_type);
    if (outs != NULL) {
        PyObject *cfg = config < 0 ? Py_NewRef(Py_None)
                                   : made(config_type, Py_BuildValue("(LLL)", config & 0xF,
                                                                     (config >> 8) & 0xFF,
                                                                     config >> 28));
        if (cfg == NULL) {
            Py_DECREF(ins);
            Py_DECREF(outs);
        } else { /* N: the tuple takes the three references */
            result = Py_BuildValue("(y#y#INNN)", (const char *)stream.at, stream.length,
                                   (const char *)weights.at, weights.length, u32(scratch.at), ins,
                                   outs, cfg);
        }
    } else {
        Py_XDECREF(ins);
    }
done:
    PyBuffer_Release(&view);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}


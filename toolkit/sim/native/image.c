/* A plan image's file as derived_store.py writes it, read in one call: its numbers, and its
 * table and blob as views of the file's bytes, checked so that run_batch can run them. Reading
 * the same numbers from a JSON header and checking the table in Python cost a small program's
 * first inference a fifth of its time.
 *
 * The file: a 32-byte SHA-256 of the rest (checked by the caller), then int64 words:
 *   "ETKIMAGE", header words (these two included), operations, rows,
 *   extent pairs E, then E x (region, bytes); constant regions C, then C regions;
 *   rows x the step each row runs; timing entries T, then T x (key, N, P, N cycles,
 *   N compute cycles, P PMU figures)
 * then the table (rows x ROW_WORDS words) at the first 16-byte boundary after the header, and
 * the blob at the first 16-byte boundary after the table, to the end of the file. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "table.h"

#define DIGEST 32
#define MAGIC "ETKIMAGE"
#define REGIONS 8

typedef struct {
    const int64_t *words;
    int64_t end, at;
    int ok;
} reader;

static int64_t next(reader *r) {
    if (r->at >= r->end) {
        r->ok = 0;
        return 0;
    }
    return r->words[r->at++];
}

/* A count of items of `size` words each that follow it, or 0 (not ok) past the header */
static int64_t count(reader *r, int64_t size) {
    int64_t n = next(r);
    if (n < 0 || n > (r->end - r->at) / size) {
        r->ok = 0;
        return 0;
    }
    return n;
}

/* n words from the reader as a list, each checked against [lo, hi) */
static PyObject *int_list(reader *r, int64_t n, int64_t lo, int64_t hi) {
    PyObject *list = r->ok ? PyList_New(n) : NULL;
    for (int64_t i = 0; list != NULL && i < n; i++) {
        int64_t v = next(r);
        PyObject *item = r->ok && v >= lo && v < hi ? PyLong_FromLongLong(v) : NULL;
        if (item == NULL) {
            r->ok = 0;
            Py_CLEAR(list);
        } else {
            PyList_SET_ITEM(list, i, item);
        }
    }
    return list;
}

static PyObject *as_tuple(PyObject *list) {
    PyObject *tuple = list == NULL ? NULL : PyList_AsTuple(list);
    Py_XDECREF(list);
    return tuple;
}

/* dict[key] = value, both references taken; a NULL one (or a failed set) drops the dict and
 * marks the reader not ok */
static void put(reader *r, PyObject **dict, PyObject *key, PyObject *value) {
    if (*dict != NULL && (key == NULL || value == NULL || PyDict_SetItem(*dict, key, value) < 0)) {
        r->ok = 0;
        Py_CLEAR(*dict);
    }
    Py_XDECREF(key);
    Py_XDECREF(value);
}

static PyObject *read_extent(reader *r) {
    int64_t n = count(r, 2);
    PyObject *extent = r->ok ? PyDict_New() : NULL;
    for (int64_t i = 0; extent != NULL && i < n; i++) {
        int64_t region = next(r), bytes = next(r);
        int fits = r->ok && region >= 0 && region < REGIONS && bytes >= 0;
        put(r, &extent, fits ? PyLong_FromLongLong(region) : NULL,
            fits ? PyLong_FromLongLong(bytes) : NULL);
    }
    return extent;
}

static PyObject *read_timing(reader *r) {
    int64_t n = count(r, 3);
    PyObject *timing = r->ok ? PyDict_New() : NULL;
    for (int64_t i = 0; timing != NULL && i < n; i++) {
        int64_t key = next(r), ops = count(r, 2), figures = next(r);
        if (figures < 0 || figures > r->end - r->at) r->ok = 0;
        PyObject *cycles = int_list(r, ops, INT64_MIN, INT64_MAX);
        PyObject *compute = int_list(r, ops, INT64_MIN, INT64_MAX);
        PyObject *pmu = as_tuple(int_list(r, figures, INT64_MIN, INT64_MAX));
        PyObject *entry = cycles && compute && pmu ? PyTuple_Pack(3, cycles, compute, pmu) : NULL;
        Py_XDECREF(cycles);
        Py_XDECREF(compute);
        Py_XDECREF(pmu);
        put(r, &timing, PyLong_FromLongLong(key), entry);
    }
    return timing;
}

static Py_ssize_t aligned(Py_ssize_t offset) { return (offset + 15) / 16 * 16; }

/* open_image(raw) -> (table, blob, steps, regions, extent, constant regions, operations,
 * timing) or None where raw (the whole file) is not a plan image that can run. table and blob
 * are memoryviews of raw; regions: (memory slot, region) of each slot the rows use (the SHRAM's
 * region -1, memory.INTERNAL); timing maps each key to (cycles, compute cycles, PMU figures). */
PyObject *etk_open_image(PyObject *self, PyObject *raw) {
    Py_buffer file;
    if (PyObject_GetBuffer(raw, &file, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *body = (const uint8_t *)file.buf + DIGEST;
    Py_ssize_t size = file.len - DIGEST;
    PyObject *steps = NULL, *extent = NULL, *constant = NULL, *timing = NULL, *regions = NULL;
    PyObject *whole = NULL, *table = NULL, *blob = NULL, *operations = NULL, *result = NULL;
    reader r = {(const int64_t *)body, 0, 2, 1};
    int used[MEMORY_SLOTS] = {0};
    if (size < 16 || (uintptr_t)body % 16 || memcmp(body, MAGIC, 8)) goto done;
    r.end = r.words[1];
    if (r.end < 4 || r.end > size / 8) goto done;
    int64_t operation_count = next(&r), rows = next(&r);
    extent = read_extent(&r);
    int64_t constant_count = count(&r, 1);
    PyObject *constant_list = int_list(&r, constant_count, 0, REGIONS);
    constant = constant_list == NULL ? NULL : PyFrozenSet_New(constant_list);
    Py_XDECREF(constant_list);
    if (rows < 0 || rows > r.end - r.at) r.ok = 0;
    steps = as_tuple(int_list(&r, rows, 0, operation_count));
    timing = read_timing(&r);
    if (!r.ok || r.at != r.end || !extent || !constant || !steps || !timing) goto done;
    Py_ssize_t table_start = aligned(8 * r.end), table_end = table_start + rows * ROW_WORDS * 8;
    Py_ssize_t blob_start = aligned(table_end);
    if (blob_start > size || !etk_table_fits((const int64_t *)(body + table_start), rows,
                                             body + blob_start, (uint64_t)(size - blob_start),
                                             used))
        goto done;
    PyObject *list = PyList_New(0);
    for (int i = 0; list != NULL && i < MEMORY_SLOTS; i++) {
        PyObject *pair = used[i] ? Py_BuildValue("(ii)", i, i == SHRAM_SLOT ? -1 : i) : NULL;
        if (used[i] && (pair == NULL || PyList_Append(list, pair) < 0)) Py_CLEAR(list);
        Py_XDECREF(pair);
    }
    regions = as_tuple(list);
    whole = PyMemoryView_FromObject(raw);
    if (whole != NULL) {
        table = PySequence_GetSlice(whole, DIGEST + table_start, DIGEST + table_end);
        blob = PySequence_GetSlice(whole, DIGEST + blob_start, file.len);
    }
    operations = PyLong_FromLongLong(operation_count);
    if (regions && table && blob && operations)
        result = PyTuple_Pack(8, table, blob, steps, regions, extent, constant, operations, timing);
done:
    PyBuffer_Release(&file);
    Py_XDECREF(whole);
    Py_XDECREF(operations);
    Py_XDECREF(steps);
    Py_XDECREF(extent);
    Py_XDECREF(constant);
    Py_XDECREF(timing);
    Py_XDECREF(regions);
    Py_XDECREF(table);
    Py_XDECREF(blob);
    if (result == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}

/* acrobat._native: the runtime's per-launch bookkeeping that is one pass over int64 buffers.
 *
 * This is acrobat's whole native boundary (plain CPython C API, no numpy or torch headers; built by
 * setup.py with setuptools and a C compiler). Arguments are any objects exporting a C-contiguous
 * buffer of 8-byte signed ints (array.array("q"), numpy int64 arrays); nothing is kept across calls.
 *
 * arena_rows(handles, arena_offset, pool_base, out) -> bool
 *
 *   A launch's argument handles, stored node after node (``columns = len(pool_base)`` per node),
 *   located in the arena in one pass (see acrobat.runtime.dfg: a handle h of source
 *   src = h >> ROW_BITS lies at ``arena_offset[src] + h``, which is ``pool id << POOL_SHIFT | row``,
 *   negative when not placed). Writes column j's rows ``arena_offset[src] + h - pool_base[j]`` into
 *   ``out[j * nodes + i]`` (out is (columns, nodes), column-major: each column one index vector)
 *   and returns True when every value of column j lies in the pool ``pool_base[j]`` names (0 <= row
 *   < 2**POOL_SHIFT), else False (out is then partly written and meaningless).
 *   Replaces five numpy calls and a transposing copy (handle_matrix + ValueTable.arena_rows).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ROW_BITS 24    /* acrobat.runtime.dfg.ROW_BITS */
#define POOL_SHIFT 40  /* acrobat.runtime.dfg.POOL_SHIFT */

/* Get a C-contiguous buffer of int64 from obj (writable if asked); 0 on success, -1 with an exception. */
static int int64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (view->itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyErr_Format(PyExc_TypeError, "arena_rows: %s must be a buffer of int64 (got format '%s', itemsize %zd)",
                     what, view->format ? view->format : "B", view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *arena_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "arena_rows(handles, arena_offset, pool_base, out) takes 4 arguments");
        return NULL;
    }
    Py_buffer hb, ob, pb, outb;
    if (int64_buffer(args[0], &hb, 0, "handles") < 0)
        return NULL;
    if (int64_buffer(args[1], &ob, 0, "arena_offset") < 0) {
        PyBuffer_Release(&hb);
        return NULL;
    }
    if (int64_buffer(args[2], &pb, 0, "pool_base") < 0) {
        PyBuffer_Release(&hb);
        PyBuffer_Release(&ob);
        return NULL;
    }
    if (int64_buffer(args[3], &outb, 1, "out") < 0) {
        PyBuffer_Release(&hb);
        PyBuffer_Release(&ob);
        PyBuffer_Release(&pb);
        return NULL;
    }
    const int64_t *h = (const int64_t *)hb.buf, *offset = (const int64_t *)ob.buf, *base = (const int64_t *)pb.buf;
    int64_t *out = (int64_t *)outb.buf;
    Py_ssize_t n_handles = hb.len / 8, n_offset = ob.len / 8, columns = pb.len / 8, n_out = outb.len / 8;
    PyObject *result = NULL;
    if (columns == 0 || n_handles % columns != 0 || n_out != n_handles) {
        PyErr_Format(PyExc_ValueError, "arena_rows: %zd handles, %zd columns, out of %zd items: out must hold "
                     "one row per handle and handles a whole number of nodes", n_handles, columns, n_out);
        goto done;
    }
    Py_ssize_t nodes = n_handles / columns;
    int ok = 1;
    for (Py_ssize_t i = 0; i < nodes && ok; i++) {
        for (Py_ssize_t j = 0; j < columns; j++) {
            int64_t v = h[i * columns + j];
            int64_t src = v >> ROW_BITS;
            if (src < 0 || src >= n_offset) { /* a handle of no group output the table knows */
                ok = 0;
                break;
            }
            /* unsigned: a negative row (not placed, or a lower pool) is huge, like a row of a higher pool */
            uint64_t row = (uint64_t)offset[src] + (uint64_t)v - (uint64_t)base[j];
            if (row >= ((uint64_t)1 << POOL_SHIFT)) {
                ok = 0;
                break;
            }
            out[j * nodes + i] = (int64_t)row;
        }
    }
    result = PyBool_FromLong(ok);
done:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&outb);
    return result;
}

static PyMethodDef methods[] = {
    {"arena_rows", (PyCFunction)(void (*)(void))arena_rows, METH_FASTCALL,
     "arena_rows(handles, arena_offset, pool_base, out) -> bool: locate a launch's handles in the arena "
     "(see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "acrobat._native",
                                    "acrobat's per-launch bookkeeping over int64 buffers (see _native.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }

/* acrobat._native: the runtime's per-DFG-node and per-launch bookkeeping (paper §4.1), in C.
 *
 * This is acrobat's whole native boundary (plain CPython C API, no numpy or torch headers; built by
 * setup.py with setuptools and a C compiler; its Python users are acrobat.runtime.dfg and, for part 3,
 * acrobat.runtime.lazy and acrobat.runtime.dynamic). Three parts:
 *
 * 1. DFG construction (per node). The generated skeleton adds a DFG node with one call,
 *    ``_rt.dfg.node(depth, block_id, *handles)``, instead of five Python statements (a dict lookup
 *    with a tuple key, two appends, a length and an addition: about 0.3 µs a node).
 *
 *    Group: the nodes of one block at one (phase, depth), i.e. one batched launch. Its node data
 *      lives in two bytearrays of int64 (``tensor_buf``: each node's tensor-argument handles, node
 *      after node; ``inst_buf``: each node's instance index) and a list (``hosts``: each node's host
 *      arguments, a tuple, for blocks with host parameters). acrobat.runtime.dfg.Group subclasses it
 *      in Python for everything not on the hot path. bytearrays grow in place and refuse to grow
 *      while a memoryview of them is alive, so a view can never see freed memory.
 *
 *    Dfg(groups, make, hoisted): the pending groups of a run, ``groups``, a dict keyed by the packed
 *      int ``phase << PHASE_SHIFT | depth << DEPTH_SHIFT | block`` (sorting keys sorts by (phase,
 *      depth, block): the flush order), plus the running instance ``inst`` and phase ``phase``, which
 *      the runtime sets. ``node`` finds the group of (phase, depth, block) (calling ``make(phase,
 *      depth, block)``, a Python callable that creates and registers a group, on a miss), appends the
 *      node and returns the handle of its output 0, row r: ``group.base + r``; ``group`` returns the
 *      group. ``hoisted`` (bytes, one per block id) marks hoisted blocks: their nodes ignore the stage
 *      bits of the phase (a staged loop's hoisted nodes all join one group, App. A.1).
 *
 * 2. arena_rows(handles, arena_offset, pool_base, out) -> bool (per launch)
 *
 *   A launch's argument handles, stored node after node (``columns = len(pool_base)`` per node),
 *   located in the arena in one pass (see acrobat.runtime.dfg: a handle h of source
 *   src = h >> ROW_BITS lies at ``arena_offset[src] + h``, which is ``pool id << POOL_SHIFT | row``,
 *   negative when not placed). Writes column j's rows ``arena_offset[src] + h - pool_base[j]`` into
 *   ``out[j * nodes + i]`` (out is (columns, nodes), column-major: each column one index vector)
 *   and returns True when every value of column j lies in the pool ``pool_base[j]`` names (0 <= row
 *   < 2**POOL_SHIFT), else False (out is then partly written and meaningless). Arguments are any
 *   objects exporting a C-contiguous buffer of 8-byte signed ints (the handles may also be a Group's
 *   tensor_buf); nothing is kept across calls.
 *   Replaces five numpy calls and a transposing copy (handle_matrix + ValueTable.arena_rows).
 *
 * sources(handles, shift) -> set (per partial flush, §4.2)
 *
 *   The distinct ``h >> shift`` of a group's handles: the groups it reads (ValueTable.read_groups),
 *   which a partial flush on fibers needs to run only the hoisted groups it must. Replaces np.unique.
 *
 * 3. The dynamic tier's operator call (per recorded node; DESIGN.md "two tiers").
 *
 *   LazyBase holds a Lazy's fields (handle, meta, depth, requires_grad, recorder); Recording.record(func,
 *   args, kwargs) is Recorder.call's common case: arguments (positional, items of a list or tuple argument,
 *   keyword values) that are lazy values, constants and shared tensors, a signature seen before. It builds the same key the Python path builds, adds the node and
 *   makes the Lazy results (about 0.3 µs a call, node included, where the Python path takes 1.2-1.4 µs); anything else it
 *   declines (NotImplemented) before changing anything, and the Python path, which made every op it can
 *   find, takes the call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define ROW_BITS 24    /* acrobat.runtime.dfg.ROW_BITS */
#define POOL_SHIFT 40  /* acrobat.runtime.dfg.POOL_SHIFT */
#define PHASE_SHIFT 40 /* acrobat.runtime.dfg.PHASE_SHIFT: a group key's phase bits */
#define DEPTH_SHIFT 16 /* acrobat.runtime.dfg.DEPTH_SHIFT: its depth bits; the block id takes the low 16 */
#define STAGE_BITS 15  /* acrobat.runtime.dfg.STAGE_BITS: a phase's low bits, the stage of a staged loop */

/* ---- 1. DFG construction ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *block;      /* the static block (None for a lifted shared tensor) */
    PyObject *outs;       /* None until the group ran, then the tuple of (B, ...) outputs */
    PyObject *hosts;      /* list: per node, the tuple of its host arguments */
    PyObject *tensor_buf; /* bytearray of int64: per node, its tensor arguments' handles */
    PyObject *inst_buf;   /* bytearray of int64: per node, its instance index */
    long long phase, depth, gid, base;
} GroupObject;

/* Append n int64 values to a bytearray; 0, or -1 with an exception (BufferError while a view is alive). */
static int append_int64(PyObject *buf, const int64_t *values, Py_ssize_t n) {
    Py_ssize_t len = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, len + 8 * n) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(buf) + len, values, (size_t)(8 * n));
    return 0;
}

static int Group_init(GroupObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"block", "phase", "depth", "gid", "base", NULL};
    PyObject *block;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLLL", kwlist, &block, &self->phase, &self->depth, &self->gid,
                                     &self->base))
        return -1;
    Py_INCREF(block);
    Py_XSETREF(self->block, block);
    Py_INCREF(Py_None);
    Py_XSETREF(self->outs, Py_None);
    Py_XSETREF(self->hosts, PyList_New(0));
    Py_XSETREF(self->tensor_buf, PyByteArray_FromStringAndSize(NULL, 0));
    Py_XSETREF(self->inst_buf, PyByteArray_FromStringAndSize(NULL, 0));
    return (self->hosts && self->tensor_buf && self->inst_buf) ? 0 : -1;
}

static int Group_traverse(GroupObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->block);
    Py_VISIT(self->outs);
    Py_VISIT(self->hosts);
    return 0;
}

static int Group_clear(GroupObject *self) {
    Py_CLEAR(self->block);
    Py_CLEAR(self->outs);
    Py_CLEAR(self->hosts);
    Py_CLEAR(self->tensor_buf);
    Py_CLEAR(self->inst_buf);
    return 0;
}

static void Group_dealloc(GroupObject *self) {
    PyObject_GC_UnTrack(self);
    Group_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Group_size(GroupObject *self, PyObject *unused) {
    return PyLong_FromSsize_t(PyByteArray_GET_SIZE(self->inst_buf) / 8);
}

static PyMemberDef Group_members[] = {
    {"block", T_OBJECT, offsetof(GroupObject, block), READONLY, "the static block (None: a lifted shared tensor)"},
    {"outs", T_OBJECT, offsetof(GroupObject, outs), 0, "None until the group ran, then its (B, ...) outputs"},
    {"hosts", T_OBJECT, offsetof(GroupObject, hosts), READONLY, "per node, the tuple of its host arguments"},
    {"tensor_buf", T_OBJECT, offsetof(GroupObject, tensor_buf), READONLY,
     "bytearray of int64: per node, its tensor arguments' handles, node after node"},
    {"inst_buf", T_OBJECT, offsetof(GroupObject, inst_buf), READONLY, "bytearray of int64: per node, its instance"},
    {"phase", T_LONGLONG, offsetof(GroupObject, phase), READONLY, "program phase"},
    {"depth", T_LONGLONG, offsetof(GroupObject, depth), READONLY, "depth in the DFG"},
    {"gid", T_LONGLONG, offsetof(GroupObject, gid), READONLY, "group id in the run's value table"},
    {"base", T_LONGLONG, offsetof(GroupObject, base), READONLY, "handle of output 0, row 0"},
    {NULL},
};

static PyMethodDef Group_methods[] = {
    {"size", (PyCFunction)Group_size, METH_NOARGS, "size() -> int: the number of nodes (the launch's batch size)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GroupType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acrobat._native.Group",
    .tp_doc = "Group(block, phase, depth, gid, base): the DFG nodes of one block at one (phase, depth).",
    .tp_basicsize = sizeof(GroupObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Group_init,
    .tp_traverse = (traverseproc)Group_traverse,
    .tp_clear = (inquiry)Group_clear,
    .tp_dealloc = (destructor)Group_dealloc,
    .tp_members = Group_members,
    .tp_methods = Group_methods,
};

typedef struct {
    PyObject_HEAD
    PyObject *groups; /* dict: packed (phase, depth, block) key -> pending Group */
    PyObject *make;   /* make(phase, depth, block_id) -> a new Group, already in groups */
    PyObject *hoisted; /* bytes: hoisted[block_id] != 0 for a hoisted block */
    long long phase, inst;
} DfgObject;

static int Dfg_init(DfgObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"groups", "make", "hoisted", NULL};
    PyObject *groups, *make, *hoisted;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO!", kwlist, &PyDict_Type, &groups, &make, &PyBytes_Type,
                                     &hoisted))
        return -1;
    Py_INCREF(make);
    Py_XSETREF(self->make, make);
    Py_INCREF(groups);
    Py_XSETREF(self->groups, groups);
    Py_INCREF(hoisted);
    Py_XSETREF(self->hoisted, hoisted);
    self->phase = self->inst = 0;
    return 0;
}

static int Dfg_traverse(DfgObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->groups);
    Py_VISIT(self->make);
    Py_VISIT(self->hoisted);
    return 0;
}

static int Dfg_clear(DfgObject *self) {
    Py_CLEAR(self->groups);
    Py_CLEAR(self->make);
    Py_CLEAR(self->hoisted);
    return 0;
}

static void Dfg_dealloc(DfgObject *self) {
    PyObject_GC_UnTrack(self);
    Dfg_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The pending group of (phase, depth, block), made through self->make on a miss (borrowed). The phase is
 * the running instance's, without its stage bits for a hoisted block. */
static GroupObject *pending_group(DfgObject *self, PyObject *depth_obj, PyObject *block_obj) {
    long long depth = PyLong_AsLongLong(depth_obj), block = PyLong_AsLongLong(block_obj);
    if ((depth == -1 || block == -1) && PyErr_Occurred())
        return NULL;
    if (depth < 0 || depth >= (1LL << (PHASE_SHIFT - DEPTH_SHIFT)) || block < 0 || block >= (1LL << DEPTH_SHIFT) ||
        self->phase < 0 || self->phase >= (1LL << (63 - PHASE_SHIFT))) {
        PyErr_Format(PyExc_ValueError,
                     "DFG node at phase %lld, depth %lld, block %lld: out of the key's range (depth below 2**%d, "
                     "block id below 2**%d, phase below 2**%d)",
                     self->phase, depth, block, PHASE_SHIFT - DEPTH_SHIFT, DEPTH_SHIFT, 63 - PHASE_SHIFT);
        return NULL;
    }
    long long phase = self->phase;
    if (block < PyBytes_GET_SIZE(self->hoisted) && PyBytes_AS_STRING(self->hoisted)[block])
        phase &= ~((1LL << STAGE_BITS) - 1);
    PyObject *key = PyLong_FromLongLong(phase << PHASE_SHIFT | depth << DEPTH_SHIFT | block);
    if (key == NULL)
        return NULL;
    PyObject *g = PyDict_GetItemWithError(self->groups, key); /* borrowed */
    if (g == NULL && !PyErr_Occurred()) {
        PyObject *phase_obj = PyLong_FromLongLong(phase);
        PyObject *made = phase_obj == NULL ? NULL
                         : PyObject_CallFunctionObjArgs(self->make, phase_obj, depth_obj, block_obj, NULL);
        Py_XDECREF(phase_obj);
        if (made != NULL) {
            g = PyDict_GetItemWithError(self->groups, key); /* make() registered it: groups holds it */
            if (g != made || !PyObject_TypeCheck(g, &GroupType)) {
                g = NULL;
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "Dfg: make() must return a Group it put in groups");
            }
            Py_DECREF(made);
        }
    }
    Py_DECREF(key);
    return (GroupObject *)g;
}

/* Append one node (tensor handles args[first:nargs], host tuple or NULL) to g; its output-0 handle. The
 * handles are converted straight into the grown buffer, which shrinks back if one is no int. */
static PyObject *add_node(DfgObject *self, GroupObject *g, PyObject *const *args, Py_ssize_t first, Py_ssize_t nargs,
                          PyObject *hosts) {
    Py_ssize_t n = nargs - first, len = PyByteArray_GET_SIZE(g->tensor_buf);
    if (n > 0) {
        if (PyByteArray_Resize(g->tensor_buf, len + 8 * n) < 0)
            return NULL;
        int64_t *dst = (int64_t *)(PyByteArray_AS_STRING(g->tensor_buf) + len);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *h = args[first + i];
            dst[i] = PyLong_Check(h) ? PyLong_AsLongLong(h) : -1;
            if (dst[i] == -1 && (!PyLong_Check(h) || PyErr_Occurred())) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_TypeError, "DFG node argument %zd is a %.100s, not a handle (int)", i,
                                 Py_TYPE(h)->tp_name);
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyByteArray_Resize(g->tensor_buf, len); /* shrinking in place: cannot fail */
                PyErr_Restore(type, value, tb);
                return NULL;
            }
        }
    }
    int64_t row = PyByteArray_GET_SIZE(g->inst_buf) / 8, inst = self->inst;
    if (hosts != NULL && PyList_Append(g->hosts, hosts) < 0)
        return NULL;
    if (append_int64(g->inst_buf, &inst, 1) < 0)
        return NULL;
    return PyLong_FromLongLong(g->base + row);
}

/* node(depth, block_id, *handles) -> int */
static PyObject *Dfg_node(DfgObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "node(depth, block_id, *handles) takes at least 2 arguments");
        return NULL;
    }
    GroupObject *g = pending_group(self, args[0], args[1]);
    return g == NULL ? NULL : add_node(self, g, args, 2, nargs, NULL);
}

static PyObject *tensor_type = NULL; /* torch.Tensor (set_tensor_type): host tensors are cloned by snapshot */

/* snapshot(x): a host value as it is when its node is added: lists (also inside lists and tuples) copied and
 * tensors cloned, so that a change the instance's own code makes before the launch reads it (`tokens.pop()` after
 * `torch.tensor(tokens)`, `x[0] = 5.0` after `torch.tanh(x)`) is not seen by the launch, as it is not by the
 * plain call. New reference. */
static int is_tensor(PyObject *x) {
    return tensor_type != NULL && PyObject_TypeCheck(x, (PyTypeObject *)tensor_type);
}

/* Whether x is, or a tuple holds (at any depth), what snapshot copies: a list or a tensor. */
static int changes_in_place(PyObject *x) {
    if (PyList_CheckExact(x) || is_tensor(x))
        return 1;
    if (!PyTuple_CheckExact(x))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(x); i++)
        if (changes_in_place(PyTuple_GET_ITEM(x, i)))
            return 1;
    return 0;
}

static PyObject *snapshot(PyObject *x) {
    if (!changes_in_place(x)) /* a number, a string, a tuple of them (a node's usual hosts): itself, no copy */
        return Py_NewRef(x);
    if (is_tensor(x))
        return PyObject_CallMethod(x, "clone", NULL);
    int is_list = PyList_CheckExact(x);
    Py_ssize_t n = is_list ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
    PyObject *out = is_list ? PyList_New(n) : PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *copy = snapshot(is_list ? PyList_GET_ITEM(x, i) : PyTuple_GET_ITEM(x, i));
        if (copy == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        if (is_list)
            PyList_SET_ITEM(out, i, copy);
        else
            PyTuple_SET_ITEM(out, i, copy);
    }
    return out;
}

/* set_tensor_type(torch.Tensor): the type whose instances snapshot clones. */
static PyObject *set_tensor_type(PyObject *module, PyObject *tp) {
    (void)module;
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "set_tensor_type takes a type");
        return NULL;
    }
    Py_XSETREF(tensor_type, Py_NewRef(tp));
    Py_RETURN_NONE;
}

/* snapshot(x) -> x with its lists copied and tensors cloned (module function; ``snapshot`` above). */
static PyObject *snapshot_fn(PyObject *module, PyObject *x) {
    (void)module;
    return snapshot(x);
}

/* node_hosts(depth, block_id, hosts, *handles) -> int */
static PyObject *Dfg_node_hosts(DfgObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "node_hosts(depth, block_id, hosts: tuple, *handles) takes at least 3 "
                                         "arguments");
        return NULL;
    }
    GroupObject *g = pending_group(self, args[0], args[1]);
    if (g == NULL)
        return NULL;
    PyObject *hosts = snapshot(args[2]); /* the hosts tuple itself unless it holds a list */
    if (hosts == NULL)
        return NULL;
    PyObject *h = add_node(self, g, args, 3, nargs, hosts);
    Py_DECREF(hosts);
    return h;
}

/* group(depth, block_id) -> Group: the pending group of the block at depth in the current phase, made if new */
static PyObject *Dfg_group(DfgObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "group(depth, block_id) takes 2 arguments");
        return NULL;
    }
    PyObject *g = (PyObject *)pending_group(self, args[0], args[1]);
    Py_XINCREF(g);
    return g;
}

static PyMemberDef Dfg_members[] = {
    {"groups", T_OBJECT, offsetof(DfgObject, groups), READONLY,
     "dict: packed (phase, depth, block) key -> pending Group"},
    {"phase", T_LONGLONG, offsetof(DfgObject, phase), 0, "the running instance's program phase"},
    {"inst", T_LONGLONG, offsetof(DfgObject, inst), 0, "the running instance's index"},
    {NULL},
};

static PyMethodDef Dfg_methods[] = {
    {"node", (PyCFunction)(void (*)(void))Dfg_node, METH_FASTCALL,
     "node(depth, block_id, *handles) -> int: add a DFG node of the block at depth in the current phase for the "
     "running instance, with these tensor-argument handles; the handle of its output 0"},
    {"node_hosts", (PyCFunction)(void (*)(void))Dfg_node_hosts, METH_FASTCALL,
     "node_hosts(depth, block_id, hosts, *handles) -> int: node() for a block with host parameters (hosts: tuple)"},
    {"group", (PyCFunction)(void (*)(void))Dfg_group, METH_FASTCALL,
     "group(depth, block_id) -> Group: the pending group of the block at depth in the current phase, made if new"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DfgType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acrobat._native.Dfg",
    .tp_doc = "Dfg(groups, make, hoisted): a run's pending DFG groups and its node insertion (see the module source).",
    .tp_basicsize = sizeof(DfgObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Dfg_init,
    .tp_traverse = (traverseproc)Dfg_traverse,
    .tp_clear = (inquiry)Dfg_clear,
    .tp_dealloc = (destructor)Dfg_dealloc,
    .tp_members = Dfg_members,
    .tp_methods = Dfg_methods,
};

/* ---- 2. Per launch: arena rows ------------------------------------------------------------- */

/* Get a C-contiguous buffer of int64 from obj (writable if asked): a buffer of format 'q'/'l', or a bytearray
 * of a multiple of 8 bytes (a Group's tensor_buf); 0 on success, -1 with an exception. */
static int int64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (PyByteArray_Check(obj) && view->len % 8 == 0) /* a Group's tensor_buf: int64 stored as bytes */
        return 0;
    if (view->itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyErr_Format(PyExc_TypeError, "%s must be a buffer of int64 (got format '%s', itemsize %zd)",
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

/* sources(handles, shift) -> set: the distinct values ``h >> shift`` of a group's handles (its tensor_buf, or
 * any int64 buffer); with shift = ROW_BITS + kbits, the ids of the groups its nodes read. */
static PyObject *sources(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "sources(handles, shift) takes 2 arguments");
        return NULL;
    }
    long shift = PyLong_AsLong(args[1]);
    if (shift == -1 && PyErr_Occurred())
        return NULL;
    if (shift < 0 || shift > 62) {
        PyErr_Format(PyExc_ValueError, "sources: shift %ld out of [0, 62]", shift);
        return NULL;
    }
    Py_buffer hb;
    if (int64_buffer(args[0], &hb, 0, "handles") < 0)
        return NULL;
    const int64_t *h = (const int64_t *)hb.buf;
    Py_ssize_t n = hb.len / 8;
    PyObject *out = PySet_New(NULL);
    int64_t last = 0;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        int64_t src = h[i] >> shift;
        if (i > 0 && src == last) /* handles of one node come mostly from one group: skip repeats cheaply */
            continue;
        last = src;
        PyObject *v = PyLong_FromLongLong(src);
        if (v == NULL || PySet_Add(out, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(v);
    }
    PyBuffer_Release(&hb);
    return out;
}

/* ---- 3. The dynamic tier: recording an operator call (per recorded node) ---------------------- */

/* LazyBase: the storage of acrobat.runtime.lazy.Lazy (a per-instance tensor not computed yet: a DFG node's
 * output handle, its Meta, its depth, whether autograd records it, its Recorder). Lazy subclasses it in
 * Python for everything a tensor does; Recording reads and makes them without attribute lookups. */
typedef struct {
    PyObject_HEAD
    PyObject *h;    /* int: the node output's handle */
    PyObject *meta; /* acrobat.runtime.lazy.Meta: shape and dtype, interned */
    PyObject *rec;  /* the run's Recorder */
    Py_ssize_t depth;
    char requires_grad;
} LazyObject;

static PyObject *LazyBase_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"h", "meta", "depth", "requires_grad", "rec", NULL};
    PyObject *h, *meta, *rec;
    Py_ssize_t depth;
    int requires_grad;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOnpO", kwlist, &h, &meta, &depth, &requires_grad, &rec))
        return NULL;
    LazyObject *self = (LazyObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->h = Py_NewRef(h);
    self->meta = Py_NewRef(meta);
    self->rec = Py_NewRef(rec);
    self->depth = depth;
    self->requires_grad = (char)requires_grad;
    return (PyObject *)self;
}

static int LazyBase_traverse(LazyObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->h); /* a heap subclass's type is visited by its own tp_traverse (subtype_traverse) */
    Py_VISIT(self->meta);
    Py_VISIT(self->rec);
    return 0;
}

static int LazyBase_clear(LazyObject *self) {
    Py_CLEAR(self->h);
    Py_CLEAR(self->meta);
    Py_CLEAR(self->rec);
    return 0;
}

/* Also a heap subclass's base dealloc: subtype_dealloc releases the subclass's reference to its type. */
static void LazyBase_dealloc(LazyObject *self) {
    PyObject_GC_UnTrack(self);
    LazyBase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef LazyBase_members[] = {
    {"h", T_OBJECT_EX, offsetof(LazyObject, h), 0,
     "int: the handle of the node output (rebound when the instance writes into the value in place)"},
    {"meta", T_OBJECT_EX, offsetof(LazyObject, meta), READONLY, "Meta: the value's shape and dtype"},
    {"depth", T_PYSSIZET, offsetof(LazyObject, depth), 0, "int: the node's depth"},
    {"requires_grad", T_BOOL, offsetof(LazyObject, requires_grad), 0, "bool: autograd records the value"},
    {"rec", T_OBJECT_EX, offsetof(LazyObject, rec), READONLY, "the run's Recorder"},
    {NULL},
};

static PyTypeObject LazyBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acrobat._native.LazyBase",
    .tp_doc = "LazyBase(h, meta, depth, requires_grad, rec): the fields of acrobat.runtime.lazy.Lazy.",
    .tp_basicsize = sizeof(LazyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = LazyBase_new,
    .tp_traverse = (traverseproc)LazyBase_traverse,
    .tp_clear = (inquiry)LazyBase_clear,
    .tp_dealloc = (destructor)LazyBase_dealloc,
    .tp_members = LazyBase_members,
};

#define MAX_FAST_ARGS 8 /* positional arguments Recording.record takes (acrobat.runtime.dynamic._MAX_POSITIONAL) */

/* Recording(dfg, ops, shared, scalars, positional, lazy, rec, grad_enabled, output_step, view_log, run_grad,
 * lookups): the common call of acrobat.runtime.dynamic.Recorder.call in C. record(func, args, kwargs) signs the call
 * exactly as the Python path does, key = (func, structure, *parts): the structure ``positional[n]`` for n positional
 * arguments with no list or tuple among them and no keyword (else the one ``_flatten`` builds: per argument 0 or
 * (list or tuple, length), then the keywords' names), per leaf (``call_leaves``) the part of a Lazy (its meta), a constant of a
 * type in ``scalars`` ((type, value)) or a shared tensor (its id, a key of ``shared``, whose value is its
 * requires_grad); when every argument is one of these, at least one is a Lazy (or the call is a lookup: ``func``
 * in ``lookups`` indexing shared tensors by per-instance ints, ``lookup_hosts``) and ``ops`` holds the key's op
 * (a tuple: block id, output metas, their floating flags, kind 0 one tensor / 1 a tuple of tensors, OpStats),
 * it adds the node to ``dfg``, counts it on the OpStats and returns the Lazy result (or tuple of them);
 * otherwise NotImplemented, having changed nothing (the Python path takes the call). An op whose field 8 (its
 * ``aliases``) is a non-empty tuple makes views of its lazy arguments (``torch.chunk``, ``y[:2]``): the call is
 * also appended to the list ``view_log`` as ``(op, func, leaves, structure, result)``, which
 * Recorder.index_views reads when the instance writes in place. ``run_grad``: the run records autograd, so a call
 * made while ``grad_enabled()`` is false (the model's own ``torch.no_grad()``) is declined: the Python path gives
 * it a signature of its own (Recorder.grad_off). */
typedef struct {
    PyObject_HEAD
    PyObject *dfg, *ops, *shared, *scalars, *positional, *lazy, *rec, *grad_enabled, *view_log, *lookups;
    long long output_step;
    int run_grad;
} RecordingObject;

static PyObject *nodes_str, *one; /* "nodes", interned; the int 1 */

static int Recording_init(RecordingObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"dfg", "ops", "shared", "scalars", "positional", "lazy", "rec", "grad_enabled",
                             "output_step", "view_log", "run_grad", "lookups", NULL};
    PyObject *dfg, *ops, *shared, *scalars, *positional, *lazy, *rec, *grad_enabled, *view_log, *lookups;
    long long step;
    int run_grad;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!O!O!O!OOLO!pO!", kwlist, &DfgType, &dfg, &PyDict_Type, &ops,
                                     &PyDict_Type, &shared, &PyFrozenSet_Type, &scalars, &PyTuple_Type, &positional,
                                     &PyType_Type, &lazy, &rec, &grad_enabled, &step, &PyList_Type, &view_log,
                                     &run_grad, &PyFrozenSet_Type, &lookups))
        return -1;
    if (!PyType_IsSubtype((PyTypeObject *)lazy, &LazyBaseType)) {
        PyErr_SetString(PyExc_TypeError, "Recording: lazy must subclass LazyBase");
        return -1;
    }
    PyObject *fields[] = {dfg, ops, shared, scalars, positional, lazy, rec, grad_enabled, view_log, lookups};
    PyObject **slots[] = {&self->dfg, &self->ops, &self->shared, &self->scalars, &self->positional, &self->lazy,
                          &self->rec, &self->grad_enabled, &self->view_log, &self->lookups};
    for (int i = 0; i < 10; i++)
        Py_XSETREF(*slots[i], Py_NewRef(fields[i]));
    self->output_step = step;
    self->run_grad = run_grad;
    return 0;
}

static int Recording_traverse(RecordingObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->dfg);
    Py_VISIT(self->ops);
    Py_VISIT(self->shared);
    Py_VISIT(self->scalars);
    Py_VISIT(self->positional);
    Py_VISIT(self->lazy);
    Py_VISIT(self->rec);
    Py_VISIT(self->grad_enabled);
    Py_VISIT(self->view_log);
    Py_VISIT(self->lookups);
    return 0;
}

static int Recording_clear(RecordingObject *self) {
    Py_CLEAR(self->dfg);
    Py_CLEAR(self->ops);
    Py_CLEAR(self->shared);
    Py_CLEAR(self->scalars);
    Py_CLEAR(self->positional);
    Py_CLEAR(self->lazy);
    Py_CLEAR(self->rec);
    Py_CLEAR(self->grad_enabled);
    Py_CLEAR(self->view_log);
    Py_CLEAR(self->lookups);
    return 0;
}

static void Recording_dealloc(RecordingObject *self) {
    PyObject_GC_UnTrack(self);
    Recording_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A new Lazy of the recording's class (a new reference, or NULL). */
static PyObject *new_lazy(RecordingObject *self, PyObject *h, PyObject *meta, Py_ssize_t depth, int grad) {
    PyTypeObject *type = (PyTypeObject *)self->lazy;
    LazyObject *z = (LazyObject *)type->tp_alloc(type, 0);
    if (z == NULL)
        return NULL;
    z->h = Py_NewRef(h);
    z->meta = Py_NewRef(meta);
    z->rec = Py_NewRef(self->rec);
    z->depth = depth;
    z->requires_grad = (char)grad;
    return (PyObject *)z;
}

/* The results of node h of op: one Lazy, or a tuple of them (output k's handle is h + k * output_step). */
static PyObject *op_results(RecordingObject *self, PyObject *op, long kind, PyObject *h, Py_ssize_t depth, int grad) {
    PyObject *metas = PyTuple_GET_ITEM(op, 1), *floating = PyTuple_GET_ITEM(op, 2);
    if (!PyTuple_Check(metas) || !PyTuple_Check(floating) || PyTuple_GET_SIZE(floating) != PyTuple_GET_SIZE(metas) ||
        PyTuple_GET_SIZE(metas) == 0) {
        PyErr_SetString(PyExc_TypeError, "Recording: an op's output metas and floating flags must be equal tuples");
        return NULL;
    }
    if (kind == 0)
        return new_lazy(self, h, PyTuple_GET_ITEM(metas, 0), depth, grad && PyTuple_GET_ITEM(floating, 0) == Py_True);
    long long base = PyLong_AsLongLong(h);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(metas);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *hk = PyLong_FromLongLong(base + k * self->output_step);
        PyObject *z = hk == NULL ? NULL
                      : new_lazy(self, hk, PyTuple_GET_ITEM(metas, k), depth,
                                 grad && PyTuple_GET_ITEM(floating, k) == Py_True);
        Py_XDECREF(hk);
        if (z == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, k, z);
    }
    return out;
}

/* A lookup (Recorder.lookup): ``func`` in ``lookups`` indexing shared tensors by per-instance ints (an int among
 * the leaves after the first; no Lazy among them). Rewrites the key's part of every int leaf to ``int`` (the type:
 * the number is the node's host value) and returns the tuple of those ints (a new reference), as the Python path
 * signs and adds the node; NULL where the call is no lookup (or with an exception). */
static PyObject *lookup_hosts(RecordingObject *self, PyObject *func, PyObject *key, PyObject **leaves, Py_ssize_t n) {
    int found = PySet_Contains(self->lookups, func);
    if (found <= 0)
        return NULL;
    Py_ssize_t ints = 0, later = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyLong_CheckExact(leaves[i])) {
            ints++;
            later |= i > 0;
        }
    if (!later)
        return NULL;
    PyObject *hosts = PyTuple_New(ints);
    if (hosts == NULL)
        return NULL;
    for (Py_ssize_t i = 0, k = 0; i < n; i++)
        if (PyLong_CheckExact(leaves[i])) {
            PyTuple_SET_ITEM(hosts, k++, Py_NewRef(leaves[i]));
            PyObject *old = PyTuple_GET_ITEM(key, i + 2);
            PyTuple_SET_ITEM(key, i + 2, Py_NewRef((PyObject *)&PyLong_Type));
            Py_DECREF(old);
        }
    return hosts;
}

#define MAX_LEAVES 64 /* leaves (arguments, items of a list argument, keyword values) Recording.record signs */

/* The leaves of a call, as acrobat.runtime.dynamic._flatten makes them: the positional arguments, the items of a
 * list or tuple among them (exactly list or tuple: a namedtuple is one leaf), then the keyword values, into
 * leaves[] (borrowed); *struct is a new reference to the call's structure (``positional[n]`` when there is no
 * container and no keyword: the same value _flatten gives). Returns the number of leaves, or -1 where the Python
 * path takes the call (a container in a container, a dict, more than MAX_LEAVES leaves) with *struct NULL, or -2
 * with an exception. */
static Py_ssize_t call_leaves(RecordingObject *self, PyObject *targs, PyObject *kwargs, PyObject **leaves,
                              PyObject **structure) {
    Py_ssize_t n = PyTuple_GET_SIZE(targs), nl = 0, nkw = kwargs == NULL ? 0 : PyDict_GET_SIZE(kwargs);
    int plain = nkw == 0;
    *structure = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(targs, i);
        if (PyList_CheckExact(x) || PyTuple_CheckExact(x))
            plain = 0;
        else if (PyDict_CheckExact(x))
            return -1;
    }
    if (plain) {
        if (n > MAX_FAST_ARGS || n >= PyTuple_GET_SIZE(self->positional))
            return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            leaves[i] = PyTuple_GET_ITEM(targs, i);
        *structure = Py_NewRef(PyTuple_GET_ITEM(self->positional, n));
        return n;
    }
    PyObject *parts = PyTuple_New(n + (nkw > 0));
    if (parts == NULL)
        return -2;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(targs, i), *part;
        if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {
            Py_ssize_t m = PySequence_Fast_GET_SIZE(x);
            PyObject **items = PySequence_Fast_ITEMS(x);
            for (Py_ssize_t j = 0; j < m; j++) {
                PyObject *item = items[j];
                if (PyList_CheckExact(item) || PyTuple_CheckExact(item) || PyDict_CheckExact(item) || nl >= MAX_LEAVES)
                    goto python;
                leaves[nl++] = item;
            }
            part = Py_BuildValue("(On)", (PyObject *)Py_TYPE(x), m);
        } else {
            if (nl >= MAX_LEAVES)
                goto python;
            leaves[nl++] = x;
            part = PyLong_FromLong(0);
        }
        if (part == NULL)
            goto error;
        PyTuple_SET_ITEM(parts, i, part);
    }
    if (nkw > 0) {
        PyObject *names = PyTuple_New(nkw), *name, *value;
        Py_ssize_t pos = 0, k = 0;
        if (names == NULL)
            goto error;
        PyTuple_SET_ITEM(parts, n, names);
        while (PyDict_Next(kwargs, &pos, &name, &value)) {
            if (PyList_CheckExact(value) || PyTuple_CheckExact(value) || PyDict_CheckExact(value) || nl >= MAX_LEAVES)
                goto python;
            PyTuple_SET_ITEM(names, k++, Py_NewRef(name));
            leaves[nl++] = value;
        }
    }
    *structure = parts;
    return nl;
python:
    Py_DECREF(parts);
    return -1;
error:
    Py_DECREF(parts);
    return -2;
}

/* record(func, args: tuple, kwargs: dict | None = None) -> the call's lazy result, or NotImplemented (see
 * Recording). */
static PyObject *Recording_record(RecordingObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record(func, args, kwargs=None) takes 2 or 3 arguments");
        return NULL;
    }
    PyObject *func = args[0], *targs = args[1], *kwargs = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
    if (!PyTuple_Check(targs) || (kwargs != NULL && !PyDict_CheckExact(kwargs)))
        Py_RETURN_NOTIMPLEMENTED;
    if (self->run_grad) { /* autograd off inside a run that records it: the Python path (grad_off) */
        PyObject *enabled = PyObject_CallNoArgs(self->grad_enabled);
        int on = enabled == NULL ? -1 : PyObject_IsTrue(enabled);
        Py_XDECREF(enabled);
        if (on < 0)
            return NULL;
        if (!on)
            Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *leaves[MAX_LEAVES], *structure;
    Py_ssize_t n = call_leaves(self, targs, kwargs, leaves, &structure);
    if (n == -2)
        return NULL;
    if (n == -1)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *key = PyTuple_New(n + 2);
    if (key == NULL) {
        Py_DECREF(structure);
        return NULL;
    }
    PyTuple_SET_ITEM(key, 0, Py_NewRef(func));
    PyTuple_SET_ITEM(key, 1, structure); /* the key holds it: borrowed from here on */
    PyObject *handles[MAX_LEAVES], *hosts = NULL;
    Py_ssize_t nh = 0, depth = 0;
    int grad = 0, shared_seen = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = leaves[i], *part;
        PyTypeObject *tp = Py_TYPE(x);
        if ((PyObject *)tp == self->lazy) {
            LazyObject *z = (LazyObject *)x;
            part = Py_NewRef(z->meta);
            handles[nh++] = z->h; /* borrowed: args holds the Lazy */
            if (z->depth > depth)
                depth = z->depth;
            grad |= z->requires_grad;
        } else {
            int scalar = PySet_Contains(self->scalars, (PyObject *)tp);
            if (scalar < 0)
                goto error;
            if (scalar) {
                /* 0.0 == -0.0 and NaN != NaN as keys: such constants take the Python path (``_const_part``) */
                if (tp == &PyComplex_Type || (tp == &PyFloat_Type && (PyFloat_AS_DOUBLE(x) == 0.0 ||
                                                                     PyFloat_AS_DOUBLE(x) != PyFloat_AS_DOUBLE(x))))
                    goto python;
                part = PyTuple_Pack(2, (PyObject *)tp, x);
                if (part == NULL)
                    goto error;
            } else {
                part = PyLong_FromVoidPtr(x); /* id(x) */
                if (part == NULL)
                    goto error;
                PyObject *requires_grad = PyDict_GetItemWithError(self->shared, part); /* borrowed */
                if (requires_grad == NULL) {
                    Py_DECREF(part);
                    if (PyErr_Occurred())
                        goto error;
                    goto python; /* the instance's own tensor, a container, another object */
                }
                grad |= requires_grad == Py_True;
                shared_seen = 1;
            }
        }
        PyTuple_SET_ITEM(key, i + 2, part);
    }
    if (nh == 0) { /* shared values and constants only: a lookup, else computed once or run eagerly (Python) */
        hosts = shared_seen ? lookup_hosts(self, func, key, leaves, n) : NULL;
        if (hosts == NULL) {
            if (PyErr_Occurred())
                goto error;
            goto python;
        }
        grad = 0; /* as Recorder.lookup adds it */
    }
    PyObject *op = PyDict_GetItemWithError(self->ops, key); /* borrowed */
    if (op == NULL) {
        if (PyErr_Occurred())
            goto error;
        goto python; /* a new signature */
    }
    if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) < 5) {
        PyErr_SetString(PyExc_TypeError, "Recording: an op must be a tuple (bid, out_meta, floating, kind, stats, ...)");
        goto error;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(op, 3));
    if (kind == -1 && PyErr_Occurred())
        goto error;
    if (kind != 0 && kind != 1)
        goto python; /* a result of another structure: pytree builds it */
    Py_INCREF(op);
    PyObject *depth_obj = PyLong_FromSsize_t(depth + 1), *h = NULL, *nodes = NULL, *result = NULL;
    GroupObject *g = depth_obj == NULL ? NULL : pending_group((DfgObject *)self->dfg, depth_obj, PyTuple_GET_ITEM(op, 0));
    if (g != NULL)
        h = add_node((DfgObject *)self->dfg, g, handles, 0, nh, hosts);
    PyObject *stats = PyTuple_GET_ITEM(op, 4);
    if (h != NULL)
        nodes = PyObject_GetAttr(stats, nodes_str);
    if (nodes != NULL) {
        PyObject *more = PyNumber_Add(nodes, one);
        int failed = more == NULL || PyObject_SetAttr(stats, nodes_str, more) < 0;
        Py_XDECREF(more);
        if (failed)
            Py_CLEAR(h);
        Py_DECREF(nodes);
    } else {
        Py_CLEAR(h);
    }
    if (h != NULL && grad) {
        PyObject *enabled = PyObject_CallNoArgs(self->grad_enabled);
        grad = enabled == NULL ? -1 : PyObject_IsTrue(enabled);
        Py_XDECREF(enabled);
        if (grad < 0)
            Py_CLEAR(h);
    }
    if (h != NULL)
        result = op_results(self, op, kind, h, depth + 1, grad);
    if (result != NULL && PyTuple_GET_SIZE(op) > 8 && PyTuple_Check(PyTuple_GET_ITEM(op, 8)) &&
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(op, 8)) > 0) { /* views of lazy arguments: logged for index_views */
        Py_ssize_t m = PyTuple_GET_SIZE(targs);
        int plain = m < PyTuple_GET_SIZE(self->positional) &&
                    PyTuple_GET_ITEM(key, 1) == PyTuple_GET_ITEM(self->positional, m);
        PyObject *flat = plain ? Py_NewRef(targs) : PyTuple_New(n); /* the leaves, as the Python path logs them */
        for (Py_ssize_t i = 0; flat != NULL && flat != targs && i < n; i++)
            PyTuple_SET_ITEM(flat, i, Py_NewRef(leaves[i]));
        PyObject *entry = flat == NULL ? NULL : PyTuple_Pack(5, op, func, flat, PyTuple_GET_ITEM(key, 1), result);
        Py_XDECREF(flat);
        if (entry == NULL || PyList_Append(self->view_log, entry) < 0)
            Py_CLEAR(result); /* the node is added but its result is not returned: the run fails with the error */
        Py_XDECREF(entry);
    }
    Py_XDECREF(h);
    Py_XDECREF(depth_obj);
    Py_DECREF(op);
    Py_DECREF(key);
    Py_XDECREF(hosts);
    return result;
python:
    Py_DECREF(key);
    Py_XDECREF(hosts);
    Py_RETURN_NOTIMPLEMENTED;
error:
    Py_DECREF(key);
    Py_XDECREF(hosts);
    return NULL;
}

static PyMethodDef Recording_methods[] = {
    {"record", (PyCFunction)(void (*)(void))Recording_record, METH_FASTCALL,
     "record(func, args: tuple, kwargs: dict | None = None) -> the call's lazy result, or NotImplemented for the "
     "Python path"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RecordingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acrobat._native.Recording",
    .tp_doc = "Recording(dfg, ops, shared, scalars, positional, lazy, rec, grad_enabled, output_step, view_log, "
              "run_grad, lookups): the dynamic tier's common operator call, recorded in C (see the module source).",
    .tp_basicsize = sizeof(RecordingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Recording_init,
    .tp_traverse = (traverseproc)Recording_traverse,
    .tp_clear = (inquiry)Recording_clear,
    .tp_dealloc = (destructor)Recording_dealloc,
    .tp_methods = Recording_methods,
};

static PyMethodDef methods[] = {
    {"arena_rows", (PyCFunction)(void (*)(void))arena_rows, METH_FASTCALL,
     "arena_rows(handles, arena_offset, pool_base, out) -> bool: locate a launch's handles in the arena "
     "(see the module source)."},
    {"sources", (PyCFunction)(void (*)(void))sources, METH_FASTCALL,
     "sources(handles, shift) -> set: the distinct h >> shift of the handles (the groups a group reads)."},
    {"snapshot", (PyCFunction)snapshot_fn, METH_O,
     "snapshot(x): x, with its lists (also inside lists and tuples) copied and its tensors cloned: a host value "
     "as it is now."},
    {"set_tensor_type", (PyCFunction)set_tensor_type, METH_O,
     "set_tensor_type(torch.Tensor): the type whose instances snapshot clones."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "acrobat._native",
                                    "acrobat's per-node and per-launch bookkeeping (see _native.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&GroupType) < 0 || PyType_Ready(&DfgType) < 0 || PyType_Ready(&LazyBaseType) < 0 ||
        PyType_Ready(&RecordingType) < 0)
        return NULL;
    nodes_str = PyUnicode_InternFromString("nodes");
    one = PyLong_FromLong(1);
    if (nodes_str == NULL || one == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Group", (PyObject *)&GroupType) < 0 ||
        PyModule_AddObjectRef(m, "Dfg", (PyObject *)&DfgType) < 0 ||
        PyModule_AddObjectRef(m, "LazyBase", (PyObject *)&LazyBaseType) < 0 ||
        PyModule_AddObjectRef(m, "Recording", (PyObject *)&RecordingType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

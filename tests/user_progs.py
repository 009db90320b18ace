"""Model functions written the way a researcher writes Python (issue 10, section 2): break/continue,
early returns, keyword arguments and defaults, shapes, conditional expressions, Optional state,
grad-mode blocks, list item assignment, starred unpacking, dicts, plain host helpers, comprehensions.

They live in a real .py file because acrobat reads their source with ``inspect``. Every program
takes ``(inst, p)`` with ``p`` a ``tests.progs.Small`` (H = 4) and ``inst`` a list of token ids
(0..9) unless its docstring says otherwise. Lines the rejection tests look up carry ``# E:<key>``.
"""

# ruff: noqa
from __future__ import annotations

import math

import torch

import acrobat as ab
from tests.control_progs import total


@ab.function
def step(h, x, p):
    return torch.tanh(h @ p.U + x @ p.W + p.b)


# ---------------------------------------------------------------- 1. break / continue / while True / early return


@ab.program
def break_continue(tokens, p):
    """``continue`` on host data, ``break`` on a tensor value (a value read: runs on fibers)."""
    h = p.h0
    for tok in tokens:
        if tok % 3 == 0:
            continue
        h = step(h, p.emb[tok], p)
        if h.sum() > 1.0:
            break
    return h


@ab.program
def while_true(tokens, p):
    """``while True`` left by ``break`` on host data."""
    h = p.h0
    i = 0
    while True:
        if i >= len(tokens):
            break
        h = torch.tanh(h @ p.U + p.emb[tokens[i]])
        i = i + 1
    return h


@ab.program
def while_continue_tensor_test(tokens, p):
    """A ``while`` whose condition is a tensor operator, with ``continue`` in the body."""
    h = p.h0
    i = 0
    while bool(torch.sum(h * h) < 50.0) and i < len(tokens):
        i = i + 1
        if tokens[i - 1] % 2 == 0:
            continue
        h = h + torch.relu(p.emb[tokens[i - 1]] @ p.W)
    return h


@ab.program
def map_loop_with_break(tokens, p):
    """A list built in a loop left early: not a map loop (its iterations' depths are not joined)."""
    out = []
    for tok in tokens:
        out.append(torch.tanh(p.emb[tok] @ p.W))
        if tok == 7:
            break
    return out


@ab.function
def stop_early(h, p):
    """A helper that returns early after a tensor-dependent condition."""
    if h.sum() > 0:
        return h
    return torch.tanh(h @ p.U)


@ab.program
def early_return(tokens, p):
    """``return`` inside a loop after a tensor test, and after a call to a helper."""
    h = p.h0
    for tok in tokens:
        h = stop_early(step(h, p.emb[tok], p), p)
        if h.sum() > 0.8:
            return h * 2.0
    return h


@ab.program
def nested_break(tokens, p):
    """``break`` in an inner loop leaves only the inner loop."""
    h = p.h0
    for tok in tokens:
        for j in range(3):
            if j == tok % 3:
                break
            h = torch.tanh(h @ p.U + p.emb[tok])
    return h


# ---------------------------------------------------------------- 2. keywords and defaults


@ab.function
def cell(x, h, p, scale=1.0):
    return torch.tanh(x @ p.W + h @ p.U) * scale


@ab.program
def keywords(tokens, p):
    """Keyword arguments on torch operators and on model functions, and defaults."""
    h = p.h0
    for tok in tokens:
        h = cell(p.emb[tok], h=h, p=p)
        h = cell(p.emb[tok], h, p, scale=0.5) + torch.softmax(h, dim=-1)
    s = torch.sum(h, dim=-1, keepdim=True)
    return (h / s).to(dtype=torch.float32), torch.mean(h.unsqueeze(0), dim=0, dtype=torch.float32)


# ---------------------------------------------------------------- 3. shapes


@ab.program
def shapes(x, p):
    """Shapes of per-instance tensors (instances: tensors of shape (n, 4), n varying): read by host code
    (a value read, like ``.item()``) and inside tensor expressions (computed in the block)."""
    h = torch.tanh(x @ p.W)
    n = h.shape[0]
    acc = p.h0
    for i in range(n):
        acc = torch.tanh(acc @ p.U + h[i])
    k = len(h) + h.size(0) + h.ndim + h.size(-1)
    z = torch.zeros(h.shape[1]) + torch.ones(h.size(1)) * h.shape[0] + h.sum(0) / len(h)
    return acc * float(k) + z


@ab.program
def shape_in_block(tokens, p):
    """Shapes read only inside tensor expressions: computed in the block, no value read (no fibers)."""
    h = p.h0
    for tok in tokens:
        x = torch.tanh(p.emb[tok] @ p.W)
        h = h + torch.ones(x.shape[0]) * x.size(-1) + x / x.ndim - len(x) + x.numel()
    return h


@ab.program
def transpose_and_dict_unpack(tokens, p):
    """``x.T`` is an operator; unpacking a dict gives its keys (host strings)."""
    d = {"h": p.h0, "c": p.b}
    first, second = d
    m = torch.outer(p.emb[tokens[0]], p.h0).T
    if first == "h" and second == "c":
        m = m * 2.0
    return m @ d["h"] + d["c"]


@ab.program
def dict_method(tokens, p):
    d = {"h": p.h0, "c": p.b}
    return d.get("h")  # E:dict_method


# ---------------------------------------------------------------- 4. conditional expressions


@ab.program
def cond_expr(tokens, p):
    """``a if c else b``: a tensor test (a value read), tensor branches, a shared branch."""
    h = p.h0
    for tok in tokens:
        x = p.emb[tok]
        h = torch.tanh(h @ p.U + x) if x.sum() > 0 else torch.relu(h @ p.W)
        g = p.b if tok % 2 == 0 else h * 0.5
        h = h + g
    return h


# ---------------------------------------------------------------- 5. None and Optional state


@ab.program
def optional_state(tokens, p):
    """``h = None`` ... ``if h is None: h = p.h0``."""
    h = None
    for tok in tokens:
        if h is None:
            h = p.h0
        h = step(h, p.emb[tok], p)
    if h is not None:
        h = h * 2.0
    g = h
    while g is not None and g.sum() > -10.0:
        g = None if torch.sum(g) > 0 else g + 1.0
    return h


@ab.function
def maybe_add(h, extra, p):
    if extra is not None:
        return h + extra
    return h @ p.U


@ab.program
def optional_arg(tokens, p):
    """None passed to a model function, and an Optional result (None for empty instances)."""
    h = None
    for tok in tokens:
        x = p.emb[tok]
        h = maybe_add(x, None, p) if h is None else maybe_add(x, h, p)
    return h


# ---------------------------------------------------------------- 6. grad-mode blocks


@ab.program
def grad_blocks(tokens, p):
    """``with torch.no_grad()`` / ``inference_mode`` / ``enable_grad``: the body runs inline."""
    h = p.h0
    for tok in tokens:
        with torch.no_grad():
            h = step(h, p.emb[tok], p)
        with torch.enable_grad():
            h = h * 0.9
    with torch.inference_mode():
        out = torch.tanh(h)
    return out


# ---------------------------------------------------------------- 7-9. lists, starred, dicts


@ab.program
def list_items(tokens, p):
    """``hs[i] = h`` and ``hs.insert(0, h)`` on lists of tensors."""
    hs = []
    for tok in tokens:
        hs.append(p.emb[tok])
    for i in range(len(hs)):
        hs[i] = torch.tanh(hs[i] @ p.W)
    hs.insert(0, p.h0)
    hs[len(hs) - 1] = hs[0] + hs[len(hs) - 1]
    return hs


@ab.program
def starred(tokens, p):
    """``first, *rest = xs`` on a list of tensors and on a tuple."""
    xs = [p.emb[t] for t in tokens]
    first, *rest = xs
    h = first
    for x in rest:
        h = step(h, x, p)
    a, *mid, z = (p.h0, h, h * 2.0, p.b)
    for m in mid:
        h = h + m
    b, *shared = (h, p.h0, p.b)  # the rest: different weights, a list of per-instance tensors
    for s in shared:
        b = b * s
    return h + a + z + b


@ab.function
def lstm_like(x, state, p):
    h = torch.tanh(x @ p.W + state["h"] @ p.U)
    return {"h": h, "c": state["c"] + h}


@ab.program
def dicts(tokens, p):
    """Dict literals with constant string keys, passed to and returned by functions."""
    state = {"h": p.h0, "c": p.b}
    for tok in tokens:
        state = lstm_like(p.emb[tok], state, p)
    return state


# ---------------------------------------------------------------- 10. host code


def n_steps(tokens, factor):
    """An undecorated helper on host data: runs as written."""
    return max(1, int(math.ceil(len(tokens) * factor)))


@ab.program
def host_code(tokens, p):
    """Undecorated helpers, ``math.*``, ``assert``/``isinstance``/``print``-free host code, comprehensions."""
    assert isinstance(tokens, list), "instances are token lists"
    steps = n_steps(tokens, 0.5)
    ids = list(tuple(sorted(t % 10 for t in tokens if t != 3)))
    assert str(len(ids)) == repr(len(ids))
    scale = math.sqrt(len(ids) + 1) / math.pi
    h = p.h0
    for i in range(steps):
        h = torch.tanh(h @ p.U + p.emb[ids[i % len(ids)] if ids else 0]) * scale
    return h


@ab.program
def builtin_given_tensor(tokens, p):
    xs = [p.emb[t] for t in tokens]
    return sorted(xs)[0]  # E:builtin_tensor


@ab.program
def printing(tokens, p):
    """``print`` of host values runs in the skeleton, once per instance (host code is plain Python)."""
    doubled = [t * 2 for t in tokens]
    print("tokens:", len(tokens), doubled[:2])
    h = torch.tanh(p.emb[tokens[0]] @ p.W)
    return h


@ab.program
def stack_list(tokens, p):
    """A list of per-instance length stacked (a ragged tensor, batched as its rows)."""
    xs = [p.emb[t] for t in tokens]
    return torch.stack(xs)


@ab.program
def stack_list_fixed(tokens, p):
    """The fix of ``builtin_given_tensor``: combine the items in a loop (``total`` sums a list of tensors)."""
    xs = [p.emb[t] for t in tokens]
    return total(xs, p)


@ab.program
def tensor_item_assign(tokens, p):
    h = torch.tanh(p.emb[tokens[0]] @ p.W)
    head = h[:2]  # a view: the write below reaches it too (without it, the write is taken: tests/test_idioms.py)
    h[0] = 1.0  # E:tensor_setitem
    return h, head


@ab.program
def tensor_item_assign_fixed(tokens, p):
    """The fix of ``tensor_item_assign``: build a new tensor."""
    h = torch.tanh(p.emb[tokens[0]] @ p.W)
    h = torch.cat([torch.ones(1), h[1:]])
    return h, h[:2]


# ---------------------------------------------------------------- 11. comprehensions


@ab.program
def comprehensions(tokens, p):
    """List comprehensions and generator expressions over tensors, with filters and nesting."""
    xs = [p.emb[t] for t in tokens]
    hs = [step(p.h0, x, p) for x in xs if True]
    gs = list(torch.tanh(h) for h in hs)
    pairs = [x * y for x in gs for y in xs[:1]]
    t = 5  # not overwritten by the comprehension's `t`
    sums = [g + q for g, q in zip(gs, pairs)]
    return sums, p.emb[t]


@ab.program
def comprehension_arguments(tokens, p):
    """Comprehensions as arguments and operands: built just before their statement."""
    n = max([t for t in tokens]) + sum(t * 2 for t in tokens if t > 3)
    h = torch.tanh([p.emb[t] for t in tokens][0] * n)
    for x in [torch.relu(p.emb[t]) for t in tokens[1:]]:
        h = step(h, x, p)
    return h


@ab.program
def conditional_comprehension(tokens, p):
    xs = [p.emb[t] for t in tokens] if len(tokens) > 2 else [p.b]  # E:comp_conditional
    return xs


@ab.program
def conditional_comprehension_fixed(tokens, p):
    """The fix of ``conditional_comprehension``: an if statement, each branch assigning."""
    if len(tokens) > 2:
        xs = [p.emb[t] for t in tokens]
    else:
        xs = [p.b]
    return xs


# ---------------------------------------------------------------- 12. nested functions


@ab.program
def nested_def(tokens, p):
    """Nested defs capturing variables bound once (``p``, ``scale``): hoisted, captures passed as arguments."""
    scale = 0.5

    def inner(h, x):
        return torch.tanh(h @ p.U + x) * scale

    def twice(h, x, n=2):
        for _ in range(n):
            h = inner(h, x)
        return h

    h = p.h0
    for tok in tokens:
        h = twice(h, x=p.emb[tok])
    return h


@ab.program
def nested_def_rebinds(tokens, p):
    h = p.h0

    def inner(x):  # E:nested_def
        return torch.tanh(x @ p.U + h)

    for tok in tokens:
        h = inner(p.emb[tok])
    return h


@ab.program
def nested_def_mutates(tokens, p):
    hs = []

    def add(x):
        hs.append(torch.tanh(x @ p.U))  # E:nested_mutates

    for tok in tokens:
        add(p.emb[tok])
    return hs


@ab.function
def add_fixed(x, p):
    return torch.tanh(x @ p.U)


@ab.program
def nested_def_mutates_fixed(tokens, p):
    """The fix of ``nested_def_mutates``: the helper returns the new item."""
    hs = []
    for tok in tokens:
        hs.append(add_fixed(p.emb[tok], p))
    return hs


@ab.program
def nested_def_as_value(tokens, p):
    def inner(x):
        return torch.tanh(x @ p.U)

    f = inner  # E:nested_value
    return f(p.emb[tokens[0]])


@ab.function
def inner_fixed(x, h, p):
    return torch.tanh(x @ p.U + h)


@ab.program
def nested_def_fixed(tokens, p):
    """The fix of ``nested_def_rebinds``: a module-level @acrobat.function taking what it used as arguments."""
    h = p.h0
    for tok in tokens:
        h = inner_fixed(p.emb[tok], h, p)
    return h


# ---------------------------------------------------------------- rejected constructs with fixes


@ab.program
def other_with(tokens, p):
    with open("x") as f:  # E:other_with
        pass
    return p.h0


@ab.program
def other_with_fixed(tokens, p):
    """The fix of ``other_with``: the file is read before the model runs (nothing of it is needed here)."""
    return p.h0


@ab.program
def optional_unchecked(tokens, p):
    h = None
    for tok in tokens:
        h = p.emb[tok]
    return torch.tanh(h)  # E:optional_unchecked


@ab.program
def optional_checked(tokens, p):
    """The fix of ``optional_unchecked``: test for None first."""
    h = None
    for tok in tokens:
        h = p.emb[tok]
    if h is None:
        h = p.h0
    return torch.tanh(h)


@ab.program
def dict_variable_key(tokens, p):
    d = {"a": p.h0, "b": p.b}
    k = "a" if tokens else "b"
    return d[k]  # E:dict_key


@ab.program
def dict_variable_key_fixed(tokens, p):
    """The fix of ``dict_variable_key``: constant keys, choose with an if."""
    d = {"a": p.h0, "b": p.b}
    return d["a"] if tokens else d["b"]

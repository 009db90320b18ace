"""More host Python in the static tier (tests/host_map_progs.py): dicts keyed by per-instance host data
(``kinds.MapK``: memo tables over DAGs, vocabularies and counts built per instance, a dict filled by a recursive
callee, keys of several host types, ``.items()`` after the recursion, ``(c, h)`` values), keyword-only
parameters and calls by keywords, namedtuples with list fields.

Each program runs batched under ``Options(strict=True)`` and the default options, in the static tier
(``stats.dynamic is None``, not plain calls), on both backends, at batch sizes 1, 3 and 17, and is compared with plain
per-instance calls: values (``assert_close``), dtypes, Python types (a namedtuple keeps its class, a dict its keys in
their order).
Gradients of the float outputs are compared with plain autograd on the eager backend in float64.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
from tests import host_map_progs as mp
from tests.test_hunt6 import _same

OPTIONS = {"default": None, "strict": ab.Options(strict=True)}


def _dag(rng: random.Random, depth: int = 0) -> mp.Node:
    """A random tree in which some nodes also point at a node of an earlier sibling's subtree: that node (and what
    is under it) is reached twice."""
    kids: list[mp.Node] = []
    for _ in range(rng.randint(0, 3 * (depth < 2))):
        kids.append(_dag(rng, depth + 1))
        if len(kids) > 1 and rng.random() < 0.6:
            kids[-1].kids.append(kids[0] if not kids[0].kids else rng.choice(kids[0].kids))
    return mp.Node(rng.randrange(mp.VOCAB), kids)


def _toks(rng: random.Random) -> list[int]:
    return [rng.randrange(mp.VOCAB // 2) for _ in range(rng.randint(0, 7))]  # repeats: counts above one


#: program name -> a factory of one instance.
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    "dag_memo_count": _dag, "dag_memo_children": _dag, "dag_memo_get": _dag, "dag_tuple_values": _dag,
    "filled_by_callee": _dag,
    "vocab_per_instance": _toks, "counts_per_key": _toks, "keyword_only_calls": _toks,
    "namedtuple_lists": lambda rng: [rng.randrange(mp.VOCAB) for _ in range(rng.randint(1, 5))],
    "namedtuple_fields_read": lambda rng: [rng.randrange(mp.VOCAB) for _ in range(rng.randint(1, 5))],
}


def _batch(name: str, n: int, seed: int = 0) -> list:
    rng = random.Random(seed * 100 + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _same_order(got: Any, want: Any) -> None:
    """Dicts hold their keys in the same order (``_same`` compares them as sets), at any nesting."""
    if isinstance(want, dict):
        assert list(got) == list(want), (list(got), list(want))
        for k in want:
            _same_order(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        for g, w in zip(got, want):
            _same_order(g, w)


def _run(name: str, batch: list, p: mp.MP, backend: str, option: str) -> list:
    """The batched run, in the static tier under either option (not the dynamic tier, not plain calls)."""
    stats = ab.RunStats()
    options = OPTIONS[option]
    out = getattr(mp, name).run(batch, p, backend=backend, stats=stats,
                                **({} if options is None else {"options": options}))
    assert stats.dynamic is None and stats.backend != "plain calls", (stats.dynamic, stats.backend)
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_equal_plain_calls(name: str, option: str, backend: str) -> None:
    """Batches of 1, 3 and 17 (two batches of 17 in a row on one program object) against the plain calls."""
    p, prog = mp.MP(), getattr(mp, name)
    for n, runs in ((1, 1), (3, 1), (17, 2)):
        batch = _batch(name, n)
        with torch.no_grad():
            want = [prog(x, p) for x in batch]
            for _ in range(runs):
                got = _run(name, batch, p, backend, option)
                _same(got, want, f"{name}, batch {n}")
                _same_order(got, want)


def _leaves(x: Any) -> list[torch.Tensor]:
    """The float tensors in ``x``, dicts in their keys' order."""
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _leaves(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _leaves(y)]
    return []


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_equal_plain_autograd(name: str, option: str) -> None:
    """The gradients of the summed float outputs of five instances, float64, eager backend."""
    p, prog, batch = mp.MP().double(), getattr(mp, name), _batch(name, 5, seed=7)
    torch.set_default_dtype(torch.float64)
    try:
        want_leaves = [t for x in batch for t in _leaves(prog(x, p))]
        want = torch.autograd.grad(sum(t.sum() for t in want_leaves), list(p.parameters()), allow_unused=True)
        got_leaves = [t for y in _run(name, batch, p, "eager", option) for t in _leaves(y)]
        got = torch.autograd.grad(sum(t.sum() for t in got_leaves), list(p.parameters()), allow_unused=True)
    finally:
        torch.set_default_dtype(torch.float32)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, k=k: f"gradient of {k}: {m}")


def test_memo_table_adds_each_shared_node_once() -> None:
    """A memo table keeps a node reached twice from being computed twice: the batched run adds fewer DFG nodes for
    the DAGs than for the same DAGs unshared (each shared node copied per parent), whose memo never hits."""
    rng = random.Random(3)
    shared = [_dag(rng) for _ in range(4)]
    unshared = [_unshared(x) for x in shared]
    p = mp.MP()
    counts = []
    for batch in (shared, unshared):
        stats = ab.RunStats()
        with torch.no_grad():
            out = mp.dag_memo_count.run(batch, p, backend="eager", options=OPTIONS["strict"], stats=stats)
        counts.append((stats.dfg_nodes, sum(n for _, n in out)))
    (nodes_s, distinct_s), (nodes_u, distinct_u) = counts
    assert distinct_s < distinct_u == sum(1 for x in shared for _ in _walk(x))  # the instances share nodes
    assert nodes_s < nodes_u


def _unshared(node: mp.Node) -> mp.Node:
    return mp.Node(node.w, [_unshared(c) for c in node.kids])


def _walk(node: mp.Node) -> Any:
    yield node
    for c in node.kids:
        yield from _walk(c)


# --- what the static tier still rejects, with the line ------------------------------------------------------------

def test_tensor_key_is_rejected_with_its_line() -> None:
    """A dict keyed by a tensor: host code cannot hash a lazy value; strict names the line."""
    src = '''
import torch, acrobat as ab

@ab.program
def tensor_key(toks, p):
    d = {}
    h = p.emb[toks[0]]
    d[h] = 1
    return h
'''
    ns = _module(src)
    with pytest.raises(ab.CompileError, match=r"tensor_key_mod\.py:8.*a tensor is used in a dict key"):
        ns["tensor_key"].run([[1, 2]], mp.MP(), options=OPTIONS["strict"])


def test_host_and_tensor_values_in_one_map_are_rejected() -> None:
    """A map's values have one kind: host data in one key and a tensor in another is a clear error, not a wrong
    answer (a record with constant keys is written as one display)."""
    src = '''
import torch, acrobat as ab

@ab.program
def mixed_values(toks, p):
    d = {}
    for t in toks:
        d[t] = p.emb[t] * 2
    d[-1] = len(toks)
    return d
'''
    ns = _module(src)
    with pytest.raises(ab.CompileError, match=r"mixed_values_mod\.py:9.*host data and tensors"):
        ns["mixed_values"].run([[1, 2]], mp.MP(), options=OPTIONS["strict"])


def _module(src: str) -> dict:
    """Run ``src`` as a module in a temporary file (acrobat reads its source), named after its program."""
    import importlib.util
    import os
    import tempfile
    name = src.split("@ab.program\ndef ", 1)[1].split("(", 1)[0] + "_mod"
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return vars(module)


def test_keyword_only_given_positionally_is_rejected_with_its_line() -> None:
    """A keyword-only parameter given positionally is a TypeError in Python: a CompileError naming the line and the
    parameter, not a value bound to it."""
    src = '''
import torch, acrobat as ab

@ab.function
def scaled(h, *, by=2.0):
    return h * by

@ab.program
def positional_keyword(toks, p):
    return scaled(p.emb[toks[0]], 3.0)
'''
    ns = _module(src)
    with pytest.raises(ab.CompileError, match=r"positional_keyword_mod\.py:10.*takes 1 positional.*`by` by keyword"):
        ns["positional_keyword"].run([[1, 2]], mp.MP(), options=OPTIONS["strict"])

"""An eighth hunt for silent wrong answers, on user-style programs of families earlier hunts did not cover
(tests/hunt8_progs.py: trees with parent pointers, DAGs memoized per instance, recursion returning tuples, early
returns in loops, tensor-tested ``while`` loops, keyed ``max``/``sorted``, in-place writes into fresh tensors,
grad modes, mixed dtypes, module containers and cells, dict/dataclass/namedtuple instances, results that are
dicts, None, host numbers and nested lists, default and keyword arguments, module and class constants).

Each program runs batched under the default options, ``Options(strict=True)`` (the static tier, or the
CompileError it gives, naming the line) and ``Options(static=False)`` (the dynamic tier), on both backends, at
batch sizes 1, 3 and 17 (three batches of 17 in a row on one program object), and is compared with plain
per-instance calls: values, dtypes, Python types, and what the instances hold after the run (attributes stored
on tree nodes). A fallback reporting a bug in acrobat (``DynamicFallbackWarning``) fails the test. Gradients of
the summed float outputs are compared on the eager backend in float64.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import warnings
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning
from tests import hunt8_progs as hp
from tests.test_hunt6 import _float_leaves, _same

OPTIONS = {"default": None, "strict": ab.Options(strict=True), "dynamic": ab.Options(static=False)}


def _toks(lo: int = 0, hi: int = 5) -> Callable[[random.Random], list[int]]:
    return lambda rng: [rng.randrange(hp.VOCAB) for _ in range(rng.randint(lo, hi))]


def _tree(rng: random.Random, depth: int = 0) -> hp.Node:
    kids = [_tree(rng, depth + 1) for _ in range(rng.randint(0, 3 * (depth < 2)))]
    return hp.Node(rng.randrange(hp.VOCAB), kids, score=rng.random())


def _dag(rng: random.Random) -> hp.Node:
    """A tree whose root also points at a node of its first subtree: that node (and what is under it) is reached
    twice."""
    root = _tree(rng)
    while len(root.kids) < 2:
        root = _tree(rng)
    shared = root.kids[0]
    while shared.kids and rng.random() < 0.5:
        shared = shared.kids[0]
    root.kids[1].kids.append(shared)
    return root


#: program name -> a factory of one instance.
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    "tree_parent_attention": _tree, "dag_memo": _dag, "rec_tuple": _tree, "rec_early_return": _tree,
    "zip_enumerate_reversed": _tree, "max_child_by_score": _tree, "grucell_tree": _tree,
    "while_norm": _toks(), "max_by_tensor_key": _toks(1), "inplace_fresh": _toks(1),
    # distinct tokens: the keys of equal tokens tie, and batched rows may round them apart (1 ulp)
    "sorted_by_item": lambda rng: rng.sample(range(hp.VOCAB), rng.randint(0, 5)),
    "no_grad_and_detach": _toks(), "mixed_dtypes": _toks(1), "sequential_and_modulelist": _toks(1),
    "padded_embedding": _toks(0, 6), "dropout_eval": _toks(), "lstmcell_state": _toks(),
    "dict_instance": lambda rng: {"toks": _toks()(rng), "label": rng.randrange(2)},
    "dataclass_instance": lambda rng: hp.Example(_toks()(rng), rng.randrange(2), rng.random()),
    "namedtuple_instance": lambda rng: hp.Pair(_toks(1)(rng), _toks(1)(rng)),
    "none_on_some": _toks(), "nested_tensor_lists": _toks(1), "default_and_keyword_args": _toks(),
    "module_and_class_constants": _toks(), "host_length_arithmetic": _toks(1),
}

#: What the static tier rejects at compile time (strict raises it; the default runs a region or the dynamic tier).
STRICT_REJECTS = {
}
#: What strict refuses where the run records autograd (a CompileError at run time; the dynamic tier runs it).
STRICT_GRAD_REJECTS = {"no_grad_and_detach": "turns autograd off in its code"}
#: Limits of the static tier met at run time (strict raises the ShapeError; the default reruns the batch).
STRICT_RUN_LIMITS = {"mixed_dtypes": "different shapes"}


def _held(x: Any) -> Any:
    """What an instance holds, as plain data ``_same`` compares: a node's attributes (its children's too, not its
    parent), a dataclass's fields, a namedtuple's items."""
    if isinstance(x, hp.Node):
        return {k: [_held(c) for c in v] if k == "kids" else _held(v) for k, v in vars(x).items() if k != "parent"}
    if dataclasses.is_dataclass(x):
        return {k: _held(v) for k, v in vars(x).items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return tuple(_held(v) for v in x)
    if isinstance(x, (list, tuple)):
        return type(x)(_held(v) for v in x)
    if isinstance(x, dict):
        return {k: _held(v) for k, v in x.items()}
    return x


def _batch(name: str, n: int, seed: int = 8000) -> list:
    rng = random.Random(seed + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _run(prog: ab.Program, batch: list, p: hp.HP, backend: str, option: str) -> list:
    """The batched run; a fallback warning reporting a bug in acrobat fails (a run-time limit's does not)."""
    options = OPTIONS[option]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DynamicFallbackWarning)
        out = prog.run(batch, p, backend=backend, **({} if options is None else {"options": options}))
    bugs = [str(w.message) for w in caught if issubclass(w.category, DynamicFallbackWarning)
            and "bug in acrobat" in str(w.message)]
    assert not bugs, bugs[0]
    return out


def _strict_limit(name: str, option: str, run: Callable[[], list]) -> list | None:
    """``run()``, or None where it met the static tier's expected run-time limit under strict."""
    if option != "strict" or name not in STRICT_RUN_LIMITS:
        return run()
    try:
        return run()
    except ab.ShapeError as e:
        assert STRICT_RUN_LIMITS[name] in str(e) and getattr(e, "static_limit", None), str(e)
        return None


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_and_state_equal_plain_calls(name, option, backend):
    """Batches of 1, 3 and 17 (three in a row at 17) against the plain calls, or the expected rejection."""
    prog, p = getattr(hp, name), hp.HP()
    if option == "strict" and name in STRICT_REJECTS:
        with pytest.raises(ab.CompileError, match=r"hunt8_progs\.py:\d+") as err:
            _run(prog, _batch(name, 3), p, backend, option)
        assert STRICT_REJECTS[name] in str(err.value)
        return
    for n, runs in ((1, 1), (3, 1), (17, 3)):
        batch = _batch(name, n)
        plain_batch = copy.deepcopy(batch)
        with torch.no_grad():
            want = [prog(x, p) for x in plain_batch]
        for _ in range(runs):  # one program object, batches in a row (kept signatures, the tier choice)
            batched = copy.deepcopy(batch)
            with torch.no_grad():
                got = _strict_limit(name, option, lambda: _run(prog, batched, p, backend, option))
            if got is None:
                continue
            _same(got, want, f"batch {n}")
            _same(_held(batched), _held(plain_batch), f"instances, batch {n}")


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_equal_plain_autograd(name, option):
    """The gradients of the summed float outputs (and of the tensors stored on the instances) of five instances,
    float64, eager backend."""
    if option == "strict" and name in STRICT_REJECTS:
        return  # test_outputs_and_state_equal_plain_calls checks the rejection
    prog, batch, p = getattr(hp, name), _batch(name, 5, seed=77), hp.HP().double()

    def leaves(out: list, instances: list) -> list[torch.Tensor]:
        return [t for y in (*out, *_held(instances)) for t in _float_leaves(y) if t.requires_grad]

    plain = copy.deepcopy(batch)
    want_leaves = leaves([prog(x, p) for x in plain], plain)
    if not want_leaves:
        pytest.skip("no output carries a gradient")
    want = torch.autograd.grad(sum(t.sum() for t in want_leaves), list(p.parameters()), allow_unused=True)
    batched = copy.deepcopy(batch)
    if option == "strict" and name in STRICT_GRAD_REJECTS:
        with pytest.raises(ab.CompileError, match=r"^\S*hunt8_progs\.py:\d+:\d+: ") as err:  # the user's line first
            _run(prog, batched, p, "eager", option)
        assert STRICT_GRAD_REJECTS[name] in str(err.value)
        return
    got_out = _strict_limit(name, option, lambda: _run(prog, batched, p, "eager", option))
    if got_out is None:
        return
    got = torch.autograd.grad(sum(t.sum() for t in leaves(got_out, batched)), list(p.parameters()),
                              allow_unused=True)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, k=k: f"gradient of {k}: {m}")



# --- regressions ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_bounds_of_module_constants_stay_numbers_in_a_block(backend):
    """`torch.clamp(h, -CLIP, CLIP / 2)` of a module constant `CLIP`: the frontend reads `CLIP` as its value, but
    `-CLIP` stayed a negation of it, which the static block took as a batched host operand, a tensor under vmap
    that clamp read with `.item()` (a BatchError: an InternalError under strict, a fallback reporting a bug by
    default). Constant arithmetic is now printed in the block as written (``blocks._constant_arithmetic``)."""
    p, batch = hp.HP(), [[1, 2], [3], [4, 5, 6]]
    with torch.no_grad():
        _same(_run(hp.clamp_by_constants, batch, p, backend, "strict"), [hp.clamp_by_constants(x, p) for x in batch])


@pytest.mark.parametrize("option", ["default", "dynamic"])
@pytest.mark.parametrize("lengths", [(2, 2, 2), (2, 1, 3)])
def test_a_parameter_indexed_by_a_token_list_in_the_dynamic_tier(option, lengths):
    """`p.emb[toks]` of a host list of ints: the dynamic tier batched each int of the list as its own number, so
    under vmap the index was a list of 0-d tensors, read as one index per dimension (`p.emb[1, 2]`: a 0-d result,
    a silent wrong answer where the lists had one length; an IndexError, a fallback reporting a bug, where they
    did not). The list is now the instance's tensor of its ints (``dynamic._int_lists_as_tensors``)."""
    p = hp.HP()
    batch = [[(3 * i + j) % hp.VOCAB for j in range(n)] for i, n in enumerate(lengths)]
    with torch.no_grad():
        _same(_run(hp.rows_by_token_list, batch, p, "eager", option), [hp.rows_by_token_list(x, p) for x in batch])

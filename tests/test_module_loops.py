"""Loops over a model's module and parameter containers in the static tier (``acrobat.analysis.unrolling``):
``for lyr in p.layers``, ``zip(p.lins, p.norms)``, ``enumerate(...)``, an ``nn.Sequential`` iterated, an
``nn.ModuleDict``'s keys/``.items()``/``.values()``, an ``nn.ParameterList`` (and ``reversed``), ``break``,
``continue`` and ``return`` inside, and one program run with models of different depths in a row.

Each program (tests/module_loop_progs.py) runs batched under the default options and ``Options(strict=True)``,
in the static tier alone under both (``stats.dynamic is None``), on both backends, at batch sizes 1, 3 and 17, and
is compared with plain per-instance calls; gradients of the summed outputs are compared on the eager backend in
float64.
"""

from __future__ import annotations

import random
import warnings
from typing import Any, Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.analysis.unrolling import MAX_UNROLL
from acrobat.errors import DynamicFallbackWarning
from tests import module_loop_progs as mp
from tests.test_hunt6 import _float_leaves, _same

OPTIONS = {"default": None, "strict": ab.Options(strict=True)}


def _toks(rng: random.Random) -> list[int]:
    return [rng.randrange(mp.VOCAB) for _ in range(rng.randint(1, 5))]


def _tree(rng: random.Random, depth: int = 0) -> mp.Node:
    return mp.Node(rng.randrange(mp.VOCAB), [_tree(rng, depth + 1) for _ in range(rng.randint(0, 2 * (depth < 2)))])


#: program name -> a factory of one instance.
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    "stacked_rnn": _toks, "residual_tree": _tree, "enumerate_skip_first": _toks, "sequential_iterated": _toks,
    "module_dict_views": _toks, "parameter_list": _toks, "loop_exits": _toks,
}


def _batch(name: str, n: int, seed: int = 900) -> list:
    rng = random.Random(seed + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _run(prog: ab.Program, batch: list, p: mp.ML, backend: str, option: str, static: bool = True) -> list:
    """The batched run; ``static``: the static tier alone ran it (``stats.dynamic is None``), under the default
    options too; a fallback warning reporting a bug in acrobat fails."""
    options, stats = OPTIONS[option], ab.RunStats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DynamicFallbackWarning)
        out = prog.run(batch, p, backend=backend, stats=stats, **({} if options is None else {"options": options}))
    bugs = [str(w.message) for w in caught if issubclass(w.category, DynamicFallbackWarning)
            and "bug in acrobat" in str(w.message)]
    assert not bugs, bugs[0]
    assert (stats.dynamic is None) == static, stats.dynamic
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_equal_plain_calls(name, option, backend):
    """Batches of 1, 3 and 17 against the plain calls."""
    prog, p = getattr(mp, name), mp.ML()
    for n in (1, 3, 17):
        batch = _batch(name, n)
        with torch.no_grad():
            want = [prog(x, p) for x in batch]
            got = _run(prog, batch, p, backend, option)
        _same(got, want, f"batch {n}")


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_equal_plain_autograd(name, option):
    """The gradients of the summed float outputs of five instances, float64, eager backend."""
    prog, batch, p = getattr(mp, name), _batch(name, 5, seed=77), mp.ML().double()
    want_leaves = [t for x in batch for t in _float_leaves(prog(x, p))]
    want = torch.autograd.grad(sum(t.sum() for t in want_leaves), list(p.parameters()), allow_unused=True)
    got_leaves = [t for y in _run(prog, batch, p, "eager", option) for t in _float_leaves(y)]
    got = torch.autograd.grad(sum(t.sum() for t in got_leaves), list(p.parameters()), allow_unused=True)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, k=k: f"gradient of {k}: {m}")


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_models_of_different_depths_in_a_row(backend):
    """One program object run with models of 2, 4, 0 and again 2 layers per stack: the containers' lengths are
    facts of the run (``kinds.shared_fact``), so each depth compiles its own unrolling (an empty stack none)."""
    for layers in (2, 4, 0, 2):
        p = mp.ML(layers=layers, seed=layers)
        for name in ("parameter_list", "loop_exits"):
            prog, batch = getattr(mp, name), _batch(name, 7)
            with torch.no_grad():
                want = [prog(x, p) for x in batch]
                _same(_run(prog, batch, p, backend, "strict"), want, f"{name}, {layers} layers")


_MODELS = {n: mp.ML(layers=n, seed=n) for n in range(6)}  # one model object per depth: hypothesis draws depths


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(layers=st.integers(0, 5), batch=st.lists(st.lists(st.integers(0, mp.VOCAB - 1), min_size=1, max_size=5),
                                                min_size=1, max_size=6))
def test_any_depth_and_exits_equal_plain_calls(layers, batch):
    """Any depth of the model's stacks, any instances (each choosing where `loop_exits` continues, breaks and
    returns): the unrolled loops give the plain calls' results, in the static tier alone."""
    p = _MODELS[layers]
    for prog in (mp.loop_exits, mp.parameter_list):
        with torch.no_grad():
            want = [prog(x, p) for x in batch]
            _same(_run(prog, batch, p, "eager", "strict"), want, f"{prog.__name__}, {layers} layers")


def test_one_function_over_containers_of_two_lengths_is_rejected_clearly():
    """A function unrolled for one container and called with another of another length: strict names the loop
    (a loop is unrolled once per function); the default runs it exactly in the dynamic tier."""
    p, batch = mp.ML(layers=2), _batch("stacked_rnn", 3)
    with torch.no_grad():
        want = [mp.two_stacks(x, p) for x in batch]
        with pytest.raises(ab.CompileError, match=r"^\S*module_loop_progs\.py:\d+:\d+: this loop over a shared "
                                                  r"container was unrolled for keys \[\[0, 1\]\]"):
            _run(mp.two_stacks, batch, p, "eager", "strict")
        _same(_run(mp.two_stacks, batch, p, "eager", "default", static=False), want)


def test_a_container_longer_than_the_unroll_limit_is_rejected_clearly():
    """More than ``MAX_UNROLL`` items: strict names the loop; the default runs it exactly in the dynamic tier."""
    p, batch = mp.ML(layers=MAX_UNROLL + 1), _batch("loop_exits", 3)
    with torch.no_grad():
        want = [mp.loop_exits(x, p) for x in batch]
        with pytest.raises(ab.CompileError, match=rf"^\S*module_loop_progs\.py:\d+:\d+: a loop over a shared "
                                                  rf"container of {MAX_UNROLL + 1} items"):
            _run(mp.loop_exits, batch, p, "eager", "strict")
        _same(_run(mp.loop_exits, batch, p, "eager", "default", static=False), want)

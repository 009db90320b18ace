"""``@acrobat.function`` methods of modules are program functions (issue 18, section 2): ``self.forward(child)``
and ``model(tree)`` are analysed like module-level functions (§4), not called as one opaque operator; a
module with no batchable form found while compiling sends the program to the dynamic tier."""

from __future__ import annotations

import copy
import random

import pytest
import torch

import acrobat as ab
from tests import method_progs as mp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)


def _tree(rng: random.Random, depth: int) -> mp.Node:
    if depth == 0 or rng.random() < 0.3:
        return mp.Node(rng.randrange(10))
    return mp.Node(0, _tree(rng, depth - 1), _tree(rng, depth - 1))


def _trees(n: int, seed: int = 0) -> list[mp.Node]:
    rng = random.Random(seed)
    return [_tree(rng, 4) for _ in range(n)]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", [mp.called, mp.method], ids=["model(tree)", "model.forward(tree, 2.0)"])
def test_a_recursive_method_runs_statically_and_equals_plain(prog, backend):
    m, trees = mp.Recursive(), _trees(9)
    with torch.no_grad():
        want = [prog(t, m) for t in trees]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(trees, m, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None and stats.fallback is None
    torch.testing.assert_close(got, want, **TOL)
    assert "functions: " in prog.explain(m) and "forward" in prog.explain(m)


def test_gradients_through_a_method_equal_the_per_instance_loop():
    m, trees = mp.Recursive(), _trees(6, 1)
    twin = copy.deepcopy(m)
    sum(o.sum() for o in mp.called.run(trees, m, backend="eager", options=STRICT)).backward()
    sum(mp.called(t, twin).sum() for t in trees).backward()
    for (name, a), b in zip(m.named_parameters(), twin.parameters()):
        torch.testing.assert_close(a.grad, b.grad, **TOL, msg=name)


def test_a_module_of_another_class_compiles_again():
    """The module's class is a fact of the compile: a run with a subclass whose `compose` differs uses it."""
    trees = _trees(5, 2)
    for m in (mp.Recursive(), mp.Other(), mp.Recursive()):
        with torch.no_grad():
            torch.testing.assert_close(mp.called.run(trees, m, backend="eager", options=STRICT),
                                       [mp.called(t, m) for t in trees], **TOL)


def test_a_module_with_a_forward_hook_is_called_as_plain_python():
    """A hook changes what calling the module does: the call is not made a program call of `forward`."""
    m, trees = mp.Recursive(), _trees(4, 3)
    m.register_forward_hook(lambda mod, args, out: out * 2.0)
    with pytest.raises(ab.CompileError, match="has forward hooks"):  # the batched form would skip the hook
        mp.called.compile(1, STRICT, (m,))
    stats = ab.RunStats()
    with torch.no_grad():
        want = [mp.called(t, m) for t in trees]
        got = mp.called.run(trees, m, backend="eager", stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    assert stats.dynamic is not None and "forward hooks" in stats.dynamic.reason


def test_a_module_with_no_batchable_form_runs_dynamically_from_the_first_run():
    """`nn.GRU` inside a called module: found while compiling (the static tier used to be chosen, then its first
    run raised a CompileError), so the module's `forward` runs as a dynamic region of the program (the rest is
    static) and the report says why."""
    m = mp.WithGRU()
    xs = [torch.randn(1, n, 4) for n in (2, 3, 1)]
    with pytest.raises(ab.CompileError, match=r"`(m|self).gru` is nn.GRU, which"):
        mp.gru_module.compile(1, STRICT, (m,))
    explained = mp.gru_module.explain(m)
    assert "dynamic region" in explained and "nn.GRU" in explained
    stats = ab.RunStats()
    with torch.no_grad():
        got = mp.gru_module.run(xs, m, backend="eager", stats=stats)
        torch.testing.assert_close(got, [mp.gru_module(x, m) for x in xs], **TOL)
    assert stats.dynamic is not None and "nn.GRU" in stats.dynamic.reason + " ".join(stats.dynamic.regions)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_a_method_that_stores_on_the_nodes_runs_statically(backend):
    """A method parsed during the analysis that stores `node.h`: the call stays the method it is (the store's
    attribute name once replaced the method's in the compiler's record of the call, a CompileError)."""
    m, trees = mp.Storing(), _trees(7, 4)
    with torch.no_grad():
        want = [mp.called(t, m) for t in copy.deepcopy(trees)]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = mp.called.run(copy.deepcopy(trees), m, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)

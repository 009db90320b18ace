"""Undecorated helpers of a model are analysed as program functions (issue 18 §2).

A researcher decorates the model's entry and leaves its helpers as they are: a module-level function given a
tensor (keywords and defaults too), a recursive one, and a method of the model's class given per-instance host
data, a stacked list, or whose result is a tuple are analysed as if decorated with ``@acrobat.function`` (``acrobat.analysis.kinds._Analyzer.helper_call``,
``Function.implicit``), in the static tier; a method given only tensors stays one operator of a block. Each is
compared with plain per-instance calls on both backends. Programs: ``tests/implicit_progs.py``.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from tests import implicit_progs as ip
from tests.progs import Small

STRICT = ab.Options(strict=True)


def _tree(rng: random.Random, depth: int = 0) -> dict:
    if depth > 3 or rng.random() < 0.35:
        return {"word": rng.randrange(9), "kids": []}
    return {"word": 0, "kids": [_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def _expr(rng: random.Random, depth: int = 0) -> tuple:
    if depth > 3 or rng.random() < 0.3:
        return ("num", rng.randint(-3, 3))
    return (rng.choice(["add", "mul"]), _expr(rng, depth + 1), _expr(rng, depth + 1))


def _same(prog, batch, p, backend: str) -> None:
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None and stats.plain is None  # the static tier ran it
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_undecorated_helpers_run_in_the_static_tier(backend):
    rng = random.Random(1)
    _same(ip.helper_given_a_tensor, [[rng.randrange(10) for _ in range(3)] for _ in range(5)], Small(), backend)
    _same(ip.recursive_helper, [_tree(rng) for _ in range(9)], torch.randn(3, 4), backend)
    _same(ip.undecorated_method, [_expr(rng) for _ in range(9)], ip.ExprNet(), backend)


def test_an_undecorated_method_is_analysed_through_its_recursion():
    """``self.encode(e)`` given the instance's tuples is a program call (before, it was one operator taking the
    tuple as a host operand, which failed at run time and fell back to the dynamic tier)."""
    compiled = ip.undecorated_method.compile(1, STRICT, (ip.ExprNet(),))
    names = {f.spec.fn.name for f in compiled.lowered}
    assert any(n.startswith("encode") for n in names), names


def test_gradients_through_undecorated_helpers_equal_plain_calls():
    rng = random.Random(2)
    model, batch = ip.ExprNet(), [_expr(rng) for _ in range(6)]
    sum(ip.undecorated_method(e, model) for e in batch).backward()
    want = {n: q.grad.clone() for n, q in model.named_parameters()}
    model.zero_grad()
    sum(ip.undecorated_method.run(batch, model, options=STRICT)).backward()
    for n, q in model.named_parameters():
        torch.testing.assert_close(q.grad, want[n], rtol=1e-5, atol=1e-6, msg=n)


def test_a_helper_the_parser_rejects_names_its_own_line():
    with pytest.raises(ab.CompileError, match=r"implicit_progs.py:\d+.*`Try`|try"):
        ip.helper_the_parser_rejects.compile(1, STRICT)
    p, batch, stats = Small(), [[1, 2], [3]], ab.RunStats()
    with torch.no_grad():
        got = ip.helper_the_parser_rejects.run(batch, p, stats=stats)
        torch.testing.assert_close(got, [ip.helper_the_parser_rejects(x, p) for x in batch])
    assert stats.dynamic is not None or stats.plain is not None  # not the static tier, and the report says so


def _doc(rng: random.Random) -> list[list[int]]:
    return [[rng.randrange(10) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 3))]


def _unary(rng: random.Random, depth: int = 0) -> tuple:
    if depth > 3 or rng.random() < 0.3:
        return ("num", rng.randint(-3, 3))
    op = rng.choice(["add", "neg"])
    return (op, *(_unary(rng, depth + 1) for _ in range(2 if op == "add" else 1)))


SURVEY = {"attention": (ip.attention, ip.Attention, _doc), "unary": (ip.unary, ip.Unary, _unary)}
"""The survey's constructs (issue 18 §2): a method given stacked lists, a method returning a pair, `torch.cat` of a
list of one or two children (``acrobat.analysis.folds``)."""


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", sorted(SURVEY))
@pytest.mark.parametrize("n", [1, 7])
def test_survey_constructs_run_in_the_static_tier(name, n, backend):
    prog, model, make = SURVEY[name]
    rng = random.Random(n)
    _same(prog, [make(rng) for _ in range(n)], model(), backend)


@pytest.mark.parametrize("name", sorted(SURVEY))
def test_survey_constructs_give_plain_gradients(name):
    prog, model_cls, make = SURVEY[name]
    rng, model = random.Random(5), model_cls()
    batch = [make(rng) for _ in range(5)]
    sum(prog(x, model).sum() for x in batch).backward()
    want = {n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None}
    model.zero_grad()
    sum(r.sum() for r in prog.run(batch, model, options=STRICT)).backward()
    for n, g in want.items():
        torch.testing.assert_close(dict(model.named_parameters())[n].grad, g, rtol=1e-5, atol=1e-6, msg=n)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(0, 10**6), st.sampled_from(sorted(SURVEY)))
def test_survey_constructs_any_lengths(n, seed, name):
    prog, model, make = SURVEY[name]
    rng = random.Random(seed)
    _same(prog, [make(rng) for _ in range(n)], model(), "eager")

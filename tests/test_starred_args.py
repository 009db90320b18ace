"""Starred arguments in calls (`f(*pair, q)`, `f(**kw)`) and functions taking `*args` (issue 18, section 2).

Each form compiles statically (``Options(strict=True)``) and equals the program run as plain Python per
instance, on both backends, gradients included (eager); a starred value the static tier cannot take is
rejected with file:line and a fix, and the fix compiles.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from tests import starred_progs as sp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)

FORMS = ["tuple_display", "returned_tuple", "chunks_unpacked", "loop_over_pairs", "module_unpacked", "host_calls",
         "keywords_unpacked", "function_taking_args", "sizes_per_call", "unpacked_after_a_call_fixed",
         "transposed_pairs"]


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _plain_and_batched(prog, batch: list, backend: str = "eager", options: ab.Options = STRICT,
                       stats: ab.RunStats | None = None) -> tuple[list, list]:
    """``prog`` run as plain Python per instance of ``batch``, and batched."""
    p = sp.Params()
    with torch.no_grad():
        plain = [prog(x, p) for x in batch]
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        return plain, prog.run(batch, p, backend=backend, options=options, stats=stats)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", FORMS)
def test_starred_call_runs_statically_and_equals_plain(name, backend):
    stats = ab.RunStats()
    want, got = _plain_and_batched(getattr(sp, name), _tokens(9, len(name)), backend, stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


def _loss(out) -> torch.Tensor:
    """The sum of every tensor in a program's result (nested tuples and lists)."""
    if isinstance(out, torch.Tensor):
        return out.sum()
    if isinstance(out, (tuple, list)):
        return sum((_loss(x) for x in out), torch.zeros(()))
    return torch.zeros(())


@pytest.mark.parametrize("name", ["tuple_display", "returned_tuple", "chunks_unpacked", "loop_over_pairs",
                                  "keywords_unpacked", "function_taking_args"])
def test_gradients_equal_plain(name):
    prog = getattr(sp, name)
    batch = _tokens(7, 1 + len(name))
    p_plain, p_batched = sp.Params(), sp.Params()
    sum(_loss(prog(x, p_plain)) for x in batch).backward()
    _loss(prog.run(batch, p_batched, backend="eager", options=STRICT)).backward()
    for (n, a), b in zip(p_plain.named_parameters(), p_batched.parameters()):
        torch.testing.assert_close(b.grad, a.grad, **TOL, msg=lambda m: f"{n}: {m}")


def test_arguments_run_in_pythons_order():
    """`host_sum(note(1), *pair, note(3))`: each instance's calls run in the order plain Python runs them."""
    p = sp.Params()
    batch = _tokens(6, 4)

    def seen() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for key, x in sp.ORDER:
            out.setdefault(key, []).append(x)
        sp.ORDER.clear()
        return out

    sp.ORDER.clear()
    with torch.no_grad():
        want = [sp.evaluation_order(x, p) for x in batch]
        plain = seen()
        got = sp.evaluation_order.run(batch, p, backend="eager", options=STRICT)
    assert seen() == plain
    torch.testing.assert_close(got, want, **TOL)
    assert all(v[1:] == [2, 1, 3, 5, 4, 6] for v in plain.values())


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", ["list_unpacked", "list_unpacked_into_a_helper"])
def test_a_list_of_per_instance_length_unpacked_into_rest_is_static(name, backend):
    """`total(x, *hs)` / `combine(*hs)` with `hs` a list whose length differs per instance (an empty one too, in
    the second call of `list_unpacked_into_a_helper`), into a function that only reads its `*rest`: the list is
    passed whole, in the static tier, and equals plain calls (issue 18 §2)."""
    stats = ab.RunStats()
    want, got = _plain_and_batched(getattr(sp, name), _tokens(9, 2), backend, stats=stats)
    assert stats.dynamic is None
    assert any(w[-1] is None for w in want) == (name == "list_unpacked_into_a_helper")
    torch.testing.assert_close(got, want, **TOL)


def test_a_list_unpacked_into_a_rest_that_is_rebound_is_rejected_and_the_fix_is_static():
    """`growing(x, *hs)` whose `*rest` is rebound (`rest + (first,)`: a tuple operation): rejected where the
    static tier is asked for, with the fix (take the list as one parameter), which compiles; the dynamic tier runs
    the program as written."""
    batch = _tokens(5, 2)
    with pytest.raises(ab.CompileError, match=r"starred_progs\.py:\d+:\d+: `\*` passes a list, whose length may "
                                              r"differ per instance.*take the list as one parameter"):
        sp.list_unpacked_and_rebound.run(batch, sp.Params(), options=STRICT)
    stats = ab.RunStats()
    want, got = _plain_and_batched(sp.list_unpacked_and_rebound, batch, options=ab.Options(), stats=stats)
    assert stats.dynamic is not None
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(_plain_and_batched(sp.list_passed, batch)[1],
                               _plain_and_batched(sp.list_unpacked, batch)[0], **TOL)


def test_a_value_unpacked_after_a_call_is_rejected_and_the_fix_compiles():
    """`total(torch.tanh(x), *encode(t, p))`: `encode` cannot be run ahead of `torch.tanh` (Python's order), so
    the message says to evaluate it into a variable first; that program compiles and equals the original."""
    batch = _tokens(5, 3)
    with pytest.raises(ab.CompileError, match=r"starred_progs\.py:\d+:\d+: `\*encode\(tokens\[-1\], p\)` is "
                                              r"unpacked .*`args = encode\(tokens\[-1\], p\)`, then `f\(\*args\)`"):
        sp.unpacked_after_a_call.run(batch, sp.Params(), options=STRICT)
    plain, fixed = _plain_and_batched(sp.unpacked_after_a_call_fixed, batch)
    with torch.no_grad():
        torch.testing.assert_close(fixed, [sp.unpacked_after_a_call(x, sp.Params()) for x in batch], **TOL)
    torch.testing.assert_close(fixed, plain, **TOL)


@ab.program
def _keyword_twice(tokens, p):
    kw = {"doc": p.emb[0], "p": p}
    return sp.score(1, p.emb[tokens[0]], doc=p.emb[1], **kw)


@ab.program
def _tensor_unpacked(tokens, p):
    return sp.total(*p.emb[tokens[0]])


@pytest.mark.parametrize("prog, message", [
    (_keyword_twice, r"keyword argument `doc` is given twice \(Python raises TypeError\)"),
    (_tensor_unpacked, r"`\*` unpacks a tensor \(its rows\).*pass the items explicitly"),
])
def test_starred_forms_the_static_tier_does_not_take_are_explained(prog, message):
    with pytest.raises(ab.CompileError, match=r"test_starred_args\.py:\d+:\d+: " + message):
        prog.run(_tokens(2), sp.Params(), options=STRICT)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=7), min_size=1, max_size=6))
def test_unpacking_equals_python_on_any_batch(batch):
    """The loop over `list(enumerate(vecs))` unpacking each pair, and `*args` functions given tuples of 1 to 3
    items, equal Python on any batch."""
    for prog in (sp.loop_over_pairs, sp.sizes_per_call, sp.function_taking_args):
        want, got = _plain_and_batched(prog, batch)
        torch.testing.assert_close(got, want, **TOL)


def _line(key: str) -> int:
    with open(sp.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


def test_transposed_pairs_are_tuples_as_python_gives_them():
    want, got = _plain_and_batched(sp.transposed_pairs, _tokens(6, 1))
    assert all(type(g[1]) is type(w[1]) is tuple and len(g[1]) == len(w[1]) for g, w in zip(got, want))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=6), min_size=1, max_size=5))
def test_transposed_pairs_on_random_lengths(batch):
    want, got = _plain_and_batched(sp.transposed_pairs, batch)
    torch.testing.assert_close(got, want, **TOL)


def test_gradients_through_transposed_pairs_equal_plain():
    batch, want_p, got_p = _tokens(5, 4), sp.Params(), sp.Params()
    sum(_loss(sp.transposed_pairs(x, want_p)) for x in batch).backward()
    _loss(sp.transposed_pairs.run(batch, got_p, options=STRICT)).backward()
    for (n, want), (_, got) in zip(want_p.named_parameters(), got_p.named_parameters()):
        if want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, **TOL, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("prog, key, message", [
    (sp.transposed_triples_into_two, "unzip_arity", "a list of 3-tuples gives 3 sequences, unpacked here into 2"),
    (sp.zip_star_in_a_loop, "unzip_loop", "`zip(*xs)` is static only unpacked at once into names"),
], ids=["arity", "loop"])
def test_zip_star_the_static_tier_does_not_take_is_explained(prog, key, message):
    with pytest.raises(ab.CompileError) as err:
        prog.run(_tokens(2), sp.Params(), options=STRICT)
    assert f"starred_progs.py:{_line(key)}:" in str(err.value) and message in str(err.value), str(err.value)


def test_zip_star_of_an_empty_list_raises_as_python_does():
    with pytest.raises(ValueError, match="not enough values to unpack"):
        sp.transposed_empty([1], sp.Params())
    with pytest.raises(Exception, match="not enough values to unpack") as err:
        sp.transposed_empty.run([[1], [2]], sp.Params(), options=STRICT)
    assert f"starred_progs.py:{_line('unzip_empty')}" in str(err.value), str(err.value)

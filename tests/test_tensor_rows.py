"""Loops over a tensor's rows in the static tier (issue 18, section 2; ``acrobat.analysis.rows``).

`for h in x`, `enumerate(x, start=...)`, `zip(x, ys)` / `zip(ys, x)` / `zip(x1, x2)`, `reversed(x)` and
`list(x)` of a tensor compile statically (``Options(strict=True)``) and equal the program run as plain Python per
instance, on both backends, gradients included (eager), for any number of rows (none too); a 0-d tensor iterated
raises TypeError naming the instance, as PyTorch raises it; a tensor iterated only sometimes is rejected with
file:line and the fix.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat import pipeline
from acrobat.frontend import ir
from tests import rows_progs as rp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)

FORMS = ["for_rows", "enumerate_start", "enumerate_positional_start", "zip_unequal", "zip_tensor_first_and_last",
         "reversed_rows", "list_of_rows", "rows_in_a_comprehension", "scalars_and_nested", "break_on_value",
         "list_in_one_call_tensor_in_another", "top2_router", "shared_weight_rows", "effects_before_the_rows",
         "rows_in_concurrent_calls", "rows_into_a_chosen_module"]
EMPTY_FAILS = {"rows_in_a_comprehension", "rows_into_a_chosen_module",  # `sum([])` is the int 0 (not batched)
               "effects_before_the_rows"}  # pops a token


def _batch(n: int, length: int, seed: int = 0) -> list[list[int]]:
    """``n`` token lists of ``length`` tokens each (the rows of one per-instance tensor agree across a batch)."""
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(length)] for _ in range(n)]


def _plain_and_batched(prog, batch: list, backend: str = "eager",
                       stats: ab.RunStats | None = None) -> tuple[list, list]:
    """``prog`` run as plain Python per instance of ``batch``, and batched (strict: the static tier)."""
    p = rp.Params()
    with torch.no_grad():
        plain = [prog(x, p) for x in copy.deepcopy(batch)]
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        return plain, prog.run(copy.deepcopy(batch), p, backend=backend, options=STRICT, stats=stats)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", FORMS)
def test_rows_run_statically_and_equal_plain(name, backend):
    stats = ab.RunStats()
    want, got = _plain_and_batched(getattr(rp, name), _batch(7, 3, len(name)), backend, stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(FORMS), st.integers(0, 6), st.integers(1, 5), st.integers(0, 1000))
def test_any_number_of_rows_equals_plain(name, length, n, seed):
    """Any number of rows, none included, and any batch size: the values of plain Python (eager)."""
    if name in EMPTY_FAILS and length == 0:
        length = 1
    want, got = _plain_and_batched(getattr(rp, name), _batch(n, length, seed))
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("length", [0, 4])
def test_zip_stops_at_its_shortest_argument(length):
    """`zip(x, range(sum(tokens) % 4))`: as many steps as the shorter, which differs per instance; `zip(x, W[:3])`
    of two tensors: min(len(x), 3) steps."""
    batch = [[0] * length, [1] * length, [2] * length, [3] * length]  # host lists of 0, 1 or 2 (and 3) items
    want, got = _plain_and_batched(rp.zip_unequal, batch)
    torch.testing.assert_close(got, want, **TOL)


def test_enumerate_counts_from_its_start():
    """`enumerate(x, start=2)` and `enumerate(x, -1)`: the counts Python gives, and host values stay host."""
    batch = _batch(5, 4, 1)
    want, got = _plain_and_batched(rp.enumerate_positional_start, batch)
    assert [seen for _, seen in got] == [[-1, 0, 1, 2]] * 5
    torch.testing.assert_close(got, want, **TOL)
    want, got = _plain_and_batched(rp.enumerate_start, batch)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("name", ["for_rows", "zip_unequal", "zip_tensor_first_and_last", "list_of_rows",
                                  "scalars_and_nested", "top2_router"])
def test_gradients_equal_plain(name):
    prog = getattr(rp, name)
    batch = _batch(6, 4, 2)
    grads = []
    for batched in (False, True):
        torch.manual_seed(0)  # the experts' nn.Linear weights
        p = rp.Params()
        outs = prog.run(batch, p, backend="eager", options=STRICT) if batched else [prog(x, p) for x in batch]
        sum(o[0].sum() if isinstance(o, tuple) else o.sum() for o in outs).backward()
        grads.append({n: w.grad for n, w in p.named_parameters() if w.grad is not None})
    assert grads[0] and grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], **TOL, msg=n)


def test_a_0d_tensor_iterated_raises_type_error_naming_the_instance():
    batch = [[1, 2], [3, 4], [0, 5]]  # the third iterates a 0-d tensor
    with pytest.raises(TypeError, match="0-d tensor"):
        rp.zero_d_rows(batch[2], rp.Params())
    with pytest.raises(ab.InstanceError, match=r"instance 2: TypeError: len\(\) of a 0-d tensor") as err, \
            torch.no_grad():
        rp.zero_d_rows.run(batch, rp.Params(), backend="eager", options=STRICT)
    assert err.value.instance == 2 and "rows_progs.py" in str(err.value)


def test_rows_iterated_only_sometimes_are_rejected():
    with pytest.raises(ab.CompileError, match=r"rows_progs.py:\d+:\d+: a tensor's rows are iterated only sometimes "
                                              r"here .*\(`rows = list\(x\)`\)"):
        rp.rows_under_a_condition.run(_batch(2, 3), rp.Params(), options=STRICT)


def test_only_the_specialization_iterating_a_tensor_is_rewritten():
    """`total(xs, p)` iterates a tensor in one call and a list in the other: the first specialization builds the
    rows (one loop more), the other loops over the list as written; the parsed function stays as written."""
    prog = rp.list_in_one_call_tensor_in_another
    table = pipeline.run(pipeline.Request(prog, 1, STRICT)).table
    loops = sorted(len(_loops(spec.fn.body)) for spec in table.specs.values() if spec.fn.name == "total")
    assert loops == [1, 2]
    assert len(_loops(prog.functions()[rp.total].body)) == 1


def _loops(body: list[ir.Stmt]) -> list[ir.For]:
    return [s for s in ir.walk_stmts(body) if isinstance(s, ir.For)]

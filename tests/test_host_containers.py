"""Host Python over containers of tensors (issue 18, section 2), in the static tier.

Each construct used to send its program to the dynamic tier (or, for a
module chosen by a per-instance value, fail inside a static block); each
now compiles statically (checked with ``Options(strict=True)``) and equals
the program run as plain Python per instance, on both backends.
"""

from __future__ import annotations

import random

import pytest
import torch

import acrobat as ab
from tests import container_progs as cp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


STATIC = ["chained_assignment", "reversed_in_place", "list_truth", "tuple_of_chunks", "values_and_indices",
          "comprehension_rebound"]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", STATIC)
def test_construct_runs_statically_and_equals_plain(name, backend):
    prog = getattr(cp, name)
    p = cp.Params()
    batch = _tokens(9, len(name))
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
    stats = ab.RunStats()
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        got = prog.run(batch, p, backend=backend, options=STRICT, stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


def test_a_module_chosen_by_a_per_instance_value_runs_dynamically():
    """`p.experts[t % 3](h)`: it failed inside a static block (vmap cannot index a ModuleList by a batched number),
    an internal error; the static tier now says why it does not take it, and the dynamic tier runs it."""
    p = cp.Params()
    batch = _tokens(9, 3)
    with pytest.raises(ab.CompileError, match="module chosen by a per-instance value"):
        cp.expert_by_token.run(batch, p, options=STRICT)
    stats = ab.RunStats()
    with torch.no_grad():
        want = [cp.expert_by_token(x, p) for x in batch]
        got = cp.expert_by_token.run(batch, p, backend="eager", stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    assert stats.dynamic is not None and "module chosen" in stats.dynamic.reason


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_two_calls_in_one_expression_run_concurrently(backend):
    """`f(encode(node.left), encode(node.right))` without `ab.concurrent`: the analysis proves the calls
    independent and runs them as concurrent calls (§4.1), so they batch as with the annotation."""
    from acrobat.data.synthetic import synthetic_trees
    p = cp.Params()
    trees = synthetic_trees(12, 1, vocab_size=10)
    launches = {}
    for prog in (cp.two_calls_in_one_expression, cp.two_calls_annotated):
        with torch.no_grad():
            want = [prog(t, p) for t in trees]
        stats = ab.RunStats()
        with torch.inference_mode() if backend == "compiled" else torch.no_grad():
            got = prog.run(trees, p, backend=backend, options=STRICT, stats=stats)
        torch.testing.assert_close(got, want, **TOL)
        launches[prog.__name__] = stats.kernel_launches
    assert launches["two_calls_in_one_expression"] == launches["two_calls_annotated"]

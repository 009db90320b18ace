"""Shape reads held in variables and used inside static blocks (acrobat.analysis.shape_vars).

``n = h.shape[0]`` then ``h.view(n, 2, -1)``: each form runs in the static tier (``Options(strict=True)``)
and equals the program run as plain Python per instance, on both backends and batch sizes 1, 3 and 17,
gradients included (eager). A variable that cannot be read inline exactly (its tensor rebound before the use,
or host data that is no shape read) used as a size is rejected with file:line and a fix, and the default
options run it in the dynamic tier with plain Python's results; instance tensors of unequal shapes are the
static tier's limit and rerun there too.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.errors import CompileError, DynamicFallbackWarning
from tests import shape_var_progs as sv

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)
STATIC = ["brief", "unpacked", "heads", "length", "instance_attention", "host_uses", "number_and_size",
          "rebound_fixed"]
INEXACT = {"rebound": 94, "host_number_size": 109}  # the line of the size each rejection names


def _batch(name: str, n: int, seed: int = 0, rows: int | None = 4) -> list:
    """``n`` instances of program ``name``: token lists of 2 to 6 tokens, or (``instance_attention``) tensors of
    ``rows`` rows (``None``: 2 to 5 rows, drawn per instance)."""
    rng = random.Random(seed)
    if name == "instance_attention":
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(rows or rng.randint(2, 5), sv.HIDDEN, generator=g) for _ in range(n)]
    return [[rng.randrange(10) for _ in range(rng.randint(2, 6))] for _ in range(n)]


def _plain_and_batched(prog, batch: list, backend: str = "eager", options: ab.Options = STRICT,
                       stats: ab.RunStats | None = None) -> tuple[list, list]:
    """``prog`` run as plain Python per instance of ``batch``, and batched."""
    p = sv.Params()
    with torch.no_grad():
        plain = [prog(x, p) for x in batch]
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        return plain, prog.run(batch, p, backend=backend, options=options, stats=stats)


@pytest.mark.parametrize("n", [1, 3, 17])
@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", STATIC)
def test_shape_variable_runs_statically_and_equals_plain(name, backend, n):
    stats = ab.RunStats()
    want, got = _plain_and_batched(getattr(sv, name), _batch(name, n, n), backend, stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("name", STATIC)
def test_default_options_stay_static(name):
    """Without strict, no batch falls back to the dynamic tier (it did, as acrobat's bug)."""
    stats = ab.RunStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)
        want, got = _plain_and_batched(getattr(sv, name), _batch(name, 5, 1), options=ab.Options(), stats=stats)
    assert stats.dynamic is None and stats.fallback is None
    torch.testing.assert_close(got, want, **TOL)


def _loss(out) -> torch.Tensor:
    """The sum of every tensor in a program's result (nested tuples)."""
    if isinstance(out, torch.Tensor):
        return out.sum()
    return sum((_loss(x) for x in out), torch.zeros(()))


@pytest.mark.parametrize("name", STATIC)
def test_gradients_equal_plain(name):
    prog = getattr(sv, name)
    batch = _batch(name, 3, 2)
    p_plain, p_batched = sv.Params(), sv.Params()
    sum(_loss(prog(x, p_plain)) for x in batch).backward()
    _loss(prog.run(batch, p_batched, backend="eager", options=STRICT)).backward()
    for (k, a), b in zip(p_plain.named_parameters(), p_batched.parameters()):
        torch.testing.assert_close(b.grad, a.grad, **TOL, msg=lambda m: f"{k}: {m}")


@pytest.mark.parametrize("name", sorted(INEXACT))
def test_inexact_size_variable_is_rejected_with_line_and_fix(name):
    with pytest.raises(CompileError, match=rf"shape_var_progs\.py:{INEXACT[name]}:.*`n` is a per-instance host "
                                           r"number used as a size.*Write the shape read inline"):
        _plain_and_batched(getattr(sv, name), _batch(name, 3))


@pytest.mark.parametrize("name", sorted(INEXACT))
def test_inexact_size_variable_runs_in_the_dynamic_tier(name):
    """Chosen at compile time (the rejection's reason), not after a failed static run blamed on acrobat."""
    stats = ab.RunStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)
        want, got = _plain_and_batched(getattr(sv, name), _batch(name, 7, 3), options=ab.Options(), stats=stats)
    assert stats.dynamic is not None and "used as a size" in stats.dynamic.reason and stats.fallback is None
    torch.testing.assert_close(got, want, **TOL)


def test_unequal_instance_shapes_rerun_in_the_dynamic_tier():
    """`n = x.shape[0]` of instance tensors of different lengths: a static block cannot batch them (the static
    tier's limit, met at run time); the batch reruns in the dynamic tier, exact."""
    with pytest.warns(DynamicFallbackWarning, match="equal shapes only"):
        want, got = _plain_and_batched(sv.instance_attention, _batch("instance_attention", 6, 4, rows=None),
                                       options=ab.Options())
    torch.testing.assert_close(got, want, **TOL)


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 6), n=st.integers(1, 9), seed=st.integers(0, 1000))
def test_instance_shape_variable_any_length(rows, n, seed):
    """`n = x.shape[0]` read inline in the blocks of `instance_attention`, for any number of rows shared by
    the batch."""
    stats = ab.RunStats()
    want, got = _plain_and_batched(sv.instance_attention, _batch("instance_attention", n, seed, rows), stats=stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)

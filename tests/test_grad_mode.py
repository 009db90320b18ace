"""A model's own ``with torch.no_grad():`` under a run that records autograd (found by tests/unseen_progs.py).

The plain call computes that body without autograd; the batched run must give the same gradients (the
static tier runs such a program in the dynamic tier while autograd records, and the dynamic tier launches
the body's operators without autograd), and must leave the caller's grad mode as it found it (a fiber that
waits inside the body used to leave the thread's grad mode off, so every later step trained nothing).
"""

from __future__ import annotations

import random

import pytest
import torch

import acrobat as ab
from tests import grad_mode_progs as gp

PROGRAMS = [gp.no_grad_scale, gp.no_grad_read, gp.same_op_with_and_without_grad]
OPTIONS = {"default": None, "dynamic": ab.Options(static=False)}


def _batch(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _grads(p: gp.Params, outs: list[torch.Tensor]) -> list[torch.Tensor | None]:
    for q in p.parameters():
        q.grad = None
    torch.stack([o.sum() for o in outs]).sum().backward()
    return [None if q.grad is None else q.grad.clone() for q in p.parameters()]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("opts", OPTIONS, ids=str)
@pytest.mark.parametrize("backend", ["eager", "eager-accum"])
@pytest.mark.parametrize("n", [1, 7])
def test_gradients_equal_plain_calls(prog, opts, backend, n):
    p = gp.Params()
    batch = _batch(n)
    want = _grads(p, [prog(x, p) for x in batch])
    got_out = prog.run(batch, p, backend=backend, options=OPTIONS[opts])
    assert torch.is_grad_enabled(), "the run left the caller's grad mode off"
    with torch.no_grad():
        torch.testing.assert_close(got_out, [prog(x, p) for x in batch])
    got = _grads(p, got_out)
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("opts", OPTIONS, ids=str)
def test_caller_grad_mode_survives_a_fiber_waiting_in_no_grad(opts):
    p = gp.Params()
    gp.no_grad_read.run(_batch(9, seed=3), p, backend="eager", options=OPTIONS[opts])
    assert torch.is_grad_enabled()


def test_inference_keeps_the_static_tier():
    stats = ab.RunStats()
    with torch.no_grad():
        gp.no_grad_scale.run(_batch(5), gp.Params(), backend="eager", stats=stats)
    assert stats.dynamic is None
    assert "without autograd" in gp.no_grad_scale.explain(gp.Params())


def test_strict_names_the_with_statement():
    with pytest.raises(ab.CompileError, match=r"grad_mode_progs\.py:\d+"):
        gp.no_grad_scale.run(_batch(3), gp.Params(), backend="eager", options=ab.Options(strict=True))

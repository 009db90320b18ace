"""The dynamic tier's launches (acrobat.runtime.dynamic ``Signatures``, acrobat.runtime.eager ``RowLoopKernel``
merged gathers): what a later run takes from an earlier one, and one gather for a launch's like columns.

Every batched result is compared with the same program called per instance in plain PyTorch: a block kept
for the wrong signature, a shared tensor passed to the wrong block, or a column cut from the wrong rows of
a merged gather gives a wrong answer here.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import acrobat as ab
from acrobat.runtime.dynamic import Signatures
from acrobat.runtime.eager import RowLoopKernel

DYNAMIC = ab.Options(static=False)
BACKENDS = ["eager", "compiled"]


class Params(nn.Module):
    """Two weights of one shape (``W``, ``V``) and a table ``emb`` (10, 4), float64."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g, dtype=torch.float64) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5)
        self.V = nn.Parameter(torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5)


@ab.program
def two_weights(tokens, p):
    """(4,): ``W`` then ``V`` per token, in the order the token's parity says, from the embedding of the first."""
    h = p.emb[tokens[0]]
    for t in tokens:
        h = torch.tanh(h @ p.W) if t % 2 else torch.tanh(h @ p.V) + p.emb[t]
    return h


@ab.program
def stacked(tokens, p):
    """(len(tokens), 4): every step's state stacked, the steps from several depths (and so several launches)."""
    states = []
    h = p.emb[tokens[0]]
    for t in tokens:
        h = torch.tanh(h @ p.W) if t % 2 else torch.sigmoid(p.emb[t] @ p.V)
        states.append(h)
    return torch.stack(states)


def _check(prog, batch, p, backend):
    with torch.inference_mode():
        want = [prog(x, p) for x in batch]
        got = prog.run(batch, p, backend=backend, options=DYNAMIC)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


def _signatures(prog, p) -> Signatures:
    signatures = prog.compile(1, DYNAMIC, (p,)).plan.signatures
    assert isinstance(signatures, Signatures)
    return signatures


def _kept(signatures: Signatures) -> int:
    return sum(len(entries) for entries in signatures.kept.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_later_run_takes_the_blocks_an_earlier_one_made(backend):
    batch = [[1, 2, 3], [2, 2], [3, 1, 4, 1], [5]]
    _check(two_weights, batch, Params(0), backend)
    kept = _kept(_signatures(two_weights, Params(0)))
    assert kept > 0
    # new parameter tensors (other ids, other values, the same shapes): the same blocks, their own values
    _check(two_weights, batch, Params(1), backend)
    _check(two_weights, [[4, 3, 2, 1]] * 3, Params(2), backend)
    assert _kept(_signatures(two_weights, Params(0))) == kept, "no signature was made again"


def test_two_weights_of_one_shape_take_two_kept_blocks():
    # `h @ W` and `h @ V` are one kept signature (shared (4, 4) float64): each run gives them entries 0 and 1
    _check(two_weights, [[1, 2], [2, 1]], Params(0), "eager")
    signatures = _signatures(two_weights, Params(0))
    matmuls = [entries for key, entries in signatures.kept.items() if key[0][0] is torch.Tensor.__matmul__]
    assert [len(e) for e in matmuls] == [2] and matmuls[0][0].block.id != matmuls[0][1].block.id


def test_a_run_past_the_kept_signatures_makes_its_own_blocks(monkeypatch):
    monkeypatch.setattr(Signatures, "KEPT", 1)
    prog = ab.program(two_weights.fn)  # a program of its own: no signature kept yet
    _check(prog, [[1, 2, 3], [2, 2], [3, 1]], Params(0), "eager")
    signatures = _signatures(prog, Params(0))
    assert _kept(signatures) == 1
    _check(prog, [[2, 1], [1, 1, 2]], Params(3), "eager")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stack_of_lazy_values_gathers_its_columns_at_once(backend):
    _check(stacked, [[1, 2, 3, 4], [2, 1, 1, 2], [3, 3, 3, 3], [4, 4, 1, 1]], Params(0), backend)
    signatures = _signatures(stacked, Params(0))
    kernels = [e.kernel for entries in signatures.kept.values() for e in entries]
    assert any(isinstance(k, RowLoopKernel) and k.merged for k in kernels), "the stack's launch merges its gathers"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 5), st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=5), min_size=1, max_size=6))
def test_merged_gathers_equal_plain_calls(length, seeds):
    """Instances of one length stack in one launch; their steps' values come from launches of other depths
    and other operators, in an order the tokens choose."""
    batch = [(s * length)[:length] for s in seeds]
    _check(stacked, batch, Params(0), "eager")

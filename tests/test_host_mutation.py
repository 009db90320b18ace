"""Host data and values changed in place after a launch was recorded that reads them (silent wrong answers found
while merging the tensor-rows work, and by probing in-place writes in the dynamic tier).

A launch runs after its node is recorded: whatever the instance's code changes in between must not reach it.
The static tier takes a node's host values as they are when the node is added (``acrobat.runtime.dfg.snapshot``:
lists copied, tensors cloned; a host argument before a later argument that calls code, too); the dynamic tier runs
every pending launch before an in-place write and writes into the instance's own copy of a computed value
(``Recorder.write_own``). Each program is checked against its plain per-instance calls, outputs and gradients.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import acrobat as ab

STRICT = ab.Options(strict=True)
DYNAMIC = ab.Options(static=False)


class P(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.b = nn.Parameter(torch.randn(4, generator=g))
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g))


@ab.program
def pop_after_tensor(tokens, p):
    y = torch.tanh(torch.tensor(tokens, dtype=torch.float32)).sum() * p.b
    last = tokens.pop()  # the list changes after the block that reads it was recorded
    return y + p.emb[last]


@ab.program
def pop_in_the_same_node(tokens, p):
    y = torch.tanh(torch.tensor(tokens, dtype=torch.float32)).sum() * p.b
    e = p.emb[tokens.pop()]  # one block with the line above: its host arguments are (tokens, tokens.pop())
    return y * len(tokens) + e


@ab.program
def item_write_after_read(x, p):
    y = torch.tanh(x) * p.b
    x[0] = 5.0
    return y + x


@ab.program
def augmented_after_read(x, p):
    y = torch.tanh(x) * p.b
    x += 1
    return y + x


@ab.program
def inplace_method_on_instance_tensor(x, p):
    y = torch.tanh(x) * p.b
    x.mul_(2)
    return y + x


@ab.program
def inplace_on_a_computed_value(x, p):
    y = x @ p.W  # (no operator saves y for its backward, so plain PyTorch may write into it)
    z = y * 2  # recorded before the write: reads y as it was
    y.add_(1)
    return z + y


@ab.program
def item_write_on_a_computed_value(x, p):
    y = x @ p.W
    z = y * 2
    y[0] = 5.0
    return z + y.sum() * p.b


TOKEN_PROGRAMS = [pop_after_tensor, pop_in_the_same_node]
TENSOR_PROGRAMS = [item_write_after_read, augmented_after_read, inplace_method_on_instance_tensor,
                   inplace_on_a_computed_value, item_write_on_a_computed_value]


def _tokens() -> list[list[int]]:
    return [[1, 2, 3], [4, 5, 0], [0, 6, 7]]  # one length: the static tier batches equal shapes


def _tensors() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(4, generator=g) for _ in range(3)]


def _check(prog, batch, options, backend="eager"):
    p = P()
    with torch.no_grad():
        want = [prog(x, p) for x in copy.deepcopy(batch)]
        got = prog.run(copy.deepcopy(batch), p, backend=backend, options=options)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("prog", TOKEN_PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_a_list_changed_after_its_block_was_recorded(prog, backend):
    _check(prog, _tokens(), STRICT, backend)


@pytest.mark.parametrize("prog", TENSOR_PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("options", [None, DYNAMIC], ids=["default", "dynamic"])
def test_a_tensor_written_in_place_after_a_launch_that_reads_it(prog, options):
    _check(prog, _tensors(), options)


@pytest.mark.parametrize("prog", [item_write_after_read, augmented_after_read], ids=lambda f: f.__name__)
def test_the_static_tier_takes_instance_tensors_as_they_were(prog):
    _check(prog, _tensors(), STRICT)


def test_an_inplace_method_on_instance_data_is_left_to_the_dynamic_tier():
    with pytest.raises(ab.CompileError, match=r"in-place operator `\.mul_\(\)` on the instance's data"):
        inplace_method_on_instance_tensor.run(_tensors(), P(), backend="eager", options=STRICT)


@pytest.mark.parametrize("prog", [inplace_on_a_computed_value, item_write_on_a_computed_value],
                         ids=lambda f: f.__name__)
def test_gradients_through_a_value_written_in_place(prog):
    """The write goes into the instance's own copy: the other instances' rows, which autograd saved, stay."""
    batch = _tensors()
    p, q = P(), P()
    sum(o.sum() for o in prog.run(copy.deepcopy(batch), p, backend="eager", options=DYNAMIC)).backward()
    sum(prog(x, q).sum() for x in copy.deepcopy(batch)).backward()
    for a, b in zip(p.parameters(), q.parameters()):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad)

"""A per-instance host number inside a static block promotes as the Python number of the plain program
(``acrobat.analysis.host_tensors.number_operand``; ragged rows: ``acrobat.analysis.ragged.stacked_dtype``):
a float beside a 0-d float32 tensor gave float64 results, silently, before."""

from __future__ import annotations

import operator
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.analysis.host_tensors import number_operand
from tests import number_progs as pn

PROGRAMS = [pn.zero_d_times_host_float, pn.attention_scaled_by_host_float, pn.int_tensor_and_host_numbers]


def _batch(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(12) for _ in range(rng.randint(1, 6))] for _ in range(n)]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_results_have_the_plain_programs_dtypes_and_values(prog, dtype, backend):
    table = torch.randn(12, 4, generator=torch.Generator().manual_seed(0)).to(dtype)
    for n in (1, 6):
        batch = _batch(n, n)
        with torch.no_grad():
            want = [prog(x, table) for x in batch]
            got = prog.run(batch, table, backend=backend)
        torch.testing.assert_close(got, want)  # checks dtypes too


DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.bool]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DTYPES), st.sampled_from([2.5, 3, True]), st.booleans(), st.booleans())
def test_number_operand_promotes_like_a_python_number(dtype, number, host_left, zero_d):
    other = (torch.ones(()) if zero_d else torch.ones(3)).to(dtype) * (1 if dtype == torch.bool else 3)
    h = torch.tensor(number, dtype=torch.float64 if type(number) is float else None)
    for op in (operator.add, operator.mul, operator.truediv, operator.gt):
        want = op(number, other) if host_left else op(other, number)
        got = number_operand(op, h, other, 0) if host_left else number_operand(op, other, h, 1)
        assert got.dtype == want.dtype, (op, dtype, number)
        torch.testing.assert_close(got, want)

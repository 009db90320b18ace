"""Issue 17's first two wrong answers: functions of one name merged, and compiled kernels right at one size only.

- Two ``forward`` methods of two ``nn.Module`` classes, and two functions
  ``cell`` of two modules, are two functions of the program.
- Every kind of compiled block (hoisted with host and shared arguments,
  recursion-dependent, fused and explicit gathers, module forms, segment
  operators, a per-instance weight that Inductor specializes on the batch
  size) gives the plain result at several batch sizes run in one process,
  in ascending and in descending order.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from tests.fuzz.world import Params, make_instances

TOL = {"rtol": 1e-4, "atol": 1e-5}


class A(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(torch.randn(4, 4))

    @ab.function
    def forward(self, x):
        return torch.tanh(x @ self.W)


class B(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = A()
        self.V = nn.Parameter(torch.randn(4, 4))

    @ab.function
    def forward(self, x):
        return A.forward(self.a, x) @ self.V

    @ab.program
    def run_one(self, x):
        return B.forward(self, x)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_same_named_methods_are_two_functions(backend):
    torch.manual_seed(0)
    m = B()
    xs = [torch.randn(4) for _ in range(5)]
    with torch.inference_mode():
        torch.testing.assert_close(m.run_one.run(xs, backend=backend), [m.run_one(x) for x in xs], **TOL)


def _module(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_same_named_functions_of_two_modules(tmp_path):
    one = _module(tmp_path, "acrobat_names_one", """
        import torch, acrobat as ab
        @ab.function
        def cell(x, p):
            return torch.tanh(x @ p.W)
    """)
    two = _module(tmp_path, "acrobat_names_two", """
        import torch, acrobat as ab
        @ab.function
        def cell(x, p):
            return torch.sigmoid(x @ p.U) * 3.0
    """)
    main = _module(tmp_path, "acrobat_names_main", """
        import acrobat as ab
        from acrobat_names_one import cell as first
        from acrobat_names_two import cell as second
        @ab.program
        def main(tokens, p):
            return first(p.emb[tokens[0]], p) + second(p.emb[tokens[-1]], p)
    """)
    assert one.cell is not two.cell
    p = Params()
    batch = make_instances("seq", 6, 0)
    with torch.no_grad():
        torch.testing.assert_close(main.main.run(batch, p, backend="eager"), [main.main(x, p) for x in batch], **TOL)


# ------------------------------------------------------------------ compiled kernels at every batch size


@ab.program
def per_instance_weight(inst, W):
    """A grouped convolution under vmap: Inductor fixes ``groups`` (the batch size) when it compiles."""
    x, k = inst
    return F.conv2d(x, W[k])


@ab.function
def _rec(node, p):
    if node.is_leaf:
        return p.emb[node.word % 7]  # hoisted, a host argument
    return p.cell(torch.tanh((_rec(node.left, p) + _rec(node.right, p)) @ p.W), p.h0)  # a module form


@ab.program
def block_kinds(node, p):
    h = _rec(node, p)
    leaves = [h, p.h0]
    s = torch.stack(leaves)
    return torch.softmax(s @ h, dim=0) @ s + s.max(0).values  # segment operators over a list


SIZES = [1, 3, 8, 17, 64]


@pytest.mark.parametrize("backend", ["compiled-explicit", "compiled-fused"])
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_every_block_kind_at_many_batch_sizes_in_one_process(backend, order):
    sizes = SIZES if order == "ascending" else SIZES[::-1]
    p = Params(0, torch.float64)
    trees = make_instances("tree", max(sizes), 1)
    rng = random.Random(0)
    W = torch.randn(5, 4, 3, 3, 3, dtype=torch.float64)
    images = [(torch.randn(3, 8, 8, dtype=torch.float64), rng.randrange(5)) for _ in range(max(sizes))]
    block_kinds.reset_backends()
    per_instance_weight.reset_backends()
    with torch.inference_mode():
        for n in sizes:
            got = block_kinds.run(trees[:n], p, backend=backend)
            torch.testing.assert_close(got, [block_kinds(t, p) for t in trees[:n]], **TOL)
            got = per_instance_weight.run(images[:n], W, backend=backend)
            torch.testing.assert_close(got, [per_instance_weight(i, W) for i in images[:n]], **TOL)

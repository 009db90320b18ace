"""A ninth hunt for silent wrong answers, aimed at padded functions (issue 18 §2) and the constructs merged with
them (tests/hunt9_progs.py: reductions of bools, ints and several dims, max/min indices, masked scores, where
with dense branches, 0-d values in type promotion, isinstance checks, transposed contractions, head views,
indexing, chunk/split, fresh buffers, results mixing stacked lists and dense values, two lists, calls in loops
and recursion, operators within rows, outlined statements, ports constructs and ``f(x, *hs)``).

Each program runs batched under the default options, ``Options(strict=True)`` (the static tier, or the error it
gives) and ``Options(static=False)``, on both backends, at batch sizes 1, 3 and 17 (three batches of 17 in a
row on one program object on eager; 1 and 17 on compiled), against the plain per-instance calls (values, dtypes,
Python types, and the model's state after the run). A fallback reporting a bug in acrobat fails the test.
Gradients of the summed float outputs are compared on the eager backend in float64.
"""

from __future__ import annotations

import ast
import copy
import inspect
import random
import warnings
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
from acrobat.analysis import padded, ragged
from acrobat.errors import DynamicFallbackWarning, LimitError
from acrobat.runtime.padding import Lengths, Padded
from tests import hunt9_progs as hp
from tests.test_hunt6 import _float_leaves, _same

OPTIONS = {"default": None, "strict": ab.Options(strict=True), "dynamic": ab.Options(static=False)}


def _toks(rng: random.Random, lo: int = 1, hi: int = 6) -> list[int]:
    return [rng.randrange(hp.VOCAB) for _ in range(rng.randint(lo, hi))]


def _keeps_one(rng: random.Random) -> list[int]:
    """Tokens (0: the user's padding) with at least one that is not 0."""
    t = _toks(rng)
    t[rng.randrange(len(t))] = rng.randrange(1, hp.VOCAB)
    return t


def _tree(rng: random.Random, depth: int = 0) -> hp.Node:
    return hp.Node(rng.randrange(hp.VOCAB), [_tree(rng, depth + 1) for _ in range(rng.randint(0, 3 * (depth < 2)))])


#: program name -> a factory of one instance (token lists of 1..6 ids unless named).
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    name: _toks for name in (
        "bool_any", "bool_all", "reductions_several_dims", "max_min_ties", "logsumexp_grad", "where_dense_branches",
        "zero_dim_promotion", "int_list", "tensor_check", "transposed_contraction", "heads_views", "getitem_forms",
        "chunk_split", "new_zeros_shape", "inplace_on_argument", "tuple_of_forms", "two_lists_equal",
        "two_lists_different", "called_in_loop", "rows_broadcast", "rows_cat_and_split", "outlined_loop",
        "ports_constructs", "star_rest", "rows_0d_promotion", "embedding_grad_by_freq", "functional_grad_by_freq", "reductions_dense",
        "outlined_list_writes", "outlined_accumulators", "loop_over_heads")}
PROGRAMS.update({"embedding_max_norm": lambda rng: [rng.randrange(1, hp.VOCAB) for _ in range(rng.randint(1, 4))],
                 "masked_inf": _keeps_one, "recursion_over_children": _tree})

#: Rejections at compile time under strict (message fragments).
STRICT_REJECTS = {
    "rows_broadcast": "with dim=-1 of a list whose length differs per instance",
    "rows_cat_and_split": "host data on one path and a tensor on another",
    "ports_constructs": "in-place operator `.fill_()`",
    "tensor_check": "cannot be transposed with `.T`",
    "embedding_max_norm": "cannot be transposed with `.T`",
    "embedding_grad_by_freq": "scale_grad_by_freq",
    "functional_grad_by_freq": "scale_grad_by_freq",
}
#: Limits met at run time under strict (a ShapeError naming one of them; the default reruns the batch exactly).
STRICT_RUN_LIMITS: dict[str, str | tuple[str, ...]] = {
    "reductions_several_dims": "padded axes are not dim 0 alone",
    "max_min_ties": "`round`",
    "logsumexp_grad": "padded axes are not dim 0 alone",
    "int_list": "unsupported operand type(s) for %",
    "transposed_contraction": "padded axes are not dim 0 alone",
    "heads_views": "a value with a padded axis where the compile expected a per-instance",
    "inplace_on_argument": "padded axes are not dim 0 alone",
    "tuple_of_forms": "padded axes are not dim 0 alone",
    "two_lists_equal": ("would broadcast against the list axis", "give `tokens[::-1]` different shapes"),
    "two_lists_different": "padded axes are not dim 0 alone",
}
#: Programs computing in float32 inside the float64 model: their gradients are float32 sums (any order of them).
FLOAT32 = {"rows_broadcast", "zero_dim_promotion", "rows_0d_promotion"}


def _batch(name: str, n: int, seed: int = 9000) -> list:
    rng = random.Random(seed + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _run(prog: ab.Program, batch: list, p: hp.HP, backend: str, option: str) -> list | None:
    """The batched run (None where strict met the program's expected run-time limit); a fallback warning that
    reports a bug in acrobat fails."""
    options = OPTIONS[option]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DynamicFallbackWarning)
        try:
            out = prog.run(batch, p, backend=backend, **({} if options is None else {"options": options}))
        except ab.ShapeError as e:
            limit = STRICT_RUN_LIMITS.get(prog.__name__, ()) if option == "strict" else ()
            if not any(fragment in str(e) for fragment in ((limit,) if isinstance(limit, str) else limit)):
                raise
            return None
    bugs = [str(w.message) for w in caught if issubclass(w.category, DynamicFallbackWarning)
            and "bug in acrobat" in str(w.message)]
    assert not bugs, bugs[0]
    return out


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_and_state_equal_plain_calls(name, option, backend):
    """Batches of 1, 3 and 17 (three in a row at 17; compiled: 1 and 17) against the plain calls and the model's
    state after them, or the expected rejection."""
    prog, p = getattr(hp, name), hp.HP().double()
    if option == "strict" and name in STRICT_REJECTS:
        with pytest.raises(ab.CompileError, match=r"hunt9_progs\.py:\d+") as err:
            _run(prog, _batch(name, 3), p, backend, option)
        assert STRICT_REJECTS[name] in str(err.value)
        return
    for n, runs in ((1, 1), (3, 1), (17, 3)) if backend == "eager" else ((1, 1), (17, 1)):
        batch = _batch(name, n)
        plain, batched = copy.deepcopy(p), copy.deepcopy(p)
        with torch.no_grad():
            want = [prog(x, plain) for x in copy.deepcopy(batch)]
        for _ in range(runs):
            with torch.no_grad():
                got = _run(prog, copy.deepcopy(batch), batched, backend, option)
            if got is not None:
                _same(got, want, f"batch {n}")
                _same(dict(batched.state_dict()), dict(plain.state_dict()), f"the model's state, batch {n}")


#: Known wrong gradients (strict xfail: each names its cause).
GRAD_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=GRAD_XFAIL[n]))
                                  if n in GRAD_XFAIL else n for n in sorted(PROGRAMS)])
def test_gradients_equal_plain_autograd(name, option):
    """The gradients of the summed float outputs of five instances (float64, eager backend) of every parameter."""
    if option == "strict" and name in STRICT_REJECTS:
        return  # test_outputs_and_state_equal_plain_calls checks the rejection
    prog, batch, p = getattr(hp, name), _batch(name, 5, seed=99), hp.HP().double()
    want_leaves = [t for y in [prog(x, p) for x in copy.deepcopy(batch)] for t in _float_leaves(y)
                   if t.requires_grad]
    if not want_leaves:
        pytest.skip("no output carries a gradient")
    want = torch.autograd.grad(sum(t.sum() for t in want_leaves), list(p.parameters()), allow_unused=True)
    got_out = _run(prog, copy.deepcopy(batch), p, "eager", option)
    if got_out is None:
        return
    got = torch.autograd.grad(sum(t.sum() for y in got_out for t in _float_leaves(y) if t.requires_grad),
                              list(p.parameters()), allow_unused=True)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            tol = 1e-6 if name in FLOAT32 else 1e-9
            torch.testing.assert_close(g, w, rtol=tol, atol=tol, msg=lambda m, k=k: f"gradient of {k}: {m}")


# --- regressions ------------------------------------------------------------------------------------------------

def test_a_max_of_bools_over_the_list_axis_reads_no_padding():
    """``hot.amax(0)`` / ``hot.max(0)`` of bools over a padded axis: the padding was filled with -inf as a bool,
    True, so an instance shorter than the launch's longest read True where all its own values were False (a
    silent wrong answer); an int max/min filled with an infinity failed (a rerun). The padding now holds the
    least or greatest value of the dtype (``padding._identity``)."""
    n = Lengths(torch.tensor([1, 3]), 3)
    b = Padded(torch.tensor([[False, True, True], [False, True, False]]), (n,))
    assert b.amax(0)._batched.tolist() == [False, True] and b.max(0).values._batched.tolist() == [False, True]
    assert b.max(0).indices._batched.tolist() == [0, 1] and b.amin(0)._batched.tolist() == [False, False]
    i = Padded(torch.tensor([[-5, 9, 9], [-7, -8, -9]], dtype=torch.int32), (n,))
    assert i.amax(0)._batched.tolist() == [-5, -7] and i.min(0).values._batched.tolist() == [-5, -9]


def test_a_per_instance_0d_value_gives_way_in_type_promotion():
    """A float64 0-d value of each instance (``x.mean()``) times float32 ``(L, H)`` scores is float32 in PyTorch;
    its batched value is ``(B,)``, dimensioned, and the batched product was float64 (a wrong dtype, silently).
    The result now has the dtype of one instance's call (``padding._promoted``)."""
    x = Padded(torch.randn(2, 3, 4), (Lengths(torch.tensor([1, 3]), 3), None))
    s = Padded(torch.randn(2, dtype=torch.float64), ())
    assert (x * s).dtype == torch.float32 and (s * torch.ones(4)).dtype == torch.float32
    assert torch.where(x > 0, s, x).dtype == torch.float32 and (s + 1).dtype == torch.float64
    torch.testing.assert_close((x * s)._batched, x._batched * s._batched[:, None, None].float())


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_a_function_reading_a_python_type_is_no_padded_function(backend):
    """``if isinstance(extra, torch.Tensor):`` in a function given a stacked list: run once on ``Padded`` values
    it was False where each instance's call finds True, and took the other branch for all (a silent wrong
    answer). A function that reads a value's Python type, itself or in a function it calls, is no padded
    function now (``padded.type_read``): the batch runs in the dynamic tier, exact."""
    p, batch = hp.HP().double(), _batch("tensor_check", 4)
    stats = ab.RunStats()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DynamicFallbackWarning)
        _same(hp.tensor_check.run(batch, p, backend=backend, stats=stats), [hp.tensor_check(x, p) for x in batch])
    assert not any(b.name.startswith("padded ") for b in stats.blocks.values())
    assert padded.type_read(ast.parse(inspect.getsource(hp.calls_a_type_check)).body[0], vars(hp)) == \
        "`torch.is_tensor` in `is_dense`"


def test_int_rows_of_a_stacked_list_keep_their_width_against_a_0d_int():
    """``(s > 0).int() + torch.tensor(1)`` of a stacked list of 0-d rows ``s``: PyTorch keeps the ``(L,)`` int32
    (a 0-d int64 gives way), but row by row two 0-d operands promote to int64, and only floating rows were cast
    back (a wrong dtype, silently). ``ragged.row_operands`` now casts integer rows back too."""
    rows = (torch.tensor(1, dtype=torch.int32),)
    dense = (torch.tensor(1),)
    assert ragged.row_operands(rows[0] + dense[0], rows, dense).dtype == torch.int32
    p, batch = hp.HP().double(), _batch("rows_0d_promotion", 3)
    with torch.no_grad():
        got = hp.rows_0d_promotion.run(batch, p, options=OPTIONS["strict"])
        _same(got, [hp.rows_0d_promotion(x, p) for x in batch])


def test_an_embedding_with_max_norm_reads_no_padding_index():
    """``F.embedding(ids, W, max_norm=1.0)`` of padded ids renormalized, in place, the rows of the padding's
    index 0 too (the model's state, where no instance looked row 0 up); ``scale_grad_by_freq`` counted the
    padding's indices. Both are refused now (a rerun in the dynamic tier)."""
    ids = Padded(torch.tensor([[3, 0], [1, 2]]), (Lengths(torch.tensor([1, 2]), 2),))
    w = torch.full((4, 2), 5.0)
    for kwargs in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}):
        with pytest.raises(LimitError, match="max_norm or scale_grad_by_freq"):
            torch.nn.functional.embedding(ids, w, **kwargs)
    assert w[0].tolist() == [5.0, 5.0]
    assert torch.nn.functional.embedding(ids, w)._batched.shape == (2, 2, 2)


def test_a_reduction_of_a_per_instance_0d_value_keeps_the_batch_apart():
    """``h.mean((0, -1)).sum()``: the sum of a 0-d value is the value; the batched call was ``torch.sum(data, [])``,
    which reduces every dim, the batch dim too (only an assert caught it). It now gives the value back, and
    ``x.sum(())`` of a value with dims is refused."""
    s = Padded(torch.tensor([1.0, 2.0]), ())
    assert s.sum()._batched.tolist() == [1.0, 2.0] and s.amax()._batched.tolist() == [1.0, 2.0]
    assert Padded(torch.tensor([True, False]), ()).sum()._batched.tolist() == [1, 0]
    x = Padded(torch.ones(2, 3), (Lengths(torch.tensor([1, 3]), 3),))
    with pytest.raises(LimitError):
        x.sum(())

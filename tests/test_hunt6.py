"""A sixth hunt for silent wrong answers, aimed at the constructs merged last (tests/hunt6_progs.py): host-number
accumulators, the ``torch.cat`` fold of a list variable, variable versions, undecorated methods returning tuples,
the static tier's run-time limits handing the batch to the dynamic tier, and views in the dynamic tier.

Each program runs batched under the default options, ``Options(strict=True)`` (the static tier, or the error it
gives: a CompileError naming the line, or a ShapeError of a limit met at run time) and ``Options(static=False)``
(the dynamic tier), on both backends, at batch sizes 1, 3 and 17 (three batches of 17 in a row on one program
object), and is compared with plain per-instance calls: values, dtypes, Python types (a number stays a number),
the state left on the instances and the parameters; where a plain call raises, the batched run must raise too.
Gradients of the summed outputs are compared on the eager backend. Then the regressions the hunt found.
"""

from __future__ import annotations

import copy
import math
import random
import warnings
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning
from tests import hunt6_progs as hp

OPTIONS = {"default": None, "strict": ab.Options(strict=True), "dynamic": ab.Options(static=False)}


def _toks(lo: int = 0) -> Callable[[random.Random], list[int]]:
    return lambda rng: [rng.randrange(hp.VOCAB) for _ in range(rng.randint(lo, 5))]


def _tree(rng: random.Random, depth: int = 0) -> dict:
    return {"w": rng.randrange(hp.VOCAB), "kids": [_tree(rng, depth + 1) for _ in range(rng.randint(0, 2 * (depth < 2)))]}


#: program name -> a factory of one instance.
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    "two_accumulators": _toks(), "two_accumulators_mixed": _toks(), "read_in_branch_after": _toks(),
    "compared_after": _toks(), "in_containers": _toks(), "mean_over_len": _toks(1),
    "int_start_float_and_int_tensors": _toks(), "float_start_int_tensors": _toks(), "bool_start": _toks(),
    "rank_grows_in_place": _toks(), "vector_then_scalar": _toks(), "helpers_each_with_one": _toks(),
    "recursive_accumulator": _tree, "reinit_in_outer_loop": lambda rng: [_toks()(rng) for _ in range(rng.randint(0, 3))],
    "stored_on_instance": lambda rng: {"toks": _toks()(rng)},
    "cat_rows_dim0": _toks(1), "cat_dim1_and_neg": _toks(1), "cat_then_write": _toks(1), "cat_of_scalars": _toks(1),
    "cat_of_mixed_dtypes": _toks(1),
    "rebound_in_loop_with_continue": _toks(), "rebound_in_while": _toks(), "top_loop_rebinds_zero_times": _toks(),
    "top_loop_rebinds_not_read": _toks(), "nested_def_rebinds": _toks(1),
    "method_tuple": _toks(), "method_stacked": _toks(1),
    "views_written": _toks(1), "self_returning_ops_on_params": _toks(1), "write_into_param_alias": _toks(),
}

#: What the static tier rejects at compile time (strict raises it; the other options run the dynamic tier).
STRICT_REJECTS = {
    "two_accumulators_mixed": "`b` holds host data in one place and a tensor in another",  # read after, not last
    "read_in_branch_after": "`total` holds host data in one place and a tensor in another",  # read in a branch
    "in_containers": "`+=` updates a tensor in place",  # the accumulator also stored in the result
    "helpers_each_with_one": "its result can only be returned as it is",
    "recursive_accumulator": "its result can only be returned as it is",
    "stored_on_instance": "a tensor is passed to a host method",
    "cat_rows_dim0": "a stacked list",  # items of other lengths along dim 0, made in branches
    "cat_then_write": "in-place operator `.mul_()`",
    "rebound_in_loop_with_continue": "`h` holds host data in one place and a tensor in another",
    "top_loop_rebinds_zero_times": "`x` holds host data in one place and a tensor in another",
    "views_written": "item assignment on a tensor",
    "write_into_param_alias": "in-place operator `.add_()`",
}
#: Limits of the static tier met at run time on batches of mixed instances (strict raises the ShapeError; the
#: default options rerun the batch in the dynamic tier).
STRICT_RUN_LIMITS = {"cat_dim1_and_neg": "different shapes", "cat_of_mixed_dtypes": "different dtypes"}
#: Writes the dynamic tier refuses (a documented limit): an InstanceError naming the write's line.
LIMITS = {"write_into_param_alias": "`add_` writes into a tensor every instance shares"}


def _same(got: Any, want: Any, where: str = "result") -> None:
    """``got`` equals ``want``: tensors by ``assert_close`` (dtype included), host floats within float32
    tolerance, containers item by item with their types, the rest by type and ``==``."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), (where, got)
        torch.testing.assert_close(got, want, msg=lambda m: f"{where}: {m}")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), (where, got, want)
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{k}]")
    elif isinstance(want, dict):
        assert type(got) is dict and got.keys() == want.keys(), (where, got, want)
        for k in want:
            _same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, float):
        assert type(got) is float and math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-6), (where, got, want)
    else:
        assert type(got) is type(want) and got == want, (where, got, want)


def _batch(name: str, n: int) -> list:
    rng = random.Random(1000 + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _plain(prog: ab.Program, batch: list, p: hp.HP) -> tuple[list, BaseException | None]:
    """The plain calls' results (None from a failing call on) and the first exception a call raised."""
    out: list = []
    for x in batch:
        try:
            out.append(prog(x, p))
        except Exception as e:  # noqa: BLE001 - the batched run must raise too
            return out, e
    return out, None


def _run(prog: ab.Program, batch: list, p: hp.HP, backend: str, option: str) -> list:
    options = OPTIONS[option]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DynamicFallbackWarning)  # the run-time limits', checked where they matter
        return prog.run(batch, p, backend=backend, **({} if options is None else {"options": options}))


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_and_state_equal_plain_calls(name, option, backend):
    """Batches of 1, 3 and 17 (three in a row at 17 on eager) against the plain calls, or the expected error."""
    prog = getattr(hp, name)
    if option == "strict" and name in STRICT_REJECTS:
        with pytest.raises(ab.CompileError, match=r"hunt6_progs\.py:\d+") as err:
            _run(prog, _batch(name, 3), hp.HP(), backend, option)
        assert STRICT_REJECTS[name] in str(err.value)
        return
    if option != "strict" and name in LIMITS:
        with pytest.raises(ab.InstanceError, match=r"hunt6_progs\.py:\d+") as err:
            _run(prog, _batch(name, 3), hp.HP(), backend, option)
        assert LIMITS[name] in str(err.value) and getattr(err.value, "user_limit", False)
        return
    for n, runs in ((1, 1), (3, 1), (17, 3 if backend == "eager" else 1)):
        batch = _batch(name, n)
        p_plain, plain_batch = hp.HP(), copy.deepcopy(batch)
        with torch.no_grad():
            want, raised = _plain(prog, plain_batch, p_plain)
        for _ in range(runs):  # one program object, batches in a row (the tier choice moves over them)
            p, batched = hp.HP(), copy.deepcopy(batch)
            with torch.no_grad():
                if raised is not None:  # the plain call's error, or a limit of the static tier met first
                    with pytest.raises(ab.AcrobatError) as err:
                        _run(prog, batched, p, backend, option)
                    assert str(raised).split("\n")[0] in str(err.value) or getattr(err.value, "static_limit", None)
                    continue
                if option == "strict" and name in STRICT_RUN_LIMITS and n > 1:
                    try:
                        got = _run(prog, batched, p, backend, option)
                    except ab.ShapeError as e:
                        assert STRICT_RUN_LIMITS[name] in str(e) and getattr(e, "static_limit", None)
                        continue
                else:
                    got = _run(prog, batched, p, backend, option)
            _same(got, want)
            _same(batched, plain_batch, "instances")
            for (k, a), (_, b) in zip(p.named_parameters(), p_plain.named_parameters()):
                torch.testing.assert_close(a, b, msg=lambda m, k=k: f"parameter {k}: {m}")


def _float_leaves(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _float_leaves(y)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _float_leaves(x[k])]
    return []


GRAD_PROGRAMS = sorted(set(PROGRAMS) - set(LIMITS) - {"views_written", "cat_of_scalars", "rank_grows_in_place",
                                                     "int_start_float_and_int_tensors"})


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", GRAD_PROGRAMS)
def test_gradients_equal_plain_autograd(name, option):
    """The gradients of the summed float outputs of five instances, float64, eager backend."""
    if option == "strict" and name in STRICT_REJECTS:
        return  # test_outputs_and_state_equal_plain_calls checks the rejection
    prog, batch = getattr(hp, name), _batch(name, 5)
    p = hp.HP().double()
    plain = [prog(x, p) for x in copy.deepcopy(batch)]
    leaves = [t for y in plain for t in _float_leaves(y) if t.requires_grad]
    if not leaves:
        pytest.skip("no output carries a gradient")
    want = torch.autograd.grad(sum(t.sum() for t in leaves), list(p.parameters()), allow_unused=True)
    try:
        got_out = _run(prog, copy.deepcopy(batch), p, "eager", option)
    except ab.ShapeError as e:
        assert option == "strict" and STRICT_RUN_LIMITS[name] in str(e)
        return
    got_leaves = [t for y in got_out for t in _float_leaves(y) if t.requires_grad]
    got = torch.autograd.grad(sum(t.sum() for t in got_leaves), list(p.parameters()), allow_unused=True)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, k=k: f"gradient of {k}: {m}")


def test_seeded_runs_repeat_after_the_run_time_limit():
    """A program drawing random numbers whose mixed lengths meet the static tier's shape limit: seeded batched
    runs on one program object give the same numbers every time."""
    batch, p = [[1, 2], [3], [4, 5, 6]], hp.HP()
    outs = []
    for _ in range(3):
        torch.manual_seed(5)
        with torch.no_grad():
            outs.append(_run(hp.noisy_ragged, batch, p, "eager", "default"))
    for o in outs[1:]:
        _same(o, outs[0])


# --- regressions ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", ["default", "strict"])
def test_cat_of_a_one_item_list_checks_the_item_as_torch_cat_does(option, backend):
    """The fold of `torch.cat(xs)` returned a one-item list's item itself: a 0-D item came back where the plain
    call raises (zero-dimensional tensors cannot be concatenated)."""
    with pytest.raises(ab.ShapeError, match="zero-dimensional tensor"):
        _run(hp.cat_of_scalars, [[3]], hp.HP(), backend, option)
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        hp.cat_of_scalars([3], hp.HP())


def test_instances_of_other_dtypes_in_one_block_are_a_limit_not_a_bug():
    """Items of other dtypes per instance give one static block operands of different dtypes, on which the
    gather of the block's operands failed (index_copy_: an InternalError under strict, a fallback with the
    warning of a bug by default) or which it promoted (torch.cat of sources in runs: see
    test_an_int_accumulator_taking_a_float_raises_as_in_place_does): now the dynamic tier's rerun by default,
    the static tier's limit (a ShapeError) under strict."""
    batch = _batch("cat_of_mixed_dtypes", 17)
    prog = ab.program(hp.cat_of_mixed_dtypes.fn)  # a new program object: the first batch meets the limit
    with torch.no_grad(), pytest.warns(DynamicFallbackWarning, match="equal dtypes only"):
        got = prog.run(batch, hp.HP(), backend="eager")
    _same(got, [prog(x, hp.HP()) for x in batch])
    with pytest.raises(ab.ShapeError, match="different dtypes torch.float(32|64) vs torch.float(32|64)") as err:
        _run(hp.cat_of_mixed_dtypes, batch, hp.HP(), "eager", "strict")
    assert getattr(err.value, "static_limit", None)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_full_of_a_per_instance_number_in_a_static_block(backend):
    """`torch.full(size, n)` of a host number in a static block read the batched number with `.item()` under
    vmap: an InternalError under strict (a fallback with the warning of a bug by default)."""
    batch = [[1, 2], [], [3]]
    with torch.no_grad():
        got = _run(hp.float_start_int_tensors, batch, hp.HP(), backend, "strict")
        _same(got, [hp.float_start_int_tensors(x, hp.HP()) for x in batch])
        assert got[1] == 0.5 and type(got[1]) is float


@pytest.mark.parametrize("option", ["default", "strict"])
def test_int8_tensor_of_a_host_number_past_its_range_raises(option):
    """A static block made `torch.tensor(n, dtype=torch.int8)` of a host number with host_tensors.tensor_of,
    whose `.to(int8)` of the batched number wrapped past 127 where torch.tensor raises: the skeleton now checks
    the number on the host before the launch (host_tensors.in_range) and raises the plain call's error."""
    batch = [[3], [9]]  # 60, then 180: past int8's 127
    with pytest.raises(RuntimeError, match="without overflow"):
        hp.int8_from_host([9], hp.HP())
    with pytest.raises(ab.InstanceError, match=r"instance 1: RuntimeError: value cannot be converted to type int8 "
                                               r"without overflow\n.*hunt6_progs\.py:\d+"):
        _run(hp.int8_from_host, batch, hp.HP(), "eager", option)


@pytest.mark.parametrize("option", ["default", "strict"])
def test_an_int_accumulator_taking_a_float_raises_as_in_place_does(option):
    """`acc += int64 count` then `acc += float` raises in the plain call (in place, an int tensor cannot take a
    float); batched beside instances whose first update was a float, the gather promoted the int rows to float
    and the batch gave float sums."""
    batch = [[11, 7, 14], [2, 1], [4]]
    with pytest.raises(RuntimeError, match="can't be cast"):
        hp.int_start_float_and_int_tensors(batch[0], hp.HP())
    with torch.no_grad(), pytest.raises(ab.AcrobatError, match="can't be cast|different dtypes"):
        _run(hp.int_start_float_and_int_tensors, batch, hp.HP(), "eager", option)


def test_a_host_list_extended_in_place_is_not_rerun_after_a_limit():
    """`toks += [7]` on the instance's own list is a change of host state (kinds: a HostK `+=` of a list, or of a
    parameter by a non-constant): the batch is never rerun on instances a failed attempt already extended (7
    appended 2-3 times, the means computed from the longer lists: a silent wrong answer before)."""
    batch, p = [[2, 3], [4]], hp.HP()
    plain_batch = copy.deepcopy(batch)
    with torch.no_grad():
        want = [hp.extended_then_limit(x, p) for x in plain_batch]
        try:
            got = _run(hp.extended_then_limit, batch, p, "eager", "default")
        except ab.AcrobatError:
            return  # an error (no rerun) is right too
    assert batch == plain_batch, (batch, plain_batch)
    _same(got, want)

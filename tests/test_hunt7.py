"""A seventh hunt for silent wrong answers, aimed at the constructs merged last (tests/hunt7_progs.py): dynamic
regions inside a static program (acrobat.analysis.regions), a module's run list (acrobat.analysis.run_lists), the
dynamic tier's signatures kept across runs and recorded in C (acrobat.runtime.dynamic), ``torch.tensor`` of a
per-instance host list (acrobat.analysis.token_lists) and batch_first recurrent modules over stacked lists.

Each program runs batched under the default options, ``Options(strict=True)`` (the static tier, or the error it
gives) and ``Options(static=False)`` (the dynamic tier), on both backends, at batch sizes 1, 3 and 17 (three
batches of 17 in a row on one program object), and is compared with plain per-instance calls: values, dtypes,
Python types, the state left on the instances, on the model's run lists and on its parameters. A fallback that
reports a bug in acrobat (``DynamicFallbackWarning``) fails the test even where the rerun's answer is right.
Gradients of the summed outputs (and of the run list left on the model) are compared on the eager backend.
"""

from __future__ import annotations

import copy
import random
import warnings
from typing import Any, Callable

import pytest
import torch

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning
from tests import hunt7_progs as hp
from tests.test_hunt6 import _float_leaves, _same

OPTIONS = {"default": None, "strict": ab.Options(strict=True), "dynamic": ab.Options(static=False)}


def _toks(lo: int = 0) -> Callable[[random.Random], list[int]]:
    return lambda rng: [rng.randrange(hp.VOCAB) for _ in range(rng.randint(lo, 5))]


def _tree(rng: random.Random, depth: int = 0) -> dict:
    return {"w": rng.randrange(hp.VOCAB), "kids": [_tree(rng, depth + 1) for _ in range(rng.randint(0, 2 * (depth < 2)))]}


def _scaled(rng: random.Random) -> dict:
    return {"w": rng.randrange(hp.VOCAB), **({"scale": rng.random()} if rng.random() < 0.5 else {})}


#: program name -> a factory of one instance.
PROGRAMS: dict[str, Callable[[random.Random], Any]] = {
    "region_in_loop": _toks(), "region_twice": _toks(1), "region_host_float": _toks(),
    "region_list_arg_and_result": _toks(), "region_none_result": _toks(), "region_mutates_list": _toks(),
    "region_item_read": _toks(), "region_no_grad": _toks(), "region_in_recursion": _tree,
    "region_reads_instance": _scaled, "region_bounds_and_index": _toks(), "region_tensor_list": _toks(),
    "region_star_args": _toks(1), "region_keyword_only": _toks(1), "region_bumps_argument": _toks(1),
    "region_bumps_view": _toks(1), "region_grows_list": _toks(),
    "runlist_recursion_branches": _tree, "runlist_len_and_last": _toks(), "runlist_method_count": _toks(),
    "runlist_two_modules": _toks(), "runlist_returned": _toks(), "runlist_then_limit": _toks(1),
    "runlist_pop": _toks(), "runlist_alias": _toks(),
    "dyn_cat_chunk": _toks(), "dyn_lookup_pairs": _toks(),
    "tokens_float_dtype": _toks(1), "tokens_legacy": _toks(1),
    "tokens_of_floats": lambda rng: [rng.random() for _ in range(rng.randint(1, 5))],
    "tokens_of_bools": _toks(1), "tokens_maybe_empty": _toks(), "tokens_nested": _toks(1),
    "tokens_number_instance": lambda rng: rng.randrange(hp.VOCAB),
    "bf_gru_last": _toks(1), "bf_gru_stack_h0": _toks(1), "bf_bilstm_states_viewed": _toks(1),
}

#: What the static tier rejects at compile time (strict raises it; the default runs a region or the dynamic tier).
STRICT_REJECTS = {
    "region_in_loop": "dict method `.__setitem__()`", "region_twice": "dict method `.__setitem__()`",
    "region_list_arg_and_result": "`Try` statement", "region_none_result": "`Lambda` expression",
    "region_mutates_list": "`Try` statement", "region_item_read": "`Yield` expression",
    "region_no_grad": "`isinstance()`", "region_in_recursion": "dict method `.__setitem__()`",
    "region_tensor_list": "`Try` statement", "region_star_args": "`Lambda` expression",
    "region_keyword_only": "`Lambda` expression", "region_bumps_argument": "`+=` updates a tensor in place",
    "region_bumps_view": "`*=` updates a tensor in place", "region_grows_list": "dict method `.__setitem__()`",
    "runlist_method_count": "`n` holds host data in one place and a tensor in another",
    "runlist_two_modules": "`.outputs = ...` changes a model parameter",
    "tokens_float_dtype": "indexing shared `p.emb` with a per-instance tensor",
    "tokens_of_bools": "indexing shared `p.emb` with a per-instance tensor",
    "tokens_nested": "indexing shared `p.emb` with a per-instance tensor",
    "tokens_number_instance": "indexing shared `p.emb` with a per-instance tensor",
    "bf_gru_last": "indexing shared `p.emb` with a per-instance tensor",
}
#: Limits of the static tier met at run time (strict raises the ShapeError; the default reruns the batch).
STRICT_RUN_LIMITS = {"tokens_maybe_empty": "is of an empty list", "runlist_then_limit": "different shapes"}


def _state(p: hp.HP) -> tuple[list, list]:
    """What a run leaves on the model: its run lists."""
    return list(p.outputs), list(p.sub.outputs)


def _batch(name: str, n: int, seed: int = 1000) -> list:
    rng = random.Random(seed + n)
    return [PROGRAMS[name](rng) for _ in range(n)]


def _run(prog: ab.Program, batch: list, p: hp.HP, backend: str, option: str) -> list:
    """The batched run; a fallback warning reporting a bug in acrobat fails (a run-time limit's does not)."""
    options = OPTIONS[option]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DynamicFallbackWarning)
        out = prog.run(batch, p, backend=backend, **({} if options is None else {"options": options}))
    bugs = [str(w.message) for w in caught if issubclass(w.category, DynamicFallbackWarning)
            and "bug in acrobat" in str(w.message)]
    assert not bugs, bugs[0]
    return out


def _strict_limit(name: str, option: str, n: int, run: Callable[[], list]) -> list | None:
    """``run()``, or None where it met the static tier's expected run-time limit under strict."""
    if option != "strict" or name not in STRICT_RUN_LIMITS or n == 1 and name != "tokens_maybe_empty":
        return run()
    try:
        return run()
    except ab.ShapeError as e:
        assert STRICT_RUN_LIMITS[name] in str(e) and getattr(e, "static_limit", None), str(e)
        return None


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_outputs_and_state_equal_plain_calls(name, option, backend):
    """Batches of 1, 3 and 17 (three in a row at 17) against the plain calls, or the expected error."""
    prog = getattr(hp, name)
    if option == "strict" and name in STRICT_REJECTS:
        with pytest.raises(ab.CompileError, match=r"hunt7_progs\.py:\d+") as err:
            _run(prog, _batch(name, 3), hp.HP(), backend, option)
        assert STRICT_REJECTS[name] in str(err.value)
        return
    for n, runs in ((1, 1), (3, 1), (17, 3)):
        batch = _batch(name, n)
        p_plain, plain_batch = hp.HP(), copy.deepcopy(batch)
        with torch.no_grad():
            want = [prog(x, p_plain) for x in plain_batch]
        for _ in range(runs):  # one program object, batches in a row (kept signatures, the tier choice)
            p, batched = hp.HP(), copy.deepcopy(batch)
            with torch.no_grad():
                got = _strict_limit(name, option, n, lambda: _run(prog, batched, p, backend, option))
            if got is None:
                continue
            _same(got, want)
            _same(batched, plain_batch, "instances")
            _same(_state(p), _state(p_plain), "run lists")
            for (k, a), (_, b) in zip(p.named_parameters(), p_plain.named_parameters()):
                torch.testing.assert_close(a, b, msg=lambda m, k=k: f"parameter {k}: {m}")


def _grad_leaves(out: list, p: hp.HP) -> list[torch.Tensor]:
    """The float tensors of the outputs and of the run lists left on the model that carry a gradient."""
    return [t for y in (*out, *_state(p)) for t in _float_leaves(y) if t.requires_grad]


#: Programs whose plain calls' backward raises (a region writes in place into tanh's output, which its backward
#: reads), left out of the gradient check.
NO_PLAIN_GRADIENT = {"region_bumps_argument", "region_bumps_view"}


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - NO_PLAIN_GRADIENT))
def test_gradients_equal_plain_autograd(name, option):
    """The gradients of the summed float outputs (and run lists) of five instances, float64, eager backend."""
    if option == "strict" and name in STRICT_REJECTS:
        return  # test_outputs_and_state_equal_plain_calls checks the rejection
    prog, batch = getattr(hp, name), _batch(name, 5, seed=77)
    p = hp.HP().double()
    leaves = _grad_leaves([prog(x, p) for x in copy.deepcopy(batch)], p)
    if not leaves:
        pytest.skip("no output carries a gradient")
    want = torch.autograd.grad(sum(t.sum() for t in leaves), list(p.parameters()), allow_unused=True)
    got_out = _strict_limit(name, option, 5, lambda: _run(prog, copy.deepcopy(batch), p, "eager", option))
    if got_out is None:
        return
    got = torch.autograd.grad(sum(t.sum() for t in _grad_leaves(got_out, p)), list(p.parameters()),
                              allow_unused=True)
    for (k, _), g, w in zip(p.named_parameters(), got, want):
        if w is None or g is None:
            assert (w is None or not w.any()) and (g is None or not g.any()), k
        else:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9, msg=lambda m, k=k: f"gradient of {k}: {m}")


KEPT = ["dyn_cat_chunk", "dyn_lookup_pairs", "region_in_loop", "runlist_len_and_last", "bf_gru_stack_h0",
        "tokens_legacy"]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", KEPT)
def test_kept_signatures_across_parameter_objects_dtypes_and_grad_modes(name, backend):
    """One program object in the dynamic tier, runs in a row on other parameter objects, float32 and float64
    parameters swapped, grad on and off, batch sizes 3/17/1, two weights of one shape swapped: plain calls."""
    prog = getattr(hp, name)
    for seed, dtype, grad, n in [(0, torch.float32, False, 3), (1, torch.float64, False, 17),
                                 (0, torch.float32, True, 1), (2, torch.float64, True, 3),
                                 (3, torch.float32, False, 17), (1, torch.float64, False, 3)]:
        batch = [b or [1] for b in _batch(name, n, seed=seed * 100)]
        p = hp.HP(seed).to(dtype)
        if seed == 3:
            p.W, p.sub.U = p.sub.U, p.W  # two weights of one shape, in each other's place
        with torch.set_grad_enabled(grad):
            want = [prog(x, p) for x in copy.deepcopy(batch)]
            got = _run(prog, batch, p, backend, "dynamic")
        _same(got, want, f"seed {seed}, {dtype}, grad {grad}, batch {n}")
        assert [t.requires_grad for y in got for t in _float_leaves(y)] == \
               [t.requires_grad for y in want for t in _float_leaves(y)]


@pytest.mark.parametrize("option", ["default", "dynamic"])
@pytest.mark.parametrize("name", KEPT + ["region_tensor_list", "region_star_args"])
def test_parameters_changed_in_place_between_runs(name, option):
    """An optimizer's step changes the parameters in place between runs of one program object: every run reads
    their values then, not ones kept from the first run."""
    prog, p = getattr(hp, name), hp.HP(0)
    for k in range(3):
        batch = [b or [2] for b in _batch(name, 17, seed=k * 7)]
        with torch.no_grad():
            want = [prog(x, p) for x in copy.deepcopy(batch)]
            got = _run(prog, batch, p, "eager", option)
            _same(got, want, f"run {k}")
            for q in p.parameters():
                q.mul_(1.3).add_(0.05)


# --- regressions ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", ["region_star_args", "region_keyword_only"])
def test_a_region_is_called_with_its_own_signature(name, backend):
    """A region is called with its arguments as the plain call passed them: `shifted(h, 1, n)` of
    `def shifted(h, *rest)` got `rest == ((1, n),)` (the IR's one tuple for `*rest`, passed positionally: a
    silent wrong answer, `len(rest)` 1 where it is 2), and `scaled_by(h, by=0.5)` of a keyword-only `by` a
    TypeError (a fallback reporting a bug in acrobat)."""
    prog, p = getattr(hp, name), hp.HP()
    assert [r.name for r in prog.compile(1, None, (p,)).plan.regions] == [
        {"region_star_args": "shifted", "region_keyword_only": "scaled_by"}[name]]
    batch = [[3, 4, 5], [7], [1, 2]]
    with torch.no_grad():
        _same(_run(prog, batch, p, backend, "default"), [prog(x, p) for x in batch])


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", ["region_bumps_argument", "region_bumps_view", "region_grows_list"])
def test_a_region_changing_its_argument_in_place_reruns_in_the_dynamic_tier(name, backend):
    """`h += 1.0` (or `*=` through `h.view(-1)`) of a region's tensor argument changes the caller's tensor in a
    plain call, and `hs += [h]` the caller's list; the region got its own lazy value (its own list), so the
    static code after it read the old one (a silent wrong answer). Now the change is seen after the call
    (``_argument_state``) and the batch reruns in the dynamic tier, which a later batch then runs in."""
    prog, p = ab.program(getattr(hp, name).fn), hp.HP()  # a new program object: its first batch meets the limit
    assert prog.compile(1, None, (p,)).plan.regions
    batch = [[3, 4, 5], [7], [1, 2]]
    with torch.no_grad():
        want = [prog(x, p) for x in copy.deepcopy(batch)]
        with pytest.warns(DynamicFallbackWarning, match="changing its argument in place"):
            got = prog.run(batch, p, backend=backend)
        _same(got, want)
        _same(_run(prog, batch, p, backend, "default"), want)


@pytest.mark.parametrize("option", ["default", "strict"])
def test_a_recurrent_modules_final_states_are_contiguous_per_instance(option):
    """`h.view(-1)` of a bidirectional LSTM's `h_n` `(2, 1, 3)`: the batched final states were a transpose of the
    module's `(L*D, B, H)`, whose instance rows no view can flatten (an InternalError under strict on the eager
    backend, a fallback reporting a bug by default)."""
    batch, p = [[3, 4, 5], [7], [1, 2]], hp.HP()
    with torch.no_grad():
        _same(_run(hp.bf_bilstm_states_viewed, batch, p, "eager", option),
              [hp.bf_bilstm_states_viewed(x, p) for x in batch])

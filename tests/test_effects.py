"""No silent wrong answers from host effects (issue 10, section 1).

Lists mutated through aliases and callees, concurrent ``run`` calls from
threads, host side effects under fibers (§4.2), in-place updates and the
dtype of per-instance Python numbers: each either matches plain PyTorch
or is rejected at compile time with the source line and a fix.
"""

from __future__ import annotations

import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat import Options
from acrobat.errors import CompileError

from acrobat.data.synthetic import synthetic_trees
from acrobat.models import get_model
from tests import effects_progs as ep
from tests.test_tdc import P

STRICT = Options(strict=True)  # the static tier's rejection, not the dynamic tier's run


def _params() -> P:
    return P(hidden=4, vocab=16)

TOL = {"rtol": 1e-4, "atol": 1e-5}


def test_threads_calling_run_at_once_get_their_own_results(dataset):
    """Two threads run one compiled program at once: every result equals the eager one."""
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), 16, 0)
    instances = spec.instances(dataset.trees)
    batches = [instances[i:i + 8] for i in range(0, 48, 4)]
    with torch.no_grad():
        want = [spec.program.run(b, params) for b in batches]
    errors: list[str] = []

    def worker(offset: int) -> None:
        try:
            with torch.inference_mode():
                for r in range(12):
                    k = (r + offset) % len(batches)
                    got = spec.program.run(batches[k], params, backend="compiled")
                    torch.testing.assert_close(got, want[k], **TOL)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(o,)) for o in (0, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_python_floats_keep_a_float64_model_exact():
    """A per-instance Python float is not rounded to float32 on its way into a float64 model."""
    p = _params().double()
    batch = [(1, 0.1), (2, 1 / 3), (3, 2.0 ** -30 + 1)]
    with torch.no_grad():
        for backend in ("eager", "compiled"):
            got = ep.scaled64.run(batch, p, backend=backend)
            torch.testing.assert_close(got, [ep.scaled64(x, p) for x in batch], rtol=0, atol=1e-15)
            assert all(t.dtype == torch.float64 for t in got)
    q = _params()  # float32: the number is rounded as PyTorch rounds it, and results stay float32
    with torch.no_grad():
        got = ep.scaled64.run(batch, q)
    assert all(t.dtype == torch.float32 for t in got)
    torch.testing.assert_close(got, [ep.scaled64(x, q) for x in batch], rtol=0, atol=0)


def _line(key: str) -> int:
    """The line of ``tests/effects_progs.py`` marked ``# M:<key>``."""
    with open(ep.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# M:{key}"))


def _check(prog, instances, p, backend: str = "eager") -> list:
    with torch.inference_mode() if backend != "eager" else torch.no_grad():
        got = prog.run(instances, p, backend=backend)
        want = [prog(x, p) for x in instances]
    torch.testing.assert_close(got, want, **TOL)
    return got


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("prog", [ep.every_node, ep.aliased_list, ep.nested_lists, ep.extended])
def test_lists_changed_through_callees_and_aliases_hold_tensors(prog, backend):
    """Tensors appended through a callee's parameter, an alias or a loop variable come back as tensors."""
    got = _check(prog, synthetic_trees(8, seed=3, vocab_size=16), _params(), backend)
    flat = [x for r in got for x in (r[0] if isinstance(r, tuple) else r)]
    assert flat and all(isinstance(x, (torch.Tensor, list)) for x in flat)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10_000))
def test_every_node_matches_plain_python_on_random_trees(n, seed):
    _check(ep.every_node, synthetic_trees(n, seed=seed, vocab_size=16), _params())


def test_host_data_and_tensors_meeting_in_one_list_through_a_callee_is_rejected():
    with pytest.raises(CompileError, match="separate lists"):
        ep.host_then_tensor.compile(1, STRICT)


def test_a_list_changed_where_acrobat_cannot_follow_it_is_rejected_and_the_fix_compiles():
    with pytest.raises(CompileError) as err:
        ep.untracked_list.compile(1, STRICT)
    assert f"effects_progs.py:{_line('untracked')}" in str(err.value)
    assert "keep a list that is changed in one variable" in str(err.value)
    _check(ep.untracked_fixed, synthetic_trees(3, seed=0, vocab_size=16), _params())


def test_changing_a_model_parameter_in_place_is_rejected():
    with pytest.raises(CompileError) as err:
        ep.mutate_param.compile(1, STRICT)
    assert f"effects_progs.py:{_line('mutate_param')}" in str(err.value) and "every instance shares" in str(err.value)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 10), st.integers(0, 10_000))
def test_host_effects_keep_python_order_under_fibers(n, seed):
    """Concurrent calls that number leaves through a shared counter see it in plain Python's order."""
    _check(ep.numbered, synthetic_trees(n, seed=seed, vocab_size=16), _params())


def test_only_concurrent_calls_with_host_effects_give_up_child_fibers():
    assert "_rt.fork(" in ep.pure_tree.source()
    assert "_rt.fork(" not in ep.numbered.source()
    assert ep.numbered.compile(1).plan.needs_fibers


def test_augmented_assignment_on_a_parameter_is_rejected_with_the_fix():
    """(Of a fresh per-instance tensor it is taken: tests/test_idioms.py.)"""
    with pytest.raises(CompileError) as err:
        ep.aug_param.compile(1, STRICT)
    assert f"effects_progs.py:{_line('aug_param')}" in str(err.value) and "write `x = x + y`" in str(err.value)
    _check(ep.aug_local_fixed, [1, 2, 3], _params())


def test_augmented_assignment_on_host_values_and_lists_is_plain_python():
    _check(ep.aug_host, [[1, 2], [3], [4, 5, 6]], _params())


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_torch_tensor_of_a_host_number_in_a_block(backend):
    """torch.tensor(x) of a per-instance number: the dtype PyTorch infers (float32 for a float, int64 for an int)."""
    got = _check(ep.host_number_tensor, [(1, 0.1), (2, 3.0), (3, 1 / 3)], _params(), backend)
    assert all(t.dtype == torch.float32 for t in got)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_legacy_constructors_of_host_numbers_in_a_block(backend):
    """`torch.LongTensor([tok])` of a per-instance number (the tutorials' form) is a batched number in the block, as
    `torch.tensor` is (``host_tensors.legacy_of``): in the static tier, with the constructor's dtype."""
    batch, p, stats = [(1, 0.1), (2, 3.0), (3, 1 / 3)], _params(), ab.RunStats()
    with torch.inference_mode() if backend != "eager" else torch.no_grad():
        got = ep.legacy_constructor_tensors.run(batch, p, backend=backend, options=STRICT, stats=stats)
        torch.testing.assert_close(got, [ep.legacy_constructor_tensors(x, p) for x in batch], **TOL)
    assert stats.dynamic is None and stats.fallback is None


def test_host_effects_keep_python_order_on_the_compiled_backend():
    _check(ep.numbered, synthetic_trees(10, seed=5, vocab_size=16), _params(), "compiled")

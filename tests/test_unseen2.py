"""Thirteen more models acrobat was not written against (tests/unseen_progs2.py), each run batched and compared
with plain per-instance calls: outputs and the state left on the instances and on the model on both backends,
gradients of the summed outputs, eight inference runs in a row on one program object (the tier trial of
acrobat/runtime/tier.py switches between the dynamic tier and plain calls over them), a three-step training
loop, and the regressions the hunt found (batch sizes 1 and 8, mixed instance sizes).

``train_dropout`` draws random numbers: batched and plain draws cannot be equal, so its results are checked by
``check_dropout`` (every kept element is ``x / (1 - p)``, the uniform draws lie in [0, 1)) instead.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import nn

import acrobat as ab
from acrobat.errors import DynamicFallbackWarning
from tests import unseen_progs2 as U
from tests.test_unseen import _batch, _leaves, _same, _state, same_gradients
from tests.unseen_progs2 import MODELS, Model


def _model_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's parameters and buffers, copied."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _compare(m: Model, instances: list, got: list, want: list) -> None:
    """Batched results ``got`` equal the plain calls' ``want`` (``m.check`` on each result for random models)."""
    if m.check is None:
        torch.testing.assert_close(got, want)
    else:
        for x, out in zip(instances, got):
            m.check(x, out)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_and_state_equal_plain_calls(name, n, backend):
    m = MODELS[name]
    (module,) = m.params(0)
    plain, batched = _batch(m, n), _batch(m, n)
    U.CALLS = 0
    with torch.no_grad():
        want = [m(x, module) for x in plain]
    calls, after = U.CALLS, _model_state(module)
    (module,) = m.params(0)
    U.CALLS = 0
    with torch.no_grad():
        got = m.run(batched, module, backend=backend)
    _compare(m, batched, got, want)
    _same(_state(batched), _state(plain))
    _same(_model_state(module), after)
    assert U.CALLS == calls  # the `global` counter of empty_sentences


@pytest.mark.parametrize("options", [None, ab.Options(static=False)], ids=["default", "dynamic"])
@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_equal_plain_calls(name, n, options):
    m = MODELS[name]
    (module,) = m.params(0)
    loss = sum((t.sum() for x in _batch(m, n) for t in _leaves(m(x, module))), torch.zeros(()))
    if not loss.requires_grad or m.check is not None:
        pytest.skip("no output depends on a parameter through autograd, or the outputs are random")
    loss.backward()
    want = {k: None if q.grad is None else q.grad.clone() for k, q in module.named_parameters()}
    (module,) = m.params(0)
    out = m.run(_batch(m, n), module, backend="eager", **({} if options is None else {"options": options}))
    same_gradients(module, out, want)


@pytest.mark.parametrize("name", ["topk_pool", "deep_calls", "eval_norms", "train_dropout", "routed_experts"])
def test_eight_runs_in_a_row_stay_equal(name):
    """The tier trial (dynamic tier vs plain calls, for programs the static tier rejected) changes what runs over
    the first batches; every batch must still equal the plain calls."""
    m = MODELS[name]
    (module,) = m.params(0)
    with torch.no_grad():
        want = [m(x, module) for x in _batch(m, 8)]
        for _ in range(8):
            batched = _batch(m, 8)
            _compare(m, batched, m.run(batched, module, backend="eager"), want)


def _train(m: Model, optimizer: type, backend: str | None) -> dict[str, torch.Tensor]:
    """Three steps of ``optimizer`` on the squared outputs of batches of 5; ``backend=None``: plain calls."""
    (module,) = m.params(0)
    opt = optimizer(module.parameters(), lr=0.05)
    for step in range(3):
        instances = _batch(m, 5, seed=step)
        outs = [m(x, module) for x in instances] if backend is None else m.run(instances, module, backend=backend)
        loss = sum(((t ** 2).sum() for o in outs for t in _leaves(o)), torch.zeros(()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return _model_state(module)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam], ids=["sgd", "adam"])
@pytest.mark.parametrize("name", ["routed_experts", "nary_stored"])
def test_training_loop_parameters_equal_plain_loop(name, optimizer, backend):
    m = MODELS[name]
    torch.testing.assert_close(_train(m, optimizer, backend), _train(m, optimizer, None))


# --- regressions --------------------------------------------------------------------------------------------------

class _Biased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)
        self.biases = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])


@ab.program
def _parameter_list_by_host_int(kinds, p):
    h = torch.zeros(4)
    for k in kinds:
        h = torch.tanh(p.lin(h) + p.biases[k])
    return h


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_parameter_list_indexed_by_a_host_int(backend, caplog):
    """``p.biases[k]`` of an ``nn.ParameterList`` by a per-instance int ran ``ParameterList.__getitem__`` on the
    block's batched index under vmap (``.item()``: BatchError, then a DynamicFallbackWarning); on the compiled
    backend the list reached TorchInductor as one constant holding real tensors, so the block ran eagerly."""
    batch = [[0, 1, 2], [2], [1, 1]]
    p = _Biased()
    with torch.no_grad():
        got = _parameter_list_by_host_int.run(batch, p, backend=backend, options=ab.Options(strict=True))
    torch.testing.assert_close(got, [_parameter_list_by_host_int(x, p) for x in batch])
    assert not [r for r in caplog.records if "could not compile" in r.getMessage()]
    loss = sum(_parameter_list_by_host_int(x, p).sum() for x in batch)
    want = torch.autograd.grad(loss, list(p.biases))
    out = _parameter_list_by_host_int.run(batch, p, backend=backend, options=ab.Options(strict=True))
    for g, w in zip(torch.autograd.grad(sum(o.sum() for o in out), list(p.biases)), want):
        torch.testing.assert_close(g, w)


def _no_fallback(prog: Any, batch: list, p: nn.Module) -> None:
    """``prog`` runs ``batch`` without falling back to the dynamic tier, equal to the plain calls."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)
        with torch.no_grad():
            got = prog.run(batch, p, backend="eager")
    torch.testing.assert_close(got, [prog(x, p) for x in batch])


@ab.program
def _size_from_a_host_int(x, p):
    n = x.shape[0]
    return p.lin(x).view(n, 2, 2).sum(1)


def test_a_shape_read_into_a_variable_used_as_a_size():
    """`n = x.shape[0]` then `view(n, ...)`: the block reads `x.shape[0]` itself (acrobat.analysis.shape_vars), where
    the host int `n` reached vmap as a batched tensor (.item(): a fallback blamed on acrobat)."""
    _no_fallback(_size_from_a_host_int, [torch.randn(3, 4)], _Biased())


@ab.program
def _pooled_instance_tensor(x, p):
    return p.lin(x).sum(0)


@pytest.mark.xfail(strict=True, reason="instance tensors of per-instance shapes ((n, 4) with n differing) reach "
                   "one static block: the launch's shape check (ShapeError) fails it, InternalError, and the "
                   "batch reruns in the dynamic tier with a DynamicFallbackWarning that names the shapes (the static tier's limit); "
                   "the same class as tests/test_unseen.py::test_tensor_of_a_host_list_of_per_instance_length")
def test_instance_tensors_of_per_instance_shapes():
    _no_fallback(_pooled_instance_tensor, [torch.randn(3, 4), torch.randn(5, 4)], _Biased())


def test_per_instance_shapes_are_said_as_the_static_tiers_limit_not_a_bug():
    """Meanwhile (the xfail above), such a batch runs in the dynamic tier with the plain calls' results and a
    warning that names the shapes and the line, and does not call it a bug in acrobat; strict raises it."""
    p = _Biased()
    batch = [torch.randn(3, 4), torch.randn(5, 4)]
    stats = ab.RunStats()
    with pytest.warns(DynamicFallbackWarning) as caught, torch.no_grad():
        got = _pooled_instance_tensor.run(batch, p, backend="eager", stats=stats)
    text = " ".join(str(w.message) for w in caught)
    assert "equal shapes only" in text and "(3, 4) vs (5, 4)" in text and "test_unseen2.py:" in text
    assert "bug in acrobat" not in text and "equal shapes only" in stats.summary()
    with torch.no_grad():
        torch.testing.assert_close(got, [_pooled_instance_tensor(x, p) for x in batch])
        with pytest.raises(ab.ShapeError, match="different shapes"):
            _pooled_instance_tensor.run(batch, p, backend="eager", options=ab.Options(strict=True))


class _Batched3(nn.Module):
    """An embedding and a stack of two 4x4 matrices (a 3-D weight)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.emb = nn.Embedding(10, 4)
        self.W3 = nn.Parameter(torch.randn(2, 4, 4))


@ab.program
def _stack_times_3d_weight(toks, p):
    S = torch.stack([p.emb(torch.tensor(t)) for t in toks])
    return (S @ p.W3).sum()


def test_a_limit_of_the_static_tier_met_at_run_time_reruns_the_batch_in_the_dynamic_tier():
    """`torch.stack(xs) @ W` with a 3-D W compiles (the rows' ranks are known only at run time) and the rows
    cannot take it (a LimitError in the block): the batch reruns in the dynamic tier, as for per-instance shapes,
    with the plain calls' results and a warning naming the limit and the line (it raised a ShapeError before);
    strict raises it."""
    p, batch = _Batched3(), [[1, 2, 3], [4, 5]]
    stats = ab.RunStats()
    with pytest.warns(DynamicFallbackWarning) as caught, torch.no_grad():
        got = _stack_times_3d_weight.run(batch, p, backend="eager", stats=stats)
    text = " ".join(str(w.message) for w in caught)
    assert "a limit of the static tier" in text and "test_unseen2.py:" in text and "bug in acrobat" not in text
    with torch.no_grad():
        torch.testing.assert_close(got, [_stack_times_3d_weight(x, p) for x in batch])
        with pytest.raises(ab.ShapeError, match="1-D or 2-D w"):
            _stack_times_3d_weight.run(batch, p, backend="eager", options=ab.Options(strict=True))
    # later batches run as a program the static tier rejected: no second failure and rerun, the report says why
    later = ab.RunStats()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", DynamicFallbackWarning)
        for _ in range(3):
            got = _stack_times_3d_weight.run(batch, p, backend="eager", stats=later)
            torch.testing.assert_close(got, [_stack_times_3d_weight(x, p) for x in batch])
    assert "the static tier met its limit on a batch" in _stack_times_3d_weight.explain(p)

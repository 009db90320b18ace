"""Twelve models acrobat was not written against (tests/unseen_progs.py), each run batched and compared with
plain per-instance calls: outputs on both backends, and on the eager backend the gradients of the summed
outputs with respect to every parameter, and the instances' state afterwards (batch sizes 1 and 8, mixed
instance sizes)."""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest
import torch

from acrobat.errors import DynamicFallbackWarning
from tests.unseen_progs import MODELS, Model


def _batch(m: Model, n: int, seed: int = 1) -> list:
    """``n`` instances of mixed sizes (1-12), the same for the same ``seed``."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    return [m.instance(rng, 1 + (i * 7 + seed) % 12) for i in range(n)]


def _leaves(x: Any) -> list[torch.Tensor]:
    """The floating-point tensors in a result (tensors, lists, tuples, dicts), in order."""
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _leaves(y)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _leaves(x[k])]
    return []


def _state(x: Any, seen: set[int] | None = None) -> Any:
    """A copy of what an instance holds (tensors cloned, objects as their attribute dicts)."""
    seen = set() if seen is None else seen
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if id(x) in seen:
        return "<seen>"
    seen.add(id(x))
    if isinstance(x, (list, tuple)):
        return [_state(y, seen) for y in x]
    if isinstance(x, dict):
        return {k: _state(v, seen) for k, v in x.items()}
    if hasattr(x, "__dict__"):
        return {k: _state(v, seen) for k, v in sorted(vars(x).items())}
    return x


def _same(got: Any, want: Any) -> None:
    """``got`` equals ``want``: tensors by ``assert_close``, containers item by item, the rest by ``==``."""
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    elif isinstance(want, (list, dict)):
        assert type(got) is type(want) and len(got) == len(want)
        for k in (range(len(want)) if isinstance(want, list) else want):
            _same(got[k], want[k])
    else:
        assert got == want


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_equal_plain_calls(name, n, backend):
    m = MODELS[name]
    params = m.params(0)
    plain, batched = _batch(m, n), _batch(m, n)
    with torch.no_grad():
        want = [m(x, *params) for x in plain]
        got = m.run(batched, *params, backend=backend)
    torch.testing.assert_close(got, want)
    _same(_state(batched), _state(plain))


@pytest.mark.parametrize("n", [1, 8])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_equal_plain_calls(name, n):
    m = MODELS[name]
    params = m.params(0)
    module = params[0]
    loss = sum((t.sum() for x in _batch(m, n) for t in _leaves(m(x, *params))), torch.zeros(()))
    if not loss.requires_grad:
        pytest.skip("no output of this model depends on a parameter through autograd")
    loss.backward()
    want = {k: None if q.grad is None else q.grad.clone() for k, q in module.named_parameters()}
    module.zero_grad(set_to_none=True)
    same_gradients(module, m.run(_batch(m, n), *params, backend="eager"), want)


def same_gradients(module: torch.nn.Module, out: Any, want: dict[str, torch.Tensor | None]) -> None:
    """Backward the sum of the batched run's outputs ``out`` into ``module`` (its gradients cleared) and compare its
    parameters' gradients with the per-instance calls' ``want`` (None there: none, or all zeros, here)."""
    sum((t.sum() for t in _leaves(out)), torch.zeros(())).backward()
    for k, q in module.named_parameters():
        if want[k] is None:
            assert q.grad is None or not q.grad.any(), k
        else:
            assert q.grad is not None, k
            torch.testing.assert_close(q.grad, want[k], msg=lambda s, k=k: f"gradient of {k}: {s}")


def test_tensor_of_a_host_list_of_per_instance_length():
    from tests.unseen_progs import ClosureParams, tensor_of_host_list

    batch = [[1, 2, 3], [4, 5], [6]]
    p = ClosureParams()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicFallbackWarning)
        with torch.no_grad():
            got = tensor_of_host_list.run(batch, p, backend="eager")
    torch.testing.assert_close(got, [tensor_of_host_list(x, p) for x in batch])

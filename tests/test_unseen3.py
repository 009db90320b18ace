"""Ten models written like public GitHub code (tests/unseen_progs3.py), each run batched and compared with plain
per-instance calls under the default options, ``Options(strict=True)`` (the static tier or a CompileError naming
the line) and ``Options(static=False)`` (the dynamic tier), on both backends, at batch sizes 1, 3 and 17: outputs,
the state left on the instances and on the model (parameters, buffers and the attributes user code sets, such as
``RNN_Model.nodeProbList``), three batches in a row on one program object (eager), and the gradients of the summed
outputs. Then the regressions the hunt found.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import acrobat as ab
from tests.test_unseen import _batch, _leaves, _same, _state, same_gradients
from tests.unseen_progs3 import MODELS, Model

OPTIONS = {"default": None, "strict": ab.Options(strict=True), "dynamic": ab.Options(static=False)}

#: What the static tier rejects in each model (strict raises it; the other options run the dynamic tier).
STRICT_REJECTS = {
    # torch.cat([torch.tensor([start]), tags]): a tensor and a stacked list joined along the list axis
    "bilstm_crf": "a stacked list (`torch.stack(xs)`, its length differs per instance) cannot",
    "lm_loss": "`nll_loss` of a stacked list",
    "recursive_nn_loss": "`self.nodeProbList = ...` changes a model parameter",
    "seq2seq_attention": "item assignment on a tensor",  # encoder_outputs[ei] = ...
    "seq2seq_greedy": "item assignment on a tensor",
    "tree_lstm_losses": "`+=` updates a tensor in place",  # gates = self.W(x); gates += ...: a module's result
}


def _model_state(module: nn.Module) -> dict[str, Any]:
    """The module's parameters and buffers, and the public attributes of it and its submodules, copied."""
    out: dict[str, Any] = {k: v.detach().clone() for k, v in module.state_dict().items()}
    for name, sub in module.named_modules():
        out.update({f"{name}.{k}": _state(v) for k, v in vars(sub).items() if not k.startswith("_")})
    return out


def _run(m: Model, batch: list, shared: tuple, backend: str, options: ab.Options | None) -> list:
    return m.run(batch, *shared, backend=backend, **({} if options is None else {"options": options}))


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_and_state_equal_plain_calls(name, option, backend):
    m, options = MODELS[name], OPTIONS[option]
    if option == "strict" and name in STRICT_REJECTS:
        with pytest.raises(ab.CompileError, match=r"unseen_progs3\.py:\d+") as err:
            _run(m, _batch(m, 3), m.params(0), backend, options)
        assert STRICT_REJECTS[name] in str(err.value)
        return
    for n, runs in ((1, 1), (3, 1), (17, 3 if backend == "eager" else 1)):
        shared = m.params(0)
        plain = _batch(m, n)
        with torch.no_grad():
            want = [m(x, *shared) for x in plain]
        model_after = _model_state(shared[0])
        shared = m.params(0)
        for _ in range(runs):  # one program object, batches in a row (the tier trial switches tiers over them)
            batched = _batch(m, n)
            with torch.no_grad():
                got = _run(m, batched, shared, backend, options)
            torch.testing.assert_close(got, want)
            _same(_state(batched), _state(plain))
            _same(_model_state(shared[0]), model_after)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_equal_plain_calls(name, option, backend):
    m, options = MODELS[name], OPTIONS[option]
    if option == "strict" and name in STRICT_REJECTS:
        pytest.skip("the static tier rejects this model (test_outputs_and_state_equal_plain_calls)")
    if backend == "compiled" and name in STRICT_REJECTS:
        pytest.skip("the dynamic tier runs this model under every option: the eager case covers it")
    for n in (3, 17):
        shared = m.params(0)
        loss = sum((t.sum() for x in _batch(m, n) for t in _leaves(m(x, *shared))), torch.zeros(()))
        loss.backward()
        want = {k: None if q.grad is None else q.grad.clone() for k, q in shared[0].named_parameters()}
        shared = m.params(0)
        same_gradients(shared[0], _run(m, _batch(m, n), shared, backend, options), want)


# --- regressions --------------------------------------------------------------------------------------------------

class _Visit:
    def __init__(self, word: int) -> None:
        self.word, self.seen = word, 0


class _Lin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)


@ab.program
def _count_visits(nodes, p):
    h = torch.zeros(4)
    for n in nodes:
        n.seen = n.seen + 1
        h = torch.tanh(p.lin(h) + n.seen * 0.5 + n.word)
    return h


def _visits(shared: _Visit | None = None) -> list[list[_Visit]]:
    s = shared if shared is not None else _Visit(1)
    return [[_Visit(2), s], [s, _Visit(3)], [_Visit(4)]]


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_field_stored_from_its_own_read(option, backend):
    """``n.seen = n.seen + 1``: the field's only store derives from a read of the field, so no store gave it a
    kind and it stayed BOTTOM through the kind analysis; ``p.lin(h) + n.seen`` then made the loop-carried ``h``
    a shared value, ``p.lin(h)`` was hoisted into the prologue with ``h = zeros`` and the run returned the
    initial ``h`` (zeros) for every instance, silently, in the static tier (default options and strict). The
    read gives what the object held before the run: host data. Objects shared by two instances count as plain
    calls, one instance after the other, count them."""
    plain = _visits()
    p = _Lin()
    with torch.no_grad():
        want = [_count_visits(x, p) for x in plain]
        batch = _visits()
        got = _count_visits.run(batch, p, backend=backend, **({} if OPTIONS[option] is None
                                                               else {"options": OPTIONS[option]}))
    torch.testing.assert_close(got, want)
    assert [[n.seen for n in x] for x in batch] == [[n.seen for n in x] for x in plain]
    assert batch[0][1].seen == 2


class _Rows(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Parameter(torch.randn(7, 3))


@ab.program
def _divided_then_subtracted(word, p):
    r = p.emb[word]
    acc = torch.tanh(r)
    acc /= 2.0
    acc -= r
    return acc


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_in_place_division_then_another_write_in_the_dynamic_tier(backend):
    """``acc /= 2.0`` reaches the dynamic tier's recorder as ``__idiv__`` (torch's name for
    ``Tensor.__itruediv__``), which its list of writing operators missed: recorded as a lazy operator whose output
    is a view of its operand, the next write ``acc -= r`` (``Recorder.write_own``) made that view again on the
    instance's copy, replaying the division: ``tanh(r) / 8 - r / 2`` for ``tanh(r) / 2 - r``, silently (fuzz
    seeds 8100123 and 8100189)."""
    p, batch = _Rows(), [1, 4, 1]
    with torch.no_grad():
        want = [_divided_then_subtracted(w, p) for w in batch]
        got = _divided_then_subtracted.run(batch, p, backend=backend, options=ab.Options(static=False))
    torch.testing.assert_close(got, want)

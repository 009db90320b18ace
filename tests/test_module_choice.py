"""Modules chosen by data (issue 18, section 2): ``p.experts[k](x)``, ``p.mods[node.op](x)`` in the static tier.

A module of an ``nn.ModuleList`` or ``nn.ModuleDict`` chosen per instance by host data (a host int, an int read
from a tensor, a ``.tolist()`` item, a host string) is one static call per module, dispatched by host code
(``acrobat.analysis.blocks``'s ``lower_choice``): each module's instances batch together (§4.1). Each program is
compiled with ``Options(strict=True)`` and equals the plain per-instance calls, gradients included.
"""

from __future__ import annotations

import random

import pytest
import torch

import acrobat as ab
from acrobat.data.synthetic import synthetic_trees
from tests import container_progs as cp

TOL = {"rtol": 1e-5, "atol": 1e-6}
STRICT = ab.Options(strict=True)
TOKEN_PROGS = ["expert_by_token", "expert_by_len", "expert_by_argmax", "expert_by_callee", "experts_by_topk",
               "module_by_name", "expert_negative"]


def _tokens(n: int, seed: int = 0, top: int = 10) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(top) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _batch(name: str) -> list:
    return synthetic_trees(10, 3, vocab_size=10) if name == "expert_tree" else _tokens(12, len(name))


def _run(prog, batch, p, backend: str, stats: ab.RunStats | None = None):
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        return prog.run(batch, p, backend=backend, options=STRICT, stats=stats)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", TOKEN_PROGS + ["expert_tree"])
def test_module_chosen_by_data_runs_statically_and_equals_plain(name, backend):
    prog = getattr(cp, name)
    p = cp.Routed()
    batch = _batch(name)
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
    stats = ab.RunStats()
    got = _run(prog, batch, p, backend, stats)
    assert stats.dynamic is None
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("name", TOKEN_PROGS + ["expert_tree"])
def test_module_chosen_by_data_has_the_gradients_of_plain(name):
    prog = getattr(cp, name)
    batch = _batch(name)
    grads = []
    for batched in (False, True):
        p = cp.Routed()
        outs = prog.run(batch, p, backend="eager", options=STRICT) if batched else [prog(x, p) for x in batch]
        sum(o.sum() for o in outs).backward()
        grads.append({n: w.grad for n, w in p.named_parameters() if w.grad is not None})
    assert grads[0].keys() == grads[1].keys() and any(n.startswith(("experts", "mods")) for n in grads[0])
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], **TOL, msg=n)


def test_one_launch_per_module_chosen():
    """Every instance chooses by its token: one launch per expert chosen at a step, not one per instance."""
    p = cp.Routed()
    batch = [[0], [1], [2], [3], [4], [5]]  # t % 3: each expert by two instances
    stats = ab.RunStats()
    _run(cp.expert_by_token, batch, p, "eager", stats)
    one = ab.RunStats()
    _run(cp.expert_by_token, [[0]], p, "eager", one)
    assert stats.kernel_launches == one.kernel_launches + 2  # two more experts, nothing more


@pytest.mark.parametrize(("name", "error"), [("expert_out_of_range", IndexError), ("module_missing", KeyError)])
@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_a_missing_module_raises_as_plain_naming_instance_and_line(name, error, backend):
    prog = getattr(cp, name)
    p = cp.Routed()
    batch = [[0, 1], [2, 1, 9], [1]]
    with pytest.raises(error):
        prog(batch[1], p)
    with pytest.raises(ab.InstanceError) as info:
        _run(prog, batch, p, backend)
    assert isinstance(info.value.__cause__, error) and info.value.instance == 1
    assert error.__name__ in str(info.value) and "container_progs.py:" in str(info.value)


def test_another_number_of_experts_compiles_again():
    """The container's keys are a fact of the compile: a run with more experts does not reuse it."""
    batch = _tokens(8, 1)
    facts = set()
    for n in (3, 5, 2):
        p = cp.Routed(n_experts=n)
        with torch.no_grad():
            want = [cp.expert_by_len(x, p) for x in batch]
        torch.testing.assert_close(_run(cp.expert_by_len, batch, p, "eager"), want, **TOL)
        facts.add(cp.expert_by_len.compile(1, STRICT, shared=(p,)).facts[("arg", 1, (".", "experts"))])
    assert facts == {"modules range(0, 3)", "modules range(0, 5)", "modules range(0, 2)"}


@pytest.mark.parametrize(("name", "n_experts", "why"), [
    ("expert_by_len", 17, "at most 16 modules"),  # past MAX_CHOICES modules the dispatch would be too long
    ("expert_held", 3, "called at once"),  # `m = p.experts[k]; m(h)`: the chosen module held in a variable
])
def test_a_module_chosen_where_the_static_tier_cannot_runs_dynamically(name, n_experts, why):
    """The static tier says why it does not take the program; the dynamic tier runs it (the statement holding
    the choice as a dynamic region of the static program, or the whole batch), one launch per module chosen
    with the rows that chose it, and the run report says why."""
    prog = getattr(cp, name)
    p = cp.Routed(n_experts=n_experts)
    batch = _tokens(6, 2)
    with pytest.raises(ab.CompileError, match=why):
        _run(prog, batch, p, "eager")
    stats = ab.RunStats()
    with torch.no_grad():
        want = [prog(x, p) for x in batch]
        got = prog.run(batch, p, backend="eager", stats=stats)
    torch.testing.assert_close(got, want, **TOL)
    # batched (the dynamic tier or a region of it), or plain calls once the tier trial measured them: said either way
    assert stats.dynamic is not None or stats.plain is not None
    said = " ".join([stats.dynamic.reason, *stats.dynamic.regions] if stats.dynamic is not None else [stats.plain])
    assert "module chosen by a per-instance value" in said or "returned Linear" in said, said

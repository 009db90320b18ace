"""The user-style models of examples/: batched acrobat equals each example's independent reference.

Every example runs on both backends at batch sizes 1, 8 and 64; its
reference agrees with the program run as plain Python. The ``acrobat
examples`` command is checked on its output's structure only, never on
timings.
"""

from __future__ import annotations

import json
import pickle

import pytest
import torch

import acrobat as ab
import examples
from acrobat.bench.examples import DYNAMIC, LOOP, PLAIN, RAN, REJECTED, example_table, max_error, measure
from acrobat.cli import main

TOL = {"rtol": 1e-4, "atol": 1e-5}
NAMES = list(examples.EXAMPLES)

@pytest.mark.parametrize("batch_size", [1, 8, 64])
@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", NAMES)
def test_batched_equals_reference(name, backend, batch_size):
    ex = examples.load(name)
    params = ex.make_params(0)
    batch = ex.instances(batch_size, 0)
    with torch.inference_mode() if backend == "compiled" else torch.no_grad():
        out = ex.program.run(batch, params, backend=backend)
        expected = [ex.reference(x, params) for x in batch]
    assert len(out) == batch_size
    torch.testing.assert_close(out, expected, **TOL)


def _loss(outs) -> torch.Tensor:
    """A scalar of every floating-point tensor in one instance's ``outs`` (squares summed, each weighted by its
    position in the result)."""
    leaves = [x for x in torch.utils._pytree.tree_leaves(outs) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return sum(((k + 1) * x.square()).sum() for k, x in enumerate(leaves))


@pytest.mark.parametrize("name", NAMES)
def test_gradients_equal_the_per_instance_loop(name):
    """The parameters' gradients through the batched run (eager) equal those of the program run per instance."""
    ex = examples.load(name)
    params = ex.make_params(0)
    batch = ex.instances(8, 2)
    sum(_loss(ex.program(x, params)) for x in batch).backward()
    want = {n: q.grad.clone() for n, q in params.named_parameters() if q.grad is not None}
    assert want, "the loss reaches some parameter"
    params.zero_grad(set_to_none=True)
    sum(_loss(out) for out in ex.program.run(batch, params, backend="eager")).backward()
    got = {n: q.grad for n, q in params.named_parameters() if q.grad is not None}
    assert got.keys() == want.keys()
    for n in want:
        torch.testing.assert_close(got[n], want[n], **TOL, msg=lambda m: f"{name}: gradient of {n}: {m}")


@pytest.mark.parametrize("name", NAMES)
def test_reference_equals_plain_python_program(name):
    """The reference runs, and agrees with the program run as plain Python (so the reference is right)."""
    ex = examples.load(name)
    params = ex.make_params(0)
    with torch.no_grad():
        for x in ex.instances(16, 1):
            torch.testing.assert_close(ex.program(x, params), ex.reference(x, params), **TOL)


@pytest.mark.parametrize("name", NAMES)
def test_generators_are_deterministic(name):
    ex = examples.load(name)
    assert pickle.dumps(ex.instances(12, 3)) == pickle.dumps(ex.instances(12, 3))
    assert pickle.dumps(ex.instances(12, 3)) != pickle.dumps(ex.instances(12, 4))
    assert len(ex.instances(5, 0)) == 5
    a, b = ex.make_params(2).state_dict(), ex.make_params(2).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], v) for k, v in ex.make_params(3).state_dict().items())


def test_registry_interface():
    assert len(NAMES) >= 8
    for name in NAMES:
        ex = examples.load(name)
        assert ex.NAME == name and ex.SUMMARY and callable(ex.main)
        assert isinstance(ex.program, ab.Program)
    with pytest.raises(ValueError, match="unknown example"):
        examples.load("nope")


# A model acrobat runs today, for the RAN path of the bench plumbing.
@ab.program
def _tiny(tokens, p):
    h = p.h0
    for t in tokens:
        h = torch.tanh(p.emb[t] + h @ p.W)
    return h


# One the static tier rejects, for the REJECTED path: `try`/`except` (outside the static subset).
@ab.program
def _tiny_cat(tokens, p):
    hs = []
    for t in tokens:
        try:
            hs.append(p.emb[t])
        except IndexError:
            hs.append(p.emb[0])
    return torch.cat(hs)


class _TinyExample:
    NAME, SUMMARY = "tiny", "a tanh RNN"
    program = staticmethod(_tiny)

    @staticmethod
    def make_params(seed: int = 0) -> torch.nn.Module:
        g = torch.Generator().manual_seed(seed)
        p = torch.nn.Module()
        p.emb, p.W, p.h0 = (torch.nn.Parameter(torch.randn(*s, generator=g)) for s in [(5, 4), (4, 4), (4,)])
        return p

    @staticmethod
    def instances(n: int, seed: int = 0) -> list[list[int]]:
        return [[(seed + i + j) % 5 for j in range(1 + i % 3)] for i in range(n)]

    @staticmethod
    def reference(tokens: list[int], p: torch.nn.Module) -> torch.Tensor:
        h = p.h0
        for t in tokens:
            h = torch.tanh(p.emb[t] + h @ p.W)
        return h


class _TinyRejected(_TinyExample):
    NAME, SUMMARY = "tiny-cat", "the RNN's inputs concatenated"
    program = staticmethod(_tiny_cat)

    @staticmethod
    def reference(tokens: list[int], p: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.emb[t] for t in tokens])


def test_measure_reports_ran_and_rejected():
    rep = measure(_TinyExample, batch_size=3, backends=("eager",), repeats=1)
    assert [r.system for r in rep.results] == [LOOP, "acrobat (eager)"]
    loop, acro = rep.results
    assert loop.status == RAN and loop.launches is None and loop.ms is not None
    assert acro.status == RAN and isinstance(acro.launches, int) and acro.launches > 0 and acro.ms is not None
    assert acro.max_error is not None and acro.max_error <= 1e-5
    rejected = measure(_TinyRejected, batch_size=2, backends=("eager",), repeats=1)
    r = rejected.result("acrobat (eager)")  # the static tier rejects it: it runs in the dynamic tier, and says why
    assert r is not None and r.status in (DYNAMIC, PLAIN) and "test_examples.py:" in r.detail and r.ms is not None
    dyn = measure(_TinyExample, batch_size=3, backends=("dynamic",), repeats=1).result("acrobat (dynamic)")
    assert dyn is not None and dyn.status == DYNAMIC and "static=False" in dyn.detail and dyn.ms is not None
    assert dyn.max_error is not None and dyn.max_error <= 1e-5
    table = example_table([rep, rejected]).splitlines()
    assert table[0].startswith("| example | batch | system | status | launches/batch | ms/batch | vs loop |")
    assert len(table) == 2 + 4


def test_examples_command_plumbing(capsys, tmp_path):
    out_json = tmp_path / "ex.json"
    rc = main(["examples", "dag_rnn", "pointer_net", "--batch-size", "2", "--backends", "eager", "--repeats", "1",
               "--json", str(out_json)])
    assert rc == 0
    text = capsys.readouterr().out
    assert text.startswith("machine  ") and "torch" in text.splitlines()[0]
    rows = [line for line in text.splitlines() if line.startswith("| dag_rnn") or line.startswith("| pointer_net")]
    assert len(rows) == 4
    assert all(line.split("|")[4].strip() in {"ran", "ran dynamic", "rejected", "wrong", "error"} for line in rows)
    data = json.loads(out_json.read_text())
    assert data["machine"]["cpu"] and [e["name"] for e in data["examples"]] == ["dag_rnn", "pointer_net"]
    assert main(["examples", "nope"]) == 2
    assert "unknown example" in capsys.readouterr().err


def test_max_error():
    t = torch.tensor([1.0, 2.0])
    assert max_error((t, [1, 2]), (t + 0.5, [1, 2])) == 0.5
    assert max_error([t], [t, t]) == float("inf")
    assert max_error(t, torch.zeros(3)) == float("inf")


def test_example_main_prints_its_row(capsys):
    examples.load("dag_rnn").main()
    text = capsys.readouterr().out
    assert text.startswith("machine  ")
    assert [line.split("|")[3].strip() for line in text.splitlines() if line.startswith("| dag_rnn")] == [
        LOOP, "acrobat (eager)", "acrobat (compiled)"]


def test_examples_outside_the_clone_says_it_needs_the_clone(monkeypatch, tmp_path, capsys):
    """An installed acrobat without its clone: the command names what is missing and how to get it."""
    import sys

    from acrobat.bench import examples as command

    monkeypatch.setitem(sys.modules, "examples", None)  # `import examples` fails, as outside the clone
    monkeypatch.setattr(command, "__file__", str(tmp_path / "acrobat" / "bench" / "examples.py"))
    assert main(["examples", "tree_gru"]) == 2
    err = capsys.readouterr().err
    assert "`acrobat examples` needs the clone: there is no examples/ folder next to" in err
    assert "pip install -e ." in err

"""The compile pipeline (``acrobat.pipeline``, issue 18 section 3): named passes over frozen results, the check
between passes, and the ``ACROBAT_DEBUG`` dumps. That the generated code is unchanged is ``test_goldens``."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import acrobat
from acrobat import pipeline
from acrobat.analysis.lowered import LoweredFunction
from acrobat.errors import InternalError
from acrobat.frontend import ir
from acrobat.models import MODELS

PASS_NAMES = ["parse", "kinds", "lists", "effects", "blocks", "concurrency", "phases", "kernels", "skeleton",
              "prologue"]


@acrobat.function
def cell(x, p):
    return torch.tanh(p.W @ x + p.b)


def rnn(xs, p):
    h = p.h0
    for x in xs:
        h = cell(h + x, p)
    return torch.relu(h)


def fresh(options: acrobat.Options = acrobat.Options()) -> acrobat.Program:
    """A new program of ``rnn`` (compiles are cached per program: a fresh one compiles again)."""
    return acrobat.program(rnn, options=options)


def params() -> object:
    return type("P", (), {"W": torch.randn(4, 4), "b": torch.randn(4), "h0": torch.zeros(4)})()


def replaced(name: str, corrupt) -> tuple[pipeline.Pass, ...]:
    """``PASSES`` with pass ``name``'s result passed through ``corrupt(result, state)``."""
    def run(p: pipeline.Pass):
        return lambda s: corrupt(p.run(s), s)
    return tuple(dataclasses.replace(p, run=run(p)) if p.name == name else p for p in pipeline.PASSES)


def test_the_passes_in_order():
    assert [p.name for p in pipeline.PASSES] == PASS_NAMES


def test_compile_runs_the_pipeline():
    prog = fresh()
    state = pipeline.run(pipeline.Request(prog, 1, prog.options))
    assert list(state.results) == PASS_NAMES
    c = prog.compile(1)
    assert c.skeleton_source == state.skeleton.source and c.prologue_source == state.prologue.source
    assert c.n_phases == 2 and sorted(c.blocks) == sorted(state.kernels.blocks)


def test_earlier_results_are_left_as_they_were():
    prog = fresh()
    s = pipeline.run(pipeline.Request(prog, 1, prog.options))
    entry = s.table.entry
    # phases marked the entry's copy, not the body ``blocks`` made
    assert not any(isinstance(t, ir.PhaseMark) for t in s.lowering.bodies[entry])
    assert any(isinstance(t, ir.PhaseMark) for f in s.lowered for t in f.body)
    # lowering added its temporaries to its copy of each specialization, not to the kind table
    assert "_t0" in s.lowering.specs[entry].var and "_t0" not in s.table.specs[entry].var
    # skeleton and prologue extended copies of the slots and globals
    assert len(s.lowering.slots.defs) <= len(s.skeleton.slots.defs) <= len(s.prologue.slots.defs)
    assert set(s.kernels.globals.values) <= set(s.skeleton.globals.values) <= set(s.prologue.globals.values)
    assert s.prologue.globals is not s.kernels.globals
    with pytest.raises(TypeError):
        s.results["parse"] = {}  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lowering.slots = s.lowering.slots  # type: ignore[misc]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_no_pass_changes_an_earlier_result(monkeypatch, model):
    """Each result reads the same (its ``ACROBAT_DEBUG`` dump) right after its pass and after the last pass."""
    seen: dict[str, str] = {}

    def recording(p: pipeline.Pass) -> pipeline.Pass:
        def check(s: pipeline.State) -> list[str]:
            seen[p.name] = p.show(s)
            return p.check(s)
        return dataclasses.replace(p, check=check)

    monkeypatch.setattr(pipeline, "PASSES", tuple(recording(p) for p in pipeline.PASSES))
    prog = MODELS[model].program
    final = pipeline.run(pipeline.Request(prog, 1, prog.options))
    assert {p.name: p.show(final) for p in pipeline.PASSES} == seen


def test_debug_prints_every_pass_with_its_ir(monkeypatch, capfd):
    monkeypatch.setenv("ACROBAT_DEBUG", "1")
    out = fresh().run([[torch.randn(4)], [torch.randn(4), torch.randn(4)]], params(), backend="eager")
    assert len(out) == 2
    err = capfd.readouterr().err
    for i, name in enumerate(PASS_NAMES, 1):
        assert re.search(rf"==== acrobat pass {i}/10 `{name}` of program `rnn`: \d+\.\d\d ms", err), name
    assert "def rnn(xs, p):" in err and "h = cell((h + x), p)" in err  # parsed IR
    assert "h: tensor" in err  # kinds
    assert "[block 2 `cell_0:" in err and "| _t0 = torch.tanh(((_s0 @ x) + _s2))" in err  # lowered, blocks marked
    assert "# ---- program phase boundary" in err  # phases
    assert "def block_2(x, _s0, _s2):" in err and "_rt.dfg.node(" in err and "def _prologue(_A):" in err


def test_debug_limited_to_named_passes(monkeypatch, capfd):
    monkeypatch.setenv("ACROBAT_DEBUG", "kinds, blocks")
    fresh().compile(1)
    err = capfd.readouterr().err
    assert re.findall(r"==== acrobat pass \d+/10 `(\w+)`", err) == ["kinds", "blocks"]


def test_debug_off_and_unknown_names(monkeypatch, capfd):
    monkeypatch.setenv("ACROBAT_DEBUG", "0")
    fresh().compile(1)
    assert capfd.readouterr().err == ""
    monkeypatch.setenv("ACROBAT_DEBUG", "kind,phases")
    fresh().compile(1)
    err = capfd.readouterr().err
    assert "ACROBAT_DEBUG names no pass kind (passes: parse, kinds," in err
    assert re.findall(r"==== acrobat pass \d+/10 `(\w+)`", err) == ["phases"]


def _drop_a_body(low: pipeline.Lowering, s: pipeline.State) -> pipeline.Lowering:
    bodies = {k: b for k, b in low.bodies.items() if k == s.table.entry}
    return dataclasses.replace(low, bodies=bodies)


def _mark_a_callee(lowered: tuple[LoweredFunction, ...], s: pipeline.State) -> tuple[LoweredFunction, ...]:
    callee = next(f for f in lowered if f.spec.key != s.table.entry)
    return tuple(LoweredFunction(f.spec, [ir.PhaseMark(f.body[0].loc), *f.body], f.parallel_loops)
                 if f is callee else f for f in lowered)


def _repeat_an_id(functions, s: pipeline.State):
    fn = next(iter(functions.values()))
    twin = ir.Pass(fn.body[0].loc)
    twin.nid = fn.body[0].nid
    return {**functions, "twin": ir.Function("twin", [], [twin, fn.body[0]], fn.loc, {})}


@pytest.mark.parametrize("name, corrupt, says", [
    ("parse", _repeat_an_id, "node id"),
    ("blocks", _drop_a_body, "specialization `cell_0` was not lowered"),
    ("phases", _mark_a_callee, "`cell_0` is not the entry but holds a PhaseMark"),
])
def test_the_check_between_passes_names_the_pass(monkeypatch, name, corrupt, says):
    monkeypatch.setattr(pipeline, "PASSES", replaced(name, corrupt))
    with pytest.raises(InternalError, match=rf"pass `{name}` broke an invariant of the IR of program `rnn`") as e:
        fresh(acrobat.Options(strict=True)).compile(1)
    assert says in str(e.value)


def test_a_broken_invariant_runs_in_the_dynamic_tier_without_strict(monkeypatch):
    monkeypatch.setattr(pipeline, "PASSES", replaced("blocks", _drop_a_body))
    prog = fresh()
    with pytest.warns(acrobat.DynamicFallbackWarning, match="pass `blocks` broke an invariant"):
        assert "why: acrobat's compiler pass `blocks` broke an invariant" in prog.explain(params())
    xs = [torch.randn(4), torch.randn(4)]
    p = params()
    stats = acrobat.RunStats()
    assert torch.allclose(prog.run([xs], p, backend="eager", stats=stats)[0], rnn(xs, p))
    assert "pass `blocks` broke an invariant" in (stats.fallback or "")  # said in every run's report


def test_a_pass_reading_a_result_not_made_yet():
    state = pipeline.State(pipeline.Request(fresh(), 1, acrobat.Options()), {})
    with pytest.raises(InternalError, match="reads the result of pass `kinds` before it ran"):
        pipeline.lists(state)

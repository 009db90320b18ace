"""Errors a user meets with a correct model and wrong inputs: every one names the program, what
is wrong and the model source line (``file:line``), whichever generated code raised it
(prologue, skeleton, blocks); and ``nn.Module`` methods as acrobat functions and programs."""

from __future__ import annotations

import os
import types

import pytest
import torch

import acrobat
from tests import user_error_progs as u

FILE = os.path.abspath(u.__file__)


def at(key: str) -> str:
    """``file:line`` of the line marked ``# U:<key>``."""
    with open(FILE, encoding="utf-8") as f:
        hits = [i + 1 for i, line in enumerate(f.read().splitlines()) if line.rstrip().endswith(f"# U:{key}")]
    assert len(hits) == 1
    return f"{FILE}:{hits[0]}"


@pytest.fixture(scope="module")
def p():
    return u.Params()


# ---------------------------------------------------------------- parameters of the wrong type (prologue)


def test_params_missing_an_attribute(p):
    with pytest.raises(acrobat.ParamError) as info:
        u.classify.run([1, 2], u.NoOut(p))
    msg = str(info.value)
    assert "program `classify`" in msg and "parameter `p`" in msg and "shared argument 1" in msg
    assert "no attribute `W_out`" in msg and "NoOut" in msg
    assert f"{at('classify_out')}: return h @ p.W_out" in msg
    assert info.value.param == "p" and info.value.attr == "W_out"
    assert isinstance(info.value, acrobat.AcrobatError)
    assert isinstance(info.value.__cause__, AttributeError)


@pytest.mark.parametrize("bad", [{"emb": 1, "W": 2}, None], ids=["dict", "None"])
def test_params_dict_or_none(bad):
    with pytest.raises(acrobat.ParamError) as info:
        u.classify.run([1], bad)
    msg = str(info.value)
    assert "program `classify`" in msg and "parameter `p`" in msg and "no attribute `emb`" in msg
    assert f"{at('classify_h')}:" in msg
    assert ("is a dict" in msg and "SimpleNamespace" in msg) if bad is not None else "is None" in msg


def test_nested_parameter_path(p):
    """``p.enc.W`` with ``p.enc`` present but lacking ``W``: the message names the path ``p.enc``."""
    bad = types.SimpleNamespace(emb=p.emb, enc=types.SimpleNamespace())
    with pytest.raises(acrobat.ParamError) as info:
        u.nested.run([1], bad)
    msg = str(info.value)
    assert "`p.enc` (parameter `p`" in msg and "no attribute `W`" in msg and f"{at('nested')}:" in msg


def test_parameter_item(p):
    bad = types.SimpleNamespace(emb=p.emb, layers=[])
    with pytest.raises(acrobat.ParamError) as info:
        u.indexed.run([1], bad)
    msg = str(info.value)
    assert "`p.layers`" in msg and "no item [0]" in msg and f"{at('indexed')}:" in msg
    assert isinstance(info.value.__cause__, IndexError)


def test_right_params_still_run(p):
    outs = u.classify.run([1, 2], p)
    for o, t in zip(outs, [1, 2]):
        torch.testing.assert_close(o, u.classify(t, p))


def test_shared_value_failure_points_at_its_line(p):
    """An operator over weights only (computed once by the prologue) fails: ShapeError with its line."""
    with pytest.raises(acrobat.ShapeError) as info:
        u.shared_mismatch.run([1], p)
    msg = str(info.value)
    assert "program `shared_mismatch`" in msg and "shapes cannot be multiplied" in msg
    assert f"{at('shared_mismatch')}: WO = p.W_out @ p.W" in msg
    assert info.value.instance is None


# ---------------------------------------------------------------- number of parameters


def test_too_many_params(p):
    with pytest.raises(acrobat.BatchError) as info:
        u.classify.run([1], p, p)
    msg = str(info.value)
    assert "takes the instance `tok` and 1 shared parameter(s) (`p`)" in msg
    assert "run() was given 2 shared argument(s)" in msg and "classify.run(instances, p)" in msg


def test_too_few_params(p):
    with pytest.raises(acrobat.BatchError) as info:
        u.two_params.run([1], p)
    msg = str(info.value)
    assert "2 shared parameter(s) (`p`, `q`)" in msg and "run() was given 1 shared argument(s)" in msg


def test_trace_checks_the_count_too(p):
    with pytest.raises(acrobat.BatchError, match=r"trace\(\) was given 0 shared argument"):
        u.classify.trace([1])


# ---------------------------------------------------------------- host code (skeleton) and blocks


@pytest.mark.parametrize("prog,key", [(u.host_failure, "host_failure"), (u.host_failure_fibers, "host_failure_fibers")],
                         ids=["skeleton", "fibers"])
def test_host_code_failure(p, prog, key):
    with pytest.raises(acrobat.InstanceError) as info:
        prog.run([{"tok": 1, "steps": 2}, {"tok": 3}], p)
    msg = str(info.value)
    assert info.value.instance == 1 and "instance 1" in msg and "KeyError" in msg
    assert f"{at(key)}: n = inst[\"steps\"] + 1" in msg


BLOCK_FAILURES = {  # a failing launch of a static block: the diagnosis names the instance and the line
    # a per-instance host value fed to a tensor operator is a str
    "host_operand": (u.bad_host_operand, [{"tok": 1, "scale": 2.0}, {"tok": 1, "scale": "x"}], acrobat.InstanceError,
                     1, ["inst['scale']", "str 'x'", f"{at('bad_host_operand')}:"]),
    "operator": (u.operator_failure, [1, 2], acrobat.ShapeError, 0,
                 ["shapes cannot be multiplied", f"{at('operator_failure')}:", "static block"]),
}


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("case", list(BLOCK_FAILURES))
def test_block_failure(p, case, backend):
    prog, batch, error, inst, parts = BLOCK_FAILURES[case]
    with pytest.raises(error) as info, torch.inference_mode():
        prog.run(batch, p, backend=backend)
    msg = str(info.value)
    assert info.value.instance == inst and f"instance {inst}" in msg
    for part in parts:
        assert part in msg, (part, msg)


# ---------------------------------------------------------------- nn.Module methods


def test_function_method_plain_call():
    """``@acrobat.function`` on a method binds ``self`` like a plain method."""
    t = u.Tagger()
    x = torch.ones(4)
    torch.testing.assert_close(t.cell(x, x), torch.tanh(x @ t.W + x))
    assert u.Tagger.cell is u.Tagger.__dict__["cell"]


def test_program_method_plain_and_batched():
    """``module.prog.run(batch)`` runs with the module as the shared parameter; equals the plain call."""
    t = u.Tagger()
    batch = [[1, 2, 3], [4], [5, 6]]
    ref = [t.encode(toks) for toks in batch]
    for outs in (t.encode.run(batch), u.Tagger.encode.run(batch, t)):
        for o, r in zip(outs, ref):
            torch.testing.assert_close(o, r)
    scaled = t.encode_scaled.run(batch, 0.5)
    for o, toks in zip(scaled, batch):
        torch.testing.assert_close(o, t.encode_scaled(toks, 0.5))


def test_program_method_wrong_count():
    t = u.Tagger()
    with pytest.raises(acrobat.BatchError) as info:
        t.encode.run([[1]], t)
    msg = str(info.value)
    assert "program `encode(self, toks)`" in msg and "was given 2 shared argument(s)" in msg
    assert "self.encode.run(instances)" in msg


def _trees() -> list:
    return [u.Leaf(3), u.Leaf(left=u.Leaf(1), right=u.Leaf(left=u.Leaf(2), right=u.Leaf(5)))]


def test_recursion_inside_a_module_method_runs_statically():
    """``self.encode(tree)``, an @acrobat.function method recursing on the instance: analysed as a program
    function taking the module (issue 18; it was rejected, with the fix of a module-level function, and before
    that failed with "host value `tree` ... is no number"), so it runs in the static tier, equal to the plain
    calls, ``strict`` or not."""
    m = u.TreeModule()
    trees = _trees()
    stats = acrobat.RunStats()
    with torch.no_grad():
        outs = m.forward_batch.run(trees, options=acrobat.Options(strict=True), stats=stats)
        torch.testing.assert_close(outs, [m.forward_batch(t) for t in trees])
    assert stats.dynamic is None
    assert "runs in the static tier" in u.TreeModule.forward_batch.explain(m)


@pytest.mark.parametrize("one", [u.Leaf(3), {"tokens": [1, 2]}, "a sentence"])
def test_one_instance_instead_of_a_list(one):
    """``run(tree)`` instead of ``run([tree])``: a BatchError saying to pass a list, not a bare TypeError."""
    with pytest.raises(acrobat.BatchError) as info:
        u.TreeModule().forward_batch.run(one)
    msg = str(info.value)
    assert f"forward_batch.run() takes a list of instances (the mini-batch), but was given one " \
           f"`{type(one).__name__}`" in msg
    assert "forward_batch.run([x], ...)" in msg

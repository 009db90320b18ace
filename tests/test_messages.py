"""Compile errors tell the truth: each names the line, never contradicts itself, names only methods that
exist and names the model's own variables, not the compiler's; and every fix a message suggests, applied
to the program, compiles (strict) and runs equal to the plain per-instance calls.

The offending lines in ``message_progs.py`` carry ``# M:<key>`` markers.
"""

from __future__ import annotations

import os
import re

import pytest
import torch

import acrobat
from tests import bad_progs, dynamic_progs, message_progs as m, user_error_progs

STRICT = acrobat.Options(strict=True)
FILE = os.path.abspath(m.__file__)
TOKS = [[1, 2, 3], [4], [5, 6]]


def error_of(prog, p=None) -> str:
    """The message of the CompileError a strict run of ``prog`` raises."""
    with pytest.raises(acrobat.CompileError) as info:
        prog.run(TOKS, p if p is not None else m.Params(), options=STRICT, backend="eager")
    return str(info.value)


def at(key: str) -> str:
    """``file:line:`` of the line marked ``# M:<key>``."""
    with open(FILE, encoding="utf-8") as f:
        hits = [i + 1 for i, line in enumerate(f.read().splitlines()) if line.rstrip().endswith(f"# M:{key}")]
    assert len(hits) == 1
    return f"{FILE}:{hits[0]}:"


# (program, marker, what the message says, the program with its fix applied)
FIXED = [
    (m.ragged_transpose, "ragged_T", "cannot be transposed with `.T`", m.ragged_transpose_fixed),
    (m.ragged_shape, "ragged_shape", "cannot be read with `.shape`", m.ragged_shape_fixed),
    (m.sqrt_of_tensor, "sqrt", "`math.sqrt` is library code", m.sqrt_of_tensor_fixed),
    (m.sqrt_of_value, "sqrt_value", "or read the value first (`x.item()`", m.sqrt_of_value_fixed),
    (m.class_result, "class", "`Pair` is a class, whose constructor", m.class_result_fixed),
    (m.fill, "fill", "build a new tensor: `torch.full_like(x, value)`", m.fill_fixed),
    (m.requires_grad, "requires_grad", "drop it", m.requires_grad_fixed),
    (m.data_attr, "data", "write `x.detach().clone()`", m.data_attr_fixed),
    (m.lambda_call, "lambda", "define a module-level @acrobat.function and call it", m.lambda_call_fixed),
    (m.nested_arity, "nested_arity", "`mix` takes 2 arguments, 1 given", m.nested_arity_fixed),
    (m.shared_item_write, "shared_item", "build a new tensor instead (e.g. `torch.where(mask, v, x)`",
     m.shared_item_write_fixed),
    (m.slice_write, "slice_write", "writes into it in place: build a new tensor instead",
     m.slice_write_fixed),
    (m.index_param_by_tensor, "param_by_tensor", "index it with host numbers (`W[t]` for each `t`",
     m.index_param_by_tensor_fixed),
]


@pytest.mark.parametrize("prog, key, phrase, fixed", FIXED, ids=[c[1] for c in FIXED])
def test_the_suggested_fix_compiles_and_runs_as_plain_python(prog, key, phrase, fixed):
    msg = error_of(prog)
    assert msg.startswith(at(key)) and phrase in msg, msg
    p = m.Params()
    with torch.no_grad():
        torch.testing.assert_close(fixed.run(TOKS, p, options=STRICT, backend="eager"), [fixed(t, p) for t in TOKS])


def test_a_library_function_is_never_to_be_decorated():
    """``math.sqrt`` cannot be decorated: the message says to use its torch operator instead."""
    for prog in (m.sqrt_of_tensor, m.sqrt_of_value):
        msg = error_of(prog)
        assert "decorate" not in msg and "the torch operator `torch.sqrt`" in msg, msg


def test_a_ragged_attribute_is_not_told_to_use_itself():
    msg = error_of(m.ragged_transpose)
    assert "stacked list" in msg and "transpose with `.T`" not in msg and "loop over the list" in msg, msg


def test_messages_name_the_models_variables_and_parameters():
    """A comprehension's variable by its written name, a shared value by the path the model writes."""
    msg = error_of(m.comprehension_list_changed)
    assert msg.startswith(at("comp_changed")) and "the list `lst` is changed in place" in msg, msg
    msg = error_of(m.shared_conflict)
    assert "(shared `p.W` vs host)" in msg, msg


def test_a_runtime_shape_mismatch_names_the_model_expression():
    """Instances whose tensors disagree in one block: the message names the model's expression and line,
    not the block's parameter."""
    @acrobat.program
    def scale(x, p):
        return torch.tanh(x) * 2.0 + p.b

    with pytest.raises(acrobat.AcrobatError) as info, torch.no_grad():
        scale.run([torch.randn(3, 4), torch.randn(2, 4)], m.Params(), options=STRICT, backend="eager")
    msg = str(info.value)
    assert "give `x` different shapes (3, 4) vs (2, 4)" in msg and "return torch.tanh(x) * 2.0 + p.b" in msg, msg


def _corpus_messages() -> list[str]:
    """The CompileError messages of every program of the bad-program corpora, compiled strict."""
    out = []
    for module in (bad_progs, user_error_progs, dynamic_progs, m):
        p = module.Params() if hasattr(module, "Params") else m.Params()
        for prog in vars(module).values():
            if isinstance(prog, acrobat.Program):
                try:
                    with torch.no_grad():
                        prog.run(TOKS, p, options=STRICT, backend="eager")
                except acrobat.CompileError as e:
                    out.append(str(e))
                except Exception:  # noqa: BLE001 - run-time errors of these inputs are not the subject here
                    pass
    return out


def test_no_message_shows_a_compiler_name_or_a_method_torch_lacks():
    messages = _corpus_messages()
    assert len(messages) > 30
    for msg in messages:
        text = msg.split(": ", 1)[1]  # after file:line:col
        assert not re.search(r"\b_[a-z]+\d*\b", text) and not re.search(r"@\d+", text), msg
        assert "<expr" not in text and not re.search(r"\barg\d", text), msg
        for name in re.findall(r"`\.(\w+)\(", text):
            assert any(callable(getattr(t, name, None)) for t in (torch.Tensor, list, dict)), (name, msg)

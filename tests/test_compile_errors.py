"""Unsupported Python in a model is rejected with a CompileError naming file:line and a fix.

The offending lines in ``bad_progs.py`` carry ``# E:<key>`` markers; the
expected line is found by searching for the marker, never hard-coded.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from tests import bad_progs

import acrobat

STRICT = acrobat.Options(strict=True)  # the static tier's rejection, not the dynamic tier's run

BAD_FILE = os.path.abspath(bad_progs.__file__)


def marker_line(key: str, path: str = BAD_FILE) -> int:
    """1-based line of the unique ``# E:<key>`` marker in ``path`` (bad_progs.py by default)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# E:{key}")]
    assert len(hits) == 1, f"marker E:{key} found {len(hits)} times"
    return hits[0]


class Params(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Parameter(torch.randn(10, 4))
        self.W = nn.Parameter(torch.randn(4, 4))
        self.b = nn.Parameter(torch.randn(4))


# (program, marker key, key phrase of the message/advice)
CASES = [
    (bad_progs.bad_listcomp, "listcomp", "comprehensions are accepted where they always run"),
    (bad_progs.bad_lambda, "lambda", "instead of a lambda"),
    (bad_progs.bad_try, "try", "exceptions cannot be batched"),
    (bad_progs.bad_with, "with", "move other `with` blocks out of the model function"),
    (bad_progs.bad_while_else, "while_else", "`while ... else` is not supported"),
    (bad_progs.bad_import, "import", "import at module level"),
    (bad_progs.bad_global, "global", "pass the value in as an argument"),
    (bad_progs.bad_global_tensor, "global_tensor", "pass tensors and modules in as model parameters"),
    (bad_progs.bad_inplace, "inplace", "write the out-of-place `.add()`"),
    (bad_progs.bad_attr_assign, "attr_assign", "cannot assign to `tok.x`"),
    (bad_progs.bad_varargs, "varargs", "takes `*args`: name the instance and each shared parameter"),
    (bad_progs.bad_default, "default", "with literal defaults"),
    (bad_progs.bad_phase_in_helper, "phase_helper", "move it to the entry's top level"),
    (bad_progs.bad_concurrent, "concurrent", "takes calls of @acrobat.function functions"),
    (bad_progs.bad_nargs, "nargs", "`good_helper` takes 2 arguments, 1 given"),
    (bad_progs.bad_host_tensor_paths, "host_tensor_paths", "holds host data in one place and a tensor in another"),
    (bad_progs.bad_recursive_entry, "recursive_entry", "put the part to call in an @acrobat.function"),
]


@pytest.mark.parametrize("prog, key, phrase", CASES, ids=[c[1] for c in CASES])
def test_compile_error_names_file_line_and_advice(prog, key, phrase):
    with pytest.raises(acrobat.CompileError) as info:
        prog.compile(1, STRICT)
    msg = str(info.value)
    assert msg.startswith(f"{BAD_FILE}:{marker_line(key)}:"), msg
    assert phrase in msg, msg
    # the structured fields agree with the message
    assert info.value.filename == BAD_FILE
    assert info.value.line == marker_line(key)


@pytest.mark.parametrize("prog, key, phrase", CASES[:3] + CASES[8:12], ids=[c[1] for c in CASES[:3] + CASES[8:12]])
def test_run_raises_the_same_compile_error(prog, key, phrase):
    """``run`` compiles first: the same error, before any instance is touched."""
    with pytest.raises(acrobat.CompileError) as info:
        prog.run([1, 2], Params(), options=STRICT)
    assert str(info.value).startswith(f"{BAD_FILE}:{marker_line(key)}:")
    assert phrase in str(info.value)


def test_compile_error_is_not_cached_as_success():
    """A failed compile raises again on the next attempt (nothing half-built is cached)."""
    for _ in range(2):
        with pytest.raises(acrobat.CompileError):
            bad_progs.bad_lambda.compile(1, STRICT)


def test_entry_with_wrong_number_of_shared_arguments():
    """The entry takes the instance plus 2 parameters; compiling for 1 shared argument is an error."""
    with pytest.raises(acrobat.CompileError) as info:
        bad_progs.bad_three_params.compile(1, STRICT)
    msg = str(info.value)
    assert msg.startswith(f"{BAD_FILE}:{marker_line('entry_arity')}:"), msg
    assert "takes the instance and 2 shared parameter(s), but 1 shared argument(s) were given" in msg
    # with the right count it compiles
    bad_progs.bad_three_params.compile(2)


def test_compile_error_is_an_acrobat_error():
    assert issubclass(acrobat.CompileError, acrobat.AcrobatError)
    with pytest.raises(acrobat.AcrobatError):
        bad_progs.bad_try.compile(1, STRICT)


def test_inplace_op_on_shared_weight_is_rejected():
    with pytest.raises(acrobat.CompileError) as info:
        bad_progs.bad_inplace_shared.compile(1, STRICT)
    assert str(info.value).startswith(f"{BAD_FILE}:{marker_line('inplace_shared')}:")
    assert "in-place" in str(info.value)


def test_out_keyword_is_rejected():
    with pytest.raises(acrobat.CompileError) as info:
        bad_progs.bad_out_kwarg.compile(1, STRICT)
    assert str(info.value).startswith(f"{BAD_FILE}:{marker_line('out_kwarg')}:")


def test_the_recursive_entry_fix_runs_batched():
    """The fix the recursive entry's error gives: the recursion in an @acrobat.function the entry calls."""
    insts = [[1, 2, 3], [4], [5, 6]]
    p = Params()
    with torch.no_grad():
        torch.testing.assert_close(bad_progs.fixed_recursive_entry.run(insts, p, backend="eager"),
                                   [bad_progs.bad_recursive_entry(x, p) for x in insts])

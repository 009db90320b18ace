"""The Python a researcher writes (issue 10, section 2): batched == plain per-instance Python.

Programs live in ``tests/user_progs.py``. Every supported construct is run batched (eager
backend; a few also with the compiled backend) and compared with running the model function
as plain Python on each instance; every rejected one names file:line and a fix, and the
fixed program compiles and matches.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import random
import shutil
import sys
import tempfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acrobat
from acrobat.frontend import ir
from tests import user_progs as up
from tests.test_compile_errors import marker_line
from tests.progs import Small

STRICT = acrobat.Options(strict=True)  # the static tier's rejection, not the dynamic tier's run

TOL = {"rtol": 1e-5, "atol": 1e-6}
USER_FILE = os.path.abspath(up.__file__)


def token_batches(seed: int, min_len: int = 1, n: int = 7) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randint(0, 9) for _ in range(rng.randint(min_len, 7))] for _ in range(n)]


def check(prog, batch, p=None, backend: str = "eager", options: acrobat.Options | None = None) -> None:
    p = p if p is not None else Small()
    with torch.no_grad():
        expected = [prog(x, p) for x in batch]
    if backend == "eager":
        with torch.no_grad():
            got = prog.run(batch, p, options=options)
    else:
        with torch.inference_mode():
            got = prog.run(batch, p, backend=backend)
    torch.testing.assert_close(got, expected, **TOL)


SUPPORTED = [
    # 1. break / continue / while True / early return
    "break_continue", "while_true", "while_continue_tensor_test", "map_loop_with_break", "early_return",
    "nested_break",
    # 2. keywords, defaults
    "keywords",
    # 4. conditional expressions
    "cond_expr",
    # 5. Optional
    "optional_state", "optional_arg", "optional_checked",
    # 6. grad-mode blocks
    "grad_blocks",
    # 7-9. list items, starred, dicts
    "list_items", "starred", "dicts", "dict_variable_key_fixed",
    # 10-12. host code, comprehensions, fixes of rejected programs
    "host_code", "comprehensions", "comprehension_arguments", "conditional_comprehension_fixed", "nested_def", "nested_def_fixed", "shape_in_block",
    "transpose_and_dict_unpack", "printing", "stack_list", "stack_list_fixed", "tensor_item_assign_fixed",
]


@pytest.mark.parametrize("name", SUPPORTED)
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_equals_plain(name, seed):
    min_len = 0 if name in ("optional_arg", "optional_checked", "dict_variable_key_fixed") else 1
    check(getattr(up, name), token_batches(seed, min_len))


def test_optional_result_is_none_for_empty_instances():
    batch = [[], [1, 2], []]
    with torch.no_grad():
        out = up.optional_arg.run(batch, Small())
    assert out[0] is None and out[2] is None and out[1] is not None
    check(up.optional_arg, batch)


@pytest.mark.parametrize("n", [1, 3])
def test_shapes_of_per_instance_tensors(n):
    rng = torch.Generator().manual_seed(n)
    batch = [torch.randn(n, 4, generator=rng) for _ in range(5)]
    check(up.shapes, batch)
    assert up.shapes.compile(1).plan.needs_fibers  # host code reads `h.shape[0]`: a value read (§4.2)


def test_shapes_inside_tensor_expressions_need_no_value_read():
    assert not up.shape_in_block.compile(1).plan.needs_fibers
    assert "_rt.value" not in up.shape_in_block.source()


def test_break_and_continue_are_plain_python_in_the_skeleton():
    src = up.break_continue.source()
    assert "continue" in src and "break" in src
    assert up.break_continue.compile(1).plan.needs_fibers  # `if h.sum() > 1.0: break` reads a tensor


def test_loop_with_break_is_not_a_map_loop():
    c = up.map_loop_with_break.compile(1)
    assert all(not f.parallel_loops for f in c.lowered)
    assert "map loop" not in up.map_loop_with_break.source()


def test_keywords_normalized_to_positional():
    fn = next(f for f in up.keywords.compile(1).lowered if f.spec.fn.name == "keywords").spec.fn
    calls = [e for s in ir.walk_stmts(fn.body) for r in ir.stmt_exprs(s) for e in ir.walk(r)
             if isinstance(e, ir.Call) and e.kind is ir.CallKind.PROGRAM]
    assert calls and all(len(c.args) == 4 and not c.kwargs for c in calls)


def test_print_runs_per_instance(capsys):
    check(up.printing, [[1, 2], [3]])
    out = capsys.readouterr().out.splitlines()
    assert out.count("tokens: 2 [2, 4]") == 2 and out.count("tokens: 1 [6]") == 2  # plain, then batched


def test_dtype_constant_in_generated_code():
    assert "_const_" in up.keywords.source()  # torch.float32 is a global of the generated code
    check(up.keywords, token_batches(3))


@pytest.mark.parametrize("name", ["break_continue", "cond_expr", "optional_state", "comprehensions", "dicts",
                                  "shape_in_block", "keywords", "transpose_and_dict_unpack"])
def test_compiled_backend(name):
    check(getattr(up, name), token_batches(5), backend="compiled")


def test_kind_lattice_none_optional_dict():
    from acrobat.analysis.kinds import (DYNAMIC, HOST, NONE, DictK, KindConflict, OptionalK, SharedK, TensorK,
                                        has_tensor, join)
    w = SharedK(("arg", 1, (".", "h0")))
    assert join(NONE, HOST) == HOST and join(HOST, NONE) == HOST
    assert join(NONE, w) == OptionalK(w) and join(OptionalK(w), NONE) == OptionalK(w)
    assert join(OptionalK(w), TensorK(2)) == OptionalK(TensorK(2))
    assert join(OptionalK(TensorK(1)), DYNAMIC) == OptionalK(DYNAMIC)
    assert has_tensor(OptionalK(DYNAMIC)) and has_tensor(DictK(("h",), (DYNAMIC,)))
    assert join(DictK(("h",), (w,)), DictK(("h",), (DYNAMIC,))) == DictK(("h",), (DYNAMIC,))
    with pytest.raises(KindConflict):
        join(DictK(("h",), (w,)), DictK(("c",), (w,)))


# ---------------------------------------------------------------- rejections and their fixes

REJECTED = [
    # (program, marker, phrase of the hint, the fixed program)
    (up.builtin_given_tensor, "builtin_tensor", "use torch operators on tensors", up.stack_list_fixed),
    (up.conditional_comprehension, "comp_conditional", "comprehensions are accepted where they always run",
     up.conditional_comprehension_fixed),
    (up.nested_def_rebinds, "nested_def", "which `nested_def_rebinds` rebinds: define the helper at module level "
     "with @acrobat.function", up.nested_def_fixed),
    (up.other_with, "other_with", "only `with torch.no_grad()`", up.other_with_fixed),
    (up.optional_unchecked, "optional_unchecked", "test it first", up.optional_checked),
    (up.dict_variable_key, "dict_key", "constant keys", up.dict_variable_key_fixed),
    (up.nested_def_mutates, "nested_mutates", "changes the captured `hs`", up.nested_def_mutates_fixed),
    (up.nested_def_as_value, "nested_value", "only calls of it are supported", up.nested_def_fixed),
    (up.dict_method, "dict_method", "read them with `d[\"key\"]`", up.dict_variable_key_fixed),
    (up.tensor_item_assign, "tensor_setitem", "build a new tensor", up.tensor_item_assign_fixed),
]


@pytest.mark.parametrize("prog, key, phrase, fixed", REJECTED, ids=[r[1] for r in REJECTED])
def test_rejected_with_location_and_fix(prog, key, phrase, fixed):
    with pytest.raises(acrobat.CompileError) as info:
        prog.compile(1, STRICT)
    msg = str(info.value)
    assert f"{USER_FILE}:{marker_line(key, USER_FILE)}:" in msg, msg
    assert phrase in msg, msg
    fixed.compile(1)
    check(fixed, [[1, 2], [3], [4, 5, 6]])


# ---------------------------------------------------------------- random programs

_STMTS = [
    "h = torch.tanh(h @ p.U + p.emb[tok])",
    "h = step(h, p.emb[tok], p)",
    "h = h * 0.5 if tok % 2 == 0 else h + p.b",
    "if tok % {k} == 0:\n    continue",
    "if tok == {k}:\n    break",
    "if h.sum() > {c}:\n    break",
    "if h.sum() < -{c}:\n    return [h * 2.0]",
    "if i > {k}:\n    return [h, h + 1.0]",
    "hs.append(h)",
    "hs.insert(0, torch.relu(h))",
    "j = 0\nwhile True:\n    j = j + 1\n    if j > tok % 3:\n        break\n    h = torch.tanh(h @ p.W)",
    "with torch.no_grad():\n    h = h - 0.1",
    "if g is None:\n    g = h\nelse:\n    g = torch.tanh(g + h)",
    "hs[0] = h * 0.5",
    "first, *rest = hs\nh = h + first",
    "if tok > {k} and h.sum() > {c}:\n    continue",
    "h = torch.tanh((h if tok > {k} else p.b) @ p.U)",
    "assert not h.sum() > 1000.0, 'diverged'",
    "if g is not None and g.sum() > {c}:\n    g = None",
]


def _program_source(name: str, stmts: list[tuple[int, int, float]]) -> str:
    body = []
    for which, k, c in stmts:
        text = _STMTS[which].format(k=k, c=c)
        body.extend("        " + line for line in text.splitlines())
    lines = [
        "import torch", "import acrobat as ab", "from tests.user_progs import step", "",
        "@ab.program", f"def {name}(tokens, p):", "    h = p.h0", "    hs = [p.b]", "    g = None",
        "    for i, tok in enumerate(tokens):", *body, "        pass",
        "    out = [h + x for x in hs]",
        "    return out + ([] if g is None else [g])",
    ]
    return "\n".join(lines) + "\n"


_DIR = tempfile.mkdtemp(prefix="acrobat_user_progs_")
atexit.register(shutil.rmtree, _DIR, True)
_OPTIONS = [acrobat.Options(), acrobat.Options(coarsening=False), acrobat.Options(hoisting=False, ghosts=False),
            acrobat.Options(fibers=False, concurrency=False, phases=False)]
_count = [0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_STMTS) - 1), st.integers(1, 5), st.floats(0.2, 2.0)),
                min_size=1, max_size=6),
       st.lists(st.lists(st.integers(0, 9), min_size=0, max_size=6), min_size=1, max_size=6),
       st.sampled_from(_OPTIONS))
def test_random_programs_batched_equal_plain(stmts, batch, options):
    _count[0] += 1
    name = f"rand_prog_{_count[0]}"
    path = os.path.join(_DIR, f"{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(_program_source(name, stmts))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    check(getattr(mod, name), batch, options=options)

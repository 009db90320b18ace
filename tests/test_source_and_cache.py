"""acrobat compiles the code Python runs, and an unusable kernel-cache folder falls back with one warning.

Source drift: a model file edited after import must not change what ``run`` compiles (the source is taken
when the decorator runs); a function decorated after its file changed is refused with a ``CompileError``
saying to reload the module. Functions defined interactively (``exec`` of text registered in ``linecache``,
as IPython does with its cells) compile from the text they were defined from.

Kernel cache: ``ACROBAT_CACHE_DIR`` naming a file, or a folder that cannot be created, makes the compiled
backend compile into a temporary folder after one warning naming the folder and ``ACROBAT_CACHE_DIR``
(each case one subprocess: the folder is chosen when ``acrobat`` is imported).
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import linecache
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import acrobat as ab

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''\
import torch
import acrobat as ab


@ab.function
def cell(x, p):
    return torch.tanh(x @ p.W)


@ab.program
def model(xs, p):
    h = cell(xs[0], p)
    for x in xs[1:]:
        h = cell(x + h, p)
    return h


def plain(xs, p):
    return torch.tanh(xs[-1] @ p.W)
'''

#: What an editor saves over MODEL while the module stays imported: other operators in the callee, the
#: entry and the undecorated function.
EDITED = (MODEL.replace("torch.tanh(x @ p.W)", "torch.sigmoid(x @ p.W) * 3.0")
          .replace("return h\n", "return h - 1.0\n")
          .replace("torch.tanh(xs[-1] @ p.W)", "torch.sigmoid(xs[-1] @ p.W) + 2.0"))


def _batch(n: int = 6, dim: int = 4) -> tuple[list[list[torch.Tensor]], SimpleNamespace]:
    g = torch.Generator().manual_seed(0)
    xs = [[torch.randn(dim, generator=g) for _ in range(1 + i % 3)] for i in range(n)]
    return xs, SimpleNamespace(W=torch.randn(dim, dim, generator=g))


def _assert_batched_equals_plain(prog, xs: list, p: SimpleNamespace) -> None:
    out = prog.run(xs, p, backend="eager")
    for got, x in zip(out, xs, strict=True):
        torch.testing.assert_close(got, prog(x, p))


@pytest.fixture
def model_module(tmp_path, monkeypatch):
    """MODEL imported from a fresh file under ``tmp_path``; returns (module, its path)."""
    name = f"acrobat_drift_{tmp_path.name.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module(name)
    yield mod, path
    sys.modules.pop(name, None)


def _edit(path: Path, text: str) -> None:
    """Save ``text`` over ``path`` as an editor would (a later modification time, so caches see the change)."""
    path.write_text(text)
    later = time.time() + 5
    os.utime(path, (later, later))


def test_file_edited_after_import_runs_the_imported_code(model_module):
    mod, path = model_module
    xs, p = _batch()
    _edit(path, EDITED)
    _assert_batched_equals_plain(mod.model, xs, p)
    torch.testing.assert_close(mod.model(xs[0], p), torch.tanh(xs[0][0] @ p.W))  # still the imported code


def test_decorated_after_the_file_changed_is_refused_until_reloaded(model_module):
    mod, path = model_module
    xs, p = _batch()
    _edit(path, EDITED)
    late = ab.program(mod.plain)  # decorated now: the file no longer holds the code Python runs
    with pytest.raises(ab.CompileError, match=r"(?s)changed after.*importlib\.reload"):
        late.run(xs, p, backend="eager")
    reloaded = importlib.reload(mod)
    fixed = ab.program(reloaded.plain)
    _assert_batched_equals_plain(fixed, xs, p)
    torch.testing.assert_close(fixed(xs[0], p), torch.sigmoid(xs[0][-1] @ p.W) + 2.0)  # the edited code


def _cell(name: str, text: str) -> dict:
    """Run ``text`` as an interactive cell named ``name``: registered in ``linecache`` as IPython does."""
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace: dict = {}
    exec(compile(text, name, "exec"), namespace)
    return namespace


def test_interactive_cell_compiles_from_its_own_text():
    name = "<acrobat-test-cell-1>"
    try:
        ns = _cell(name, MODEL)
        xs, p = _batch()
        _assert_batched_equals_plain(ns["model"], xs, p)
    finally:
        linecache.cache.pop(name, None)


def test_interactive_cell_text_replaced_after_definition():
    """A tool that registers new text under the cell's name (or clears linecache) changes nothing."""
    name = "<acrobat-test-cell-2>"
    try:
        ns = _cell(name, MODEL)
        linecache.cache[name] = (len(EDITED), None, EDITED.splitlines(True), name)
        xs, p = _batch()
        _assert_batched_equals_plain(ns["model"], xs, p)
    finally:
        linecache.cache.pop(name, None)


# ------------------------------------------------------------------ the check against the code Python runs


CONTEXTS = '''\
from __future__ import annotations

import torch
import acrobat as ab


def make(k):
    @ab.function
    def scaled(x, p):
        """Multi-line docstring whose lines
        keep their indentation."""
        def inner(y: torch.Tensor) -> torch.Tensor:
            return y * k
        return inner(x @ p.W)
    return scaled


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.__w = torch.nn.Parameter(torch.ones(4, 4))

    @ab.function
    def cell(self, x):
        """Name-mangled attribute and zero-argument super()."""
        s = super().__repr__
        return torch.tanh(x @ self.__w) + float(len([c for c in "ab"]))
'''


def test_snapshot_matches_code_in_closures_classes_and_futures(tmp_path, monkeypatch):
    """Closures, methods (name mangling, ``super()``), nested annotated defs and docstrings check clean;
    a closure decorated (by calling its factory) after the file changed is refused."""
    path = tmp_path / "acrobat_contexts.py"
    path.write_text(CONTEXTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mod = importlib.import_module("acrobat_contexts")
        before = mod.make(2.0)
        for f in (before, mod._Model.cell):
            lines, first = f.snapshot.function_lines()
            assert lines[0].lstrip().startswith("@ab.function") and first > 1
        taken = before.snapshot.function_lines()
        _edit(path, CONTEXTS.replace("y * k", "y * k + 1"))
        assert before.snapshot.function_lines() == taken  # taken when decorated
        with pytest.raises(ab.CompileError, match="changed after"):
            mod.make(3.0).snapshot.function_lines()  # decorated now, from the edited file
    finally:
        sys.modules.pop("acrobat_contexts", None)


@ab.program
def _checked_model(xs, p):  # this test module's asserts are rewritten by pytest when it is imported
    assert len(xs) > 0, "empty"
    return torch.tanh(xs[0] @ p.W)


def test_model_in_a_module_whose_loader_rewrites_asserts():
    """pytest compiles this file's asserts into other code: the snapshot is trusted, not refused."""
    xs, p = _batch()
    _assert_batched_equals_plain(_checked_model, xs, p)


class _Instrumenting(importlib.machinery.SourceFileLoader):
    """An import hook that changes every function's code, as typeguard's and jaxtyping's do: through
    ``source_to_code``."""

    def source_to_code(self, data, path, *, _optimize=-1):
        tree = ast.parse(data)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                node.body.insert(0, ast.parse("_instrumented = 1").body[0])
        return compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True, optimize=_optimize)


def test_import_hook_that_instruments_code(tmp_path):
    """The check compiles the snapshot through the module's loader: instrumented code is the code that
    runs, and a file edited before a late decoration is still refused."""
    name = "acrobat_instrumented"
    path = tmp_path / f"{name}.py"
    path.write_text(MODEL)
    spec = importlib.util.spec_from_file_location(name, path, loader=_Instrumenting(name, str(path)))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "_instrumented" in mod.cell.fn.__code__.co_varnames
    xs, p = _batch()
    _assert_batched_equals_plain(mod.model, xs, p)
    _edit(path, EDITED)
    with pytest.raises(ab.CompileError, match="changed after"):
        ab.program(mod.plain).run(xs, p, backend="eager")


def test_source_unavailable_is_a_compile_error():
    """With no source to analyse, the static tier rejects the program (strict), and the dynamic tier runs
    the function Python has (the default), saying why."""
    ns: dict = {}
    exec("import acrobat as ab\n@ab.program\ndef f(x, p):\n    return x * 2\n", ns)  # not in linecache
    with pytest.raises(ab.CompileError, match="cannot read the source of `f`"):
        ns["f"].run([torch.ones(2)], None, backend="eager", options=ab.Options(strict=True))
    stats = ab.RunStats()
    got = ns["f"].run([torch.ones(2), torch.arange(2.0)], None, backend="eager", stats=stats)
    torch.testing.assert_close(got, [torch.ones(2) * 2, torch.arange(2.0) * 2])
    assert "cannot read the source of `f`" in stats.dynamic.reason


# ------------------------------------------------------------------ kernel cache folder

SCRIPT = '''\
import sys

import torch
import acrobat as ab


@ab.program
def double(x, p):
    return torch.tanh(x * p + 1.0)


xs = [torch.randn(3) for _ in range(4)]
with torch.inference_mode():
    for _ in range(2):  # the second run warns no more
        out = double.run(xs, torch.tensor(2.0), backend=sys.argv[1])
        for got, x in zip(out, xs):
            torch.testing.assert_close(got, double(x, torch.tensor(2.0)))
print("OK")
'''


def _start_script(folder: Path, cache: Path, backend: str) -> subprocess.Popen:
    """SCRIPT run on ``backend`` in a new process from ``folder`` with ``ACROBAT_CACHE_DIR=cache``."""
    script = folder / "tiny_model.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env.update(ACROBAT_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
               PYTHONWARNINGS="always")
    return subprocess.Popen([sys.executable, str(script), backend], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=folder)


def test_unusable_cache_folder_falls_back_with_one_warning(tmp_path):
    """ACROBAT_CACHE_DIR naming a file, and naming a folder below a file (one root cannot create either):
    runs equal plain calls, after one warning saying what is wrong and what to set. Both failed at import
    before (importing torch's compiler creates the folder); the first case also compiles a block."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file\n")
    cases = {"file": (blocker, "compiled"), "below-a-file": (blocker / "acrobat", "eager")}
    procs = {}
    for case, (cache, backend) in cases.items():  # both processes at once
        (tmp_path / case).mkdir()
        procs[case] = _start_script(tmp_path / case, cache, backend)
    for case, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0 and stdout.strip() == "OK", f"{case}:\n{stderr}"
        warnings = [line for line in stderr.splitlines() if "KernelCacheWarning" in line]
        assert len(warnings) == 1, f"{case}:\n{stderr}"
        assert f"ACROBAT_CACHE_DIR={cases[case][0]}" in warnings[0], stderr
        assert f"{blocker} is a file" in warnings[0] and "temporary folder" in warnings[0], stderr
    assert blocker.read_text() == "a regular file\n"


SCOPED = '''\
import os
import sys

import torch
import acrobat as ab


@ab.program
def double(x, p):
    return torch.tanh(x * p + 1.0)


xs = [torch.randn(3) for _ in range(2)]
with torch.inference_mode():
    double.run(xs, torch.tensor(2.0), backend="compiled")
print(os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
'''


def test_the_process_keeps_torchs_own_cache_folder(tmp_path):
    """acrobat's kernels go to its folder, but only while it compiles: afterwards TORCHINDUCTOR_CACHE_DIR names
    torch's default again, so the user's own torch.compile is not moved (it was, for the whole process)."""
    script = tmp_path / "scoped.py"
    script.write_text(SCOPED)
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env.update(ACROBAT_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert str(cache) not in done.stdout  # after the compile: torch's folder (or unset), not acrobat's
    assert any((cache / "inductor").rglob("*.py")), list((cache / "inductor").rglob("*"))  # the kernels went there

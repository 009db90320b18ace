"""The package's layering: the runtime takes a ``Plan`` from the compiler and imports nothing from it;
the native part (``acrobat._native``) is called from one module."""

from __future__ import annotations

import ast
from pathlib import Path

import acrobat

PACKAGE = Path(acrobat.__file__).parent
RUNTIME = sorted((PACKAGE / "runtime").glob("*.py"))
COMPILER = ("acrobat.frontend", "acrobat.analysis", "acrobat.codegen", "acrobat.program")
ALLOWED: dict[str, set[str]] = {}
"""Deliberate exceptions, runtime module -> compiler modules it may import, each with a comment naming why (none)."""


def _imports(tree: ast.AST, type_only: bool = True) -> list[str]:
    """The acrobat modules a module's code imports (at any depth), with or without ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    if not type_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    names = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n for n in names if n.startswith("acrobat.")]


def test_runtime_imports_nothing_from_the_compiler():
    """No module of ``acrobat.runtime`` imports the frontend, the analyses or the code generators,
    not even for types: the compiler hands the runtime a ``Plan`` (``acrobat.runtime.plan``)."""
    assert RUNTIME
    found = {}
    for path in RUNTIME:
        bad = {n for n in _imports(ast.parse(path.read_text(encoding="utf-8")))
               if n.startswith(COMPILER) and n not in ALLOWED.get(path.stem, set())}
        if bad:
            found[path.name] = sorted(bad)
    assert not found, f"runtime modules import the compiler: {found}"


def test_plan_is_a_leaf():
    """The hand-off module imports no other acrobat module: both sides import it, it imports neither."""
    assert _imports(ast.parse((PACKAGE / "runtime" / "plan.py").read_text(encoding="utf-8"))) == []


def test_runtime_modules_import_no_cycle():
    """The runtime's own modules import each other without a cycle (imports for types only left out)."""
    graph: dict[str, set[str]] = {}
    for path in RUNTIME:
        deps = {n.split(".")[2] for n in _imports(ast.parse(path.read_text(encoding="utf-8")), type_only=False)
                if n.startswith("acrobat.runtime.")}
        graph[path.stem] = {d for d in deps if (PACKAGE / "runtime" / f"{d}.py").exists()} - {path.stem}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, path + (module,))
        done.add(module)

    for module in graph:
        visit(module, ())


def test_one_module_calls_the_native_part():
    """``acrobat._native`` is imported by ``acrobat.runtime.dfg`` alone: the native boundary is one module."""
    users = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   if "acrobat._native" in _imports(ast.parse(path.read_text(encoding="utf-8"))))
    assert users == ["runtime/dfg.py"]

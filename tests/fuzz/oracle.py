"""The fuzzer's oracle: a program run as plain Python per instance against acrobat's batched run.

``check(program)`` loads a generated module from a file (acrobat reads
model source with ``inspect``), runs ``main`` on every instance as plain
Python, then batched on each backend at each of the program's batch sizes
with its ``Options`` (the backend ``"dynamic"``: the eager backend with
``Options(static=False)``, the dynamic tier alone), and compares every output: tensors with
``torch.testing.assert_close``, host numbers within float tolerance, every
other host value and the structure exactly. Programs may store results on
the instances' nodes (``node.st = ...``) and change token lists and a
``Doc``'s tensor in place, so every run gets its own deep copy of the
instances, and what the instances hold after a batched run is compared
with what they hold after the plain runs. The outcome is one category:

- ``ok``: every batched run equals the plain runs;
- ``wrong``: a batched run returned a different result (a silent wrong answer);
- ``internal``: acrobat raised something that is not one of its user-facing
  errors (``acrobat.InternalError``, or a Python exception escaping);
- ``error on valid``: acrobat raised a user-facing run-time error
  (``InstanceError``, ``ShapeError``, ...) on a program plain Python runs;
- ``rejected``: ``CompileError`` (counted apart: a construct acrobat cannot batch; without
  ``Options(strict=True)`` such programs run in the dynamic tier instead);
- ``shape limit``: a ``ShapeError`` whose ``static_limit`` names a limit of the static tier (instances gave one static block tensors of
  different shapes (``torch.tensor(tokens)`` of per-instance lengths), the static tier's limit, in a program
  whose calls change host state, so it does not run again in the dynamic tier (``Program._run_dynamic``);
  where it does run again there, its results are compared as any other run's;
- ``limit``: a run-time error acrobat flags as a documented limit of its own (``acrobat.diagnosis.mark_limit``:
  an in-place write into a value the dynamic tier computes once per run from parameters alone, which README
  names), counted apart and listed in the long run's report, not a failure;
- ``invalid``: plain Python itself fails (a generator bug; the program is skipped);
- ``numeric flip``: float32 differs but the same program in float64 agrees
  (a tensor-dependent branch decided by rounding, not a bug).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import math
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import acrobat as ab
from tests.fuzz.generator import FuzzProgram
from tests.fuzz.world import Doc, NaryNode, Node, Params, make_instances

FAILURES = ("wrong", "internal", "error on valid")
SHAPE_LIMIT = "the static tier batches tensors of equal shapes only"  # how stats.fallback names that limit
_DIR = Path(tempfile.mkdtemp(prefix="acrobat-fuzz-"))
TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-9, 1e-10)}


@dataclass
class Outcome:
    """What one program did: its category (see the module docstring) and where and how."""

    category: str
    detail: str = ""
    backend: str = ""
    batch_size: int = 0
    runs: list[tuple[str, int]] = field(default_factory=list)  # (backend, batch size) of every batched run

    def __str__(self) -> str:
        where = f" [{self.backend}, batch {self.batch_size}]" if self.backend else ""
        return f"{self.category}{where}: {self.detail}"


def load(source: str) -> Any:
    """The generated module of ``source``, imported from a file of its own."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    name = f"acrobat_fuzz_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    path = _DIR / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def same(got: Any, want: Any, dtype: torch.dtype, path: str = "result") -> str | None:
    """None when ``got`` equals ``want`` (tensors and floats within tolerance), else where they differ."""
    rtol, atol = TOL[dtype]
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: {type(got).__name__} {got!r} where plain Python gives a tensor"
        try:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)  # NaN where plain gives NaN
        except AssertionError as exc:
            return f"{path}: {str(exc).splitlines()[0]} (got {got}, want {want})"
        return None
    if isinstance(want, float) and isinstance(got, float):
        return None if math.isclose(got, want, rel_tol=rtol * 10, abs_tol=atol * 10) else f"{path}: {got} != {want}"
    if isinstance(want, (list, tuple)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{path}: {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'} where plain " \
                   f"Python gives a {type(want).__name__} of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = same(g, w, dtype, f"{path}[{i}]")
            if why:
                return why
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or got.keys() != want.keys():
            return f"{path}: {got!r} where plain Python gives a dict with keys {list(want)}"
        for k in want:
            why = same(got[k], want[k], dtype, f"{path}[{k!r}]")
            if why:
                return why
        return None
    if type(got) is not type(want) or got != want:
        return f"{path}: {got!r} where plain Python gives {want!r}"
    return None


def classify(exc: BaseException) -> str:
    """The outcome category of an exception acrobat raised."""
    if isinstance(exc, ab.CompileError):
        return "rejected"
    if getattr(exc, "static_limit", None):
        return "shape limit"
    if getattr(exc, "user_limit", False):
        return "limit"
    if isinstance(exc, ab.InternalError) or not isinstance(exc, ab.AcrobatError):
        return "internal"
    return "error on valid"


def _plain(module: Any, instances: list, p: Params) -> list:
    with torch.no_grad():
        return [module.main(x, p) for x in instances]


def stored(instances: list) -> list[Any]:
    """What the instances hold after a run: what a program stored on the tree nodes (their attributes beyond the
    tree's own), node by node in pre-order; a token list as it is; a ``Doc``'s attributes (tokens and tensor)."""
    out: list[Any] = [x if isinstance(x, list) else dict(vars(x)) for x in instances if isinstance(x, (list, Doc))]
    todo = [x for x in reversed(instances) if isinstance(x, (Node, NaryNode))]
    while todo:
        node = todo.pop()
        out.append({k: v for k, v in vars(node).items() if k not in _STRUCTURE})
        todo += reversed([c for c in (node.left, node.right) if c is not None] if isinstance(node, Node)
                         else node.children)
    return out


_STRUCTURE = frozenset({"word", "left", "right", "is_leaf", "children"})
"""The attributes of ``world.Node``/``NaryNode`` the tree itself has."""


def check(program: FuzzProgram, backends: tuple[str, ...] = ("eager", "compiled"), seed: int = 0,
          float64: bool = False) -> Outcome:
    """Run ``program`` plain and batched; its ``Outcome`` (see the module docstring)."""
    dtype = torch.float64 if float64 or program.dtype == "float64" else torch.float32
    try:
        module = load(program.source)
    except Exception as exc:  # noqa: BLE001 - a generator bug
        return Outcome("invalid", f"does not import: {type(exc).__name__}: {exc}")
    p = Params(seed, dtype)
    instances = make_instances(program.kind, max(program.batch_sizes), seed, dtype)
    plain = copy.deepcopy(instances)
    try:
        want = _plain(module, plain, p)
    except Exception as exc:  # noqa: BLE001 - the program fails as plain Python: nothing to compare
        return Outcome("invalid", f"plain Python raises {type(exc).__name__}: {exc}")
    runs: list[tuple[str, int]] = []
    for backend in backends:
        options = ab.Options(**program.options)
        if backend == "dynamic":  # the dynamic tier alone (acrobat.runtime.dynamic), on the eager backend
            backend, options = "eager", ab.Options(static=False)
        for n in program.batch_sizes:
            runs.append((backend, n))
            batch = copy.deepcopy(instances[:n])
            stats = ab.RunStats()
            try:
                with torch.inference_mode() if backend != "eager" else torch.no_grad():
                    got = module.main.run(batch, p, backend=backend, options=options, stats=stats)
            except Exception as exc:  # noqa: BLE001 - classified
                text = f"{type(exc).__name__}: {exc}"
                category = classify(exc)
                if category == "internal":
                    text += "\n" + "".join(traceback.format_exception(exc)[-6:])
                return Outcome(category, text, backend, n, runs)
            if stats.fallback and not stats.fallback.startswith(SHAPE_LIMIT):
                # right, but only because the dynamic tier ran it after the static tier's own failure
                return Outcome("internal", f"the dynamic tier ran it after the static tier failed: {stats.fallback}",
                               backend, n, runs)
            why = same(got, want[:n], dtype) or same(stored(batch), stored(plain[:n]), dtype, "left on the instances")
            if why is not None:
                if dtype == torch.float32 and check(program, (backend,), seed, float64=True).category == "ok":
                    return Outcome("numeric flip", why, backend, n, runs)
                return Outcome("wrong", why, backend, n, runs)
    return Outcome("ok", runs=runs)

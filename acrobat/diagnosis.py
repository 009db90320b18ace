"""Whose failure is it: a batched run that failed, judged against plain Python (differential diagnosis).

When a batched run raises, acrobat cannot tell from the exception alone
whether the model's own code failed (bad data, a shape mistake: the user's
error) or acrobat's generated code or runtime did (acrobat's bug). Plain
Python can: the instance the failure names (or, when it names none, the
first few instances) is run alone as the user wrote it. If that fails too,
the original error stands, and it names the instance and the source line.
If plain Python runs it, the failure is acrobat's own: an
``acrobat.InternalError`` that says so and names the way to the right
answer meanwhile. Errors about the call itself (``CompileError``,
``ParamError``, a batch too large) are never re-judged.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import torch

from acrobat.errors import AcrobatError, CompileError, InstanceError, InternalError, ParamError

E = TypeVar("E", bound=Exception)
PLAIN_TRIES = 8  # instances run alone when the failure names none


def blame(exc: BaseException, program: str, instances: Sequence, run_plain: Callable[[Any], Any],
          backend: str) -> BaseException:
    """The error to raise for ``exc``, a failure of a batched run of ``program`` over ``instances``.

    ``run_plain(instance)`` runs one instance as plain Python. Returns ``exc`` itself when it is the user's
    error (plain Python fails as well; an ``InstanceError`` for the instance plain Python fails on, when
    ``exc`` named none), else an ``InternalError`` naming the instance, the original failure and the
    fallbacks. Never raises.
    """
    if isinstance(exc, (CompileError, ParamError)) or getattr(exc, "user_limit", False):
        return exc
    named = getattr(exc, "instance", None)
    tries = [named] if isinstance(named, int) and 0 <= named < len(instances) else list(range(
        min(PLAIN_TRIES, len(instances))))
    for i in tries:
        try:
            with torch.no_grad():
                run_plain(instances[i])
        except Exception as plain:  # noqa: BLE001 - the model fails as plain Python: the user's error
            if isinstance(exc, AcrobatError) and named is not None:
                return exc
            return InstanceError(f"instance {i}: {type(plain).__name__}: {plain} (as plain Python; the batched "
                                 f"run failed with {type(exc).__name__}: {_first_line(exc)})", i)
    i = tries[0] if tries else 0
    other = "backend='eager'" if backend != "eager" else "running each instance alone"
    return InternalError(
        f"acrobat failed on program `{program}` where plain Python runs the instance: this is a bug in acrobat, "
        f"please report it with the model.\n  instance {i}: {type(exc).__name__}: {exc}\n"
        f"  (meanwhile: {other}, `{program}(instance, ...)`, gives the right result)", i)


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def mark_limit(exc: E) -> E:
    """``exc`` flagged as a limit of acrobat the run hit, which its message explains (too many nodes in one
    launch, an operator acrobat batches only for some values): never re-judged."""
    exc.user_limit = True  # type: ignore[attr-defined]
    return exc


def calling_line() -> str:
    """``"  at FILE:LINE: SOURCE"``: the innermost frame of the current call stack in the model's own code (outside
    torch and acrobat: the line whose operator acrobat is handling now), or ``""`` when there is none."""
    skip = (str(Path(torch.__file__).parent), str(Path(__file__).parent))
    for f in reversed(traceback.extract_stack()):
        if not f.filename.startswith(skip):
            return f"  at {f.filename}:{f.lineno}: {(f.line or '').strip()}"
    return ""


def user_line(exc: BaseException) -> str:
    """``"\n  at FILE:LINE: SOURCE"``: the deepest frame of ``exc``'s traceback in the model's own code (outside
    torch and acrobat), or ``""`` when there is none."""
    skip = (str(Path(torch.__file__).parent), str(Path(__file__).parent))
    for f in reversed(traceback.extract_tb(exc.__traceback__)):
        if not f.filename.startswith(skip):
            return f"\n  at {f.filename}:{f.lineno}: {(f.line or '').strip()}"
    return ""

"""The errors acrobat raises: every one names where the problem is.

A model that acrobat cannot batch correctly is rejected with one of these,
never run to a wrong answer (DESIGN.md, "bad input gets a clear error").
"""

from __future__ import annotations

import re


class AcrobatError(Exception):
    """Base class of every error acrobat raises on purpose.

    Its text shows the model's variables as written: the parser renames those that start with ``_``
    (``acrobat.frontend.parser.MANGLE``), and the message undoes it.
    """

    def __str__(self) -> str:
        return re.sub(r"\b_U(_\w*)", r"\1", super().__str__())


class CompileError(AcrobatError):
    """A model function uses Python that acrobat cannot compile (§3).

    The message starts with ``file:line:`` of the offending construct and
    says what to write instead. Unless ``Options(strict=True)``, a program
    the static tier rejects runs in the dynamic tier instead; ``fallback``
    is False for the errors that stop it there too (the call does not match
    the program, or the source is not the code Python runs).
    """

    def __init__(self, message: str, filename: str = "<unknown>", line: int = 0, col: int = 0,
                 fallback: bool = True):
        self.filename = filename
        self.line = line
        self.col = col
        self.fallback = fallback
        super().__init__(f"{filename}:{line}:{col + 1}: {message}")


class DataError(AcrobatError):
    """An input file (e.g. an SST tree file) is malformed.

    The message starts with ``file:line:column:`` (1-based line and column).
    """

    def __init__(self, message: str, filename: str, line: int, col: int):
        self.filename = filename
        self.line = line
        self.col = col
        super().__init__(f"{filename}:{line}:{col}: {message}")


class BatchError(AcrobatError):
    """A batched run cannot proceed: an empty batch, or bad arguments to run()."""


class ShapeError(AcrobatError):
    """A tensor operator failed on one instance's tensors at run time.

    The message names the instance index (position in the batch) and the
    ``file:line`` of the model source line whose operator failed.
    """

    def __init__(self, message: str, instance: int | None = None):
        self.instance = instance
        super().__init__(message)


class InstanceError(AcrobatError):
    """The model's host code (control flow, data access) failed for one instance.

    The message names the instance index and the model source line.
    """

    def __init__(self, message: str, instance: int):
        self.instance = instance
        super().__init__(message)


class ParamError(AcrobatError):
    """The shared parameters passed to ``run`` lack what the model reads from them.

    Raised when the once-per-run prologue reads ``p.W_out`` (or ``p.layers[0]``)
    and the object passed for ``p`` is a dict, ``None`` or lacks the attribute.
    The message names the program, the parameter (name and position), the
    missing attribute or item, and the ``file:line`` of the model source line
    that reads it. ``param`` is the parameter's name, ``attr`` what is missing.
    """

    def __init__(self, message: str, param: str | None = None, attr: str | None = None):
        self.param = param
        self.attr = attr
        super().__init__(message)


class InternalError(AcrobatError):
    """acrobat's own bug: generated code or the runtime failed on a program plain Python runs.

    The message names the program, the instance and the model source line
    (or the static block) where it failed, and the fallback that gives the
    right answer meanwhile (``backend="eager"``, or running the instance
    alone as plain Python). Please report it with the model.
    """

    def __init__(self, message: str, instance: int | None = None):
        self.instance = instance
        super().__init__(message)


class DynamicFallbackWarning(UserWarning):
    """The static tier failed on a batch where plain Python runs every instance (an ``InternalError``,
    acrobat's bug): the batch ran again in the dynamic tier, which gives the plain program's results
    (``acrobat.Program.run``; ``RunStats.fallback`` holds the failure). ``Options(strict=True)`` raises
    the ``InternalError`` instead."""


class KernelCacheWarning(UserWarning):
    """The kernel cache folder (``$ACROBAT_CACHE_DIR``) cannot be used; compiled kernels go to a temporary
    folder for the process instead (``acrobat.cachedir.inductor_dir``)."""


class LimitError(ValueError):
    """Raised inside a block by acrobat's own run-time check where its batched form would differ from what
    PyTorch computes for these values (``acrobat.analysis.ragged.row_operands``); reported as a
    ``ShapeError`` naming the instance and the model line, and what to write instead."""

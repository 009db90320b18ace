"""The source text of a model function as it was when its decorator ran: what the parser reads (§3).

acrobat compiles a model from its source, but Python runs the code it compiled when the module was
imported. A file edited afterwards (in an editor beside a long-running notebook or server) must not
change what ``run`` batches, or batched results silently differ from plain calls. So
``@acrobat.function`` / ``@acrobat.program`` take a ``SourceSnapshot``: the lines of the function's
file, or of its interactive cell, as ``linecache`` holds them at that moment (one ``os.stat``; a file
is read once per process and its lines are shared by its functions, so decorating costs
microseconds). At compile time ``SourceSnapshot.function_lines`` finds the function in those lines
and checks that they compile to the code Python runs (``fn.__code__``: bytecode, constants and
names; line numbers aside), so a function decorated after its file changed is refused with a
``CompileError`` that says to reload the module, never compiled from text Python did not run.

The check compiles the whole snapshot as its module was compiled (the module loader's
``source_to_code``, which import hooks that rewrite code override; else ``compile`` with the code's
``__future__`` flags), once per file and process. A module whose loader rewrites code some other
way (pytest's assertion rewriting of test files) cannot be recompiled as it ran: its functions are
trusted to their snapshot when the two differ.
"""

from __future__ import annotations

import __future__
import ast
import inspect
import linecache
import re
import types
import warnings
from typing import Any, Callable, Sequence

from acrobat.errors import CompileError

#: A line that may start the definition ``co_firstlineno`` points at (``inspect.findsource``'s pattern).
_DEF_LINE = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")
#: The ``__future__`` flags a code object carries in ``co_flags`` (an interactive session's earlier
#: ``from __future__`` imports reach later cells this way). ``nested_scopes`` is always on.
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_FUTURE_FLAGS &= ~inspect.CO_NESTED
#: A file's text (a ``linecache`` list, by identity) -> the code objects of its module as Python compiled
#: it, by qualified name and first line, or None when that cannot be reproduced; the list is kept so its
#: id stays its own.
_MODULE_CODE: dict[int, tuple[Sequence[str], dict[tuple[str, int], list[types.CodeType]] | None]] = {}


class SourceSnapshot:
    """The text a model function was defined from, captured when it was decorated.

    ``take(fn)`` captures it; ``function_lines()`` returns the function's own lines from it at compile
    time. Holds the file's (or cell's) lines as ``linecache`` had them: ``linecache`` replaces its lists
    when a file changes, it never edits them, so a later edit does not reach the snapshot.
    """

    def __init__(self, fn: Callable, filename: str, file_lines: Sequence[str], missing: str | None,
                 cell: bool = False):
        self.fn = fn  # the function Python runs (``inspect.unwrap``-ped, as ``inspect.getsource`` does)
        self.filename = filename
        self.file_lines = file_lines
        self.missing = missing  # why the source cannot be read, or None
        self.cell = cell  # text registered in linecache (an interactive cell), not read from a file
        self._checked: tuple[types.CodeType, list[str], int] | None = None  # the last check's code and result

    @classmethod
    def take(cls, fn: Callable) -> SourceSnapshot:
        """Capture the source of ``fn`` now (at decoration); never raises: a function without readable
        source records why, and ``function_lines`` raises ``CompileError`` with it when a model is compiled."""
        try:
            target = inspect.unwrap(fn)
        except ValueError:  # a cycle of __wrapped__
            target = fn
        code = getattr(target, "__code__", None)
        if not isinstance(code, types.CodeType):
            return cls(target, "<unknown>", (), "not a Python function")
        filename = code.co_filename
        linecache.checkcache(filename)  # drop a cached copy older than the file (one os.stat)
        lines = linecache.getlines(filename, getattr(target, "__globals__", None))
        entry = linecache.cache.get(filename, ())
        cell = len(entry) == 4 and entry[1] is None  # registered text has no modification time
        return cls(target, filename, lines, None if lines else "no source text found for its file", cell)

    def __deepcopy__(self, memo: dict) -> SourceSnapshot:
        """Itself: a snapshot is never changed (IR bodies holding a ``Function`` are deep-copied)."""
        return self

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    def function_lines(self) -> tuple[list[str], int]:
        """The function's source lines (decorators first, as written) and the 1-based line number of the first.

        Raises:
            CompileError: the source was not readable when the function was decorated (a function
                defined by ``exec`` of a string no ``linecache`` entry holds), or it does not compile
                to the code Python runs for the function (its file changed between import and
                decoration): the message says to reload the module.
        """
        if self.missing is not None:
            raise CompileError(f"cannot read the source of `{self.name}` ({self.missing}): acrobat models must be "
                               "defined in a .py file or an interactive session that keeps its cells' text "
                               "(IPython, Jupyter)", self.filename, 0, 0)
        code = self.fn.__code__
        if self._checked is not None and self._checked[0] is code:
            return list(self._checked[1]), self._checked[2]
        lnum = code.co_firstlineno - 1
        while 0 < lnum < len(self.file_lines) and not _DEF_LINE.match(self.file_lines[lnum]):
            lnum -= 1
        block = inspect.getblock(self.file_lines[lnum:]) if lnum < len(self.file_lines) else []
        if not block or not self._runs_as(code):
            raise CompileError(
                f"the source of `{self.name}` changed after the module was imported: this file no longer holds "
                f"the code Python runs for `{self.name}`, and acrobat compiles the source, so run() would batch "
                "other code than plain calls run; reload the module (importlib.reload(module), or restart the "
                "kernel) and use the reloaded function", self.filename, lnum + 1, 0)
        self._checked = (code, block, lnum + 1)
        return list(block), lnum + 1

    def _runs_as(self, code: types.CodeType) -> bool:
        """Whether the snapshot compiles to ``code`` at its place (its qualified name and first line);
        True when the module's compilation cannot be reproduced (nothing to compare against)."""
        key = id(self.file_lines)
        if key not in _MODULE_CODE:
            module = _module_code(self, code)
            index: dict[tuple[str, int], list[types.CodeType]] | None = None
            if module is not None:
                index = {}
                for c in _code_objects(module):
                    index.setdefault((c.co_qualname, c.co_firstlineno), []).append(c)
            _MODULE_CODE[key] = (self.file_lines, index)
        index = _MODULE_CODE[key][1]
        if index is None:
            return True
        return any(_shape(c) == _shape(code) for c in index.get((code.co_qualname, code.co_firstlineno), ()))


def _module_code(snap: SourceSnapshot, code: types.CodeType) -> types.CodeType | None:
    """``snap``'s text compiled as Python compiled it: by the loader's ``source_to_code`` when it is the
    file of the module the function was defined in (the hook import-time code rewriters override),
    else by ``compile`` with ``code``'s ``__future__`` flags (a script, an interactive cell, ``exec``).
    None when that cannot be reproduced (a loader that compiles some other way, or fails); a module
    without functions when the text does not compile (it cannot be what Python ran)."""
    text, filename = "".join(snap.file_lines), snap.filename
    namespace = getattr(snap.fn, "__globals__", {})
    loader = namespace.get("__loader__") if namespace.get("__file__") == filename and not snap.cell else None
    with warnings.catch_warnings():  # the import showed the module's syntax warnings already
        warnings.simplefilter("ignore")
        try:
            if loader is not None:
                to_code = getattr(loader, "source_to_code", None)
                return to_code(text, filename) if to_code is not None else None
            flags = (code.co_flags & _FUTURE_FLAGS) | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # a cell may await
            return compile(text, filename, "exec", flags=flags, dont_inherit=True)
        except (SyntaxError, ValueError):
            return compile("", filename, "exec")
        except Exception:  # a loader's own failure: nothing to compare against
            return None


def _code_objects(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and every code object nested in its constants, depth-first."""
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _code_objects(c)
    return out


def _shape(code: types.CodeType) -> tuple:
    """What a code object runs: bytecode, constants (nested code compared the same way), names and
    variables; not its line numbers or positions."""
    return (code.co_code, tuple(_const(c) for c in code.co_consts), code.co_names, code.co_varnames,
            code.co_freevars, code.co_cellvars, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount)


def _const(c: Any) -> Any:
    """A constant in a form that compares by what it is (``0.0`` and ``-0.0`` differ, a NaN equals itself)."""
    if isinstance(c, types.CodeType):
        return _shape(c)
    if isinstance(c, tuple):
        return ("tuple", tuple(_const(x) for x in c))
    if isinstance(c, frozenset):
        return ("frozenset", frozenset(_const(x) for x in c))
    if isinstance(c, (float, complex)):
        return (type(c).__name__, repr(c))
    return (type(c).__name__, c)

"""Module-level data a model reads: a global dict, list or tuple of plain host data (§3, the frontend's subset).

Public code keeps its vocabulary in a module-level dict (``target2index['</s>']`` in a decoder's loop) or its
sizes in a global tuple. Such a global is per-run host data to acrobat: the same for every instance, never a
tensor. The parser makes each read of one a host call, ``GlobalRead``, that looks the name up in the function's
globals when the skeleton runs, as Python does at each read: a compiled program sees the value the global holds
at that run (a module that rebinds it between runs, or fills it in place, is read as it is then), and a write
into it (``table[k] = v``) is a host effect, kept in Python's order on fibers (§4.2). Globals of other types
(tensors, modules, empty containers, objects) stay rejected: they are passed in as the program's arguments.
"""

from __future__ import annotations

from typing import Any

import torch


def is_host_data(v: Any) -> bool:
    """Plain Python data (numbers, strings, None, dtypes, and non-empty tuples/lists/dicts of them): a shared
    value that host code uses as it is, never a tensor operand of a block."""
    if isinstance(v, (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device)):
        return True
    if isinstance(v, (list, tuple)):  # an empty one may be meant to hold tensors: not host data
        return bool(v) and all(is_host_data(x) for x in v)
    if isinstance(v, dict):
        return bool(v) and all(isinstance(k, str) and is_host_data(x) for k, x in v.items())
    return False


class GlobalRead:
    """A call reading the global ``name`` of ``namespace`` (a function's ``__globals__``) at run time.

    Calling it returns ``namespace[name]`` (the container itself, not a copy). Generated code holds one per
    global read; ``__name__`` is ``global_<name>`` so dumps of generated code (``ACROBAT_DEBUG``) say what it reads.

    Raises (when called):
        NameError: the global was deleted since the compile, as Python raises for a missing global.
    """

    def __init__(self, namespace: dict[str, Any], name: str):
        self.namespace = namespace
        self.name = name
        self.__name__ = f"global_{name}"

    def __deepcopy__(self, memo: dict) -> "GlobalRead":
        """Itself: IR copied by the compiler keeps reading the same namespace (a module's globals)."""
        return self

    def __call__(self) -> Any:
        try:
            return self.namespace[self.name]
        except KeyError:
            raise NameError(f"name '{self.name}' is not defined") from None

    def __repr__(self) -> str:
        return f"<global {self.name}>"


def is_global_data(namespace: dict[str, Any], name: str) -> bool:
    """True when ``name`` is a global of ``namespace`` holding a non-empty dict, list or tuple of host data
    (``is_host_data``), which a model may read as a value (``GlobalRead``)."""
    v = namespace.get(name)
    return isinstance(v, (dict, list, tuple)) and is_host_data(v)

"""A shared module's list held for the run while a batch runs (issue 18 §2, ``acrobat.analysis.run_lists``).

The static tier keeps ``model.outputs`` (assigned a fresh ``[]`` by the entry) as a variable of each instance's
run and sets the attribute after the batch (``acrobat.runtime.plan.RunList.settle``). Meanwhile the attribute
holds a ``Held``, so code acrobat does not analyse that reads it during the run (a plain Python method of an
object the module holds, a shared value computed once per run) fails loudly instead of reading what the
attribute held before the run.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from acrobat.diagnosis import calling_line
from acrobat.errors import AcrobatError
from acrobat.runtime.plan import RunList


@contextmanager
def held(run_list: RunList, shared_args: tuple) -> Iterator[None]:
    """The attribute of ``run_list`` holds a ``Held`` for the block (a batched run, from its prologue on); what it
    held before is put back unless the run set the list (``RunList.settle``) or the user's code did (a rerun in
    the dynamic tier, which runs the entry's own ``model.outputs = []``)."""
    module = shared_args[run_list.shared]
    old = getattr(module, run_list.attr, None)
    setattr(module, run_list.attr, Held(run_list.attr))
    try:
        yield
    finally:
        if isinstance(getattr(module, run_list.attr, None), Held):
            setattr(module, run_list.attr, old)


class Held:
    """What a module's run list attribute holds while a batched run computes it (``held``): any use
    raises an ``AcrobatError`` naming the line, as acrobat holds the list as a variable of the run."""

    def __init__(self, attr: str) -> None:
        self._attr = attr

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise AcrobatError(f"`.{object.__getattribute__(self, '_attr')}` of the module is the run's list "
                            "(`acrobat.runtime.run_list`), which the static tier keeps as a variable of each "
                            "instance's run and sets after the batch: code acrobat does not analyse (a plain Python "
                            "function given the module) cannot read it during the run; read it after the run, or "
                            "pass the list to that function\n" + calling_line())

    def __getattr__(self, name: str) -> Any:
        return self._refuse()

    __len__ = __iter__ = __getitem__ = __setitem__ = __bool__ = __contains__ = __add__ = __iadd__ = _refuse

    def __repr__(self) -> str:
        return f"<the run's list .{object.__getattribute__(self, '_attr')}, held by acrobat during a batched run>"

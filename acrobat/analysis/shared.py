"""Shared-value slots: weights, ops over weights and called modules, computed once per run (§5.1).

Every ``SharedK`` reference (a path into the program's shared arguments,
e.g. ``p.fwd.W``, or an operator over shared values and constants, e.g.
``torch.zeros(p.hidden)``) gets a slot number. At run time the prologue
fills the slots once; blocks receive slot values as unbatched arguments and
the skeleton reads them as ``_S[k]``. DyNet cannot reuse such a constant
tensor across instances; acrobat creates it once (paper §6.2). A module
that blocks call (``p.cell(x, (h, c))``) gets a slot of its own holding its
batchable form, whose parameters are shared arguments like any weight.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acrobat.analysis.kinds import Spec
from acrobat.frontend import ir


@dataclass
class SlotDef:
    """How to compute one slot: from a shared argument, a parent slot, or an expression."""

    ref: tuple
    spec: Spec | None  # the specialization holding the expression (for ("expr", ...) refs)
    expr: ir.Expr | None = None  # the operator over shared values (("expr", ...)); the receiver (("call", ...))
    parent: int | None = None  # for a path step: the slot it steps from
    step: tuple | None = None  # (".", attr) or ("[", constant)
    parts: tuple[int, ...] = ()  # for ("hfuse", slots): the weights fused horizontally
    method: str | None = None  # for ("call", receiver, method): the method called (None: the receiver itself)
    loc: ir.Loc | None = None  # for ("call", ...): the model's (first) call site
    rowwise: bool = False  # for ("call", receiver, method, "rows"): applied row by row to a stacked list


@dataclass
class SharedSlots:
    """The table of shared slots of one compiled program."""

    defs: list[SlotDef] = field(default_factory=list)
    index: dict[tuple, int] = field(default_factory=dict)
    owners: dict[str, Spec] = field(default_factory=dict)  # spec name -> spec

    def extended(self) -> "SharedSlots":
        """A copy to add slots to, leaving this table as it is (slots are only ever added, so the copy's
        numbers agree with this table's)."""
        return SharedSlots(list(self.defs), dict(self.index), self.owners)

    def slot(self, ref: tuple, spec: Spec | None, loc: ir.Loc | None = None, receiver: ir.Expr | None = None) -> int:
        """The slot of ``ref``, creating it (and its parents) on first use.

        ``("call", receiver_ref, method)`` is the callee a block calls for
        ``receiver.method(...)`` (``method`` None: ``receiver(...)``; a fourth
        item ``"rows"`` when it is applied to the rows of a stacked list), made by
        ``acrobat.codegen.modules.call_form`` (a module's batchable form);
        ``loc`` and ``receiver`` (the expression called, e.g. ``p``) name the call site in its errors.
        """
        if ref in self.index:
            return self.index[ref]
        if ref[0] == "call":
            d = SlotDef(ref, None, expr=receiver, parent=self.slot(ref[1], spec), method=ref[2], loc=loc,
                        rowwise=ref[3:] == ("rows",))
        elif ref[0] == "arg" and len(ref) > 2 or ref[0] == "expr" and len(ref) > 3:  # an item or attribute of one
            parent = self.slot(ref[:-1], spec)
            d = SlotDef(ref, None, parent=parent, step=ref[-1])
        elif ref[0] == "hfuse":
            d = SlotDef(ref, None, parts=ref[1])
        elif ref[0] == "expr":
            owner = self.owners[ref[1]]
            d = SlotDef(ref, owner, expr=owner.find_expr(ref[2]))
        else:
            d = SlotDef(ref, None)
        self.index[ref] = len(self.defs)
        self.defs.append(d)
        return self.index[ref]

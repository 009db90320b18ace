"""Recurrent modules over per-instance sequences in the static tier: the kind rules (issue 18 §2).

``out, (h_n, c_n) = p.lstm(S)`` of an ``nn.LSTM`` (``nn.GRU``, ``nn.RNN``: ``out, h_n``; any ``num_layers``,
``bidirectional``), with ``S`` a stacked list (``torch.stack(xs)``, its ``.unsqueeze(1)`` or
``.view(len(xs), 1, -1)``: ``acrobat.analysis.ragged``) and an optional initial state ``h0`` (``(h0, c0)``) of
per-instance tensors, is a segment node per instance, run for the batch as one module call over a packed
sequence (``acrobat.runtime.recurrent``). ``out`` is a stacked list, one row per input row; ``h_n``/``c_n``
per-instance tensors of the unbatched call's shape, ``(layers * dirs, H)``, or ``(layers * dirs, 1, H)`` for
``(T, 1, E)`` input.

**batch_first.** A ``batch_first`` module's input may be the stacked list with a unit axis in front, ``(1, T, E)``
(``S.unsqueeze(0)``, ``S[None]``, ``S.view(1, len(xs), -1)``, ``S.reshape(1, -1, E)``: ``kinds.LeadK``); its
``out`` is then of that kind too, ``(1, T, D*H)`` (read back by ``.squeeze(0)``, ``[0]``, ``[0, i]``, ``[:, i]``),
and ``h_n``/``c_n`` are ``(layers * dirs, 1, H)``. The runtime checks that the module is ``batch_first``.

**The embedding of a sequence.** ``emb(sentence)`` of a per-instance int tensor, or ``emb(torch.tensor(tokens))``
of a host list, has a per-instance length, which no batched tensor holds. Where it feeds a recurrent module
(``feeds_recurrent``: the module's input is it, through variables and ``.view``/``.reshape``/``.unsqueeze``/
``.squeeze``), it is the stacked list of one lookup per token: ``acrobat.analysis.rows`` builds it as
``torch.stack([emb(torch.tensor(tokens[i])) for i in range(len(tokens))])``, whose lookups batch across
tokens and instances. Elsewhere it keeps its meaning (a tensor of one shape across the batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acrobat.analysis.kinds import (BOTTOM, DYNAMIC, LEAD, NONE, RAGGED, HostK, Kind, LeadK, RaggedK, SharedK, TensorK,
                                   TupleK)
from acrobat.analysis.token_lists import is_constructor
from acrobat.frontend import ir
from acrobat.frontend.ir import CallKind
from acrobat.runtime.plan import RecurrentOp

if TYPE_CHECKING:
    from acrobat.analysis.kinds import _Analyzer
    from acrobat.analysis.rules import Site

#: ``shared_fact`` of a recurrent module: this prefix, then its class name (``"recurrent LSTM"``).
RECURRENT_FACT = "recurrent "
#: ``shared_fact`` of an ``nn.Embedding``.
EMBEDDING_FACT = "embedding"
#: The tensor methods a sequence may pass through between its embedding and the recurrent module.
_RESHAPES = frozenset({"view", "reshape", "unsqueeze", "squeeze"})

_HINT = ("give it a stacked list of the sequence's rows: torch.stack(xs), torch.stack(xs).unsqueeze(1), "
         "torch.stack(xs).view(len(xs), 1, -1), torch.stack(xs).unsqueeze(0) (batch_first), or emb(tokens) / "
         "emb(torch.tensor(tokens)) of an nn.Embedding, "
         "written straight into the call or through variables and .view/.unsqueeze (the dynamic tier runs any "
         "other form)")


def module_ref(e: ir.Call, recv: Kind | None) -> tuple | None:
    """The shared reference of the module ``e`` calls (``p.lstm(x)``, ``lstm(x)`` of a shared value), or None."""
    if not isinstance(recv, SharedK) or recv.host or recv.ref[0] != "arg":
        return None
    if e.kind is CallKind.VALUE:
        return recv.ref
    if e.kind is CallKind.METHOD:
        return recv.ref + ((".", e.target),)
    return None


def module_fact(a: _Analyzer, ref: tuple | None) -> str:
    """``shared_fact`` of the value at ``ref`` in the run compiled for ("" where it is not known)."""
    if ref is None:
        return ""
    a.shared_path(ref)
    return a.facts.get(ref, "")


def call_kind(a: _Analyzer, s: Site) -> Kind | None:
    """The kind of a call of a recurrent module (``recurrent_call``) or of an embedding of a sequence that feeds one,
    or of the instance's int tensors where they differ in shape across the batch (``_Analyzer.ragged_instances``)
    (BOTTOM until ``acrobat.analysis.rows`` has built it as a stacked list); None for any other call."""
    ref = module_ref(s.e, s.recv)
    fact = module_fact(a, ref)
    if fact.startswith(RECURRENT_FACT):
        return recurrent_call(a, s, fact[len(RECURRENT_FACT):])
    if fact == EMBEDDING_FACT and embeds_sequence(a, s) and (feeds_recurrent(a, s.e) or a.ragged_instances()):
        a.spec.forms[s.e.nid] = "embed"
        return a.rows_of(s.e)
    return None


def recurrent_call(a: _Analyzer, s: Site, name: str) -> Kind:
    """``p.lstm(S[, hx])`` of a stacked list ``S``: a recurrent segment node (module docstring).

    Raises:
        CompileError: another input (``_HINT``), other arguments, or a state of the wrong form.
    """
    e = s.e
    what = f"`{_text(e.receiver) + ('.' + e.target if e.kind is CallKind.METHOD else '')}` is nn.{name}"
    if len(e.args) not in (1, 2) or any(k != "hx" for k in e.kwargs) or len(e.args) + len(e.kwargs) > 2:
        raise a.error(e, f"{what}: call it with the input and, optionally, the initial state (`hx`)")
    kinds = s.args + s.kws
    if BOTTOM in kinds:
        return BOTTOM  # an operand is not known yet: the fixpoint comes back
    lead = isinstance(kinds[0], LeadK)
    if not lead and (not isinstance(kinds[0], RaggedK) or kinds[0].depth != 1):
        raise a.error(e.args[0], f"{what}, which acrobat batches over a sequence whose length differs per "
                                 f"instance, but its input is not a stacked list of the sequence's rows (it is "
                                 f"{kinds[0]} data): {_HINT}")
    lstm = name == "LSTM"
    states = 0 if len(kinds) == 1 or kinds[1] == NONE else _states(a, e, kinds[1], lstm, what)
    op = RecurrentOp(name, 3 if lstm else 2, ragged_out=True, states=states, lead=lead)
    a.spec.ragged[e.nid] = ("recurrent", op)
    return TupleK((LEAD if lead else RAGGED, TupleK((DYNAMIC, DYNAMIC)) if lstm else DYNAMIC))


def _states(a: _Analyzer, e: ir.Call, k: Kind, lstm: bool, what: str) -> int:
    """How many per-instance state tensors the initial state of kind ``k`` holds (1, or 2 for an LSTM's pair).

    Raises:
        CompileError: a state that is not a per-instance tensor (a pair of them for an LSTM).
    """
    want = (TensorK, TensorK) if lstm else (TensorK,)
    items = k.items if isinstance(k, TupleK) else (k,)
    if len(items) == len(want) and all(isinstance(i, TensorK) for i in items) and (lstm == isinstance(k, TupleK)):
        return len(want)
    form = "a pair (h0, c0) of per-instance tensors" if lstm else "one per-instance tensor h0"
    raise a.error(e, f"{what}: its initial state here is a {k}; acrobat batches {form} (a state the same for "
                     "every instance, such as torch.zeros(...), is the module's default: leave it out, or "
                     "compute it per instance)")


def embeds_sequence(a: _Analyzer, s: Site) -> bool:
    """Whether the embedding call ``s`` looks up a sequence of host tokens: ``emb(x)`` of a per-instance host
    value (an int tensor of the instance), or ``emb(torch.tensor(tokens))`` of one, each read from a variable or
    its attributes (``sentence``, ``pair.src``; an item ``tokens[0]`` is taken for a token, not a sequence). Not
    where ``torch.tensor(tokens)`` is built as a stacked list itself (``acrobat.analysis.token_lists``): the
    embedding then acts on its rows."""
    e = s.e
    if len(e.args) != 1 or e.kwargs or not _chain(e.receiver):
        return False
    x = e.args[0]
    if x.nid in a.spec.rows:
        return False
    if isinstance(x, ir.Call) and x.kind is CallKind.TORCH and is_constructor(x.target):
        return len(x.args) == 1 and not x.kwargs and _chain(x.args[0]) and \
            type(a.spec.kinds.get(x.args[0].nid)) is HostK
    return type(s.args[0]) is HostK and _chain(x)


def feeds_recurrent(a: _Analyzer, emb: ir.Call) -> bool:
    """Whether the value of ``emb`` is the input of a recurrent module's call in the function, through variables
    assigned once and ``.view``/``.reshape``/``.unsqueeze``/``.squeeze``."""
    for st in ir.walk_stmts(a.spec.fn.body):
        for root in ir.stmt_exprs(st):
            for c in ir.walk(root):
                if isinstance(c, ir.Call) and c.args and c.kind in (CallKind.METHOD, CallKind.VALUE) and \
                        _chain(c.receiver) and _source(a.spec.fn, c.args[0]) is emb:
                    ref = module_ref(c, a.expr(c.receiver))  # type: ignore[arg-type]
                    if module_fact(a, ref).startswith(RECURRENT_FACT):
                        return True
    return False


def _source(fn: ir.Function, x: ir.Expr, seen: frozenset[str] = frozenset()) -> ir.Expr:
    """Where the tensor ``x`` comes from: followed back through the one assignment of a variable and the
    methods of ``_RESHAPES``."""
    while True:
        if isinstance(x, ir.Call) and x.kind is CallKind.METHOD and x.target in _RESHAPES and x.receiver is not None:
            x = x.receiver
        elif isinstance(x, ir.Subscript) and isinstance(x.index, ir.Const) and x.index.value is None:
            x = x.obj  # `e[None]`
        elif isinstance(x, ir.Name) and x.id not in seen and x.id not in fn.params:
            binds = [st for st in ir.walk_stmts(fn.body)
                     if isinstance(st, (ir.Assign, ir.For)) and x.id in st.target.names()]
            if len(binds) != 1 or not isinstance(binds[0], ir.Assign) or binds[0].target.name != x.id:
                return x
            seen, x = seen | {x.id}, binds[0].value
        else:
            return x


def _chain(e: ir.Expr | None) -> bool:
    """Whether ``e`` is a variable or its attributes (``self.lstm``, ``p``): read again, it is the same value."""
    while isinstance(e, ir.Attr):
        e = e.obj
    return isinstance(e, ir.Name)


def _text(e: ir.Expr | None) -> str:
    """The source text of a chain of attributes (``self.lstm``), as messages name the module."""
    return f"{_text(e.obj)}.{e.attr}" if isinstance(e, ir.Attr) else e.id if isinstance(e, ir.Name) else "module"

"""Recurrent modules over per-instance sequences: one packed module call per launch (issue 18 §2).

``p.lstm(torch.stack(xs))`` (also ``.unsqueeze(1)``, ``.view(len(xs), 1, -1)``; ``nn.LSTM``, ``nn.GRU``,
``nn.RNN``, any ``num_layers``, ``bidirectional``) of a stacked list whose length differs per instance is a
segment node per instance (``acrobat.runtime.plan.RecurrentOp``): the node holds the instance's rows and its
initial state, if one is given. A launch gathers the rows of all its nodes, ``(N, ...)``, splits them into the
instances' sequences and makes ONE call of the user's module over
``torch.nn.utils.rnn.pack_sequence(..., enforce_sorted=False)``; ``pad_packed_sequence`` and a length mask give
the output rows back in node order, and ``h_n`` (``c_n``) one per node. Beyond the paper's §3 language, like the
other segment operators (``acrobat.runtime.segments``); it runs in PyTorch (outside any Inductor kernel) on both
backends, and autograd runs through it (the module's own parameters take the gradients).

Each instance's rows have one shape, ``(E,)`` (the unbatched call: a ``(T, E)`` sequence, ``h_n`` of shape
``(layers * dirs, H)``; or, ``RecurrentOp.lead``, a ``(1, T, E)`` input of a ``batch_first`` module, ``h_n`` of shape
``(layers * dirs, 1, H)``) or ``(k, E)`` (a ``(T, k, E)`` input of a module that is not ``batch_first``: ``k``
sequences of length T, ``h_n`` of shape ``(layers * dirs, k, H)``), as PyTorch reads the stacked tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence

from acrobat.errors import AcrobatError, LimitError, ShapeError
from acrobat.runtime.dfg import Group
from acrobat.runtime.gather import gather
from acrobat.runtime.plan import BlockCode, RecurrentOp
from acrobat.runtime.stats import timed

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime

#: The recurrent modules a stacked list may be given to, by class name (``RecurrentOp.op``).
RECURRENT: dict[str, type[nn.RNNBase]] = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}


def recurrent_kind(module: Any) -> str | None:
    """The class name (``"LSTM"``, ``"GRU"``, ``"RNN"``) of a recurrent module whose call is torch's own
    ``forward`` (a subclass that overrides it is not one), else None."""
    for name, cls in RECURRENT.items():
        if isinstance(module, cls) and type(module).forward is cls.forward:
            return name
    return None


def recurrent_reference(op: RecurrentOp) -> Callable[..., tuple[Any, ...]]:
    """What a node of ``op`` computes for one instance (plain PyTorch): ``module(torch.stack(rows), hx)`` with
    ``hx`` its ``op.states`` state tensors (none: zeros), flattened to ``(output rows, h_n[, c_n])``; with
    ``op.lead``, ``module(torch.stack(rows).unsqueeze(0), hx)`` and the rows of ``out[0]``."""
    def run(rows: list[torch.Tensor], *rest: Any) -> tuple[Any, ...]:
        *states, module = rest
        hx = None if not states else states[0] if len(states) == 1 else tuple(states)
        x = torch.stack(rows)
        out, h = module(x.unsqueeze(0) if op.lead else x, hx)
        return (list(out[0] if op.lead else out), *(h if isinstance(h, tuple) else (h,)))
    run.__name__ = f"packed_{op.op}"
    return run


class RecurrentKernel:
    """The batched launch of a recurrent node group: ``(N, ...)`` rows and ``(B, ...)`` states in; the
    ``(N, ...)`` output rows and ``(B, ...)`` final states out (see the module docstring).

    Raises (when called):
        ShapeError: an instance's rows or state do not fit the module (names the instance and source line);
            a ``static_limit`` where PyTorch would run it but acrobat does not (a ``batch_first`` module given
            ``(T, k, E)``, or one without ``batch_first`` given ``(1, T, E)``: the batch axis is the list axis),
            which ``Program.run`` reruns in the dynamic tier.
    """

    def __init__(self, block: BlockCode):
        assert isinstance(block.segment, RecurrentOp)
        self.block = block
        self.op: RecurrentOp = block.segment

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        module = rt.shared[self.block.id][0]
        handles = np.frombuffer(g.tensors, dtype=np.int64)
        lengths = [n for (n,) in g.hosts]
        s = self.op.states
        ends = np.cumsum(np.array(lengths) + s)
        starts = ends - s - np.array(lengths)
        rows = np.concatenate([handles[a:a + n] for a, n in zip(starts, lengths)]) if s else handles
        try:
            x = timed(rt.stats, "gather_ms", rt.sync, lambda: gather(rt.table, rows, rt.device))
            states = [gather(rt.table, handles[starts + np.array(lengths) + j], rt.device) for j in range(s)]
            return timed(rt.stats, "kernel_ms", rt.sync, lambda: packed_call(module, x, lengths, states, self.op.lead))
        except AcrobatError:
            raise
        except Exception as exc:  # noqa: BLE001 - named by the instance whose sequence fails alone
            raise self.diagnose(g, rt, module, starts, lengths, exc) from exc

    def diagnose(self, g: Group, rt: "Runtime", module: nn.Module, starts: np.ndarray, lengths: list[int],
                 exc: Exception) -> ShapeError:
        """The instance whose sequence fails alone (else the first), with the error PyTorch gives it."""
        handles = g.tensors
        run = recurrent_reference(self.op)
        found: tuple[int, Exception] = (g.insts[0], exc)
        for inst, a, n in zip(g.insts, starts, lengths):
            try:
                values = [rt.table.tensor(int(h)) for h in handles[a:a + n + self.op.states]]
                check_rows(module, values[:n], values[n:], self.op.lead)
                run(values[:n], *values[n:], module)
            except Exception as failed:  # noqa: BLE001 - reported with its location
                found = (inst, failed)
                break
        inst, e = found
        err = ShapeError(f"instance {inst}: nn.{self.op.op} over a stacked list: {type(e).__name__}: {e}\n"
                         f"{self.block.where()}", instance=inst)
        if isinstance(e, LimitError):  # the static tier's limit (Program.run reruns it in the dynamic tier)
            err.static_limit = "a limit of the static tier"  # type: ignore[attr-defined]
        return err


def check_rows(module: nn.Module, rows: list[torch.Tensor], states: list[torch.Tensor], lead: bool) -> None:
    """Check that ``module`` reads the stack of ``rows`` with the list axis as its time axis, and that the initial
    ``states`` have the rank PyTorch wants for that input (``lead``: the stack has a unit axis in front,
    ``(1, T, E)``).

    Raises:
        LimitError: the rows are ``(k, E)`` and the module is ``batch_first`` (the list axis would be its batch);
            the stack has a unit axis in front and the module is not ``batch_first`` (its batch would be the list
            axis).
        RuntimeError: a state of another rank (PyTorch raises too), or a ``(1, T, k, E)`` input.
    """
    first = getattr(module, "batch_first", False)
    if rows and rows[0].dim() == 2 and first and not lead:
        raise LimitError(f"a batch_first module given a stacked list of {tuple(rows[0].shape)} rows reads the list "
                         "axis as its batch: give it the rows themselves, torch.stack(xs) of shape (T, E), or use "
                         "a module without batch_first on torch.stack(xs).unsqueeze(1)")
    if lead and not first:
        raise LimitError("a module without batch_first given torch.stack(xs).unsqueeze(0), of shape (1, T, E), reads "
                         "the list axis as its batch (T sequences of length 1): give a batch_first module that "
                         "input, or this module torch.stack(xs).unsqueeze(1)")
    if lead and rows and rows[0].dim() != 1:
        raise RuntimeError(f"a recurrent module takes 2-D or 3-D input, got {rows[0].dim() + 2}-D (1, T, "
                           f"{', '.join(map(str, rows[0].shape))})")
    want = rows[0].dim() + 1 + int(lead) if rows else None
    for s in states:
        if want is not None and s.dim() != want:
            raise RuntimeError(f"for {want - 1}-D input the initial state must be {want}-D, got {s.dim()}-D "
                               f"{tuple(s.shape)}")


def packed_call(module: nn.Module, x: torch.Tensor, lengths: list[int],
                states: list[torch.Tensor], lead: bool = False) -> tuple[torch.Tensor, ...]:
    """``module`` over the sequences of ``x`` in one call over a packed sequence.

    ``x`` is ``(N, E)`` or ``(N, k, E)``: the rows of B instances, instance after instance (``lengths``, ``(B,)``
    Python ints summing to N, each at least 1); ``states`` the B instances' initial states stacked, each
    ``(B, L*D, H)`` (``(B, L*D, k, H)`` for ``(N, k, E)`` rows or ``lead``), none for zeros. ``lead``: each
    instance's input is ``(1, T, E)`` to a ``batch_first`` module. Returns the output rows ``(N, D*H)``
    (``(N, k, D*H)``) in the same order, then the final states ``(B, L*D, H)`` (``(B, L*D, k, H)``; ``lead``:
    ``(B, L*D, 1, H)``): ``h_n``, and ``c_n`` for an LSTM. Out of place (autograd works).

    Raises:
        LimitError, RuntimeError: see ``check_rows``; PyTorch's own errors (an input or state of the wrong size).
    """
    b, unbatched = len(lengths), x.dim() == 2
    check_rows(module, [x[0]], [s[0] for s in states], lead)
    k = 1 if unbatched else x.shape[1]
    seqs = x.split(lengths) if unbatched else [s for part in x.split(lengths) for s in part.unbind(1)]
    packed = pack_sequence(seqs, enforce_sorted=False)
    hx = [s.reshape(b, s.shape[1], k, -1).transpose(0, 1).reshape(s.shape[1], b * k, -1) for s in states]
    out, h = module(packed, None if not hx else hx[0] if len(hx) == 1 else tuple(hx))
    padded, _ = pad_packed_sequence(out, batch_first=True)  # (B*k, T_max, D*H)
    t_max = padded.shape[1]
    padded = padded.reshape(b, k, t_max, -1).transpose(1, 2)  # (B, T_max, k, D*H)
    mask = torch.arange(t_max, device=x.device)[None] < torch.tensor(lengths, device=x.device)[:, None]
    rows = padded[mask]  # (N, k, D*H), instance after instance
    # contiguous: an instance's row of a transposed state is no view-compatible tensor (`h_n.view(-1)` raises)
    finals = [f.reshape(f.shape[0], b, k, -1).transpose(0, 1).contiguous()
              for f in (h if isinstance(h, tuple) else (h,))]
    if unbatched:
        return (rows.squeeze(1), *(f if lead else f.squeeze(2) for f in finals))
    return (rows, *finals)

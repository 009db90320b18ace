"""Padded functions: a user's function over stacked lists, run once per launch on padded tensors (issue 18 §2).

A program function given stacked lists (``torch.stack(xs)``, ``emb(torch.tensor(tokens))``: a length L per
instance) whose body the row-wise analysis rejects (attention over the list axis: ``q @ k.transpose(-2, -1)``,
``softmax(dim=-1)``, ``x.view(L, heads, dh).transpose(0, 1)``) is a *padded function*
(``acrobat.analysis.padded`` decides it, as ``acrobat.analysis.regions`` decides a dynamic region). Its call is
one segment node per instance (``Runtime.padded``: the rows of each stacked-list argument, its per-instance
tensors, its host and shared values), and a launch (``PaddedKernel``) runs the user's own function ONCE over all
the launch's instances: each stacked list as a ``(B, Lmax, ...)`` ``Padded`` value with its true lengths, each
per-instance tensor as ``(B, ...)``, through the allowlisted rules of ``acrobat.runtime.padding``. A result whose
only padded axis is dim 0 goes back as a stacked list (its rows, unpadded), one without padded axes as a
per-instance tensor. Any operator without a rule raises ``LimitError``: the batch reruns in the dynamic tier,
exact (``Program.run``). Autograd runs through the launch; it runs in PyTorch on both backends, as the segment
operators do (``acrobat.runtime.segments``).

Beyond the paper: §3's language has no tensors of per-instance shape and §4.1 batches the nodes of one static
block, never a user's whole function over padded data; the padding rules are this repository's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from acrobat.diagnosis import mark_limit
from acrobat.errors import AcrobatError, InstanceError, LimitError, ShapeError
from acrobat.runtime.dfg import OUTPUT_STEP, Group, Handle
from acrobat.runtime.gather import gather
from acrobat.runtime.padding import Lengths, Padded
from acrobat.runtime.plan import BlockCode, PaddedOp
from acrobat.runtime.stats import timed

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime


def padded_node(rt: "Runtime", block: BlockCode, d: int, args: tuple) -> tuple[Any, int]:
    """Add the running instance's node of padded function ``block`` at depth ``d`` (its arguments ``args`` in
    the function's parameter order); its result (handles: a list of row handles per stacked-list item, one
    handle per tensor item) and the depth counter past it.

    Raises:
        InstanceError: a stacked-list argument is empty (PyTorch cannot stack it either).
    """
    op = block.segment
    assert isinstance(op, PaddedOp)
    rows: list[Handle] = []
    dense: list[Handle] = []
    lengths: list[int] = []
    hosts: list[Any] = []
    for a, role in zip(args, op.roles):
        if role == "rows":
            if not a:
                raise mark_limit(InstanceError(f"instance {rt.dfg.inst}: the padded function `{op.op}` "
                                               f"({op.where}) is given an empty stacked list", rt.dfg.inst))
            rows.extend(a)
            lengths.append(len(a))
        elif role == "tensor":
            dense.append(a)
        else:
            hosts.append(a if role == "shared" else rt.snapshot(a))
    g = rt.dfg.group(d, block.id)
    first = len(g.tensor_buf) // 8
    row = rt.dfg.node_hosts(d, block.id, (tuple(lengths), *hosts), *rows, *dense) - g.base
    out = [[g.base + k * OUTPUT_STEP + first + j for j in range(lengths[0])] if ragged
           else g.base + k * OUTPUT_STEP + row for k, ragged in enumerate(op.ragged)]
    return (out[0] if op.arity is None else tuple(out)), d + 1


class PaddedKernel:
    """The batched launch of a padded function's group: its nodes split by their host values (one call each,
    usually one), the user's function called once per part on padded values; outputs ``(handles, ...)`` for
    a stacked-list item (each node's rows where its handles lie), ``(B, ...)`` for a per-instance one.

    Raises (when called):
        ShapeError: ``static_limit`` set: an operator without a padding rule (``LimitError``), a result of
            another form than the compile assumed, or the batched call failing (``Program.run`` lets plain calls
            judge: the instance's own error, or a rerun in the dynamic tier).
    """

    def __init__(self, block: BlockCode):
        assert isinstance(block.segment, PaddedOp)
        self.block = block
        self.op: PaddedOp = block.segment

    def __call__(self, g: Group, rt: "Runtime") -> tuple[torch.Tensor, ...]:
        handles = np.frombuffer(g.tensors, dtype=np.int64)
        hosts = list(g.hosts)
        lengths = np.array([h[0] for h in hosts], dtype=np.int64).reshape(len(hosts), -1)
        per_node = lengths.sum(1) + self.op.roles.count("tensor")
        starts = np.cumsum(per_node) - per_node
        parts: list[tuple[list[int], tuple]] = []
        for i, h in enumerate(hosts):
            part = next((p for p in parts if _same(p[1], h[1:])), None)
            if part is None:
                parts.append(([i], h[1:]))
            else:
                part[0].append(i)
        try:
            results = [(nodes, self.launch(rt, handles, np.array(nodes), starts, lengths, extra))
                       for nodes, extra in parts]
            return timed(rt.stats, "kernel_ms", rt.sync,
                         lambda: self.assemble(results, len(hosts), len(handles), starts, lengths))
        except AcrobatError:
            raise
        except Exception as exc:  # noqa: BLE001 - a rule's limit or the batched call failing: plain calls judge
            err = ShapeError(f"instance {g.insts[0]}: the padded function `{self.op.op}` ({self.op.where}) over "
                             f"padded stacked lists: {type(exc).__name__}: {exc}\n{self.block.where()}",
                             instance=g.insts[0])
            err.static_limit = "a limit of the padded function"  # type: ignore[attr-defined]
            raise err from exc

    def launch(self, rt: "Runtime", handles: np.ndarray, nodes: np.ndarray, starts: np.ndarray,
               lengths: np.ndarray, extra: tuple) -> list[torch.Tensor]:
        """The user's function once over ``nodes`` (their handles from ``starts``; ``lengths`` ``(B, lists)``);
        per result item its rows ``(N, ...)`` (a stacked list) or ``(b, ...)`` values (a tensor)."""
        values: list[Any] = []
        extras = iter(extra)
        seen: dict[tuple, Lengths] = {}
        j = t = 0
        for role in self.op.roles:
            if role == "rows":
                offset = lengths[nodes, :j].sum(1)
                n = lengths[nodes, j]
                idx = np.concatenate([np.arange(s + o, s + o + k) for s, o, k in zip(starts[nodes], offset, n)])
                x = timed(rt.stats, "gather_ms", rt.sync, lambda: gather(rt.table, handles[idx], rt.device))
                key = tuple(n.tolist())
                ln = seen.get(key)
                if ln is None:
                    ln = seen[key] = Lengths(torch.tensor(n, device=x.device), int(n.max()))
                data = pad_sequence(list(x.split(key)), batch_first=True)
                values.append(Padded(data, (ln,) + (None,) * (x.dim() - 1)))
                j += 1
            elif role == "tensor":
                idx = starts[nodes] + lengths[nodes].sum(1) + t
                x = gather(rt.table, handles[idx], rt.device)
                values.append(Padded(x, (None,) * (x.dim() - 1)))
                t += 1
            else:
                values.append(next(extras))
        out = timed(rt.stats, "kernel_ms", rt.sync, lambda: self.op.call(values))
        items = (out,) if self.op.arity is None else out
        if not isinstance(items, tuple) or len(items) != len(self.op.ragged):
            raise LimitError(f"it returned {type(out).__name__}, where its `return` statements give "
                             f"{len(self.op.ragged)} value(s)")
        first = seen[tuple(lengths[nodes, 0].tolist())]
        return [self.unpad(x, ragged, first, len(nodes)) for x, ragged in zip(items, self.op.ragged)]

    @staticmethod
    def unpad(x: Any, ragged: bool, first: Lengths, b: int) -> torch.Tensor:
        """A result item as the static program takes it: the valid rows of a stacked list (dim 0 padded by the
        first stacked-list argument's lengths, no other padded axis), or a per-instance tensor ``(b, ...)``.

        Raises:
            LimitError: the item has another form."""
        if isinstance(x, torch.Tensor) and not ragged:
            return x.unsqueeze(0).expand(b, *x.shape)
        if not isinstance(x, Padded):
            raise LimitError(f"it returned {type(x).__name__} where a tensor was expected")
        if not ragged:
            if any(t is not None for t in x._tags):
                raise LimitError("it returned a value with a padded axis where the compile expected a per-instance "
                                 "tensor (reduce the list axis, or return the stacked list itself)")
            return x._batched
        if not x._tags or x._tags[0] is None or any(t is not None for t in x._tags[1:]) or \
                not torch.equal(x._tags[0].t, first.t):
            raise LimitError("it returned a value whose padded axes are not dim 0 alone, with the first stacked "
                             "list's lengths, where the compile expected a stacked list")
        return x._batched[first.mask(0, 1)]  # (N, ...): the valid rows, instance after instance

    def assemble(self, results: list, b: int, n_handles: int, starts: np.ndarray,
                 lengths: np.ndarray) -> tuple[torch.Tensor, ...]:
        """The group's outputs from the parts' results: a stacked-list item's rows at its nodes' handle
        positions, a tensor item's values at its nodes' rows."""
        outs = []
        for k, ragged in enumerate(self.op.ragged):
            if len(results) == 1 and (not ragged or n_handles == lengths[:, 0].sum()):
                outs.append(results[0][1][k])  # one part, the rows' handles are all the group's: in place
                continue
            values = torch.cat([r[k] for _, r in results])
            nodes = np.concatenate([np.array(n) for n, _ in results])
            if ragged:
                pos = np.concatenate([np.arange(starts[i], starts[i] + lengths[i, 0]) for i in nodes])
                size = n_handles
            else:
                pos, size = nodes, b
            at = torch.as_tensor(pos, device=values.device)
            outs.append(values.new_zeros((size, *values.shape[1:])).index_copy(0, at, values))
        return tuple(outs)


def _same(a: tuple, b: tuple) -> bool:
    """Whether two nodes' host values are the same (shared values by identity, host data by ``==``)."""
    return len(a) == len(b) and all(x is y or type(x) is type(y) and not isinstance(x, torch.nn.Module) and
                                    _equal(x, y) for x, y in zip(a, b))


def _equal(x: Any, y: Any) -> bool:
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001 - values without a plain equality are different
        return False

"""Row lookups of a shared table by per-instance ints, with sparse gradients on request.

A block that reads ``p.emb[node.word_id]`` (a shared weight indexed by a
per-instance host int) calls ``lookup(p.emb, word_id)``: under
``torch.func.vmap`` one row per DFG node, gathered from the table in one
operator. Inside ``sparse_grads()`` (``Program.run(..., sparse_grads=True)``),
while autograd records into the table, the lookup is
``F.embedding(i, W, sparse=True)``: the table's gradient is a sparse COO
tensor holding only the rows looked up, as ``nn.Embedding(sparse=True)``
gives, instead of a dense ``(V, E)`` gradient zero-filled and scattered
into, so an optimizer with a sparse path (``torch.optim.SparseAdam``,
``Adagrad``, ``SGD``) updates only those rows, as DyNet's lookup parameters do.
Outside it the lookup is ``W[i]``, plain PyTorch's dense gradient.
"""

from __future__ import annotations

from typing import ContextManager, Sequence

import torch
import torch.nn.functional as F

from acrobat.runtime.flags import ThreadFlag

_SPARSE = ThreadFlag()  # a thread's runs (fibers are greenlets of the thread: they share it)


def sparse_grads(on: bool = True) -> ContextManager[None]:
    """Within the block, ``lookup`` of a 2-D table that requires grad gives it a sparse gradient (``on``)."""
    return _SPARSE.set(on)


def sparse_on() -> bool:
    """Whether this thread runs within ``sparse_grads()`` (lookups may give sparse gradients)."""
    return _SPARSE.on()


def lookup(table: torch.Tensor | Sequence[torch.Tensor], index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for an int64 ``index`` (a per-instance host int as a 0-d tensor, or a tensor of
    them): rows of shape ``(*index.shape, E)`` of a ``(V, E)`` table.

    Within ``sparse_grads()``, with grad mode on and ``table`` requiring grad, computed as
    ``F.embedding(index, table, sparse=True)`` (negative indices count from the end, as indexing does).

    ``table`` may also be a sequence of equally shaped tensors (an ``nn.ParameterList``, a list attribute of
    the parameters, ``p.biases[node.kind]``): its items are stacked into a ``(V, *item)`` table first, whose
    rows under ``vmap`` are the items each instance picks (indexing the sequence itself by a batched index
    would read the index as a Python int, which ``vmap`` cannot).

    Raises:
        IndexError: an index out of range (PyTorch's error, as ``table[index]`` raises).
        RuntimeError: the sequence's items differ in shape (``torch.stack``'s error; the instances picking
            them cannot share a launch).
    """
    if not isinstance(table, torch.Tensor):
        return torch.stack(list(table))[index]
    if (_SPARSE.on() and table.dim() == 2 and table.requires_grad and torch.is_grad_enabled()
            and index.dtype == torch.int64):
        return F.embedding(torch.where(index < 0, index + table.shape[0], index), table, sparse=True)
    return table[index]

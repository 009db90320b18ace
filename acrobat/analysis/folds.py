"""``torch.cat`` of a list whose length is per-instance host data, as a left fold of two-operand concatenations.

``torch.cat(kids)`` of ``kids = [self.encode(a) for a in e.args]`` (an expression tree's children),
``torch.cat(viterbivars_t)`` of a list filled in a loop: the list's length is host data of each instance, so no
static block has a fixed set of operands for it (a block takes one tensor per parameter). Concatenation is
associative and moves values without arithmetic, so ``torch.cat(xs, dim)`` equals ``cat_items(dim)(xs)``:
``xs[0]``, then ``torch.cat([acc, x], dim)`` for each later item, each a static block whose launches batch the
instances at the same item across the batch (§4.1: the fold's iterations are depths). The call rule
``rules._cat_of_list`` makes the call so where the stacking rewrite (``rules._cat_of_unit_items``) does not apply;
the analysis reads ``cat_items`` like any program function (issue 18 §2, beyond the paper's §3 language).
"""

from __future__ import annotations

import torch

from acrobat.program import Function, function


def cat_items(dim: int) -> Function:
    """The program function ``xs -> torch.cat(xs, dim)`` for a non-empty list ``xs`` of tensors that agree on
    every axis but ``dim`` (the result's ``dim`` axis is the sum of the items'), one per ``dim`` (a constant of
    its code, as a static block needs it): ``xs[0]``, then ``torch.cat([acc, x], dim)`` for each later item.
    A list of one item gives ``torch.cat([xs[0]], dim)``, as PyTorch's checks of the item (a 0-D item, ``dim``
    out of range: RuntimeError, IndexError) and its copy come only from the call. Calling it with an empty ``xs``
    raises IndexError (PyTorch's ``torch.cat([])`` a RuntimeError)."""
    found = _FOLDS.get(dim)
    if found is None:
        def cat_fold(xs):  # type: ignore[no-untyped-def]
            if len(xs) == 1:
                return torch.cat([xs[0]], dim)
            acc = xs[0]
            for i in range(1, len(xs)):
                acc = torch.cat([acc, xs[i]], dim)
            return acc
        found = _FOLDS[dim] = function(cat_fold)
    return found


_FOLDS: dict[int, Function] = {}

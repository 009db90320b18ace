"""Random operators: the calls in a model that draw random numbers.

Run alone, every instance of a model draws its own random numbers, so a
random operator is per-instance even when its operands are constants or
shared values (``torch.randn(4)``, ``F.dropout(p.W, 0.1, training=True)``):
the kind analysis never makes it a shared value computed once per run
(``acrobat.analysis.kinds``). Batched, the backends run blocks through
``torch.func.vmap(..., randomness="different")``, so each row of a launch
(each DFG node) draws its own numbers.

A random operator reached through an ``nn.Module`` (``p.drop(x)`` with
``p.drop = nn.Dropout(...)``) is only known to be random at run time; it is
per-instance whenever one of its operands is, which is how such modules are
used (a module applied to shared values only is computed once per run).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from acrobat.frontend import ir

#: torch functions that draw random numbers (by identity).
RANDOM_FUNCTIONS = dict.fromkeys((
    torch.rand, torch.randn, torch.randint, torch.rand_like, torch.randn_like, torch.randint_like,
    torch.randperm, torch.bernoulli, torch.multinomial, torch.normal, torch.poisson,
    torch.dropout, torch.alpha_dropout, torch.feature_dropout, torch.feature_alpha_dropout,
    F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout,
    F.gumbel_softmax, F.rrelu,
), True)

#: tensor methods that draw random numbers (in-place ones like ``uniform_`` are rejected anyway).
RANDOM_METHODS = frozenset({"bernoulli", "multinomial"})


def is_random(call: ir.Call) -> bool:
    """Whether ``call`` is a torch operator or tensor method known to draw random numbers."""
    match call.kind:
        case ir.CallKind.TORCH:
            return bool(ir.known(RANDOM_FUNCTIONS, call.target))
        case ir.CallKind.METHOD:
            return call.target in RANDOM_METHODS
    return False

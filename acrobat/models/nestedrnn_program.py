"""The NestedRNN as an acrobat program (same math as ``acrobat.models.nestedrnn``).

Both loops carry a tensor, so their iterations run at consecutive depths;
the inner loop's input projection does not depend on the recurrence and is
hoisted (App. A.1).
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.function
def inner_rnn(x, h, steps, p):
    """``steps`` RNN steps from state ``h`` with the (already projected) input ``x``."""
    for _ in range(steps):
        h = torch.tanh(x + h @ p.U_h)
    return h


@ab.program
def nestedrnn(inst, p):
    """Logits (C,) of one ``NestedInstance``; ``p`` is a ``NestedRNNParams``."""
    g = p.g0
    for tok, m in zip(inst.tokens, inst.inner):
        h = inner_rnn(p.emb[tok] @ p.W_x + p.b_x, g, m, p)
        z = torch.sigmoid(h @ p.W_z + g @ p.U_z + p.b_z)
        r = torch.sigmoid(h @ p.W_r + g @ p.U_r + p.b_r)
        n = torch.tanh(h @ p.W_n + (r * g) @ p.U_n + p.b_n)
        g = (1 - z) * n + z * g
    return g @ p.W_out + p.b_out

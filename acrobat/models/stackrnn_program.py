"""The StackRNN parser as an acrobat program (same math as ``acrobat.models.stackrnn``).

The action is the argmax of computed scores: tensor-dependent control flow,
so every sentence runs on a fiber and waits for its scores (§4.2); the two
actions run different operators, and ghost operators keep them at equal
depths (§4.1). The next action's scores are computed with the new state, in
its block (the reference computes them only where it reads them; the
results are the same): one launch per step fewer.
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.program
def stackrnn(tokens, p):
    """(logits (C,), final phrase (H,)) of one sentence; ``p`` is a ``StackRNNParams``."""
    stack = []
    h = p.h0
    action = torch.argmax(h @ p.W_act + p.b_act)
    i = 0
    while i < len(tokens) or len(stack) > 1:
        shift = i < len(tokens) and (len(stack) < 2 or int(action) == 0)
        if shift:
            top = torch.tanh(p.emb[tokens[i]] @ p.W_s + p.b_s)
            i = i + 1
        else:
            r = stack.pop()
            l = stack.pop()
            top = torch.tanh(torch.cat([l, r]) @ p.W_c + p.b_c)
        stack.append(top)
        h = torch.tanh(top @ p.W_h + h @ p.U_h + p.b_h)
        action = torch.argmax(h @ p.W_act + p.b_act)
    return h @ p.W_out + p.b_out, stack[0]

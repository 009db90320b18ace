"""StackRNN: a StackLSTM-style shift-reduce parser with RNN cells (paper Table 4).

The parser reads a sentence (token ids) with a stack of phrase vectors and
a parser state ``h`` (``H = hidden``). Each step scores the two actions
from the state, ``argmax(h @ W_act + b_act)`` (random weights stand in for
a trained parser), and runs different tensor operators per action:

* SHIFT (action 0, forced while fewer than two phrases are on the stack):
  push ``s = tanh(emb[tok] @ W_s + b_s)``, then ``h = tanh(s @ W_h + h @ U_h + b_h)``;
* REDUCE (action 1, forced once the sentence is read): pop ``r`` then
  ``l``, push ``c = tanh(cat([l, r]) @ W_c + b_c)``, then
  ``h = tanh(c @ W_h + h @ U_h + b_h)``.

It stops when the sentence is read and one phrase is left; the result is
``(h @ W_out + b_out, final phrase)``. REDUCE runs two dependent operators
where SHIFT runs one: ghost operators line the branches up (§4.1).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter


class StackRNNParams(nn.Module):
    """Drawn from ``Generator().manual_seed(seed)`` in this order: ``emb`` (V, H) std 0.1, ``h0`` (H,) std 0.1,
    ``W_act`` (H, 2), ``b_act`` (2,), ``W_s`` (H, H), ``b_s``, ``W_c`` (2H, H), ``b_c``, ``W_h``, ``U_h``
    (H, H), ``b_h``, ``W_out`` (H, C), ``b_out`` (C,); matrices std ``1/sqrt(fan_in)``, biases std 0.01.
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        self.h0 = seeded_parameter(gen, hidden, scale=0.1)
        self.W_act = seeded_matrix(gen, hidden, 2)
        self.b_act = seeded_bias(gen, 2)
        self.W_s = seeded_matrix(gen, hidden, hidden)
        self.b_s = seeded_bias(gen, hidden)
        self.W_c = seeded_matrix(gen, 2 * hidden, hidden)
        self.b_c = seeded_bias(gen, hidden)
        self.W_h = seeded_matrix(gen, hidden, hidden)
        self.U_h = seeded_matrix(gen, hidden, hidden)
        self.b_h = seeded_bias(gen, hidden)
        self.W_out = seeded_matrix(gen, hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def stackrnn_reference(tokens: list[int], p: StackRNNParams) -> tuple[Tensor, Tensor]:
    """Plain per-instance parse: (logits (C,), final phrase (H,))."""
    stack: list[Tensor] = []
    h = p.h0
    i = 0
    while i < len(tokens) or len(stack) > 1:
        shift = i < len(tokens) and (len(stack) < 2 or int(torch.argmax(h @ p.W_act + p.b_act)) == 0)
        if shift:
            top = torch.tanh(p.emb[tokens[i]] @ p.W_s + p.b_s)
            i += 1
        else:
            r, l = stack.pop(), stack.pop()
            top = torch.tanh(torch.cat([l, r]) @ p.W_c + p.b_c)
        stack.append(top)
        h = torch.tanh(top @ p.W_h + h @ p.U_h + p.b_h)
    return h @ p.W_out + p.b_out, stack[0]

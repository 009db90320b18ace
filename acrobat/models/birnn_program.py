"""The BiRNN as an acrobat program: written for ONE sentence, run batched.

Same math and parameters as ``acrobat.models.birnn``. ``rnn`` is called
with the forward and the backward weights, so the kind analysis
specializes it twice (code duplication for parameter reuse, App. B.1);
the two directions are concurrent (§4.1); each step's input projection
does not depend on the recurrence and is hoisted (App. A.1); the per-token
output layer reads both directions, so it is a program phase of its own
and runs for every token of every sentence in one launch (§4.1).
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.function
def rnn(tokens, emb, d):
    """States after each token, a list of (H,) tensors; ``d`` is an ``RNNDirection``."""
    h = d.h0
    states = []
    for tok in tokens:
        h = torch.tanh(emb[tok] @ d.W + d.b + h @ d.U)
        states.append(h)
    return states


@ab.program
def birnn(tokens, p):
    """Per-token logits of one sentence: a list of (C,) tensors; ``p`` is a ``BiRNNParams``."""
    fw, bw = ab.concurrent(rnn(tokens, p.emb, p.fwd), rnn(list(reversed(tokens)), p.emb, p.bwd))
    n = len(tokens)
    out = []
    for t in range(n):
        out.append(torch.cat([fw[t], bw[n - 1 - t]]) @ p.W_out + p.b_out)
    return out

"""Berxit as an acrobat program (same math as ``acrobat.models.berxit``).

Every layer call passes the same shared weights, so the layer's blocks take
them unbatched (parameter reuse, §5.1); the exit test reads a computed
confidence, so instances run on fibers and leave the batch one by one
(§4.2), while the ones still running keep batching layer by layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.function
def encoder_layer(x, p):
    """One transformer layer on ``x`` (L, H) with the shared layer weights."""
    q = (x @ p.Wq + p.bq).reshape(-1, p.heads, p.head_dim).transpose(0, 1)
    k = (x @ p.Wk + p.bk).reshape(-1, p.heads, p.head_dim).transpose(0, 1)
    v = (x @ p.Wv + p.bv).reshape(-1, p.heads, p.head_dim).transpose(0, 1)
    a = (torch.softmax(q @ k.transpose(1, 2) / p.scale, dim=-1) @ v).transpose(0, 1).reshape(-1, p.hidden)
    x = F.layer_norm(x + a @ p.Wo + p.bo, (p.hidden,), p.ln1_w, p.ln1_b)
    return F.layer_norm(x + F.gelu(x @ p.W1 + p.b1) @ p.W2 + p.b2, (p.hidden,), p.ln2_w, p.ln2_b)


@ab.program
def berxit(inst, p):
    """(exit logits (2,), layers run) for one ``BerxitInstance``; ``p`` is a ``BerxitParams``."""
    x = p.emb[inst.tokens] + p.pos
    layer = 0
    done = False
    while not done:
        x = encoder_layer(x, p)
        logits = x[0] @ p.W_exit + p.b_exit
        layer = layer + 1
        done = layer == p.layers or torch.softmax(logits, 0).max().item() > inst.threshold(layer)
    return logits, layer

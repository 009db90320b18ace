"""The MV-RNN as an acrobat program (same math as ``acrobat.models.mvrnn``).

``B @ a`` multiplies two per-instance tensors; the batched block does it as
one batched matmul over all nodes at a depth (DyNet's heuristics cannot).
"""

from __future__ import annotations

import torch

import acrobat as ab
from acrobat.models.mvrnn import MAT_BUCKETS


@ab.function
def mv_node(node, p):
    """(vector (H,), matrix (H, H)) of the subtree at ``node``."""
    if node.is_leaf:
        return p.emb[node.word_id], p.mat_emb[node.word_id % MAT_BUCKETS]
    (a, A), (b, B) = ab.concurrent(mv_node(node.left, p), mv_node(node.right, p))
    v = torch.tanh(torch.cat([B @ a, A @ b]) @ p.W + p.b)
    return v, p.W_M @ torch.cat([A, B])


@ab.program
def mvrnn(tree, p):
    """Logits (C,) of one tree; ``p`` is an ``MVRNNParams``."""
    v, m = mv_node(tree, p)
    return v @ p.W_out + p.b_out

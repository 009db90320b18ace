"""MV-RNN (Socher et al. 2012, "Semantic Compositionality through Recursive
Matrix-Vector Spaces"), one of the tree models of the paper's evaluation
(Table 4): every node carries a vector and a matrix, and combining two
children multiplies each child's matrix with the other child's vector, a
matmul of two per-instance tensors (which DyNet cannot batch, paper §6.2).

Per node (``H = hidden``, vectors 1-D):

* leaf with word id ``w``: ``a = emb[w]``, ``A = mat_emb[w % MAT_BUCKETS]``;
* internal node with children ``(a, A)``, ``(b, B)``::

      v = tanh(cat([B @ a, A @ b]) @ W + bias)        # (H,)
      M = W_M @ cat([A, B])                           # (H, 2H) @ (2H, H) -> (H, H)

The result for one tree is ``root_v @ W_out + b_out`` (num_classes,).

Word matrices are hashed into ``MAT_BUCKETS`` buckets: one (H, H) matrix per
SST word would take 1.3 GB at H = 128.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from acrobat.data.tree import Tree
from acrobat.models.levels import tree_levels
from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter

MAT_BUCKETS = 64
"""Number of distinct leaf matrices (word id modulo this)."""

SIZES: dict[str, int] = {"small": 64, "large": 128}
"""MV-RNN hidden sizes (paper §6.1)."""


class MVRNNParams(nn.Module):
    """MV-RNN parameters, ``H = hidden``, drawn from ``Generator().manual_seed(seed)`` in this order:
    ``emb`` (V, H) std 0.1; ``mat_emb`` (MAT_BUCKETS, H, H) identity + N(0, 0.01);
    ``W`` (2H, H) and ``b`` (H,); ``W_M`` (H, 2H) std ``1/sqrt(2H)``; ``W_out`` (H, C), ``b_out`` (C,).
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        noise = seeded_parameter(gen, MAT_BUCKETS, hidden, hidden, scale=0.01)
        self.mat_emb = nn.Parameter(noise.detach() + torch.eye(hidden))
        self.W = seeded_matrix(gen, 2 * hidden, hidden)
        self.b = seeded_bias(gen, hidden)
        self.W_M = nn.Parameter(seeded_matrix(gen, 2 * hidden, hidden).detach().T.contiguous())
        self.W_out = seeded_matrix(gen, hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def _node(tree: Tree, p: MVRNNParams) -> tuple[Tensor, Tensor]:
    if tree.is_leaf:
        return p.emb[tree.word_id], p.mat_emb[tree.word_id % MAT_BUCKETS]
    a, A = _node(tree.left, p)  # type: ignore[arg-type]
    b, B = _node(tree.right, p)  # type: ignore[arg-type]
    v = torch.tanh(torch.cat([B @ a, A @ b]) @ p.W + p.b)
    return v, p.W_M @ torch.cat([A, B])


def mvrnn_reference(tree: Tree, p: MVRNNParams) -> Tensor:
    """Plain per-instance MV-RNN: logits (num_classes,) of one tree."""
    v, _ = _node(tree, p)
    return v @ p.W_out + p.b_out


def mvrnn_hand_batched(trees: list[Tree], p: MVRNNParams) -> list[Tensor]:
    """MV-RNN on a mini-batch, batched by hand level by level (the expert floor).

    All leaves in one gather each for vectors and matrices; then per height
    level one batched matmul pair ``B @ a``, ``A @ b`` (``torch.bmm``), one
    dense layer and one ``W_M @ [A; B]`` over every node of that level.
    Returns per tree the logits (num_classes,), as :func:`mvrnn_reference`.
    """
    if not trees:
        return []
    levels, row = tree_levels(trees)
    H = p.hidden
    vecs = p.emb.new_empty(len(row), H)
    mats = p.emb.new_empty(len(row), H, H)
    dev = p.emb.device
    ids = torch.tensor([leaf.word_id for leaf in levels[0]], device=dev)
    n = len(levels[0])
    vecs[:n] = p.emb.index_select(0, ids)
    mats[:n] = p.mat_emb.index_select(0, ids % MAT_BUCKETS)
    start = n
    for level in levels[1:]:
        n = len(level)
        left = torch.tensor([row[node.left] for node in level], device=dev)  # type: ignore[index]
        right = torch.tensor([row[node.right] for node in level], device=dev)  # type: ignore[index]
        a, A = vecs.index_select(0, left), mats.index_select(0, left)
        b, B = vecs.index_select(0, right), mats.index_select(0, right)
        ba = torch.bmm(B, a.unsqueeze(-1)).squeeze(-1)
        ab = torch.bmm(A, b.unsqueeze(-1)).squeeze(-1)
        vecs[start:start + n] = torch.tanh(torch.addmm(p.b, torch.cat([ba, ab], 1), p.W))
        mats[start:start + n] = torch.matmul(p.W_M, torch.cat([A, B], 1))
        start += n
    roots = vecs.index_select(0, torch.tensor([row[t] for t in trees], device=dev))
    return list(torch.addmm(p.b_out, roots, p.W_out).unbind(0))

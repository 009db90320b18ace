"""Binary constituency Tree-LSTM (Tai et al. 2015, "Improved Semantic
Representations From Tree-Structured Long Short-Term Memory Networks", §3.2),
one of the tree models of the ACRoBat paper's evaluation (Table 4).

This module holds the model's parameters and two plain-PyTorch
implementations that the auto-batched acrobat program is checked and timed
against:

* :func:`treelstm_reference` runs one tree, one node and one op at a time;
* :func:`treelstm_hand_batched` is what an expert writes by hand: every leaf of
  every tree in one batched op, then the internal nodes level by level.

Per node (all vectors 1-D, ``H = hidden``):

* leaf with word id ``w``::

      x = emb[w]; i, o, u = chunk(x @ W_iou + b_iou, 3)
      c = sigmoid(i) * tanh(u); h = sigmoid(o) * tanh(c)

* internal node with children ``(lh, lc)``, ``(rh, rc)``::

      hc = cat([lh, rh]); i, o, u = chunk(hc @ U_iou + b_iou, 3)
      fl, fr = chunk(sigmoid(hc @ U_f + b_f), 2)
      c = sigmoid(i) * tanh(u) + fl * lc + fr * rc; h = sigmoid(o) * tanh(c)

The result for one tree is ``(root_h @ W_out + b_out, root_h)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from acrobat.data.tree import Tree
from acrobat.models.levels import tree_levels
from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter


class TreeLSTMParams(nn.Module):
    """Parameters of the binary Tree-LSTM (Tai et al. 2015), ``H = hidden``.

    Drawn from ``torch.Generator().manual_seed(seed)`` in this order:

    * ``emb``: (vocab_size, H), std 0.1
    * ``W_iou``: (H, 3H); ``b_iou``: (3H,) -- leaf input/output/update gates
    * ``U_iou``: (2H, 3H) -- internal-node gates from ``cat([lh, rh])``
    * ``U_f``: (2H, 2H); ``b_f``: (2H,) -- the left and right forget gates
    * ``W_out``: (H, num_classes); ``b_out``: (num_classes,) -- root classifier

    Matrices have std ``1 / sqrt(fan_in)``, biases std 0.01.
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        self.W_iou = seeded_matrix(gen, hidden, 3 * hidden)
        self.b_iou = seeded_bias(gen, 3 * hidden)
        self.U_iou = seeded_matrix(gen, 2 * hidden, 3 * hidden)
        self.U_f = seeded_matrix(gen, 2 * hidden, 2 * hidden)
        self.b_f = seeded_bias(gen, 2 * hidden)
        self.W_out = seeded_matrix(gen, hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def _node(tree: Tree, p: TreeLSTMParams) -> tuple[Tensor, Tensor]:
    """``(h, c)`` of ``tree``'s root, each of shape (hidden,)."""
    if tree.is_leaf:
        x = p.emb[tree.word_id]
        i, o, u = torch.chunk(x @ p.W_iou + p.b_iou, 3)
        c = torch.sigmoid(i) * torch.tanh(u)
    else:
        lh, lc = _node(tree.left, p)  # type: ignore[arg-type]
        rh, rc = _node(tree.right, p)  # type: ignore[arg-type]
        hc = torch.cat([lh, rh])
        i, o, u = torch.chunk(hc @ p.U_iou + p.b_iou, 3)
        fl, fr = torch.chunk(torch.sigmoid(hc @ p.U_f + p.b_f), 2)
        c = torch.sigmoid(i) * torch.tanh(u) + fl * lc + fr * rc
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def treelstm_reference(tree: Tree, p: TreeLSTMParams) -> tuple[Tensor, Tensor]:
    """Run the Tree-LSTM on one tree, one node at a time (recursive, post-order).

    Returns ``(logits, h)``: logits (num_classes,) of the root and the root's
    hidden state h (hidden,).
    """
    h, _ = _node(tree, p)
    return h @ p.W_out + p.b_out, h


def treelstm_hand_batched(trees: list[Tree], p: TreeLSTMParams) -> list[tuple[Tensor, Tensor]]:
    """Run the Tree-LSTM on a mini-batch of trees, batched by hand.

    All leaves of all trees go through one embedding gather and one matmul;
    then each height level of internal nodes (across all trees) is one gather
    of the children's ``h``/``c`` rows from a (num_nodes, hidden) row store,
    two matmuls and the elementwise cell; finally all roots are classified in
    one matmul. The index lists are built in Python up front, so no tensor op
    runs per node. Autograd works (no ``no_grad`` is forced).

    Returns, per tree and in order, ``(logits, h)`` as
    :func:`treelstm_reference` does: shapes (num_classes,) and (hidden,).
    """
    if not trees:
        return []
    h_store, row = _hand_batched_states(trees, p, 0.0)
    root_idx = torch.tensor([row[t] for t in trees], dtype=torch.long, device=h_store.device)
    root_h = h_store.index_select(0, root_idx)
    logits = torch.addmm(p.b_out, root_h, p.W_out)
    return list(zip(logits.unbind(0), root_h.unbind(0)))


def treelstm_hand_batched_nodes(trees: list[Tree], p: TreeLSTMParams, dropout: float) -> list[Tensor]:
    """The all-node training form of :func:`treelstm_hand_batched` (``acrobat.models.train_programs.
    treelstm_nodes`` by hand): per tree its nodes' logits (nodes, num_classes) in post-order, with
    dropout of rate ``dropout`` on the word vectors and on the states fed to the classifier, which
    classifies every node of every tree in one matmul."""
    if not trees:
        return []
    h_store, row = _hand_batched_states(trees, p, dropout)
    order = [row[n] for t in trees for n in post_order(t)]
    states = h_store.index_select(0, torch.tensor(order, dtype=torch.long, device=h_store.device))
    logits = torch.addmm(p.b_out, F.dropout(states, dropout, training=dropout > 0), p.W_out)
    return list(logits.split([t.size() for t in trees]))


def post_order(tree: Tree) -> list[Tree]:
    """The nodes of ``tree``: left subtree, right subtree, node."""
    out: list[Tree] = []
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if done or node.left is None:
            out.append(node)
        else:
            stack += [(node, True), (node.right, False), (node.left, False)]  # type: ignore[list-item]
    return out


def _hand_batched_states(trees: list[Tree], p: TreeLSTMParams, dropout: float) -> tuple[Tensor, dict[Tree, int]]:
    """Every node's ``h`` as a (num_nodes, hidden) row store, and each node's row: leaves in one launch,
    then internal nodes level by level (dropout of rate ``dropout`` on the word vectors)."""
    levels, row = tree_levels(trees)
    H = p.hidden
    device = p.emb.device
    h_store = p.emb.new_empty(len(row), H)
    c_store = p.emb.new_empty(len(row), H)

    word_ids = torch.tensor([leaf.word_id for leaf in levels[0]], dtype=torch.long, device=device)
    x = F.dropout(p.emb.index_select(0, word_ids), dropout, training=dropout > 0)
    i, o, u = torch.addmm(p.b_iou, x, p.W_iou).chunk(3, dim=1)
    c = torch.sigmoid(i) * torch.tanh(u)
    n = len(levels[0])
    c_store[:n] = c
    h_store[:n] = torch.sigmoid(o) * torch.tanh(c)

    start = n
    for level in levels[1:]:
        n = len(level)
        child_rows = [r for node in level for r in (row[node.left], row[node.right])]  # type: ignore[index]
        idx = torch.tensor(child_rows, dtype=torch.long, device=device)
        hc = h_store.index_select(0, idx).view(n, 2 * H)  # rows [lh, rh]
        cc = c_store.index_select(0, idx).view(n, 2 * H)  # rows [lc, rc]
        i, o, u = torch.addmm(p.b_iou, hc, p.U_iou).chunk(3, dim=1)
        fc = torch.sigmoid(torch.addmm(p.b_f, hc, p.U_f)) * cc
        c = torch.sigmoid(i) * torch.tanh(u) + fc[:, :H] + fc[:, H:]
        c_store[start : start + n] = c
        h_store[start : start + n] = torch.sigmoid(o) * torch.tanh(c)
        start += n
    return h_store, row

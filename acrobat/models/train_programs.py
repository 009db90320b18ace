"""Training variants of the SST models: a classifier at every node (all-node labels), with dropout.

The fine-grained SST setup (Socher et al. 2013; Tai et al. 2015) puts a
loss at every node of a tree, each node labelled with the sentiment of its
phrase. These programs return one logits vector (C,) per node, in post-order
(left subtree, right subtree, node: the root last), over the same
parameters as the benchmark programs (``acrobat.models.treelstm``,
``mvrnn``, ``birnn``), which keep their root-only outputs. ``p.dropout``
(a float set on the parameter module) is the dropout rate of the word
vectors and of the states fed to the classifier; every instance draws its
own masks. Evaluation runs the benchmark programs (no dropout): their
logits are the root's.

For BiRNN, a sentence, the nodes are its tokens (each labelled with its
word's leaf label) and then the sentence, classified from the final states
of both directions (labelled with the root label).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import acrobat as ab
from acrobat.data.tree import Tree
from acrobat.models.mvrnn import MAT_BUCKETS
from acrobat.models.treelstm import post_order


@ab.function
def treelstm_cell(node, p):
    """(h, c) of ``node`` (H,) each, and the h of every node of its subtree in post-order."""
    if node.is_leaf:
        x = F.dropout(p.emb[node.word_id], p.dropout, training=True)
        i, o, u = torch.chunk(x @ p.W_iou + p.b_iou, 3)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c, [h]
    (lh, lc, ls), (rh, rc, rs) = ab.concurrent(treelstm_cell(node.left, p), treelstm_cell(node.right, p))
    hc = torch.cat([lh, rh])
    i, o, u = torch.chunk(hc @ p.U_iou + p.b_iou, 3)
    fl, fr = torch.chunk(torch.sigmoid(hc @ p.U_f + p.b_f), 2)
    c = torch.sigmoid(i) * torch.tanh(u) + fl * lc + fr * rc
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c, ls + rs + [h]


@ab.program
def treelstm_nodes(tree, p):
    """Logits (C,) of every node of ``tree``, post-order; ``p`` is a ``TreeLSTMParams`` with ``dropout``."""
    h, c, states = treelstm_cell(tree, p)
    return [F.dropout(s, p.dropout, training=True) @ p.W_out + p.b_out for s in states]


@ab.function
def mvrnn_cell(node, p):
    """(vector (H,), matrix (H, H)) of ``node`` and the vector of every node of its subtree, post-order."""
    if node.is_leaf:
        v = F.dropout(p.emb[node.word_id], p.dropout, training=True)
        return v, p.mat_emb[node.word_id % MAT_BUCKETS], [v]
    (a, A, xs), (b, B, ys) = ab.concurrent(mvrnn_cell(node.left, p), mvrnn_cell(node.right, p))
    v = torch.tanh(torch.cat([B @ a, A @ b]) @ p.W + p.b)
    return v, p.W_M @ torch.cat([A, B]), xs + ys + [v]


@ab.program
def mvrnn_nodes(tree, p):
    """Logits (C,) of every node of ``tree``, post-order; ``p`` is an ``MVRNNParams`` with ``dropout``."""
    v, m, vectors = mvrnn_cell(tree, p)
    return [F.dropout(x, p.dropout, training=True) @ p.W_out + p.b_out for x in vectors]


@ab.function
def birnn_states(tokens, p, d):
    """States after each token (H,) of one direction ``d`` (an ``RNNDirection``), dropout on the inputs."""
    h = d.h0
    states = []
    for tok in tokens:
        h = torch.tanh(F.dropout(p.emb[tok], p.dropout, training=True) @ d.W + d.b + h @ d.U)
        states.append(h)
    return states


@ab.program
def birnn_nodes(tokens, p):
    """Logits (C,) of every token, then of the sentence (from both directions' final states)."""
    fw, bw = ab.concurrent(birnn_states(tokens, p, p.fwd), birnn_states(list(reversed(tokens)), p, p.bwd))
    n = len(tokens)
    out = []
    for t in range(n):
        out.append(F.dropout(torch.cat([fw[t], bw[n - 1 - t]]), p.dropout, training=True) @ p.W_out + p.b_out)
    out.append(F.dropout(torch.cat([fw[n - 1], bw[n - 1]]), p.dropout, training=True) @ p.W_out + p.b_out)
    return out


def tree_node_labels(tree: Tree) -> list[int]:
    """The labels of ``tree``'s nodes in post-order (the order of ``treelstm_nodes``' logits)."""
    return [node.label for node in post_order(tree)]


def sentence_node_labels(tree: Tree) -> list[int]:
    """Per token its leaf label, then the root label (the order of ``birnn_nodes``' logits)."""
    return [leaf.label for leaf in tree.leaves()] + [tree.label]

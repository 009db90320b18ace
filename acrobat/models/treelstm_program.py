"""The TreeLSTM as an acrobat program: written for ONE tree, run batched.

Same math and parameters as ``acrobat.models.treelstm`` (Tai et al. 2015).
The two recursive calls are marked concurrent (instance parallelism, §4.1);
the leaf cell depends only on the word, so it is hoisted (App. A.1) and
all leaves of a batch run as one launch; the classifier at the root is a
program phase of its own (§4.1).
"""

from __future__ import annotations

import torch

import acrobat as ab


@ab.function
def tree_cell(node, p):
    """(h, c), each of shape (H,), for the subtree rooted at ``node``."""
    if node.is_leaf:
        x = p.emb[node.word_id]
        i, o, u = torch.chunk(x @ p.W_iou + p.b_iou, 3)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c
    (lh, lc), (rh, rc) = ab.concurrent(tree_cell(node.left, p), tree_cell(node.right, p))
    hc = torch.cat([lh, rh])
    i, o, u = torch.chunk(hc @ p.U_iou + p.b_iou, 3)
    fl, fr = torch.chunk(torch.sigmoid(hc @ p.U_f + p.b_f), 2)
    c = torch.sigmoid(i) * torch.tanh(u) + fl * lc + fr * rc
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


@ab.program
def treelstm(tree, p):
    """(logits (C,), root h (H,)) of one tree; ``p`` is a ``TreeLSTMParams``."""
    h, c = tree_cell(tree, p)
    return h @ p.W_out + p.b_out, h

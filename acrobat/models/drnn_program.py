"""The DRNN as an acrobat program (same math as ``acrobat.models.drnn``).

Whether a node has a child and a sibling is read from computed tensors:
instances run on fibers (§4.2), and the child's and the sibling's subtrees
are concurrent calls, run on child fibers so they still batch. Both
decision probabilities are computed with the node's state, in one static
block, before either is read: one sync point per node, where computing each
under its own condition (as the per-instance reference does; the results are
the same) makes two blocks at two depths and two sync points.
"""

from __future__ import annotations

import torch

import acrobat as ab
from acrobat.models.drnn import MAX_DEPTH, MAX_WIDTH


@ab.function
def grow(ha, hf, depth, width, position, inst, p):
    """Labels of the node at ``position`` and of everything generated below and after it."""
    h = torch.tanh(ha @ p.U_a + hf @ p.U_f + p.b_h)
    label = h @ p.W_out + p.b_out
    p_child = torch.sigmoid(h @ p.w_c + p.b_c)
    p_sibling = torch.sigmoid(h @ p.w_s + p.b_s)
    labels = [label]
    child = depth < MAX_DEPTH and p_child.item() > inst.uniform(position, 0)
    sibling = width < MAX_WIDTH and p_sibling.item() > inst.uniform(position, 1)
    if child and sibling:
        below, after = ab.concurrent(grow(h, p.h0, depth + 1, 0, 2 * position, inst, p),
                                     grow(ha, h, depth, width + 1, 2 * position + 1, inst, p))
        labels = labels + below + after
    elif child:
        labels = labels + grow(h, p.h0, depth + 1, 0, 2 * position, inst, p)
    elif sibling:
        labels = labels + grow(ha, h, depth, width + 1, 2 * position + 1, inst, p)
    return labels


@ab.program
def drnn(inst, p):
    """Node labels (each (C,)) of the tree generated for ``inst`` (a ``DRNNInstance``)."""
    return grow(p.emb[inst.token], p.h0, 0, 0, 1, inst, p)

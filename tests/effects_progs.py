"""Models whose host code has effects: lists mutated by callees, shared host objects, in-place updates.

Each once returned a wrong answer with no error (issue 10, section 1). They
live in a real .py file because acrobat reads their source with ``inspect``;
lines the tests look up carry a ``# M:<key>`` marker comment.
"""

# ruff: noqa
from __future__ import annotations

import torch

import acrobat as ab


# ------------------------------------------------ a list mutated by a callee


@ab.function
def visit(node, p, outs):
    """Appends one classifier output per node to the caller's list, post-order."""
    if node.is_leaf:
        h = torch.tanh(p.emb[node.word_id])
    else:
        hl = visit(node.left, p, outs)
        hr = visit(node.right, p, outs)
        h = torch.tanh((hl + hr) @ p.W)
    outs.append(h @ p.V)
    return h


@ab.program
def every_node(tree, p):
    """A classifier at every node, collected by the recursion into one list."""
    outs = []
    visit(tree, p, outs)
    return outs


@ab.function
def leaf_states(node, p, outs):
    """Appends the leaves' states through an alias of the list it was given."""
    if node.is_leaf:
        acc = outs
        acc.append(torch.tanh(p.emb[node.word_id]))
    else:
        leaf_states(node.left, p, outs)
        leaf_states(node.right, p, outs)


@ab.program
def aliased_list(tree, p):
    """The list is filled through a callee's alias; a second alias is returned with it."""
    outs = []
    same = outs
    leaf_states(tree, p, outs)
    return same, len(outs)


@ab.program
def nested_lists(tree, p):
    """Lists of lists: a tensor appended to an inner list reached by a loop variable."""
    rows = [[], []]
    for row in rows:
        row.append(torch.tanh(p.emb[tree.word_id if tree.is_leaf else 0]))
    return rows


@ab.program
def host_then_tensor(tree, p):
    """Host ints and tensors meet in one list only through a callee: rejected, never mixed up."""
    outs = [0]
    visit(tree, p, outs)
    return outs


# ------------------------------------------ host side effects under fibers


@ab.function
def number_leaves(node, p, counter):
    """Numbers the leaves left to right through a shared counter; reads a tensor value (fibers)."""
    if node.is_leaf:
        k = len(counter)
        counter.append(k)  # M:counter
        h = p.emb[node.word_id] * (k + 1)
        if h.sum() > 0:
            h = -h
        return h
    l, r = ab.concurrent(number_leaves(node.left, p, counter), number_leaves(node.right, p, counter))
    return torch.tanh(l @ p.W + r)


@ab.program
def numbered(tree, p):
    counter = []
    return number_leaves(tree, p, counter)


@ab.function
def pure_walk(node, p):
    """No host side effects: its concurrent calls may run as child fibers."""
    if node.is_leaf:
        h = p.emb[node.word_id]
        if h.sum() > 0:
            h = -h
        return h
    l, r = ab.concurrent(pure_walk(node.left, p), pure_walk(node.right, p))
    return torch.tanh(l @ p.W + r)


@ab.program
def pure_tree(tree, p):
    return pure_walk(tree, p)


# ------------------------------------------------ augmented assignment


@ab.program
def aug_param(tok, p):
    """`h += x` on a parameter mutates it in PyTorch."""
    h = p.b
    h += p.emb[tok]  # M:aug_param
    return h


@ab.program
def aug_host(toks, p):
    """`n += 1` on host numbers is plain Python."""
    n = 0
    h = p.b
    for t in toks:
        n += 1
        h = torch.tanh(h @ p.W + p.emb[t])
    return h * n


# ------------------------------------------------------------- float64


@ab.program
def scaled64(item, p):
    """A per-instance Python float in a float64 model."""
    tok, scale = item
    return p.emb[tok] * scale + p.b


# ---------------------------------------------- lists acrobat cannot follow


@ab.function
def first_of(pair):
    return pair[0]


@ab.program
def untracked_list(tree, p):
    """The list comes back out of a call's result and is then changed: rejected at compile time."""
    outs = []
    same = first_of((outs, 0))
    same.append(torch.tanh(p.emb[0]))  # M:untracked
    return outs


@ab.program
def untracked_fixed(tree, p):
    """The fix the error names: change the list through the variable that holds it."""
    outs = []
    outs.append(torch.tanh(p.emb[0]))
    return outs


@ab.program
def mutate_param(tok, p):
    """Changing a model parameter in place: rejected."""
    p.log.append(tok)  # M:mutate_param
    return p.emb[tok]


@ab.program
def aug_local_fixed(tok, p):
    """The fix the `+=` error names."""
    h = p.emb[tok] @ p.W
    h = h + p.b
    return h


@ab.function
def collect(node, p, outs):
    """`outs += [...]` extends the caller's list in place, as in Python."""
    if node.is_leaf:
        outs += [torch.tanh(p.emb[node.word_id])]
    else:
        collect(node.left, p, outs)
        collect(node.right, p, outs)


@ab.program
def extended(tree, p):
    outs = []
    collect(tree, p, outs)
    return outs


@ab.program
def host_number_tensor(item, p):
    """`torch.tensor` of a per-instance host number inside a block (a batched number under vmap)."""
    tok, scale = item
    return p.emb[tok] * torch.tensor(scale) + torch.as_tensor(tok)


@ab.program
def legacy_constructor_tensors(item, p):
    """`torch.LongTensor([tok])`, `torch.FloatTensor([scale])` (PyTorch's legacy constructors, as tutorials write
    them) of per-instance host numbers inside a block."""
    tok, scale = item
    return p.emb[tok] * torch.FloatTensor([scale, 1.0]).sum() + torch.LongTensor([tok]) + torch.DoubleTensor([scale])

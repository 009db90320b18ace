"""Models for tests/test_stmt_regions.py: tree and sequence models whose entry holds one construct the static
tier rejects, in one statement or loop, the rest static (``acrobat.analysis.outline``). Each runs as plain Python
per instance.
"""

# ruff: noqa
from __future__ import annotations

import torch

import acrobat as ab
from tests.region_progs import Node, Params, random_tree, tree_of  # noqa: F401  (the tests build these)


class Scope:
    """A context manager of the user's own (not torch's): the static tier takes `with torch.no_grad()` only."""

    def __enter__(self) -> "Scope":
        return self

    def __exit__(self, *exc) -> bool:
        return False


@ab.function
def encode(node, p):
    if node.left is None or node.right is None:
        return torch.tanh(p.emb[node.word])
    l, r = ab.concurrent(encode(node.left, p), encode(node.right, p))
    return torch.tanh(torch.cat([l, r]) @ p.W + p.b)


# -- one rejected statement in the entry: that statement becomes a region ------------------------------------


@ab.program
def tree_with(node, p):
    """A `with` of a non-torch context manager after a static tree encoder."""
    h = encode(node, p)
    with Scope():
        h = torch.sigmoid(h @ p.U) * h
    return torch.tanh(h @ p.U + p.b)


@ab.program
def seq_try(tokens, p):
    """`try`/`except` in an RNN loop: the `try` statement is the region, the rest of the loop body static."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        x = torch.tanh(p.emb[t] @ p.U + h)
        try:
            x = x * (1.0 / (t - 3))
        except ZeroDivisionError:
            x = -x
        h = x + 0.5 * h
    return h @ p.U


@ab.program
def seq_isinstance(tokens, p):
    """`isinstance` of a tensor in a branch: the `if` statement is the region."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        x = torch.tanh(p.emb[t] @ p.U + h)
        if isinstance(x, torch.Tensor) and t % 2 == 0:
            x = x * 2.0
        h = x
    return h @ p.U


@ab.program
def seq_with_raises(tokens, p):
    """A `with` whose body fails for the token 9 (the error names this file's line)."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        with Scope():
            if t == 9:
                raise ValueError("token nine")
            h = torch.tanh(p.emb[t] @ p.U + h)
    return h


# -- the smallest statement cannot be outlined: the enclosing loop is the region ---------------------------------


@ab.program
def tree_dict_loop(node, p):
    """A record dict filled field by field in a loop (constant keys: the static tier takes records as one display):
    the item store writes a dict made outside it (no region), so the loop that makes the dict is the region; the
    tree encoder before it stays static."""
    h = encode(node, p)
    for k in range(3):
        parts = {}
        parts["g"] = torch.tanh(h @ p.U) * (k % 2 + 1)
        h = parts["g"] + 0.1 * h
    return h


@ab.program
def seq_try_host(tokens, p):
    """`try` binding a float read after it (host data cannot be a region's result): the loop is the region."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        x = torch.tanh(p.emb[t] @ p.U + h)
        try:
            s = 1.0 / (t - 3)
        except ZeroDivisionError:
            s = 0.0
        h = x * s + h
    return h @ p.U


# -- no statement can be outlined: the whole program runs in the dynamic tier, as before -------------------------


@ab.program
def refuse_return(tokens, p):
    """A `return` inside the rejected `try` and its loop."""
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        try:
            h = torch.tanh(p.emb[t] @ p.U + h)
        except IndexError:
            return h
    return h @ p.U


@ab.program
def refuse_stacked_list(tokens, p):
    """A list of per-token tensors (a stacked list) would cross into and out of the `try` region."""
    hs = []
    for t in tokens:
        try:
            hs = hs + [torch.tanh(p.emb[t])]
        except IndexError:
            pass
    return torch.stack(hs).sum(0)


@ab.program
def refuse_lambda(tokens, p):
    """A lambda stored then called: the statement binds a function read after it (no region result)."""
    act = lambda v: torch.relu(v) - 0.5 * v
    h = torch.zeros(4, dtype=p.W.dtype)
    for t in tokens:
        h = act(torch.tanh(p.emb[t] @ p.U + h))
    return h


TREES = {"with": tree_with, "dict loop": tree_dict_loop}
SEQUENCES = {"try": seq_try, "isinstance": seq_isinstance, "try host": seq_try_host}
#: program -> the text that starts the statement outlined into its region
OUTLINED = {tree_with: "with Scope():", seq_try: "try:", seq_isinstance: "if isinstance(", tree_dict_loop: "for k in",
            seq_try_host: "for t in tokens:"}
REFUSED = {"return": refuse_return, "stacked list": refuse_stacked_list, "lambda": refuse_lambda}

"""Models for tests/test_port_constructs.py: constructs the public models of ``ports/`` use (issue 18, section 2),
each the way those authors wrote them: a module-level dict, list or tuple of host data read in the model
(``target2index['</s>']``), and a variable rebound from host data to a tensor (``inputs = self.emb(inputs)``).
Each runs as plain Python per instance.
"""

# ruff: noqa
from __future__ import annotations

import torch
from torch import nn

import acrobat as ab


class Params(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(10, 4, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(4, 4, generator=g) * 0.5)
        self.out = nn.Linear(4, 10)
        self.embed = nn.Embedding(10, 4)


VOCAB = {"<s>": 1, "</s>": 0, "<UNK>": 9}
"""A vocabulary kept at module level, as notebooks keep ``word2index``."""
SIZES = (2, 3)
"""Module-level sizes (a tuple)."""
SCALES = [0.5, 2.0, 1.0]
"""Module-level numbers (a list); ``test_port_constructs`` rebinds it between runs."""


@ab.program
def global_vocab(tokens, p):
    h = p.emb[VOCAB["<s>"]]
    for t in tokens:
        if t == VOCAB["</s>"]:
            break
        h = torch.tanh((h + p.emb[t if t in VOCAB.values() else VOCAB["<UNK>"]]) @ p.W)
    return h


@ab.program
def global_sizes(tokens, p):
    h = p.emb[tokens[0]]
    for i in range(SIZES[0] + len(tokens) % SIZES[1]):
        h = torch.tanh(h @ p.W) * SCALES[i % len(SCALES)]
    return h


@ab.program
def greedy_until_end(tokens, p):
    # a decoder that stops when it writes the end symbol, read from the global vocabulary (nmt_attention's loop)
    h = p.emb[tokens[0]]
    out = []
    decoded = VOCAB["<s>"]
    while decoded != VOCAB["</s>"] and len(out) < 6:
        h = torch.tanh((h + p.emb[decoded]) @ p.W)
        score = p.out(h)
        out.append(score)
        decoded = int(score.argmax())
    return out


@ab.program
def rebound_parameter(tokens, p):
    # `x = self.emb(x)`: the variable holds the instance's last id, then its embedding
    last = tokens[-1]
    last = p.embed(torch.tensor(last))
    h = last
    for t in tokens:
        h = torch.tanh((h + p.emb[t]) @ p.W)
    return h + last


@ab.function
def encode(ids, p):
    ids = p.emb[ids[0]] + p.emb[ids[-1]]
    ids = torch.tanh(ids @ p.W)
    return ids


@ab.program
def rebound_twice(tokens, p):
    # rebound in a called function, and here: host list -> list of tensors -> a tensor
    h = encode(tokens, p)
    tokens = [p.emb[t] for t in tokens]
    tokens = torch.stack(tokens).sum(0)
    return h + tokens


@ab.program
def rebound_in_branch(tokens, p):
    # rebound inside an `if`: host data before it, a tensor after it (a join of paths: rejected, M:branch)
    x = tokens[0]
    if len(tokens) > 2:
        x = p.emb[x] * 2.0  # M:branch
    else:
        x = p.emb[x]
    return x


@ab.program
def rebound_in_branch_fixed(tokens, p):
    x = tokens[0]
    if len(tokens) > 2:
        h = p.emb[x] * 2.0
    else:
        h = p.emb[x]
    return h


class TreeEncoder(nn.Module):
    """A submodule whose ``forward`` recurses over the instance's tree (treelstm.pytorch's ``ChildSumTreeLSTM``)."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    @ab.function
    def forward(self, tree, inputs):
        if isinstance(tree, int):
            return inputs[tree]
        return torch.tanh(self.cell(self.forward(tree[0], inputs) + self.forward(tree[1], inputs)))


class Similarity(nn.Module):
    """A module holding the tree encoder as an attribute and calling it by that name (``SimilarityTreeLSTM``)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.encoder = TreeEncoder()
        self.head = nn.Linear(8, 3)

    @ab.function
    def forward(self, ltree, linputs, rtree, rinputs):
        linputs = self.emb(linputs)
        rinputs = self.emb(rinputs)
        lstate = self.encoder(ltree, linputs)
        rstate = self.encoder(rtree, rinputs)
        return torch.log_softmax(self.head(torch.cat([lstate * rstate, (lstate - rstate).abs()])), -1)


@ab.program
def similarity(pair, model):
    ltree, linputs, rtree, rinputs = pair
    return model(ltree, linputs, rtree, rinputs)


TABLE = [torch.ones(4)]
"""A module-level list of tensors: not host data (rejected: pass it in as a model parameter)."""


@ab.program
def global_tensors(tokens, p):
    return p.emb[tokens[0]] + TABLE[0]  # M:tensors


@ab.program
def rebound_in_else(tokens, p):
    # rebound twice inside one branch: a list, then the tensor made of it (the Child-Sum TreeLSTM's
    # `child_c, child_h = zip(*states)` then `child_c = torch.cat(child_c)`): the span is its own version
    if len(tokens) == 1:
        h = p.emb[tokens[0]]
    else:
        h = [p.emb[t] for t in tokens]
        h = torch.stack(h).sum(0)
    return torch.tanh(h @ p.W)


@ab.program
def list_name_reused(tokens, p):
    # `row` names a list built and changed in one loop, then the items of `reversed(rows)` in another (the
    # Viterbi decoder's `bptrs_t`): a version per loop, so the list changed is one the analysis follows
    rows = []
    for t in tokens:
        row = []
        for j in range(2):
            row.append((t + j) % 10)
        rows.append(row)
    acc = p.emb[0]
    for row in reversed(rows):
        acc = torch.tanh(acc @ p.W + p.emb[row[1]])
    return acc


@ab.program
def cat_of_list(tokens, p):
    # torch.cat of a list variable (filled in a loop over a shared length): a fold of two-operand cats
    vals = []
    for j in range(3):
        vals.append(p.emb[(tokens[0] + j) % 10] * float(j + 1))
    wide = torch.cat(vals)
    cols = torch.cat([v.view(1, -1) for v in vals], dim=1)
    return torch.tanh(wide[:4] + wide[8:] + cols[0, 4:8])


class Tree:
    """A node of a tree of word ids, as treelstm.pytorch's ``Tree``: ``word`` and ``children``."""

    def __init__(self, word, children):
        self.word, self.children = word, children


class ChildSum(nn.Module):
    """treelstm.pytorch's ``ChildSumTreeLSTM`` as its authors wrote it (scripts/survey/childsum_treelstm.py): the
    children's ``(1, H)`` states unzipped and concatenated (``torch.cat(child_c, dim=0)``), a leaf's
    ``torch.zeros(1, H)`` in the other branch, and the forget gate's ``self.fx(x).repeat(len(child_h), 1)``."""

    def __init__(self, vocab=10, dim=4, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.ioux = nn.Linear(dim, 3 * dim)
        self.iouh = nn.Linear(dim, 3 * dim)
        self.fx = nn.Linear(dim, dim)
        self.fh = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, classes)
        self.dim = dim

    def node_forward(self, x, child_c, child_h):
        child_h_sum = torch.sum(child_h, dim=0, keepdim=True)
        iou = self.ioux(x) + self.iouh(child_h_sum)
        i, o, u = torch.split(iou, iou.size(1) // 3, dim=1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
        f = torch.sigmoid(self.fh(child_h) + self.fx(x).repeat(len(child_h), 1))
        fc = torch.mul(f, child_c)
        c = torch.mul(i, u) + torch.sum(fc, dim=0, keepdim=True)
        h = torch.mul(o, torch.tanh(c))
        return c, h

    @ab.function
    def forward(self, tree):
        states = [self.forward(ch) for ch in tree.children]
        if len(states) == 0:
            child_c = torch.zeros(1, self.dim)
            child_h = torch.zeros(1, self.dim)
        else:
            child_c, child_h = zip(*states)
            child_c, child_h = torch.cat(child_c, dim=0), torch.cat(child_h, dim=0)
        x = self.emb(torch.tensor([tree.word]))
        return self.node_forward(x, child_c, child_h)


@ab.program
def childsum(tree, model):
    c, h = model(tree)
    return torch.log_softmax(model.out(h), dim=1)


@ab.program
def unzipped_wide_items(tokens, p):
    # `torch.cat` of unzipped (2, 2) items: each adds two rows, not the one a stacked list takes from a (1, ...)
    # item, which a run-time check finds (the static tier's limit: the dynamic tier runs the instance)
    states = [(p.emb[t].view(2, 2), p.emb[t]) for t in tokens]
    cs, hs = zip(*states)
    return torch.tanh(torch.cat(cs, dim=0).sum(0))


@ab.program
def repeat_of_two_rows(tokens, p):
    # `t.repeat(len(S), 1)` of a (2, 4) `t`: two rows per copy, not the one row `t[0]` a stacked list takes, which a
    # run-time check finds (the static tier's limit: the dynamic tier runs the instance)
    S = torch.stack([p.emb[t] for t in tokens])
    t = torch.tanh(p.emb[:2] * p.emb[tokens[0]])
    return (S.sum(0) + t.repeat(len(S), 1).sum(0)).sum()


# -- treelstm.pytorch's ChildSumTreeLSTM as its authors wrote it (ports/treelstm/model.py) ---------------------------


@ab.program
def star_instance(pair, p):
    # `f(*pair)` of the instance, a tuple of (tokens, scale, tokens): its arity is a fact of the run's batch
    return mix(*pair, p)


@ab.function
def mix(a, s, b, p):
    h = p.emb[a[0]] * s
    for t in b:
        h = torch.tanh(h @ p.W + p.emb[t])
    return h


@ab.program
def star_any(pair, p):
    # `f(p, *pair)` into a function taking `*ids`: batches of each arity compile apart; a batch mixing them
    # is the static tier's limit
    return total(p, *pair)  # M:star


@ab.function
def total(p, *ids):
    h = p.emb[0]
    for i in ids:
        h = torch.tanh(h @ p.W + p.emb[i])
    return h


@ab.program
def mapped_lambda(tokens, p):
    # `map(lambda ...)` consumed where it stands: `list(map(...))`, `sum(map(...))` and `*map(...)`
    rows = list(map(lambda t: p.emb[t] * 2.0, tokens))
    total = sum(map(lambda r: torch.tanh(r @ p.W), rows))
    firsts, seconds = zip(*map(lambda t: (p.emb[t], p.emb[(t + 1) % 10]), tokens))
    return total + torch.stack(firsts).sum(0) - torch.stack(seconds).max(0)[0]


@ab.program
def new_filled(tokens, p):
    # a new tensor filled in place on the spot: `x.new(1, 4).fill_(v)`, `.zero_()`, `.requires_grad_()`
    h = p.emb[tokens[0]].detach().new(1, 4).fill_(0.5).requires_grad_()
    z = p.emb[tokens[-1]].new(2, 4).zero_()
    for t in tokens:
        h = torch.tanh((h + p.emb[t]) @ p.W)
    return h + z.sum(0) + p.emb[0].new_zeros(4).requires_grad_()


@ab.program
def embedded_sentence(pair, p):
    # an embedding of the instance's int tensor, of a length that differs per instance, read by position
    tokens, first = pair
    xs = p.embed(tokens)
    h = xs[first] + xs[0]
    for i in range(len(xs)):
        h = torch.tanh(h @ p.W + xs[i])
    return h + xs.sum(0)


@ab.program
def repeat_of_a_vector(tokens, p):
    # `t.repeat(len(S), 1)` of a 1-D `t`: repeat reads it as (1, H), so each row is `t` itself
    S = torch.stack([p.emb[t] for t in tokens])
    t = torch.tanh(p.emb[tokens[0]] @ p.W)
    return torch.sigmoid(S + t.repeat(len(S), 1)).sum(0)


@ab.program
def data_read(tokens, p):
    # `.data` of a tensor, read as `.detach()`: the greedy decoder's `decoded.data.tolist()[0]` (nmt_attention),
    # and a value kept out of the gradient
    h = p.emb[tokens[0]]
    out = []
    decoded = p.out(h).argmax().view(1)
    while decoded.data.tolist()[0] != 0 and len(out) < 5:
        h = torch.tanh((h + p.emb[decoded.data.tolist()[0]]) @ p.W)
        out.append(p.out(h) + h.data.sum())
        decoded = p.out(h).argmax().view(1)
    return out


@ab.program
def data_then_written(tokens, p):
    # `.data` shares the storage that an item assignment then writes: not read as `.detach()` (rejected)
    h = p.emb[tokens[0]] * 1.0
    d = h.data  # M:data
    h[0] = 2.0
    return h + d


@ab.program
def wrapped_in_a_list(inst, p):
    # the RNTN's `if not isinstance(Trees, list): Trees = [Trees]`: one variable holds host data, or a list of it
    items = inst
    if not isinstance(items, list):
        items = [items]
    h = p.emb[0]
    for x in items:
        h = torch.tanh(h @ p.W + p.emb[x])
    return h

"""Small programs for tests/test_hunt7.py: the constructs merged last (dynamic regions inside a static program, a
module's run list, the dynamic tier's signatures kept across runs and recorded in C, ``torch.tensor`` of a
per-instance host list, batch_first recurrent modules over stacked lists), written as users write them.

They live in a real .py file because acrobat reads their source with ``inspect``. ``HP`` holds the shared
parameters (``emb``: VOCAB x H, ``W``: H x H, ``W2``: 2H x H, ``V``: H x 3, ``h0``: H, ``gru``: a batch_first
``nn.GRU(H, H)``, ``bilstm``: a batch_first bidirectional ``nn.LSTM(H, 3)``, ``outputs``/``sub.outputs``: run
lists).
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab

H = 6
VOCAB = 16


class Sub(nn.Module):
    """A second module holding its own run list; ``U``: H x H."""

    def __init__(self, g: torch.Generator):
        super().__init__()
        self.U = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.outputs: list = ["sub: left from before the run"]

    def mark(self, h):
        """Appends ``h @ U`` (H,) to ``self.outputs`` and returns it."""
        y = torch.tanh(h @ self.U)
        self.outputs.append(y)
        return y


class HP(nn.Module):
    """Shared parameters (see the module docstring)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(VOCAB, H, generator=g) * 0.5)
        self.W = nn.Parameter(torch.randn(H, H, generator=g) * 0.5)
        self.W2 = nn.Parameter(torch.randn(2 * H, H, generator=g) * 0.5)
        self.V = nn.Parameter(torch.randn(H, 3, generator=g) * 0.5)
        self.h0 = nn.Parameter(torch.randn(H, generator=g) * 0.5)
        torch.manual_seed(seed)
        self.gru = nn.GRU(H, H, batch_first=True)
        self.bilstm = nn.LSTM(H, 3, batch_first=True, bidirectional=True)
        self.sub = Sub(g)
        self.outputs: list = ["left from before the run"]

    def record(self, h):
        """Appends the scores ``h @ V`` (3,) to ``self.outputs``; returns how many it holds now."""
        self.outputs.append(h @ self.V)
        return len(self.outputs)


# --- dynamic regions --------------------------------------------------------------------------------------------

def gate_dict(h, t):
    """A dict filled by item assignment: a region."""
    parts = {}
    parts["g"] = torch.sigmoid(h)
    parts["t"] = t
    return h * parts["g"] + parts["t"] * 0.1


def safe_scale(t):
    """`try`/`except` returning a host float."""
    try:
        return 1.0 / (t - 3)
    except ZeroDivisionError:
        return 0.0


def split_pair(h, ts):
    """A list argument, a tuple result of a tensor and a host list."""
    try:
        first = ts[0]
    except IndexError:
        first = 0
    out = {}
    out["h"] = h + first
    return out["h"], [t * 2 for t in ts]


def maybe_none(h, t):
    """Returns None for even ``t`` (a lambda stored)."""
    f = lambda v: v * 3.0
    if t % 2 == 0:
        return None
    return f(h)


def append_to(xs, h):
    """Appends to the list it was given (a `try` inside)."""
    try:
        xs.append(torch.tanh(h))
    except AttributeError:
        pass
    return len(xs)


def gen_sum(h, n):
    """A generator: the sum of ``h / 2**k`` for k < n + 1."""
    def parts():
        x = h
        for _ in range(n + 1):
            yield x
            x = x * 0.5
    return sum(parts())


def is_tensor_twice(h):
    """`isinstance` on a tensor."""
    if isinstance(h, torch.Tensor):
        return h * 2.0
    return h


def calls_helper(h, t):
    """A region calling another function of the program."""
    d = {}
    d["x"] = plain_helper(h, t)
    return d["x"]


def plain_helper(h, t):
    return torch.tanh(h + t)


@ab.program
def region_in_loop(toks, p):
    """A region each step of an RNN."""
    h = p.h0 * 1.0
    for t in toks:
        h = gate_dict(torch.tanh(p.emb[t] @ p.W + h), t)
    return h


@ab.program
def region_twice(toks, p):
    """A region called twice per instance, on different arguments."""
    a = gate_dict(p.emb[toks[0]], toks[0])
    b = gate_dict(a @ p.W, len(toks))
    return a + b


@ab.program
def region_host_float(toks, p):
    """A region returning a host float, used to scale and returned."""
    h = torch.zeros(H)
    s = 0.0
    for t in toks:
        k = safe_scale(t)
        h = h + k * p.emb[t]
        s = s + k
    return h, s


@ab.program
def region_list_arg_and_result(toks, p):
    """A region given a list and returning (tensor, host list)."""
    h, doubled = split_pair(p.h0 * 1.0, toks)
    return h @ p.W, doubled, len(doubled)


@ab.program
def region_none_result(toks, p):
    """A region returning None on some paths."""
    h = p.h0 * 1.0
    for t in toks:
        r = maybe_none(p.emb[t], t)
        if r is not None:
            h = h + r
    return h


@ab.program
def region_mutates_list(toks, p):
    """A region appending to a list the program made; the list read after."""
    xs = []
    n = 0
    for t in toks:
        n = append_to(xs, p.emb[t])
    if n == 0:
        return p.h0 * 1.0
    return torch.stack(xs).sum(0) * n


@ab.program
def region_item_read(toks, p):
    """A region's result read with `.item()` and compared."""
    h = p.h0 * 1.0
    for t in toks:
        g = gen_sum(p.emb[t], t % 3)
        if g.sum().item() > 0:
            h = h + g
        else:
            h = h - g
    return h


@ab.program
def region_no_grad(toks, p):
    """A region under no_grad, its result added to a differentiable value."""
    h = p.h0 * 1.0
    for t in toks:
        with torch.no_grad():
            c = is_tensor_twice(p.emb[t])
        h = torch.tanh(h @ p.W + c)
    return h


@ab.function
def tree_enc(node, p):
    if not node["kids"]:
        return calls_helper(p.emb[node["w"]], node["w"])
    hs = [tree_enc(k, p) for k in node["kids"]]
    h = torch.stack(hs).sum(0)
    return calls_helper(h @ p.W, len(hs))


@ab.program
def region_in_recursion(tree, p):
    """A region in a recursive function over a dict tree, calling a plain helper."""
    return tree_enc(tree, p) @ p.V


@ab.program
def region_reads_instance(inst, p):
    """A region reading the instance's dict (a `try` on a missing key)."""
    return torch.tanh(p.emb[inst["w"]] * lookup_scale(inst))


def lookup_scale(inst):
    try:
        return float(inst["scale"])
    except KeyError:
        return -1.0


# --- run lists --------------------------------------------------------------------------------------------------

@ab.function
def rl_tree(node, p):
    if not node["kids"]:
        h = torch.tanh(p.emb[node["w"]])
    else:
        h = torch.tanh(torch.stack([rl_tree(k, p) for k in node["kids"]]).sum(0) @ p.W)
    if node["w"] % 2 == 0:
        p.outputs.append(h @ p.V)
    else:
        p.outputs.append(-(h @ p.V))
    return h


@ab.program
def runlist_recursion_branches(tree, p):
    """Recursion appending to the run list in two branches."""
    p.outputs = []
    root = rl_tree(tree, p)
    return root, torch.stack(p.outputs)


@ab.program
def runlist_len_and_last(toks, p):
    """Reads `len(p.outputs)` and `p.outputs[-1]` during the run."""
    p.outputs = []
    h = p.h0 * 1.0
    for t in toks:
        h = torch.tanh(p.emb[t] @ p.W + h)
        p.outputs.append(h @ p.V)
        if len(p.outputs) > 2:
            h = h + p.outputs[-1].sum()
    return h


@ab.program
def runlist_method_count(toks, p):
    """A method appending and returning the list's length."""
    p.outputs = []
    n = 0
    h = p.h0 * 1.0
    for t in toks:
        h = torch.tanh(p.emb[t] + h @ p.W)
        n = p.record(h)
    return h * n


@ab.program
def runlist_two_modules(toks, p):
    """Two modules' run lists."""
    p.outputs = []
    p.sub.outputs = []
    h = p.h0 * 1.0
    for t in toks:
        h = p.sub.mark(p.emb[t] + h)
        p.outputs.append(h.sum())
    return torch.stack(p.outputs).sum() + torch.stack(p.sub.outputs).sum(0) if toks else h


@ab.program
def runlist_returned(toks, p):
    """The run list returned itself."""
    p.outputs = []
    for t in toks:
        p.outputs.append(torch.tanh(p.emb[t] @ p.W))
    return p.outputs


# --- dynamic tier: recorded in C, lookups, merged gathers -------------------------------------------------------

@ab.program
def dyn_cat_chunk(toks, p):
    """`torch.cat([a, b], dim=-1)`, `chunk(3, dim=-1)`, `torch.sub(..., alpha=)`."""
    h = p.h0 * 1.0
    for t in toks:
        x = torch.cat([p.emb[t], h], dim=-1) @ p.W2
        a, b, c = x.chunk(3, dim=-1)
        h = torch.tanh(torch.cat([torch.sub(a, b, alpha=2.0), c, a], dim=0))
    return h


@ab.program
def dyn_lookup_pairs(toks, p):
    """`W[i, j]`, `emb.weight`-style `emb[t]` lookups, and `torch.stack` of a list (a merged gather)."""
    xs = []
    for k, t in enumerate(toks):
        xs.append(p.emb[t] * p.W[t % H, k % H])
    if not xs:
        return p.h0 * 0.0
    return torch.stack(xs).sum(0) + torch.stack(xs).max(0).values


# --- torch.tensor of a host list ---------------------------------------------------------------------------------

@ab.program
def tokens_float_dtype(toks, p):
    """`torch.tensor(toks, dtype=torch.float32)` of an int list, compared and cast."""
    v = torch.tensor(toks, dtype=torch.float32)
    big = (v > 7).float()
    return (v * 0.5 + big).sum(), p.emb[torch.tensor(toks)].sum(0)


@ab.program
def tokens_legacy(toks, p):
    """`torch.LongTensor(toks)` into an embedding, and `torch.FloatTensor(toks)`."""
    e = F.embedding(torch.LongTensor(toks), p.emb)
    w = torch.FloatTensor(toks)
    return (e * w.unsqueeze(1)).sum(0)


@ab.program
def tokens_of_floats(xs, p):
    """The instance is a list of floats."""
    v = torch.tensor(xs)
    return (v.unsqueeze(1) * p.h0).sum(0), v.max()


@ab.program
def tokens_of_bools(inst, p):
    """A list of bools made from the instance, as a mask."""
    mask = [t % 2 == 0 for t in inst]
    m = torch.tensor(mask)
    e = p.emb[torch.tensor(inst)]
    return (e * m.unsqueeze(1)).sum(0), m.sum()


@ab.program
def tokens_maybe_empty(toks, p):
    """`torch.tensor(toks)` of a possibly empty list."""
    v = torch.tensor(toks)
    return v.sum() * p.h0


# --- batch_first recurrent modules -------------------------------------------------------------------------------

@ab.program
def bf_gru_last(toks, p):
    """A batch_first GRU on `emb(torch.tensor(toks)).unsqueeze(0)`: last output row and final state."""
    x = p.emb[torch.tensor(toks)].unsqueeze(0)
    out, hn = p.gru(x)
    return out[0, -1] + hn[0, 0], out.squeeze(0).sum(0)


@ab.program
def bf_gru_stack_h0(toks, p):
    """A batch_first GRU on `torch.stack(xs)[None]` from a per-instance initial state."""
    xs = [torch.tanh(p.emb[t] @ p.W) for t in toks]
    h0 = torch.tanh(p.h0 * len(toks)).view(1, 1, H)
    out, hn = p.gru(torch.stack(xs)[None], h0)
    return out[:, 0].sum(), hn.view(-1)


# --- round two: regions feeding control and indexing, run lists beside a run-time limit, nested token lists --------

def count_of(ts):
    """A host int from a dict tally (item assignment)."""
    seen = {}
    for t in ts:
        seen[t] = seen.get(t, 0) + 1
    return len(seen)


def pick(hs, k):
    """A list of tensors in; one of them out (`try` on the index)."""
    try:
        return hs[k]
    except IndexError:
        return hs[-1]


def scaled(h, *, by=2.0):
    """A keyword-only argument; a lambda."""
    f = lambda v: v * by
    return f(h)


@ab.program
def region_bounds_and_index(toks, p):
    """A region's host int as a loop bound and as an index into a shared table."""
    n = count_of(toks)
    h = p.h0 * 1.0
    for i in range(n):
        h = torch.tanh(p.emb[n + i] + h @ p.W)
    return h, n


@ab.program
def region_tensor_list(toks, p):
    """A list of tensors given to a region, the picked one used after; a keyword argument."""
    hs = [torch.tanh(p.emb[t] @ p.W) for t in toks]
    if not hs:
        return p.h0 * 1.0
    h = pick(hs, toks[0] % 4)
    return scaled(h, by=0.5) + scaled(hs[0])


@ab.program
def runlist_then_limit(toks, p):
    """A run list beside a `torch.cat` of per-instance lengths along dim 1 (a run-time limit of the static tier)."""
    p.outputs = []
    rows = []
    for t in toks:
        e = p.emb[t]
        p.outputs.append(e.sum())
        rows.append(e.view(2, 3))
    x = torch.cat(rows, dim=1)
    return x.sum(1) + torch.stack(p.outputs).sum()


@ab.program
def tokens_nested(toks, p):
    """`torch.tensor` of a list of pairs, compared and cast."""
    pairs = [[t, (t * 3) % VOCAB] for t in toks]
    v = torch.tensor(pairs)
    same = (v[:, 0] == v[:, 1]).long()
    return p.emb[v[:, 1]].sum(0) + same.sum(), v.float().mean()


@ab.program
def tokens_number_instance(x, p):
    """`torch.tensor(x)` of an instance that is a number."""
    v = torch.tensor(x)
    return p.emb[v] * x


# --- regressions: a region's signature ------------------------------------------------------------------------------

def shifted(h, *rest):
    """`*rest` (a lambda stored): ``h`` plus how many extra arguments it was given."""
    f = lambda v: v + len(rest)
    return f(h)


def scaled_by(h, *, by=2.0):
    """A keyword-only parameter (a lambda stored)."""
    f = lambda v: v * by
    return f(h)


@ab.program
def region_star_args(toks, p):
    """A region taking `*rest`, given two extra numbers, then none."""
    h = torch.tanh(p.emb[toks[0]] @ p.W)
    return shifted(h, 1, len(toks)) * 2 + shifted(h)


@ab.program
def region_keyword_only(toks, p):
    """A region with a keyword-only parameter, given it and left to its default."""
    h = torch.tanh(p.emb[toks[0]] @ p.W)
    return scaled_by(h, by=0.5) + scaled_by(h)


# --- regressions: a region changing its argument in place -----------------------------------------------------------

def bumped(h):
    """`h += 1.0` of its tensor argument: the caller's tensor changes (a dict filled)."""
    d = {}
    h += 1.0
    d["h"] = h
    return d["h"] * 2


def bumped_view(h):
    """`+=` through a view of its tensor argument (a dict filled)."""
    d = {}
    x = h.view(-1)
    x *= 3.0
    d["x"] = x
    return d["x"]


def grown(hs, h):
    """`hs += [h]` of its list argument: the caller's list grows (a dict filled)."""
    d = {}
    hs += [h]
    d["n"] = len(hs)
    return d["n"] * h


@ab.program
def region_bumps_argument(toks, p):
    """The caller reads its tensor after a region added 1 to it in place."""
    h = torch.tanh(p.emb[toks[0]] @ p.W)
    y = bumped(h)
    return h + y


@ab.program
def region_bumps_view(toks, p):
    """The caller reads its tensor after a region scaled a view of it in place."""
    h = torch.tanh(p.emb[toks[0]] @ p.W)
    y = bumped_view(h)
    return h * 2 + y


@ab.program
def region_grows_list(toks, p):
    """The caller reads its list's length after a region extended it."""
    hs = [p.emb[t] for t in toks]
    y = grown(hs, p.h0 * 1.0)
    return y + len(hs)


# --- regression: a recurrent module's final states read through a view ------------------------------------------

@ab.program
def bf_bilstm_states_viewed(toks, p):
    """A batch_first bidirectional LSTM; its final states `(2, 1, 3)` flattened with `.view(-1)`."""
    out, (h, c) = p.bilstm(torch.stack([p.emb[t] for t in toks]).unsqueeze(0))
    return out[0, 0], h.view(-1), c.view(-1)


# --- run lists changed by pop and through an alias ----------------------------------------------------------------

@ab.program
def runlist_pop(toks, p):
    """Appends to the run list, popping again on some tokens."""
    p.outputs = []
    for t in toks:
        p.outputs.append(p.emb[t] @ p.W)
        if t % 3 == 0:
            p.outputs.pop()
    return torch.stack(p.outputs).sum(0) if p.outputs else p.h0 * 1.0


@ab.program
def runlist_alias(toks, p):
    """Appends to the run list through a local alias of it."""
    p.outputs = []
    outs = p.outputs
    for t in toks:
        outs.append(torch.tanh(p.emb[t]))
    return torch.stack(p.outputs).sum(0) if toks else p.h0 * 1.0

"""A neural module network: a layout tree of named modules run over an image's region features.

Each instance is a question's layout (``find[red]``, ``and(find[a],
find[b])``, ``describe(...)``) with the image's region features (a
different number of regions per image). A node runs the module its op
names in an ``nn.ModuleDict``, ``p.mods[node.op]``, on its arguments, the
results of its children, passed as ``*args`` (Andreas et al. 2016). An
``and``/``or`` node accumulates its children: ``sum(execute(c, ...) for c
in node.children)`` with no ``acrobat.concurrent``.

Run it: ``python -m examples.module_network``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "module_network"
SUMMARY = "neural module network: p.mods[node.op](*args) on an nn.ModuleDict, children summed, attention over regions"


@dataclass(eq=False)
class Layout:
    """A layout node: a module name, a word argument (for ``find``) and its children."""

    op: str
    word: int = 0
    children: list["Layout"] = field(default_factory=list)


@dataclass(eq=False)
class Question:
    """One instance: the layout and the image's region features, R rows of H floats, R differing per image."""

    layout: Layout
    regions: list[list[float]]


class Find(nn.Module):
    """Attention (R,) over the regions for a word: ``softmax(regions @ W e_word)``."""

    def __init__(self, hidden: int):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, regions, word_vec):
        return torch.softmax(regions @ self.proj(word_vec), dim=-1)


class Combine(nn.Module):
    """A merged attention (R,) from the sum of its inputs' attentions."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale))

    def forward(self, regions, *attentions):
        return torch.softmax(self.scale * sum(attentions), dim=-1)


class Describe(nn.Module):
    """Answer logits from the attended region feature."""

    def __init__(self, hidden: int, answers: int):
        super().__init__()
        self.out = nn.Linear(hidden, answers)

    def forward(self, regions, attention):
        return self.out(attention @ regions)


class Params(nn.Module):
    """Word embeddings (VOCAB, H) and the modules by name in an ``nn.ModuleDict``."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, answers: int = 6):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.mods = nn.ModuleDict({"find": Find(hidden), "and": Combine(2.0), "or": Combine(0.5),
                                       "describe": Describe(hidden, answers)})


@ab.function
def execute(node, regions, p):
    """The output of the layout subtree at ``node``: an attention (R,) or, at ``describe``, logits."""
    if node.op == "find":
        return p.mods["find"](regions, p.emb(torch.tensor(node.word)))
    if node.op in ("and", "or"):
        total = sum(execute(c, regions, p) for c in node.children)
        return p.mods[node.op](regions, total)
    args = [execute(c, regions, p) for c in node.children]
    return p.mods[node.op](regions, *args)


@ab.program
def module_network(question, p):
    """Answer logits (6,) of one ``Question``."""
    return execute(question.layout, torch.tensor(question.regions), p)


program = module_network


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def _layout(rng: random.Random, depth: int) -> Layout:
    if depth == 0 or rng.random() < 0.3:
        return Layout("find", rng.randrange(VOCAB))
    return Layout(rng.choice(["and", "or"]), children=[_layout(rng, depth - 1) for _ in range(rng.randint(2, 3))])


def instances(n: int, seed: int = 0, hidden: int = HIDDEN) -> list[Question]:
    """``n`` questions: a ``describe`` over a random and/or/find layout of depth up to 3, 3-9 regions each."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    return [Question(Layout("describe", children=[_layout(rng, rng.randint(0, 3))]),
                     torch.randn(rng.randint(3, 9), hidden, generator=g).tolist()) for _ in range(n)]


def reference(question: Question, p: Params) -> torch.Tensor:
    """Plain PyTorch with the modules' weights used directly, the layout evaluated by an explicit stack."""
    R = torch.tensor(question.regions)
    find, describe = p.mods["find"], p.mods["describe"]
    values: dict[int, torch.Tensor] = {}
    stack = [(question.layout, False)]
    while stack:
        node, ready = stack.pop()
        if node.op != "find" and not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children)
            continue
        if node.op == "find":
            q = p.emb.weight[node.word] @ find.proj.weight.T + find.proj.bias
            values[id(node)] = torch.softmax(R @ q, dim=0)
        elif node.op == "describe":
            att = values[id(node.children[0])]
            values[id(node)] = (att @ R) @ describe.out.weight.T + describe.out.bias
        else:
            total = torch.stack([values[id(c)] for c in node.children]).sum(0)
            values[id(node)] = torch.softmax(p.mods[node.op].scale * total, dim=0)
    return values[id(question.layout)]


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()

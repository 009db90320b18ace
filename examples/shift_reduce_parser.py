"""A SPINN-style shift-reduce encoder (Bowman et al. 2016) driven by a sentence's transition sequence.

The buffer holds the words' (h, c) states; it is reversed once so that
``buf.pop()`` shifts the next word. A REDUCE pops two stack entries and
composes them with a TreeLSTM cell whose gates come from
``tuple(torch.chunk(...))``. Each stack entry is a tuple ``(h, c, words)``
holding the list of word ids it covers (lists of tuples holding lists). A
tracking LSTM reads the buffer top and the stack's two tops at every step,
starting from ``h = c = torch.zeros(p.hidden)``; ``if buf:`` tests the
buffer for emptiness.

Run it: ``python -m examples.shift_reduce_parser``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

import acrobat as ab
from examples._common import HIDDEN, VOCAB, seeded

NAME = "shift_reduce_parser"
SUMMARY = "SPINN shift-reduce: buf.reverse(), if buf:, stack of (h, c, words) tuples, h = c = zeros, tuple(chunk)"

SHIFT, REDUCE = 0, 1


@dataclass(eq=False)
class Sentence:
    """One instance: word ids and a valid shift/reduce transition sequence over them."""

    words: list[int]
    transitions: list[int]


class Params(nn.Module):
    """Embedding (VOCAB, H), leaf map H -> 2H, compose 3H -> 5H, tracking LSTM cell 3H -> H, classifier."""

    def __init__(self, seed: int = 0, vocab: int = VOCAB, hidden: int = HIDDEN, classes: int = 3):
        super().__init__()
        with seeded(seed):
            self.emb = nn.Embedding(vocab, hidden)
            self.leaf = nn.Linear(hidden, 2 * hidden)
            self.compose = nn.Linear(3 * hidden, 5 * hidden)
            self.track = nn.LSTMCell(3 * hidden, hidden)
            self.out = nn.Linear(hidden, classes)
        self.hidden = hidden


@ab.function
def reduce(left, right, tracking, p):
    """The TreeLSTM composition of two stack entries (h, c, words), conditioned on the tracker's h."""
    lh, lc, lwords = left
    rh, rc, rwords = right
    i, fl, fr, o, g = tuple(torch.chunk(p.compose(torch.cat([lh, rh, tracking])), 5))
    c = torch.sigmoid(fl) * lc + torch.sigmoid(fr) * rc + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c, lwords + rwords


@ab.program
def shift_reduce_parser(sentence, p):
    """(logits (3,), root h (H,), word ids the root covers) of one ``Sentence``."""
    buf = []
    for w in sentence.words:
        h, c = p.leaf(p.emb(torch.tensor(w))).chunk(2)
        buf.append((torch.tanh(h), c, [w]))
    buf.reverse()
    stack = []
    th = tc = torch.zeros(p.hidden)
    for t in sentence.transitions:
        top_buf = buf[-1][0] if buf else torch.zeros(p.hidden)
        s1 = stack[-1][0] if stack else torch.zeros(p.hidden)
        s2 = stack[-2][0] if len(stack) > 1 else torch.zeros(p.hidden)
        th, tc = p.track(torch.cat([top_buf, s1, s2]), (th, tc))
        if t == SHIFT:
            stack.append(buf.pop())
        else:
            right = stack.pop()
            left = stack.pop()
            stack.append(reduce(left, right, th, p))
    h, _, words = stack[0]
    return p.out(h), h, words


program = shift_reduce_parser


make_params = Params  # make_params(seed): seeded weights, hidden HIDDEN


def _transitions(rng: random.Random, n: int) -> list[int]:
    out, on_stack, shifted = [], 0, 0
    while shifted < n or on_stack > 1:
        if shifted < n and (on_stack < 2 or rng.random() < 0.5):
            out.append(SHIFT)
            shifted += 1
            on_stack += 1
        else:
            out.append(REDUCE)
            on_stack -= 1
    return out


def instances(n: int, seed: int = 0) -> list[Sentence]:
    """``n`` sentences of 1-12 words with random valid transition sequences, the same for the same ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 12))]
        out.append(Sentence(words, _transitions(rng, len(words))))
    return out


def reference(sentence: Sentence, p: Params) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Plain PyTorch: a buffer pointer instead of a reversed list, the cells' weights used directly."""
    H = p.hidden
    zero = torch.zeros(H)
    leaves = p.emb.weight[sentence.words] @ p.leaf.weight.T + p.leaf.bias  # (n, 2H)
    nxt = 0
    stack: list[tuple[torch.Tensor, torch.Tensor, list[int]]] = []
    th, tc = zero, zero
    for t in sentence.transitions:
        top_buf = torch.tanh(leaves[nxt, :H]) if nxt < len(sentence.words) else zero
        s1 = stack[-1][0] if stack else zero
        s2 = stack[-2][0] if len(stack) >= 2 else zero
        th, tc = p.track(torch.cat([top_buf, s1, s2]).unsqueeze(0), (th.unsqueeze(0), tc.unsqueeze(0)))
        th, tc = th[0], tc[0]
        if t == SHIFT:
            stack.append((torch.tanh(leaves[nxt, :H]), leaves[nxt, H:], [sentence.words[nxt]]))
            nxt += 1
            continue
        (rh, rc, rw), (lh, lc, lw) = stack.pop(), stack.pop()
        gates = torch.cat([lh, rh, th]) @ p.compose.weight.T + p.compose.bias
        i, fl, fr, o, g = (gates[k * H:(k + 1) * H] for k in range(5))
        c = torch.sigmoid(fl) * lc + torch.sigmoid(fr) * rc + torch.sigmoid(i) * torch.tanh(g)
        stack.append((torch.sigmoid(o) * torch.tanh(c), c, lw + rw))
    h, _, words = stack[0]
    return h @ p.out.weight.T + p.out.bias, h, words


def main() -> None:
    """Run a batch of 64 batched (eager and compiled) against the reference; print error, launches, times."""
    from examples import run_main
    run_main(NAME)


if __name__ == "__main__":
    main()

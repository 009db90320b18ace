"""Training with acrobat: a loop with ``loss.backward()`` and an optimizer around ``program.run``.

A TreeLSTM written for ONE tree returns the logits of every node (the
fine-grained SST setup: a label at every node). ``program.run`` batches a
mini-batch of trees; with grad mode on it runs the eager backend, so autograd
records through the batched run and ``loss.backward()`` gives every weight
the gradient the per-instance loop would (checked below on the first batch).
``sparse_grads=True`` gives the embedding table a sparse gradient holding
only the rows looked up, which ``torch.optim.Adagrad`` updates in place of
the whole table. Evaluation runs under ``torch.no_grad()``, where ``run``
picks the compiled backend.

    python -m examples.train_treelstm            # 2 epochs on 2,000 SST train trees (synthetic without SST)

(``acrobat train treelstm`` is the full recipe: dropout, early stopping,
checkpoints, a plot, baselines.)
"""

from __future__ import annotations

import random
import time

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from acrobat.data import load_dataset


class Params(nn.Module):
    def __init__(self, vocab: int, hidden: int, classes: int = 5):
        super().__init__()
        self.emb = nn.Parameter(torch.randn(vocab, hidden) * 0.1)
        self.W_iou = nn.Linear(hidden, 3 * hidden)
        self.U_iou = nn.Linear(2 * hidden, 3 * hidden)
        self.U_f = nn.Linear(2 * hidden, 2 * hidden)
        self.out = nn.Linear(hidden, classes)


@ab.function
def cell(node, p):
    """(h, c) of ``node`` and the h of every node below it, post-order."""
    if node.is_leaf:
        i, o, u = torch.chunk(p.W_iou(p.emb[node.word_id]), 3)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c, [h]
    (lh, lc, ls), (rh, rc, rs) = ab.concurrent(cell(node.left, p), cell(node.right, p))
    hc = torch.cat([lh, rh])
    i, o, u = torch.chunk(p.U_iou(hc), 3)
    fl, fr = torch.chunk(torch.sigmoid(p.U_f(hc)), 2)
    c = torch.sigmoid(i) * torch.tanh(u) + fl * lc + fr * rc
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c, ls + rs + [h]


@ab.program
def node_logits(tree, p):
    """Logits (5,) of every node of ``tree``, post-order (the root last)."""
    h, c, states = cell(tree, p)
    return [p.out(s) for s in states]


def labels(tree) -> list[int]:
    """Node labels in post-order (the order of ``node_logits``)."""
    if tree.is_leaf:
        return [tree.label]
    return labels(tree.left) + labels(tree.right) + [tree.label]


def batch_loss(outs: list[list[torch.Tensor]], trees: list) -> torch.Tensor:
    """Cross-entropy summed over every node, averaged over the trees."""
    logits = torch.stack([x for o in outs for x in o])
    target = torch.tensor([y for t in trees for y in labels(t)])
    return F.cross_entropy(logits, target, reduction="sum") / len(trees)


def accuracy(params: Params, trees: list) -> float:
    """Root accuracy (5 classes), no grad: ``run`` picks the compiled backend."""
    with torch.no_grad():
        roots = [o[-1] for o in node_logits.run(trees, params)]
    return float((torch.stack(roots).argmax(-1) == torch.tensor([t.label for t in trees])).float().mean())


def main(epochs: int = 2, limit: int = 2000, hidden: int = 64, batch_size: int = 25) -> float:
    """Train and print dev accuracy per epoch; returns the last one."""
    torch.manual_seed(0)
    train, dev = load_dataset(split="train", limit=limit), load_dataset(split="dev", limit=500)
    print(train.description)
    params = Params(len(train.vocab), hidden)
    opt = torch.optim.Adagrad(params.parameters(), lr=0.05)  # takes the sparse table gradient too

    # the batched gradient is the per-instance loop's (sum of per-tree losses)
    first = train.trees[:batch_size]
    batched = torch.autograd.grad(batch_loss(node_logits.run(first, params), first), list(params.parameters()))
    plain = torch.autograd.grad(batch_loss([node_logits(t, params) for t in first], first), list(params.parameters()))
    print(f"max |batched - per-instance| gradient difference: {max(float((a - b).abs().max()) for a, b in zip(batched, plain)):.2e}")

    acc = 0.0
    for epoch in range(1, epochs + 1):
        trees = list(train.trees)
        random.Random(epoch).shuffle(trees)
        t0 = time.perf_counter()
        for i in range(0, len(trees), batch_size):
            batch = trees[i:i + batch_size]
            loss = batch_loss(node_logits.run(batch, params, sparse_grads=True), batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
        acc = accuracy(params, dev.trees)
        print(f"epoch {epoch}: {len(trees) / (time.perf_counter() - t0):.0f} trees/s, last loss {float(loss.detach()):.3f}, "
              f"dev accuracy {acc:.3f}")
    return acc


if __name__ == "__main__":
    main()

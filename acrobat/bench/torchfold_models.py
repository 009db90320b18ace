"""TorchFold (PyPI ``torchfold==0.1.0``) versions of TreeLSTM, MV-RNN, BiRNN and NestedRNN, a
dynamic-batching baseline (paper §6, Table 5).

TorchFold records ``fold.add(op, *args)`` calls into a graph, gives each
node a step (its depth: one more than its deepest argument), and runs all
nodes of the same (step, op) as one call of the module's method ``op``
with the arguments concatenated along dimension 0. Values are (1, ...)
rows. Identical (op, args) calls are merged (common subexpressions).

torchfold 0.1.0 was written for PyTorch 0.3: it checks argument types
against ``torch.tensor._TensorBase``, which no longer exists. The shim
below gives the module a ``torch`` whose ``tensor._TensorBase`` is
``torch.Tensor``; nothing in acrobat itself is patched.

Weights are read from the same parameter objects acrobat and the PyTorch
references use, so the outputs must agree with theirs.

TorchFold's graph is recorded before anything runs, so it cannot express
tensor-dependent control flow: DRNN, Berxit and StackRNN have no TorchFold
version and report why (``TORCHFOLD_CANNOT``). The loops of NestedRNN and
the trees of TreeLSTM and MV-RNN depend on the instance only, and are
unrolled while the graph is recorded.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import torch
from torch import Tensor

from acrobat.bench.base import Unavailable
from acrobat.data.tree import Tree
from acrobat.models.mvrnn import MAT_BUCKETS
from acrobat.models.nestedrnn import NestedInstance


class _TorchShim(types.ModuleType):
    """``torch`` for torchfold: everything forwarded, plus ``torch.tensor._TensorBase``."""

    tensor = types.SimpleNamespace(_TensorBase=torch.Tensor)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def load_torchfold() -> Any:
    """The ``torchfold`` module with the torch 2.x compatibility shim applied.

    Raises:
        Unavailable: torchfold is not installed.
    """
    try:
        import torchfold
        import torchfold.torchfold as tf_impl
    except ImportError as exc:
        raise Unavailable("not installed (pip install torchfold==0.1.0)") from exc
    if not isinstance(tf_impl.torch, _TorchShim):
        tf_impl.torch = _TorchShim("torch")
    return torchfold


class TreeLSTMFoldOps:
    """The TreeLSTM's batched ops, called by ``Fold.apply`` on (N, ...) row stacks."""

    def __init__(self, p: Any) -> None:
        self.p = p

    def leaf(self, word_ids: Tensor) -> tuple[Tensor, Tensor]:
        p = self.p
        i, o, u = torch.chunk(p.emb[word_ids] @ p.W_iou + p.b_iou, 3, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def internal(self, lh: Tensor, lc: Tensor, rh: Tensor, rc: Tensor) -> tuple[Tensor, Tensor]:
        p = self.p
        hc = torch.cat([lh, rh], dim=1)
        i, o, u = torch.chunk(hc @ p.U_iou + p.b_iou, 3, dim=1)
        fl, fr = torch.chunk(torch.sigmoid(hc @ p.U_f + p.b_f), 2, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u) + fl * lc + fr * rc
        return torch.sigmoid(o) * torch.tanh(c), c

    def classify(self, h: Tensor) -> Tensor:
        return h @ self.p.W_out + self.p.b_out


def _fold_tree(fold: Any, t: Tree) -> tuple[Any, Any]:
    """Record a binary tree bottom-up: ``leaf(word_id)`` and ``internal(left pair, right pair)``, each
    giving a pair (the TreeLSTM's ``(h, c)``, the MV-RNN's ``(vector, matrix)``)."""
    if t.is_leaf:
        return fold.add("leaf", t.word_id).split(2)
    left, right = _fold_tree(fold, t.left), _fold_tree(fold, t.right)  # type: ignore[arg-type]
    return fold.add("internal", *left, *right).split(2)


def _fold_trees(trees: list[Tree], ops: Any) -> tuple[Tensor, Tensor]:
    """Every tree recorded with ``_fold_tree``, then ``classify`` of each root's first value; runs the fold.

    Returns ``(logits, roots)``, one row per tree.
    """
    fold = load_torchfold().Fold()
    roots = [_fold_tree(fold, t)[0] for t in trees]
    logits = [fold.add("classify", h) for h in roots]
    return tuple(fold.apply(ops, [logits, roots]))  # type: ignore[return-value]


def treelstm_torchfold(trees: list[Tree], p: Any) -> list[tuple[Tensor, Tensor]]:
    """TreeLSTM over ``trees`` with TorchFold; per tree ``(logits, root h)`` like the reference."""
    out, hs = _fold_trees(trees, TreeLSTMFoldOps(p))
    return list(zip(out.unbind(0), hs.unbind(0)))


class MVRNNFoldOps:
    """The MV-RNN's batched ops: leaves' vectors and matrices, the composition (``torch.bmm``), the classifier."""

    def __init__(self, p: Any) -> None:
        self.p = p

    def leaf(self, word_ids: Tensor) -> tuple[Tensor, Tensor]:
        return self.p.emb[word_ids], self.p.mat_emb[word_ids % MAT_BUCKETS]

    def internal(self, a: Tensor, A: Tensor, b: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
        p = self.p
        ba, ab = torch.bmm(B, a.unsqueeze(-1)).squeeze(-1), torch.bmm(A, b.unsqueeze(-1)).squeeze(-1)
        return torch.tanh(torch.cat([ba, ab], 1) @ p.W + p.b), torch.matmul(p.W_M, torch.cat([A, B], 1))

    def classify(self, v: Tensor) -> Tensor:
        return v @ self.p.W_out + self.p.b_out


def mvrnn_torchfold(trees: list[Tree], p: Any) -> list[Tensor]:
    """MV-RNN over ``trees`` with TorchFold; per tree its logits like the reference."""
    out, _ = _fold_trees(trees, MVRNNFoldOps(p))
    return list(out.unbind(0))


class BiRNNFoldOps:
    """The BiRNN's batched ops: one recurrent step per direction, the output layer."""

    def __init__(self, p: Any) -> None:
        self.p = p

    def _step(self, d: Any, tok: Tensor, h: Tensor) -> Tensor:
        return torch.tanh(self.p.emb[tok] @ d.W + d.b + h @ d.U)

    def fwd(self, tok: Tensor, h: Tensor) -> Tensor:
        return self._step(self.p.fwd, tok, h)

    def bwd(self, tok: Tensor, h: Tensor) -> Tensor:
        return self._step(self.p.bwd, tok, h)

    def out(self, f: Tensor, b: Tensor) -> Tensor:
        return torch.cat([f, b], dim=1) @ self.p.W_out + self.p.b_out


def birnn_torchfold(sentences: list[list[int]], p: Any) -> list[list[Tensor]]:
    """BiRNN over ``sentences`` with TorchFold; per sentence its per-token logits like the reference."""
    tf = load_torchfold()
    fold = tf.Fold()
    h0f, h0b = p.fwd.h0.unsqueeze(0), p.bwd.h0.unsqueeze(0)
    outs: list[Any] = []
    for tokens in sentences:
        fw, bw = [], []
        h = h0f
        for tok in tokens:
            h = fold.add("fwd", tok, h)
            fw.append(h)
        h = h0b
        for tok in reversed(tokens):
            h = fold.add("bwd", tok, h)
            bw.append(h)
        n = len(tokens)
        outs += [fold.add("out", fw[t], bw[n - 1 - t]) for t in range(n)]
    (rows,) = fold.apply(BiRNNFoldOps(p), [outs])
    result, start = [], 0
    for tokens in sentences:
        result.append(list(rows[start:start + len(tokens)].unbind(0)))
        start += len(tokens)
    return result


class NestedRNNFoldOps:
    """The NestedRNN's batched ops: input projection, inner RNN step, GRU cell, output layer."""

    def __init__(self, p: Any) -> None:
        self.p = p

    def project(self, tok: Tensor) -> Tensor:
        return self.p.emb[tok] @ self.p.W_x + self.p.b_x

    def inner(self, x: Tensor, h: Tensor) -> Tensor:
        return torch.tanh(x + h @ self.p.U_h)

    def gru(self, h: Tensor, g: Tensor) -> Tensor:
        p = self.p
        z = torch.sigmoid(h @ p.W_z + g @ p.U_z + p.b_z)
        r = torch.sigmoid(h @ p.W_r + g @ p.U_r + p.b_r)
        n = torch.tanh(h @ p.W_n + (r * g) @ p.U_n + p.b_n)
        return (1 - z) * n + z * g

    def out(self, g: Tensor) -> Tensor:
        return g @ self.p.W_out + self.p.b_out


def nestedrnn_torchfold(batch: list[NestedInstance], p: Any) -> list[Tensor]:
    """NestedRNN over ``batch`` with TorchFold (both loops unrolled: their counts are data); the logits."""
    fold = load_torchfold().Fold()
    outs = []
    for inst in batch:
        g: Any = p.g0.unsqueeze(0)
        for tok, m in zip(inst.tokens, inst.inner):
            x = fold.add("project", tok)
            h = g
            for _ in range(m):
                h = fold.add("inner", x, h)
            g = fold.add("gru", h, g)
        outs.append(fold.add("out", g))
    (rows,) = fold.apply(NestedRNNFoldOps(p), [outs])
    return list(rows.unbind(0))


TORCHFOLD_MODELS: dict[str, Callable[[list[Any], Any], list[Any]]] = {
    "treelstm": treelstm_torchfold,
    "mvrnn": mvrnn_torchfold,
    "birnn": birnn_torchfold,
    "nestedrnn": nestedrnn_torchfold,
}
"""Models with a TorchFold version; the others say why not (``TORCHFOLD_CANNOT``)."""

_NO_TDC = "TorchFold cannot express tensor-dependent control flow (its graph is built before any value is computed)"
TORCHFOLD_CANNOT: dict[str, str] = {
    "drnn": f"{_NO_TDC}: DRNN decides from computed probabilities whether a node gets a child and a sibling",
    "berxit": f"{_NO_TDC}: Berxit decides from the exit classifier's confidence whether to run another layer",
    "stackrnn": f"{_NO_TDC}: StackRNN chooses SHIFT or REDUCE by the argmax of computed scores",
}
"""Models TorchFold cannot express, with the reason (the benchmark's "not available" note)."""

"""TorchFold (PyPI ``torchfold==0.1.0``) versions of TreeLSTM and BiRNN, a dynamic-batching baseline.

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
"""

from __future__ import annotations

import types
from typing import Any, Callable

import torch
from torch import Tensor

from acrobat.bench.base import Unavailable
from acrobat.data.tree import Tree


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


def treelstm_torchfold(trees: list[Tree], p: Any) -> list[tuple[Tensor, Tensor]]:
    """TreeLSTM over ``trees`` with TorchFold; per tree ``(logits, root h)`` like the reference."""
    tf = load_torchfold()
    fold = tf.Fold()

    def node(t: Tree) -> tuple[Any, Any]:
        if t.is_leaf:
            return fold.add("leaf", t.word_id).split(2)
        lh, lc = node(t.left)  # type: ignore[arg-type]
        rh, rc = node(t.right)  # type: ignore[arg-type]
        return fold.add("internal", lh, lc, rh, rc).split(2)

    roots = [node(t)[0] for t in trees]
    logits = [fold.add("classify", h) for h in roots]
    out, hs = fold.apply(TreeLSTMFoldOps(p), [logits, roots])
    return list(zip(out.unbind(0), hs.unbind(0)))


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


TORCHFOLD_MODELS: dict[str, Callable[[list[Any], Any], list[Any]]] = {
    "treelstm": treelstm_torchfold,
    "birnn": birnn_torchfold,
}
"""Models with a TorchFold version; other models report TorchFold as not available."""

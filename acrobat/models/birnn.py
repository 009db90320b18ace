"""Bidirectional Elman RNN sequence tagger, the BiRNN model of the ACRoBat
paper's evaluation (Table 4): one output (class logits) per token.

This module holds the model's parameters and two plain-PyTorch
implementations that the auto-batched acrobat program is checked and timed
against:

* :func:`birnn_reference` runs one sentence, one token and one op at a time;
* :func:`birnn_hand_batched` is what an expert writes by hand: hoisted input
  projections, a length-sorted padded-over-time recurrence, batched outputs.

For a sentence ``tokens`` of length ``n >= 1`` (``H = hidden``)::

    h = fwd.h0; for tok in tokens:           h = tanh(emb[tok] @ fwd.W + fwd.b + h @ fwd.U)  -> fw[0..n-1]
    h = bwd.h0; for tok in reversed(tokens): h = tanh(emb[tok] @ bwd.W + bwd.b + h @ bwd.U)  -> bw[0..n-1]
    out[t] = cat([fw[t], bw[n - 1 - t]]) @ W_out + b_out                                     (num_classes,)

so ``bw[0]`` is the backward state after the sentence's last token.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from acrobat.models.params import EMB_STD, seeded_bias, seeded_matrix, seeded_parameter


class RNNDirection(nn.Module):
    """One direction of the BiRNN, ``H = hidden``.

    Drawn from ``gen`` in this order: ``W`` (H, H) input weights, ``U`` (H, H)
    recurrent weights (both std ``1 / sqrt(H)``), ``b`` (H,) bias (std 0.01),
    ``h0`` (H,) initial state (std 0.1).
    """

    def __init__(self, hidden: int, gen: torch.Generator) -> None:
        super().__init__()
        self.W = seeded_matrix(gen, hidden, hidden)
        self.U = seeded_matrix(gen, hidden, hidden)
        self.b = seeded_bias(gen, hidden)
        self.h0 = seeded_parameter(gen, hidden, scale=0.1)


class BiRNNParams(nn.Module):
    """Parameters of the BiRNN tagger, ``H = hidden``.

    Drawn from ``torch.Generator().manual_seed(seed)`` in this order:
    ``emb`` (vocab_size, H) std 0.1; ``fwd`` then ``bwd``
    (:class:`RNNDirection`); ``W_out`` (2H, num_classes) std ``1 / sqrt(2H)``;
    ``b_out`` (num_classes,) std 0.01.
    """

    def __init__(self, vocab_size: int, hidden: int, num_classes: int = 5, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.emb = seeded_parameter(gen, vocab_size, hidden, scale=EMB_STD)
        self.fwd = RNNDirection(hidden, gen)
        self.bwd = RNNDirection(hidden, gen)
        self.W_out = seeded_matrix(gen, 2 * hidden, num_classes)
        self.b_out = seeded_bias(gen, num_classes)


def _run(tokens: list[int], d: RNNDirection, emb: Tensor) -> list[Tensor]:
    """The states (hidden,) of direction ``d`` after each of ``tokens``."""
    h = d.h0
    states: list[Tensor] = []
    for tok in tokens:
        h = torch.tanh(emb[tok] @ d.W + d.b + h @ d.U)
        states.append(h)
    return states


def birnn_reference(tokens: list[int], p: BiRNNParams) -> list[Tensor]:
    """Run the BiRNN on one sentence of ``n >= 1`` word ids, one token at a time.

    Returns ``n`` logits tensors of shape (num_classes,), one per position.
    """
    fw = _run(tokens, p.fwd, p.emb)
    bw = _run(list(reversed(tokens)), p.bwd, p.emb)
    n = len(tokens)
    return [torch.cat([fw[t], bw[n - 1 - t]]) @ p.W_out + p.b_out for t in range(n)]


def _recur(proj: Tensor, active: list[int], d: RNNDirection) -> Tensor:
    """Run one direction over time-major input projections.

    ``proj`` (num_tokens, H) holds ``x @ W + b`` for time step 0 of the
    ``active[0]`` sentences, then step 1 of the ``active[1]`` sentences, ...;
    sentences are sorted by length descending, so the ones still running at a
    step are a prefix of the batch. Returns the states in the same layout.
    """
    h = d.h0.expand(active[0], -1)
    states: list[Tensor] = []
    start = 0
    for n in active:
        h = torch.tanh(torch.addmm(proj[start : start + n], h[:n], d.U))
        states.append(h)
        start += n
    return torch.cat(states)


def birnn_hand_batched(sentences: list[list[int]], p: BiRNNParams) -> list[list[Tensor]]:
    """Run the BiRNN on a mini-batch of sentences (each of length >= 1), batched by hand.

    Sentences are sorted by length descending and laid out time-major. The
    input projections of all tokens, both directions, are one matmul (hoisted
    out of the recurrence); each time step of each direction is then one
    matmul over the sentences still running; all output rows are one matmul.
    All index lists are built in Python up front. Autograd works (no
    ``no_grad`` is forced).

    Returns, per sentence and in order, its list of logits (num_classes,) per
    position, as :func:`birnn_reference` does.
    """
    if not sentences:
        return []
    for s, sentence in enumerate(sentences):
        if not sentence:
            raise ValueError(f"birnn_hand_batched: sentence {s} is empty (need length >= 1)")
    H = p.hidden
    device = p.emb.device
    order = sorted(range(len(sentences)), key=lambda s: -len(sentences[s]))
    lengths = [len(sentences[s]) for s in order]
    active = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    offsets = [0]
    for n in active[:-1]:
        offsets.append(offsets[-1] + n)

    # Row offsets[t] + j holds (sorted) sentence j at forward step t; the
    # backward direction's step t reads the same sentence's token n_j - 1 - t.
    fwd_tokens = [sentences[order[j]][t] for t, n in enumerate(active) for j in range(n)]
    bwd_rows = [offsets[lengths[j] - 1 - t] + j for t, n in enumerate(active) for j in range(n)]
    x = p.emb.index_select(0, torch.tensor(fwd_tokens, dtype=torch.long, device=device))
    proj = torch.addmm(torch.cat([p.fwd.b, p.bwd.b]), x, torch.cat([p.fwd.W, p.bwd.W], dim=1))
    bwd_proj = proj[:, H:].index_select(0, torch.tensor(bwd_rows, dtype=torch.long, device=device))
    fw = _recur(proj[:, :H], active, p.fwd)
    bw = _recur(bwd_proj, active, p.bwd)

    # Output rows in sentence-major order of the input: fw[t] and bw[n - 1 - t].
    rank = {s: j for j, s in enumerate(order)}
    fw_rows: list[int] = []
    bw_rows: list[int] = []
    for s, sentence in enumerate(sentences):
        j, n = rank[s], len(sentence)
        fw_rows.extend(offsets[t] + j for t in range(n))
        bw_rows.extend(offsets[n - 1 - t] + j for t in range(n))
    both = torch.cat(
        [
            fw.index_select(0, torch.tensor(fw_rows, dtype=torch.long, device=device)),
            bw.index_select(0, torch.tensor(bw_rows, dtype=torch.long, device=device)),
        ],
        dim=1,
    )
    rows = torch.addmm(p.b_out, both, p.W_out).unbind(0)
    out: list[list[Tensor]] = []
    start = 0
    for sentence in sentences:
        out.append(list(rows[start : start + len(sentence)]))
        start += len(sentence)
    return out

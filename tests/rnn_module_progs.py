"""Models for tests/test_rnn_modules.py: nn.LSTM / nn.GRU / nn.RNN over a per-instance sequence (issue 18 §2),
each the way a researcher writes it. Each runs as plain Python per instance; an instance is a list of token ids
(the tagger's an int tensor), of a length that differs per instance.
"""

# ruff: noqa
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import acrobat as ab


class LSTMTagger(nn.Module):
    """The PyTorch tutorial's tagger ("Sequence Models and Long Short-Term Memory Networks"), as written there."""

    def __init__(self, embedding_dim=6, hidden_dim=5, vocab_size=20, tagset_size=4):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim)
        self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

    @ab.function
    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
        tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
        tag_scores = F.log_softmax(tag_space, dim=1)
        return tag_scores


@ab.program
def tagger(sentence, model):
    return model(sentence)


class Params(nn.Module):
    """Weights of the programs below: embeddings (20 x 6), one module of each kind and a batch_first GRU."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.bilstm = nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(6, 5)
        self.rnn = nn.RNN(6, 5, nonlinearity="relu")
        self.lstm = nn.LSTM(6, 5)
        self.bgru = nn.GRU(6, 5, batch_first=True)
        self.init = nn.Linear(6, 5)
        self.out = nn.Linear(10, 3)


@ab.program
def bilstm_last(tokens, p):
    """A 2-layer BiLSTM encoder (batch_first) over the stacked embeddings, unbatched ``(T, 6)``: the last layer's
    final states of both directions, and the output's last row."""
    xs = [p.emb(torch.tensor(t)) for t in tokens]
    out, (h_n, c_n) = p.bilstm(torch.stack(xs))
    return torch.cat([h_n[-2], h_n[-1]]), p.out(out[-1]), c_n


@ab.program
def gru_with_state(tokens, p):
    """A GRU started from a state computed from the instance's first token (``(1, 1, 5)``), on ``(T, 1, 6)``."""
    h0 = torch.tanh(p.init(p.emb(torch.tensor(tokens[0])))).view(1, 1, -1)
    out, h = p.gru(p.emb(torch.tensor(tokens)).view(len(tokens), 1, -1), h0)
    return out.squeeze(1).sum(0), h.squeeze(0)


@ab.program
def rnn_rows(tokens, p):
    """An nn.RNN (relu) on ``torch.stack(xs).unsqueeze(1)``, its output rows scored and normalized row by row."""
    xs = []
    for t in tokens:
        xs.append(p.emb(torch.tensor(t)))
    out, h_n = p.rnn(torch.stack(xs).unsqueeze(1))
    return F.log_softmax(out.squeeze(1) @ p.init.weight, dim=1), h_n[-1]


@ab.program
def lstm_with_state(tokens, p):
    """An LSTM given its initial pair ``(h0, c0)``, each ``(1, 5)``, on the unbatched ``(T, 6)`` stack."""
    first = p.emb(torch.tensor(tokens[0]))
    state = (torch.tanh(p.init(first)).unsqueeze(0), torch.sigmoid(p.init(first)).unsqueeze(0))
    out, (h, c) = p.lstm(torch.stack([p.emb(torch.tensor(t)) for t in tokens]), state)
    return out, h * c


@ab.program
def fixed_shape_input(tokens, p):
    """An LSTM given a tensor of one shape across the batch (not a stacked list): a CompileError."""
    x = torch.stack([p.emb(torch.tensor(tokens[0])), p.emb(torch.tensor(tokens[-1]))])
    out, _ = p.lstm(x)  # M:fixed
    return out


@ab.program
def batch_first_gru(tokens, p):
    """The survey's idiom: a batch_first GRU on ``emb(torch.tensor(tokens)).unsqueeze(0)`` (``(1, T, 6)``), its
    output read back by ``.squeeze(0)`` and ``[0, -1]``, its final state ``(1, 1, 5)`` by ``[-1]`` and
    ``.squeeze(0)``."""
    out, h = p.bgru(p.emb(torch.tensor(tokens)).unsqueeze(0))
    return out.squeeze(0).mean(0), out[0, -1], h[-1], h.squeeze(0)


@ab.program
def batch_first_bilstm_view(tokens, p):
    """A 2-layer BiLSTM (batch_first) on ``torch.stack(xs).view(1, len(xs), -1)`` from an initial pair of
    ``(4, 1, 5)`` states computed per instance: the last step ``out[:, -1, :]`` (``(1, 10)``), the first row
    ``out[0][0]``, the rows ``out[0, 1:]`` summed, and the final states."""
    xs = [p.emb(torch.tensor(t)) for t in tokens]
    h0 = torch.tanh(p.init(xs[0])).view(1, 1, 5).repeat(4, 1, 1)
    out, (h, c) = p.bilstm(torch.stack(xs).view(1, len(xs), -1), (h0, torch.sigmoid(h0)))
    return out[:, -1, :], out[0][0], out[0, 1:].sum(0) if len(tokens) > 1 else out[0, 0], h, c


@ab.program
def batch_first_none_index(tokens, p):
    """``torch.stack(xs)[None]`` into the batch_first GRU; ``out`` returned as it is (``(1, T, 5)``), and
    ``out[:, 0]`` through an operator."""
    xs = []
    for t in tokens:
        xs.append(p.emb(torch.tensor(t)))
    out, h = p.bgru(torch.stack(xs)[None])
    return out, torch.tanh(out[:, 0]) * h[0]


@ab.program
def batch_first_reshape(tokens, p):
    """``.reshape(1, -1, 6)`` and ``torch.unsqueeze(S, 0)`` forms, the second GRU started from the first's state."""
    x = torch.stack([p.emb(torch.tensor(t)) for t in tokens])
    out, h = p.bgru(x.reshape(1, -1, 6))
    again, h2 = p.bgru(torch.unsqueeze(torch.tanh(x), 0), h)
    return out[-1].sum(0) + again[0].amax(0), h2


@ab.program
def lead_misused(tokens, p):
    """``out.sum()`` of a batch_first module's ``(1, T, 5)`` output: a CompileError saying how to read it."""
    out, h = p.bgru(p.emb(torch.tensor(tokens)).unsqueeze(0))
    return out.sum()  # M:lead


@ab.program
def not_batch_first_unsqueezed(tokens, p):
    """``(1, T, 6)`` given to a GRU that is not batch_first (T sequences of length 1): a limit of the static tier
    at run time; the default run takes the dynamic tier."""
    out, h = p.gru(torch.stack([p.emb(torch.tensor(t)) for t in tokens]).unsqueeze(0))
    return out.squeeze(0), h


@ab.program
def view_wrong_length(tokens, p):
    """``.view(n, 1, -1)`` with ``n`` not the list's length: an error naming the instance, as PyTorch raises."""
    x = torch.stack([p.emb(torch.tensor(t)) for t in tokens])
    out, _ = p.gru(x.view(len(tokens) + 1, 1, -1))
    return out

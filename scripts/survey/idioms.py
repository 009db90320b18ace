"""Small programs over token lists, each one idiom as users write it (an accumulator from 0, `+=`, nn.LSTM on a
sequence, `torch.stack(losses).mean()`, ...): run by ``scripts/survey/survey.py``."""

import torch
import torch.nn as nn
import torch.nn.functional as F

import acrobat as ab

class M(nn.Module):
    def __init__(s, V=30, D=8):
        super().__init__()
        s.emb = nn.Embedding(V, D); s.lstm = nn.LSTM(D, D); s.cell = nn.LSTMCell(D, D); s.lin = nn.Linear(D, 5); s.D = D
        s.gru = nn.GRU(D, D, batch_first=True)

@ab.program
def loss_from_zero(toks, m):
    loss = 0
    for t in toks:
        loss = loss + m.lin(m.emb(torch.tensor(t))).sum()
    return loss

@ab.program
def loss_aug(toks, m):
    loss = torch.zeros(())
    for t in toks:
        loss += F.cross_entropy(m.lin(m.emb(torch.tensor(t))).unsqueeze(0), torch.tensor([t % 5]))
    return loss

@ab.program
def lstm_module(toks, m):
    x = m.emb(torch.tensor(toks)).unsqueeze(1)
    out, (h, c) = m.lstm(x)
    return m.lin(h[-1, 0])

@ab.program
def gru_batch_first(toks, m):
    out, h = m.gru(m.emb(torch.tensor(toks)).unsqueeze(0))
    return out.squeeze(0).mean(0)

@ab.program
def lstmcell_loop(toks, m):
    h = torch.zeros(1, m.D); c = torch.zeros(1, m.D)
    for i in range(len(toks)):
        h, c = m.cell(m.emb(torch.tensor([toks[i]])), (h, c))
    return F.log_softmax(m.lin(h), dim=1).view(-1)

@ab.program
def argmax_item(toks, m):
    h = m.emb(torch.tensor(toks[0]))
    out = []
    for _ in range(3):
        scores = m.lin(h)
        k = torch.max(scores, 0)[1].item()
        out.append(k)
        h = torch.tanh(h + m.emb(torch.tensor(k)))
    return h, out

@ab.program
def view_squeeze(toks, m):
    hs = [m.emb(torch.tensor(t)).view(1, -1) for t in toks]
    H = torch.cat(hs, 0)
    return H.mean(0).squeeze()

@ab.program
def running_mean(toks, m):
    total = 0.0
    for t in toks:
        total += m.emb(torch.tensor(t))
    return total / len(toks)

@ab.program
def loss_list_sum(toks, m):
    losses = []
    for t in toks:
        losses.append(F.cross_entropy(m.lin(m.emb(torch.tensor(t))).unsqueeze(0), torch.tensor([t % 5])))
    return sum(losses) / len(losses)

@ab.program
def stack_mean_loss(toks, m):
    losses = [F.nll_loss(F.log_softmax(m.lin(m.emb(torch.tensor(t))), -1).unsqueeze(0), torch.tensor([t % 5])) for t in toks]
    return torch.stack(losses).mean()

def programs():
    """(name, program) of every idiom program here, in file order."""
    return [(n, v) for n, v in globals().items() if isinstance(v, ab.Program)]


def setup(rng):
    """The shared model and a batch of token lists (1 to 5 tokens)."""
    return M(), [[rng.randrange(30) for _ in range(rng.randint(1, 5))] for _ in range(5)]

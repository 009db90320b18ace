import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class RNNLM(nn.Module):
    def __init__(self, vocab=30, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)
        self.drop = nn.Dropout(0.0)
        self.dim = dim

    def init_hidden(self):
        return torch.zeros(1, self.dim)

    @ab.function
    def forward(self, tokens):
        hidden = self.init_hidden()
        nll = []
        for i in range(len(tokens) - 1):
            x = self.drop(self.emb(torch.LongTensor([tokens[i]])))
            hidden = self.rnn(x, hidden)
            logp = F.log_softmax(self.out(hidden), dim=-1)
            nll.append(-logp[0, tokens[i + 1]])
        if not nll:
            return torch.tensor(0.)
        return torch.stack(nll).sum() / len(nll)

@ab.program
def run(tokens, model):
    return model(tokens)

def setup(rng):
    return RNNLM(), run, [[rng.randrange(30) for _ in range(rng.randint(1, 7))] for _ in range(6)]

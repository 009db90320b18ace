import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class Seq2Seq(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.enc = nn.GRU(dim, dim, batch_first=True)
        self.dec = nn.GRUCell(2 * dim, dim)
        self.attn = nn.Linear(dim, dim, bias=False)
        self.out = nn.Linear(2 * dim, vocab)

    @ab.function
    def forward(self, src, tgt):
        x = self.emb(torch.tensor(src)).unsqueeze(0)
        enc_out, h = self.enc(x)
        enc_out = enc_out.squeeze(0)
        h = h[0, 0]
        ctx = torch.zeros_like(h)
        loss = 0
        prev = 0
        for t in tgt:
            inp = torch.cat([self.emb(torch.tensor(prev)), ctx], -1)
            h = self.dec(inp.unsqueeze(0), h.unsqueeze(0)).squeeze(0)
            scores = enc_out @ self.attn(h)
            a = F.softmax(scores, dim=0)
            ctx = (a.unsqueeze(1) * enc_out).sum(0)
            logits = self.out(torch.cat([h, ctx]))
            loss = loss + F.cross_entropy(logits.unsqueeze(0), torch.tensor([t]))
            prev = t
        return loss / len(tgt)

@ab.program
def run(pair, model):
    return model(pair[0], pair[1])

def setup(rng):
    data = [([rng.randrange(30) for _ in range(rng.randint(2, 7))], [rng.randrange(30) for _ in range(rng.randint(1, 5))]) for _ in range(6)]
    return Seq2Seq(), run, data

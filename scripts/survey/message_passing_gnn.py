import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class GNN(nn.Module):
    def __init__(self, dim=16, steps=3):
        super().__init__()
        self.inp = nn.Linear(4, dim)
        self.msg = nn.Linear(2 * dim, dim)
        self.upd = nn.GRUCell(dim, dim)
        self.readout = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1))
        self.steps = steps

    @ab.function
    def forward(self, graph):
        feats, edges = graph
        h = [self.inp(f) for f in feats]
        for _ in range(self.steps):
            msgs = [torch.zeros_like(h[0]) for _ in h]
            for (s, d) in edges:
                msgs[d] = msgs[d] + self.msg(torch.cat([h[s], h[d]]))
            h = [self.upd(m.unsqueeze(0), x.unsqueeze(0)).squeeze(0) for m, x in zip(msgs, h)]
        g = torch.stack(h).mean(dim=0)
        return torch.sigmoid(self.readout(g))

@ab.program
def run(graph, model):
    return model(graph)

def setup(rng):
    data = []
    for _ in range(6):
        n = rng.randint(2, 6)
        feats = [torch.randn(4) for _ in range(n)]
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(1, 8))]
        data.append((feats, edges))
    return GNN(), run, data

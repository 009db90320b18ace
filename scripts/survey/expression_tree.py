import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class Expr:
    def __init__(s, op, args=(), val=None): s.op = op; s.args = list(args); s.val = val

class ExprNet(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.leaf = nn.Linear(1, dim)
        self.ops = nn.ModuleDict({"add": nn.Linear(2 * dim, dim), "mul": nn.Linear(2 * dim, dim), "neg": nn.Linear(dim, dim)})
        self.head = nn.Linear(dim, 1)

    def encode(self, e):
        if e.op == "num":
            return torch.relu(self.leaf(torch.tensor([float(e.val)])))
        kids = [self.encode(a) for a in e.args]
        return torch.relu(self.ops[e.op](torch.cat(kids)))

    @ab.function
    def forward(self, e):
        return self.head(self.encode(e)).squeeze(-1)

@ab.program
def run(e, model):
    return model(e)

def rand_expr(rng, d=0):
    if d > 3 or rng.random() < 0.3: return Expr("num", val=rng.randint(-5, 5))
    op = rng.choice(["add", "mul", "neg"])
    return Expr(op, [rand_expr(rng, d + 1) for _ in range(1 if op == "neg" else 2)])

def setup(rng):
    return ExprNet(), run, [rand_expr(rng) for _ in range(6)]

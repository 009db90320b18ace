import torch, torch.nn as nn, torch.nn.functional as F
import acrobat as ab

class TreeLSTM(nn.Module):
    def __init__(self, vocab=50, dim=16, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.ioux = nn.Linear(dim, 3 * dim)
        self.iouh = nn.Linear(2 * dim, 3 * dim)
        self.fx = nn.Linear(dim, dim)
        self.fh = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, classes)
        self.dim = dim

    def node_forward(self, x, child_c, child_h):
        child_h_sum = torch.sum(child_h, dim=0, keepdim=True)
        iou = self.ioux(x) + self.iouh(torch.cat([child_h_sum, child_h_sum], dim=1))
        i, o, u = torch.split(iou, iou.size(1) // 3, dim=1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
        f = torch.sigmoid(self.fh(child_h) + self.fx(x).repeat(len(child_h), 1))
        fc = torch.mul(f, child_c)
        c = torch.mul(i, u) + torch.sum(fc, dim=0, keepdim=True)
        h = torch.mul(o, torch.tanh(c))
        return c, h

    @ab.function
    def forward(self, tree):
        states = [self.forward(ch) for ch in tree.children]
        if len(states) == 0:
            child_c = torch.zeros(1, self.dim)
            child_h = torch.zeros(1, self.dim)
        else:
            child_c, child_h = zip(*states)
            child_c, child_h = torch.cat(child_c, dim=0), torch.cat(child_h, dim=0)
        x = self.emb(torch.tensor([tree.word])) 
        return self.node_forward(x, child_c, child_h)

@ab.program
def classify(tree, model):
    c, h = model(tree)
    return F.log_softmax(model.out(h), dim=1)


class Tree:
    def __init__(self, word, children):
        self.word, self.children = word, children


def _tree(rng, depth=0):
    if depth > 3 or rng.random() < 0.3:
        return Tree(rng.randrange(50), [])
    return Tree(rng.randrange(50), [_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))])


def setup(rng):
    return TreeLSTM(), classify, [_tree(rng) for _ in range(6)]

import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class Viterbi(nn.Module):
    def __init__(self, vocab=30, tags=4, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, tags)
        self.transitions = nn.Parameter(torch.randn(tags, tags))
        self.tags = tags

    @ab.function
    def forward(self, sent):
        feats = [self.proj(self.emb(torch.tensor(w))) for w in sent]
        backpointers = []
        forward_var = torch.full((self.tags,), -10000.)
        forward_var[0] = 0.
        for feat in feats:
            bptrs_t = []
            viterbivars_t = []
            for next_tag in range(self.tags):
                next_tag_var = forward_var + self.transitions[next_tag]
                best_tag_id = torch.argmax(next_tag_var).item()
                bptrs_t.append(best_tag_id)
                viterbivars_t.append(next_tag_var[best_tag_id].view(1))
            forward_var = (torch.cat(viterbivars_t) + feat)
            backpointers.append(bptrs_t)
        best_tag_id = torch.argmax(forward_var).item()
        path_score = forward_var[best_tag_id]
        best_path = [best_tag_id]
        for bptrs_t in reversed(backpointers):
            best_tag_id = bptrs_t[best_tag_id]
            best_path.append(best_tag_id)
        best_path.reverse()
        return path_score, best_path

@ab.program
def run(sent, model):
    return model(sent)

def setup(rng):
    return Viterbi(), run, [[rng.randrange(30) for _ in range(rng.randint(1, 6))] for _ in range(6)]

import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class HAN(nn.Module):
    def __init__(self, vocab=40, dim=16, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.word_rnn = nn.LSTM(dim, dim, bidirectional=True)
        self.word_att = nn.Linear(2 * dim, 1)
        self.sent_rnn = nn.LSTM(2 * dim, dim, bidirectional=True)
        self.sent_att = nn.Linear(2 * dim, 1)
        self.fc = nn.Linear(2 * dim, classes)

    def attend(self, H, att):
        w = F.softmax(att(H).squeeze(-1), dim=0)
        return (w.unsqueeze(-1) * H).sum(0)

    @ab.function
    def forward(self, doc):
        sents = []
        for sent in doc:
            x = self.emb(torch.LongTensor(sent)).unsqueeze(1)
            H, _ = self.word_rnn(x)
            sents.append(self.attend(H.squeeze(1), self.word_att))
        S, _ = self.sent_rnn(torch.stack(sents).unsqueeze(1))
        d = self.attend(S.squeeze(1), self.sent_att)
        return F.log_softmax(self.fc(d), dim=-1)

@ab.program
def run(doc, model):
    return model(doc)

def setup(rng):
    data = [[[rng.randrange(40) for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 4))] for _ in range(6)]
    return HAN(), run, data

import torch, torch.nn as nn, torch.nn.functional as F, random
import acrobat as ab

class LSTMTagger(nn.Module):
    def __init__(self, embedding_dim=8, hidden_dim=8, vocab_size=30, tagset_size=4):
        super(LSTMTagger, self).__init__()
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
def run(sentence, model):
    return model(sentence)

def setup(rng):
    data = [torch.tensor([rng.randrange(30) for _ in range(rng.randint(1, 7))]) for _ in range(6)]
    return LSTMTagger(), run, data

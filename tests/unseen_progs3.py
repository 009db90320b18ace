"""A third set of models acrobat was not written against, for tests/test_unseen3.py: nine models written the way
public GitHub implementations and the PyTorch tutorials write them -- ``nn.Module`` classes whose ``forward``
carries ``@ab.function`` and whose helpers (``self.`` methods, module-level functions) are left undecorated,
a Cell module used by a Tree module, ``nn.LSTM``/``nn.GRU`` on ``self.emb(torch.tensor(tokens))``,
``.view(len(x), 1, -1)``, ``torch.stack(losses).mean()``, ``x += y``, ``global`` vocab dicts, teacher forcing,
greedy decoding with ``.argmax().item()``, ``F.log_softmax``, dropout in eval, a BiLSTM-CRF, tree models that
store ``node.state`` and read their children's, a shift-reduce (SPINN-like) stack machine.

Each entry of ``MODELS`` is a ``Model`` of tests/unseen_progs.py (program, params(seed), instance(rng, size)).
"""

# ruff: noqa
from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

import acrobat as ab
from tests.unseen_progs import Model, _module

HIDDEN = 8
EMB = 6
VOCAB = 20


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)


# --- 1. Child-Sum TreeLSTM (dasguptar/treelstm.pytorch): node.state, zip(*map(lambda ...)), inputs[tree.idx] ----

class Tree:
    def __init__(self, idx: int, children: list | None = None):
        self.idx = idx
        self.children = children if children is not None else []
        self.num_children = len(self.children)
        self.state = None


class ChildSumTreeLSTM(nn.Module):
    def __init__(self, in_dim, mem_dim):
        super().__init__()
        self.in_dim = in_dim
        self.mem_dim = mem_dim
        self.ioux = nn.Linear(self.in_dim, 3 * self.mem_dim)
        self.iouh = nn.Linear(self.mem_dim, 3 * self.mem_dim)
        self.fx = nn.Linear(self.in_dim, self.mem_dim)
        self.fh = nn.Linear(self.mem_dim, self.mem_dim)

    def node_forward(self, inputs, child_c, child_h):
        child_h_sum = torch.sum(child_h, dim=0, keepdim=True)

        iou = self.ioux(inputs) + self.iouh(child_h_sum)
        i, o, u = torch.split(iou, iou.size(1) // 3, dim=1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)

        f = torch.sigmoid(self.fh(child_h) + self.fx(inputs).repeat(len(child_h), 1))
        fc = torch.mul(f, child_c)

        c = torch.mul(i, u) + torch.sum(fc, dim=0, keepdim=True)
        h = torch.mul(o, torch.tanh(c))
        return c, h

    @ab.function
    def forward(self, tree, inputs):
        for idx in range(tree.num_children):
            self.forward(tree.children[idx], inputs)

        if tree.num_children == 0:
            child_c = torch.zeros(1, self.mem_dim)
            child_h = torch.zeros(1, self.mem_dim)
        else:
            child_c, child_h = zip(*map(lambda x: x.state, tree.children))
            child_c, child_h = torch.cat(child_c, dim=0), torch.cat(child_h, dim=0)

        tree.state = self.node_forward(inputs[tree.idx].unsqueeze(0), child_c, child_h)
        return tree.state


class SentimentTreeLSTM(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, EMB)
        self.childsumtreelstm = ChildSumTreeLSTM(EMB, HIDDEN)
        self.wh = nn.Linear(HIDDEN, 3)


@ab.program
def childsum_sentiment(example, model):
    tree, sent = example
    inputs = model.emb(torch.tensor(sent))
    c, h = model.childsumtreelstm(tree, inputs)
    return F.log_softmax(model.wh(h), dim=1)


def _childsum_example(rng: random.Random, size: int) -> tuple:
    sent = [rng.randrange(VOCAB) for _ in range(size)]
    order = list(range(size))
    rng.shuffle(order)

    def build(ids: list[int]) -> Tree:
        if len(ids) == 1:
            return Tree(ids[0])
        k = rng.randint(1, min(3, len(ids) - 1))
        parts, rest = [], ids[1:]
        for j in range(k):
            take = len(rest) // (k - j) if j < k - 1 else len(rest)
            parts.append(rest[:max(1, take)])
            rest = rest[max(1, take):]
        return Tree(ids[0], [build(p) for p in parts if p])

    return build(order), sent


# --- 2. BiLSTM-CRF (the PyTorch tutorial "Advanced: Making Dynamic Decisions and the Bi-LSTM CRF") ---------------

START_TAG = "<START>"
STOP_TAG = "<STOP>"
tag_to_ix = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}
word_to_ix = {}
for _w in ["the", "wall", "street", "journal", "reported", "today", "that", "apple", "corporation", "made",
           "money", "georgia", "tech", "is", "a", "university", "in"]:
    word_to_ix[_w] = len(word_to_ix)


def argmax(vec):
    # return the argmax as a python int
    _, idx = torch.max(vec, 1)
    return idx.item()


def prepare_sequence(seq, to_ix):
    idxs = [to_ix[w] for w in seq]
    return torch.tensor(idxs, dtype=torch.long)


def log_sum_exp(vec):
    max_score = vec[0, argmax(vec)]
    max_score_broadcast = max_score.view(1, -1).expand(1, vec.size()[1])
    return max_score + torch.log(torch.sum(torch.exp(vec - max_score_broadcast)))


class BiLSTM_CRF(nn.Module):
    def __init__(self, seed: int = 0, embedding_dim=5, hidden_dim=4):
        super().__init__()
        _seeded(seed)
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.vocab_size = len(word_to_ix)
        self.tag_to_ix = tag_to_ix
        self.tagset_size = len(tag_to_ix)

        self.word_embeds = nn.Embedding(self.vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True)
        self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
        self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
        self.transitions.data[tag_to_ix[START_TAG], :] = -10000
        self.transitions.data[:, tag_to_ix[STOP_TAG]] = -10000

    def _forward_alg(self, feats):
        init_alphas = torch.full((1, self.tagset_size), -10000.)
        init_alphas[0][self.tag_to_ix[START_TAG]] = 0.
        forward_var = init_alphas
        for feat in feats:
            alphas_t = []
            for next_tag in range(self.tagset_size):
                emit_score = feat[next_tag].view(1, -1).expand(1, self.tagset_size)
                trans_score = self.transitions[next_tag].view(1, -1)
                next_tag_var = forward_var + trans_score + emit_score
                alphas_t.append(log_sum_exp(next_tag_var).view(1))
            forward_var = torch.cat(alphas_t).view(1, -1)
        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        alpha = log_sum_exp(terminal_var)
        return alpha

    def _get_lstm_features(self, sentence):
        embeds = self.word_embeds(sentence).view(len(sentence), 1, -1)
        lstm_out, _ = self.lstm(embeds)
        lstm_out = lstm_out.view(len(sentence), self.hidden_dim)
        lstm_feats = self.hidden2tag(lstm_out)
        return lstm_feats

    def _score_sentence(self, feats, tags):
        score = torch.zeros(1)
        tags = torch.cat([torch.tensor([self.tag_to_ix[START_TAG]], dtype=torch.long), tags])
        for i, feat in enumerate(feats):
            score = score + self.transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]
        score = score + self.transitions[self.tag_to_ix[STOP_TAG], tags[-1]]
        return score

    def _viterbi_decode(self, feats):
        backpointers = []
        init_vvars = torch.full((1, self.tagset_size), -10000.)
        init_vvars[0][self.tag_to_ix[START_TAG]] = 0
        forward_var = init_vvars
        for feat in feats:
            bptrs_t = []
            viterbivars_t = []
            for next_tag in range(self.tagset_size):
                next_tag_var = forward_var + self.transitions[next_tag]
                best_tag_id = argmax(next_tag_var)
                bptrs_t.append(best_tag_id)
                viterbivars_t.append(next_tag_var[0][best_tag_id].view(1))
            forward_var = (torch.cat(viterbivars_t) + feat).view(1, -1)
            backpointers.append(bptrs_t)

        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        best_tag_id = argmax(terminal_var)
        path_score = terminal_var[0][best_tag_id]

        best_path = [best_tag_id]
        for bptrs_t in reversed(backpointers):
            best_tag_id = bptrs_t[best_tag_id]
            best_path.append(best_tag_id)
        start = best_path.pop()
        assert start == self.tag_to_ix[START_TAG]
        best_path.reverse()
        return path_score, best_path

    def neg_log_likelihood(self, sentence, tags):
        feats = self._get_lstm_features(sentence)
        forward_score = self._forward_alg(feats)
        gold_score = self._score_sentence(feats, tags)
        return forward_score - gold_score

    @ab.function
    def forward(self, sentence):
        lstm_feats = self._get_lstm_features(sentence)
        score, tag_seq = self._viterbi_decode(lstm_feats)
        return score, tag_seq


@ab.program
def bilstm_crf(example, model):
    words, tags = example
    sentence_in = prepare_sequence(words, word_to_ix)
    targets = torch.tensor([tag_to_ix[t] for t in tags], dtype=torch.long)
    loss = model.neg_log_likelihood(sentence_in, targets)
    score, path = model(sentence_in)
    return loss, score, path


def _tagged(rng: random.Random, size: int) -> tuple:
    words = [rng.choice(list(word_to_ix)) for _ in range(1 + size % 3)]  # short: the CRF's loops are per tag
    return words, [rng.choice("BIO") for _ in words]


# --- 3. seq2seq with attention (the tutorial "Translation with a Sequence to Sequence Network"): teacher forcing,
#        greedy decoding with .argmax().item() and an EOS break, encoder_outputs[ei] = ..., dropout in eval -------

SOS_token = 0
EOS_token = 1
MAX_LENGTH = 8


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    @ab.function
    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output = embedded
        output, hidden = self.gru(output, hidden)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, 1, self.hidden_size)


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1, max_length=MAX_LENGTH):
        super().__init__()
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.dropout_p = dropout_p
        self.max_length = max_length

        self.embedding = nn.Embedding(self.output_size, self.hidden_size)
        self.attn = nn.Linear(self.hidden_size * 2, self.max_length)
        self.attn_combine = nn.Linear(self.hidden_size * 2, self.hidden_size)
        self.dropout = nn.Dropout(self.dropout_p)
        self.gru = nn.GRU(self.hidden_size, self.hidden_size)
        self.out = nn.Linear(self.hidden_size, self.output_size)

    @ab.function
    def forward(self, input, hidden, encoder_outputs):
        embedded = self.embedding(input).view(1, 1, -1)
        embedded = self.dropout(embedded)

        attn_weights = F.softmax(self.attn(torch.cat((embedded[0], hidden[0]), 1)), dim=1)
        attn_applied = torch.bmm(attn_weights.unsqueeze(0), encoder_outputs.unsqueeze(0))

        output = torch.cat((embedded[0], attn_applied[0]), 1)
        output = self.attn_combine(output).unsqueeze(0)

        output = F.relu(output)
        output, hidden = self.gru(output, hidden)

        output = F.log_softmax(self.out(output[0]), dim=1)
        return output, hidden, attn_weights


class Seq2Seq(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.encoder = EncoderRNN(VOCAB, HIDDEN)
        self.decoder = AttnDecoderRNN(HIDDEN, VOCAB, dropout_p=0.1)


def tensorFromSentence(ids):
    indexes = list(ids)
    indexes.append(EOS_token)
    return torch.tensor(indexes, dtype=torch.long).view(-1, 1)


@ab.program
def seq2seq_attention(pair, model, teacher_forcing=True):
    input_tensor = tensorFromSentence(pair[0])
    target_tensor = tensorFromSentence(pair[1])
    encoder_hidden = model.encoder.initHidden()

    input_length = input_tensor.size(0)
    target_length = target_tensor.size(0)
    encoder_outputs = torch.zeros(MAX_LENGTH, model.encoder.hidden_size)

    loss = 0
    for ei in range(input_length):
        encoder_output, encoder_hidden = model.encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = encoder_output[0, 0]

    decoder_input = torch.tensor([[SOS_token]])
    decoder_hidden = encoder_hidden
    decoded_words = []

    if teacher_forcing:
        for di in range(target_length):
            decoder_output, decoder_hidden, decoder_attention = model.decoder(
                decoder_input, decoder_hidden, encoder_outputs)
            loss += F.nll_loss(decoder_output, target_tensor[di])
            decoder_input = target_tensor[di]
    else:
        for di in range(target_length):
            decoder_output, decoder_hidden, decoder_attention = model.decoder(
                decoder_input, decoder_hidden, encoder_outputs)
            topi = decoder_output.argmax()
            decoder_input = topi.detach()
            loss += F.nll_loss(decoder_output, target_tensor[di])
            decoded_words.append(topi.item())
            if decoder_input.item() == EOS_token:
                break

    return loss / target_length, decoded_words


def _pair(rng: random.Random, size: int) -> tuple:
    n = 1 + size % (MAX_LENGTH - 1)
    return [rng.randrange(2, VOCAB) for _ in range(n)], [rng.randrange(1, VOCAB) for _ in range(rng.randint(1, 5))]


# --- 4. char-level name classifier (the tutorial "Classifying Names with a Character-Level RNN"): a global letter
#        string, a one-hot (len(line), 1, n_letters) tensor filled in place, an RNN module stepped by the caller -----

all_letters = "abcdefghijklmnopqrstuvwxyz .,;'"
n_letters = len(all_letters)


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    @ab.function
    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


class NameClassifier(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.rnn = RNN(n_letters, HIDDEN, 4)


@ab.program
def classify_name(line, model):
    line_tensor = lineToTensor(line)
    hidden = model.rnn.initHidden()
    for i in range(line_tensor.size()[0]):
        output, hidden = model.rnn(line_tensor[i], hidden)
    guess = output.topk(1)[1][0].item()
    return output, guess


def _name(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(all_letters) for _ in range(size))


# --- 5. recursive NN keeping per-node lists on the model (aykutfirat/pyTorchTree): self.nodeProbList.append(...),
#        torch.LongTensor([word]), F.cross_entropy over all nodes -------------------------------------------------

class SNode:
    def __init__(self, label, word=None, left=None, right=None):
        self.label, self.word, self.left, self.right = label, word, left, right

    def isLeaf(self):
        return self.left is None


class RNN_Model(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.W = nn.Linear(2 * HIDDEN, HIDDEN, bias=True)
        self.projection = nn.Linear(HIDDEN, 5, bias=True)
        self.activation = F.relu
        self.nodeProbList = []
        self.labelList = []

    def traverse(self, node):
        if node.isLeaf():
            currentNode = self.activation(self.embedding(torch.LongTensor([node.word])))
        else:
            currentNode = self.activation(self.W(torch.cat((self.traverse(node.left), self.traverse(node.right)), 1)))
        self.nodeProbList.append(self.projection(currentNode))
        self.labelList.append(torch.LongTensor([node.label]))
        return currentNode

    @ab.function
    def forward(self, x):
        self.nodeProbList = []
        self.labelList = []
        self.traverse(x)
        self.labelList = torch.cat(self.labelList)
        return torch.cat(self.nodeProbList)


@ab.program
def recursive_nn_loss(tree, model):
    nodes = model(tree)
    predictions = nodes.max(dim=1)[1]
    loss = F.cross_entropy(input=nodes, target=model.labelList)
    return predictions, loss


def _labelled(rng: random.Random, leaves: int) -> SNode:
    if leaves == 1:
        return SNode(rng.randrange(5), word=rng.randrange(VOCAB))
    k = rng.randint(1, leaves - 1)
    return SNode(rng.randrange(5), left=_labelled(rng, k), right=_labelled(rng, leaves - k))


# --- 6. a Cell module used by a Tree module: node.state = (h, c), children's states read back, x += y,
#        per-node losses collected and torch.stack(losses).mean() ------------------------------------------------

class BinaryTreeLSTMCell(nn.Module):
    def __init__(self, in_dim, mem_dim):
        super().__init__()
        self.W = nn.Linear(in_dim, 5 * mem_dim)
        self.U = nn.Linear(2 * mem_dim, 5 * mem_dim, bias=False)

    @ab.function
    def forward(self, x, lh, lc, rh, rc):
        gates = self.W(x)
        gates += self.U(torch.cat([lh, rh], dim=-1))
        i, fl, fr, o, u = gates.chunk(5, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * lc + torch.sigmoid(fr) * rc
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class TreeLSTM(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.mem_dim = HIDDEN
        self.emb = nn.Embedding(VOCAB, EMB)
        self.cell = BinaryTreeLSTMCell(EMB, HIDDEN)
        self.classifier = nn.Linear(HIDDEN, 5)
        self.dropout = nn.Dropout(0.3)

    def zero_state(self):
        return torch.zeros(self.mem_dim), torch.zeros(self.mem_dim)

    @ab.function
    def forward(self, node):
        if node.isLeaf():
            lh, lc = self.zero_state()
            rh, rc = self.zero_state()
        else:
            self.forward(node.left)
            self.forward(node.right)
            lh, lc = node.left.state
            rh, rc = node.right.state
        x = self.emb(torch.tensor(node.word if node.isLeaf() else 0))
        node.state = self.cell(x, lh, lc, rh, rc)
        return node.state[0]


def collect_losses(node, model, losses):
    logits = model.classifier(model.dropout(node.state[0]))
    losses.append(F.cross_entropy(logits.unsqueeze(0), torch.tensor([node.label])))
    if not node.isLeaf():
        collect_losses(node.left, model, losses)
        collect_losses(node.right, model, losses)


@ab.program
def tree_lstm_losses(tree, model):
    root = model(tree)
    losses = []
    collect_losses(tree, model, losses)
    return torch.stack(losses).mean(), F.log_softmax(model.classifier(root), dim=-1)


# --- 7. an LSTM language model with a `global` vocab built on the fly, positional rows cut W[:len(tokens)],
#        .view(len(ids), 1, -1), dropout module in eval, next-token cross entropy ------------------------------

vocab = {"<unk>": 0, "<eos>": 1}


def tokenize(sentence):
    global vocab
    ids = []
    for w in sentence.split():
        if w not in vocab and len(vocab) < VOCAB:
            vocab[w] = len(vocab)
        ids.append(vocab.get(w, vocab["<unk>"]))
    ids.append(vocab["<eos>"])
    return ids


class RNNModel(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.drop = nn.Dropout(0.5)
        self.encoder = nn.Embedding(VOCAB, EMB)
        self.pos = nn.Parameter(torch.randn(16, EMB) * 0.1)
        self.rnn = nn.LSTM(EMB, HIDDEN)
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    @ab.function
    def forward(self, ids):
        emb = self.drop(self.encoder(torch.tensor(ids)) + self.pos[:len(ids)])
        output, (h, c) = self.rnn(emb.view(len(ids), 1, -1))
        output = self.drop(output)
        decoded = self.decoder(output.view(len(ids), -1))
        return F.log_softmax(decoded, dim=1), h


@ab.program
def lm_loss(sentence, model):
    ids = tokenize(sentence)
    logp, h = model(ids)
    loss = F.nll_loss(logp[:-1], torch.tensor(ids[1:]))
    return loss, h.view(-1)


WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "and", "then", "slept", "here",
         "there", "now", "big", "red", "sun", "moon", "star", "sky"]


def _sentence(rng: random.Random, size: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(size))


# --- 8. hierarchical attention network (Yang et al. 2016 as on GitHub): a word-level BiGRU per sentence on
#        self.emb(torch.tensor(sent)).view(len(sent), 1, -1), self._attend helper, a sentence-level GRU ---------

class HAN(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, EMB)
        self.word_gru = nn.GRU(EMB, HIDDEN // 2, bidirectional=True)
        self.word_att = nn.Linear(HIDDEN, HIDDEN)
        self.word_ctx = nn.Parameter(torch.randn(HIDDEN))
        self.sent_gru = nn.GRU(HIDDEN, HIDDEN)
        self.sent_att = nn.Linear(HIDDEN, HIDDEN)
        self.sent_ctx = nn.Parameter(torch.randn(HIDDEN))
        self.fc = nn.Linear(HIDDEN, 3)

    def _attend(self, out, att, ctx):
        u = torch.tanh(att(out))  # (T, H)
        a = F.softmax(u @ ctx, dim=0)  # (T,)
        return (a.unsqueeze(-1) * out).sum(0), a

    def encode_sentence(self, sent):
        x = self.emb(torch.tensor(sent)).view(len(sent), 1, -1)
        out, _ = self.word_gru(x)
        s, _ = self._attend(out.squeeze(1), self.word_att, self.word_ctx)
        return s

    @ab.function
    def forward(self, doc):
        sents = [self.encode_sentence(s) for s in doc]
        out, h = self.sent_gru(torch.stack(sents).view(len(sents), 1, -1))
        d, weights = self._attend(out.view(len(sents), -1), self.sent_att, self.sent_ctx)
        return F.log_softmax(self.fc(d), dim=-1), weights


@ab.program
def han_classify(doc, model):
    return model(doc)


def _document(rng: random.Random, size: int) -> list:
    return [[rng.randrange(VOCAB) for _ in range(rng.randint(1, 4))] for _ in range(1 + size // 4)]


# --- 9. SPINN-like shift-reduce encoder (jekbradbury/examples): a buffer popped, a stack of (h, c) pairs, a Reduce
#        module composing the top two, transitions read from the instance ----------------------------------------

SHIFT, REDUCE = 0, 1


class Reduce(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.left = nn.Linear(size, 5 * size)
        self.right = nn.Linear(size, 5 * size, bias=False)

    @ab.function
    def forward(self, left, right):
        lh, lc = left
        rh, rc = right
        a, i, f1, f2, o = (self.left(lh) + self.right(rh)).chunk(5)
        c = a.tanh() * i.sigmoid() + f1.sigmoid() * lc + f2.sigmoid() * rc
        h = o.sigmoid() * c.tanh()
        return h, c


class SPINN(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        _seeded(seed)
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.reduce = Reduce(HIDDEN)
        self.out = nn.Linear(HIDDEN, 2)

    def leaf(self, tok):
        e = self.emb(torch.tensor(tok))
        return torch.tanh(e), e

    @ab.function
    def forward(self, example):
        tokens, transitions = example
        buffer = [self.leaf(t) for t in reversed(tokens)]
        stack = []
        for op in transitions:
            if op == SHIFT:
                stack.append(buffer.pop())
            else:
                right, left = stack.pop(), stack.pop()
                stack.append(self.reduce(left, right))
        h, c = stack[-1]
        return F.log_softmax(self.out(h), dim=-1)


@ab.program
def spinn_classify(example, model):
    return model(example)


def _shift_reduce(rng: random.Random, size: int) -> tuple:
    tokens = [rng.randrange(VOCAB) for _ in range(size)]
    ops, depth, shifted = [], 0, 0
    while shifted < size or depth > 1:
        if shifted < size and (depth < 2 or rng.random() < 0.5):
            ops.append(SHIFT)
            shifted, depth = shifted + 1, depth + 1
        else:
            ops.append(REDUCE)
            depth -= 1
    return tokens, ops


# --- the registry ------------------------------------------------------------------------------------------------

MODELS: dict[str, Model] = {
    "childsum_sentiment": Model(childsum_sentiment, _module(SentimentTreeLSTM), _childsum_example),
    "bilstm_crf": Model(bilstm_crf, _module(BiLSTM_CRF), _tagged),
    "seq2seq_attention": Model(seq2seq_attention, lambda seed: (Seq2Seq(seed).eval(), True), _pair),
    "classify_name": Model(classify_name, _module(NameClassifier), _name),
    "recursive_nn_loss": Model(recursive_nn_loss, _module(RNN_Model), _labelled),
    "tree_lstm_losses": Model(tree_lstm_losses, _module(TreeLSTM), _labelled),
    "lm_loss": Model(lm_loss, _module(RNNModel), _sentence),
    "han_classify": Model(han_classify, _module(HAN), _document),
    "spinn_classify": Model(spinn_classify, _module(SPINN), _shift_reduce),
}
MODELS["seq2seq_greedy"] = Model(seq2seq_attention, lambda seed: (Seq2Seq(seed).eval(), False), _pair)

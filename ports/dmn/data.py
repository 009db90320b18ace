"""Instances and seeded weights for the DMN port: bAbI-like stories (the bAbI files are not here) of random
words, prepared by the notebook's own ``prepare_sequence`` and ``pad_to_fact`` (cells 7, 27, 30 and 33)."""

from __future__ import annotations

import random

import torch

WORDS = [f"w{i}" for i in range(30)]


def story(rng: random.Random) -> tuple[list[list[str]], list[str], list[str]]:
    """Facts (2-8, of 3-6 words and ``</s>``), a question (3-5 words and ``?``) and an answer (a word and
    ``</s>``), as the notebook's ``bAbI_data_load`` writes them."""
    facts = [[rng.choice(WORDS) for _ in range(rng.randint(3, 6))] + ['</s>'] for _ in range(rng.randint(2, 8))]
    return facts, [rng.choice(WORDS) for _ in range(rng.randint(3, 5))] + ['?'], [rng.choice(WORDS), '</s>']


def setup(model, n: int, seed: int):
    """(instances, shared arguments): ``n`` instances ``(fact, fact_mask, question, question_mask, num_decode)``
    as the notebook's test loop builds them, and a ``DMN`` of the notebook's size (hidden 80) with its
    ``init_weight`` drawn from ``seed``."""
    word2index = {'<PAD>': 0, '<UNK>': 1, '<s>': 2, '</s>': 3, '?': 4}
    for word in WORDS:
        word2index[word] = len(word2index)
    model.word2index = word2index  # the notebook's global (cell 15), read by DMN.forward
    rng = random.Random(seed)
    instances = []
    for _ in range(n):
        facts, question, answer = story(rng)
        fact, fact_mask = model.pad_to_fact([model.prepare_sequence(f, word2index).view(1, -1) for f in facts],
                                            word2index)
        question = model.prepare_sequence(question, word2index).view(1, -1)
        question_mask = model.Variable(model.ByteTensor([0] * question.size(1)), volatile=False).unsqueeze(0)
        instances.append((fact, fact_mask, question, question_mask, len(answer)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        dmn = model.DMN(len(word2index), 80, len(word2index))
        dmn.init_weight()
    return instances, (dmn,)

"""Instances and seeded weights for the translation port: random source sentences (the notebook's eng-fra corpus
is not here) prepared by the notebook's ``prepare_sequence``, and seeded weights whose greedy decoding ends.

The notebook's ``Decoder.decode`` has no length limit: it stops when it writes ``</s>``. Untrained weights may
never write it, so the ``</s>`` logit's bias is raised by ``EOS_BIAS`` (chosen by trying: with these weights most
translations then end after one word or run on) and only sentences whose translation ends after 2 to
``MAX_STEPS`` steps (run per instance with the module given) are kept."""

from __future__ import annotations

import random

import torch

SOURCE = [f"s{i}" for i in range(30)]
TARGET = [f"t{i}" for i in range(30)]
EOS_BIAS = 0.37
MAX_STEPS = 40


class TooLong(Exception):
    """A translation ran past ``MAX_STEPS`` decoder steps."""


def steps(model, sentence, encoder, decoder) -> int:
    """How many steps ``model.translate`` of ``sentence`` takes to write ``</s>``, or ``MAX_STEPS + 1`` when it
    runs longer (counted by a hook on the decoder's output layer, removed after)."""
    taken = 0

    def count(*_):
        nonlocal taken
        taken += 1
        if taken > MAX_STEPS:
            raise TooLong

    hook = decoder.linear.register_forward_hook(count)
    try:
        with torch.no_grad():
            model.translate(sentence, encoder, decoder)
    except TooLong:
        pass
    finally:
        hook.remove()
    return taken


def setup(model, n: int, seed: int):
    """(instances, shared arguments): ``n`` source sentences of 3-25 words and ``</s>`` (the notebook's length
    limits) as ``(1, T)`` id tensors, and an ``Encoder`` (3 bidirectional GRU layers, as the notebook) and
    ``Decoder`` of embedding 32 and hidden 64 (the notebook: 300 and 512) with ``init_weight`` drawn from
    ``seed``."""
    source2index = {'<PAD>': 0, '<UNK>': 1, '<s>': 2, '</s>': 3}
    target2index = dict(source2index)
    for s, t in zip(SOURCE, TARGET):
        source2index[s], target2index[t] = len(source2index), len(target2index)
    model.target2index = target2index  # the notebook's global (cell 21), read by Decoder.decode
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = model.Encoder(len(source2index), 32, 64, 3, True)
        decoder = model.Decoder(len(target2index), 32, 64 * 2)
        encoder.init_weight()
        decoder.init_weight()
    with torch.no_grad():
        decoder.linear.bias[target2index['</s>']] += EOS_BIAS
    rng = random.Random(seed)
    instances = []
    while len(instances) < n:
        words = [rng.choice(SOURCE) for _ in range(rng.randint(3, 25))]
        sentence = model.prepare_sequence(words + ['</s>'], source2index).view(1, -1)
        if 2 <= steps(model, sentence, encoder, decoder) <= MAX_STEPS:
            instances.append(sentence)
    return instances, (encoder, decoder)

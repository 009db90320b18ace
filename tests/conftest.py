"""Shared fixtures: SST dev trees when ../shared is present, else synthetic SST-like trees."""

from __future__ import annotations

import os

import pytest
import torch

from acrobat.data import load_dataset
from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree
from acrobat.runtime.backend import AUTO_ENV

# backend="auto" (run's default) would compile Inductor kernels for every test model run under no_grad:
# tests run eager unless they ask for a backend (tests of "auto" itself set this variable back).
os.environ.setdefault(AUTO_ENV, "eager")


@pytest.fixture(scope="session")
def dataset():
    """Up to 64 dev trees: real SST if found (tests then run on real inputs), else synthetic."""
    torch.manual_seed(0)
    return load_dataset(limit=64)


def _ptb(t: Tree) -> str:
    return f"({t.label} {t.word})" if t.is_leaf else f"({t.label} {_ptb(t.left)} {_ptb(t.right)})"


@pytest.fixture(scope="module")
def sst(tmp_path_factory):
    """A tiny SST folder (``acrobat train``'s tests): 40 train, 12 dev, 10 test trees (synthetic, short)."""
    folder = tmp_path_factory.mktemp("sst")
    trees = [t for t in synthetic_trees(1000, seed=5, vocab_size=60) if t.size() <= 15]
    for name, part in (("train", trees[:40]), ("dev", trees[40:52]), ("test", trees[52:62])):
        (folder / f"{name}.txt").write_text("\n".join(_ptb(t) for t in part) + "\n")
    return folder

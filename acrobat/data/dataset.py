"""The trees a benchmark or example runs on: real SST when found, else synthetic ones."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acrobat.data.sst import load_trees, sst_vocab
from acrobat.data.synthetic import synthetic_trees, synthetic_vocab
from acrobat.data.tree import Tree
from acrobat.data.vocab import Vocab

SST_DIR_ENV = "ACROBAT_SST_DIR"
"""Environment variable naming the SST folder; searched before the default places."""

SYNTHETIC_SEED = 0
"""Seed of the synthetic trees used when SST is not found."""

SYNTHETIC_SIZE = 1101
"""Synthetic trees made when no limit is given: the size of SST dev."""

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout holding the ``acrobat`` package; SST is looked for beside it."""

_VOCAB_FILES = ("train.txt", "dev.txt")


@dataclass
class Dataset:
    """Trees with the vocab their word ids index, and where they came from."""

    trees: list[Tree]
    vocab: Vocab
    description: str
    """One human sentence: source, file or seed, number of trees, vocab size."""
    source: Literal["sst", "synthetic"]


def sst_dir_candidates() -> list[Path]:
    """The folders :func:`find_sst_dir` tries, in order.

    ``$ACROBAT_SST_DIR`` when set, then ``<repo root>/../shared/data/sst``,
    then ``<cwd>/../shared/data/sst``.
    """
    candidates = [Path(os.environ[SST_DIR_ENV])] if os.environ.get(SST_DIR_ENV) else []
    for base in (REPO_ROOT, Path.cwd()):
        candidates.append((base / ".." / "shared" / "data" / "sst").resolve())
    return candidates


def find_sst_dir() -> Path | None:
    """The first candidate folder holding ``train.txt`` or ``dev.txt``; None when none does."""
    for folder in sst_dir_candidates():
        if any((folder / name).is_file() for name in _VOCAB_FILES):
            return folder
    return None


def load_dataset(path: str | os.PathLike[str] | None = None, split: str = "dev", limit: int | None = None) -> Dataset:
    """The trees of ``split`` (the first ``limit`` when given).

    ``path`` is an SST tree file, or a folder holding ``{split}.txt``; the
    vocab comes from the ``train.txt`` and ``dev.txt`` beside the trees (so it
    is the same whichever split), or from the tree file itself when neither
    is there. Without ``path``, the folder :func:`find_sst_dir` finds is used,
    and when there is none, ``limit`` (default 1101) synthetic trees of seed 0
    with :func:`synthetic_vocab`. Raises ``FileNotFoundError`` naming what was
    looked for when ``path`` (or ``{split}.txt`` in it) is missing.
    """
    if path is not None:
        return _load_sst(Path(path), split, limit)
    folder = find_sst_dir()
    if folder is None:
        return _synthetic(limit)
    return _load_sst(folder, split, limit)


def _load_sst(path: Path, split: str, limit: int | None) -> Dataset:
    file = _tree_file(path, split)
    vocab = sst_vocab(_vocab_files(file))
    trees = load_trees(file, vocab, limit)
    description = f"SST {file.stem} ({file}), {len(trees)} trees, vocab {len(vocab)}"
    return Dataset(trees, vocab, description, "sst")


def _tree_file(path: Path, split: str) -> Path:
    """``path`` itself, or ``{split}.txt`` in it when it is a folder."""
    if path.is_dir():
        file = path / f"{split}.txt"
        if not file.is_file():
            raise FileNotFoundError(f"no SST {split} trees: {file} not found")
        return file
    if not path.is_file():
        raise FileNotFoundError(f"SST data not found: {path} is neither a tree file nor a folder holding {split}.txt")
    return path


def _vocab_files(file: Path) -> list[Path]:
    beside = [file.parent / name for name in _VOCAB_FILES if (file.parent / name).is_file()]
    return beside or [file]


def _synthetic(limit: int | None) -> Dataset:
    trees = synthetic_trees(SYNTHETIC_SIZE if limit is None else limit, seed=SYNTHETIC_SEED)
    vocab = synthetic_vocab()
    description = (
        f"synthetic SST-like trees (seed {SYNTHETIC_SEED}, SST folder not found), "
        f"{len(trees)} trees, vocab {len(vocab)}"
    )
    return Dataset(trees, vocab, description, "synthetic")

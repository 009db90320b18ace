"""Model inputs: SST trees (parsed or synthetic), vocabularies and datasets."""

from acrobat.data.dataset import Dataset, find_sst_dir, load_dataset
from acrobat.data.sst import load_trees, parse_tree, sst_vocab
from acrobat.data.synthetic import synthetic_trees, synthetic_vocab
from acrobat.data.tree import Tree
from acrobat.data.vocab import Vocab

__all__ = [
    "Dataset",
    "Tree",
    "Vocab",
    "find_sst_dir",
    "load_dataset",
    "load_trees",
    "parse_tree",
    "sst_vocab",
    "synthetic_trees",
    "synthetic_vocab",
]

"""The model registry: each paper model (Table 4) as an acrobat program plus its baselines.

A ``ModelSpec`` ties together the acrobat program, its parameter module,
how to make its instances from a dataset, its plain per-instance PyTorch
reference and (where an expert would write one) a hand-batched version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from acrobat.data.tree import Tree
from acrobat.models.birnn import BiRNNParams, birnn_hand_batched, birnn_reference
from acrobat.models.birnn_program import birnn
from acrobat.models.params import SIZES
from acrobat.models.treelstm import TreeLSTMParams, treelstm_hand_batched, treelstm_reference
from acrobat.models.treelstm_program import treelstm
from acrobat.program import Program


@dataclass(frozen=True)
class ModelSpec:
    """One benchmark model: program, parameters, instances, baselines."""

    name: str
    description: str
    program: Program
    make_params: Callable[[int, int, int], nn.Module]  # (vocab_size, hidden, seed) -> params
    instances: Callable[[list[Tree]], list[Any]]  # dataset trees -> model instances
    reference: Callable[[Any, nn.Module], Any]  # one instance, plain PyTorch
    hand_batched: Callable[[list[Any], nn.Module], list[Any]] | None = None
    sizes: tuple[tuple[str, int], ...] = tuple(SIZES.items())

    def hidden(self, size: str) -> int:
        """Hidden size for ``"small"``/``"large"``.

        Raises:
            ValueError: unknown size name.
        """
        table = dict(self.sizes)
        if size not in table:
            raise ValueError(f"unknown size {size!r}; choose one of {', '.join(table)}")
        return table[size]


MODELS: dict[str, ModelSpec] = {
    "treelstm": ModelSpec(
        "treelstm", "binary constituency TreeLSTM (Tai et al. 2015) over SST trees",
        treelstm, lambda v, h, s: TreeLSTMParams(v, h, seed=s), lambda trees: list(trees),
        treelstm_reference, treelstm_hand_batched),
    "birnn": ModelSpec(
        "birnn", "bidirectional RNN with a per-token output layer over SST sentences",
        birnn, lambda v, h, s: BiRNNParams(v, h, seed=s), lambda trees: [t.tokens() for t in trees],
        birnn_reference, birnn_hand_batched),
}


def get_model(name: str) -> ModelSpec:
    """The registered model ``name``.

    Raises:
        ValueError: unknown model (the message lists the known ones).
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    return MODELS[name]

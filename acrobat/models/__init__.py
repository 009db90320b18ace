"""The model registry: the paper's seven models (Table 4) as acrobat programs plus their baselines.

A ``ModelSpec`` ties together the acrobat program, its parameter module,
how to make its instances, its plain per-instance PyTorch reference and
(where an expert would write one) a hand-batched version. Models over text
read SST trees; the others (NestedRNN, DRNN, Berxit) generate seeded
instances, as the paper does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from acrobat.data.tree import Tree
from acrobat.models import berxit as bx
from acrobat.models import mvrnn as mv
from acrobat.models.berxit_program import berxit
from acrobat.models.birnn import BiRNNParams, birnn_hand_batched, birnn_reference
from acrobat.models.birnn_program import birnn
from acrobat.models.drnn import DRNNParams, drnn_instances, drnn_reference
from acrobat.models.drnn_program import drnn
from acrobat.models.mvrnn_program import mvrnn
from acrobat.models.nestedrnn import NestedRNNParams, nested_instances, nestedrnn_hand_batched, nestedrnn_reference
from acrobat.models.nestedrnn_program import nestedrnn
from acrobat.models.params import SIZES
from acrobat.models.stackrnn import StackRNNParams, stackrnn_reference
from acrobat.models.stackrnn_program import stackrnn
from acrobat.models.treelstm import TreeLSTMParams, treelstm_hand_batched, treelstm_reference
from acrobat.models.treelstm_program import treelstm
from acrobat.program import Program

GENERATED_VOCAB = 1000
"""Vocabulary of the generated-input models' token ids."""


@dataclass(frozen=True)
class ModelSpec:
    """One benchmark model: program, parameters, instances, baselines.

    ``make_params(vocab_size, hidden, seed)``; ``instances(trees)`` makes
    one instance per dataset tree (generated models only use the count);
    ``reference(instance, params)`` runs one instance in plain PyTorch.
    """

    name: str
    description: str
    program: Program
    make_params: Callable[[int, int, int], nn.Module]
    instances: Callable[[list[Tree]], list[Any]]
    reference: Callable[[Any, nn.Module], Any]
    hand_batched: Callable[[list[Any], nn.Module], list[Any]] | None = None
    sizes: tuple[tuple[str, int], ...] = tuple(SIZES.items())
    data: str = "sst"  # "sst": instances come from SST trees; "generated": seeded synthetic instances

    def hidden(self, size: str) -> int:
        """Hidden size for ``"small"``/``"large"``.

        Raises:
            ValueError: unknown size name.
        """
        table = dict(self.sizes)
        if size not in table:
            raise ValueError(f"unknown size {size!r}; choose one of {', '.join(table)}")
        return table[size]


def berxit_spec(seq_len: int = bx.SEQ_LEN, layers: int | None = None) -> ModelSpec:
    """The Berxit model, optionally scaled down (shorter sequences, fewer layers) for a 2-core CPU."""
    by_hidden = {cfg["hidden"]: cfg for cfg in bx.SIZES.values()}

    def make_params(vocab: int, hidden: int, seed: int) -> nn.Module:
        cfg = by_hidden[hidden]
        return bx.BerxitParams(GENERATED_VOCAB, hidden, cfg["heads"], cfg["ffn"], layers or cfg["layers"],
                               seq_len=seq_len, seed=seed)

    return ModelSpec(
        "berxit", f"early-exit BERT with shared layer weights over generated {seq_len}-token sequences",
        berxit, make_params, lambda trees: bx.berxit_instances(len(trees), GENERATED_VOCAB, seq_len=seq_len),
        bx.berxit_reference, sizes=tuple((k, v["hidden"]) for k, v in bx.SIZES.items()), data="generated")


MODELS: dict[str, ModelSpec] = {
    "treelstm": ModelSpec(
        "treelstm", "binary constituency TreeLSTM (Tai et al. 2015) over SST trees",
        treelstm, lambda v, h, s: TreeLSTMParams(v, h, seed=s), lambda trees: list(trees),
        treelstm_reference, treelstm_hand_batched),
    "mvrnn": ModelSpec(
        "mvrnn", "MV-RNN (Socher et al. 2012): a vector and a matrix per node, over SST trees",
        mvrnn, lambda v, h, s: mv.MVRNNParams(v, h, seed=s), lambda trees: list(trees),
        mv.mvrnn_reference, mv.mvrnn_hand_batched, sizes=tuple(mv.SIZES.items())),
    "birnn": ModelSpec(
        "birnn", "bidirectional RNN with a per-token output layer over SST sentences",
        birnn, lambda v, h, s: BiRNNParams(v, h, seed=s), lambda trees: [t.tokens() for t in trees],
        birnn_reference, birnn_hand_batched),
    "nestedrnn": ModelSpec(
        "nestedrnn", "an RNN loop nested in a GRU loop, 20-40 iterations each, generated inputs",
        nestedrnn, lambda v, h, s: NestedRNNParams(GENERATED_VOCAB, h, seed=s),
        lambda trees: nested_instances(len(trees), GENERATED_VOCAB), nestedrnn_reference, nestedrnn_hand_batched,
        data="generated"),
    "drnn": ModelSpec(
        "drnn", "doubly recurrent NN (Alvarez-Melis & Jaakkola 2017): top-down tree generation",
        drnn, lambda v, h, s: DRNNParams(GENERATED_VOCAB, h, seed=s),
        lambda trees: drnn_instances(len(trees), GENERATED_VOCAB), drnn_reference, data="generated"),
    "berxit": berxit_spec(),
    "stackrnn": ModelSpec(
        "stackrnn", "shift-reduce parser with RNN cells and argmax-chosen actions over SST sentences",
        stackrnn, lambda v, h, s: StackRNNParams(v, h, seed=s), lambda trees: [t.tokens() for t in trees],
        stackrnn_reference),
}


def get_model(name: str, **overrides: int) -> ModelSpec:
    """The registered model ``name``; Berxit takes ``seq_len``/``layers`` overrides.

    Raises:
        ValueError: unknown model (the message lists the known ones), or an
            override the model does not take.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return MODELS[name]
    if name != "berxit":
        raise ValueError(f"{', '.join('--' + k.replace('_', '-') for k in given)} only apply to berxit")
    return berxit_spec(**given)

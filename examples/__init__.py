"""User-style dynamic models beyond the paper's seven, each checked against plain PyTorch.

Every example module has the same interface:

- ``NAME`` (its registry key) and ``SUMMARY`` (one line);
- ``program``: the ``@acrobat.program`` written for ONE instance;
- ``make_params(seed=0)``: its seeded ``nn.Module`` of weights;
- ``instances(n, seed=0)``: ``n`` seeded instances;
- ``reference(instance, params)``: a plain per-instance PyTorch version written
  independently of the program (the expected result of ``program.run``);
- ``main()``: ``python -m examples.<name>`` runs a batch of 64 with acrobat
  (eager and compiled) against the reference and prints the max error, launches
  per batch and times against a per-instance loop (``run_main``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXAMPLES: dict[str, str] = {
    "childsum_treelstm": "examples.childsum_treelstm",
    "greedy_decoder": "examples.greedy_decoder",
    "node_classifier_rnn": "examples.node_classifier_rnn",
    "tree_gru": "examples.tree_gru",
    "act_rnn": "examples.act_rnn",
    "leaf_attention": "examples.leaf_attention",
    "dag_rnn": "examples.dag_rnn",
    "pointer_net": "examples.pointer_net",
    "recursive_module": "examples.recursive_module",
    "stateful_treelstm": "examples.stateful_treelstm",
    "moe_router": "examples.moe_router",
    "module_network": "examples.module_network",
    "transformer_encoder": "examples.transformer_encoder",
    "shift_reduce_parser": "examples.shift_reduce_parser",
    "relational_gnn": "examples.relational_gnn",
    "crf_tagger": "examples.crf_tagger",
    "extractive_summarizer": "examples.extractive_summarizer",
    "beam_decoder": "examples.beam_decoder",
}
"""Example name -> module."""


def load(name: str) -> ModuleType:
    """The example module called ``name``.

    Raises:
        ValueError: an unknown name (the message lists the examples).
    """
    if name not in EXAMPLES:
        raise ValueError(f"unknown example {name!r}; choose from {', '.join(EXAMPLES)}")
    return importlib.import_module(EXAMPLES[name])


def run_main(name: str, batch_size: int = 64) -> None:
    """What ``python -m examples.<name>`` does: one batch, acrobat (eager, compiled) vs a per-instance loop."""
    from acrobat.bench.examples import example_table, measure
    from acrobat.bench.machine import machine_line

    print(f"machine  {machine_line()}")
    print(example_table([measure(load(name), batch_size)]))

"""Models and idioms written as users write them, tried as a new user would: decorators only, default options.

    PYTHONPATH=. python scripts/survey/survey.py [--batch 6] [--seed 0]

For each model here (each file's ``setup(rng)`` gives the model, the program and a batch) and each program of
``idioms.py``, it prints whether the static tier takes it (``Options(strict=True)``; else the first reason, with
file:line), which tier the default run used (static, dynamic, or plain per-instance calls chosen by measurement),
and whether the default run equals plain per-instance calls (``torch.testing.assert_close``). The session notes of
issue 18 quote its table. No timings: ``acrobat examples`` and ``acrobat.benchmark`` time.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import warnings
from pathlib import Path

import torch

import acrobat as ab

HERE = Path(__file__).parent
MODELS = ("childsum_treelstm", "seq2seq_attention", "message_passing_gnn", "hierarchical_attention", "lstm_tagger",
          "viterbi_decoder", "expression_tree", "rnn_language_model", "recursive_helper")


def try_one(prog: ab.Program, model: object, batch: list) -> tuple[str, str, str]:
    """(static tier's answer, the default run's tier, equal to plain calls?) for ``prog`` on ``batch``."""
    try:
        with torch.no_grad():
            prog.run(batch, model, options=ab.Options(strict=True))
        static = "takes it"
    except Exception as exc:  # noqa: BLE001 - the static tier's refusal or failure, reported
        first = str(exc).strip().splitlines()[0]
        static = f"{type(exc).__name__}: {first.replace(str(HERE) + '/', '')[:150]}"
    stats = ab.RunStats()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [prog(x, model) for x in batch]
        got = prog.run(batch, model, stats=stats)
    try:
        torch.testing.assert_close(got, want)
        same = "yes"
    except AssertionError as exc:
        same = f"NO: {str(exc).splitlines()[0]}"
    tier = "plain calls" if stats.plain and stats.plain.startswith("ran as plain") else \
        "dynamic" if stats.dynamic is not None else "static"
    return static, tier, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=6, help="instances per batch (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and instances (default 0)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    rows = []
    for name in MODELS:
        torch.manual_seed(args.seed)
        model, prog, batch = importlib.import_module(name).setup(random.Random(args.seed))
        rows.append((name, *try_one(prog, model, batch[:args.batch])))
    idioms = importlib.import_module("idioms")
    torch.manual_seed(args.seed)
    model, batch = idioms.setup(random.Random(args.seed))
    for name, prog in idioms.programs():
        rows.append((f"idioms.{name}", *try_one(prog, model, batch[:args.batch])))
    print(f"| program | static tier (strict) | default run | equals plain calls |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\n{sum(r[1] == 'takes it' for r in rows)} of {len(rows)} in the static tier; "
          f"{sum(r[3] == 'yes' for r in rows)} of {len(rows)} equal plain calls by default")


if __name__ == "__main__":
    main()

"""The differential fuzzer (issue 17): random programs of supported constructs, plain Python vs batched.

Fast profile (always): a fixed list of seeds on the eager backend, a few on
the compiled backend, some in the dynamic tier alone (``Options(static=False)``),
and hypothesis drawing programs itself (it shrinks what fails). Long profile: ``ACROBAT_FUZZ_MINUTES=N pytest tests/test_fuzz.py``
generates programs for N minutes on both backends, counts the outcomes by
category, shrinks every failure to a small program and writes a report
(``$ACROBAT_FUZZ_REPORT``, default ``fuzz-report.md``); it fails if any
program gave a wrong result, an internal error or an error on a valid
program. The oracle itself is tested: it must catch a deliberately wrong
result.
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acrobat as ab
from tests.fuzz.chooser import HypothesisChooser, RandomChooser
from tests.fuzz.generator import FuzzProgram, generate
from tests.fuzz.oracle import FAILURES, Outcome, check, same
from tests.fuzz.shrink import shrink_program

# between them every feature of test_the_programs_use_the_constructs
FAST_EAGER = [*range(40), 321, 469, 77, 45, 47, 41, 42, 76, 48, 53, 100, 238, 257, 297, 569, 70, 403, 463, 516, 71]
FAST_COMPILED = (3, 11)
FAST_DYNAMIC = range(20)
MINUTES = float(os.environ.get("ACROBAT_FUZZ_MINUTES", "0") or 0)


def _program(seed: int) -> FuzzProgram:
    return generate(RandomChooser(seed))


@pytest.mark.parametrize("seed", FAST_EAGER)
def test_random_program_eager(seed):
    out = check(_program(seed), ("eager",))
    assert out.category not in FAILURES, f"seed {seed}: {out}\n{_program(seed).source}"


@pytest.mark.parametrize("seed", FAST_COMPILED)
def test_random_program_both_backends(seed):
    out = check(_program(seed), ("eager", "compiled"))
    assert out.category not in FAILURES, f"seed {seed}: {out}\n{_program(seed).source}"


@pytest.mark.parametrize("seed", FAST_DYNAMIC)
def test_random_program_dynamic_tier(seed):
    out = check(_program(seed), ("dynamic",))
    assert out.category not in FAILURES, f"seed {seed}: {out}\n{_program(seed).source}"


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def test_programs_hypothesis_draws(data):
    program = generate(HypothesisChooser(data), max_stmts=3, max_depth=2)
    out = check(program, ("eager",))
    assert out.category not in FAILURES, f"{out}\n{program.source}"


def test_the_programs_use_the_constructs():
    """The fixed seeds cover the constructs the README lists (a generator that lost one would go unnoticed)."""
    seen = set().union(*(_program(s).features for s in FAST_EAGER))
    for feature in ("recursion", "tensor-dependent control flow", "inline value read", "list changed by callee",
                    "comprehension", "dict", "optional", "nn cell", "stack/reduce", "early return", "break",
                    "while", "phase", "nested def", "tuple", "starred", "concurrent calls", "list alias",
                    "chained assignment", "list reverse", "list truth", "tuple of chunks", "max(dim) unpacked",
                    "max(dim=0).values of a stack", "module chosen by a per-instance int", "key=lambda",
                    "list returned by a callee, changed", "starred call", "list unpacked into *rest",
                    "node attribute stored and read back",
                    "torch.cat of unsqueezed items", "dim=-1 of stacked scalars", "softmax over dim=-1 of a stack",
                    "topk/sort of a stack",
                    "operator within the rows of a stack", "loop over a tensor's rows",
                    "enumerate over a tensor's rows",
                    "zip over a tensor's rows", "reversed over a tensor's rows", "list of a tensor's rows",
                    "loop over a tensor's 0-d rows", "module-level data", "int rebound to a tensor", "host int list",
                    "instance's own int list", "host int list read",
                    "tensor of a host int list", "nn.Embedding by ids", "host int list changed",
                    "host int list changed after a use", "loop over a host int list", "zip of a host int list",
                    "instance tensor", "instance tensor written in place", "elif", "while True", "annotated assignment",
                    "with inference_mode", "with enable_grad", "module method call", "nn.Sequential",
                    "parameter list by data", "full reduction of a stack", "map of a lambda",
                    "torch.cat of a list variable", "augmented assignment of a fresh tensor",
                    "item assignment of a fresh tensor", "accumulator from a host number", "accumulator returned",
                    "shape read held in a variable",
                    *(f"loop over a module container: {form}" for form in
                      ("list", "enumerate", "zip", "sequential", "reversed")),
                    "memo dict keyed by host data",
                    *(f"rejected construct in a helper: {form}" for form in
                      ("dict", "try", "lambda", "generator", "isinstance")),
                    *(f"rejected construct in the entry: {form}" for form in
                      ("dict loop", "try", "lambda", "isinstance"))):
        assert feature in seen, feature


# ------------------------------------------------------------------ the oracle catches what it must


def test_oracle_catches_a_wrong_result(monkeypatch):
    program = _program(1)
    assert check(program, ("eager",)).category == "ok"
    real = ab.Program.run

    def off_by_a_bit(self, instances, *shared, **kwargs):
        out = real(self, instances, *shared, **kwargs)
        return [torch.utils._pytree.tree_map(lambda t: t + 1e-2 if isinstance(t, torch.Tensor) else t, o)
                for o in out]

    monkeypatch.setattr(ab.Program, "run", off_by_a_bit)
    assert check(program, ("eager",)).category == "wrong"


def test_oracle_classifies_internal_errors(monkeypatch):
    program = _program(2)

    def broken(self, *args, **kwargs):
        raise KeyError(117111)

    monkeypatch.setattr(ab.Program, "run", broken)
    assert check(program, ("eager",)).category == "internal"


def test_same_compares_structure_and_values():
    t = torch.ones(3)
    assert same((t, 1, [t]), (t.clone(), 1, [t]), torch.float32) is None
    assert same((t, 1), (t, 2), torch.float32) is not None
    assert same(5, t, torch.float32) is not None  # an int handle where a tensor belongs
    assert same([t], [t, t], torch.float32) is not None
    assert same({"h": t}, {"h": t + 1}, torch.float32) is not None
    assert same(0.5, 0.5 + 1e-9, torch.float32) is None
    assert same(t / 0 * 0, t / 0 * 0, torch.float32) is None  # NaN agrees with NaN (0 / 0 in both)
    assert same(t / 0 * 0, t, torch.float32) is not None


# ------------------------------------------------------------------ the long profile


PROGRAM_SECONDS = 600  # one program's plain and batched runs, all backends


class _ProgramTimeout(BaseException):
    """A program over ``PROGRAM_SECONDS``: a BaseException, so no ``except Exception`` in acrobat or the oracle
    takes it for a failure of the program."""


def _out_of_time(signum: int, frame: object) -> None:
    raise _ProgramTimeout


@pytest.mark.skipif(MINUTES <= 0, reason="long fuzz run: set ACROBAT_FUZZ_MINUTES=N")
def test_long_fuzz_run():
    """Programs for ``ACROBAT_FUZZ_MINUTES`` minutes on both backends; every failure shrunk and reported."""
    deadline = time.monotonic() + MINUTES * 60
    seed = int(os.environ.get("ACROBAT_FUZZ_SEED", random.randrange(1 << 30)))
    counts: collections.Counter = collections.Counter()
    by_backend: collections.Counter = collections.Counter()
    rejections: collections.Counter = collections.Counter()
    features: collections.Counter = collections.Counter()
    failures: list[str] = []
    kinds: dict[str, list[int]] = {}  # each failure's kind (``_kind_of``) -> the seeds of its later repeats
    start = seed
    signal.signal(signal.SIGALRM, _out_of_time)
    while time.monotonic() < deadline:
        program = _program(seed)
        backends = ("eager", "compiled", "dynamic") if seed % 3 == 0 else ("eager", "dynamic")
        signal.alarm(PROGRAM_SECONDS)
        try:
            out = check(program, backends)
        except _ProgramTimeout:
            counts["over the time limit"] += 1  # a program of nested value-dependent loops: not a verdict
            seed += 1
            continue
        finally:
            signal.alarm(0)
        counts[out.category] += 1
        by_backend[backends] += 1
        features.update(program.features)
        if out.category == "rejected":
            rejections[out.detail.split(": ", 2)[-1][:90]] += 1
        if out.category in FAILURES and _kind_of(out) in kinds:
            kinds[_kind_of(out)].append(seed)  # one more of a failure shrunk before: its seed only
        elif out.category in FAILURES:
            kinds[_kind_of(out)] = []
            ch = RandomChooser(seed)
            generate(ch)
            small, small_out = shrink_program(ch.record, backends, budget_s=180)
            failures.append(f"### seed {seed}: {out.category}\n\n{small_out}\n\n```python\n{small.source}```\n"
                            f"instances: {small.kind}, {small.dtype}, batch sizes {small.batch_sizes}, "
                            f"options {small.options}\n")
        seed += 1
        _write_report(start, seed, counts, by_backend, rejections, features, failures, kinds)
    report = _write_report(start, seed, counts, by_backend, rejections, features, failures, kinds)
    print(report)
    assert not failures, report


def _kind_of(out: Outcome) -> str:
    """What tells one failure from another in a long run: the category and the first two lines of the message,
    names with numbers and numbers made ``#`` (a ``wrong`` result: the path in the result only)."""
    head = out.detail.split(":", 1)[0] if out.category == "wrong" else "\n".join(out.detail.splitlines()[:2])
    return f"{out.category}: " + re.sub(r"[A-Za-z_]*[0-9]+", "#", re.sub(r"/\S+", "", head))[:240]


def _write_report(start: int, seed: int, counts: collections.Counter, by_backend: collections.Counter,
                  rejections: collections.Counter, features: collections.Counter, failures: list[str],
                  kinds: dict[str, list[int]]) -> str:
    """The long run's report so far, written to ``$ACROBAT_FUZZ_REPORT`` (after every program: a run stopped
    early still leaves one). A failure of a kind shrunk before is not shrunk again: its seed is listed."""
    lines = [f"# acrobat fuzz run: {sum(counts.values())} programs in {MINUTES:g} min (seeds {start}..{seed - 1})", "",
             "| outcome | programs |", "|---|---:|", *(f"| {k} | {v} |" for k, v in counts.most_common()), "",
             "| backends | programs |", "|---|---:|", *(f"| {'+'.join(k)} | {v} |" for k, v in by_backend.items()), "",
             "Rejections (CompileError), by message:", "",
             *(f"- {v} x {k}" for k, v in rejections.most_common(15)), "",
             "Constructs used (programs):", "", ", ".join(f"{k} {v}" for k, v in features.most_common()), "",
             "## Failures (shrunk)", "", *(failures or ["none"]), "",
             "Repeats of a failure shrunk above (not shrunk again), by kind:", "",
             *(f"- {k.splitlines()[0]}: seeds {v}" for k, v in kinds.items() if v)]
    report = "\n".join(lines)
    Path(os.environ.get("ACROBAT_FUZZ_REPORT", "fuzz-report.md")).write_text(report)
    return report

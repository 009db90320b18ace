"""Shrink a failing program to a small one that fails the same way (as hypothesis shrinks its choice sequence).

A program is the replay of a record of decisions (``tests.fuzz.chooser``),
and smaller numbers and a shorter record replay as a simpler program. So
``shrink`` edits the record, not the source: it cuts its tail, deletes runs
of decisions, and lowers single decisions to 0 or to half, keeping each
edit whose program still fails with the same signature, until no edit
helps or the budget is spent.
"""

from __future__ import annotations

import re
import time
from typing import Callable

from tests.fuzz.chooser import ReplayChooser
from tests.fuzz.generator import FuzzProgram, generate
from tests.fuzz.oracle import Outcome, check


def signature(out: Outcome) -> str:
    """What must stay the same while shrinking: the category and the exception type (or 'wrong')."""
    head = out.detail.split(":", 1)[0] if out.category != "wrong" else ""
    return f"{out.category}:{re.sub(r'[0-9]+', '#', head)}"


def shrink(record: list[int], fails: Callable[[list[int]], bool], budget_s: float = 120.0) -> list[int]:
    """The smallest record found (by length, then sum) for which ``fails`` still holds; ``record`` fails."""
    best = list(record)
    deadline = time.monotonic() + budget_s

    def better(candidate: list[int]) -> bool:
        nonlocal best
        if time.monotonic() > deadline or (len(candidate), sum(candidate)) >= (len(best), sum(best)):
            return False
        if fails(candidate):
            best = candidate
            return True
        return False

    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        n = len(best)
        while n > 1 and better(best[: n // 2]):  # cut the tail
            n = len(best)
            improved = True
        for size in (8, 4, 2, 1):  # delete runs of decisions
            i = len(best) - size
            while i >= 0:
                if better(best[:i] + best[i + size:]):
                    improved = True
                i -= 1
        for i in range(len(best)):  # lower single decisions
            for value in (0, best[i] // 2, best[i] - 1):
                if 0 <= value < best[i] and better(best[:i] + [value] + best[i + 1:]):
                    improved = True
                    break
    return best


def replay(record: list[int]) -> FuzzProgram:
    """The program a record of decisions replays as."""
    return generate(ReplayChooser(record))


def shrink_program(record: list[int], backends: tuple[str, ...], budget_s: float = 120.0) -> tuple[FuzzProgram, Outcome]:
    """Shrink the failing program of ``record`` on ``backends``: the smallest program found and its outcome."""
    want = signature(check(replay(record), backends))

    def fails(candidate: list[int]) -> bool:
        return signature(check(replay(candidate), backends)) == want

    small = shrink(record, fails, budget_s)
    program = replay(small)
    return program, check(program, backends)

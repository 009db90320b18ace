"""Where the fuzzer's random decisions come from: a seeded generator, a replayed record, or hypothesis.

Every decision is one call ``choose(n)`` returning an index in ``[0, n)``;
index 0 is always the simplest option (fewest statements, the plainest
expression), so a record whose numbers are made smaller or cut short
replays as a smaller program: that is how ``acrobat``'s fuzzer shrinks a
failing program (``tests.fuzz.shrink``), the way hypothesis shrinks its
choice sequence.
"""

from __future__ import annotations

import random
from typing import Any, Sequence, TypeVar

T = TypeVar("T")


class Chooser:
    """Base: ``choose(n)`` in ``[0, n)``; helpers built on it. ``record`` keeps every index returned."""

    def __init__(self) -> None:
        self.record: list[int] = []

    def _next(self, n: int) -> int:
        raise NotImplementedError

    def choose(self, n: int) -> int:
        """An index in ``[0, n)`` (0 when ``n <= 1``)."""
        i = self._next(n) if n > 1 else 0
        self.record.append(i)
        return i

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options`` (the first is the simplest)."""
        return options[self.choose(len(options))]

    def int(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]`` (``lo`` is the simplest)."""
        return lo + self.choose(hi - lo + 1)

    def coin(self, percent: int) -> bool:
        """True with about ``percent`` % probability (False is the simpler answer)."""
        return self.choose(100) >= 100 - percent


class RandomChooser(Chooser):
    """Decisions from a seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    def _next(self, n: int) -> int:
        return self.rng.randrange(n)


class ReplayChooser(Chooser):
    """Decisions replayed from ``prefix`` (each clamped to its range); past its end, always 0."""

    def __init__(self, prefix: Sequence[int]) -> None:
        super().__init__()
        self.prefix = list(prefix)

    def _next(self, n: int) -> int:
        k = len(self.record)
        return min(self.prefix[k], n - 1) if k < len(self.prefix) else 0


class HypothesisChooser(Chooser):
    """Decisions drawn from hypothesis (``st.data()``), which then shrinks failures itself."""

    def __init__(self, data: Any) -> None:
        super().__init__()
        from hypothesis import strategies as st
        self.data = data
        self.st = st

    def _next(self, n: int) -> int:
        return self.data.draw(self.st.integers(0, n - 1))

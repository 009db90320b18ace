"""One run-time choice between two settings, made by timing whole runs by turns (App. C.1's profile-guided choice).

The compiled backend chooses per block and launch size class a gather mode
(§5.2: explicit or fused) and threads per launch (1 or torch's pool,
``acrobat.runtime.threads``); each such choice is a ``Trial``. A trial
runs its two settings by turns, one per run (all launches of its size class
in a run alike: a block's launches in one run differ in size, and turns by
launch gave one setting the same tree levels run after run), sums each
run's µs and rows, and once each setting was timed in ``runs`` runs compares
the medians of the runs' µs per row (``choose``): the ``default`` setting is
kept unless the ``other`` takes at most ``margin`` of its time. A median of
several runs ignores a run the machine slowed; the margin makes a near tie
fall the same way in every process (either setting is then within the
margin of the best). A run in which a launch compiled a kernel is no sample
(``discard``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Generic, Hashable, TypeVar

S = TypeVar("S", bound=Hashable)


def median_us_per_row(runs: dict[int, list[float]]) -> float:
    """The median over ``runs`` (serial -> [µs, rows]) of a run's µs per row; 0.0 with no runs."""
    return statistics.median(us / max(rows, 1) for us, rows in runs.values()) if runs else 0.0


def choose(default: list[float], other: list[float], margin: float, every_run: bool = False) -> bool:
    """Whether the other setting wins: the median of its per-run µs per row (``other``) is at most ``margin``
    (a share, below 1) of the default's median (``default``). Ties and near ties keep the default.
    ``every_run`` is for an alternative that can cost far more than it saves (a thread pool on busy cores):
    then none of its runs may be slower than the default's median either. (The rule was "its slowest run
    within the margin" until a single ordinary hiccup of a shared machine, a pooled run 10% slower than
    the others, flipped the choice of the same block between processes, issue 23; a stall still loses.)

    Raises:
        ValueError: a setting without samples.
    """
    if not default or not other:
        raise ValueError("choose: both settings need samples")
    base = statistics.median(default)
    return statistics.median(other) <= margin * base and (not every_run or max(other) <= base)


@dataclass
class Trial(Generic[S]):
    """A choice between ``default`` and ``other`` for one (block, launch size class), by turns of whole runs.

    ``runs``: runs each setting is timed in before the choice; ``margin``, ``every_run``: see ``choose``.
    ``choice`` is None while probing.
    """

    default: S
    other: S
    runs: int
    margin: float
    every_run: bool = False
    samples: dict[S, dict[int, list[float]]] = field(default_factory=dict)  # setting -> run serial -> [µs, rows]
    choice: S | None = None
    turns: int = 0  # runs the trial took part in while probing (the settings alternate by turn)
    serial: int = -1  # the run of its last turn
    skip: int = -1  # a run in which a launch compiled a kernel: not a sample
    note: str = ""  # why ``choice`` was made without measuring, where it was

    def setting(self, serial: int) -> S:
        """The setting of this trial's launches in run ``serial`` (the first call in a new run takes the next
        turn, or makes the choice once both settings were timed in ``runs`` runs)."""
        if self.choice is not None:
            return self.choice
        if self.serial != serial:
            self.serial = serial
            if self.ready():
                self.settle()
                return self.choice  # type: ignore[return-value]
            self.turns += 1
        return self.default if self.turns % 2 else self.other  # turns 1, 3, ...: the default

    def ready(self) -> bool:
        """Whether both settings were timed in ``runs`` runs."""
        return all(len(self.samples.get(s, ())) >= self.runs for s in (self.default, self.other))

    def settle(self) -> None:
        """Choose from the samples (``choose``); call when ``ready``."""
        rates = {s: [us / max(rows, 1) for us, rows in self.samples[s].values()] for s in (self.default, self.other)}
        wins = choose(rates[self.default], rates[self.other], self.margin, self.every_run)
        self.choice = self.other if wins else self.default

    def record(self, setting: S, us: float, rows: int, serial: int) -> None:
        """A timed launch in run ``serial`` at ``setting``: ``us`` µs for ``rows`` batched rows (ignored once
        chosen, or in a run that compiled)."""
        if self.choice is not None or serial == self.skip:
            return
        run = self.samples.setdefault(setting, {}).setdefault(serial, [0.0, 0])
        run[0] += us
        run[1] += rows

    def discard(self, serial: int) -> None:
        """Run ``serial`` compiled a kernel in one of this trial's launches: none of its launches is a sample."""
        for runs in self.samples.values():
            runs.pop(serial, None)
        self.skip = serial

    def us_per_row(self, setting: S) -> float:
        """Median over the runs timed at ``setting`` of the run's µs per batched row (0.0 if none)."""
        return median_us_per_row(self.samples.get(setting, {}))

    def progress(self) -> str:
        """How far the probing is, e.g. ``3/5 and 2/5 runs``."""
        return " and ".join(f"{len(self.samples.get(s, ()))}/{self.runs}" for s in (self.default, self.other)) + " runs"

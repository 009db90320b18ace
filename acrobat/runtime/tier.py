"""The dynamic tier or plain per-instance calls, chosen by measurement, for a program the static tier did not take.

The dynamic tier (``acrobat.runtime.dynamic``) batches any program at run time, at a cost per recorded
operator on the host. Where a model's operators are tiny and batch poorly (a decoder whose instances stop at
different steps, a mean batch of a few rows), that cost exceeds what batching saves, and the batch ran slower
than the user's own loop over its instances. So for a program that runs in the dynamic tier because the
static analysis (§4) rejected it (not because ``Options(static=False)`` asked for it), and in inference (under
autograd the batched backward is where batching pays, and a run's forward time alone cannot tell), each
(backend, batch size class) is a ``Trial`` (App. C.1's profile-guided choice, applied to the tier) between the
dynamic tier (the default) and plain calls (the program called once per instance, as plain Python, which is
the reference semantics: the results are the same either way). They run by turns of whole batches; the first
dynamic run is no sample (it infers operator shapes and builds launches); plain calls are kept only when
their median time per instance is at most ``PLAIN_MARGIN`` of the dynamic tier's. The run report says which
ran, why and what was measured (``RunStats.plain``); ``probing`` names the trials still running, so
``acrobat.benchmark`` and the bench's warm-up wait for them.
"""

from __future__ import annotations

import itertools
from typing import Hashable

from acrobat.runtime.threads import class_rows, size_class
from acrobat.runtime.tuning import Trial

PROBE_RUNS = 3
"""Timed batches per tier before the choice."""
PLAIN_MARGIN = 0.9
"""Plain calls replace the dynamic tier only when they take at most this share of its time per instance."""
DYNAMIC, PLAIN = "dynamic", "plain"


class TierChoice:
    """Per key (the batch's size class, and whatever else the caller adds) a ``Trial`` between ``DYNAMIC`` and
    ``PLAIN`` (module docstring). ``next_batch`` gives the tier of a batch; ``record`` times it."""

    def __init__(self) -> None:
        self.trials: dict[tuple[Hashable, int], Trial[str]] = {}
        self._serials = itertools.count()

    def next_batch(self, key: Hashable, n: int) -> tuple[str, Trial[str], int]:
        """The tier of the next batch of ``n`` instances under ``key``: (``DYNAMIC`` or ``PLAIN``, its trial,
        the batch's serial for ``record``)."""
        trial = self.trials.get((key, size_class(n)))
        if trial is None:
            trial = self.trials[(key, size_class(n))] = Trial(DYNAMIC, PLAIN, PROBE_RUNS, PLAIN_MARGIN)
        serial = next(self._serials)
        return trial.setting(serial), trial, serial

    @staticmethod
    def record(trial: Trial[str], tier: str, us: float, n: int, serial: int) -> None:
        """A batch of ``n`` instances took ``us`` µs in ``tier``; the trial's first dynamic batch is no sample."""
        if tier == DYNAMIC and trial.skip < 0 and not trial.samples.get(DYNAMIC):
            trial.discard(serial)
            return
        trial.record(tier, us, n, serial)

    @staticmethod
    def keep_dynamic(trial: Trial[str]) -> None:
        """The program drew random numbers in the dynamic tier: it stays there (plain calls draw other numbers,
        so a batch run after ``torch.manual_seed(s)`` would not repeat itself across the trial's turns)."""
        if trial.choice is None:
            trial.choice = DYNAMIC
            trial.note = "kept: the program draws random numbers, which plain calls would draw otherwise"

    @staticmethod
    def why(trial: Trial[str]) -> str:
        """What the trial measured and chose, for the run report."""
        if trial.note:
            return trial.note
        dyn, plain = trial.us_per_row(DYNAMIC) / 1e3, trial.us_per_row(PLAIN) / 1e3
        measured = f"dynamic tier {dyn:.2f} ms, plain calls {plain:.2f} ms per instance" if dyn and plain else ""
        if trial.choice is None:
            return f"the tier is on trial ({trial.progress()}){': ' + measured if measured else ''}"
        return f"chosen by measurement: {measured}" if measured else "chosen by measurement"

    def probing(self) -> list[str]:
        """The batch sizes whose tier is still on trial, e.g. ``tier (batches of 32-63)``."""
        return [f"tier (batches of {class_rows(size)})" for (_, size), t in self.trials.items() if t.choice is None]

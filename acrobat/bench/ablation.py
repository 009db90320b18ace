"""The ablation of acrobat's optimizations (paper Fig. 8): switched on one at a time.

Every boolean field of ``acrobat.Options`` is one optimization. The steps
start with all of them off and turn them on cumulatively in the fields'
declaration order (the paper's order: grain-size coarsening, hoisting,
concurrency i.e. inline depths of independent calls, program phases, then
whatever is added later, e.g. ghost operators). Options are read at call
time, so switches added to ``Options`` show up without changes here.
"""

from __future__ import annotations

import dataclasses

from acrobat.program import Options


TIER_SWITCHES = ("static", "strict")
"""``Options`` fields that choose the tier, not an optimization of the static tier: not ablated."""


def switches() -> list[str]:
    """The optimization switches: the boolean ``Options`` fields but the tier's, in declaration order."""
    return [f.name for f in dataclasses.fields(Options) if f.type in (bool, "bool") and f.name not in TIER_SWITCHES]


def ablation_steps() -> list[tuple[str, Options]]:
    """``[("all off", ...), ("+coarsening", ...), ("+hoisting", ...), ...]``, cumulative.

    The last step has every switch on (acrobat's default configuration
    when every default is on).
    """
    names = switches()
    on: dict[str, bool] = {n: False for n in names}
    steps = [("all off", Options(**on))]
    for n in names:
        on[n] = True
        steps.append((f"+{n}", Options(**on)))
    return steps

"""The tier of a program the static tier rejected: the dynamic tier or plain per-instance calls, by measurement
(acrobat.runtime.tier). Results are the plain calls' either way; the report says which ran."""

from __future__ import annotations

import random

import pytest
import torch

import acrobat as ab
from acrobat.runtime.tier import DYNAMIC, PLAIN, TierChoice
from tests import dynamic_progs as dp


def _tokens(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(10) for _ in range(rng.randint(1, 6))] for _ in range(n)]


def _feed(tiers: TierChoice, n: int, us: dict[str, float], batches: int) -> tuple[str, ...]:
    """Run ``batches`` batches of ``n`` through ``tiers``, each tier taking ``us[tier]`` µs; the tiers taken."""
    taken = []
    for _ in range(batches):
        tier, trial, serial = tiers.next_batch((), n)
        taken.append(tier)
        tiers.record(trial, tier, us[tier], n, serial)
    return tuple(taken)


def test_plain_calls_replace_the_dynamic_tier_only_when_clearly_faster():
    fast_plain = TierChoice()
    taken = _feed(fast_plain, 8, {DYNAMIC: 1000.0, PLAIN: 500.0}, 12)
    # by turns, the first dynamic batch no sample, then three of each; then plain for good
    assert taken[:8] == (DYNAMIC, PLAIN) * 4 and set(taken[8:]) == {PLAIN}
    assert fast_plain.probing() == [] and "chosen by measurement" in TierChoice.why(next(iter(fast_plain.trials.values())))
    near = TierChoice()
    assert set(_feed(near, 8, {DYNAMIC: 1000.0, PLAIN: 950.0}, 12)[8:]) == {DYNAMIC}  # within the margin: batched
    # each batch size class decides on its own
    assert near.next_batch((), 100)[0] == DYNAMIC and len(near.probing()) == 1


def test_a_rejected_program_runs_as_plain_calls_once_they_win(monkeypatch):
    p = dp.Params()
    batch = _tokens(5, 1)
    with torch.no_grad():
        want = [dp.try_except(x, p) for x in batch]
        be, _ = dp.try_except.backend("eager")
        be.tiers.trials.clear()
        stats = ab.RunStats()
        dp.try_except.run(batch, p, backend="eager", stats=stats)  # the first batch: dynamic
        assert stats.dynamic is not None and "on trial" in stats.plain
        (trial,) = be.tiers.trials.values()
        trial.choice = PLAIN  # as if plain calls had won the trial
        stats = ab.RunStats()
        got = dp.try_except.run(batch, p, backend="eager", stats=stats)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    assert stats.backend == "plain calls" and stats.dynamic is None and stats.dfg_nodes == 0
    assert "plain per-instance calls, unbatched" in stats.report() and "plain per-instance" in stats.summary()
    assert not [what for what in be.tiers.probing() if "4-7" in what]  # this batch size's tier is chosen


def test_plain_calls_name_the_failing_instance_and_line():
    p = dp.Params()
    be, _ = dp.try_except.backend("eager")
    be.tiers.trials.clear()
    with torch.no_grad():
        dp.try_except.run([[1], [2]], p, backend="eager")
        next(iter(be.tiers.trials.values())).choice = PLAIN
        with pytest.raises(ab.InstanceError) as info:
            dp.try_except.run([[1], 5], p, backend="eager")  # `for t in tokens` fails on an int
    assert str(info.value).startswith("instance 1: ") and f"{dp.__file__}:" in str(info.value)
    assert info.value.instance == 1


def test_forced_dynamic_tier_and_training_never_run_plain_calls():
    p = dp.Params()
    batch = _tokens(4, 2)
    forced = ab.Options(static=False)
    be, _ = dp.try_except.backend("eager", options=forced)
    for _ in range(10):
        stats = ab.RunStats()
        with torch.no_grad():
            dp.try_except.run(batch, p, backend="eager", options=forced, stats=stats)
        assert stats.dynamic is not None and stats.plain is None
    assert not be.tiers.trials
    for _ in range(3):  # under autograd: the batched backward is where batching pays
        stats = ab.RunStats()
        dp.try_except.run(batch, p, stats=stats)
        assert stats.dynamic is not None


@ab.program
def _noisy_try(tokens, p):
    """A `try` (the static tier rejects it) around a draw: ``torch.randn_like``."""
    h = p.emb[tokens[0]]
    try:
        h = h + 0.1 * torch.randn_like(h)
    except RuntimeError:
        pass
    return torch.tanh(h)


def test_a_rejected_program_that_draws_random_numbers_stays_in_the_dynamic_tier():
    """Plain calls draw other numbers than the dynamic tier's launches: while the tier was on trial, batches run
    after torch.manual_seed(0) alternated between the two and did not repeat (README, "Seeds"). The first batch
    that draws keeps the dynamic tier, and the report says why."""
    p = dp.Params()
    batch = _tokens(6, 2)
    outs = []
    with torch.no_grad():
        for _ in range(6):
            torch.manual_seed(0)
            stats = ab.RunStats()
            outs.append(_noisy_try.run(batch, p, backend="eager", stats=stats))
            assert stats.dynamic is not None and "draws random numbers" in stats.plain
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], rtol=0, atol=0)

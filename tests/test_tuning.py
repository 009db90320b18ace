"""Run-time choices (acrobat.runtime.tuning, .remembered): medians with a margin, fed fake timings (nothing timed
is asserted), and settled choices remembered across fresh runtimes reading the same cache folder."""

from __future__ import annotations

import json

import pytest
import torch

import acrobat as ab
from acrobat.models import get_model
from acrobat.runtime import remembered
from acrobat.runtime.remembered import ChoiceMemory
from acrobat.runtime.tuning import Trial, choose

HIDDEN = 32
MAX_RUNS = 80  # runs to wait for tuning in the end-to-end tests (it takes about 25)


def _feed(trial: Trial[str], rates: dict[str, list[float]], rows: int = 8) -> list[str]:
    """Runs 1, 2, ... of ``trial`` until it chooses, each run one launch of ``rows`` rows taking the next
    µs per row of its setting's list in ``rates``. The settings the runs took."""
    taken: list[str] = []
    serial = 0
    while trial.choice is None:
        serial += 1
        s = trial.setting(serial)
        if trial.choice is not None:
            break
        taken.append(s)
        trial.record(s, rates[s][taken.count(s) - 1] * rows, rows, serial)
    return taken


def test_choose_keeps_the_default_unless_the_other_wins_by_the_margin():
    assert not choose([10.0], [10.0], 0.95)  # a tie keeps the default
    assert not choose([10.0], [9.6], 0.95)  # within the margin: the default
    assert choose([10.0], [9.4], 0.95)
    assert choose([10.0, 10.0, 50.0], [9.0, 9.0, 9.0], 0.95)
    with pytest.raises(ValueError):
        choose([], [1.0], 0.9)


def test_a_trial_takes_turns_by_run_then_compares_medians():
    t = Trial("fused", "explicit", runs=3, margin=0.95)
    taken = _feed(t, {"fused": [10.0, 10.0, 10.0], "explicit": [8.0, 8.0, 8.0]})
    assert taken == ["fused", "explicit"] * 3
    assert t.choice == "explicit" and t.us_per_row("explicit") == pytest.approx(8.0)
    assert t.setting(99) == "explicit"  # settled: every later run


def test_one_noisy_run_does_not_flip_the_choice():
    """The default is truly faster (10 µs/row against 12); one run of it slowed by the machine (80) would
    flip a choice made on one sample each, never the median of five."""
    noisy = {"fused": [80.0, 10.0, 10.5, 9.8, 10.1], "explicit": [12.0, 11.8, 12.3, 12.1, 11.9]}
    assert choose(noisy["fused"][:1], noisy["explicit"][:1], 0.95)  # the single-sample decision flips
    t = Trial("fused", "explicit", runs=5, margin=0.95)
    _feed(t, noisy)
    assert t.choice == "fused"
    # and the other way round: a slowed run of the truly faster alternative
    u = Trial("fused", "explicit", runs=5, margin=0.95)
    _feed(u, {"fused": [10.0, 10.2, 9.9, 10.1, 10.0], "explicit": [60.0, 7.0, 7.2, 6.9, 7.1]})
    assert u.choice == "explicit"


def test_near_ties_fall_the_same_way_whatever_the_noise():
    """Settings within the margin of each other: every ordering of the same noisy samples keeps the default
    (a process-to-process coin flip without the margin)."""
    fast, slow = [10.0, 10.3, 9.7, 10.1, 9.9], [9.8, 10.2, 9.9, 10.0, 10.4]
    for shift in range(5):
        t = Trial("fused", "explicit", runs=5, margin=0.95)
        _feed(t, {"fused": fast[shift:] + fast[:shift], "explicit": slow[::-1]})
        assert t.choice == "fused"


def test_an_alternative_that_can_cost_far_more_must_win_every_run():
    """Threads per launch: the pool's median wins by the margin, but one of its runs was far slower (busy
    cores): with ``every_run`` the pool is not taken; without, it is. An ordinary hiccup does not decide."""
    pool = [5.0, 5.0, 400.0, 5.0, 5.0]
    assert choose([10.0] * 5, pool, 0.8) and not choose([10.0] * 5, pool, 0.8, every_run=True)
    t = Trial(1, 0, runs=5, margin=0.8, every_run=True)
    _feed(t, {1: [10.0] * 5, 0: pool})  # type: ignore[dict-item]
    assert t.choice == 1
    u = Trial(1, 0, runs=5, margin=0.8, every_run=True)
    _feed(u, {1: [10.0, 30.0, 10.0, 9.0, 11.0], 0: [5.0, 6.0, 7.0, 5.5, 6.5]})  # type: ignore[dict-item]
    assert u.choice == 0  # clearly faster in every run: taken (a slow 1-thread run does not matter)
    v = Trial(1, 0, runs=5, margin=0.8, every_run=True)
    _feed(v, {1: [12.6, 12.4, 12.8, 12.5, 12.7], 0: [9.2, 9.0, 11.0, 9.3, 9.1]})  # type: ignore[dict-item]
    assert v.choice == 0  # one ordinary hiccup (11.0: above the margin, below 1 thread's median) does not decide


def test_a_run_that_compiled_is_no_sample():
    t = Trial(1, 0, runs=2, margin=0.8)
    t.setting(1)
    t.record(1, 500.0, 4, 1)
    t.discard(1)
    t.record(1, 5.0, 4, 1)  # a later launch of the same run
    assert t.samples[1] == {} and t.progress() == "0/2 and 0/2 runs"


# -------------------------------------------------------------- remembered choices


class _Block:
    """What ``ChoiceMemory.key`` reads of a block."""

    def __init__(self, name: str, source: str):
        self.name, self.source = name, source


def test_memory_keeps_choices_per_block_shape_and_machine(tmp_path, monkeypatch):
    block, shared = _Block("cell", "def cell(x, w): ..."), [torch.zeros(4, 4)]
    mem = ChoiceMemory("compiled", "python wrapper", folder=tmp_path)
    key = mem.key(block, shared, torch.device("cpu"), 2)  # type: ignore[arg-type]
    mem.keep(key, "cell", "gather", 3, "explicit")
    mem.keep(key, "cell", "threads", 3, "all")
    fresh = ChoiceMemory("compiled", "python wrapper", folder=tmp_path)
    assert fresh.key(block, shared, torch.device("cpu"), 2) == key  # type: ignore[arg-type]
    assert fresh.recall(key, "gather", 3) == "explicit" and fresh.recall(key, "threads", 3) == "all"
    assert fresh.recall(key, "gather", 4) is None
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert data["block"] == "cell" and data["machine"]["threads"] == 2
    assert fresh.key(block, shared, torch.device("cpu"), 1) != key  # another thread count
    bigger = fresh.key(block, [torch.zeros(8, 8)], torch.device("cpu"), 2)  # type: ignore[arg-type]
    assert bigger != key and fresh.recall(bigger, "gather", 3) is None  # other weights' shapes: not theirs
    assert ChoiceMemory("eager", folder=tmp_path).key(block, shared, torch.device("cpu"), 2) != key  # type: ignore[arg-type]
    forced = ChoiceMemory("compiled", "python wrapper, threads per launch 1", folder=tmp_path)
    assert forced.key(block, shared, torch.device("cpu"), 2) != key  # type: ignore[arg-type]
    assert fresh.key(_Block("dyn", ""), shared, torch.device("cpu"), 2) is None  # type: ignore[arg-type]
    for change in ({"threads": 99}, {"torch": "0.0.1"}, {"cpu": "another CPU"}):
        machine = {**remembered.machine(), **change}
        with monkeypatch.context() as m:
            m.setattr(remembered, "machine", lambda threads=None, machine=machine: machine)
            other = ChoiceMemory("compiled", "python", folder=tmp_path)
            assert other.recall(other.key(block, shared, torch.device("cpu"), 2), "gather", 3) is None  # type: ignore[arg-type]


def test_an_unusable_folder_keeps_nothing_silently(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    mem = ChoiceMemory("compiled", folder=blocker / "tuning")
    key = mem.key(_Block("cell", "src"), [], torch.device("cpu"), 2)  # type: ignore[arg-type]
    mem.keep(key, "cell", "gather", 1, "fused")  # no error, no warning
    assert ChoiceMemory("compiled", folder=blocker / "tuning").recall(key, "gather", 1) is None


def _tune(program, batch, params, backend: str = "compiled") -> tuple[int, object]:
    """Runs of ``batch`` until ``backend`` is tuned: (runs taken, the backend). After every run, no gather
    trial has a sample while the threads trial of its block and size class is still probing."""
    be = None
    with torch.inference_mode():
        for runs in range(1, MAX_RUNS + 1):
            program.run(batch, params, backend=backend)
            be = program.backend(backend)[0]
            for k in be.kernels:
                for (_, size), t in k.trials.items():
                    threads = be.threads.blocks.get((k.block.id, size))
                    assert threads is None or threads.choice is not None or not any(t.samples.values())
            if be.tuned():
                return runs, be
    return MAX_RUNS, be


def _choices(be) -> dict:
    """Every settled choice of a backend: gather per (block, size class), threads per (block, size class)."""
    out = {("threads", k): t.choice for k, t in be.threads.blocks.items()}
    for k in getattr(be, "kernels", []):
        out.update({("gather", k.block.name, size): t.choice for (_, size), t in k.trials.items()})
    return out


def test_a_fresh_runtime_starts_with_the_remembered_choices(dataset, tmp_path, monkeypatch):
    """Fresh runtime objects over the same cache folder (as a new process) start tuned and probe nothing; a
    changed torch version or thread count probes again. Kernels come from Inductor's cache as usual."""
    monkeypatch.setenv("ACROBAT_CACHE_DIR", str(tmp_path))
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    batch = spec.instances(dataset.trees)[:16]
    spec.program.reset_backends()
    runs, be = _tune(spec.program, batch, params)
    assert be.tuned() and runs < MAX_RUNS and list(tmp_path.glob("tuning/*.json"))
    assert "tuned: nothing is probing" in be.report()
    for path in tmp_path.glob("tuning/*.json"):  # keyed by the process's thread count, not a 1-thread launch's
        assert json.loads(path.read_text())["machine"]["threads"] == torch.get_num_threads()
    settled = _choices(be)
    if torch.get_num_threads() > 1:  # the gather trials waited for the threads trials: both were timed apart
        assert any(k[0] == "threads" for k in settled)

    spec.program.reset_backends()
    with torch.inference_mode():
        stats = ab.RunStats()
        spec.program.run(batch, params, backend="compiled", stats=stats)
    fresh = spec.program.backend("compiled")[0]
    assert fresh.tuned() and stats.probing == [] and "still probing" not in stats.report()
    assert _choices(fresh) == settled
    assert all(not t.samples for k in fresh.kernels for t in k.trials.values())  # nothing timed on trial
    assert "(remembered)" in fresh.report()

    machine = {**remembered.machine(), "torch": "0.0.1"}
    monkeypatch.setattr(remembered, "machine", lambda threads=None: machine)
    spec.program.reset_backends()
    with torch.inference_mode():
        stats = ab.RunStats()
        spec.program.run(batch, params, backend="compiled", stats=stats)
    assert not spec.program.backend("compiled")[0].tuned()
    assert stats.probing and "still probing" in stats.report()
    spec.program.reset_backends()

"""``acrobat.benchmark``: warm-up until compiling and tuning are done, then batched vs per-instance by turns.

Timings are never asserted; what is checked is which runs the medians are made of, the result check and
the printed line's form.
"""

from __future__ import annotations

import random
import re

import pytest
import torch

import acrobat
from examples import quickstart as q

LINE = re.compile(r"^batched [\d.]+ ms, per instance [\d.]+ ms, [\d.]+x, results equal \(\d+ warm-up batches; "
                  r"medians of \d+ rounds, spread ±\d+% / ±\d+%; \w+ backend\)$")


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    rng = random.Random(1)
    return q.Params().eval(), [q.random_tree(rng, rng.randint(1, 9)) for _ in range(6)]


def test_eager_line_and_rounds(setup):
    params, trees = setup
    r = acrobat.benchmark(q.classify, trees, params, backend="eager", rounds=3)
    assert LINE.match(str(r)), str(r)
    assert len(r.batched_ms) == len(r.per_instance_ms) == 3
    assert r.equal and r.tuned and r.warmup_batches >= 1 and r.backend == "eager"
    assert r.stats.runs == 3 and r.stats.instances == 3 * len(trees)  # the timed runs only


def test_compiled_medians_exclude_compiling_and_probing(setup):
    """The first runs compile kernels and probe gathers and threads: they are warm-up, never timed."""
    params, trees = setup
    q.classify.reset_backends()  # as in a new process: compiles (or loads from the disk cache), then probes
    r = acrobat.benchmark(q.classify, trees, params, backend="compiled", rounds=2)
    assert r.equal and r.tuned and r.backend == "compiled"
    assert r.warmup_batches >= 2  # the first run compiles; gathers are probed over several runs
    assert r.stats.compiles == 0 and r.stats.compile_ms == 0  # no timed run compiled
    be, _ = q.classify.backend("compiled")
    assert be.tuned()


def test_warm_up_cap_is_reported(setup):
    params, trees = setup
    q.classify.reset_backends()
    r = acrobat.benchmark(q.classify, trees, params, backend="compiled", rounds=1, max_warmup=1)
    assert r.warmup_batches == 1 and not r.tuned
    assert "1 warm-up batches, still tuning at the warm-up cap" in str(r)


def test_results_that_differ_are_reported(setup):
    params, trees = setup
    r = acrobat.benchmark(q.classify, trees, params, backend="eager", rounds=1,
                          reference=lambda t, p: q.classify(t, p) + 1)
    assert not r.equal
    assert "results DIFFER (Tensor-likes are not close!)" in str(r)


@pytest.mark.parametrize("bad", [q.Node(3), []])
def test_not_a_batch(setup, bad):
    params, _ = setup
    with pytest.raises(acrobat.BatchError, match="benchmark\\(\\) takes a non-empty list of instances"):
        acrobat.benchmark(q.classify, bad, params)


def test_rounds_below_one(setup):
    params, trees = setup
    with pytest.raises(acrobat.BatchError, match="rounds and max_warmup must be at least 1"):
        acrobat.benchmark(q.classify, trees, params, rounds=0)


def test_a_program_method_bound_to_its_module():
    """``benchmark(module.prog, instances)``: the module is the first shared argument, as in ``module.prog.run``."""
    from tests.user_error_progs import Tagger

    t = Tagger()
    r = acrobat.benchmark(t.encode, [[1, 2, 3], [4], [5, 6]], backend="eager", rounds=1)
    assert r.equal and r.instances == 3

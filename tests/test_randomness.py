"""Random operators inside a model: every instance draws its own numbers, on both backends.

What a seed reproduces: ``torch.manual_seed(s)`` before ``run`` makes the
same batch on the same backend give the same numbers again. It does not
reproduce the numbers the instances draw when run one by one in plain
Python (a batched launch draws all rows of a block at once), nor the
other backend's (the compiled backend draws with TorchInductor's generator).
"""

from __future__ import annotations

import pytest
import torch

from tests import rand_progs as rp

BACKENDS = ["eager", "compiled"]
B = 16  # instances per batch; with H = 256 a batch draws 4096 numbers per random op


def run(prog, batch, backend, p=None):
    p = p if p is not None else rp.RandParams()
    if backend == "eager":
        return prog.run(batch, p, backend=backend)
    with torch.inference_mode():  # the compiled backend runs inference only
        return prog.run(batch, p, backend=backend)


# ---------------------------------------------------------------- shapes, per-instance draws


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["dropout_prog", "randn_like_prog", "rand_like_prog", "const_randn_prog",
                                  "shared_dropout_prog", "bernoulli_prog"])
def test_identical_instances_draw_different_numbers(name, backend):
    """Instances with the same input get the shape a plain run gives, but their own random numbers."""
    prog = getattr(rp, name)
    torch.manual_seed(0)
    outs = run(prog, [1] * 4, backend)
    assert [tuple(o.shape) for o in outs] == [(rp.H,)] * 4
    for i in range(4):
        for j in range(i + 1, 4):
            assert not torch.equal(outs[i], outs[j]), (name, i, j)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nn_dropout_module_in_train_mode(backend):
    """``nn.Dropout`` (a module of the params, in train mode) masks per instance; in eval mode it is the identity."""
    p = rp.RandParams()
    outs = run(rp.module_dropout_prog, [1, 1, 1], backend, p)
    assert not torch.equal(outs[0], outs[1])
    assert set(torch.cat(outs).unique().tolist()) <= {0.0, 2.0}
    p.eval()
    outs = run(rp.module_dropout_prog, [1, 1], backend, p)
    assert all(torch.equal(o, torch.ones(rp.H)) for o in outs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_loop_step_draws_new_numbers(backend):
    """A random op in a loop: every step (a DFG node of its own) draws new numbers."""
    torch.manual_seed(0)
    outs = run(rp.noise_walk, [3, 3], backend)
    steps = [outs[0][0], outs[0][1] - outs[0][0], outs[0][2] - outs[0][1], outs[1][0]]
    for i in range(len(steps)):
        for j in range(i + 1, len(steps)):
            assert not torch.allclose(steps[i], steps[j])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampled_index_read_by_host_code(backend):
    """``int(torch.multinomial(...))`` steers host control flow (fibers): instances choose independently."""
    torch.manual_seed(0)
    outs = run(rp.sample_branch, [1] * 64, backend)
    chose_one = [bool(torch.equal(o, torch.ones(rp.H))) for o in outs]
    assert all(c or torch.equal(o, torch.zeros(rp.H)) for c, o in zip(chose_one, outs))
    assert 16 <= sum(chose_one) <= 48  # p = 0.5 each; far outside these bounds with probability < 1e-4


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_statistics(backend):
    """Dropout keeps about 1 - p of the entries, scaled by 1 / (1 - p), and zeroes the rest."""
    torch.manual_seed(1)
    x = torch.stack(run(rp.dropout_prog, [1] * B, backend))
    kept = x != 0
    assert torch.allclose(x[kept], torch.full_like(x[kept], 1 / 0.75))
    assert abs(kept.float().mean().item() - 0.75) < 0.03  # 4096 draws: std 0.007


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_and_uniform_statistics(backend):
    torch.manual_seed(2)
    noise = torch.stack(run(rp.randn_like_prog, [i % 10 for i in range(B)], backend)) - 1  # emb is all ones
    assert abs(noise.mean().item()) < 0.1 and abs(noise.std().item() - 1) < 0.1
    u = torch.stack(run(rp.rand_like_prog, [i % 10 for i in range(B)], backend))
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.05
    b = torch.stack(run(rp.bernoulli_prog, [i % 10 for i in range(B)], backend))
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.05


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["dropout_prog", "randn_like_prog", "noise_walk", "sample_branch"])
def test_seed_reproduces_the_same_batch(name, backend):
    """Same seed, same batch, same backend: the same numbers; another seed: others."""
    prog = getattr(rp, name)
    batch = [1, 2, 3] if name != "sample_branch" else [1] * 16

    def seeded(seed):
        torch.manual_seed(seed)
        outs = run(prog, batch, backend)
        return [torch.stack(o) if isinstance(o, list) else o for o in outs]

    first, again, other = seeded(5), seeded(5), seeded(6)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


# ---------------------------------------------------------------- deterministic paths


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_off_matches_plain_python(backend):
    """``training=False``: no randomness, results equal running each instance alone."""
    p = rp.RandParams()
    batch = [0, 1, 2, 3, 1]
    outs = run(rp.eval_dropout_prog, batch, backend, p)
    with torch.no_grad():
        ref = [rp.eval_dropout_prog(t, p) for t in batch]
    for o, r in zip(outs, ref):
        torch.testing.assert_close(o, r)


def test_dropout_backward_through_the_mask():
    """Eager backend: gradients flow through the kept entries only, scaled by 1 / (1 - p)."""
    p = rp.RandParams()
    outs = rp.dropout_prog.run([1, 1], p)
    sum(o.sum() for o in outs).backward()
    g = p.emb.grad[1]
    kept = torch.stack(outs).ne(0).sum(0).float()  # how many of the two instances kept each entry
    torch.testing.assert_close(g, kept / 0.75)

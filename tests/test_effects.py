"""No silent wrong answers from host effects (issue 10, section 1).

Lists mutated through aliases and callees, concurrent ``run`` calls from
threads, host side effects under fibers (§4.2), in-place updates and the
dtype of per-instance Python numbers: each either matches plain PyTorch
or is rejected at compile time with the source line and a fix.
"""

from __future__ import annotations

import threading

import torch

from acrobat.data.synthetic import synthetic_trees
from acrobat.models import get_model
from tests import effects_progs as ep
from tests.test_tdc import P


def _params() -> P:
    return P(hidden=4, vocab=16)

TOL = {"rtol": 1e-4, "atol": 1e-5}


def test_threads_calling_run_at_once_get_their_own_results(dataset):
    """Two threads run one compiled program at once: every result equals the eager one."""
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), 16, 0)
    instances = spec.instances(dataset.trees)
    batches = [instances[i:i + 8] for i in range(0, 48, 4)]
    with torch.no_grad():
        want = [spec.program.run(b, params) for b in batches]
    errors: list[str] = []

    def worker(offset: int) -> None:
        try:
            with torch.inference_mode():
                for r in range(12):
                    k = (r + offset) % len(batches)
                    got = spec.program.run(batches[k], params, backend="compiled")
                    torch.testing.assert_close(got, want[k], **TOL)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(o,)) for o in (0, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_python_floats_keep_a_float64_model_exact():
    """A per-instance Python float is not rounded to float32 on its way into a float64 model."""
    p = _params().double()
    batch = [(1, 0.1), (2, 1 / 3), (3, 2.0 ** -30 + 1)]
    with torch.no_grad():
        for backend in ("eager", "compiled"):
            got = ep.scaled64.run(batch, p, backend=backend)
            torch.testing.assert_close(got, [ep.scaled64(x, p) for x in batch], rtol=0, atol=1e-15)
            assert all(t.dtype == torch.float64 for t in got)
    q = _params()  # float32: the number is rounded as PyTorch rounds it, and results stay float32
    with torch.no_grad():
        got = ep.scaled64.run(batch, q)
    assert all(t.dtype == torch.float32 for t in got)
    torch.testing.assert_close(got, [ep.scaled64(x, q) for x in batch], rtol=0, atol=0)

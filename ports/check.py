"""Check and time the public models ported to acrobat (ports/README.md).

For each port: its ``model.py`` as ported (the author's code plus acrobat decorators) and the same file with
the decorator lines taken out (the original, as its author runs it) build the same seeded model; the batched
``program.run`` on both backends must equal the original's per-instance calls (``assert_close``, in float64,
where reordered float32 sums cannot hide a wrong answer, and in float32 with the error printed), then both are
timed at the batch size given, and the run's report says what ran in the dynamic tier and why; last, the weights'
gradients through the batched run must equal the original's.

    python -m ports.check [NAME ...] [--batch 64] [--rounds 3] [--sst] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import types
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

import acrobat

HERE = Path(__file__).resolve().parent
PORTS = {
    "treelstm": "sim",
    "rntn": "rntn",
    "nmt_attention": "translate",
    "dmn": "answer",
}
"""Each port's folder name and the name of its per-instance entry in ``model.py``."""

DECORATORS = ("@acrobat.function", "@acrobat.program")


def load(name: str, original: bool = False) -> types.ModuleType:
    """The port's model module; with ``original``, its source run without the acrobat decorator lines."""
    if not original:
        return importlib.import_module(f"ports.{name}.model")
    path = HERE / name / "model.py"
    source = "".join(line for line in path.read_text().splitlines(keepends=True) if line.strip() not in DECORATORS)
    module = types.ModuleType(f"ports.{name}.original")
    module.__file__, module.__package__ = str(path), f"ports.{name}"
    exec(compile(source, f"{path} (without acrobat's decorators)", "exec"), module.__dict__)
    return module


def setup(name: str, module: types.ModuleType, n: int, seed: int, sst: bool = False) -> tuple[list[Any], tuple]:
    """(instances, shared arguments) of port ``name`` built with ``module``'s classes."""
    data = importlib.import_module(f"ports.{name}.data")
    return data.setup(module, n, seed, **({"sst": sst} if sst else {}))


def ported_and_original(name: str, n: int, seed: int, sst: bool) -> tuple[Any, Callable[..., Any], list[Any], tuple,
                                                                         tuple]:
    """(the port's program, the original's entry, ``n`` instances, the program's shared arguments, the original's
    shared arguments: the same weights, built by each module's own classes)."""
    ported, original = load(name), load(name, original=True)
    instances, shared = setup(name, ported, n, seed, sst)
    _, plain_shared = setup(name, original, n, seed, sst)
    return getattr(ported, PORTS[name]), getattr(original, PORTS[name]), instances, shared, plain_shared


def in_float64(shared: tuple) -> tuple:
    """``shared`` with every ``nn.Module`` copied to float64."""
    return tuple(copy.deepcopy(p).double() if isinstance(p, torch.nn.Module) else p for p in shared)


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Run the block with ``dtype`` as torch's default floating-point type (the ported code makes its own
    float tensors, ``torch.zeros(...)``, so casting a built model would not be enough)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def check_exact(name: str, n: int, seed: int, backend: str, sst: bool = False) -> tuple[acrobat.RunStats, float]:
    """Run port ``name`` batched (``n`` instances) on ``backend`` and assert it equals the original's per-instance
    calls: in float64 to 1e-9, and in float32 to the float32 error of the original itself against float64 (its
    own rounding, which chaotic recursions such as the RNTN's amplify) times 4, at least 1e-5. Returns the
    float32 run's stats and its greatest error."""
    entry, reference, instances, shared, plain_shared = ported_and_original(name, n, seed, sst)
    with default_dtype(torch.float64), torch.no_grad():
        want64 = [reference(x, *in_float64(plain_shared)) for x in instances]
        got64 = entry.run(instances, *in_float64(shared), backend=backend)
    torch.testing.assert_close(got64, want64, rtol=1e-9, atol=1e-9)
    stats = acrobat.RunStats()
    with torch.no_grad():
        want = [reference(x, *plain_shared) for x in instances]
        got = entry.run(instances, *shared, backend=backend, stats=stats)
    own = max_error(want, want64)
    err = max_error(got, want)
    torch.testing.assert_close(got, want, rtol=0, atol=max(4 * own, 1e-5))
    return stats, err


def check_gradients(name: str, n: int, seed: int) -> int:
    """Assert that the weights' gradients of a loss over port ``name``'s batched run (``n`` instances, float64,
    the backend autograd picks) equal those through the original's per-instance calls, to 1e-9; returns how many
    weights got a gradient."""
    entry, reference, instances, shared, plain_shared = ported_and_original(name, n, seed, False)
    shared, plain_shared = in_float64(shared), in_float64(plain_shared)
    with default_dtype(torch.float64):
        square_sum(entry.run(instances, *shared)).backward()
        square_sum([reference(x, *plain_shared) for x in instances]).backward()
    got, want = gradients(shared), gradients(plain_shared)
    assert got.keys() == want.keys(), f"{name}: gradients of {sorted(got.keys() ^ want.keys())} on one side only"
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    return len(want)


def square_sum(outs: Any) -> torch.Tensor:
    """The sum of squares of every floating-point tensor in ``outs`` (a loss)."""
    return sum(t.square().sum() for t in torch.utils._pytree.tree_leaves(outs)
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def gradients(shared: tuple) -> dict[str, torch.Tensor]:
    """The gradients held by the parameters of the modules in ``shared``, by module position and name."""
    return {f"{k}.{n}": q.grad for k, p in enumerate(shared) if isinstance(p, torch.nn.Module)
            for n, q in p.named_parameters() if q.grad is not None}


def max_error(got: Any, want: Any) -> float:
    """The greatest absolute difference between the floating-point tensors of two results of the same structure."""
    pairs = zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want))
    return max((float((g.double() - w.double()).abs().max()) for g, w in pairs
                if isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel()), default=0.0)


def time_port(name: str, n: int, seed: int, backend: str, rounds: int, sst: bool) -> acrobat.BenchmarkResult:
    """``acrobat.benchmark`` of the port's program on ``n`` instances against the original's per-instance loop (its
    own check of the results is loose, 1e-3: ``check_exact`` is the exactness check)."""
    entry, reference, instances, shared, plain_shared = ported_and_original(name, n, seed, sst)
    return acrobat.benchmark(entry, instances, *shared, backend=backend, rounds=rounds,
                             max_warmup=5, reference=lambda x, *_: reference(x, *plain_shared), atol=1e-3)


def main(argv: list[str] | None = None) -> None:
    """Check, time and explain the ports named (all by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(PORTS), help=f"ports to run (default: {', '.join(PORTS)})")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sst", action="store_true", help="SST trees for the tree models, where found")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a loaded machine, more threads than free cores make "
                             "small operators, and so the per-instance loop, many times slower)")
    args = parser.parse_args(argv)
    if set(args.names) - set(PORTS):
        parser.error(f"no port named {', '.join(sorted(set(args.names) - set(PORTS)))}")
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", FutureWarning)  # the original code's deprecated nn.init.xavier_uniform
    for name in args.names:
        ported = load(name)
        instances, shared = setup(name, ported, args.batch, 0, args.sst)
        print(f"== {name}\n{getattr(ported, PORTS[name]).explain(*shared, instances=instances)}")
        for backend in ("eager", "compiled"):
            stats, err = check_exact(name, args.batch, 0, backend, args.sst)
            print(f"{backend}: equal to the original (float64 to 1e-9; float32 greatest error {err:.2g})\n  "
                  + stats.summary().replace("\n", "\n  "))
            print(f"  {time_port(name, args.batch, 0, backend, args.rounds, args.sst)}")
        print(f"gradients of {check_gradients(name, 8, 0)} weights equal the original's (8 instances, float64)")


if __name__ == "__main__":
    main()

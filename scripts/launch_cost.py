"""Per-call cost of a compiled block's kernel by how it is called (issue 11: kernel calls without Python wrappers).

For a tiny block (``tanh(x @ W + b)``, x ``(B, 32)``, B = 8 and 64) and for
the blocks of real models (their traced graphs and the arguments of one of
their launches), prints the median µs of one call of

- ``compile``: the callable ``torch._inductor.compile`` returns (Inductor's
  Python wrapper inside AOTAutograd's runtime wrappers; acrobat's path
  before issue 11);
- ``python``: Inductor's generated Python ``call``, called directly (acrobat's
  default now, ``$ACROBAT_KERNEL_WRAPPER=python``);
- ``cpp``: the same graph compiled with ``cpp_wrapper`` (``call`` is one
  pybind entry into C++), called directly (``$ACROBAT_KERNEL_WRAPPER=cpp``);
- ``cpp-compile``: the ``cpp_wrapper`` build through ``torch._inductor.compile``'s callable;
- ``aoti``: AOTInductor (``aoti_compile_and_package`` of the exported graph,
  dynamic batch dimension), called through its runner's ``run`` (and
  ``aoti-module``: the packaged module's ``__call__``);
- ``eager``: the floor, for the tiny block only: the same arithmetic as
  two eager ops writing into the output (``addmm(out=)``, ``tanh_``).

Timings are medians over interleaved rounds at one thread (what acrobat's
thread policy picks for tiny launches on this machine). Then, per model,
whole acrobat runs with every block's kernel called through ``compile``
and through ``python`` by turns: µs per launch (gather + kernel, acrobat's
bookkeeping included) and ms per batch.

    PYTHONPATH=. ACROBAT_CACHE_DIR=/tmp/lc python scripts/launch_cost.py [--models treelstm birnn] [--no-aoti]

Compiles land in ``$ACROBAT_CACHE_DIR/inductor`` (AOTInductor packages in a temporary folder).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any, Callable

import torch


def median_us(fns: dict[str, Callable[[], Any]], rounds: int = 15, calls: int = 200) -> dict[str, float]:
    """Median over ``rounds`` interleaved rounds of each function's mean µs per call over ``calls`` calls."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        f()
    for _ in range(rounds):
        for k, f in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times[k].append((time.perf_counter() - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def boxed(fn: Callable, args: list) -> Callable[[], Any]:
    return lambda: fn(list(args))


def variants(graph: Any, args: list, aoti: bool) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Each way of calling ``graph``'s kernel on ``args`` (its leaves), and why any is missing."""
    from acrobat.runtime.compiled import COMPILE_LOCK, compile_graph

    fns: dict[str, Callable[[], Any]] = {}
    failed: dict[str, str] = {}
    with COMPILE_LOCK, torch.no_grad():
        for wrapper in ("python", "cpp"):
            fn, _, _ = compile_graph(graph, wrapper)
            fns[wrapper] = boxed(fn, args)
            with torch._inductor.config.patch(size_asserts=False, cpp_wrapper=wrapper == "cpp"):
                wrapped = torch._inductor.compile(graph.gm, graph.example_inputs)
            fns["compile" if wrapper == "python" else "cpp-compile"] = (lambda w: lambda: w(*args))(wrapped)
    if aoti:
        try:
            fns.update(aoti_calls(graph, args))
        except Exception as e:  # noqa: BLE001 (a measurement: report and go on)
            failed["aoti"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    return fns, failed


def aoti_calls(graph: Any, args: list) -> dict[str, Callable[[], Any]]:
    """AOTInductor: the graph exported with its batch dimension dynamic (storages' rows too), compiled and loaded."""
    from torch.export import Dim, export

    batch = Dim("batch", min=2)
    fake = graph.example_inputs
    # dim 0 of batched inputs shares one symbol (named "batch" by acrobat's tracer), storages have their own
    dyn = []
    for i, x in enumerate(fake):
        if isinstance(x, torch.Tensor) and x.dim() and isinstance(x.shape[0], torch.SymInt):
            dyn.append({0: batch if str(x.shape[0]) == str(_batch_symbol(fake)) else Dim(f"rows{i}", min=2)})
        else:
            dyn.append(None)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gm = graph.gm

        def forward(self, *xs: Any) -> Any:
            return self.gm(*xs)

    with torch.no_grad():
        ep = export(Block(), tuple(args), dynamic_shapes=(tuple(dyn),), strict=False)
        path = tempfile.mkdtemp(prefix="acrobat-aoti-") + "/block.pt2"
        pkg = torch._inductor.aoti_compile_and_package(ep, package_path=path)
    model = torch._inductor.aoti_load_package(pkg)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    runner = model.loader
    return {"aoti": lambda: runner.run(tensors), "aoti-module": lambda: model(*args)}


def _batch_symbol(fake: list) -> Any:
    """The symbol of dim 0 of the batched inputs: the one most inputs share."""
    syms = [str(x.shape[0]) for x in fake if isinstance(x, torch.Tensor) and x.dim() and isinstance(x.shape[0], torch.SymInt)]
    return max(set(syms), key=syms.count)


def tiny_block(aoti: bool) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from acrobat.codegen.kernels import BATCH_MARK, _retrace_symbolic, _symbolize_batch
    from acrobat.runtime.plan import KernelGraph, RowSpec

    def kernel(x: torch.Tensor, out: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple:
        out.copy_(torch.tanh(x @ w + b))
        return ()

    w, b = torch.randn(32, 32), torch.randn(32)
    with FakeTensorMode():
        marks = [torch.empty(BATCH_MARK, 32), torch.empty(BATCH_MARK, 32)]
        gm = make_fx(kernel)(*marks, torch.empty(32, 32), torch.empty(32))
    _symbolize_batch(gm, 0)
    gm, example = _retrace_symbolic(gm, marks, [w, b])
    graph = KernelGraph(gm, [RowSpec((32,), torch.float32)], [], [None], example)
    for n in (8, 64):
        x, out = torch.randn(n, 32), torch.empty(n, 32)
        args = [x, out, w, b]
        fns, failed = variants(graph, args, aoti)
        want = torch.tanh(x @ w + b)
        for k, f in fns.items():
            out.zero_()
            f()
            if not torch.allclose(out, want, atol=1e-5):
                failed[k] = "wrong output"
        fns["eager"] = lambda: (torch.addmm(b, x, w, out=out), out.tanh_())
        show(f"tiny tanh(x@W+b) B={n}", median_us(fns), failed)


def show(label: str, us: dict[str, float], failed: dict[str, str]) -> None:
    cells = "  ".join(f"{k} {v:6.2f}" for k, v in us.items())
    print(f"{label:<44} µs/call: {cells}", flush=True)
    for k, why in failed.items():
        print(f"{'':<44} {k}: {why}", flush=True)


def model_blocks(name: str, batch_size: int, hidden: int, aoti: bool) -> None:
    """Per block of ``name``: the kernel calls on one recorded launch; then whole runs, ``compile`` vs ``python``."""
    import acrobat.runtime.compiled as compiled
    from acrobat.data import load_dataset
    from acrobat.models import get_model
    from acrobat.runtime.stats import RunStats

    graphs: dict[int, Any] = {}  # id of the variant's fn -> its traced graph
    real_compile = compiled.compile_graph

    def record_compile(graph: Any, wrapper: str) -> tuple[Callable, list[str], Any]:
        fn, code, guard = real_compile(graph, wrapper)
        graphs[id(fn)] = graph
        return fn, code, guard

    compiled.compile_graph = record_compile  # type: ignore[assignment]
    try:
        spec = get_model(name)
        ds = load_dataset(limit=batch_size)
        params = spec.make_params(len(ds.vocab), hidden, 0)
        batch = spec.instances(ds.trees)[:batch_size]
        be = spec.program.backend("compiled")[0]
        with torch.no_grad():
            for _ in range(16):  # compiles, gather probes, thread probes
                spec.program.run(batch, params, backend="compiled")
    finally:
        compiled.compile_graph = real_compile

    # one launch's arguments per variant in use
    recorded: dict[int, list] = {}
    kernels = [(k, v) for k in be.kernels for v in k.variants.values() if v.launches and id(v.fn) in graphs]
    for k, v in kernels:
        def recorder(args: list, v: Any = v, fn: Callable = v.fn) -> Any:
            if id(v) not in recorded and len(args) and args[0].shape[0] >= 2:
                recorded[id(v)] = list(args)
            return fn(args)
        v.fn = recorder
    with torch.no_grad():
        spec.program.run(batch, params, backend="compiled")
    originals = {}
    for k, v in kernels:
        v.fn = v.fn.__defaults__[1]  # type: ignore[union-attr]
        originals[id(v)] = v.fn
    wrapped_calls = {}
    with torch.no_grad():
        for k, v in kernels:
            if id(v) not in recorded:
                continue
            graph = graphs[id(v.fn)]
            args = recorded[id(v)]
            fns, failed = variants(graph, args, aoti)
            leaves = sum(isinstance(a, torch.Tensor) for a in args)
            show(f"{name} {k.block.name} ({leaves} tensors)", median_us(fns, rounds=9, calls=100), failed)
            with compiled.COMPILE_LOCK, torch._inductor.config.patch(size_asserts=False):
                w = torch._inductor.compile(graph.gm, graph.example_inputs)
            wrapped_calls[id(v)] = (lambda w: lambda leaves: w(*leaves))(w)

    # whole runs: every kernel through torch._inductor.compile's callable vs Inductor's call, by turns
    per: dict[str, list[tuple[float, float]]] = {"compile": [], "python": []}
    with torch.no_grad():
        for _ in range(9):
            for mode in per:
                for k, v in kernels:
                    v.fn = wrapped_calls.get(id(v), originals[id(v)]) if mode == "compile" else originals[id(v)]
                st = RunStats()
                spec.program.run(batch, params, backend="compiled", stats=st)
                per[mode].append(((st.kernel_ms + st.gather_ms) * 1e3 / st.kernel_launches, st.run_ms))
    for k, v in kernels:
        v.fn = originals[id(v)]
    cells = " | ".join(f"{m}: {statistics.median(u for u, _ in r):6.1f} µs/launch (gather+kernel), "
                       f"{statistics.median(b for _, b in r):6.2f} ms/batch" for m, r in per.items())
    print(f"{name} batch {batch_size} whole runs  {cells}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=["treelstm", "birnn"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--no-aoti", action="store_true", help="skip AOTInductor (slow to compile)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread", flush=True)
    tiny_block(not a.no_aoti)
    for m in a.models:
        model_blocks(m, a.batch_size, a.hidden, not a.no_aoti)


if __name__ == "__main__":
    main()

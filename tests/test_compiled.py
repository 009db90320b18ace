"""The compiled backend (TorchInductor kernels, arena memory, gather fusion) equals eager and the reference.

Compiles cost seconds each, so this module uses a few models and small
hidden sizes; kernels are cached on disk (``ACROBAT_CACHE_DIR``), so a
second run of the suite compiles nothing.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acrobat as ab
from acrobat.cli import main
from acrobat.data.synthetic import synthetic_trees
from acrobat.errors import AcrobatError
from acrobat.models import get_model
from acrobat.runtime.backend import AUTO_ENV, get_backend
from acrobat.runtime.compiled import WRAPPER_ENV, WRAPPERS, kernel_listing
from tests.test_examples import _TinyExample

TOL = {"rtol": 1e-4, "atol": 1e-5}
HIDDEN = 32
COMPILED = ["compiled", "compiled-explicit", "compiled-fused"]
MODELS = ["treelstm", "birnn", "stackrnn"]  # trees, sequences, tensor-dependent control flow (fibers)


def _run(name: str, batch: list, params, backend: str, stats: ab.RunStats | None = None) -> list:
    with torch.inference_mode():
        return get_model(name).program.run(batch, params, backend=backend, stats=stats)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("backend", COMPILED)
def test_compiled_equals_eager_and_reference(dataset, name, backend):
    spec = get_model(name)
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    for batch in (instances[:16], instances[16:21], instances[21:22], instances[:16]):  # sizes 16, 5, 1, 16 again
        out = _run(name, batch, params, backend)
        torch.testing.assert_close(out, _run(name, batch, params, "eager"), **TOL)
        with torch.no_grad():
            torch.testing.assert_close(out, [spec.reference(x, params) for x in batch], **TOL)


def test_one_kernel_serves_every_batch_size(dataset):
    """After the first batch, new batch sizes (1 included: padded to 2) compile nothing (symbolic batch size)."""
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    _run("treelstm", instances[:16], params, "compiled-fused")
    later = ab.RunStats()
    for size in (3, 1, 7, 12, 30, 2):
        _run("treelstm", instances[:size], params, "compiled-fused", later)
    assert later.compiles == 0 and later.compile_ms == 0.0
    assert later.kernel_launches > 0


def test_arena_does_not_grow_across_batches(dataset):
    """Arena memory is reused: once every batch has run, running them all again allocates nothing.

    The first pass may grow the arena (a later batch can need more rows of
    some shape than the first), whatever the data; the second cannot.
    """
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    windows = [instances[s:s + 32] for s in ((7 * i) % 32 for i in range(32))]
    for batch in windows:
        _run("treelstm", batch, params, "compiled")
    arena = spec.program.backend("compiled")[0].arena
    growths, nbytes = arena.growths, arena.nbytes
    for _ in range(3):
        for batch in windows:
            _run("treelstm", batch, params, "compiled")
    assert (arena.growths, arena.nbytes) == (growths, nbytes)


def test_results_outlive_the_next_run(dataset):
    """Results are copied out of the arena: the next batch must not overwrite them."""
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    first = _run("treelstm", instances[:8], params, "compiled")
    kept = [tuple(t.clone() for t in r) for r in first]
    _run("treelstm", instances[8:16], params, "compiled")
    torch.testing.assert_close(first, kept, rtol=0, atol=0)


def test_auto_gather_reports_its_choice(dataset, tmp_path, monkeypatch):
    """Probing, then the choices per launch size class (a fresh cache folder: nothing remembered)."""
    monkeypatch.setenv("ACROBAT_CACHE_DIR", str(tmp_path))
    spec = get_model("treelstm")
    spec.program.reset_backends()
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    _run("treelstm", instances[:32], params, "compiled")
    be = spec.program.backend("compiled")[0]
    assert not be.tuned() and "still probing" in be.report()
    for _ in range(60):
        _run("treelstm", instances[:32], params, "compiled")
        if be.tuned():
            break
    report = be.report()
    assert "profiled: explicit" in report and "arena:" in report and "tuned: nothing is probing" in report
    spec.program.reset_backends()


def test_kernel_listing_shows_fused_kernels(dataset):
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    _run("treelstm", spec.instances(dataset.trees)[:16], params, "compiled-fused")
    listing = kernel_listing(spec.program.backend("compiled-fused")[0])  # type: ignore[arg-type]
    assert "fused gather" in listing
    assert "generated kernel(s): cpp_fused" in listing  # pointwise ops and gathers fused into generated loops
    assert "library calls: mm" in listing or "library calls: addmm" in listing


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 12))
def test_compiled_on_random_trees(seed, n):
    trees = synthetic_trees(n, vocab_size=50, seed=seed)
    spec = get_model("treelstm")
    params = spec.make_params(50, HIDDEN, 1)
    out = _run("treelstm", spec.instances(trees), params, "compiled")
    with torch.no_grad():
        torch.testing.assert_close(out, [spec.reference(t, params) for t in trees], **TOL)


def test_compiled_with_a_forced_gather_refuses_autograd(dataset):
    """The arena kernels run inference only; ``compiled`` itself trains on ``compiled-train`` (test_training)."""
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    with pytest.raises(AcrobatError, match="inference only"):
        spec.program.run(spec.instances(dataset.trees)[:4], params, backend="compiled-explicit")


def test_unknown_backend_and_gather_mode():
    with pytest.raises(ValueError, match="available: eager, compiled"):
        get_backend("tvm")
    from acrobat.runtime.compiled import CompiledBackend

    with pytest.raises(ValueError, match="unknown gather mode"):
        CompiledBackend("sideways")


def test_cli_profile_and_show_kernels(capsys):
    assert main(["profile", "treelstm", "--batch-size", "8", "--num-batches", "2", "--warmup", "1",
                 "--threads", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("DFG construction", "scheduling", "gathers + memory copies", "kernel time", "kernel launches",
                "runtime overhead"):
        assert row in out
    assert "eager" in out and "compiled" in out
    assert main(["show", "birnn", "--kernels", "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "# block" in out and "def call(" in out


def test_cli_cuda_without_gpu_is_a_clear_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["run", "treelstm", "--device", "cuda", "--num-batches", "1"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_new_weight_shapes_get_their_own_kernels(dataset):
    """Kernels are keyed by the shared arguments' shapes: other weights never reuse a stale kernel."""
    spec = get_model("treelstm")
    batch = spec.instances(dataset.trees)[:6]
    for hidden in (HIDDEN, 24, HIDDEN):
        params = spec.make_params(len(dataset.vocab), hidden, 0)
        out = _run("treelstm", batch, params, "compiled")
        with torch.no_grad():
            torch.testing.assert_close(out, [spec.reference(x, params) for x in batch], **TOL)


def test_strided_weights_get_their_own_kernels(dataset):
    """The same weights as a transposed view: another kernel, the same results (no stale stride assumptions)."""
    spec = get_model("birnn")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    batch = spec.instances(dataset.trees)[:5]
    expected = _run("birnn", batch, params, "compiled")
    column_major = params.fwd.U.detach().t().contiguous().t()  # same values, other strides
    assert column_major.stride() != params.fwd.U.stride()
    params.fwd.U = torch.nn.Parameter(column_major, requires_grad=False)
    torch.testing.assert_close(_run("birnn", batch, params, "compiled"), expected, **TOL)


def test_auto_backend_eager_under_grad_compiled_otherwise(dataset, monkeypatch, capsys):
    """backend="auto" (run's default): eager-accum (the traced eager path) while autograd records, compiled kernels otherwise."""
    monkeypatch.delenv(AUTO_ENV, raising=False)  # the suite's conftest makes auto eager
    spec = get_model("treelstm")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    batch = spec.instances(dataset.trees)[:6]
    grad = ab.RunStats()
    out = spec.program.run(batch, params, stats=grad)  # grad mode on, parameters require grad
    assert grad.backend == "eager-accum"
    sum(o[0].sum() for o in out).backward()  # autograd works through the batched run
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params.parameters())
    eager = [tuple(x.detach() for x in o) for o in out]
    for ctx in (torch.no_grad, torch.inference_mode):
        st = ab.RunStats()
        with ctx():
            got = spec.program.run(batch, params, stats=st)
        assert st.backend == "compiled"
        torch.testing.assert_close(got, eager, **TOL)
    frozen = spec.make_params(len(dataset.vocab), HIDDEN, 0).requires_grad_(False)
    st = ab.RunStats()
    torch.testing.assert_close(spec.program.run(batch, frozen, stats=st), eager, **TOL)  # grad mode on, nothing to record
    assert st.backend == "compiled" and "compiled backend" in st.report()


def test_first_compiled_run_says_it_compiles(dataset, capsys):
    spec = get_model("birnn")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    spec.program.reset_backends()  # a fresh compiled backend, as in a new process
    batch = spec.instances(dataset.trees)[:3]
    with torch.inference_mode():
        spec.program.run(batch, params, backend="compiled")
        first = capsys.readouterr().err
        spec.program.run(batch, params, backend="compiled")
    assert "birnn: 5 static block(s) to compile with TorchInductor or load from its cache" in first
    assert re.search(r"birnn: \d+ kernel\(s\) (loaded from the cache|compiled)( and \d+ kernel\(s\) compiled)? in "
                     r"[\d.]+ s", first)  # how many were compiled, how many loaded, in how long
    assert "first run only" not in first  # every new process compiles or loads its kernels
    assert "static block(s) to compile" not in capsys.readouterr().err  # once per backend


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_kernels_called_through_inductors_own_call(dataset, monkeypatch, wrapper):
    """Every kernel is Inductor's generated ``call`` (Python or C++ wrapper), not wrapped in AOTAutograd's
    runtime wrappers, and still stores its outputs into the arena rows: results equal eager."""
    monkeypatch.setenv(WRAPPER_ENV, wrapper)
    spec = get_model("birnn")
    params = spec.make_params(len(dataset.vocab), HIDDEN, 0)
    instances = spec.instances(dataset.trees)
    spec.program.reset_backends()  # a fresh compiled backend, made with this wrapper
    try:
        for batch in (instances[:9], instances[9:10], instances[:9]):
            torch.testing.assert_close(_run("birnn", batch, params, "compiled"), _run("birnn", batch, params, "eager"),
                                       **TOL)
        be = spec.program.backend("compiled")[0]
        assert be.wrapper == wrapper
        fns = [v.fn for k in be.kernels for v in k.variants.values()]
        assert fns and not [f for f in fns if "_direct_call" in f.__qualname__]
    finally:
        spec.program.reset_backends()


def test_unknown_kernel_wrapper_is_rejected(monkeypatch):
    monkeypatch.setenv(WRAPPER_ENV, "aoti")
    with pytest.raises(AcrobatError, match=WRAPPER_ENV):
        get_backend("compiled")


@ab.program
def _uncompilable(tokens, p):
    return torch.sigmoid(p.emb[tokens[-1]] @ p.W + p.h0)


def test_a_block_inductor_cannot_compile_runs_eagerly_and_says_so(monkeypatch, tmp_path):
    """A kernel compiler failure is the compiler's limit: the block runs eagerly, the report names it; the
    failure is kept in the cache folder, so a later process (here a fresh program) does not compile it again."""
    import acrobat.runtime.compiled as compiled

    calls = []

    def refuse(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no lowering for this operator")

    monkeypatch.setenv("ACROBAT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "compile_graph", refuse)
    p = _TinyExample.make_params(0)
    batch = [[1, 2, 3], [4], [0, 2]]
    for prog in (_uncompilable, ab.program(_uncompilable.fn)):
        with torch.inference_mode():
            got = prog.run(batch, p, backend="compiled")
            torch.testing.assert_close(got, [prog(x, p) for x in batch], **TOL)
        assert "eager, not compiled (RuntimeError: " in prog.backend("compiled")[0].report()
        assert "no lowering for this operator" in prog.backend("compiled")[0].report()
    assert len(calls) == 1  # the second program's compile was not tried
    assert list((tmp_path / "inductor" / "acrobat-facts").glob("*.json"))


@ab.function
def _squash(h):
    return torch.tanh(h * 2.0 + 0.5)


@ab.program
def _two_widths(tokens, p):
    """One block (``_squash``) on values of two widths, launch after launch: two layouts of one kernel."""
    h = p.h0
    outs = []
    for tok in tokens:
        h = _squash(h @ p.U + p.emb[tok])  # (4,)
        outs.append(_squash(h @ p.V))  # (3,)
    return outs


@pytest.mark.parametrize("backend", COMPILED)
def test_a_block_whose_argument_specs_change_from_launch_to_launch(backend):
    """A launch tries its block's last layout first (``CompiledKernel._locate``); values of another spec
    (another pool) make it look the layout up again, and every batch size (1: padded) reads its own rows."""
    from tests.progs import Small

    p = Small().requires_grad_(False)
    instances = [[(3 * i + j) % 10 for j in range(1 + i % 4)] for i in range(9)]
    for batch in (instances, instances[2:3], instances[:5], instances):
        with torch.inference_mode():
            got = _two_widths.run(batch, p, backend=backend)
        torch.testing.assert_close(got, [_two_widths(x, p) for x in batch], **TOL)
    kernel = next(k for k in _two_widths.backend(backend)[0].kernels if k.block.name.startswith("_squash"))
    assert len(kernel._layouts) == 2


def test_index_buffer_hands_out_views_of_one_buffer_per_batch_size():
    """Per batch size, the arrays the arena rows are written into share memory with the index vectors; a
    one-row launch's rows are padded to two; a larger size moves every size to a new, larger buffer."""
    from acrobat.runtime.gather import IndexBuffer

    buf = IndexBuffer(2)
    three = buf.get(3)
    assert buf.get(3) is three and three.located is three.padded
    three.located[...] = [[1, 2, 3], [4, 5, 6]]
    assert [v.tolist() for v in three.vectors] == [[1, 2, 3], [4, 5, 6]]
    one = buf.get(1)
    assert one.located.shape == (2, 1) and one.padded.shape == (2, 2) and one.located is not one.padded
    one.located[...] = [[7], [8]]
    np.copyto(one.padded, one.located)  # what a launch of one row does (CompiledKernel._arguments)
    assert [v.tolist() for v in one.vectors] == [[7, 7], [8, 8]]
    big = buf.get(100)
    assert big.matrix.shape == (2, 100) and buf.get(3) is not three  # the old views were dropped
    buf.MAX_SIZES = 4
    for n in range(2, 40):
        buf.get(n)
    assert len(buf.sizes) <= 4 and buf.buffer.numel() == 200  # sizes past the bound: views dropped, buffer kept

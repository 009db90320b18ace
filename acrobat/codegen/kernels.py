"""Batched kernel generation: one static block's batched computation as an aten graph (§5, App. C).

acrobat's part of kernel generation is to hand the tensor compiler the
right batched computation; generating the fused loops is the compiler's
job (TorchInductor, see ``acrobat.runtime.compiled``). For a block this
module builds a ``torch.fx`` graph of aten operators that

- takes the arena storages its fused gathers read, ``(N, ...)`` each, one
  per row spec (shape and dtype of a row);
- takes the batched arguments either as ``(B, ...)`` tensors (explicit
  gather) or as ``(B,)`` int64 indices into a storage, read in place by
  the kernel (fused gather, §5.2);
- takes per block output the ``(B, ...)`` arena rows to write it to (a
  view of a storage) and stores it there (``copy_``, which Inductor fuses
  into the loop that computes it): no copy after the kernel;
- takes shared arguments unbatched, once per launch (parameter reuse, §5.1).

The output views alias the storages read, but the compiler is told
nothing of it: it is sound because a launch writes only rows allocated
for it, which no input of the launch can reach (inputs were computed by
earlier launches), so reads and writes touch disjoint memory.

The graph is traced once through ``torch.func.vmap`` with fake tensors at a
marker batch size; every size that is a multiple of the marker is then
replaced by the symbolic batch size (vmap's batching rules bake concrete
sizes into ``view``/``expand`` arguments, which ``make_fx``'s symbolic mode
keeps), and the result is traced again with symbolic fake inputs: dim 0 of
every batched input (batch size, arena rows) is a symbol, every other size
is static. The compiled kernel then serves every batch size >= 2 without
recompiling or guards (the runtime pads batch size 1 to 2).
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.func import vmap
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

from acrobat.analysis.fusion import unfused
from acrobat.runtime.plan import BlockCode, KernelGraph, RowSpec, flatten_forms, unflatten_forms

# Marker sizes for tracing: primes no model dimension is a multiple of.
BATCH_MARK = 7919
ROWS_MARK = 7907
HINT_BATCH, HINT_ROWS = 64, 4096  # typical sizes the compiler may tune for (any size works)


def trace_block(block: BlockCode, in_rows: Sequence[RowSpec], shared: Sequence[Any],
                fused: bool, device: torch.device, hints: Sequence[int] | None = None,
                store: bool = True) -> KernelGraph:
    """Trace ``block``'s batched form for arguments with per-instance specs ``in_rows`` (§5, App. C).

    The kernel JIT that ``acrobat.program`` hands to compiling backends (an
    ``acrobat.runtime.plan.Tracer``), so that the runtime imports no code generator.

    ``shared`` are the block's shared arguments; the kernel takes them
    flattened by ``flatten_forms`` (a module's parameters one by one).
    ``fused`` selects the fused-gather signature (§5.2); ``device`` is where
    the kernel will run. ``hints``: per kernel input before the shared ones
    (storages, batched inputs, outputs) the size of its dim 0 the compiler
    is told to expect (default: ``HINT_BATCH`` rows a batch, ``HINT_ROWS`` a
    storage); where the compiler specializes a size (a grouped convolution's
    ``groups``), the kernel holds for the hinted sizes only (see
    ``acrobat.runtime.compiled.SizeGuard``).

    Raises:
        Exception: whatever ``vmap`` or the operators raise on these shapes
            (the runtime reports it with the block's source line).

    ``store=False`` (with ``fused=False``): the graph returns the outputs, ``gm(*inputs, *shared) ->
    tuple of (B, ...)``, for autograd to record through when it runs eagerly (the ``eager-accum``
    backend's traced launches): traced with shared stand-ins that require grad where the real ones do
    (a lookup's sparse gradient and ``fused_matmul`` depend on it), and horizontally fused matmuls
    computed weight by weight (``acrobat.analysis.fusion.unfused``: ``FusedMatmul``'s backward cannot be
    traced into an aten graph).
    """
    if not store:
        assert not fused, "a graph that returns its outputs reads its inputs explicitly"
    roles = block.batched_roles
    dims = (0,) * len(roles) + (None,) * len(shared)
    structured = vmap(block.fn, in_dims=dims, randomness="different")
    flat_shared, specs = flatten_forms(shared)  # module forms as their tensors: kernel inputs (§5.1)

    def batched(*args: Any) -> Any:
        n = len(args) - len(flat_shared)
        return structured(*args[:n], *unflatten_forms(args[n:], specs))

    mode = FakeTensorMode()
    with mode:
        shared = _stand_ins(flat_shared, grads=not store)
        plain = [torch.empty((BATCH_MARK, *r.shape), dtype=r.dtype, device=device) for r in in_rows]
        with contextlib.nullcontext() if store else unfused():
            out_rows = [RowSpec.of(o) for o in batched(*plain, *shared)]
    if not store:
        def returning(*args: Any) -> tuple:
            with unfused():
                return tuple(batched(*args))

        with mode:
            gm = make_fx(returning)(*plain, *shared)
        _symbolize_batch(gm, batch_input=0)
        gm, example_inputs = _retrace_symbolic(gm, plain, shared, hints)
        return KernelGraph(gm, out_rows, [], [None] * len(plain), example_inputs)
    fused_in = [fused and role == "tensor" for role in roles]
    storage_rows = list(dict.fromkeys(r for r, f in zip(in_rows, fused_in) if f))
    in_slots = [storage_rows.index(r) if f else None for r, f in zip(in_rows, fused_in)]
    with mode:
        inputs = [torch.empty((ROWS_MARK, *r.shape), dtype=r.dtype, device=device) for r in storage_rows]
        inputs += [torch.empty((BATCH_MARK,), dtype=torch.int64, device=device) if f else x
                   for x, f in zip(plain, fused_in)]
        inputs += [torch.empty((BATCH_MARK, *r.shape), dtype=r.dtype, device=device) for r in out_rows]
    m, n_in, n_out = len(storage_rows), len(storage_rows) + len(roles), len(out_rows)

    def kernel(*args: Any) -> tuple:
        xs = [args[j].index_select(0, x) if j is not None else x for x, j in zip(args[m:n_in], in_slots)]
        for out, y in zip(args[n_in:n_in + n_out], batched(*xs, *args[n_in + n_out:])):
            out.copy_(y)
        return ()

    with mode:
        gm = make_fx(kernel)(*inputs, *shared)
    _symbolize_batch(gm, batch_input=next(i for i, x in enumerate(inputs) if x.shape[0] == BATCH_MARK))
    gm, example_inputs = _retrace_symbolic(gm, inputs, shared, hints)
    return KernelGraph(gm, out_rows, storage_rows, in_slots, example_inputs)


def _retrace_symbolic(gm: GraphModule, inputs: list[torch.Tensor], shared: Sequence[Any],
                      hints: Sequence[int] | None) -> tuple[GraphModule, list]:
    """``gm`` traced again with symbolic dim 0 (others static), taking its inputs' pytree leaves; and those leaves.

    Every ``(B, ...)`` input shares one batch-size symbol, so the compiler
    knows their loops have one range and can fuse them (output stores
    included); every arena storage gets a symbol of its own. ``hints``: see ``trace_block``.
    """
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)

    def symbol(hint: int, name: str) -> torch.SymInt:
        return env.create_symintnode(env.create_symbol(hint, ConstantSource(name), DimDynamic.DYNAMIC), hint=hint)

    fake: list[Any] = []
    with mode:
        # size hints (for the compiler's heuristics): 64 rows a batch, 4096 in the arena, unless told
        first = next(i for i, t in enumerate(inputs) if t.shape[0] == BATCH_MARK)
        batch = symbol(hints[first] if hints else HINT_BATCH, "batch")
        for i, t in enumerate(inputs):
            rows = batch if t.shape[0] == BATCH_MARK else symbol(hints[i] if hints else HINT_ROWS, f"storage{i}")
            fake.append(torch.empty((rows, *t.shape[1:]), dtype=t.dtype, device=t.device))
        fake += _stand_ins(shared)
        gm = make_fx(gm)(*fake)
    # The kernel takes the pytree leaves of its arguments (a module form's settings are leaves too): what
    # Inductor's compiled ``call`` takes, and what its C++ wrapper matches the graph's placeholders with.
    gm.graph._codegen = torch.fx.graph.CodeGen()
    gm.recompile()
    return gm, pytree.tree_leaves(fake)


def _stand_ins(values: Sequence[Any], grads: bool = False) -> list[Any]:
    """New tensors (of the active fake mode) with the shapes, strides and dtypes of the tensors in ``values``
    (``grads``: and requiring grad where they do).

    The real shared tensors are never handed to a fake mode: converting them
    leaves weak references on them that outlive the mode (and crashed CPython
    when the tensors were freed later).
    """
    def stand_in(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            t = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
            return t.requires_grad_() if grads and x.requires_grad else t
        return x

    return [pytree.tree_map(stand_in, v) for v in values]


def _symbolize_batch(gm: GraphModule, batch_input: int) -> None:
    """Replace the marker batch size (and its multiples) by ``sym_size(input, 0)`` throughout ``gm``."""
    g = gm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    first_op = next(n for n in g.nodes if n.op != "placeholder")
    with g.inserting_before(first_op):
        batch = g.call_function(torch.ops.aten.sym_size.int, (placeholders[batch_input], 0))

    def sub(a: Any, node: Node) -> Any:
        if isinstance(a, bool):
            return a
        if isinstance(a, int) and BATCH_MARK <= a < 2 ** 40 and a % BATCH_MARK == 0:
            k = a // BATCH_MARK
            if k == 1:
                return batch
            with g.inserting_before(node):
                return g.call_function(operator.mul, (batch, k))
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x, node) for x in a)
        return a

    for n in list(g.nodes):
        if n.op == "call_function" and n is not batch:
            n.args = sub(n.args, n)
            n.kwargs = {k: sub(v, n) for k, v in n.kwargs.items()}
    g.lint()
    gm.recompile()

"""The compiled training backend: each static block's batched graph compiled by TorchInductor with a
backward kernel (§5 kernels, extended to training; issue 19).

The paper's system (and acrobat's ``compiled`` backend) compiles kernels for
inference only. ``compiled-train`` trains through the same per-block graphs
the ``eager-accum`` backend runs eagerly (``TracedKernel``: the block's batched
aten graph, traced once per argument signature with a symbolic batch size,
``acrobat.codegen.kernels.trace_block(..., store=False)``), but compiled: the
graph goes to TorchInductor through AOTAutograd (``torch._inductor.compile``
with grad mode on and example inputs that require grad where the launch's
do), which partitions it into a forward and a backward graph and compiles
each into fused loops around library GEMMs. Each launch is then one
Inductor forward kernel, and ``backward`` runs one Inductor backward kernel
per launch (an ``autograd.Function`` node that AOTAutograd's runtime wrapper
records). The backward graph is compiled with the forward (not lazily at
the first ``backward``), so a failure shows at compile time and the kernel
lands in acrobat's Inductor cache folder (``acrobat.cachedir.inductor_cache``).

The batch dim is symbolic: one compiled pair serves every batch size >= 2
(no Dynamo, so no guards and no recompiles; a kernel Inductor specialized on
a size runs its eager graph at other sizes, ``acrobat.runtime.size_guard``).
The graph's signature adds which batched arguments require grad to
``TracedKernel``'s (AOTAutograd computes gradients only for those). Launches
of one row and launches without grad mode run through ``vmap``, as on
``eager-accum``; gathers are ``eager-accum``'s (backward accumulates rows
into one buffer per source output, ``acrobat.runtime.accumulate``), made
contiguous for the kernels; lookups with sparse gradients keep them (the
backward kernel calls aten's sparse ``embedding`` backward). A block Inductor
cannot compile runs its eager traced graph for that signature (a warning,
and ``report()``, say which and why).

AOTAutograd's backward gives every input that requires grad a gradient,
zeros where none of the outputs it feeds reached a loss; plain PyTorch
leaves such a weight's ``grad`` None (DRNN's child/sibling weights, read
only by ``.item()``). A launch whose graph has an input feeding only some
outputs gets a hook on its autograd node that hands back ``None`` for such
inputs (``_keeping_none``).

Checked by hand (``tests/test_training.py``'s gradient check, every paper
model and example, float32 and float64): gradients equal the per-instance
loop's everywhere; the suite runs TreeLSTM, BiRNN and one example (compiles
take seconds per block).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager

import torch
import torch.utils._pytree as pytree

from acrobat.cachedir import inductor_dir
from acrobat.runtime.compiled import COMPILE_LOCK, cache_hits, compile_graph
from acrobat.runtime.dfg import Group
from acrobat.runtime.eager import EagerBackend, TracedKernel
from acrobat.runtime.plan import BlockCode, RowSpec, Tracer
from acrobat.runtime.progress import CompileNotes

if TYPE_CHECKING:
    from acrobat.runtime.executor import Runtime

log = logging.getLogger("acrobat.compile")

Graph = Callable[..., tuple[torch.Tensor, ...]]  # fn(*batched args, *shared leaves) -> tuple of (B, ...)


class CompiledTrainKernel(TracedKernel):
    """A block's launches under autograd through its traced graph compiled by TorchInductor with AOTAutograd
    (a forward and a backward kernel per signature; see the module docstring).

    ``compiled``/``eager_graphs`` count the signatures compiled and those left to the eager traced graph;
    ``eager_reason`` says why the last one was (Inductor's error, first line).
    """

    def __init__(self, backend: CompiledTrainBackend, block: BlockCode, trace: Tracer):
        super().__init__(block, trace)
        self.backend = backend
        self.compiled = 0
        self.eager_graphs = 0
        self.eager_reason = ""

    def arguments(self, g: Group, rt: Runtime) -> list[torch.Tensor]:
        """``TracedKernel``'s arguments, contiguous (the kernels are compiled for contiguous rows; a gathered
        view may be strided)."""
        return [a.contiguous() for a in super().arguments(g, rt)]

    def signature(self, args: list[torch.Tensor], shared_sig: tuple) -> tuple:
        """``TracedKernel``'s key and which batched arguments require grad (the backward graph depends on it)."""
        return *super().signature(args, shared_sig), tuple(a.requires_grad for a in args)

    def graph(self, args: list[torch.Tensor], shared: list[Any], leaves: list[Any], rt: Runtime) -> Graph:
        """The traced graph for this signature compiled by TorchInductor with its backward (or loaded from the
        disk cache); its eager traced graph where Inductor fails (said by a warning and in the report).

        Raises:
            Exception: the block cannot be traced (the launch then runs through ``vmap``).
        """
        rows = [RowSpec.of(a) for a in args]
        graph = self.trace(self.block, rows, shared, False, rt.device, store=False)
        for x, real in zip(graph.example_inputs, [*args, *leaves]):
            if isinstance(x, torch.Tensor) and isinstance(real, torch.Tensor) and real.requires_grad:
                x.requires_grad_()
        reach = _partial_reach(graph.gm, graph.example_inputs)  # before compiling, which may change the graph
        t0 = time.perf_counter()
        try:
            with COMPILE_LOCK, self.backend.notes.progress.kernel(self.block.name, self.block.site.loc,
                                                                  "accumulating") as hit:
                hits = cache_hits()
                fn, _, guard = compile_graph(graph, "python", train=True)
                hit.append(cache_hits() > hits)
        except Exception as exc:  # noqa: BLE001 - the kernel compiler's limit: the eager graph trains it
            self.eager_graphs += 1
            self.eager_reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc) else ''}"
            log.warning("block %s: TorchInductor could not compile its training graph (%s); it runs its traced "
                        "graph eagerly", self.block.name, self.eager_reason)
            return super().graph(args, shared, leaves, rt)  # traced afresh: compiling may change the one it took
        self.compiled += 1
        rt.stats.compiles += 1
        rt.stats.compile_ms += (time.perf_counter() - t0) * 1e3
        compiled = _keeping_none(fn, reach) if reach is not None else (lambda *xs: fn(list(xs)))
        if guard is None:
            return compiled
        eager = super().graph(args, shared, leaves, rt)
        return lambda *xs: compiled(*xs) if guard.holds(xs) else eager(*xs)  # specialized: its sizes only


def _partial_reach(gm: torch.fx.GraphModule, inputs: list[Any]) -> list[frozenset[int]] | None:
    """Per input of ``gm`` the positions of the outputs it reaches, when some input that requires grad reaches
    only some outputs (else None: every gradient reaches every input that requires grad, or none does)."""
    deps: dict[torch.fx.Node, frozenset[int]] = {}
    placeholders = 0
    outputs: list[frozenset[int]] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            deps[node] = frozenset((placeholders,))
            placeholders += 1
        elif node.op == "output":
            outputs = [deps.get(a, frozenset()) if isinstance(a, torch.fx.Node) else frozenset()
                       for a in pytree.tree_leaves(node.args)]
        else:
            deps[node] = frozenset().union(*(deps[a] for a in node.all_input_nodes))
    reach = [frozenset(k for k, d in enumerate(outputs) if j in d) for j in range(placeholders)]
    partial = any(isinstance(x, torch.Tensor) and x.requires_grad and len(reach[j]) < len(outputs)
                  for j, x in enumerate(inputs))
    return reach if partial else None


def _keeping_none(fn: Callable[[list], Any], reach: list[frozenset[int]]) -> Graph:
    """``fn`` (a compiled training graph's boxed call) whose backward gives ``None``, not zeros, to each input
    that requires grad none of whose outputs (``reach``, per input) got a gradient: a weight whose product
    no loss reaches keeps ``grad is None``, as in plain PyTorch (AOTAutograd's backward computes every
    input's gradient, from zero-filled gradients of the outputs no loss reached).

    Per launch, a hook on the launch's autograd node maps the node's inputs to the graph's (by their
    autograd edges) and its outputs to the graph's (by ``output_nr``); where an output is not the node's
    own (AOTAutograd regenerates a view outside it) the gradients are left as computed."""
    def call(*xs: Any) -> Any:
        outs = fn(list(xs))
        node = next((o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None), None)
        if node is None or any(o.requires_grad and o.grad_fn is not node for o in outs):
            return outs
        slot = [o.output_nr if o.requires_grad else -1 for o in outs]  # per graph output, its slot on the node
        edges: dict[tuple[Any, int], list[int]] = {}
        for j, x in enumerate(xs):
            if isinstance(x, torch.Tensor) and x.requires_grad:
                edge = (x.grad_fn, x.output_nr) if x.grad_fn is not None else (id(x), 0)
                edges.setdefault(edge, []).append(j)
        owners = []  # per node input: the graph inputs it is
        for fn_, nr in node.next_functions:
            var = getattr(fn_, "variable", None)
            owners.append(edges.get((id(var), 0) if var is not None else (fn_, nr), None))

        def prune(grad_inputs: tuple, grad_outputs: tuple) -> tuple:
            def reached(j: int) -> bool:
                return any(slot[k] >= 0 and grad_outputs[slot[k]] is not None for k in reach[j])

            return tuple(g if js is None or any(reached(j) for j in js) else None
                         for g, js in zip(grad_inputs, owners))

        node.register_hook(prune)
        return outs

    return call


class CompiledTrainBackend(EagerBackend):
    """``compiled-train``: ``eager-accum`` with each block's traced graph compiled by TorchInductor into a
    forward and a backward kernel (§5, extended to training; the module docstring). Trains: outputs are
    out of place, autograd records each launch as one node whose backward is the compiled backward kernel.
    """

    def __init__(self) -> None:
        super().__init__(accumulate=True, name="compiled-train")
        self.kernels: list[CompiledTrainKernel] = []
        self.notes = CompileNotes()

    def kernel(self, block: BlockCode, trace: Tracer) -> CompiledTrainKernel:
        k = CompiledTrainKernel(self, block, trace)
        self.kernels.append(k)
        return k

    def compiling(self, program: str, n_blocks: int) -> ContextManager[None]:
        """Shows the compiles of each run of ``program`` (``acrobat.runtime.progress.CompileNotes``)."""
        return self.notes.run(program, n_blocks, inductor_dir())

    def report(self) -> str:
        """Per block launched under grad: the signatures compiled (forward and backward kernels) and those
        run by their eager traced graph, with Inductor's reason; then the threads per launch."""
        lines = [f"{'block':<34} {'compiled':>8} {'eager':>5}  note"]
        for k in self.kernels:
            if k.untraceable:
                lines.append(f"{k.block.name:<34} {0:>8} {0:>5}  not traceable: runs through vmap")
            elif k.compiled or k.eager_graphs:
                note = f"eager traced graph: {k.eager_reason}" if k.eager_graphs else "forward + backward kernels"
                lines.append(f"{k.block.name:<34} {k.compiled:>8} {k.eager_graphs:>5}  {note}")
        threads = super().report()
        return "\n".join(lines + ([threads] if threads else []))

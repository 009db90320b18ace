"""DyNet worker: run one model with one autobatch strategy, write outputs and times (ms); or train it.

Run as a script by ``acrobat.bench.dynet_models.DynetRunner`` (one process
per strategy: DyNet fixes its strategy at initialisation):

    python dynet_worker.py JOB.pkl RESULT.pkl

or, for ``acrobat bench --train``, by ``acrobat.bench.dynet_train`` as

    python dynet_worker.py --train

which reads the job (with Adagrad's learning rate, ``lr``) and then one
command at a time (``TRAIN_COMMANDS``: a timed training step, the first
step's gradients, the weights), pickled on stdin, and answers each on
stdout (``serve``, ``_Trainer``).

The job holds the model name, the strategy, DyNet's initial memory and
the worker's memory limit (MB), the timed runs (inference), the model's settings
(``config``: hidden size and per-model constants), the weights as numpy
arrays (named as in the PyTorch parameter module) and the instances as
plain data (``dynet_models.ENCODERS`` says per model). Imports only numpy
and DyNet, so it starts fast.

The seven models of the paper's DyNet comparison (Table 5) are here, each
the same math as its per-instance reference in ``acrobat.models``:
TreeLSTM, MV-RNN, BiRNN, NestedRNN, DRNN, Berxit and StackRNN.

Models without tensor-dependent control flow build every instance's graph
and run one ``dy.forward``. DRNN, Berxit and StackRNN decide from computed
values (a child or sibling; exiting early; SHIFT or REDUCE), which DyNet
has only after running the graph built so far. Their per-instance code is
a generator mirroring the reference: it yields the expressions a decision
reads, gets their values back, and decides as the reference does; the
DRNN's two subtrees are forked (``Fork``) so that they run side by side,
as acrobat's concurrent calls do (paper §4.2). ``run_fibers`` advances
every instance (and branch) until all wait for values, then computes all
those values with one ``dy.forward``: DyNet autobatches across instances
at every decision point, and the graph is executed once per round of
decisions instead of once per instance's decision. In training, ``backward``
then runs once over the whole graph; a decision's value reads pass no
gradient, as the reference's ``argmax`` and comparisons pass none.

A job that runs out of memory while it runs writes ``{"out_of_memory":
message}`` instead of outputs (the paper's Table 5 reports such runs as out
of memory); DyNet aborts the process when its initial memory cannot be had,
and the runner reads that from the worker's stderr (``is_memory_message``).
"""

from __future__ import annotations

import math
import os
import pickle
import resource
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import GeneratorType
from typing import Any, Callable, Generator

import numpy as np

MEMORY_ERRORS = ("memory allocation failed", "failed to allocate", "out of memory", "bad_alloc",
                 "cannot allocate memory")
"""Lower-case fragments of the errors raised when memory runs out: DyNet 2.1's ``dynet::out_of_memory``
("CPU memory allocation failed", mem.cc) and a memory pool's "... failed to allocate N"
(aligned-mem-pool.cc), both ``RuntimeError`` in Python; the C++ runtime's ``std::bad_alloc`` is a
``MemoryError``. (DyNet grows its forward memory pools on demand, so inference runs out of memory when
the worker reaches its memory limit, the job's ``limit_mb``.)"""

WARMUP = 2
"""Untimed runs first (as the harness's output check + warm-up): DyNet grows its memory pools in the
first run and merges them into one at the start of the next, which is slow."""

ADAGRAD_EPS = 1e-20
"""``dy.AdagradTrainer``'s epsilon in the training mode (added inside the square root; ``_Trainer``)."""

TRAIN_COMMANDS = ("step", "grads", "weights")
"""The training mode's commands: each is answered by the ``_Trainer`` method of its name."""

Build = Callable[[Any, dict[str, Any], dict[str, Any]], Callable[[Any], Any]]
"""``build(dy, params, config)``: per-instance function, given the graph's parameter expressions."""


@dataclass(frozen=True)
class ModelDef:
    """One model's DyNet code and how its weights load.

    ``lookups`` are loaded as lookup parameters (the first axis indexes
    the entries; DyNet fills an entry column-major, so matrix entries go in
    transposed, ``_load``); other 2-D weights are used as ``x @ W`` in PyTorch, i.e. ``W^T x`` in
    DyNet, and load transposed, except those in ``as_is`` (used as ``W @ X``).
    """

    build: Build
    lookups: frozenset[str] = frozenset({"emb"})
    as_is: frozenset[str] = frozenset()


class Fork(list):
    """Yielded by an instance's generator: generators to run side by side; the yield returns their results."""


# ------------------------------------------------------------------ shared pieces


def affine(dy: Any, P: dict[str, Any], w: str, b: str, x: Any) -> Any:
    """``x @ P[w] + P[b]`` of the PyTorch reference (``W^T x + b`` in DyNet; ``P[w]`` was loaded transposed)."""
    return dy.affine_transform([P[b], P[w], x])


def _rnn_step(dy: Any, P: dict[str, Any], b: str, *pairs: tuple[str, Any]) -> Any:
    """``tanh(x1 @ P[w1] + x2 @ P[w2] + ... + P[b])`` for ``pairs`` ``(w, x)``."""
    return dy.tanh(dy.affine_transform([P[b]] + [e for w, x in pairs for e in (P[w], x)]))


# ------------------------------------------------------------------ models without tensor-dependent control flow


Drop = Callable[[Any], Any]
"""Dropout of an expression: ``dy.dropout`` at a rate in training (``dynet_recipe_worker``), else identity."""


def keep(x: Any) -> Any:
    """No dropout (``Drop``): inference and the benchmark's training step."""
    return x


def treelstm_node(dy: Any, P: dict[str, Any], cfg: dict[str, Any], drop: Drop) -> Callable[[Any, list], tuple]:
    """TreeLSTM (``acrobat.models.treelstm``): ``node(t, states) -> (h, c)`` of a tree (a word id or
    ``(left, right)``), appending every node's h (H,) to ``states`` in post-order; ``drop`` on the word
    vectors (``acrobat.models.train_programs.treelstm_cell``)."""
    H = cfg["hidden"]

    def node(t: Any, states: list) -> tuple[Any, Any]:
        if isinstance(t, int):
            iou = affine(dy, P, "W_iou", "b_iou", drop(dy.lookup(P["emb"], t)))
            i, o, u = (dy.pick_range(iou, k * H, (k + 1) * H) for k in range(3))
            c = dy.cmult(dy.logistic(i), dy.tanh(u))
        else:
            (lh, lc), (rh, rc) = node(t[0], states), node(t[1], states)
            hc = dy.concatenate([lh, rh])
            iou = affine(dy, P, "U_iou", "b_iou", hc)
            i, o, u = (dy.pick_range(iou, k * H, (k + 1) * H) for k in range(3))
            f = dy.logistic(affine(dy, P, "U_f", "b_f", hc))
            fl, fr = dy.pick_range(f, 0, H), dy.pick_range(f, H, 2 * H)
            c = dy.cmult(dy.logistic(i), dy.tanh(u)) + dy.cmult(fl, lc) + dy.cmult(fr, rc)
        h = dy.cmult(dy.logistic(o), dy.tanh(c))
        states.append(h)
        return h, c

    return node


def _treelstm(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], tuple[Any, Any]]:
    """TreeLSTM (``acrobat.models.treelstm``); a tree is a word id or ``(left, right)``; ``(logits, root h)``."""
    node = treelstm_node(dy, P, cfg, keep)

    def run(tree: Any) -> tuple[Any, Any]:
        h, _ = node(tree, [])
        return affine(dy, P, "W_out", "b_out", h), h

    return run


def mvrnn_node(dy: Any, P: dict[str, Any], cfg: dict[str, Any], drop: Drop) -> Callable[[Any, list], tuple]:
    """MV-RNN (``acrobat.models.mvrnn``): ``node(t, vectors) -> (vector, matrix)`` of a tree as for the
    TreeLSTM, appending every node's vector (H,) to ``vectors`` in post-order; ``drop`` on the word vectors
    (``acrobat.models.train_programs.mvrnn_cell``).

    ``B a`` and ``A b`` multiply two per-instance tensors, which DyNet's
    autobatcher does not batch (paper §6.2).
    """
    buckets = cfg["mat_buckets"]

    def node(t: Any, vectors: list) -> tuple[Any, Any]:
        if isinstance(t, int):
            v = drop(dy.lookup(P["emb"], t))
            vectors.append(v)
            return v, dy.lookup(P["mat_emb"], t % buckets)
        (a, A), (b, B) = node(t[0], vectors), node(t[1], vectors)
        v = dy.tanh(affine(dy, P, "W", "b", dy.concatenate([B * a, A * b])))
        vectors.append(v)
        return v, P["W_M"] * dy.concatenate([A, B])

    return node


def _mvrnn(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], Any]:
    """MV-RNN (``acrobat.models.mvrnn``); a tree as for the TreeLSTM; the logits."""
    node = mvrnn_node(dy, P, cfg, keep)

    def run(tree: Any) -> Any:
        v, _ = node(tree, [])
        return affine(dy, P, "W_out", "b_out", v)

    return run


def birnn_direction(dy: Any, P: dict[str, Any], tokens: list[int], d: str, drop: Drop) -> list[Any]:
    """BiRNN states after each token of ``tokens`` in direction ``d`` (``fwd``/``bwd``), ``drop`` on the word
    vectors (``acrobat.models.train_programs.birnn_states``)."""
    h, states = P[f"{d}.h0"], []
    for tok in tokens:
        h = _rnn_step(dy, P, f"{d}.b", (f"{d}.W", drop(dy.lookup(P["emb"], tok))), (f"{d}.U", h))
        states.append(h)
    return states


def _birnn(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], list[Any]]:
    """BiRNN (``acrobat.models.birnn``); a sentence is a list of word ids; per-token logits."""

    def run(tokens: list[int]) -> list[Any]:
        fw, bw = birnn_direction(dy, P, tokens, "fwd", keep), birnn_direction(dy, P, tokens[::-1], "bwd", keep)
        n = len(tokens)
        return [affine(dy, P, "W_out", "b_out", dy.concatenate([fw[t], bw[n - 1 - t]])) for t in range(n)]

    return run


def _nestedrnn(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], Any]:
    """NestedRNN (``acrobat.models.nestedrnn``); an instance is ``(tokens, inner counts)``; the logits."""

    def run(inst: tuple[list[int], list[int]]) -> Any:
        g = P["g0"]
        for tok, m in zip(*inst):
            x = affine(dy, P, "W_x", "b_x", dy.lookup(P["emb"], tok))
            h = g
            for _ in range(m):
                h = dy.tanh(dy.affine_transform([x, P["U_h"], h]))
            z = dy.logistic(dy.affine_transform([P["b_z"], P["W_z"], h, P["U_z"], g]))
            r = dy.logistic(dy.affine_transform([P["b_r"], P["W_r"], h, P["U_r"], g]))
            n = _rnn_step(dy, P, "b_n", ("W_n", h), ("U_n", dy.cmult(r, g)))
            g = dy.cmult(1 - z, n) + dy.cmult(z, g)
        return affine(dy, P, "W_out", "b_out", g)

    return run


# ------------------------------------------------------------------ models with tensor-dependent control flow

Fiber = Generator[Any, Any, Any]
"""An instance's (or branch's) computation: yields a list of expressions (gets their values as numpy
arrays) or a ``Fork`` (gets the forked generators' results); returns its outputs."""


def _drnn(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], Fiber]:
    """DRNN (``acrobat.models.drnn``); an instance is ``(token, draws)``; the node labels, depth first.

    ``draws[position]`` is ``(u_child, u_sibling)``, the instance's uniform
    draws at that tree position, ``None`` where the reference makes no draw
    (depth or width at its bound), so the bounds come with the draws. Both
    decisions read the node's state only, so both probabilities are asked
    for at once; the child's and the sibling's subtrees are forked.
    """

    def prob(w: str, b: str, h: Any) -> Any:  # sigmoid(h @ w + b), a (1,) value
        return dy.logistic(dy.dot_product(P[w], h) + P[b])

    def grow(ha: Any, hf: Any, position: int, draws: dict[int, tuple[float | None, float | None]]) -> Fiber:
        h = _rnn_step(dy, P, "b_h", ("U_a", ha), ("U_f", hf))
        label = affine(dy, P, "W_out", "b_out", h)
        u_child, u_sibling = draws[position]
        decisions = [(u, w, b, branch) for u, w, b, branch in (
            (u_child, "w_c", "b_c", lambda: grow(h, P["h0"], 2 * position, draws)),
            (u_sibling, "w_s", "b_s", lambda: grow(ha, h, 2 * position + 1, draws))) if u is not None]
        values = (yield [prob(w, b, h) for _, w, b, _ in decisions]) if decisions else []
        branches = [branch() for (u, _, _, branch), p in zip(decisions, values) if float(p[0]) > u]
        below = (yield Fork(branches)) if branches else []
        return [label] + [x for labels in below for x in labels]

    def run(inst: tuple[int, dict[int, tuple[float | None, float | None]]]) -> Fiber:
        token, draws = inst
        return grow(dy.lookup(P["emb"], token), P["h0"], 1, draws)

    return run


def _berxit(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], Fiber]:
    """Berxit (``acrobat.models.berxit``); an instance is ``(tokens, exit thresholds per layer)``;
    ``(exit logits, layers run)``.

    A sequence is an (H, L) matrix, one column per token; attention runs
    per head on row ranges; layer norm (eps ``cfg["ln_eps"]``, as
    ``F.layer_norm``) and the exact (erf) GELU normalise each column.
    """
    heads, dh, eps = cfg["heads"], cfg["head_dim"], cfg["ln_eps"]
    scale = math.sqrt(dh)

    def column_mean(x: Any) -> Any:  # (1, L): mean_dim drops the reduced dimension
        return dy.reshape(dy.mean_dim(x, [0], False), (1, x.dim()[0][1]))

    def layer_norm(x: Any, w: str, b: str) -> Any:
        xc = x - column_mean(x)
        var = column_mean(dy.square(xc))
        return dy.cmult(dy.cdiv(xc, dy.sqrt(var + eps)), P[w]) + P[b]

    def gelu(x: Any) -> Any:
        return dy.cmult(x, dy.erf(x * (1 / math.sqrt(2))) + 1) * 0.5

    def layer(x: Any) -> Any:
        q, k, v = (affine(dy, P, f"W{n}", f"b{n}", x) for n in "qkv")
        att = []
        for hd in range(heads):
            qh, kh, vh = (dy.pick_range(m, hd * dh, (hd + 1) * dh) for m in (q, k, v))
            att.append(vh * dy.softmax((dy.transpose(kh) * qh) / scale, 0))  # column i: token i's mix
        x = layer_norm(x + affine(dy, P, "Wo", "bo", dy.concatenate(att)), "ln1_w", "ln1_b")
        ffn = affine(dy, P, "W2", "b2", gelu(affine(dy, P, "W1", "b1", x)))
        return layer_norm(x + ffn, "ln2_w", "ln2_b")

    def run(inst: tuple[list[int], list[float]]) -> Fiber:
        tokens, thresholds = inst
        x = dy.concatenate_cols([dy.lookup(P["emb"], t) for t in tokens]) + P["pos"]
        for layers_run, threshold in enumerate(thresholds, start=1):
            x = layer(x)
            logits = affine(dy, P, "W_exit", "b_exit", dy.pick(x, 0, 1))  # from the first token's column
            (probs,) = yield [dy.softmax(logits)]
            if float(probs.max()) > threshold:
                break
        return logits, layers_run

    return run


def _stackrnn(dy: Any, P: dict[str, Any], cfg: dict[str, Any]) -> Callable[[Any], Fiber]:
    """StackRNN (``acrobat.models.stackrnn``); a sentence is a list of word ids; ``(logits, final phrase)``.

    The action is read (``argmax`` of the scores) only where the reference
    reads it: while words are left and two phrases are on the stack.
    """

    def run(tokens: list[int]) -> Fiber:
        stack: list[Any] = []
        h, i = P["h0"], 0
        while i < len(tokens) or len(stack) > 1:
            shift = i < len(tokens)
            if shift and len(stack) >= 2:
                (scores,) = yield [affine(dy, P, "W_act", "b_act", h)]
                shift = int(np.argmax(scores)) == 0
            if shift:
                top = dy.tanh(affine(dy, P, "W_s", "b_s", dy.lookup(P["emb"], tokens[i])))
                i += 1
            else:
                r, l = stack.pop(), stack.pop()
                top = dy.tanh(affine(dy, P, "W_c", "b_c", dy.concatenate([l, r])))
            stack.append(top)
            h = _rnn_step(dy, P, "b_h", ("W_h", top), ("U_h", h))
        return affine(dy, P, "W_out", "b_out", h), stack[0]

    return run


MODELS: dict[str, ModelDef] = {
    "treelstm": ModelDef(_treelstm),
    "mvrnn": ModelDef(_mvrnn, lookups=frozenset({"emb", "mat_emb"}), as_is=frozenset({"W_M"})),
    "birnn": ModelDef(_birnn),
    "nestedrnn": ModelDef(_nestedrnn),
    "drnn": ModelDef(_drnn),
    "berxit": ModelDef(_berxit),
    "stackrnn": ModelDef(_stackrnn),
}
"""The DyNet models by registry name (``acrobat.models.MODELS``)."""


# ------------------------------------------------------------------ running


@dataclass
class _Fiber:
    """A running generator; its parent (None for an instance) gets its result in ``results[slot]``."""

    gen: Fiber
    parent: "_Fiber | None"
    slot: int
    results: list[Any] = field(default_factory=list)
    left: int = 0


def run_fibers(dy: Any, items: list[Any]) -> list[Any]:
    """Finish every instance's computation; ``items`` are outputs already built, or generators (``Fiber``).

    Runs every generator until it waits for values, then computes all the
    values asked for with one ``dy.forward`` (autobatched), hands them
    back and repeats; a ``Fork``'s generators run as generators of their own.
    """
    out = list(items)
    ready: list[tuple[_Fiber, Any]] = [(_Fiber(x, None, i), None) for i, x in enumerate(items)
                                       if isinstance(x, GeneratorType)]
    waiting: list[tuple[_Fiber, list[Any]]] = []
    while ready:
        while ready:
            f, reply = ready.pop()
            try:
                request = f.gen.send(reply)
            except StopIteration as stop:
                if f.parent is None:
                    out[f.slot] = stop.value
                    continue
                parent = f.parent
                parent.results[f.slot] = stop.value
                parent.left -= 1
                if parent.left == 0:
                    ready.append((parent, parent.results))
                continue
            if isinstance(request, Fork):
                f.results, f.left = [None] * len(request), len(request)
                ready.extend((_Fiber(g, f, k), None) for k, g in enumerate(request))
                if not request:
                    ready.append((f, []))
            else:
                waiting.append((f, request))
        if waiting:
            dy.forward([e for _, exprs in waiting for e in exprs])
            ready = [(f, [e.npvalue() for e in exprs]) for f, exprs in waiting]
            waiting = []
    return out


def _expressions(x: Any) -> list[Any]:
    """The DyNet expressions in an output structure (lists, tuples, ints)."""
    if isinstance(x, (list, tuple)):
        return [e for item in x for e in _expressions(item)]
    return [] if isinstance(x, (int, float)) else [x]


def _values(x: Any) -> Any:
    """An output structure with each expression replaced by its value (numpy); lists, tuples, ints kept."""
    if isinstance(x, list):
        return [_values(i) for i in x]
    if isinstance(x, tuple):
        return tuple(_values(i) for i in x)
    return x if isinstance(x, (int, float)) else x.npvalue()


def is_memory_message(text: str) -> bool:
    """True when ``text`` (an error message, or a dead worker's stderr) says memory ran out."""
    return any(m in text.lower() for m in MEMORY_ERRORS)


def is_memory_error(exc: BaseException) -> bool:
    """True for DyNet's (or the C++ allocator's) out-of-memory errors."""
    return isinstance(exc, MemoryError) or is_memory_message(f"{type(exc).__name__}: {exc}")


def _transposed(spec: ModelDef, name: str, arr: np.ndarray) -> bool:
    """True for a weight used as ``x @ W`` in PyTorch: ``W^T x`` in DyNet, so it is held transposed there."""
    return arr.ndim == 2 and name not in spec.lookups and name not in spec.as_is


def _load(dy: Any, model: Any, spec: ModelDef, params: dict[str, np.ndarray]) -> dict[str, Any]:
    P: dict[str, Any] = {}
    for name, arr in params.items():
        if name in spec.lookups:  # DyNet reads each entry column-major: matrix entries go in transposed
            entries = arr.swapaxes(1, 2) if arr.ndim == 3 else arr
            P[name] = model.lookup_parameters_from_numpy(np.ascontiguousarray(entries))
        else:
            P[name] = model.parameters_from_numpy(np.ascontiguousarray(arr.T if _transposed(spec, name, arr) else arr))
    return P


def _as_torch(spec: ModelDef, name: str, arr: np.ndarray) -> np.ndarray:
    """A weight's (or its gradient's) value read from DyNet (``as_array``: entries as matrices), laid out
    as the PyTorch parameter ``name``."""
    return arr.T if _transposed(spec, name, arr) else arr


def start(job: dict[str, Any]) -> tuple[Any, ModelDef, Any, dict[str, Any]]:
    """Limit the process's memory, initialise DyNet with the job's strategy and memory, load the weights:
    ``(dynet module, model definition, parameter collection, parameters by name)``."""
    if job["model"] not in MODELS:
        raise SystemExit(f"dynet_worker: no DyNet version of {job['model']!r} (have {', '.join(MODELS)})")
    limit = job["limit_mb"] << 20  # past it, allocations fail (and are reported) instead of the machine running out
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import dynet_config

    # DyNet's seed 0 means "from the clock": the job's seed (default 0) is passed as seed + 1
    dynet_config.set(mem=str(job["mem_mb"]), random_seed=job.get("seed", 0) + 1, autobatch=job["strategy"])
    import dynet as dy

    model = dy.ParameterCollection()
    spec = MODELS[job["model"]]
    return dy, spec, model, _load(dy, model, spec, job["params"])


def new_graph(dy: Any, spec: ModelDef, P: dict[str, Any]) -> dict[str, Any]:
    """A fresh computation graph; the parameters in it by name (lookup tables as they are: ``dy.lookup``)."""
    dy.renew_cg()
    return {k: v if k in spec.lookups else dy.parameter(v) for k, v in P.items()}


def _build(dy: Any, spec: ModelDef, P: dict[str, Any], job: dict[str, Any]) -> list[Any]:
    """A fresh graph with every instance's outputs in it (the decisions' values computed, ``run_fibers``)."""
    run = spec.build(dy, new_graph(dy, spec, P), job["config"])
    return run_fibers(dy, [run(x) for x in job["instances"]])


def _worker(src: str, dst: str) -> None:
    """Inference: ``WARMUP`` untimed runs, then ``job["repeats"]`` timed ones; write outputs and times."""
    job = pickle.loads(Path(src).read_bytes())
    dy, spec, model, P = start(job)  # the parameters live as long as ``model``

    def once() -> list[Any]:
        outs = _build(dy, spec, P, job)
        dy.forward(_expressions(outs))
        return _values(outs)

    try:
        for _ in range(WARMUP):
            result = once()
        samples = []
        for _ in range(job["repeats"]):
            t0 = time.perf_counter()
            result = once()
            samples.append((time.perf_counter() - t0) * 1e3)
    except Exception as exc:  # noqa: BLE001 - only memory errors are reported; the rest re-raised
        if not is_memory_error(exc):
            raise
        Path(dst).write_bytes(pickle.dumps({"out_of_memory": f"{type(exc).__name__}: {exc}".strip()}))
        return
    Path(dst).write_bytes(pickle.dumps({"outputs": result, "samples_ms": samples}))


class _Trainer:
    """The training step (``--train``): per step a fresh graph, the loss, ``backward``, Adagrad's update.

    The loss is ``acrobat.bench.train_step.loss_of``'s: half the sum of
    squares of every output, summed over the instances. The optimizer is
    ``dy.AdagradTrainer`` set as ``acrobat.train.TrainOptimizer``'s
    ``torch.optim.Adagrad``: learning rate ``job["lr"]``, no gradient
    clipping (DyNet clips at norm 5 unless told not to), accumulators from
    zero. DyNet adds epsilon inside the square root (``g / sqrt(s + eps)``;
    PyTorch: ``g / (sqrt(s) + 1e-10)``), so ``ADAGRAD_EPS`` is 1e-20 (its
    square root is PyTorch's epsilon); the two differ only where ``s`` is
    below about 1e-18. Lookup parameters stay lookup parameters: DyNet's
    sparse updates touch only the rows used.
    """

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.dy, self.spec, self.model, self.P = start(job)  # the parameters live as long as ``self.model``
        self.trainer = self.dy.AdagradTrainer(self.model, learning_rate=job["lr"], eps=ADAGRAD_EPS)
        self.trainer.set_clip_threshold(0)  # 0: no clipping

    def _loss(self) -> Any:
        outs = _build(self.dy, self.spec, self.P, self.job)
        return self.dy.esum([self.dy.squared_norm(e) for e in _expressions(outs)]) * 0.5

    def step(self) -> tuple[float, float, float]:
        """One training step; ms of forward (graph, loss and its value), backward and the update."""
        t0 = time.perf_counter()
        loss = self._loss()
        loss.value()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.trainer.update()
        t3 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3

    def grads(self) -> dict[str, Any]:
        """One forward and backward, no update: every gradient (``read_grads``), then zeroed."""
        loss = self._loss()
        loss.value()
        loss.backward()
        return read_grads(self.spec, self.P)

    def weights(self) -> dict[str, np.ndarray]:
        """Every weight now (``read_weights``)."""
        return read_weights(self.spec, self.P)


def read_grads(spec: ModelDef, P: dict[str, Any]) -> dict[str, Any]:
    """Every parameter's gradient in PyTorch's layout, by name; the gradients are then zeroed. A lookup
    table's is ``(rows, their gradients)``: the rows whose gradient is not all zero."""
    out: dict[str, Any] = {}
    for name, p in P.items():
        g = _as_torch(spec, name, p.grad_as_array())
        if name in spec.lookups:
            rows = np.flatnonzero(g.reshape(len(g), -1).any(axis=1))
            out[name] = (rows, g[rows])
        else:
            out[name] = g
        p.scale_gradient(0.0)
    return out


def read_weights(spec: ModelDef, P: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every weight now, by name, in PyTorch's layout (lookup tables whole)."""
    return {name: _as_torch(spec, name, p.as_array()) for name, p in P.items()}


def serve(make: Callable[[dict[str, Any]], Any], commands: tuple[str, ...]) -> None:
    """Read the job, pickled on stdin, and make the server ``make(job)``; then read messages until end of
    input: a command name of ``commands`` or a tuple ``(command, *arguments)``, answered by the server's
    method of that name. Reply to each, pickled on stdout: ``{"ok": result}``, ``{"out_of_memory": message}``
    or ``{"error": traceback}`` (the process then ends). Anything else written to stdout (DyNet's notices)
    goes to stderr. ``--train`` serves ``_Trainer`` (``TRAIN_COMMANDS``); ``dynet_recipe_worker`` its
    recipe."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    messages = sys.stdin.buffer
    server = make(pickle.load(messages))
    while True:
        try:
            message = pickle.load(messages)
        except EOFError:
            return
        command, *arguments = message if isinstance(message, tuple) else (message,)
        try:
            if command not in commands:
                raise ValueError(f"dynet worker: unknown command {command!r} (have {', '.join(commands)})")
            reply = {"ok": getattr(server, command)(*arguments)}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises
            reply = ({"out_of_memory": f"{type(exc).__name__}: {exc}".strip()} if is_memory_error(exc)
                     else {"error": traceback.format_exc()})
        pickle.dump(reply, replies)
        replies.flush()
        if "ok" not in reply:
            return


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:
        serve(_Trainer, TRAIN_COMMANDS)
    else:
        _worker(sys.argv[1], sys.argv[2])

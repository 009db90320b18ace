"""DyNet worker of ``acrobat train --system dynet``: the fine-grained SST recipe computed by DyNet.

Run by path by ``acrobat.train_dynet`` (one process: DyNet fixes its
autobatch strategy, memory and random seed when it is initialised):

    python dynet_recipe_worker.py

It reads the job (``acrobat.bench.dynet_models.worker_job`` without
instances, plus the recipe: ``dropout``, ``optimizer``, ``lr``,
``weight_decay``, ``sparse``, ``seed``), then commands (``COMMANDS``), pickled
on stdin, answered on stdout (``dynet_worker.serve``). Imports numpy, DyNet
and ``dynet_worker`` only.

Per step (``_Recipe.step``) one graph holds every instance of the batch
(autobatched): every node's logits (``NODE_MODELS``: the all-node programs
of ``acrobat.models.train_programs``, ``dy.dropout`` where they call
``F.dropout``: inverted dropout in both), the cross entropy of each node
(``pickneglogsoftmax``) summed over the nodes and averaged over the trees,
``backward`` and the trainer's update (``_trainer``).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

if __package__:
    from acrobat.bench.dynet_worker import (ADAGRAD_EPS, Drop, affine, birnn_direction, keep,
                                            mvrnn_node, new_graph, read_grads, read_weights, serve, start,
                                            treelstm_node)
else:  # run by path: its folder is on sys.path
    from dynet_worker import (ADAGRAD_EPS, Drop, affine, birnn_direction, keep,  # type: ignore[no-redef]
                              mvrnn_node, new_graph, read_grads, read_weights, serve, start, treelstm_node)

COMMANDS = ("ready", "step", "grads", "predict", "save", "load", "weights")
"""The worker's commands: each is answered by the ``_Recipe`` method of its name."""

ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8
"""``torch.optim.Adam``'s defaults (DyNet's epsilon: ``_trainer``)."""

NodeBuild = Callable[[Any, dict[str, Any], dict[str, Any], Drop], Callable[[Any], list[Any]]]
"""``build(dy, params, config, drop)``: instance -> every node's logits (C,), in the order of the node labels."""


def _tree_nodes(cell: Callable[..., Callable[[Any, list], tuple]]) -> NodeBuild:
    """A tree model's all-node logits: ``dropout(state) @ W_out + b_out`` of every node's state, post-order
    (``treelstm_nodes``, ``mvrnn_nodes``)."""

    def build(dy: Any, P: dict[str, Any], cfg: dict[str, Any], drop: Drop) -> Callable[[Any], list[Any]]:
        node = cell(dy, P, cfg, drop)

        def run(tree: Any) -> list[Any]:
            states: list[Any] = []
            node(tree, states)
            return [affine(dy, P, "W_out", "b_out", drop(h)) for h in states]

        return run

    return build


def _birnn_nodes(dy: Any, P: dict[str, Any], cfg: dict[str, Any], drop: Drop) -> Callable[[Any], list[Any]]:
    """BiRNN's all-node logits (``birnn_nodes``): every token's, then the sentence's (both final states)."""

    def run(tokens: list[int]) -> list[Any]:
        fw, bw = birnn_direction(dy, P, tokens, "fwd", drop), birnn_direction(dy, P, tokens[::-1], "bwd", drop)
        n = len(tokens)
        pairs = [(fw[t], bw[n - 1 - t]) for t in range(n)] + [(fw[n - 1], bw[n - 1])]
        return [affine(dy, P, "W_out", "b_out", drop(dy.concatenate(list(pair)))) for pair in pairs]

    return run


NODE_MODELS: dict[str, NodeBuild] = {"treelstm": _tree_nodes(treelstm_node), "mvrnn": _tree_nodes(mvrnn_node),
                                     "birnn": _birnn_nodes}
"""The models of ``acrobat train`` (``acrobat.train.TASKS``) in DyNet."""


def _trainer(dy: Any, model: Any, job: dict[str, Any]) -> Any:
    """DyNet's optimizer set as ``acrobat.train.TrainOptimizer``'s: Adagrad (epsilon ``ADAGRAD_EPS`` inside
    the square root: ``dynet_worker._Trainer``) or Adam with PyTorch's betas; no gradient clipping (DyNet
    clips at norm 5 unless told not to).

    Adam's epsilon cannot be PyTorch's at every step: PyTorch adds it to ``sqrt(v / (1 - b2^t))``, DyNet to
    ``sqrt(v)``, so DyNet's ``eps`` acts as PyTorch's ``eps / sqrt(1 - b2^t)``. It is set to
    ``ADAM_EPS * sqrt(1 - b2)``: the same update at the first step; later DyNet's acts as a smaller one
    (down to ``ADAM_EPS * sqrt(1 - b2)``, about 3e-10), which shows only where ``sqrt(v)`` is below 1e-8."""
    if job["optimizer"] == "adagrad":
        trainer = dy.AdagradTrainer(model, learning_rate=job["lr"], eps=ADAGRAD_EPS)
    elif job["optimizer"] == "adam":
        beta_1, beta_2 = ADAM_BETAS
        trainer = dy.AdamTrainer(model, alpha=job["lr"], beta_1=beta_1, beta_2=beta_2,
                                 eps=ADAM_EPS * (1 - beta_2) ** 0.5)
    else:
        raise ValueError(f"dynet_recipe_worker: unknown optimizer {job['optimizer']!r}")
    trainer.set_clip_threshold(0)  # 0: no clipping
    return trainer


class _Recipe:
    """The recipe's commands on one model (``COMMANDS``). Instances come as ``dynet_models.ENCODERS`` makes
    them, labels as one list of node labels per instance.

    Weight decay is PyTorch's (``weight_decay * w`` added to the gradient before the optimizer's update,
    moments included), not DyNet's own (a shrinking of every weight outside the optimizer): the loss gets
    ``weight_decay / 2 * |w|^2`` of every parameter except the lookup tables in ``job["sparse"]`` (those
    acrobat updates sparsely, without decay). A lookup table not in it is read whole into the graph (its
    decay term), so every row is updated each step, as PyTorch's dense optimizer does (Adam moves rows not
    looked up by their moments); a table in it is updated in the rows looked up only (DyNet's sparse
    updates: Adagrad's and SparseAdam's).
    """

    def __init__(self, job: dict[str, Any]) -> None:
        if job["model"] not in NODE_MODELS:
            raise ValueError(f"dynet_recipe_worker: no all-node DyNet version of {job['model']!r}")
        self.job = job
        self.dy, self.spec, self.model, self.P = start(job)  # the parameters live as long as ``self.model``
        self.build = NODE_MODELS[job["model"]]
        self.decayed = [n for n in self.P if n not in job["sparse"]]
        self.trainer = _trainer(self.dy, self.model, job)

    def ready(self) -> None:
        """Nothing: the reply says DyNet is initialised and the weights are loaded."""

    def _graph(self, drop: Drop) -> tuple[dict[str, Any], Callable[[Any], list[Any]]]:
        E = new_graph(self.dy, self.spec, self.P)
        return E, self.build(self.dy, E, self.job["config"], drop)

    def _loss(self, instances: list[Any], labels: list[list[int]]) -> tuple[Any, Any]:
        """``(cross entropy per tree, objective)``: the objective adds the weight decay term."""
        dy, p = self.dy, self.job["dropout"]
        E, run = self._graph((lambda x: dy.dropout(x, p)) if p > 0 else keep)
        ce = dy.esum([dy.pickneglogsoftmax(z, y) for x, ys in zip(instances, labels)
                      for z, y in zip(run(x), ys, strict=True)]) * (1.0 / len(instances))
        if not self.decayed:
            return ce, ce
        whole = [self.P[n].expr() if n in self.spec.lookups else E[n] for n in self.decayed]
        return ce, ce + dy.esum([dy.squared_norm(w) for w in whole]) * (0.5 * self.job["weight_decay"])

    def step(self, instances: list[Any], labels: list[list[int]]) -> tuple[float, float, float, float]:
        """One training step: ``(loss per tree, ms of forward (graph, loss), backward, update)``."""
        t0 = time.perf_counter()
        ce, objective = self._loss(instances, labels)
        objective.value()
        loss = ce.value()
        t1 = time.perf_counter()
        objective.backward()
        t2 = time.perf_counter()
        self.trainer.update()
        t3 = time.perf_counter()
        return loss, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3

    def grads(self, instances: list[Any], labels: list[list[int]]) -> tuple[float, dict[str, Any]]:
        """``(loss per tree, gradients)`` of one forward and backward, no update (``read_grads``; zeroed)."""
        ce, objective = self._loss(instances, labels)
        objective.value()
        loss = ce.value()
        objective.backward()
        return loss, read_grads(self.spec, self.P)

    def predict(self, instances: list[Any], batch_size: int) -> list[int]:
        """The argmax of every instance's root logits (the last node's), no dropout, ``batch_size`` instances
        per graph."""
        out: list[int] = []
        for i in range(0, len(instances), batch_size):
            _, run = self._graph(keep)
            roots = [run(x)[-1] for x in instances[i:i + batch_size]]
            self.dy.forward(roots)
            out += [int(np.argmax(r.npvalue())) for r in roots]
        return out

    def save(self, path: str) -> None:
        """The weights to ``path`` (``ParameterCollection.save``, DyNet's text format)."""
        self.model.save(path)

    def load(self, path: str) -> None:
        """The weights from ``path``, as ``save`` wrote them (``ParameterCollection.populate``)."""
        self.model.populate(path)

    def weights(self) -> dict[str, np.ndarray]:
        """Every weight now (``read_weights``)."""
        return read_weights(self.spec, self.P)


if __name__ == "__main__":
    serve(_Recipe, COMMANDS)

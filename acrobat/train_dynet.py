"""``acrobat train --system dynet``: the recipe of ``acrobat.train`` computed by DyNet with autobatching.

DyNet runs in a worker process (``acrobat/bench/dynet_recipe_worker.py``),
as in ``acrobat bench``: DyNet's autobatch strategy, memory pools and random
seed are fixed when it is initialised (``dynet_config.set`` before the
import), once per process, and the worker's address space is capped
(``dynet_models.memory_limit_mb``) so that DyNet's pools cannot take the
machine's memory. This process never imports DyNet. The worker starts from
the weights ``acrobat.train.make_params`` made (numpy arrays, as the
benchmark passes them), so a DyNet run starts where the acrobat and PyTorch
runs of the same seed start; each step sends the batch's instances
(``dynet_models.ENCODERS``) and node labels and gets the loss and DyNet's
own forward / backward / update times back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from acrobat.bench.base import OutOfMemory
from acrobat.bench.dynet_models import ENCODERS, MEMORY_MB, STRATEGIES, dynet_installed, memory_limit_mb, worker_job
from acrobat.bench.dynet_recipe_worker import NODE_MODELS
from acrobat.bench.dynet_train import DynetWorker, dense_tensor
from acrobat.data.tree import Tree
from acrobat.train import StepTimes, Task, TrainConfig, Unavailable

RECIPE_WORKER = Path(__file__).parent / "bench" / "dynet_recipe_worker.py"
"""The worker script (run by path: it imports numpy, DyNet and ``dynet_worker`` only)."""

EVAL_BATCH = 64
"""Instances per graph when predicting dev and test labels (``acrobat.train.root_accuracy``'s batch)."""


class DynetLearner:
    """The recipe's step, accuracy and checkpoint in a DyNet worker (``acrobat.train.Learner``).

    ``params`` are the initial weights (copied; not changed here). ``cfg.sparse_grads`` decides which lookup
    tables are updated in their used rows only and not decayed (``task.tables``, as acrobat's sparse
    gradients; the rest get PyTorch's weight decay and dense updates: ``dynet_recipe_worker._Recipe``).
    The autobatch strategy is ``cfg.dynet_autobatch`` (``dynet_models.STRATEGIES``).

    Raises:
        Unavailable: DyNet not installed, no DyNet version of the model, or DyNet out of memory.
        RuntimeError: the worker failed.
    """

    suffix = ".model"
    """The checkpoint's file suffix: DyNet's ``ParameterCollection.save`` format."""

    def __init__(self, task: Task, cfg: TrainConfig, params: nn.Module) -> None:
        if not dynet_installed():
            raise Unavailable("DyNet is not installed (scripts/install-dynet.sh builds it, about 15 min)")
        if task.name not in NODE_MODELS:
            raise Unavailable(f"no all-node DyNet version of {task.name} (have {', '.join(NODE_MODELS)})")
        if cfg.dynet_autobatch not in STRATEGIES:
            raise ValueError(f"DyNet autobatch strategy {cfg.dynet_autobatch} unknown; choose from "
                             + ", ".join(f"{k} ({v})" for k, v in STRATEGIES.items()))
        self.task, self.params = task, params
        self.shapes = {n: tuple(p.shape) for n, p in params.named_parameters()}
        self.encode = ENCODERS[task.name]
        job = worker_job(task.name, params, [], cfg.dynet_autobatch, MEMORY_MB, memory_limit_mb()) | {
            "dropout": cfg.dropout, "optimizer": cfg.optimizer, "lr": cfg.lr, "weight_decay": cfg.weight_decay,
            "sparse": list(task.tables) if cfg.sparse_grads else [], "seed": cfg.seed}
        self.worker = DynetWorker(job, (str(RECIPE_WORKER),), purpose="acrobat train")
        try:
            self._ask("ready")  # DyNet's start (its memory pools) is not training time
        except BaseException:
            self.close()
            raise

    def _ask(self, *command: Any) -> Any:
        try:
            return self.worker.ask(command)
        except OutOfMemory as exc:
            raise Unavailable(f"DyNet {exc}") from None

    def _batch(self, trees: list[Tree]) -> tuple[list[Any], list[list[int]]]:
        return [self.encode(self.task.instance(t), self.params) for t in trees], [self.task.labels(t) for t in trees]

    def step(self, batch: list[Tree], times: StepTimes) -> float:
        """One training step on ``batch``; the loss per tree (all-node cross entropy). DyNet's own phase times
        are added to ``times``."""
        loss, forward_ms, backward_ms, update_ms = self._ask("step", *self._batch(batch))
        times.steps += 1
        times.forward_ms += forward_ms
        times.backward_ms += backward_ms
        times.optimizer_ms += update_ms
        return float(loss)

    def grads(self, batch: list[Tree]) -> tuple[float, dict[str, torch.Tensor]]:
        """``(loss per tree, every parameter's gradient as a dense tensor named and shaped as ``params``)``
        of one forward and backward on ``batch``, without an update."""
        loss, grads = self._ask("grads", *self._batch(batch))
        return float(loss), {n: dense_tensor(g, self.shapes[n]) for n, g in grads.items()}

    def weights(self) -> dict[str, torch.Tensor]:
        """The worker's weights now, named and shaped as ``params``."""
        return {n: dense_tensor(a, self.shapes[n]) for n, a in self._ask("weights").items()}

    def accuracy(self, trees: list[Tree]) -> float:
        """Fraction of ``trees`` whose root label is the argmax of DyNet's root logits (no dropout)."""
        pred = self._ask("predict", self._batch(trees)[0], EVAL_BATCH)
        return sum(p == t.label for p, t in zip(pred, trees)) / max(len(trees), 1)

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """The weights to ``path`` (DyNet's format; ``meta`` is in the run's JSON log instead)."""
        self._ask("save", str(path))

    def load(self, path: Path) -> None:
        """The weights ``save`` wrote to ``path``."""
        self._ask("load", str(path))

    def close(self) -> None:
        """End the worker."""
        self.worker.close()

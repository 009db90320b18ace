"""``acrobat train MODEL``: fine-grained SST sentiment training with all-node labels (Socher et al. 2013).

One recipe, several systems computing it (``--system``): acrobat (the
training program run batched on the eager backend, sparse embedding
gradients), PyTorch one instance at a time (the same program called as
plain Python), hand-batched PyTorch (TreeLSTM) and DyNet with autobatching
(when installed; in a worker process, ``acrobat.train_dynet``), each a
``Learner`` starting from the same seeded weights. Each step: a mini-batch of
trees, a cross-entropy loss at every node (summed over nodes, averaged over
trees), backward, an optimizer step (``TrainOptimizer``: Adagrad or Adam,
with the embedding table updated only in the rows used when its gradient
is sparse; DyNet's trainers set to match). Dev accuracy (root
labels, 5 classes) after every epoch (or every ``--eval-every`` steps),
early stopping on it, a checkpoint of the best, and the test accuracy of
that checkpoint. Each run writes ``MODEL-SYSTEM.json`` (its dev-accuracy
curve against training wall time, without evaluation time) and the
checkpoint ``MODEL-SYSTEM.pt`` (DyNet: ``MODEL-dynet.model``, DyNet's own
format) to ``--out``, and redraws ``MODEL-dev-accuracy.png`` from every run of
the model there, so systems' curves lie on one plot.

With ``--ddp`` (under ``torchrun``) each process trains on its shard of
every global batch (``acrobat.ddp``); every process evaluates dev itself
(the weights are the same after each all-reduce, so their early-stopping
decisions agree) and rank 0 writes the files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from acrobat.bench.dynet_models import STRATEGIES
from acrobat.data import load_dataset
from acrobat.data.synthetic import synthetic_trees
from acrobat.data.tree import Tree
from acrobat.models import MODELS
from acrobat.models.train_programs import (birnn_nodes, mvrnn_nodes, sentence_node_labels, tree_node_labels,
                                           treelstm_nodes)
from acrobat.models.treelstm import treelstm_hand_batched_nodes
from acrobat.program import Program

SYSTEMS = ("acrobat", "pytorch", "hand", "dynet")
"""``--system`` choices: acrobat, per-instance PyTorch, hand-batched PyTorch, DyNet."""


@dataclass(frozen=True)
class Task:
    """One trainable model: its all-node program, its instances and node labels, its hand-batched form."""

    name: str
    program: Program  # instance -> list of node logits (C,), the root's last
    instance: Callable[[Tree], Any]
    labels: Callable[[Tree], list[int]]
    hidden: int  # default hidden size
    hand: Callable[[list[Any], nn.Module, float], list[Tensor]] | None = None  # per instance (nodes, C)
    tables: tuple[str, ...] = ("emb",)  # parameters looked up by word id: sparse gradients under sparse_grads


TASKS: dict[str, Task] = {
    "treelstm": Task("treelstm", treelstm_nodes, lambda t: t, tree_node_labels, 150, treelstm_hand_batched_nodes),
    "mvrnn": Task("mvrnn", mvrnn_nodes, lambda t: t, tree_node_labels, 50),
    "birnn": Task("birnn", birnn_nodes, lambda t: t.tokens(), sentence_node_labels, 150),
}


@dataclass
class TrainConfig:
    """The recipe (``acrobat train`` flags). ``lr`` applies to every parameter; ``weight_decay`` to the
    dense ones (a sparse update cannot decay rows it does not touch)."""

    model: str = "treelstm"
    system: str = "acrobat"
    data: str | None = None
    hidden: int | None = None
    batch_size: int = 25
    optimizer: str = "adagrad"
    lr: float = 0.05
    weight_decay: float = 1e-4
    dropout: float = 0.3
    epochs: int = 10
    patience: int = 3
    max_minutes: float = 25.0
    eval_every: int = 0  # steps between dev evaluations; 0: once per epoch
    limit: int | None = None  # train trees used (all when None)
    sparse_grads: bool = True  # acrobat and dynet: sparse embedding gradients and row updates
    dynet_autobatch: int = 1  # dynet: autobatch strategy (1 agenda-based, 2 depth-based)
    seed: int = 0
    threads: int = 0
    out: str = "train-out"
    progress: bool = True
    ddp: bool = False


@dataclass
class Splits:
    train: list[Tree]
    dev: list[Tree]
    test: list[Tree]
    vocab_size: int
    description: str


def load_splits(cfg: TrainConfig) -> Splits:
    """Train, dev and test trees. SST: ``train.txt``/``dev.txt`` (``--data`` or ``../shared/data/sst``) and
    ``test.txt`` when present; without it the test set is the last 10% of train (seeded shuffle), held out.
    Without SST: synthetic trees (seeds 1, 2, 3; uniform labels: accuracy near 20%)."""
    train = load_dataset(cfg.data, split="train")
    if train.source == "synthetic":
        n = cfg.limit or 2000
        trees = [synthetic_trees(k, seed=s) for k, s in ((n, 1), (max(n // 8, 50), 2), (max(n // 8, 50), 3))]
        return Splits(*trees, len(train.vocab), f"synthetic SST-like trees (SST not found): {n} train, "
                      f"{len(trees[1])} dev, {len(trees[2])} test, uniform labels")
    dev = load_dataset(cfg.data, split="dev")
    trees = list(train.trees)
    try:
        test = load_dataset(cfg.data, split="test").trees
        where = "test.txt"
    except FileNotFoundError:
        random.Random(1234).shuffle(trees)
        cut = len(trees) - len(trees) // 10
        trees, test = trees[:cut], trees[cut:]
        where = f"{len(test)} train trees held out (no test.txt beside train.txt)"
    if cfg.limit:
        trees = trees[:cfg.limit]
    return Splits(trees, dev.trees, test, len(train.vocab),
                  f"SST: {len(trees)} train, {len(dev.trees)} dev, test: {where}")


class TrainOptimizer:
    """The user's optimizer (``adagrad``: ``torch.optim.Adagrad``, ``adam``: ``Adam``) for dense gradients,
    and for parameters whose gradient is sparse (embedding tables under ``sparse_grads``) one that updates
    only the rows in it: Adagrad's sparse path (the same update, as untouched rows' dense update is zero)
    or ``SparseAdam`` (lazy Adam: moments of untouched rows are not decayed). Which parameters are sparse
    is read from their gradients at the first ``step``.

    Raises:
        ValueError: an unknown optimizer name.
    """

    NAMES = ("adagrad", "adam")

    def __init__(self, params: nn.Module, name: str, lr: float, weight_decay: float):
        if name not in self.NAMES:
            raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(self.NAMES)}")
        self.params, self.name, self.lr, self.weight_decay = params, name, lr, weight_decay
        self.parts: list[torch.optim.Optimizer] = []

    def _make(self) -> None:
        ps = [p for p in self.params.parameters() if p.requires_grad]
        sparse = [p for p in ps if p.grad is not None and p.grad.is_sparse]
        dense = [p for p in ps if not any(p is s for s in sparse)]
        dense_cls = torch.optim.Adagrad if self.name == "adagrad" else torch.optim.Adam
        if dense:
            self.parts.append(dense_cls(dense, lr=self.lr, weight_decay=self.weight_decay))
        if sparse:
            sparse_cls = torch.optim.Adagrad if self.name == "adagrad" else torch.optim.SparseAdam
            self.parts.append(sparse_cls(sparse, lr=self.lr))

    def step(self) -> None:
        if not self.parts:
            self._make()
        with torch.sparse.check_sparse_tensor_invariants(enable=False):  # the gradients autograd made are valid
            for opt in self.parts:
                opt.step()

    def zero_grad(self) -> None:
        self.params.zero_grad(set_to_none=True)


class Unavailable(Exception):
    """A system that cannot run this recipe here, with the reason."""


def node_logits_fn(task: Task, system: str, params: nn.Module, sparse_grads: bool) -> Callable[[list[Tree]], Tensor]:
    """``fn(trees) -> (nodes, C)``: every node's logits of a batch in training mode (dropout ``params.dropout``),
    in the order of ``task.labels`` of each tree in turn, computed by ``system``.

    Raises:
        Unavailable: no hand-batched version of the model.
        ValueError: an unknown system, or ``dynet`` (its logits stay in its worker).
    """
    if system == "acrobat":
        return lambda trees: torch.stack([x for o in task.program.run([task.instance(t) for t in trees], params,
                                                                      backend="eager-accum", sparse_grads=sparse_grads)
                                          for x in o])
    if system == "pytorch":
        return lambda trees: torch.stack([x for t in trees for x in task.program(task.instance(t), params)])
    if system == "hand":
        hand = task.hand
        if hand is None:
            raise Unavailable(f"no hand-batched all-node version of {task.name} (only treelstm has one)")
        return lambda trees: torch.cat(hand([task.instance(t) for t in trees], params, params.dropout))
    if system == "dynet":
        raise ValueError("DyNet computes the logits in its worker (acrobat.train_dynet.DynetLearner)")
    raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")


def root_accuracy(task: Task, system: str, params: nn.Module, trees: list[Tree], batch_size: int = 64) -> float:
    """Fraction of ``trees`` whose root label is the argmax of its logits (no dropout, no grad)."""
    was, params.dropout = params.dropout, 0.0
    correct = 0
    try:
        with torch.no_grad():
            for i in range(0, len(trees), batch_size):
                batch = trees[i:i + batch_size]
                insts = [task.instance(t) for t in batch]
                if system == "acrobat":
                    roots = [o[-1] for o in task.program.run(insts, params)]
                elif system == "hand":
                    roots = [o[-1] for o in task.hand(insts, params, 0.0)]  # type: ignore[misc]
                else:
                    roots = [task.program(x, params)[-1] for x in insts]
                pred = torch.stack(roots).argmax(-1)
                correct += int((pred == torch.tensor([t.label for t in batch])).sum())
    finally:
        params.dropout = was
    return correct / max(len(trees), 1)


def make_params(task: Task, vocab_size: int, cfg: TrainConfig) -> nn.Module:
    """The model's parameters (random init, seeded), with ``dropout`` set."""
    params = MODELS[task.name].make_params(vocab_size, cfg.hidden or task.hidden, cfg.seed)
    params.dropout = cfg.dropout
    return params


@dataclass
class StepTimes:
    """Per-step wall time split, summed over the steps of a run, in ms."""

    steps: int = 0
    forward_ms: float = 0.0  # forward and loss
    backward_ms: float = 0.0
    optimizer_ms: float = 0.0

    def per_step(self) -> dict[str, float]:
        n = max(self.steps, 1)
        return {"forward_ms": self.forward_ms / n, "backward_ms": self.backward_ms / n,
                "optimizer_ms": self.optimizer_ms / n}


class Learner(Protocol):
    """What ``train`` asks of a system: a step, an accuracy, a checkpoint. ``TorchLearner`` (acrobat,
    pytorch, hand) and ``acrobat.train_dynet.DynetLearner`` (DyNet, in a worker process)."""

    suffix: str  # the checkpoint file's suffix

    def step(self, batch: list[Tree], times: StepTimes) -> float | None:
        """One training step on ``batch``; the loss per tree (None when this process had no trees)."""

    def accuracy(self, trees: list[Tree]) -> float:
        """Root accuracy on ``trees`` (no dropout)."""

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """A checkpoint of the weights (and ``meta``, where the format holds it) to ``path``."""

    def load(self, path: Path) -> None:
        """The weights of the checkpoint at ``path``."""

    def close(self) -> None:
        """Release what the system holds (a worker process)."""


class TorchLearner:
    """The recipe on PyTorch (``Learner``): ``system`` acrobat, pytorch or hand computes the node logits
    (``node_logits_fn``), then the loss, autograd's backward and ``TrainOptimizer``; under ``ddp`` on this
    process's shard.

    Raises:
        Unavailable: no hand-batched version of the model.
    """

    suffix = ".pt"

    def __init__(self, task: Task, cfg: TrainConfig, params: nn.Module, ddp: Any = None) -> None:
        self.task, self.system, self.params, self.ddp = task, cfg.system, params, ddp
        self.logits_fn = node_logits_fn(task, cfg.system, params, cfg.sparse_grads)
        if ddp is not None:
            sparse = [getattr(params, n) for n in task.tables] if cfg.system == "acrobat" and cfg.sparse_grads else []
            self.logits_fn = ddp.wrap(params, self.logits_fn, sparse)
        self.opt = TrainOptimizer(params, cfg.optimizer, cfg.lr, cfg.weight_decay)

    def step(self, batch: list[Tree], times: StepTimes) -> float | None:
        return _step(batch, self.task, self.logits_fn, self.opt, times, self.ddp)

    def accuracy(self, trees: list[Tree]) -> float:
        return root_accuracy(self.task, self.system, self.params, trees)

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        torch.save({"state_dict": self.params.state_dict(), **meta}, path)

    def load(self, path: Path) -> None:
        self.params.load_state_dict(torch.load(path, weights_only=False)["state_dict"])

    def close(self) -> None:
        pass


def make_learner(task: Task, cfg: TrainConfig, params: nn.Module, ddp: Any = None) -> Learner:
    """The ``Learner`` of ``cfg.system`` starting from ``params``.

    Raises:
        Unavailable: the system cannot run the recipe here (DyNet not installed; DyNet under ``--ddp``).
    """
    if cfg.system != "dynet":
        return TorchLearner(task, cfg, params, ddp)
    if ddp is not None:
        raise Unavailable("--ddp trains the PyTorch systems only (DyNet has its own multi-process training)")
    from acrobat.train_dynet import DynetLearner  # imports acrobat.bench's DyNet harness (not DyNet)

    return DynetLearner(task, cfg, params)


def train(cfg: TrainConfig) -> dict:
    """Run the recipe ``cfg`` and return its log (also written to ``cfg.out``; see the module docstring).

    Raises:
        ValueError: unknown model, system or optimizer.
        Unavailable: the system cannot run the recipe here.
    """
    if cfg.model not in TASKS:
        raise ValueError(f"acrobat train supports {', '.join(TASKS)}; got {cfg.model!r}")
    task = TASKS[cfg.model]
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    ddp = None
    if cfg.ddp:
        from acrobat.ddp import DDPTrainer

        ddp = DDPTrainer.from_env()
    splits = load_splits(cfg)
    params = make_params(task, splits.vocab_size, cfg)
    learner = make_learner(task, cfg, params, ddp)
    try:
        return _train(cfg, splits, params, learner, ddp)
    finally:
        learner.close()


def _train(cfg: TrainConfig, splits: Splits, params: nn.Module, learner: Learner, ddp: Any) -> dict:
    """``train``'s loop: epochs of steps, evaluations, early stopping, the best checkpoint's test accuracy."""
    lead = ddp is None or ddp.rank == 0
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{cfg.model}-{cfg.system}" + (f"-ddp{ddp.world}" if ddp is not None else "")
    ckpt = out / f"{stem}{learner.suffix}"
    if lead:
        print(f"{stem}: {splits.description}; {sum(p.numel() for p in params.parameters())} parameters; "
              f"{cfg.optimizer} lr {cfg.lr}, batch {cfg.batch_size}, dropout {cfg.dropout}, "
              f"torch threads {torch.get_num_threads()}", flush=True)
    rng = random.Random(cfg.seed)
    log: dict[str, Any] = {"model": cfg.model, "system": cfg.system, "config": asdict(cfg),
                           "data": splits.description, "curve": []}
    times = StepTimes()
    best, best_epoch, bad_evals, step, train_s = -1.0, 0, 0, 0, 0.0
    stop = False
    for epoch in range(1, cfg.epochs + 1):
        order = list(splits.train)
        rng.shuffle(order)
        batches = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
        bar = tqdm(batches, desc=f"epoch {epoch}", disable=not (cfg.progress and lead), unit="step",
                   dynamic_ncols=True, file=sys.stderr)
        running, t_epoch = None, time.perf_counter()
        with (ddp.join() if ddp is not None else contextlib.nullcontext()):
            for batch in bar:
                t0 = time.perf_counter()
                loss = learner.step(batch, times)
                train_s += time.perf_counter() - t0
                step += 1
                if loss is not None:
                    running = loss if running is None else 0.95 * running + 0.05 * loss
                bar.set_postfix(loss=f"{running or 0:.3f}", steps_s=f"{bar.n / max(time.perf_counter() - t_epoch, 1e-9):.2f}")
                if train_s > cfg.max_minutes * 60 and ddp is None:  # under DDP: checked at the epoch's end
                    stop = True
                    break
                if cfg.eval_every and step % cfg.eval_every == 0 and ddp is None:
                    best, best_epoch, bad_evals = _evaluate(learner, cfg, splits, log, epoch, step, train_s,
                                                            best, best_epoch, bad_evals, ckpt, lead)
        bar.close()
        if ddp is not None:
            ddp.barrier()
            if len(batches[-1]) < ddp.world:  # a process skipped the last step: rank 0's state for all
                assert isinstance(learner, TorchLearner)
                ddp.sync_from_lead(params, learner.opt.parts)
        if not cfg.eval_every or ddp is not None:
            best, best_epoch, bad_evals = _evaluate(learner, cfg, splits, log, epoch, step, train_s, best,
                                                    best_epoch, bad_evals, ckpt, lead)
        stop = stop or bad_evals >= cfg.patience or train_s > cfg.max_minutes * 60
        if ddp is not None:
            stop = ddp.agree(stop)  # rank 0's decision, so every process leaves the loop together
        if stop:
            break
    if not log["curve"] or log["curve"][-1]["step"] != step:  # steps since the last evaluation: evaluate them
        best, best_epoch, bad_evals = _evaluate(learner, cfg, splits, log, epoch, step, train_s, best,
                                                best_epoch, bad_evals, ckpt, lead)
    if ddp is not None:
        ddp.barrier()
    learner.load(ckpt)
    test = learner.accuracy(splits.test)
    log.update(best_dev=best, best_epoch=best_epoch, test_accuracy=test, steps=step, train_s=train_s,
               steps_per_s=step / max(train_s, 1e-9), step_ms=times.per_step(), checkpoint=str(ckpt))
    if ddp is not None:
        log["ddp"] = ddp.describe()
        log["step_ms"].update({k: v for k, v in log["ddp"].items() if k.endswith("_ms")})
    if lead:
        (out / f"{stem}.json").write_text(json.dumps(log, indent=1))
        plot_curves(out, cfg.model)
        print(f"{stem}: best dev {best:.4f} (epoch {best_epoch}); test {test:.4f} of that checkpoint; "
              f"{step} steps in {train_s / 60:.1f} min of training ({log['steps_per_s']:.2f} steps/s); per step "
              + ", ".join(f"{k[:-3]} {v:.1f} ms" for k, v in log["step_ms"].items()), flush=True)
    if ddp is not None:
        ddp.close()
    return log


def _step(batch: list[Tree], task: Task, logits_fn: Callable, opt: TrainOptimizer, times: StepTimes,
          ddp: Any) -> float | None:
    """One training step on ``batch`` (the global batch under DDP, of which this process takes its shard);
    the loss per tree, or None when this process had no trees."""
    t0 = time.perf_counter()
    if ddp is not None:
        batch, scale = ddp.shard(batch)
        if not batch:
            return None
    else:
        scale = 1.0 / len(batch)
    labels = torch.tensor([y for t in batch for y in task.labels(t)])
    loss = F.cross_entropy(logits_fn(batch), labels, reduction="sum") * scale
    t1 = time.perf_counter()
    loss.backward()
    t3 = time.perf_counter()
    opt.step()
    opt.zero_grad()
    t4 = time.perf_counter()
    times.steps += 1
    times.forward_ms += (t1 - t0) * 1e3
    times.backward_ms += (t3 - t1) * 1e3
    times.optimizer_ms += (t4 - t3) * 1e3
    if ddp is not None:
        ddp.account((t1 - t0) * 1e3)
    return float(loss.detach()) / (scale * len(batch))


def _evaluate(learner: Learner, cfg: TrainConfig, splits: Splits, log: dict, epoch: int, step: int,
              train_s: float, best: float, best_epoch: int, bad_evals: int, ckpt: Path,
              lead: bool) -> tuple[float, int, int]:
    """Dev accuracy now; a checkpoint when it is the best; (best, its epoch, evaluations since it)."""
    acc = learner.accuracy(splits.dev)
    log["curve"].append({"epoch": epoch, "step": step, "train_s": train_s, "dev_accuracy": acc})
    if lead:
        tqdm.write(f"epoch {epoch} step {step}: dev accuracy {acc:.4f} after {train_s / 60:.1f} min of training",
                   file=sys.stderr)
    if acc > best:
        if lead:
            learner.save(ckpt, {"model": cfg.model, "system": cfg.system, "epoch": epoch, "step": step,
                                "dev_accuracy": acc, "config": asdict(cfg)})
        return acc, epoch, 0
    return best, best_epoch, bad_evals + 1


def plot_curves(out: Path, model: str) -> Path | None:
    """``MODEL-dev-accuracy.png`` in ``out``: dev accuracy against training minutes of every run log of
    ``model`` there; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path in sorted(out.glob(f"{model}-*.json")):
        run = json.loads(path.read_text())
        xs = [p["train_s"] / 60 for p in run["curve"]]
        ys = [100 * p["dev_accuracy"] for p in run["curve"]]
        label = f"{path.stem.split('-', 1)[1]} (test {100 * run['test_accuracy']:.1f}%)"
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel("training wall time, minutes (evaluation excluded)")
    ax.set_ylabel("dev accuracy, % (fine-grained, root)")
    ax.set_title(f"{model} on SST, all-node loss")
    ax.grid(alpha=0.3)
    ax.legend()
    png = out / f"{model}-dev-accuracy.png"
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def add_parser(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    """Add the ``train`` subparser to the ``acrobat`` command's subparsers."""
    d = TrainConfig()
    p = sub.add_parser("train", help="train a tree or sequence model on SST (all-node labels), dev accuracy per "
                                     "epoch, early stopping, test accuracy of the best checkpoint",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=list(TASKS))
    p.add_argument("--system", default=d.system, choices=SYSTEMS,
                   help="who computes the recipe: acrobat (batched, eager backend), pytorch (one instance at a "
                        "time), hand (hand-batched, treelstm), dynet (DyNet with autobatching, in a worker "
                        "process; needs DyNet: scripts/install-dynet.sh); default acrobat")
    p.add_argument("--data", help="SST folder with train.txt, dev.txt (and test.txt) (default: ../shared/data/sst "
                   "if present, else synthetic trees)")
    p.add_argument("--hidden", type=int, help="hidden size (default: treelstm 150, birnn 150, mvrnn 50)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=f"trees per step (default {d.batch_size})")
    p.add_argument("--optimizer", default=d.optimizer, choices=TrainOptimizer.NAMES, help="default adagrad")
    p.add_argument("--lr", type=float, default=d.lr, help=f"learning rate (default {d.lr})")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay,
                   help=f"L2 of the dense parameters (default {d.weight_decay})")
    p.add_argument("--dropout", type=float, default=d.dropout, help=f"dropout rate (default {d.dropout})")
    p.add_argument("--epochs", type=int, default=d.epochs, help=f"at most this many epochs (default {d.epochs})")
    p.add_argument("--patience", type=int, default=d.patience,
                   help=f"stop after this many evaluations without a better dev accuracy (default {d.patience})")
    p.add_argument("--max-minutes", type=float, default=d.max_minutes,
                   help=f"stop after this much training time (default {d.max_minutes})")
    p.add_argument("--eval-every", type=int, default=0, help="evaluate on dev every N steps (default, and with "
                   "--ddp: each epoch)")
    p.add_argument("--limit", type=int, help="use only the first N training trees")
    p.add_argument("--dense-grads", action="store_true",
                   help="acrobat and dynet: dense embedding gradients and whole-table updates, the table decayed "
                        "(as plain PyTorch)")
    p.add_argument("--dynet-autobatch", type=int, default=d.dynet_autobatch, choices=sorted(STRATEGIES),
                   help="dynet: autobatch strategy, " + ", ".join(f"{k} {v}" for k, v in STRATEGIES.items())
                        + f" (default {d.dynet_autobatch})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--out", default=d.out, help=f"folder for logs, checkpoints and the plot (default {d.out})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--ddp", action="store_true", help="data-parallel over the processes torchrun starts (gloo on "
                   "CPU): torchrun --standalone --nproc_per_node=2 -m acrobat train treelstm --ddp")
    p.set_defaults(func=cmd_train)
    return p


def cmd_train(args: argparse.Namespace) -> int:
    """Run ``acrobat train``; exit 3 when the system cannot run here (the reason on stderr)."""
    cfg = TrainConfig(model=args.model, system=args.system, data=args.data, hidden=args.hidden,
                      batch_size=args.batch_size, optimizer=args.optimizer, lr=args.lr,
                      weight_decay=args.weight_decay, dropout=args.dropout, epochs=args.epochs,
                      patience=args.patience, max_minutes=args.max_minutes, eval_every=args.eval_every,
                      limit=args.limit, sparse_grads=not args.dense_grads, dynet_autobatch=args.dynet_autobatch,
                      seed=args.seed, threads=args.threads,
                      out=args.out, progress=not args.no_progress, ddp=args.ddp)
    if cfg.batch_size < 1 or cfg.epochs < 1 or not (0.0 <= cfg.dropout < 1.0) or cfg.lr <= 0 or \
            not math.isfinite(cfg.lr):
        raise ValueError("--batch-size and --epochs must be at least 1, --dropout in [0, 1), --lr positive")
    try:
        train(cfg)
    except Unavailable as exc:
        print(f"{cfg.model} with --system {cfg.system}: not available: {exc}", file=sys.stderr)
        return 3
    return 0

"""The Ray Serve deployment that serves an acrobat program: requests batched by ``@serve.batch``, run by ``run``.

Requests arrive one at a time, over HTTP (``POST`` a JSON instance, see
``acrobat.serve.servable``) or through the Python handle
(``handle.infer.remote(instance)``). Each is decoded and checked on its own
first, so a bad request gets its own 4xx answer and never enters a batch.
Ray Serve's ``@serve.batch`` collects the requests that arrive within
``batch_wait_timeout_s`` of the first (at most ``max_batch_size``) into one
call of the batched handler, which runs ``program.run(instances, *params)``
on the compiled backend under ``torch.inference_mode`` in a worker thread
(the replica's event loop keeps taking requests meanwhile): acrobat batches
inside and across the trees of the batch (§4).

``@serve.batch`` closes a batch by its time window and hands it over even
while the previous one still runs, so under load it makes many small
batches that queue behind each other (measured on 2 cores at 250 req/s:
3.3 requests a batch, 130 ms queueing). The handler therefore queues its
batch for one run loop, which, whenever the worker thread is free, merges
every batch waiting into one ``program.run`` of at most ``max_batch_size``
instances: batches grow with the load, and a request arriving at an idle
server waits only ``batch_wait_timeout_s``.

If the batched run raises, the batch is split in halves and each half run
again, down to the requests that fail alone: those get a 500 naming the
model's error, the others their results.

A replica compiles and tunes its kernels in its constructor, before Ray
Serve counts it ready: it runs synthetic batches of every size class up to
``max_batch_size`` until the backend's per-block choices (gather mode,
threads per launch) are made (``Backend.tuned``), so no request pays for a
compile or a trial.

``runner="per-instance"`` serves the same program the plain way, one
``program(instance, *params)`` call per request of a collected batch: the
baseline of the load test, on the same stack.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence

import torch
import torch.utils._pytree as pytree
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

from acrobat.runtime.stats import RunStats
from acrobat.serve.servable import RequestError, ServableFactory, json_bytes, to_json

log = logging.getLogger("acrobat.serve")

Runner = Literal["acrobat", "per-instance"]


@dataclass(frozen=True)
class ServeOptions:
    """How a deployment batches and runs requests.

    - ``max_batch_size``: most requests in one ``program.run`` call;
    - ``batch_wait_timeout_s``: how long (s) the first request of a batch waits for more;
    - ``num_replicas``: Ray Serve replicas, each a process with its own compiled kernels;
    - ``runner``: ``"acrobat"`` (``program.run`` on the batch) or ``"per-instance"`` (one plain
      ``program(instance)`` call per request: the baseline);
    - ``backend``: acrobat's backend for ``run`` (default ``"compiled"``: TorchInductor kernels);
    - ``threads``: torch threads in a replica (default 1: on a small machine the HTTP ingress and the
      clients need the other cores; the compiled backend still picks 1 or all per block and launch size);
    - ``max_ongoing_requests``: requests a replica holds at once, queued ones included (at least
      ``max_batch_size``; default 8 batches);
    - ``warmup_runs`` / ``warmup_s``: caps on the warm-up (runs, seconds), which otherwise stops when the
      backend is tuned; ``num_cpus``: Ray CPUs each replica reserves.

    Raises:
        ValueError: a value out of range (the message says which).
    """

    max_batch_size: int = 32
    batch_wait_timeout_s: float = 0.002
    num_replicas: int = 1
    runner: Runner = "acrobat"
    backend: str = "compiled"
    threads: int = 1
    max_ongoing_requests: int | None = None
    warmup_runs: int = 400
    warmup_s: float = 120.0
    num_cpus: float = 1.0

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {self.max_batch_size}")
        if self.batch_wait_timeout_s < 0:
            raise ValueError(f"batch_wait_timeout_s must be >= 0 s, got {self.batch_wait_timeout_s}")
        if self.num_replicas < 1:
            raise ValueError(f"num_replicas must be at least 1, got {self.num_replicas}")
        if self.runner not in ("acrobat", "per-instance"):
            raise ValueError(f"runner must be 'acrobat' or 'per-instance', got {self.runner!r}")
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, got {self.threads}")
        if self.max_ongoing_requests is not None and self.max_ongoing_requests < self.max_batch_size:
            raise ValueError(f"max_ongoing_requests ({self.max_ongoing_requests}) must be at least "
                             f"max_batch_size ({self.max_batch_size}), or batches never fill")

    @property
    def ongoing(self) -> int:
        """``max_ongoing_requests``, or its default of 8 batches."""
        return self.max_ongoing_requests or 8 * self.max_batch_size


MAX_COLLECTED = 4096
"""Batches ``@serve.batch`` may hand over at once (they queue for the runner, which merges them)."""


@dataclass
class _Collected:
    """A batch ``@serve.batch`` handed over: its instances, their arrival times, its outcomes' future."""

    instances: list[Any]
    arrived: list[float]
    done: asyncio.Future


@dataclass
class Outcome:
    """One request's answer from its batch: the program's result or the exception its instance raised,
    and where the time went (ms): waiting in the replica for its batch to start, and the batch's run."""

    result: Any = None
    error: Exception | None = None
    batch_size: int = 0
    batch: int = 0  # the batch's serial number in its replica
    queue_ms: float = 0.0
    compute_ms: float = 0.0

    def server(self) -> dict[str, Any]:
        """The response's ``server`` field: replica pid, batch size and serial, queue and compute ms."""
        return {"replica": os.getpid(), "batch_size": self.batch_size, "batch": self.batch,
                "queue_ms": round(self.queue_ms, 3), "compute_ms": round(self.compute_ms, 3)}


class ProgramServer:
    """A Ray Serve replica serving one acrobat program (module docstring); deploy it with :func:`application`.

    ``POST /`` with one instance as JSON answers ``{"result": ..., "server": {...}}`` (the program's
    result as nested lists; the batch it ran in and its queue/compute ms); errors answer
    ``{"error": kind, "message": ...}`` with status 400/413/422 (the request) or 500 (the model raised
    on it). ``GET /`` describes the model and the request format. ``infer(instance)`` is the Python
    handle's call: the result as tensors.
    """

    def __init__(self, factory: ServableFactory, options: ServeOptions):
        torch.set_num_threads(options.threads)
        self.servable = factory()
        self.options = options
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="acrobat-run")  # runs take turns on the backend
        self._serial = 0
        self._collected: deque[_Collected] = deque()  # batches Ray Serve collected, waiting for the runner
        self._wakeup = asyncio.Event()
        self._runner: asyncio.Task | None = None
        self.served = RunStats()  # the batched runs of requests (not the warm-up's): compiles should stay 0
        self._run_cpu_s = 0.0  # CPU time of the worker thread's runs (the rest of the replica's is request handling)
        self._batch.set_max_batch_size(options.max_batch_size)
        self._batch.set_batch_wait_timeout_s(options.batch_wait_timeout_s)
        self.warmup = self._warm_up() if options.runner == "acrobat" else {"runs": 0, "seconds": 0.0, "tuned": True}

    def _warm_up(self) -> dict[str, Any]:
        """Compile and tune before serving: synthetic batches of sizes ``max_batch_size``, its halves, ... 1,
        by turns, until the backend is tuned (at least two rounds; at most ``warmup_runs`` runs and
        ``warmup_s`` seconds). Returns what it did: runs, seconds, tuned."""
        o = self.options
        sizes = [o.max_batch_size >> k for k in range(o.max_batch_size.bit_length())]
        pool = self.servable.synthetic(4 * o.max_batch_size, seed=1)
        be, _ = self.servable.program.backend(o.backend, len(self.servable.params))
        t0, runs = time.perf_counter(), 0
        with torch.inference_mode():
            while runs < o.warmup_runs and time.perf_counter() - t0 < o.warmup_s:
                n = sizes[runs % len(sizes)]
                start = runs * 7 % (len(pool) - n + 1)
                self.servable.program.run(pool[start:start + n], *self.servable.params, backend=o.backend)
                runs += 1
                if runs >= 2 * len(sizes) and be.tuned():
                    break
        done = {"runs": runs, "seconds": round(time.perf_counter() - t0, 2), "tuned": be.tuned()}
        log.warning("acrobat serve: %s warmed up: %d runs in %.1f s%s", self.servable.name, runs, done["seconds"],
                    "" if done["tuned"] else " (stopped at the cap before every block was tuned)")
        return done

    async def __call__(self, request: Request) -> Response:
        if request.method == "GET":
            return _json(self.describe())
        if request.method != "POST":
            return _json({"error": "bad_method", "message": f"{request.method} is not served: POST "
                          f"{self.servable.usage()}"}, 405)
        arrived = time.perf_counter()
        try:
            instance = self.servable.decode(await request.body())
        except RequestError as exc:
            return _json(exc.body(), exc.status)
        out: Outcome = await self._batch(instance, arrived)
        if out.error is not None:
            err = RequestError.from_model(out.error)
            return _json({**err.body(), "server": out.server()}, err.status)
        return _json({"result": to_json(out.result), "server": out.server()})

    async def infer(self, instance: Any) -> Any:
        """The program's result for one instance (a Tree, or a list of word ids), batched with the other
        requests; tensors as ``program(instance, *params)`` returns them.

        Raises:
            RequestError: the instance is not of the program's input type, too large or has a word id
                outside the vocabulary (``Servable.validate``: 4xx), or the model raised on it (500).
        """
        self.servable.validate(instance)
        out: Outcome = await self._batch(instance, time.perf_counter())
        if out.error is not None:
            raise RequestError.from_model(out.error) from None
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, out.result)

    def describe(self) -> dict[str, Any]:
        """The model, its request format, the batching options, the warm-up and what serving ran so far:
        batches, batched runs, kernel compiles in them and the CPU seconds the runs took (the worker thread's;
        the rest of the replica's CPU goes to taking and answering requests) (the ``GET /`` answer)."""
        return {"model": self.servable.name, "description": self.servable.description,
                "request": self.servable.usage(), "options": asdict(self.options), "warmup": self.warmup,
                "served": {"batches": self._serial, "runs": self.served.runs, "compiles": self.served.compiles,
                           "run_cpu_s": round(self._run_cpu_s, 4)},
                "replica": os.getpid()}

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002, max_concurrent_batches=MAX_COLLECTED)
    async def _batch(self, instances: list[Any], arrived: list[float]) -> list[Outcome]:
        """A batch Ray Serve collected (sizes set from the options in ``__init__``): queued for the runner,
        which merges it with the batches collected while the previous run was going on."""
        batch = _Collected(instances, arrived, asyncio.get_running_loop().create_future())
        self._collected.append(batch)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run_collected())
        self._wakeup.set()
        return await batch.done

    async def _run_collected(self) -> None:
        """The one run loop: whenever the worker thread is free, run every collected batch waiting, oldest
        first, as one ``program.run`` of at most ``max_batch_size`` instances (a batch is never split)."""
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._collected:
                group = [self._collected.popleft()]
                size = len(group[0].instances)
                while self._collected and size + len(self._collected[0].instances) <= self.options.max_batch_size:
                    group.append(self._collected.popleft())
                    size += len(group[-1].instances)
                instances = [x for b in group for x in b.instances]
                start = time.perf_counter()
                outcomes = iter(await loop.run_in_executor(self._pool, self._run, instances))
                compute_ms = (time.perf_counter() - start) * 1e3
                self._serial += 1
                for b in group:
                    mine = [next(outcomes) for _ in b.instances]
                    for o, t in zip(mine, b.arrived):
                        o.batch_size, o.batch, o.queue_ms, o.compute_ms = size, self._serial, (start - t) * 1e3, compute_ms
                    if not b.done.done():  # its requests may have been cancelled
                        b.done.set_result(mine)

    def _run(self, instances: list[Any]) -> list[Outcome]:
        cpu = time.thread_time()
        try:
            with torch.inference_mode():
                if self.options.runner == "per-instance":
                    return [self._isolated(x) for x in instances]
                return self._bisect(instances)
        finally:
            self._run_cpu_s += time.thread_time() - cpu

    def _bisect(self, instances: Sequence[Any]) -> list[Outcome]:
        """``program.run`` on the batch; if it raises, on each half, down to the instances that fail alone."""
        s = self.servable
        try:
            results = s.program.run(list(instances), *s.params, backend=self.options.backend, stats=self.served)
            return [Outcome(r) for r in results]
        except Exception as exc:  # noqa: BLE001 - one request's failure is answered, never the replica's
            if len(instances) == 1:
                log.warning("acrobat serve: %s failed on a request: %s", s.name, exc)
                return [Outcome(error=exc)]
        mid = len(instances) // 2
        return self._bisect(instances[:mid]) + self._bisect(instances[mid:])

    def _isolated(self, instance: Any) -> Outcome:
        try:
            return Outcome(self.servable.program(instance, *self.servable.params))
        except Exception as exc:  # noqa: BLE001 - as in _bisect
            return Outcome(error=exc)


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(json_bytes(body), status_code=status, media_type="application/json")


def application(factory: ServableFactory, options: ServeOptions = ServeOptions(), name: str = "ProgramServer"
                ) -> serve.Application:
    """The Ray Serve application of ``factory``'s program: ``serve.run(application(...))`` deploys it.

    ``factory`` (picklable, e.g. ``acrobat.serve.PaperModel("treelstm")``) builds the Servable in each
    replica; ``options`` set batching, replicas and the runner. ``name`` names the deployment.
    """
    deployment = serve.deployment(ProgramServer, name=name, num_replicas=options.num_replicas,
                                  max_ongoing_requests=options.ongoing, graceful_shutdown_wait_loop_s=0.2,
                                  graceful_shutdown_timeout_s=5.0,
                                  ray_actor_options={"num_cpus": options.num_cpus})
    return deployment.bind(factory, options)

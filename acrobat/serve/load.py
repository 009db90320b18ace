"""The serving load test: Poisson arrivals at a swept request rate against two servers on one Ray Serve stack.

    acrobat bench --serve [MODEL] [--rates 50,100,...] [--step-seconds 5] [--slo-ms 50] [--data PATH] [--out DIR]
    python scripts/serve_load.py [--model treelstm] ...        (the same run, as a script)

One local Ray cluster (``acrobat.serve.cluster``) serves the model twice, side by side on the same
stack: ``per-instance`` runs the plain per-instance PyTorch program on each request as it comes
(``ServeOptions(runner="per-instance", max_batch_size=1)``), ``acrobat`` runs each batch that
``@serve.batch`` collects through ``program.run``. A client in this process (asyncio + aiohttp, over
loopback) sends SST trees (the dev split, or ``--data``; synthetic SST-like trees when there is none)
at exponentially spaced times, rate by rate; at each rate the two servers take turns (their order
alternates), so machine noise hits both. A step stops by itself: ``step_s`` seconds of arrivals (at
most ``max_requests``), then every answer or a ``timeout_s`` timeout. Latency runs from a request's
scheduled arrival to its answer (a client that falls behind counts against the server, no coordinated
omission). Every answer is checked against the per-instance result of its tree, computed here first.

A server *holds* a rate when every request got an exact answer and the p99 latency is at most the SLO
in one of ``tries`` steps at that rate (on a shared machine another user's burst can spoil one step);
a server stops climbing after two rates it did not hold; then the gap between its highest held rate and
the next missed one is bisected (geometrically) ``refine`` times. Last, each server's capacity: a
closed-loop step with ``in_flight`` requests always outstanding (each answer sends the next), whose
answers per second are what it can serve on the CPU it got (no timeouts, unlike an open-loop
overload). The headline is each server's highest held rate and their
ratio, and their capacities. CPU is read from /proc (psutil) per group of processes: each server's
replica, the ingress (HAProxy or Ray's proxy), the rest of Ray (raylet, GCS, controller, agents) and
this client; first over ``idle_s`` seconds without traffic (what Ray costs doing nothing), then per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
import torch

from acrobat.bench.compare import outputs_equal
from acrobat.data import load_dataset
from acrobat.data.sst import format_tree
from acrobat.serve.command import RATES
from acrobat.serve.servable import PaperModel, RequestError, Servable

SERVERS = ("per-instance", "acrobat")
GROUPS = ("replica:per-instance", "replica:acrobat", "ingress", "ray", "client")
"""CPU groups: each server's replica, the HTTP ingress, the rest of Ray, this client (the driver)."""


@dataclass
class LoadSettings:
    """One load test: the model and data, the rates and step bounds, the SLO, the servers' batching."""

    model: str = "treelstm"
    data: str | None = None
    split: str = "dev"
    size: str = "small"
    seed: int = 0
    rates: tuple[float, ...] = RATES
    step_s: float = 5.0
    max_requests: int = 4000
    timeout_s: float = 5.0
    slo_ms: float = 50.0
    refine: int = 2
    tries: int = 1
    in_flight: int = 64  # requests always outstanding in the closing capacity step (0: none)
    idle_s: float = 5.0
    max_batch_size: int = 32
    batch_wait_ms: float = 2.0
    threads: int = 1
    ingress: str = "haproxy"
    trees: int = 1101  # at most this many trees of the split are sent (cycled)

    def __post_init__(self) -> None:
        if not self.rates or min(self.rates) <= 0:
            raise ValueError("--rates: give positive request rates, e.g. 50,100,200")
        if self.step_s <= 0 or self.timeout_s <= 0 or self.slo_ms <= 0:
            raise ValueError("--step-seconds, --timeout-s and --slo-ms must be positive")
        if self.max_requests < 1 or self.refine < 0 or self.tries < 1 or self.in_flight < 0:
            raise ValueError("--max-requests and --tries must be at least 1, --refine and --in-flight at least 0")


@dataclass
class Step:
    """One server at one offered rate: what the client saw and what the server reported."""

    server: str
    rate: float  # offered, requests/s
    sent: int
    ok: int  # status 200 and exact
    errors: int  # a non-200 status, a timeout or a connection error
    inexact: int  # status 200 but the result differs from the per-instance one
    duration_s: float  # first scheduled arrival to last answer
    latency_ms: list[float] = field(repr=False)  # per request, sorted; a failed request counts with its time
    queue_ms: list[float] = field(repr=False)  # per answered request: waiting in the replica for its batch
    compute_ms: list[float] = field(repr=False)  # per answered request: its batch's run
    batch_sizes: dict[int, int] = field(default_factory=dict)  # batch size -> batches
    cpu: dict[str, float] = field(default_factory=dict)  # group -> cores used over the step
    machine_cpu: float = 0.0  # cores busy on the whole machine (other users' processes included)
    run_cpu: float = 0.0  # cores the replica's runs took (its worker thread; the rest is request handling)
    closed_loop: bool = False  # the closed-loop capacity step (rate 0): its ok/s is the server's capacity
    slo_ms: float = 50.0

    def pct(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the latency, ms (nearest rank)."""
        xs = self.latency_ms
        return xs[min(len(xs) - 1, max(0, round(q * len(xs)) - 1))] if xs else float("nan")

    @property
    def throughput(self) -> float:
        """Exact answers per second over the step."""
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def held(self) -> bool:
        """Every request answered exactly, and p99 within the SLO."""
        return self.sent > 0 and self.ok == self.sent and self.pct(0.99) <= self.slo_ms

    def mean(self, name: str) -> float:
        xs = getattr(self, name)
        return statistics.fmean(xs) if xs else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "rate": self.rate, "sent": self.sent, "ok": self.ok, "errors": self.errors,
                "inexact": self.inexact, "duration_s": round(self.duration_s, 3),
                "throughput": round(self.throughput, 1), "p50_ms": round(self.pct(0.5), 2),
                "p99_ms": round(self.pct(0.99), 2), "queue_ms_mean": round(self.mean("queue_ms"), 2),
                "compute_ms_mean": round(self.mean("compute_ms"), 2),
                "other_ms_mean": round(self.mean("latency_ms") - self.mean("queue_ms") - self.mean("compute_ms"), 2),
                "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())},
                "cpu": {k: round(v, 3) for k, v in self.cpu.items()}, "machine_cpu": round(self.machine_cpu, 3),
                "run_cpu": round(self.run_cpu, 3), "closed_loop": self.closed_loop,
                "held": self.held}


class CpuMeter:
    """CPU seconds of this process and every process below it (Ray's), by group (``GROUPS``)."""

    def __init__(self) -> None:
        self.me = psutil.Process()

    def sample(self) -> tuple[float, dict[int, tuple[str, float]], float]:
        """(wall time, pid -> (group, CPU s), machine busy CPU s)."""
        procs = {}
        for p in [self.me, *self.me.children(recursive=True)]:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    procs[p.pid] = (self._group(p), t.user + t.system)
            except psutil.Error:
                continue
        m = psutil.cpu_times()
        return time.perf_counter(), procs, m.user + m.system + m.nice + getattr(m, "irq", 0) + getattr(m, "softirq", 0)

    def _group(self, p: psutil.Process) -> str:
        if p.pid == self.me.pid:
            return "client"
        cmd = " ".join(p.cmdline())
        for server in SERVERS:
            if f"ServeReplica:{server}:" in cmd:
                return f"replica:{server}"
        if "haproxy" in cmd.lower() or "ProxyActor" in cmd:
            return "ingress"
        return "ray"

    @staticmethod
    def cores(before: tuple, after: tuple) -> tuple[dict[str, float], float]:
        """Cores used per group between two samples (a process born in between counts from 0), and the
        whole machine's busy cores."""
        wall = after[0] - before[0]
        used: Counter[str] = Counter()
        for pid, (group, cpu) in after[1].items():
            used[group] += cpu - before[1].get(pid, (group, 0.0))[1]
        return {g: used[g] / wall for g in GROUPS}, (after[2] - before[2]) / wall


def _answer_tensors(answer: Any, like: Any) -> Any:
    """A JSON result shaped as the per-instance result ``like``: tensors where it has tensors."""
    if isinstance(like, torch.Tensor):
        return torch.tensor(answer, dtype=like.dtype)
    if isinstance(like, (tuple, list)) and isinstance(answer, list) and len(answer) == len(like):
        return type(like)(_answer_tensors(a, l) for a, l in zip(answer, like))
    return answer


class LoadClient:
    """The requests (SST trees as JSON bodies) with their expected per-instance results, and the steps."""

    def __init__(self, servable: Servable, lines: list[str], settings: LoadSettings):
        self.settings = settings
        self.bodies = [json.dumps({"tree": line}).encode() for line in lines]
        with torch.inference_mode():
            self.expected = [servable.program(servable.decode(b), *servable.params) for b in self.bodies]
        self.meter = CpuMeter()

    def arrivals(self, rate: float, serial: int) -> tuple[list[float], list[int]]:
        """Seeded Poisson arrival times (s from the step's start) and the tree sent at each."""
        rng = random.Random(self.settings.seed * 100003 + serial)
        times, t = [], 0.0
        while len(times) < self.settings.max_requests:
            t += rng.expovariate(rate)
            if t > self.settings.step_s:
                break
            times.append(t)
        return times, [rng.randrange(len(self.bodies)) for _ in times]

    async def _post(self, session: Any, url: str, tree: int, due: float) -> tuple[int, bytes, float]:
        """(status, body, seconds since ``due``) of one request; status 0 for a timeout or connection error."""
        try:
            async with session.post(url, data=self.bodies[tree], timeout=self.settings.timeout_s,
                                    headers={"content-type": "application/json"}) as r:
                return r.status, await r.read(), time.perf_counter() - due
        except Exception as exc:  # noqa: BLE001 - a timeout or connection error: counted as a failure
            return 0, str(exc).encode(), time.perf_counter() - due

    async def step(self, session: Any, url: str, server: str, rate: float, serial: int) -> Step:
        """Send one step's requests to ``url`` at Poisson arrivals of ``rate`` req/s; check every answer."""
        times, trees = self.arrivals(rate, serial)
        answers: list[tuple[int, bytes, float]] = [(0, b"", 0.0)] * len(times)

        async def one(i: int, due: float) -> None:
            answers[i] = await self._post(session, url, trees[i], due)

        async def send() -> float:
            start = time.perf_counter() + 0.01
            tasks = []
            for i, t in enumerate(times):
                delay = start + t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(one(i, start + t)))
            await asyncio.gather(*tasks)
            return max((start + t + a[2] for t, a in zip(times, answers)), default=start) - start

        return await self._measured(url, server, rate, send, trees, answers)

    async def saturate(self, session: Any, url: str, server: str, serial: int) -> Step:
        """The capacity step: ``in_flight`` requests always outstanding (each answer sends the next) for
        ``step_s`` seconds (at most ``max_requests``); every answer checked."""
        rng = random.Random(self.settings.seed * 100003 + serial)
        trees: list[int] = []
        answers: list[tuple[int, bytes, float]] = []

        async def worker(stop: float) -> None:
            while time.perf_counter() < stop and len(trees) < self.settings.max_requests:
                tree = rng.randrange(len(self.bodies))
                answer = await self._post(session, url, tree, time.perf_counter())
                trees.append(tree)
                answers.append(answer)

        async def send() -> float:
            start = time.perf_counter()
            await asyncio.gather(*(worker(start + self.settings.step_s) for _ in range(self.settings.in_flight)))
            return time.perf_counter() - start

        st = await self._measured(url, server, 0.0, send, trees, answers)
        st.closed_loop = True
        return st

    async def _measured(self, url: str, server: str, rate: float, send: Any, trees: list[int],
                        answers: list[tuple[int, bytes, float]]) -> Step:
        """``await send()`` (the step's traffic; it returns the step's duration, s) with CPU and the replica's
        run CPU measured around it; then the answers judged."""
        run_cpu = _describe(url)["served"]["run_cpu_s"]
        before = self.meter.sample()
        duration = await send()
        after = self.meter.sample()
        cpu, machine = CpuMeter.cores(before, after)
        st = self._judge(server, rate, trees, answers, duration, cpu, machine)
        st.run_cpu = (_describe(url)["served"]["run_cpu_s"] - run_cpu) / (after[0] - before[0])
        return st

    def _judge(self, server: str, rate: float, trees: list[int], answers: list[tuple[int, bytes, float]],
               duration: float, cpu: dict[str, float], machine: float) -> Step:
        st = Step(server, rate, len(trees), 0, 0, 0, duration, sorted(a[2] * 1e3 for a in answers), [], [],
                  cpu=cpu, machine_cpu=machine, slo_ms=self.settings.slo_ms)
        batches: dict[tuple[int, int], int] = {}
        for tree, (status, payload, _) in zip(trees, answers):
            if status != 200:
                st.errors += 1
                continue
            body = orjson.loads(payload)
            meta = body["server"]
            st.queue_ms.append(meta["queue_ms"])
            st.compute_ms.append(meta["compute_ms"])
            batches[(meta["replica"], meta["batch"])] = meta["batch_size"]
            expected = self.expected[tree]
            if outputs_equal(_answer_tensors(body["result"], expected), expected):
                st.ok += 1
            else:
                st.inexact += 1
        st.batch_sizes = dict(Counter(batches.values()))
        return st


@dataclass
class LoadReport:
    """A whole load test: settings, data, idle CPU, every step, the machine, the acrobat server's warm-up and
    what it served."""

    settings: LoadSettings
    data: str
    ingress: str
    idle_cpu: dict[str, float]
    idle_machine_cpu: float
    steps: list[Step]
    machine: dict[str, Any]
    warmup: dict[str, Any]
    served: dict[str, Any]  # the acrobat server's GET / "served" after the sweep: batches, runs, compiles, run CPU

    def held(self, server: str) -> float | None:
        """The highest rate ``server`` held (None: none)."""
        rates = [s.rate for s in self.steps if s.server == server and s.held]
        return max(rates) if rates else None

    def capacity(self, server: str) -> Step | None:
        """``server``'s closed-loop capacity step (None: not run)."""
        return next((s for s in self.steps if s.server == server and s.closed_loop), None)


def _next_gap(steps: list[Step], server: str) -> tuple[float, float] | None:
    """The highest rate ``server`` held and the lowest rate above it that it missed."""
    mine = [s for s in steps if s.server == server]
    held = [s.rate for s in mine if s.held]
    lo = max(held) if held else None
    missed = [s.rate for s in mine if not s.held and (lo is None or s.rate > lo)]
    if lo is None or not missed:
        return None
    return lo, min(missed)


async def _sweep(client: LoadClient, urls: dict[str, str], settings: LoadSettings, log: Any) -> list[Step]:
    import aiohttp

    steps: list[Step] = []
    misses = {s: 0 for s in SERVERS}
    connector = aiohttp.TCPConnector(limit=2048)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def run(server: str, rate: float) -> Step:
            st = await client.step(session, urls[server], server, rate, len(steps))
            steps.append(st)
            log(f"  {server:>12} {rate:7.0f} req/s: p50 {st.pct(0.5):7.1f} ms  p99 {st.pct(0.99):7.1f} ms  "
                f"{st.throughput:6.0f} ok/s  {st.errors} errors  {st.inexact} inexact  "
                f"{'held' if st.held else 'missed'}")
            await asyncio.sleep(0.5)  # let queues drain between steps
            return st

        async def attempt(server: str, rate: float) -> bool:
            """Up to ``tries`` steps at ``rate``: held when one holds (another user's burst spoils one)."""
            for _ in range(settings.tries):
                if (await run(server, rate)).held:
                    return True
            return False

        for k, rate in enumerate(sorted(settings.rates)):
            active = [s for s in SERVERS if misses[s] < 2]
            if not active:
                break
            for server in active if k % 2 == 0 else active[::-1]:
                misses[server] = 0 if await attempt(server, rate) else misses[server] + 1
        for _ in range(settings.refine):
            for server in SERVERS:
                gap = _next_gap(steps, server)
                if gap is not None:
                    await attempt(server, round((gap[0] * gap[1]) ** 0.5))
        if settings.in_flight:
            for server in SERVERS:
                st = await client.saturate(session, urls[server], server, len(steps))
                steps.append(st)
                log(f"  {server:>12} capacity ({settings.in_flight} in flight): {st.throughput:6.0f} ok/s  "
                    f"{st.errors} errors  {st.inexact} inexact")
    return steps


def run_load(settings: LoadSettings, log: Any = print) -> LoadReport:
    """Start the cluster, deploy both servers, measure idle CPU, sweep the rates; returns the report.

    Raises:
        ValueError: a model that cannot be served, bad settings. FileNotFoundError: ``data`` names nothing.
    """
    from acrobat.bench.machine import describe_machine
    from acrobat.serve.cluster import LocalServe
    from acrobat.serve.server import ServeOptions

    factory = PaperModel(settings.model, settings.data, settings.size, settings.seed)
    servable = factory()
    ds = load_dataset(settings.data, split=settings.split, limit=settings.trees)
    lines = []
    for t in ds.trees:
        try:
            servable.validate(t if servable.input == "tree" else t.tokens())
        except RequestError:
            continue  # over the size limit: not a request the server takes
        lines.append(format_tree(t))
    log(f"data     {ds.description}; {len(lines)} trees sent")
    log(f"model    {servable.name}: {servable.description}")
    client = LoadClient(servable, lines, settings)
    common = dict(threads=settings.threads, max_ongoing_requests=max(64, 2 * settings.max_batch_size))
    options = {"per-instance": ServeOptions(runner="per-instance", max_batch_size=1, batch_wait_timeout_s=0.0, **common),
               "acrobat": ServeOptions(max_batch_size=settings.max_batch_size,
                                       batch_wait_timeout_s=settings.batch_wait_ms / 1e3, **common)}
    with LocalServe(ingress=settings.ingress) as cluster:
        log(f"deploying per-instance and acrobat servers ({settings.ingress} ingress; acrobat compiles and tunes "
            "its kernels first) ...")
        cluster.deploy({name: (factory, options[name]) for name in SERVERS})
        urls = {name: cluster.url(name) for name in SERVERS}
        warmup = _describe(urls["acrobat"])["warmup"]
        before = client.meter.sample()
        time.sleep(settings.idle_s)
        idle, idle_machine = CpuMeter.cores(before, client.meter.sample())
        log("idle CPU (cores): " + ", ".join(f"{g} {v:.3f}" for g, v in idle.items()))
        steps = asyncio.run(_sweep(client, urls, settings, log))
        served = _describe(urls["acrobat"])["served"]
    return LoadReport(settings, ds.description, settings.ingress, idle, idle_machine, steps, describe_machine(), warmup,
                      served)


def _describe(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def settings_from_args(args: argparse.Namespace) -> LoadSettings:
    """LoadSettings from parsed arguments (the bench's or the script's).

    Raises:
        ValueError: a bad value.
    """
    try:
        rates = tuple(float(r) for r in args.rates.split(",") if r.strip()) if args.rates else RATES
    except ValueError:
        raise ValueError(f"--rates: expected comma-separated numbers, got {args.rates!r}") from None
    models = getattr(args, "models", None) or [getattr(args, "model", "treelstm")]
    if len(models) > 1:
        raise ValueError("--serve load-tests one model: name at most one")
    return LoadSettings(model=models[0], data=args.data, split=args.split, size=getattr(args, "size", "small"),
                        seed=args.seed, rates=rates, step_s=args.step_seconds, max_requests=args.max_requests,
                        timeout_s=args.timeout_s, slo_ms=args.slo_ms, refine=args.refine, tries=args.tries,
                        in_flight=args.in_flight,
                        idle_s=args.idle_seconds,
                        max_batch_size=args.max_batch_size, batch_wait_ms=args.batch_wait_ms,
                        threads=args.threads or 1, ingress=args.ingress)


def cmd_load(args: argparse.Namespace) -> int:
    """Run the load test from parsed arguments; print the report; write serve.json, serve.md, serve_latency.png."""
    from acrobat.serve import require_ray
    from acrobat.serve.load_report import markdown, write_outputs

    require_ray()
    report = run_load(settings_from_args(args))
    print(markdown(report))
    paths = write_outputs(report, Path(args.out))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0

"""acrobat serve on a real Ray Serve instance on loopback: HTTP and handle results equal the program's
per-instance results, bad requests get their own 4xx, a request that makes the model raise gets a 500
while the rest of its batch gets results, serving compiles nothing after the warm-up, the load test's
step checks every answer; and `acrobat serve treelstm` serves until Ctrl-C, then stops with every Ray
process (its own local cluster, started first so that the two start side by side)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

import acrobat.serve  # noqa: E402,F401 - before Ray's first import: Ray on loopback (acrobat.serve.cluster)

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install -e '.[serve]')")

from acrobat.data.sst import format_tree  # noqa: E402
from acrobat.serve import LocalServe, PaperModel, RequestError, ServeOptions  # noqa: E402
from acrobat.serve.load import LoadClient, LoadSettings  # noqa: E402
from tests.serve_progs import REFUSED, WORDS, picky_servable  # noqa: E402

TREELSTM = PaperModel("treelstm", hidden=16, max_words=60)
ROOT = Path(__file__).resolve().parents[1]


class Command:
    """`acrobat serve treelstm` in a subprocess (its own session, as a terminal's foreground job), its
    output read as it comes."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "acrobat.cli", "serve", "treelstm", "--port", "0",
                                      "--max-batch-size", "4"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    def url(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            for line in list(self.lines):
                found = re.match(r"serving treelstm at (http://127\.0\.0\.1:\d+/treelstm)", line)
                if found:
                    return found.group(1)
            time.sleep(0.2)
        return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def command():
    """The command, started before the in-process cluster so that both start at once."""
    cmd = Command()
    yield cmd
    cmd.kill()


@pytest.fixture(scope="module")
def served(command):
    """One local Ray cluster with two applications: a small TreeLSTM and the picky test program."""
    server = LocalServe()
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start Ray is a reason to skip, not a test failure
        server.stop()
        pytest.skip(f"Ray cannot start here: {type(exc).__name__}: {exc}")
    try:
        handles = server.deploy({"treelstm": (TREELSTM, ServeOptions(max_batch_size=8, batch_wait_timeout_s=0.05)),
                                 "picky": (picky_servable, ServeOptions(max_batch_size=16, batch_wait_timeout_s=0.3))})
        yield server, handles
    finally:
        server.stop()


def request(url: str, body: bytes | dict | None = None, method: str = "POST") -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of one HTTP request."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def concurrently(url: str, bodies: list[dict]) -> list[tuple[int, dict[str, Any]]]:
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda b: request(url, b), bodies))


def test_http_results_equal_per_instance(served, dataset):
    server, _ = served
    s = TREELSTM()
    trees = [t for t in dataset.trees if len(t.leaves()) <= s.max_words][:24]
    answers = concurrently(server.url("treelstm"), [{"tree": format_tree(t)} for t in trees])
    with torch.no_grad():
        for tree, (status, body) in zip(trees, answers):
            assert status == 200, body
            logits, h = s.program(s.decode(json.dumps({"tree": format_tree(tree)}).encode()), *s.params)
            torch.testing.assert_close(torch.tensor(body["result"][0]), logits)
            torch.testing.assert_close(torch.tensor(body["result"][1]), h)
    assert max(b["server"]["batch_size"] for _, b in answers) > 1  # requests arriving together ran together
    status, info = request(server.url("treelstm"), method="GET")
    assert status == 200 and info["model"] == "treelstm" and info["warmup"]["tuned"]
    assert info["served"]["batches"] >= 1 and info["served"]["compiles"] == 0  # compiled during warm-up only


def test_handle_returns_tensors(served, dataset):
    _, handles = served
    s = TREELSTM()
    tree = s.decode(json.dumps({"tree": format_tree(dataset.trees[0])}).encode())
    logits, h = handles["treelstm"].infer.remote(tree).result()
    with torch.no_grad():
        expected = s.program(tree, *s.params)
    torch.testing.assert_close(logits, expected[0])
    torch.testing.assert_close(h, expected[1])
    with pytest.raises(RequestError, match="takes a Tree"):
        handles["treelstm"].infer.remote([1, 2, 3]).result()


@pytest.mark.parametrize("body,status,kind", [
    (b"{not json", 400, "bad_json"),
    ({"sentence": "hi"}, 400, "bad_request"),
    ({"tree": "(3 (2 It) (4 (2 is) (2 good))"}, 400, "malformed_tree"),
    ({"tree": "(3 (2 It) (2 is) (2 good))"}, 400, "malformed_tree"),
    ({"tree": "(3 (2 It) (4 (2 is) (2 zzqx-not-a-word)))"}, 422, "unknown_word"),
    ({"tree": "(2 " * 60 + "(2 a)" + " (2 a))" * 60}, 413, "too_large"),
    (json.dumps({"tree": "(2 a)" + " " * 70000}).encode(), 413, "too_large"),
])
def test_bad_request_gets_its_own_error(served, body, status, kind):
    server, _ = served
    got, answer = request(server.url("treelstm"), body)
    assert (got, answer["error"]) == (status, kind), answer
    assert answer["message"]


def test_failing_request_alone_in_its_batch(served):
    server, handles = served
    s = picky_servable()
    lengths = [2, REFUSED, 4, 5, REFUSED, 6, 1]
    bodies = [{"tokens": WORDS[:n]} for n in lengths]
    answers = concurrently(server.url("picky"), bodies)
    failed = {a["server"]["batch"] for (status, a), n in zip(answers, lengths) if n == REFUSED}
    ok = {a["server"]["batch"] for (status, a), n in zip(answers, lengths) if n != REFUSED}
    assert failed & ok, "a refused request and an accepted one should have been collected in one batch"
    with torch.no_grad():
        for body, n, (status, answer) in zip(bodies, lengths, answers):
            if n == REFUSED:
                assert status == 500 and answer["error"] == "model_error", answer
                assert "picky refuses" in answer["message"]
            else:
                assert status == 200, answer
                expected = s.program(s.decode(json.dumps(body).encode()), *s.params)
                torch.testing.assert_close(torch.tensor(answer["result"]), expected)
    status, answer = request(server.url("picky"), {"tokens": WORDS[:2]})  # the replica still serves
    assert status == 200
    with pytest.raises(RequestError, match="picky refuses") as info:  # the handle raises it as itself
        handles["picky"].infer.remote([1] * REFUSED).result()
    assert (info.value.status, info.value.kind) == (500, "model_error")


def test_load_step_checks_every_answer(served, dataset):
    """One step of the load test against a real server: every answer checked, and a wrong one caught."""
    import aiohttp

    server, _ = served
    s = TREELSTM()
    lines = [format_tree(t) for t in dataset.trees if len(t.leaves()) <= s.max_words][:12]
    client = LoadClient(s, lines, LoadSettings(step_s=1.0, max_requests=25, in_flight=4))

    async def step(closed_loop: bool = False):
        async with aiohttp.ClientSession() as session:
            if closed_loop:
                return await client.saturate(session, server.url("treelstm"), "acrobat", 0)
            return await client.step(session, server.url("treelstm"), "acrobat", 40.0, 0)

    good = asyncio.run(step())
    assert good.sent > 0 and good.ok == good.sent and (good.errors, good.inexact) == (0, 0)
    assert sum(k * v for k, v in good.batch_sizes.items()) == good.sent and len(good.latency_ms) == good.sent
    capacity = asyncio.run(step(closed_loop=True))
    assert capacity.closed_loop and capacity.ok == capacity.sent > 0 and capacity.throughput > 0
    client.expected = [(logits + 1e-3, h) for logits, h in client.expected]  # what a wrong server would answer
    bad = asyncio.run(step())
    assert bad.inexact == bad.sent and bad.ok == 0 and not bad.held


def test_command_serves_until_ctrl_c(command, dataset):
    url = command.url(timeout_s=120)
    if url is None:
        pytest.skip("Ray cannot start here: " + "".join(command.lines[-15:]))
    children = psutil.Process(command.proc.pid).children(recursive=True)
    folder = next(re.search(r"(/\S*acrobat-serve-[^/\s]+)", " ".join(p.cmdline())).group(1) for p in children
                  if "haproxy -db" in " ".join(p.cmdline()))
    status, answer = request(url, {"tree": format_tree(dataset.trees[0])})
    assert status == 200 and len(answer["result"]) == 2 and len(answer["result"][0]) == 5
    os.killpg(command.proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole foreground group
    assert command.proc.wait(timeout=60) == 0, "".join(command.lines)
    command.reader.join(timeout=10)
    assert "stopped" in "".join(command.lines)
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"Ray processes left running: {[p.pid for p in alive]}"
    assert not [p.pid for p in psutil.process_iter(["cmdline"]) if folder in " ".join(p.info["cmdline"] or ())]

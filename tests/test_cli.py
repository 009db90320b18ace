"""The acrobat command: run --check --json, show, bench, and its errors."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from acrobat.cli import main


def test_run_check_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "treelstm", "--batch-size", "8", "--num-batches", "2", "--check", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    for key in ("model", "backend", "batch_size", "num_batches", "median_batch_ms", "overhead_ms",
                "dfg_nodes", "kernel_launches", "check"):
        assert key in report
    assert report["check"] == "passed"
    assert report["num_batches"] == 2 and report["batch_size"] == 8
    assert report["kernel_launches"] < report["dfg_nodes"]
    text = capsys.readouterr().out
    assert "data" in text and "backend eager" in text
    assert "batching report" not in text  # the full tables are --verbose's
    assert re.search(r"^batching \d+ DFG nodes in \d+ batched launches per batch \(mean batch [\d.]+ nodes per "
                     r"launch\), \d+ block\(s\)", text, re.M)
    assert re.search(r"^speed    batched [\d.]+ ms, per instance [\d.]+ ms, [\d.]+x, results equal", text, re.M)
    assert report["compare"]["equal"] is True


def test_run_median_leaves_out_warm_up_batches(tmp_path, capsys):
    """A batch that compiled kernels or ran while the backend still tuned is warm-up: never in the median."""
    out = tmp_path / "r.json"
    assert main(["run", "treelstm", "--batch-size", "4", "--num-batches", "3", "--verbose", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    batches = report["batches"]
    assert batches[0]["warmup"]  # the first batch always is (it compiles, or starts the tuning)
    timed = [b["ms"] for b in batches if not b["warmup"]]
    assert report["warmup_batches"] == 3 - len(timed)
    assert report["median_batch_ms"] == (statistics.median(timed) if timed else None)
    text = capsys.readouterr().out
    assert "batching report" in text and "batch   1/3" in text and "warm-up" in text


def test_run_birnn_without_check(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "birnn", "--batch-size", "4", "--num-batches", "1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["check"] == "off"


def test_show_prints_generated_code(capsys):
    assert main(["show", "birnn"]) == 0
    text = capsys.readouterr().out
    assert "DFG node of block" in text and "def block_" in text and "_prologue" in text


def test_bench_prints_ratios(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "treelstm", "--sizes", "small", "--batch-sizes", "4", "--repeats", "1",
                 "--systems", "acrobat,pytorch,hand", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "Machine:" in text and "PyTorch per instance" in text and "x) |" in text
    assert (out / "bench.json").is_file() and (out / "bench.md").is_file()


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert re.fullmatch(r"acrobat \S+.*\n", capsys.readouterr().out)


def test_bad_arguments(tmp_path, capsys):
    assert main(["run", "treelstm", "--batch-size", "0"]) == 2
    assert main(["run", "treelstm", "--data", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "no-such-model"])


def test_the_command_runs_without_the_serve_extra():
    """`pip install -e .` alone (no Ray, orjson, aiohttp, psutil) runs `acrobat run`: nothing outside
    `acrobat serve` imports the serve extra's packages (a fresh interpreter with them hidden)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "for m in ('orjson', 'ray', 'aiohttp', 'psutil'): sys.modules[m] = None\n"
            "from acrobat.cli import main\n"
            "sys.exit(main(['run', 'treelstm', '--batch-size', '2', '--num-batches', '1', '--check']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

"""The compiled backend's compile progress (``acrobat.runtime.progress``): a live line per kernel compile on a
terminal, nothing off one, and the end-of-run count of kernels compiled and loaded from the cache."""

from __future__ import annotations

import io
import re
import sys
import time

from acrobat.runtime import progress
from acrobat.runtime.progress import CompileProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_summary_counts_compiled_and_loaded():
    p = CompileProgress("model", 3)
    assert p.summary("/cache") is None  # a run that compiled nothing says nothing
    with p.kernel("cell_0:3", "/src/model.py:3", "explicit"):
        pass
    with p.kernel("cell_1:4", "/src/model.py:4", "fused") as hit:
        hit.append(True)  # came from the disk cache
    line = p.summary("/cache")
    assert line is not None and re.fullmatch(
        r"model: 1 kernel\(s\) loaded from the cache and 1 kernel\(s\) compiled in [\d.]+ s "
        r"\(3 static block\(s\); cache /cache\)", line), line


def test_live_line_while_compiling_on_a_terminal(monkeypatch):
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "REFRESH_S", 0.02)
    p = CompileProgress("model", 2)
    with p.kernel("cell_0:3", "/src/model.py:3", "explicit"):
        time.sleep(0.3)  # a compile: the line is redrawn with the elapsed time while it runs
    text = err.getvalue()
    line = "[acrobat] model: compiling kernel 1: block cell_0:3 (model.py:3, explicit gather) 00:00"
    assert text.count(line) >= 3, text


def test_no_live_line_off_a_terminal(monkeypatch):
    err = io.StringIO()  # a log file, a pipe: no bar redrawn into it
    monkeypatch.setattr(sys, "stderr", err)
    with CompileProgress("model", 1).kernel("cell_0:3", "/src/model.py:3", "explicit"):
        time.sleep(0.05)
    assert err.getvalue() == ""

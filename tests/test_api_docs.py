"""The API reference builds from the docstrings with pdoc (the dev extra), without warnings."""

from __future__ import annotations

import warnings

import pytest


def test_pdoc_builds_without_warnings(tmp_path):
    pdoc = pytest.importorskip("pdoc", reason="pdoc is not installed (pip install -e '.[dev]')")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pdoc reports what it cannot document as warnings
        pdoc.pdoc("acrobat", output_directory=tmp_path)
    page = (tmp_path / "acrobat.html").read_text(encoding="utf-8")
    for name in ("benchmark", "BenchmarkResult", "program", "function", "Program", "Options", "RunStats"):
        assert f'id="{name}"' in page, name

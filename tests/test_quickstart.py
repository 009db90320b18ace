"""examples/quickstart.py: it runs as a script, its model is in the static tier, the README shows it whole,
and it type-checks under ``mypy --strict`` (where mypy is installed: the dev extra)."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from examples import quickstart as q

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"


def test_runs_as_a_script(capsys):
    runpy.run_path(str(QUICKSTART), run_name="__main__")
    out = capsys.readouterr().out
    assert "32 trees, batched results equal the per-tree calls" in out
    assert "x, results equal (" in out  # acrobat.benchmark's line


def test_model_runs_in_the_static_tier():
    """Annotated assignments (``scores: torch.Tensor = ...``) and ``Optional`` children keep it static."""
    assert "runs in the static tier" in q.classify.explain(q.Params())


def test_readme_shows_it_whole():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```python\n{QUICKSTART.read_text(encoding='utf-8')}```" in readme


def test_mypy_strict():
    """The public API is typed (``py.typed``; ``acrobat.program`` keeps the function's signature): a user's
    strictly typed model checks clean. Only the quickstart's own errors count (acrobat's are silent)."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[dev]')")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", str(QUICKSTART)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

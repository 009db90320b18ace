"""The generated code of the paper's seven models and the examples, frozen (issue 18, section 3).

A change to the compiler shows, here, every change it makes to what the
compiler writes: the control-flow skeleton, the shared-value prologue and
every static block, as ``program.source()`` gives them. After a change
meant to alter them, look at the diff and refresh the files:
``ACROBAT_UPDATE_GOLDENS=1 pytest tests/test_goldens.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import examples
from acrobat.models import MODELS

GOLDENS = Path(__file__).parent / "goldens"
ROOT = str(Path(__file__).resolve().parents[1])
UPDATE = os.environ.get("ACROBAT_UPDATE_GOLDENS") == "1"


_NID_NAME = re.compile(r"(\b(?:_lk|_fork|_join|_src|_items|_pf|_i)|<expr )(\d+)")
"""Names the generator makes from expression ids (``_lk1893``, ``_fork13``, ``<expr 974 of f>``): the ids count
every expression parsed in the process, so they differ with what was compiled before."""


def canonical(source: str) -> str:
    """``source`` with the expression ids in generated names renumbered in order of first appearance."""
    ids: dict[str, int] = {}
    return _NID_NAME.sub(lambda m: m.group(1) + str(ids.setdefault(m.group(2), len(ids))), source)


def _programs() -> dict[str, object]:
    out = {f"model_{name}": spec.program for name, spec in MODELS.items()}
    out.update({f"example_{name}": examples.load(name).program for name in examples.EXAMPLES})
    return out


PROGRAMS = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_generated_code_is_unchanged(name):
    source = canonical(PROGRAMS[name].source(1).replace(ROOT, "<repo>"))  # type: ignore[attr-defined]
    path = GOLDENS / f"{name}.txt"
    if UPDATE or not path.exists():
        GOLDENS.mkdir(exist_ok=True)
        path.write_text(source)
        if not UPDATE:
            pytest.fail(f"{path} did not exist: written now, check it in")
    assert source == path.read_text(), (f"the generated code of {name} changed: if that is meant, check the diff "
                                        "and run ACROBAT_UPDATE_GOLDENS=1 pytest tests/test_goldens.py")

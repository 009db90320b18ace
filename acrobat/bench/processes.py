"""``acrobat bench --processes N``: the acrobat systems measured again in N fresh processes, one after another.

A user who runs a model once sees one process's figure: its compiles,
its tuning (gather mode and threads per launch, chosen by measurement and
remembered in the cache folder, ``acrobat.runtime.remembered``) and the
machine's noise then. Each child runs the same configurations with
``--systems acrobat`` and writes its ``bench.json``; the report gets each
acrobat system's median ms per batch in each process
(``BenchReport.processes``, shown by ``acrobat.bench.report.processes_table``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from acrobat.bench.report import config_key, read_json


def child_command(command: str, out: Path) -> list[str]:
    """The argv of one child: ``command`` (the bench's own, ``acrobat bench ...``) with ``--systems acrobat``,
    no progress bar and ``--out`` ``out``, run by this Python."""
    words = shlex.split(command)[2:]  # after "acrobat bench"
    if "--systems" in words:
        i = words.index("--systems")
        del words[i:i + 2]
    return [sys.executable, "-m", "acrobat", "bench", *words, "--systems", "acrobat", "--no-progress",
            "--out", str(out)]


def run_in_processes(command: str, n: int) -> dict[str, dict[str, list[float | None]]]:
    """Run the acrobat systems of ``command`` in ``n`` fresh processes, one after another: per configuration
    (``model/size/batch``), per system, its median ms in each (None where it was not timed).

    Raises:
        RuntimeError: a child failed (its exit status and the tail of its stderr).
    """
    per: dict[str, dict[str, list[float | None]]] = {}
    with tempfile.TemporaryDirectory(prefix="acrobat-bench-processes-") as tmp:
        for i in range(n):
            out = Path(tmp) / f"process-{i + 1}"
            done = subprocess.run(child_command(command, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"--processes: process {i + 1} failed with status {done.returncode}: "
                                   f"{done.stderr.strip()[-2000:]}")
            for c in read_json(out / "bench.json").comparisons:
                for r in c.results:
                    medians = per.setdefault(config_key(c), {}).setdefault(r.system, [None] * n)
                    medians[i] = r.timing.median if r.timing is not None else None
    return per

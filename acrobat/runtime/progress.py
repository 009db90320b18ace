"""What the compiled backend says while TorchInductor compiles a program's kernels (or loads them from its cache).

A block is compiled on its first launch, and once more for its other gather
while the backend probes both (``acrobat.runtime.compiled``), so compiles
happen inside runs, blocks at a time. During each one a live line on stderr
(a tqdm bar, on a terminal only) names the block, its model source line and
the seconds spent; when a run that compiled ends, one line says how many
kernels were compiled and how many loaded from the disk cache, and how long
it took. Both go through the ``acrobat`` logger when it has a handler (the
command line's), else straight to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from tqdm import tqdm

log = logging.getLogger("acrobat.progress")

REFRESH_S = 0.5
"""How often the live line's elapsed time is redrawn, in seconds."""


def say(msg: str) -> None:
    """``msg`` through the ``acrobat`` logger when it prints somewhere, else on stderr with an ``[acrobat]`` tag."""
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        log.info(msg)
    else:
        print(f"[acrobat] {msg}", file=sys.stderr, flush=True)


class CompileProgress:
    """The compiles of one run of ``program`` (``n_blocks`` static blocks with kernels): counted, and shown live.

    ``kernel(...)`` wraps one compile; ``summary()`` is the line for the end of the run (None if nothing
    compiled). Times in seconds.
    """

    def __init__(self, program: str, n_blocks: int):
        self.program = program
        self.n_blocks = n_blocks
        self.compiled = 0
        self.loaded = 0
        self.seconds = 0.0

    @contextlib.contextmanager
    def kernel(self, block: str, loc: str, gather: str) -> Iterator[list[bool]]:
        """Around the compile of block ``block`` (model source ``loc``, ``gather`` the gather variant): a live
        line with the elapsed seconds while it runs. Yields a list: append True to it if the kernel came
        from the disk cache."""
        hit: list[bool] = []
        n = self.compiled + self.loaded + 1
        where = os.path.basename(loc)
        bar = tqdm(desc=f"[acrobat] {self.program}: compiling kernel {n}: block {block} ({where}, {gather} gather)",
                   bar_format="{desc} {elapsed}", file=sys.stderr, disable=None, leave=False)
        stop = threading.Event()

        def redraw() -> None:
            while not stop.wait(REFRESH_S):
                bar.refresh()

        ticker = threading.Thread(target=redraw, name="acrobat-compile-progress", daemon=True)
        ticker.start()
        t0 = time.perf_counter()
        try:
            yield hit
        finally:
            stop.set()
            ticker.join()
            bar.close()
            s = time.perf_counter() - t0
            self.seconds += s
            if any(hit):
                self.loaded += 1
            else:
                self.compiled += 1
            log.debug("block %s (%s, %s gather): %s in %.1f s", block, loc, gather,
                      "loaded from the cache" if any(hit) else "compiled", s)

    def summary(self, cache: str) -> str | None:
        """The end-of-run line (``cache``: the cache folder), or None when the run compiled nothing."""
        if not self.compiled and not self.loaded:
            return None
        parts = [f"{k} kernel(s) {what}" for k, what in ((self.loaded, "loaded from the cache"),
                                                        (self.compiled, "compiled")) if k]
        return (f"{self.program}: {' and '.join(parts)} in {self.seconds:.1f} s ({self.n_blocks} static block(s); "
                f"cache {cache})")


class CompileNotes:
    """What a compiling backend says across its runs: on its first run, that ``n_blocks`` blocks will be
    compiled or loaded from the cache; during each run, its compiles (``progress``, a ``CompileProgress``);
    after a run that compiled, the summary line."""

    def __init__(self) -> None:
        self.announced = False
        self.progress = CompileProgress("", 0)  # the current run's compiles

    @contextlib.contextmanager
    def run(self, program: str, n_blocks: int, cache: Path) -> Iterator[None]:
        """Held around each run of ``program`` (``n_blocks`` static blocks with kernels, ``cache`` the folder
        kernels are cached in)."""
        if not self.announced:
            self.announced = True
            say(f"{program}: {n_blocks} static block(s) to compile with TorchInductor or load from its cache "
                f"({cache}) on their first launches ...")
        self.progress = CompileProgress(program, n_blocks)
        try:
            yield
        finally:
            line = self.progress.summary(str(cache))
            self.progress = CompileProgress(program, n_blocks)
            if line is not None:
                say(line)

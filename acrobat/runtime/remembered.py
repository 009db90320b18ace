"""Settled run-time choices kept on disk beside the compiled kernels, so that a new process starts tuned.

Each block's settled choices (its gather mode, §5.2, and its threads per
launch, per launch size class: ``acrobat.runtime.tuning``) are written to one
small JSON file under ``acrobat.cachedir.tuning_dir()`` (``$ACROBAT_CACHE_DIR/tuning``), named by a hash of the block (its name and generated code, the shapes and
dtypes of its shared arguments), the backend, the kernel wrapper and
threads-per-launch mode, the device
and the machine (``machine``: CPU model, torch version, torch's thread
count). A changed machine, torch version or thread count finds no file and
probes again. A folder that cannot be read or written keeps nothing: the
process tunes as without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from acrobat.cachedir import tuning_dir
from acrobat.runtime.plan import BlockCode, flatten_forms

TUNING_VERSION = 2
"""Bumped when the probing changes, so that choices made the old way are not taken."""


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine(threads: int | None = None) -> dict[str, Any]:
    """What invalidates remembered choices: CPU model, torch version, torch's thread count (``threads``; None:
    ``torch.get_num_threads()`` now, which is not the process's inside a launch run on 1 thread)."""
    return {"cpu": cpu_model(), "torch": torch.__version__,
            "threads": torch.get_num_threads() if threads is None else threads, "version": TUNING_VERSION}


def shared_signature(shared: Sequence[Any]) -> str:
    """The shapes and dtypes of a block's shared arguments (module forms flattened), as text."""
    flat, _ = flatten_forms(shared)
    parts = []
    for x in pytree.tree_leaves(flat):
        if isinstance(x, torch.Tensor):
            parts.append(f"T{tuple(x.shape)}{x.dtype}")
        else:
            parts.append(repr(x) if isinstance(x, (int, float, bool, str, type(None))) else type(x).__name__)
    return ",".join(parts)


class ChoiceMemory:
    """One backend's remembered choices (``backend``: its name, e.g. ``compiled``), read and written by key.

    ``setting``: what else the choices depend on, as text (the kernel wrapper, the threads-per-launch mode:
    a gather chosen with every launch on 1 thread is not the one for launches on the pool).

    ``folder`` defaults to ``acrobat.cachedir.tuning_dir()``, looked up on each use (it follows
    ``$ACROBAT_CACHE_DIR``).
    """

    def __init__(self, backend: str, setting: str = "", folder: Path | None = None):
        self.backend = backend
        self.setting = setting
        self._folder = folder
        self._loaded: dict[str, dict[str, str]] = {}  # file key -> its choices
        self._machines: dict[str, dict[str, Any]] = {}  # file key -> the machine facts it was made for
        self._lock = threading.Lock()

    def key(self, block: BlockCode, shared: Sequence[Any], device: torch.device, threads: int) -> str | None:
        """The file key of ``block`` run with ``shared`` on ``device`` on this machine with ``threads`` threads
        in torch's pool; None for a block without generated code (the dynamic tier's operators: nothing
        stable to name them by)."""
        if not block.source:
            return None
        facts = machine(threads)
        text = json.dumps([block.name, block.source, shared_signature(shared), self.backend, self.setting,
                           device.type, facts])
        key = hashlib.sha256(text.encode()).hexdigest()[:40]
        self._machines[key] = facts
        return key

    def recall(self, key: str | None, what: str, size_class: int) -> str | None:
        """The choice ``what`` (``gather``, ``threads``) remembered for ``size_class`` under ``key``, or None."""
        if key is None:
            return None
        with self._lock:
            return self._choices(key).get(f"{what} {size_class}")

    def keep(self, key: str | None, block: str, what: str, size_class: int, choice: str) -> None:
        """Remember ``choice`` for ``what`` and ``size_class`` under ``key`` (block name ``block``, for a reader
        of the file). Written atomically; a folder that cannot be written keeps nothing, silently."""
        if key is None:
            return
        with self._lock:
            choices = self._choices(key)
            choices[f"{what} {size_class}"] = choice
            data = {"block": block, "backend": self.backend, "machine": self._machines[key], "choices": choices}
            try:
                path = self._path(key)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, path)
            except OSError:
                pass

    def _choices(self, key: str) -> dict[str, str]:
        """The choices of file ``key``, read once (empty if missing, unreadable, or made on another machine)."""
        if key not in self._loaded:
            try:
                data = json.loads(self._path(key).read_text())
                ok = (isinstance(data, dict) and data.get("machine") == self._machines.get(key)
                      and isinstance(data.get("choices"), dict))
                self._loaded[key] = {str(k): str(v) for k, v in data["choices"].items()} if ok else {}
            except (OSError, ValueError):
                self._loaded[key] = {}
        return self._loaded[key]

    def _path(self, key: str) -> Path:
        return (self._folder or tuning_dir()) / f"{key}.json"

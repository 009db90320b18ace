"""What acrobat learned about a compiled kernel graph, kept on disk beside TorchInductor's cache (§5).

TorchInductor's FX graph cache hands back a compiled graph for any size
hint when it recorded no size guard for it, and it records none where it
specialized a symbolic size to a constant (a grouped convolution's
``groups`` fixes the batch size; ``acrobat.runtime.size_guard``). So after
a cache hit acrobat cannot see whether the kernel holds for every batch
size. It learns that from a fresh compile, whose shape environment shows
the specialization, and keeps the fact here: ``specialized`` graphs are
then always compiled for the sizes at hand, never taken from Inductor's
cache. A graph whose sizes were only bounded (``guard``: a backward kernel's
float32 sum over the batch rows, exact up to 4096 rows; ``SizeGuard.fact``)
is taken from the cache and given back that bound. A graph Inductor failed
on is kept as ``failed`` (its error), so no later process spends the compile
again (``compiled.compile_graph``). One small JSON file per
graph, under ``acrobat.cachedir.inductor_dir() / "acrobat-facts"``, keyed by
the graph's code, its inputs' shapes, dtypes and (training graphs) which
require grad, the wrapper and the torch version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from acrobat.cachedir import inductor_dir
from acrobat.runtime.plan import KernelGraph

FACTS_VERSION = 2


def graph_key(graph: KernelGraph, wrapper: str) -> str:
    """A hex digest naming ``graph`` compiled with ``wrapper`` (symbolic sizes written as ``?``)."""
    def meta(x: Any) -> str:
        if isinstance(x, torch.Tensor):
            shape = tuple(s if isinstance(s, int) else "?" for s in x.shape)
            return f"T{shape}{x.dtype}{x.device}" + ("R" if x.requires_grad else "")  # training graphs
        return repr(type(x)) if not isinstance(x, (int, float, bool, str, type(None))) else repr(x)

    text = "\n".join([graph.gm.code, *map(meta, graph.example_inputs), wrapper, torch.__version__,
                      str(FACTS_VERSION)])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def block_key(source: str, signature: object, wrapper: str) -> str:
    """A hex digest naming a static block's kernel before it is traced: its generated ``source``, its launch
    ``signature`` (rows, shared arguments, fused gathers, size hints: their ``repr``), ``wrapper`` and the torch
    version; it keeps a ``failed`` fact (``compiled.CompiledKernel._compile``)."""
    seen: dict[str, str] = {}

    def canonical(m: re.Match) -> str:  # generated names carry the process's running counters: renumbered
        return seen.setdefault(m.group(0), f"{m.group(1)}{len(seen)}")
    code = re.sub(r"\b(_[A-Za-z_]*?)\d+\b", canonical, source)
    text = "\n".join([code, repr(signature), wrapper, torch.__version__, str(FACTS_VERSION), "block"])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _path(key: str) -> Path:
    return inductor_dir() / "acrobat-facts" / f"{key}.json"


def where(key: str) -> str:
    """The file that keeps the facts of ``key``."""
    return str(_path(key))


def where(key: str) -> str:
    """The file that keeps the facts of graph ``key``."""
    return str(_path(key))


def load(key: str) -> dict[str, Any] | None:
    """The facts kept for graph ``key``, or None when none are (or the file is unreadable)."""
    try:
        return json.loads(_path(key).read_text())
    except (OSError, ValueError):
        return None


def save(key: str, facts: dict[str, Any]) -> None:
    """Keep ``facts`` for graph ``key`` (written atomically; a folder that cannot be written keeps nothing:
    the facts are learnt again by the next process)."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(facts, f)
        os.replace(tmp, path)
    except OSError:
        pass

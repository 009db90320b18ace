"""Describe the machine a benchmark ran on (CPU, cores, threads, torch, GPU)."""

from __future__ import annotations

import os
import platform

import torch

from acrobat.runtime.remembered import cpu_model


def describe_machine() -> dict[str, str | int]:
    """Machine facts for benchmark headers and JSON."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"cpu": cpu_model(), "cores": os.cpu_count() or 0, "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(), "gpu": gpu}


def load_average() -> float | None:
    """The 1-minute load average (other work on the machine skews timings), or None where unknown."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def machine_line() -> str:
    """One readable line, e.g. ``AMD EPYC ... , 2 cores, 2 torch threads, torch 2.13.0, no GPU``."""
    m = describe_machine()
    gpu = "no GPU" if m["gpu"] == "none" else f"GPU {m['gpu']}"
    return f"{m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch threads, torch {m['torch']}, {gpu}"

"""Seeded parameter construction shared by the model zoo (TreeLSTM, BiRNN, ...).

Every model's parameters are drawn from one ``torch.Generator`` seeded by the
model's ``seed`` in a fixed, documented order, so the per-instance reference,
the hand-batched ("expert") implementation and the auto-batched acrobat
program of a model all see bit-identical weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn

SIZES: dict[str, int] = {"small": 256, "large": 512}
"""Hidden sizes of the paper's model-size settings (Table 4: "small" / "large")."""

EMB_STD = 0.1
"""Standard deviation of embedding tables."""

BIAS_STD = 0.01
"""Standard deviation of bias vectors (small, so that gates start near 0.5)."""


def seeded_parameter(gen: torch.Generator, *shape: int, scale: float) -> nn.Parameter:
    """A float32 parameter of ``shape`` drawn as ``N(0, 1) * scale`` from ``gen``."""
    return nn.Parameter(torch.randn(*shape, generator=gen, dtype=torch.float32) * scale)


def seeded_matrix(gen: torch.Generator, fan_in: int, fan_out: int) -> nn.Parameter:
    """A (fan_in, fan_out) weight matrix with std ``1 / sqrt(fan_in)``, used as ``x @ W``."""
    return seeded_parameter(gen, fan_in, fan_out, scale=1.0 / math.sqrt(fan_in))


def seeded_bias(gen: torch.Generator, size: int) -> nn.Parameter:
    """A (size,) bias vector with std :data:`BIAS_STD`."""
    return seeded_parameter(gen, size, scale=BIAS_STD)

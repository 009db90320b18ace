"""Shared fixtures: SST dev trees when ../shared is present, else synthetic SST-like trees."""

from __future__ import annotations

import os

import pytest
import torch

from acrobat.data import load_dataset
from acrobat.runtime.backend import AUTO_ENV

# backend="auto" (run's default) would compile Inductor kernels for every test model run under no_grad:
# tests run eager unless they ask for a backend (tests of "auto" itself set this variable back).
os.environ.setdefault(AUTO_ENV, "eager")


@pytest.fixture(scope="session")
def dataset():
    """Up to 64 dev trees: real SST if found (tests then run on real inputs), else synthetic."""
    torch.manual_seed(0)
    return load_dataset(limit=64)

"""Shared fixtures: SST dev trees when ../shared is present, else synthetic SST-like trees."""

from __future__ import annotations

import pytest
import torch

from acrobat.data import load_dataset


@pytest.fixture(scope="session")
def dataset():
    """Up to 64 dev trees: real SST if found (tests then run on real inputs), else synthetic."""
    torch.manual_seed(0)
    return load_dataset(limit=64)

"""The public models ported to acrobat (ports/README.md): each, batched on both backends, equals its original
code (the same model file without acrobat's decorators) run per instance, in float64 and in float32, and so do
the weights' gradients."""

from __future__ import annotations

import warnings

import pytest
import torch

import acrobat
from ports.check import PORTS, check_exact, check_gradients, ported_and_original


@pytest.mark.parametrize("backend", ["eager", "compiled"])
@pytest.mark.parametrize("name", list(PORTS))
def test_port_equals_original(name, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the original code's deprecated nn.init.xavier_uniform
        check_exact(name, 3, 1, backend)


@pytest.mark.parametrize("name", list(PORTS))
def test_port_gradients_equal_original(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert check_gradients(name, 3, 1) > 0


STATIC = ["treelstm"]
"""The ports the static tier takes as their authors wrote them (ports/README.md lists what it rejects in the rest)."""


@pytest.mark.parametrize("name", STATIC)
def test_port_runs_in_the_static_tier(name):
    entry, _, instances, shared, _ = ported_and_original(name, 5, 2, False)
    stats = acrobat.RunStats()
    with torch.no_grad():
        entry.run(instances, *shared, options=acrobat.Options(strict=True), stats=stats)
    assert stats.dynamic is None and stats.plain is None

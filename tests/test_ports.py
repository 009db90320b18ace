"""The public models ported to acrobat (ports/README.md): each, batched on both backends, equals its original
code (the same model file without acrobat's decorators) run per instance, in float64 and in float32, and so do
the weights' gradients."""

from __future__ import annotations

import warnings

import pytest

from ports.check import PORTS, check_exact, check_gradients


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

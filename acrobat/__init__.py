"""acrobat: auto-batching of dynamic deep-learning programs at compile time.

A Python re-implementation of ACRoBat (Fegade et al., MLSys 2024). Write a
model for ONE instance with ``@acrobat.program``/``@acrobat.function`` and
run a mini-batch with ``model.run(instances, params)``.
"""

from importlib import metadata as _metadata

from acrobat.cachedir import use_for_inductor

use_for_inductor()  # before anything imports torch's compiler

from acrobat.errors import (  # noqa: E402
    AcrobatError, BatchError, CompileError, DataError, DynamicFallbackWarning, InstanceError, InternalError, ParamError,
    ShapeError,
)
from acrobat.program import Options, Program, concurrent, function, phase, program  # noqa: E402
from acrobat.runtime.stats import RunStats  # noqa: E402
from acrobat.benchmarking import BenchmarkResult, benchmark  # noqa: E402

try:
    __version__ = _metadata.version("acrobat")
except _metadata.PackageNotFoundError:  # a checkout run through PYTHONPATH, never installed
    __version__ = "unknown (not installed)"

__all__ = [
    "AcrobatError", "BatchError", "CompileError", "DataError", "DynamicFallbackWarning", "InstanceError",
    "InternalError", "ParamError",
    "ShapeError",
    "BenchmarkResult", "Options", "Program", "RunStats", "benchmark", "concurrent", "function", "phase", "program",
    "__version__",
]

"""acrobat: auto-batching of dynamic deep-learning programs at compile time.

A Python re-implementation of ACRoBat (Fegade et al., MLSys 2024). Write a
model for ONE instance with ``@acrobat.program``/``@acrobat.function`` and
run a mini-batch with ``model.run(instances, params)``.
"""

from acrobat.errors import AcrobatError, BatchError, CompileError, DataError, InstanceError, ShapeError
from acrobat.program import Options, Program, concurrent, function, phase, program
from acrobat.runtime.stats import RunStats

__all__ = [
    "AcrobatError", "BatchError", "CompileError", "DataError", "InstanceError", "ShapeError",
    "Options", "Program", "RunStats", "concurrent", "function", "phase", "program",
]

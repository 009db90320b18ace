"""Build of acrobat's one native module, ``acrobat._native`` (plain CPython C API; needs only setuptools
and a C compiler). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("acrobat._native", ["acrobat/_native.c"], extra_compile_args=["-O2"])])

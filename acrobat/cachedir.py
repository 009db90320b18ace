"""Where acrobat caches compiled kernels on disk: ``$ACROBAT_CACHE_DIR``, else ``~/.cache/acrobat``.

TorchInductor's own cache (``TORCHINDUCTOR_CACHE_DIR``) is pointed below it
when the ``acrobat`` package is imported, before torch's compiler reads the
variable (a value the user set is kept).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The kernel cache folder (not created here)."""
    root = os.environ.get("ACROBAT_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acrobat"


def use_for_inductor() -> None:
    """Point TorchInductor's cache into acrobat's, unless ``TORCHINDUCTOR_CACHE_DIR`` is set."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir() / "inductor"))


def inductor_dir() -> Path:
    """Where TorchInductor caches its compiled graphs and kernels in this process."""
    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or cache_dir() / "inductor")

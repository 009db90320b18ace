"""Where acrobat caches compiled kernels on disk: ``$ACROBAT_CACHE_DIR``, else ``~/.cache/acrobat``.

Below it: ``inductor`` (TorchInductor's cache) and ``tuning`` (each block's settled gather mode and
threads per launch on this machine, ``tuning_dir``).

Importing ``acrobat`` points TorchInductor's own cache (``TORCHINDUCTOR_CACHE_DIR``) below it for the
whole process, before torch's compiler reads the variable (a value the user set is kept): other
``torch.compile`` users in the process cache there too. The folder is created and checked then
(``inductor_dir``: importing ``torch._dynamo`` creates it, and fails on one it cannot create); one
that cannot be used (a file, or a folder that cannot be created or written) is replaced by a
temporary folder for the process, with one ``KernelCacheWarning``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from acrobat.errors import KernelCacheWarning

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
ACROBAT_ENV = "ACROBAT_CACHE_DIR"

_lock = threading.Lock()
_usable: str | None = None  # the folder checked usable in this process
_user_set_inductor = False  # TORCHINDUCTOR_CACHE_DIR came from the user, not from use_for_inductor


def cache_dir() -> Path:
    """The kernel cache folder (not created here)."""
    root = os.environ.get(ACROBAT_ENV)
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acrobat"


def tuning_dir() -> Path:
    """Where the compiled backend's settled choices (gather, threads per launch) are kept:
    ``cache_dir() / "tuning"`` (not created here; ``acrobat.runtime.remembered``)."""
    return cache_dir() / "tuning"


def use_for_inductor() -> None:
    """Point TorchInductor's cache into acrobat's, unless ``TORCHINDUCTOR_CACHE_DIR`` is set, and make sure
    it is usable (``inductor_dir``). Called when ``acrobat`` is imported, before torch's compiler is."""
    global _user_set_inductor
    _user_set_inductor = bool(os.environ.get(INDUCTOR_ENV))
    if not _user_set_inductor:
        os.environ[INDUCTOR_ENV] = str(cache_dir() / "inductor")
    inductor_dir()


def inductor_dir() -> Path:
    """Where TorchInductor caches its compiled graphs and kernels in this process, created if missing.

    Checked once (at import, and again if ``TORCHINDUCTOR_CACHE_DIR`` changes): a folder that is a
    file, or cannot be created or written, is replaced by a new temporary folder
    (``TORCHINDUCTOR_CACHE_DIR`` is set to it, so compiles go on; it is removed at exit), with one
    ``KernelCacheWarning`` saying what is wrong and which variable to set.
    """
    global _usable
    with _lock:
        want = os.environ.get(INDUCTOR_ENV) or str(cache_dir() / "inductor")
        if want == _usable:
            return Path(want)
        problem = _unusable(Path(want))
        if problem is not None:
            fallback = tempfile.mkdtemp(prefix="acrobat-kernels-")
            atexit.register(shutil.rmtree, fallback, ignore_errors=True)
            os.environ[INDUCTOR_ENV] = fallback
            fix = f"set {ACROBAT_ENV} to a folder you can write"
            if _user_set_inductor:
                source, fix = f"${INDUCTOR_ENV}", f"set {INDUCTOR_ENV} to a folder you can write, or unset it"
            elif os.environ.get(ACROBAT_ENV):
                source = f"${ACROBAT_ENV}={os.environ[ACROBAT_ENV]}"
            else:
                source = "the default"
            warnings.warn(f"acrobat: the kernel cache folder {want} ({source}) cannot be used: {problem}; compiled "
                          f"kernels go to the temporary folder {fallback} instead (removed at exit, so the next "
                          f"process compiles them again): {fix}", KernelCacheWarning, stacklevel=3)
            want = fallback
        _usable = want
        return Path(want)


def _unusable(folder: Path) -> str | None:
    """What keeps ``folder`` from holding the cache (created here if missing), or None if it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            return f"{blocker} is a file, not a folder"
        return f"it cannot be created ({exc.strerror or exc})"
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".acrobat-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"it cannot be written ({exc.strerror or exc})"
    return None

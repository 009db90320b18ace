"""Where acrobat caches compiled kernels on disk: ``$ACROBAT_CACHE_DIR``, else ``~/.cache/acrobat``.

acrobat's own compiles cache TorchInductor's graphs and kernels in ``inductor_dir()``: that folder, below
acrobat's, or ``TORCHINDUCTOR_CACHE_DIR`` where the user set it before importing acrobat. The rest of the
process is left alone: ``TORCHINDUCTOR_CACHE_DIR`` is pointed at acrobat's folder only while acrobat
compiles (``inductor_cache``), so the user's own ``torch.compile`` keeps torch's default folder. A folder
that cannot be used (a file, or a folder that cannot be created or written) is replaced by a temporary
folder for the process, with one ``KernelCacheWarning``.
Below acrobat's folder, ``tuning`` holds each block's settled gather mode and threads per launch on this
machine (``tuning_dir``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Iterator

from acrobat.errors import KernelCacheWarning

INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
ACROBAT_ENV = "ACROBAT_CACHE_DIR"

_lock = threading.Lock()
_checked: str | None = None  # the folder configured when last checked
_usable: str | None = None  # the folder acrobat's compiles use: the one checked, or its temporary replacement
_user_set_inductor = False  # the user set TORCHINDUCTOR_CACHE_DIR before importing acrobat: acrobat caches there


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
    """Note whether the user set ``TORCHINDUCTOR_CACHE_DIR`` (then acrobat caches there too), and make sure the
    folder acrobat's compiles use is usable (``inductor_dir``). Called when ``acrobat`` is imported."""
    global _user_set_inductor
    value = os.environ.get(INDUCTOR_ENV)
    _user_set_inductor = value is not None and value != "" and not _torch_default(value)
    inductor_dir()


def _torch_default(folder: str) -> bool:
    """Whether ``folder`` is torch's default cache folder, which torch itself puts into ``TORCHINDUCTOR_CACHE_DIR``
    once its compiler is imported (so a value set before acrobat's import may be torch's, not the user's)."""
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")  # loaded where torch could have set it
    return utils is not None and os.path.abspath(folder) == os.path.abspath(utils.default_cache_dir())


@contextlib.contextmanager
def inductor_cache() -> Iterator[Path]:
    """Held around each of acrobat's TorchInductor compiles: ``TORCHINDUCTOR_CACHE_DIR`` names ``inductor_dir()``
    inside, and afterwards again what it named before (unset, torch's default, or the user's folder, which is
    ``inductor_dir()`` itself). Callers serialize compiles (the variable is process-wide while held).
    Yields the folder."""
    folder = inductor_dir()
    before = os.environ.get(INDUCTOR_ENV)
    os.environ[INDUCTOR_ENV] = str(folder)
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop(INDUCTOR_ENV, None)
        else:
            os.environ[INDUCTOR_ENV] = before


def inductor_dir() -> Path:
    """The folder acrobat's compiles cache TorchInductor's graphs and kernels in, created if missing:
    ``$TORCHINDUCTOR_CACHE_DIR`` where the user set it before importing acrobat, else
    ``cache_dir() / "inductor"``.

    Checked once (at import, and again if the configured folder changes): a folder that is a file, or
    cannot be created or written, is replaced by a new temporary folder (removed at exit), with one
    ``KernelCacheWarning`` saying what is wrong and which variable to set; a ``TORCHINDUCTOR_CACHE_DIR``
    the user set that cannot be used is replaced by it for the whole process (torch's own compiles would
    fail on it too).
    """
    global _usable, _checked
    with _lock:
        want = os.environ.get(INDUCTOR_ENV) if _user_set_inductor else None
        want = want or str(cache_dir() / "inductor")
        if want == _checked and _usable is not None:
            return Path(_usable)
        problem = _unusable(Path(want))
        _checked, _usable = want, want
        if problem is not None:
            fallback = tempfile.mkdtemp(prefix="acrobat-kernels-")
            atexit.register(shutil.rmtree, fallback, ignore_errors=True)
            fix = f"set {ACROBAT_ENV} to a folder you can write"
            if _user_set_inductor:
                os.environ[INDUCTOR_ENV] = _checked = fallback
                source, fix = f"${INDUCTOR_ENV}", f"set {INDUCTOR_ENV} to a folder you can write, or unset it"
            elif os.environ.get(ACROBAT_ENV):
                source = f"${ACROBAT_ENV}={os.environ[ACROBAT_ENV]}"
            else:
                source = "the default"
            warnings.warn(f"acrobat: the kernel cache folder {want} ({source}) cannot be used: {problem}; compiled "
                          f"kernels go to the temporary folder {fallback} instead (removed at exit, so the next "
                          f"process compiles them again): {fix}", KernelCacheWarning, stacklevel=3)
            _usable = fallback
        return Path(_usable)


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

"""Per-thread switches a batched run sets around its launches (``fusion.unfused``, ``lookup.sparse_grads``).

A fiber is a greenlet of the thread that runs the batch, so the fibers of one run see the switch their run
set, and two threads' runs do not see each other's.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class ThreadFlag:
    """A boolean of the calling thread, False until ``set`` turns it on within a ``with`` block."""

    def __init__(self) -> None:
        self._local = threading.local()

    def on(self) -> bool:
        """Whether the calling thread is within ``set(True)``."""
        return getattr(self._local, "on", False)

    @contextmanager
    def set(self, value: bool = True) -> Iterator[None]:
        """Within the block the flag is ``value`` for the calling thread; after it, what it was before."""
        was = self.on()
        self._local.on = value
        try:
            yield
        finally:
            self._local.on = was

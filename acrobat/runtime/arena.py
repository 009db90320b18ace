"""Arena memory: block outputs live in preallocated per-row-shape storage (§5.2, App. C).

Every output of a batched launch takes the next rows of the pool for its
row shape and dtype; all outputs of one shape in a run therefore lie in ONE
tensor, so any batched argument, wherever its rows came from, is that
tensor plus an index vector: a fused-gather kernel reads it in place, an
explicit gather is one ``index_select`` (or a view when the rows are
contiguous). Pools are reused across runs and grow only when a run needs
more rows than any before (by doubling), so steady-state batches allocate
nothing.

Rows are handed out afresh within a run and reused by the next run, so
results that outlive a run must be copied out (``Runtime.run`` does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

ALIGN = 16
"""Bytes: every allocation starts at a multiple (Inductor's GPU kernels assume 16-byte aligned inputs)."""


@dataclass
class Pool:
    """The storage for one (row shape, dtype, device): ``(capacity, *shape)`` and the rows used this run."""

    storage: torch.Tensor
    pid: int  # its position in ``Arena.pools`` (insertion order), kept when the storage grows
    align: int  # rows handed out start at a multiple of this (a 16-byte boundary)
    used: int = 0


@dataclass
class Arena:
    """Per-row-shape storage pools, reused across runs.

    ``growths`` counts storage (re)allocations: after warm-up it stays
    constant across batches of similar size.
    """

    pools: dict[tuple, Pool] = field(default_factory=dict)
    growths: int = 0
    by_pid: list[Pool] = field(default_factory=list)  # the current pool of each pool id

    def reset(self) -> None:
        """Start a run: every pool's rows are free again."""
        for p in self.pools.values():
            p.used = 0

    def alloc(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, n: int) -> tuple[Pool, int]:
        """``n`` fresh rows of shape ``shape``: (the pool, whose ``storage`` holds them; first row index).

        A pool too small for the run is replaced by one of at least twice
        the capacity, and the rows handed out so far are copied into it: a
        value keeps its row number, and every value of one row spec stays
        in the pool's current storage (the one a fused-gather kernel reads).
        """
        key = (shape, dtype, device)
        p = self.pools.get(key)
        if p is not None and p.used % p.align:  # start at a 16-byte boundary (what generated GPU kernels assume)
            p.used += p.align - p.used % p.align
        if p is None or p.used + n > p.storage.shape[0]:
            cap = max(256, n, 2 * (p.storage.shape[0] if p is not None else 0))
            used = 0 if p is None else p.used
            while cap < used + n:
                cap *= 2
            storage = torch.empty((cap, *shape), dtype=dtype, device=device)
            if p is not None:
                kept = min(used, p.storage.shape[0])  # rows past the old end are alignment padding
                storage[:kept] = p.storage[:kept]
            row_bytes = math.prod(shape) * storage.element_size()
            align = ALIGN // math.gcd(row_bytes, ALIGN) if row_bytes else 1
            p = self.pools[key] = Pool(storage, len(self.pools) if p is None else p.pid, align, used)
            if p.pid == len(self.by_pid):
                self.by_pid.append(p)
            else:
                self.by_pid[p.pid] = p
            self.growths += 1
        start = p.used
        p.used += n
        return p, start

    def pool(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Pool:
        """The current pool of rows of ``shape`` and ``dtype`` (KeyError if none was allocated)."""
        return self.pools[(shape, dtype, device)]

    @property
    def nbytes(self) -> int:
        """Bytes held by all pools."""
        return sum(p.storage.numel() * p.storage.element_size() for p in self.pools.values())

"""Sizes a compiled kernel was specialized on, checked at launch (§5: kernels with a symbolic batch size).

A static block's kernel is traced with a symbolic batch size and symbolic
arena storage rows, so that one kernel serves every batch size
(``acrobat.codegen.kernels``). TorchInductor may still specialize a symbol
while it compiles: a grouped convolution (``F.conv2d(x, W[k])`` with a
per-instance weight batches as ``groups=B``) takes ``groups`` as a plain
int, so Inductor fixes the batch size to its hint and records the guard
``Eq(batch, 64)`` in the shape environment. acrobat calls the generated
kernel without Inductor's guards (``acrobat.runtime.compiled``), so such a
kernel, launched at another size, reads and writes out of bounds.

``SizeGuard.of`` collects those guards after a compile; a kernel without
any has no guard and costs nothing at launch. A kernel with guards is
checked once per distinct tuple of its inputs' dim-0 sizes (a dict lookup
after the first): where they fail, the backend compiles the block again
for those sizes.
"""

from __future__ import annotations

from typing import Any, Sequence

import sympy
import torch


class SizeGuard:
    """The conditions on dim-0 sizes a compiled kernel holds under (see the module docstring).

    ``inputs[j]`` is the kernel argument whose dim 0 is ``symbols[j]``.
    """

    def __init__(self, condition: sympy.Basic, symbols: list[sympy.Symbol], inputs: list[int],
                 specializes: bool = False):
        self.condition = condition
        self.symbols = symbols
        self.inputs = inputs
        self.specializes = specializes  # a size was fixed to a constant (not only bounded)
        self._checked: dict[tuple[int, ...], bool] = {}

    @staticmethod
    def of(example_inputs: Sequence[Any]) -> "SizeGuard | None":
        """The guard of a kernel compiled for ``example_inputs`` (fake tensors with symbolic dim 0, after
        the compile added its guards to their shape environment); None when it holds for every size."""
        where: dict[sympy.Symbol, int] = {}
        env = None
        for i, x in enumerate(example_inputs):
            if isinstance(x, torch.Tensor) and x.dim() and isinstance(x.shape[0], torch.SymInt):
                node = x.shape[0].node
                env = node.shape_env
                symbol = node._expr  # as created (``expr`` applies the specializations found since)
                if isinstance(symbol, sympy.Symbol):
                    where.setdefault(symbol, i)
        if env is None:
            return None
        fixed = [sympy.Eq(s, v) for s, v in env.replacements.items() if s in where and v.is_number]
        conditions = [c for c in [g.expr for g in env.guards] + fixed if c is not sympy.true]
        if not conditions:
            return None
        return SizeGuard(sympy.And(*conditions), list(where), [where[s] for s in where], bool(fixed))

    def fact(self) -> dict[str, Any] | None:
        """The guard as JSON data (its symbols named by the kernel inputs whose dim 0 they are), for
        ``acrobat.runtime.kernel_facts``; ``SizeGuard.of_fact`` reads it back. None when it cannot be read
        back (a condition with torch's own sympy functions)."""
        names = {s: sympy.Symbol(f"dim0_of_input{i}", integer=True) for s, i in zip(self.symbols, self.inputs)}
        condition = self.condition.xreplace(names)
        fact = {"condition": sympy.srepr(condition), "inputs": self.inputs, "specializes": self.specializes}
        try:
            return fact if SizeGuard.of_fact(fact).condition == condition else None
        except Exception:  # noqa: BLE001 - sympy's parser failed on it
            return None

    @staticmethod
    def of_fact(fact: dict[str, Any]) -> "SizeGuard":
        """The guard ``fact()`` described."""
        symbols = [sympy.Symbol(f"dim0_of_input{i}", integer=True) for i in fact["inputs"]]
        return SizeGuard(sympy.parse_expr(fact["condition"]), symbols, list(fact["inputs"]), fact["specializes"])

    def sizes(self, args: Sequence[torch.Tensor]) -> tuple[int, ...]:
        """The dim-0 sizes of the guarded inputs among a launch's arguments ``args``."""
        return tuple(args[i].shape[0] for i in self.inputs)

    def holds(self, args: Sequence[torch.Tensor]) -> bool:
        """Whether the kernel is valid for a launch with arguments ``args`` (evaluated once per size tuple)."""
        sizes = self.sizes(args)
        ok = self._checked.get(sizes)
        if ok is None:
            value = self.condition.xreplace({s: sympy.Integer(n) for s, n in zip(self.symbols, sizes)})
            ok = self._checked[sizes] = value is sympy.true
        return ok

    def __str__(self) -> str:
        return str(self.condition)

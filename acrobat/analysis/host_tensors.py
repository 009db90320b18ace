"""Tensors made from host numbers inside static blocks (§5: a block's batched form).

Inside a static block, a per-instance host number (``node.word_id``) is a
batched 0-d tensor under ``vmap``, so ``torch.tensor(node.word_id)`` would
ask PyTorch to build a tensor from a batched value, which it refuses.
The block lowering (``acrobat.analysis.blocks``) calls the forms below in
place of those functions where their data is a host value; on plain data
they do what the function does.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def tensor_of(data: Any, dtype: torch.dtype | None = None, device: Any = None, requires_grad: bool = False,
              pin_memory: bool = False) -> torch.Tensor:
    """``torch.tensor(data, ...)`` that also takes tensors (a batched host number) and lists of them.

    A tensor keeps its values; its dtype becomes ``dtype``, or what
    ``torch.tensor`` infers from the Python number it stands for (the
    default dtype for a float, int64 for an int, bool for a bool).
    """
    if isinstance(data, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in data):
        data = torch.stack([torch.as_tensor(x) for x in data])
    if not isinstance(data, torch.Tensor):
        return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad, pin_memory=pin_memory)
    if dtype is None:
        dtype = torch.get_default_dtype() if data.is_floating_point() else data.dtype
    out = data.to(dtype=dtype, device=device)
    return out.requires_grad_() if requires_grad else out


#: torch functions that make a tensor from host data, and the forms blocks call instead.
FROM_HOST: dict[Callable, Callable] = {torch.tensor: tensor_of, torch.as_tensor: tensor_of}

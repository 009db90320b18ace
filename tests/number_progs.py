"""Programs where a per-instance host number meets a tensor inside a static block (tests/test_number_promotion.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import acrobat as ab


@ab.program
def zero_d_times_host_float(inst, table):
    scale = 1.0 / len(inst)
    h = torch.zeros(table.shape[1], dtype=table.dtype)
    for x in inst:
        h = torch.tanh(h + table[x])
    return h.sum() * scale, h * scale, h.sum() > scale


@ab.program
def attention_scaled_by_host_float(inst, table):
    H = torch.stack([table[x] for x in inst])
    a = F.softmax(H @ H[-1] / math.sqrt(len(inst)), dim=0)
    return a @ H, a


@ab.program
def int_tensor_and_host_numbers(inst, table):
    counts = torch.tensor(inst[0]) + len(inst)
    half = len(inst) / 2
    return counts * half, counts + len(inst), table[inst[0]] * half

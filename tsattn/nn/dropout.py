"""Dropout with fewer random draws on the CPU.

``torch.nn.functional.dropout`` draws one random number per element through the CPU generator, which
costs several nanoseconds per element: in PatchTST on ETTh1 (dropout 0.3 on 4.8M-element FFN
activations, 13 dropout sites per step) that was over 40% of a training step on a 2-core CPU. This
``Dropout`` draws 64-bit random words instead and cuts each into three uniform 16-bit numbers (the
generator's 63 random bits; the top 16-bit part, whose sign bit is always 0, is not used), so the
generator runs 3x fewer times per element and the mask costs a compare.

The drop probability is ``p`` rounded to a multiple of 2^-16 (at most 7.7e-6 from ``p``), and the
kept elements are scaled by ``1 / (1 - p_rounded)``, so the expectation is exact. On CUDA tensors,
and under ``torch.compile`` (inductor generates its own fused random numbers), it is
``F.dropout``. The masks differ from ``nn.Dropout``'s for the same seed; they depend only on the
seed, as ``nn.Dropout``'s do.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Dropout", "dropout"]

_LEVELS = 1 << 16


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of x with probability ~p (a multiple of 2^-16) and scale the rest; see the module docs."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling() or p == 1.0:
        return F.dropout(x, p, True)
    n = x.numel()
    drop = round(p * _LEVELS)
    if drop == 0:
        return x
    words = torch.empty((n + 2) // 3, dtype=torch.int64, device=x.device).random_()   # 63 random bits each
    parts = words.view(torch.int16).view(-1, 4)[:, :3]                                # uniform in [-2^15, 2^15)
    keep = (parts >= drop - _LEVELS // 2).reshape(-1)[:n].view(x.shape)              # P(keep) = 1 - drop / 2^16
    return x * keep.to(x.dtype).mul_(_LEVELS / (_LEVELS - drop))


class Dropout(nn.Dropout):
    """``nn.Dropout`` with the faster CPU masks of ``tsattn.nn.dropout`` (same arguments, no state)."""

    def forward(self, x: Tensor) -> Tensor:
        if self.inplace:
            return super().forward(x)
        return dropout(x, self.p, self.training)

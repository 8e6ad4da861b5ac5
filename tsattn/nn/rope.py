"""Rotary position embedding (RoPE) with real-valued positions.

Positions need not be integers: for irregular series they are knot times (in units of the median
step, or of the patch stride for patch tokens), so the rotation angle of token j is
``positions[j] * inv_freq``. The score of a rotated query at position p and a rotated key at
position p' then depends on the positions only through p - p' (the relative-position property).

Convention: "rotate half" (GPT-NeoX / LLaMA): the head dimension is split into two halves
(x1, x2) and pair i = (x1[i], x2[i]) is rotated by the angle ``p * base ** (-2 i / D)``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


def rope_angles(positions: Tensor, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotation angles.

    Args:
        positions: [B, N] (or [N]) real-valued token positions.
        head_dim: D, the (even) size of one head.
        base: frequency base; pair i turns at ``base ** (-2 i / D)`` radians per unit position.

    Returns:
        (cos, sin), each [B, 1, N, D/2] (or [1, N, D/2] for 1-D positions), in float32 or float64.
    """
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
    dtype = torch.float64 if positions.dtype == torch.float64 else torch.float32
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=dtype) / head_dim)
    angles = positions.to(dtype)[..., None] * inv_freq                  # [B, N, D/2]
    angles = angles.unsqueeze(-3)                                       # [B, 1, N, D/2]
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x [B, H, N, D] by the angles whose cos/sin are [B, 1, N, D/2]; returns x's dtype."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].to(cos.dtype), x[..., half:].to(cos.dtype)
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """RoPE as a module: ``rope(x, positions)`` rotates queries or keys [B, H, N, D].

    Args:
        head_dim: D, the (even) size of one attention head.
        base: frequency base (10000 as in RoFormer / LLaMA).
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
        self.head_dim = head_dim
        self.base = base

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: [B, H, N, D]; positions: [B, N] or [N] -> rotated x [B, H, N, D]."""
        cos, sin = rope_angles(positions, self.head_dim, self.base)
        return apply_rope(x, cos, sin)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"

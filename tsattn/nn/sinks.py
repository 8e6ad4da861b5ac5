"""The sink knot (k0, v0): the key/value at time tau_0, one unit before the first token.

Continuous attention needs it to cover the first interval [tau_0, tau_1]; softmax attention can
use the same vectors as one extra key so that a softmax-vs-continuous ablation compares like
with like. The three choices of the post, per head:

- ``"zeros"``:   k0 = 0, v0 = 0 (the post's experiments).
- ``"first"``:   k0 = k_1, v0 = v_1 (a copy of the first token's key/value, after RoPE, so the key
                 is constant over the first interval).
- ``"learned"``: trainable per-head k0 [H, 1, D] and v0 [H, 1, D], initialised to zero (so training
                 starts from the "zeros" sink and gradients move it away).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

SINKS = ("zeros", "first", "learned")


class SinkKV(nn.Module):
    """Produces the sink key and value for one attention layer.

    Args:
        kind: "zeros", "first" or "learned".
        n_heads: number of attention heads H.
        head_dim: size D of one head (keys and values).
    """

    def __init__(self, kind: str, n_heads: int, head_dim: int) -> None:
        super().__init__()
        if kind not in SINKS:
            raise ValueError(f"`sink` must be one of {SINKS}, got {kind!r}")
        self.kind = kind
        self.k0: Optional[nn.Parameter] = None
        self.v0: Optional[nn.Parameter] = None
        if kind == "learned":
            self.k0 = nn.Parameter(torch.zeros(n_heads, 1, head_dim))   # [H, 1, D]
            self.v0 = nn.Parameter(torch.zeros(n_heads, 1, head_dim))   # [H, 1, D]

    def forward(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k, v: [B, H, N, D] (k after RoPE) -> (k0, v0), each broadcastable to [B, H, 1, D].

        "zeros" gives [1, H, 1, D] zeros, "first" gives [B, H, 1, D] slices, "learned" gives the
        [H, 1, D] parameters cast to k's dtype (RoPE on a learned key is the caller's business,
        since it needs the sink's position).
        """
        if self.kind == "first":
            return k[:, :, :1], v[:, :, :1]
        if self.kind == "learned":
            return self.k0.to(k.dtype), self.v0.to(v.dtype)
        heads, dim = k.shape[1], k.shape[-1]
        return k.new_zeros(1, heads, 1, dim), v.new_zeros(1, heads, 1, v.shape[-1])

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}"

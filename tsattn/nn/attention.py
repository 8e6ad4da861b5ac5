"""Multi-head self-attention that can be softmax or continuous, with sinks, RoPE and real times.

One layer, two inner attentions behind the same projections:

- ``attention="softmax"``: ``F.scaled_dot_product_attention``. With ``sink="first"`` or
  ``"learned"`` the sink (k0, v0) is prepended as one extra key, visible to every query (also
  under the causal mask), so that softmax and continuous see the same knots. With
  ``sink="zeros"`` softmax gets *no* extra key by default (plain multi-head attention, so that
  PatchTST with softmax is exactly the paper's model); ``softmax_sink=True`` forces the zero key
  (a zero key adds the score 0 and a zero value, i.e. it only dampens the weights).
- ``attention="continuous"``: ``tsattn.continuous_attention`` with the same q, k, v, the sink as
  knot 0 and ``dt`` from the token positions.

Self-attention reads keys and values from the same tokens; cross-attention (``memory=``) reads them
from other tokens at their own times (e.g. forecast queries reading history knots). Rows of a batch
may hold different numbers of real key tokens (``key_lengths``): the padding is ignored exactly, by
a mask for softmax and by the op's ragged rows for continuous attention (a row with no key token
reads the sink alone).

Positions (knot times) are token times in units of one step (index 0..N-1 by default). They give

- ``dt`` for the continuous op: ``dt[..., 0] = 1`` (the sink sits one unit before the first token,
  tau_0 = positions[0] - 1, as in the docs), ``dt[..., j] = positions[j] - positions[j-1]``;
- the RoPE angles of queries and keys; a learned sink key is rotated to its own position tau_0, so
  with RoPE the whole layer depends on positions only through their differences (shift invariant).

Softmax attention ignores ``dt`` (positions reach it only through RoPE).

``set_attention(model, kind)`` switches every layer in place (weights and sinks kept); the
current kind is also stored in the state dict (``get_extra_state``), so a checkpoint written after
a mid-training switch reloads as the kind it was trained with.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..ops import continuous_attention
from .dropout import Dropout
from .rope import apply_rope, rope_angles
from .sinks import SINKS, SinkKV

ATTENTIONS = ("softmax", "continuous")


def _as_float(positions: Tensor) -> Tensor:
    return positions if torch.is_floating_point(positions) else positions.float()


def knot_dt(positions: Tensor) -> Tensor:
    """Interval lengths for the continuous op from token positions [..., N] -> [..., N].

    dt[..., 0] = 1 (sink to first token: the sink is one unit before the first token);
    dt[..., j] = positions[..., j] - positions[..., j - 1]. Positions must increase strictly.
    """
    first = torch.ones_like(positions[..., :1])
    return torch.cat([first, positions.diff(dim=-1)], dim=-1)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention over tokens x [B, N, d_model] with knot positions [B, N].

    Args:
        d_model: token width; split into ``n_heads`` heads of size d_model // n_heads.
        n_heads: number of heads H.
        attention: "softmax" (SDPA) or "continuous" (``tsattn.continuous_attention``); switchable
            later through the ``attention`` attribute or ``set_attention``.
        sink: "zeros", "first" or "learned" (per-head trainable k0/v0), see ``tsattn.nn.sinks``.
        rope: rotate queries and keys by RoPE angles taken from the positions.
        causal: decoder (token i sees tokens <= i, and the sink) or encoder (sees all).
        softmax_sink: whether softmax prepends the sink as an extra key; None (default) = yes for
            "first"/"learned", no for "zeros" (plain softmax attention).
        bias: bias in the q/k/v and output projections (PatchTST: True).
        proj_dropout: dropout after the output projection (PatchTST: the model's dropout).
        rope_base: RoPE frequency base.
        backend: backend of the continuous op ("auto": torch on CPU, Triton on CUDA).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        causal: bool = False,
        softmax_sink: Optional[bool] = None,
        bias: bool = True,
        proj_dropout: float = 0.0,
        rope_base: float = 10000.0,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"`d_model` ({d_model}) must be divisible by `n_heads` ({n_heads})")
        if sink not in SINKS:
            raise ValueError(f"`sink` must be one of {SINKS}, got {sink!r}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        if rope and self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head size, got d_model / n_heads = {self.head_dim}")
        self.attention = attention                      # validated by the property setter
        self.rope = rope
        self.rope_base = rope_base
        self.causal = causal
        self.softmax_sink = sink != "zeros" if softmax_sink is None else softmax_sink
        self.backend = backend
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.sink = SinkKV(sink, n_heads, self.head_dim)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.proj_dropout = Dropout(proj_dropout)

    # -- the switch --------------------------------------------------------------------------
    @property
    def attention(self) -> str:
        """The inner attention, "softmax" or "continuous"; assign to switch in place (weights are shared)."""
        return self._attention

    @attention.setter
    def attention(self, kind: str) -> None:
        if kind not in ATTENTIONS:
            raise ValueError(f"`attention` must be one of {ATTENTIONS}, got {kind!r}")
        self._attention = kind

    def get_extra_state(self) -> dict:
        return {"attention": self._attention}

    def set_extra_state(self, state: dict) -> None:
        self.attention = state["attention"]

    # -- forward -----------------------------------------------------------------------------
    def forward(
        self,
        x: Tensor,
        positions: Optional[Tensor] = None,
        *,
        memory: Optional[Tensor] = None,
        memory_positions: Optional[Tensor] = None,
        key_lengths: Optional[Tensor] = None,
    ) -> Tensor:
        """Self-attention over x, or cross-attention from x to ``memory``.

        Args:
            x: [B, M, d_model] query tokens (and key/value tokens when ``memory`` is None).
            positions: [B, M] or [M] times of the query tokens (None = 0..M-1).
            memory: [B, N, d_model] key/value tokens (cross-attention; needs ``causal=False``).
            memory_positions: [B, N] or [N] their times (None = 0..N-1).
            key_lengths: [B] integer, the number of real key tokens per row (the rest is padding,
                ignored exactly); None = all.
        Returns:
            [B, M, d_model].
        """
        B, M, _ = x.shape
        H, D = self.n_heads, self.head_dim
        if memory is None:
            q, k, v = self.qkv(x).view(B, M, 3, H, D).permute(2, 0, 3, 1, 4)   # each [B, H, M, D]
            memory_positions = positions
        else:
            if self.causal:
                raise ValueError("cross-attention (memory=...) needs a non-causal layer (causal=False)")
            q = self.project_query(x).view(B, M, H, D).transpose(1, 2)        # [B, H, M, D]
            k, v = (t.transpose(1, 2) for t in self.project_memory(memory))    # [B, H, N, D] each
        o = self.attend(q, k, v, positions, memory_positions, key_lengths)      # [B, H, M, D]
        return self.output(o.transpose(1, 2).reshape(B, M, H * D))

    # -- the parts of forward, for callers that project and attend in other layouts ---------------
    def project_query(self, x: Tensor) -> Tensor:
        """Query projection of tokens x [..., d_model] -> [..., d_model] (heads concatenated)."""
        d, w, b = self.d_model, self.qkv.weight, self.qkv.bias
        return F.linear(x, w[:d], None if b is None else b[:d])

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Key and value projections of memory tokens [B, N, d_model] -> two [B, N, H, D]."""
        d, w, b = self.d_model, self.qkv.weight, self.qkv.bias
        B, N, _ = memory.shape
        kv = F.linear(memory, w[d:], None if b is None else b[d:]).view(B, N, 2, self.n_heads, self.head_dim)
        return kv[:, :, 0], kv[:, :, 1]

    def output(self, o: Tensor) -> Tensor:
        """Output projection (and dropout) of attention outputs [..., d_model] (heads concatenated)."""
        return self.proj_dropout(self.out_proj(o))

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        positions: Optional[Tensor] = None,
        memory_positions: Optional[Tensor] = None,
        key_lengths: Optional[Tensor] = None,
    ) -> Tensor:
        """The attention core on projected heads: RoPE, the sink, then softmax or continuous attention.

        Args:
            q: [B, H, M, D]; k, v: [B, H, N, D].
            positions: [B, M] or [M] query times (None = 0..M-1).
            memory_positions: [B, N] or [N] key times (None = 0..N-1); pass the same tensor as
                ``positions`` for self-attention (the rotation is then computed once).
            key_lengths: [B] real keys per row (None = all).
        Returns:
            [B, H, M, D].
        """
        B, H, M, D = q.shape
        N = k.shape[2]
        same_times = memory_positions is positions and M == N
        dt = None                                                   # None = all ones (regular)
        if memory_positions is not None:
            memory_positions = _as_float(memory_positions).expand(B, N)   # [B, N]
            dt = knot_dt(memory_positions)                          # [B, N]
        if self.rope:
            if memory_positions is None:
                memory_positions = torch.arange(N, device=q.device, dtype=torch.float32).expand(B, N)
            cos_k, sin_k = rope_angles(memory_positions, D, self.rope_base)   # [B, 1, N, D/2]
            k = apply_rope(k, cos_k, sin_k)
            if same_times:                                          # self-attention: the same times
                q = apply_rope(q, cos_k, sin_k)
            else:
                if positions is None:
                    positions = torch.arange(M, device=q.device, dtype=torch.float32)
                cos, sin = rope_angles(_as_float(positions).expand(B, M), D, self.rope_base)   # [B, 1, M, D/2]
                q = apply_rope(q, cos, sin)

        k0, v0 = self.sink(k, v)                                    # broadcastable to [B, H, 1, D]
        if self.rope and self.sink.kind == "learned":
            tau0 = memory_positions[:, :1] - 1.0                    # [B, 1] the sink's time
            cos0, sin0 = rope_angles(tau0, D, self.rope_base)       # [B, 1, 1, D/2]
            k0 = apply_rope(k0.expand(B, H, 1, D), cos0, sin0)      # [B, H, 1, D]

        if self._attention == "continuous":
            # validate=False: knot times were checked where the data entered (strictly increasing),
            # so the op's value checks, which synchronise a GPU, are skipped on every step.
            return continuous_attention(q, k, v, k0, v0, causal=self.causal, dt=dt, key_lengths=key_lengths,
                                        backend=self.backend, validate=False)
        return self._softmax(q, k, v, k0, v0, key_lengths)

    def _softmax(self, q: Tensor, k: Tensor, v: Tensor, k0: Tensor, v0: Tensor,
                 key_lengths: Optional[Tensor] = None) -> Tensor:
        """SDPA, with the sink prepended as key 0 when ``softmax_sink`` and padded keys masked out."""
        B, H, M, D = q.shape
        N = k.shape[2]
        mask = None                                                 # [B or 1, 1, M, keys] True = attend
        if key_lengths is not None:
            mask = (torch.arange(N, device=q.device) < key_lengths.to(q.device)[:, None])[:, None, None, :]
        if self.causal:
            causal_mask = torch.ones(M, N, dtype=torch.bool, device=q.device).tril()
            mask = causal_mask if mask is None else mask & causal_mask
        if not self.softmax_sink:
            if mask is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        keys = torch.cat([k0.expand(B, H, 1, D), k], dim=2)         # [B, H, N+1, D]
        values = torch.cat([v0.expand(B, H, 1, v.shape[-1]), v], dim=2)
        if mask is not None:                                        # every query sees the sink
            mask = F.pad(mask, (1, 0), value=True)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, attention={self._attention!r}, "
            f"rope={self.rope}, causal={self.causal}, softmax_sink={self.softmax_sink}"
        )


def set_attention(model: nn.Module, kind: str) -> int:
    """Switch every ``MultiHeadAttention`` in ``model`` to ``kind`` in place; returns how many.

    Weights, sinks included, are untouched, so a callback can call this mid-training (the optimiser
    state stays valid). Raises ValueError for an unknown kind or a model without attention layers.
    """
    if kind not in ATTENTIONS:
        raise ValueError(f"`attention` must be one of {ATTENTIONS}, got {kind!r}")
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no MultiHeadAttention layer to switch")
    for layer in layers:
        layer.attention = kind
    return len(layers)

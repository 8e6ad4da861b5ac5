"""A causal, decoder-only patch forecaster: each patch token forecasts the H rows that follow it.

    x [B, L, C] -> keep the last n = L // P patches (drop the oldest L % P rows)
      -> per token i: RevIN with the statistics of rows up to the end of patch i ("prefix RevIN")
      -> per channel: W_P (+ learned positions) -> dropout
      -> n_layers x pre-norm [LayerNorm -> causal attention -> add ; LayerNorm -> FFN -> add]
      -> LayerNorm -> Linear(d_model -> H) per token -> RevIN^-1 with that token's statistics
      = forward_tokens: [B, n, H, C];  forward = the last token's forecast [B, H, C].

Horizon: direct multi-step. Every token predicts the next H rows in one linear map (no
autoregressive rollout). ``forward`` returns the last token's forecast; ``forward_tokens`` returns
every token's, and ``token_targets(x, y)`` the matching targets from the window and the future
y [B, H, C], so a training loop may put a loss on every position (each token's next H rows always
lie in x followed by y).

Causality: everything is per token or causal (LayerNorm, not BatchNorm; causal attention; prefix
statistics; token times enter only through the token's own start and its predecessor's), so
output i depends only on rows up to the end of patch i, and the last token's statistics are
exactly RevIN over the whole lookback.

Times: positions are patch start times relative to the first kept patch, divided by patch_len
(regular data: 0..n-1); dt for the continuous op = their differences, 1.0 for sink -> first token.
"""
from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor, nn

from ..nn import Dropout, FeedForward, MultiHeadAttention, RevIN, causal_patch_statistics
from .patchtst import check_quantile_count, check_window, patch_positions, quantile_head
from .registry import register_model


class DecoderBlock(nn.Module):
    """Pre-norm causal transformer block (GPT style).

    Args:
        d_model: token width.
        n_heads: attention heads.
        d_ff: FFN hidden width.
        dropout: dropout after attention projection and in / after the FFN.
        attention: "softmax" or "continuous".
        sink: "zeros", "first" or "learned".
        rope: RoPE from token positions.
        softmax_sink: see ``MultiHeadAttention``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        *,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        softmax_sink: Optional[bool] = None,
    ) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(
            d_model, n_heads, attention=attention, sink=sink, rope=rope, causal=True,
            softmax_sink=softmax_sink, proj_dropout=dropout,
        )
        self.norm_ffn = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout_ffn = Dropout(dropout)

    def forward(self, x: Tensor, positions: Optional[Tensor] = None) -> Tensor:
        """x: [B, N, d_model] -> [B, N, d_model]; token i sees tokens <= i only."""
        x = x + self.attn(self.norm_attn(x), positions)
        x = x + self.dropout_ffn(self.ff(self.norm_ffn(x)))
        return x


@register_model("decoder", task="window")
class PatchDecoder(nn.Module):
    """Causal decoder-only patch forecaster: window [B, L, C] (+ times [B, L]) -> forecast [B, H, C].

    Args:
        n_channels: number of input channels C (all are forecast).
        lookback: window length L; the oldest L % patch_len rows are not used.
        horizon: forecast length H, predicted directly from each token.
        attention: "softmax" or "continuous"; switchable with ``tsattn.nn.set_attention``.
        sink: "zeros", "first" or "learned" sink knot (softmax adds it as a key unless "zeros").
        rope: rotary position embedding from the patch positions.
        causal: must be True (a decoder whose tokens see later tokens would leak into the
            per-position forecasts); present for the uniform model signature.
        patch_len: rows per (non-overlapping) patch; stride = patch_len.
        n_layers: decoder blocks.
        n_heads: attention heads.
        d_model: token width (the forecast comes from one token, so wider than PatchTST's 16).
        d_ff: FFN hidden width.
        dropout: dropout on embedded tokens, attention output and FFN.
        revin: prefix reversible instance normalisation (see module docstring).
        revin_affine: learnable per-channel affine in RevIN.
        learned_pos: add a learned positional embedding per token index.
        softmax_sink: force (True) / forbid (False) the sink key in softmax; None = only for
            "first"/"learned" sinks.
        n_quantiles: None (a point forecast) or Q: Q values per forecast point (an extra last
            axis of every output), e.g. the quantiles of a probabilistic forecast.
        median_index: which of the Q outputs is the point forecast (the median; default Q // 2):
            the others learn from the features detached (``QuantileHead``).
    """

    # every channel is forecast from its own history (channels folded into the batch; eval mode)
    channel_independent = True

    def __init__(
        self,
        n_channels: int,
        lookback: int,
        horizon: int,
        *,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        causal: bool = True,
        patch_len: int = 16,
        n_layers: int = 3,
        n_heads: int = 4,
        d_model: int = 64,
        d_ff: int = 128,
        dropout: float = 0.1,
        revin: bool = True,
        revin_affine: bool = False,
        learned_pos: bool = True,
        softmax_sink: Optional[bool] = None,
        n_quantiles: Optional[int] = None,
        median_index: Optional[int] = None,
    ) -> None:
        super().__init__()
        check_quantile_count(n_quantiles)
        if not causal:
            raise ValueError("PatchDecoder is causal by construction; `causal=False` is not supported")
        if lookback < patch_len:
            raise ValueError(f"lookback {lookback} is shorter than one patch ({patch_len})")
        self.n_channels, self.lookback, self.horizon = n_channels, lookback, horizon
        self.patch_len = patch_len
        self.n_tokens = lookback // patch_len
        self.first_row = lookback - self.n_tokens * patch_len           # rows before it are not used
        starts = self.first_row + torch.arange(self.n_tokens) * patch_len
        self.register_buffer("patch_starts", starts, persistent=False)

        self.revin = RevIN(n_channels, affine=revin_affine) if revin else None
        self.W_P = nn.Linear(patch_len, d_model)
        self.W_pos = None
        if learned_pos:
            self.W_pos = nn.Parameter(torch.empty(self.n_tokens, d_model).uniform_(-0.02, 0.02))
        self.dropout = Dropout(dropout)
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model, n_heads, d_ff, dropout, attention=attention, sink=sink, rope=rope,
                         softmax_sink=softmax_sink)
            for _ in range(n_layers)
        )
        self.norm_out = nn.LayerNorm(d_model)
        self.n_quantiles = n_quantiles
        self.head = quantile_head(d_model, horizon, n_quantiles, median_index)

    def token_positions(self, t_x: Optional[Tensor]) -> Optional[Tensor]:
        """Patch positions [B, n_tokens] from knot times [B, L]; None stays None (= 0..n-1)."""
        if t_x is None:
            return None
        return patch_positions(t_x, self.patch_starts, self.patch_len)

    def forward_tokens(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """Every token's forecast: x [B, L, C], t_x [B, L] | None -> [B, n_tokens, H, C] (with
        ``n_quantiles``: [B, n_tokens, H, C, Q]).

        Row h of token i forecasts row ``first_row + (i + 1) * patch_len + h`` of the series that
        continues the window; it depends only on rows < first_row + (i + 1) * patch_len.
        """
        check_window(x, t_x, self.n_channels, self.lookback)
        B, _, C = x.shape
        n, P = self.n_tokens, self.patch_len
        patches = x[:, self.first_row:].reshape(B, n, P, C)          # [B, n, P, C]
        if self.revin is not None:
            mean, std = causal_patch_statistics(patches, self.revin.eps)  # [B, n, 1, C] prefix stats
            patches = self.revin.normalize(patches, mean, std)
        z = patches.permute(0, 3, 1, 2).reshape(B * C, n, P)         # [B*C, n, P]
        u = self.W_P(z)                                              # [B*C, n, d]
        if self.W_pos is not None:
            u = u + self.W_pos
        u = self.dropout(u)
        positions = self.token_positions(t_x)                        # [B, n] or None
        if positions is not None:
            positions = positions.repeat_interleave(C, dim=0)        # [B*C, n]
        for block in self.blocks:
            u = block(u, positions)                                  # [B*C, n, d]
        y = self.head(self.norm_out(u))                              # [B*C, n, H (* Q)]
        if self.n_quantiles is not None:                             # [B, n, Q, H, C]: channels last for RevIN
            y = y.reshape(B, C, n, self.horizon, self.n_quantiles).permute(0, 2, 4, 3, 1)
            if self.revin is not None:
                y = self.revin.denormalize(y, mean[:, :, None], std[:, :, None])
            return y.permute(0, 1, 3, 4, 2)                          # [B, n, H, C, Q]
        y = y.reshape(B, C, n, self.horizon).permute(0, 2, 3, 1)     # [B, n, H, C]
        if self.revin is not None:
            y = self.revin.denormalize(y, mean, std)
        return y

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x: [B, L, C], t_x: [B, L] knot times (None = 0..L-1) -> forecast [B, H, C] (last token)."""
        return self.forward_tokens(x, t_x)[:, -1]

    def token_targets(self, x: Tensor, y: Tensor) -> Tensor:
        """Targets matching ``forward_tokens``: x [B, L, C], y [B, H, C] -> [B, n_tokens, H, C].

        Token i's target is the H rows after patch i in the series x followed by y.
        """
        if y.shape[1] != self.horizon:
            raise ValueError(f"y must have {self.horizon} rows, got shape {tuple(y.shape)}")
        series = torch.cat([x[:, self.first_row + self.patch_len:], y], dim=1)  # [B, (n-1)P + H, C]
        windows = series.unfold(1, self.horizon, self.patch_len)     # [B, n, C, H]
        return windows.transpose(-1, -2)                             # [B, n, H, C]

    def training_pairs(self, x: Tensor, t_x: Optional[Tensor], y: Tensor,
                       index: Union[list[int], slice]) -> tuple[Tensor, Tensor]:
        """What the training loss compares: every token's forecast of the output channels ``index``
        and its targets, [B, n_tokens, H, C_out] each (a causal decoder learns from every token; the
        forecasts have a last axis Q with ``n_quantiles``)."""
        tokens = self.forward_tokens(x, t_x)                                 # [B, n, H, C_in (, Q)]
        return tokens[:, :, :, index], self.token_targets(x[..., index], y)  # [B, n, H, C_out (, Q)], [B, n, H, C_out]

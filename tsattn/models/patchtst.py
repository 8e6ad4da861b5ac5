"""PatchTST (Nie et al., ICLR 2023), supervised, faithful to the official ``PatchTST_backbone``.

    x [B, L, C] -> RevIN (stats of the lookback) -> per channel: replicate-pad ``stride`` rows at the
    end, patches (patch_len, stride) -> W_P + learned positional embedding -> dropout ->
    n_layers x [attention -> dropout -> add -> BatchNorm ; FFN -> dropout -> add -> BatchNorm]
    -> flatten (d_model x n_patches) -> Linear -> head dropout -> RevIN^-1 -> [B, H, C]

Channels are independent: they share all weights and are folded into the batch.

Deviations from the official code (``res_attention=True`` there):
- No residual attention. The official encoder adds the previous layer's pre-softmax scores to the
  current layer's; that couples layers through [N, N] score matrices, which neither SDPA nor the
  continuous op exposes, and has no continuous counterpart. Every layer here is plain attention.
- The official ``attn_dropout`` (0 for every published config) is not offered: the continuous op
  has no dropout, and an ablation should not differ in it.
- ``individual`` heads and the unused ``fc_dropout`` (pretraining head only) are left out.
Everything else (RevIN without affine and subtract-mean as in the official run script, end
padding, W_P, uniform(-0.02, 0.02) learned positions, double dropout on the attention output
(projection dropout + residual dropout), post-norm BatchNorm, GELU FFN, flatten head) follows it.

Times: token positions are the patch *start* times divided by the stride, relative to the first
patch: ``(t_x[:, s_i] - t_x[:, 0]) / stride``; for regular data (t_x None or 0..L-1) that is
0..n_patches-1, and ``dt`` for the continuous op is all ones (first interval, sink -> first
token: 1.0). Rows added by the end padding get times that continue one unit apart after the last
row. Times reach the model only through RoPE and the continuous op's ``dt``; softmax without
RoPE ignores them.

BatchNorm: in train mode its statistics pool the batch and the tokens of each window (all inside
the lookback): not a leak of a sample's future, but a coupling between the samples of a batch;
eval mode uses running statistics (samples independent).
"""
from __future__ import annotations

from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import BatchNormTokens, Dropout, FeedForward, MultiHeadAttention, RevIN
from .registry import register_model


def check_quantile_count(n_quantiles: Optional[int]) -> None:
    """Raise unless ``n_quantiles`` is None or an int >= 1."""
    if n_quantiles is not None and (isinstance(n_quantiles, bool) or not isinstance(n_quantiles, int) or n_quantiles < 1):
        raise ValueError(f"`n_quantiles` must be None or an integer >= 1, got {n_quantiles!r}")


class QuantileHead(nn.Module):
    """A quantile model's output layer: ``horizon * Q`` outputs (output ``h * Q + q``: step h, quantile
    q). The point forecast (quantile ``median``) is a point model's head (``weight`` [H, F], ``bias``
    [H]: the same random draws and names); the other quantiles have their own weights
    (``tail_weight`` [H, Q - 1, F], ``tail_bias`` [H, Q - 1]), which start as copies of the point's,
    so that the quantiles start together as one smooth forecast and training moves them apart. They
    read the features detached: their loss trains their own weights and does not reach the layers
    below, so the features, and the point forecast, are trained as a point model's are. Being a
    linear model on given features, they train at ``TAIL_LR_SCALE`` times the model's learning rate
    (``ForecastModule.configure_optimizers``): at the rates deep models use (1e-4 for PatchTST) they
    would move apart too slowly to be intervals after a short schedule."""

    TAIL_LR_SCALE = 10.0

    def __init__(self, in_features: int, horizon: int, n_quantiles: int, median: int) -> None:
        super().__init__()
        if not 0 <= median < n_quantiles:
            raise ValueError(f"`median_index` must be in [0, {n_quantiles}), got {median}")
        point = nn.Linear(in_features, horizon)                      # the draws of a point model's head
        self.in_features, self.out_features = in_features, horizon * n_quantiles
        self.horizon, self.n_quantiles, self.median = horizon, n_quantiles, median
        self.weight, self.bias = point.weight, point.bias
        self.tail_weight = nn.Parameter(point.weight.detach()[:, None].repeat(1, n_quantiles - 1, 1))
        self.tail_bias = nn.Parameter(point.bias.detach()[:, None].repeat(1, n_quantiles - 1))

    def tail_parameters(self) -> list[nn.Parameter]:
        """The other quantiles' weights (trained at ``TAIL_LR_SCALE`` times the learning rate)."""
        return [self.tail_weight, self.tail_bias]

    def forward(self, x: Tensor) -> Tensor:
        H, m = self.horizon, self.median
        centre = F.linear(x, self.weight, self.bias).unsqueeze(-1)                         # [..., H, 1]
        tails = F.linear(x.detach(), self.tail_weight.flatten(0, 1), self.tail_bias.flatten())
        tails = tails.unflatten(-1, (H, self.n_quantiles - 1))                             # [..., H, Q - 1]
        return torch.cat([tails[..., :m], centre, tails[..., m:]], dim=-1).flatten(-2)


def quantile_head(in_features: int, horizon: int, n_quantiles: Optional[int],
                  median_index: Optional[int] = None) -> nn.Module:
    """The output layer: a point head ``nn.Linear(in_features, horizon)`` or, for ``n_quantiles`` Q > 1,
    a ``QuantileHead`` whose point forecast is output ``median_index`` (default ``Q // 2``)."""
    if not n_quantiles or n_quantiles == 1:
        return nn.Linear(in_features, horizon * (n_quantiles or 1))
    return QuantileHead(in_features, horizon, n_quantiles, n_quantiles // 2 if median_index is None else median_index)


def check_window(x: Tensor, t_x: Optional[Tensor], n_channels: int, lookback: int) -> None:
    """Raise ValueError unless x is [B, lookback, n_channels] and t_x is None or [B, lookback]."""
    if x.dim() != 3 or x.shape[1] != lookback or x.shape[2] != n_channels:
        raise ValueError(f"x must have shape [B, L={lookback}, C={n_channels}], got {tuple(x.shape)}")
    if t_x is not None and tuple(t_x.shape) != tuple(x.shape[:2]):
        raise ValueError(f"t_x must have shape [B, L] = {tuple(x.shape[:2])}, got {tuple(t_x.shape)}")


def patch_positions(t_x: Tensor, starts: Tensor, stride: int) -> Tensor:
    """Token positions of patches: start times relative to the first patch, in units of ``stride``.

    Args:
        t_x: [B, L'] knot times of the (possibly padded) series, in units of the median step.
        starts: [N] row index where each patch starts.
        stride: rows between consecutive patch starts.

    Returns:
        [B, N] float positions; 0..N-1 when t_x is 0..L'-1.
    """
    t_start = t_x[:, starts].float()                                 # [B, N]
    return (t_start - t_start[:, :1]) / stride


class PatchTSTEncoderLayer(nn.Module):
    """One post-norm encoder layer of PatchTST (``TSTEncoderLayer``, without residual attention).

    Args:
        d_model: token width.
        n_heads: attention heads.
        d_ff: FFN hidden width.
        dropout: projection, residual and FFN dropout.
        attention: "softmax" or "continuous".
        sink: "zeros", "first" or "learned".
        rope: RoPE on queries/keys from token positions.
        causal: causal attention (PatchTST: False).
        softmax_sink: see ``MultiHeadAttention`` (None = only for non-zero sinks).
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
        causal: bool = False,
        softmax_sink: Optional[bool] = None,
    ) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(
            d_model, n_heads, attention=attention, sink=sink, rope=rope, causal=causal,
            softmax_sink=softmax_sink, proj_dropout=dropout,
        )
        self.dropout_attn = Dropout(dropout)
        self.norm_attn = BatchNormTokens(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout_ffn = Dropout(dropout)
        self.norm_ffn = BatchNormTokens(d_model)

    def forward(self, x: Tensor, positions: Optional[Tensor] = None) -> Tensor:
        """x: [B, N, d_model], positions [B, N] or None -> [B, N, d_model]."""
        x = self.norm_attn(x + self.dropout_attn(self.attn(x, positions)))
        x = self.norm_ffn(x + self.dropout_ffn(self.ff(x)))
        return x


@register_model("patchtst", task="window")
class PatchTST(nn.Module):
    """PatchTST forecaster: window [B, L, C] (+ knot times [B, L]) -> forecast [B, H, C].

    Defaults are the paper's PatchTST/42 ETTh1 configuration (with L = 336: 42 patches).

    Args:
        n_channels: number of input channels C (all are forecast).
        lookback: window length L.
        horizon: forecast length H.
        attention: "softmax" (the paper) or "continuous"; switchable with ``tsattn.nn.set_attention``.
        sink: "zeros", "first" or "learned" sink knot (softmax adds it as a key unless "zeros").
        rope: rotary position embedding from the patch positions (the paper: False).
        causal: causal encoder attention (the paper: False, bidirectional).
        patch_len: rows per patch.
        stride: rows between patch starts.
        padding_patch: "end" replicates the last row ``stride`` times before patching (one extra
            patch, as in the official code), or None.
        n_layers: encoder layers.
        n_heads: attention heads.
        d_model: token width.
        d_ff: FFN hidden width.
        dropout: dropout on the embedded tokens, attention output, residuals and FFN.
        head_dropout: dropout after the flatten head's linear.
        revin: reversible instance normalisation with statistics of the lookback.
        revin_affine: learnable per-channel affine in RevIN (official run script: False).
        learned_pos: add the learned positional embedding (the paper: True).
        n_quantiles: None (a point forecast [B, H, C]) or Q: Q values per forecast point
            ([B, H, C, Q], the head's outputs Q times as many), e.g. the quantiles of a
            probabilistic forecast (``tsattn.tasks`` sorts them).
        median_index: which of the Q outputs is the point forecast (the median; default Q // 2):
            the others learn from the features detached (``QuantileHead``).
        softmax_sink: force (True) / forbid (False) the sink key in softmax; None = only for
            "first"/"learned" sinks.
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
        causal: bool = False,
        patch_len: int = 16,
        stride: int = 8,
        padding_patch: Optional[str] = "end",
        n_layers: int = 3,
        n_heads: int = 4,
        d_model: int = 16,
        d_ff: int = 128,
        dropout: float = 0.3,
        head_dropout: float = 0.0,
        revin: bool = True,
        revin_affine: bool = False,
        learned_pos: bool = True,
        softmax_sink: Optional[bool] = None,
        n_quantiles: Optional[int] = None,
        median_index: Optional[int] = None,
    ) -> None:
        super().__init__()
        check_quantile_count(n_quantiles)
        if padding_patch not in ("end", None):
            raise ValueError(f"`padding_patch` must be 'end' or None, got {padding_patch!r}")
        padded = lookback + (stride if padding_patch == "end" else 0)
        if padded < patch_len:
            raise ValueError(f"lookback {lookback} is too short for patch_len {patch_len}")
        self.n_channels, self.lookback, self.horizon = n_channels, lookback, horizon
        self.patch_len, self.stride, self.padding_patch = patch_len, stride, padding_patch
        self.n_patches = (padded - patch_len) // stride + 1              # 42 for L=336, 16/8, "end"
        self.register_buffer("patch_starts", torch.arange(self.n_patches) * stride, persistent=False)

        self.revin = RevIN(n_channels, affine=revin_affine) if revin else None
        self.W_P = nn.Linear(patch_len, d_model)
        self.W_pos = None
        if learned_pos:
            self.W_pos = nn.Parameter(torch.empty(self.n_patches, d_model).uniform_(-0.02, 0.02))
        self.dropout = Dropout(dropout)
        self.layers = nn.ModuleList(
            PatchTSTEncoderLayer(
                d_model, n_heads, d_ff, dropout, attention=attention, sink=sink, rope=rope,
                causal=causal, softmax_sink=softmax_sink,
            )
            for _ in range(n_layers)
        )
        self.n_quantiles = n_quantiles
        self.head = quantile_head(d_model * self.n_patches, horizon, n_quantiles, median_index)
        self.head_dropout = Dropout(head_dropout)

    def token_positions(self, t_x: Optional[Tensor]) -> Optional[Tensor]:
        """Patch positions [B, n_patches] from knot times [B, L]; None stays None (= 0..n-1)."""
        if t_x is None:
            return None
        if self.padding_patch == "end":                              # padded rows: one unit apart
            steps = torch.arange(1, self.stride + 1, device=t_x.device, dtype=t_x.dtype)
            t_x = torch.cat([t_x, t_x[:, -1:] + steps], dim=1)      # [B, L + stride]
        return patch_positions(t_x, self.patch_starts, self.stride)

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x: [B, L, C], t_x: [B, L] knot times (None = 0..L-1) -> forecast [B, H, C]."""
        check_window(x, t_x, self.n_channels, self.lookback)
        B, L, C = x.shape
        if self.revin is not None:
            mean, std = self.revin.statistics(x)                     # [B, 1, C] from the lookback only
            x = self.revin.normalize(x, mean, std)
        z = x.permute(0, 2, 1)                                       # [B, C, L]
        if self.padding_patch == "end":
            z = F.pad(z, (0, self.stride), mode="replicate")         # [B, C, L + stride]
        z = z.unfold(-1, self.patch_len, self.stride)                # [B, C, n, P]
        u = self.W_P(z).reshape(B * C, self.n_patches, -1)           # [B*C, n, d]
        if self.W_pos is not None:
            u = u + self.W_pos
        u = self.dropout(u)
        positions = self.token_positions(t_x)                        # [B, n] or None
        if positions is not None:
            positions = positions.repeat_interleave(C, dim=0)        # [B*C, n]
        for layer in self.layers:
            u = layer(u, positions)                                  # [B*C, n, d]
        u = u.reshape(B, C, self.n_patches, -1).transpose(-1, -2)    # [B, C, d, n] (official order)
        y = self.head_dropout(self.head(u.flatten(-2)))              # [B, C, H (* Q)]
        if self.n_quantiles is not None:                             # [B, Q, H, C]: channels last for RevIN
            y = y.reshape(B, C, self.horizon, self.n_quantiles).permute(0, 3, 2, 1)
            if self.revin is not None:
                y = self.revin.denormalize(y, mean[:, None], std[:, None])
            return y.permute(0, 2, 3, 1)                             # [B, H, C, Q]
        y = y.permute(0, 2, 1)                                       # [B, H, C]
        if self.revin is not None:
            y = self.revin.denormalize(y, mean, std)
        return y

    def training_pairs(self, x: Tensor, t_x: Optional[Tensor], y: Tensor,
                       index: Union[list[int], slice]) -> tuple[Tensor, Tensor]:
        """What the training loss compares: the forecast's output channels ``index`` [B, H, C_out]
        (``[B, H, C_out, Q]`` with ``n_quantiles``) and the targets ``y`` [B, H, C_out]."""
        return self(x, t_x)[:, :, index], y

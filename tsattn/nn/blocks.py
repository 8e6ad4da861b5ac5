"""Small building blocks shared by the models: RevIN, the feed-forward network, BatchNorm on tokens."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .dropout import Dropout


class RevIN(nn.Module):
    """Reversible instance normalisation (Kim et al., 2022), as in the official PatchTST.

    Statistics are computed by the caller (``statistics`` over the lookback, or
    ``causal_patch_statistics`` for a decoder) and passed explicitly, so nothing is hidden in
    module state and nothing outside the lookback can reach them. Statistics are detached, as in
    the official code. With ``affine`` a per-channel weight/bias is applied after normalising and
    undone (``(y - b) / (w + eps^2)``) before denormalising.

    Args:
        n_channels: number of channels C (size of the last axis).
        affine: learn a per-channel scale and shift (official PatchTST default: False).
        eps: added to the variance (and, squared, to the affine weight when undoing it).
    """

    def __init__(self, n_channels: int, *, affine: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.n_channels = n_channels
        self.affine = affine
        self.eps = eps
        if affine:
            self.weight = nn.Parameter(torch.ones(n_channels))
            self.bias = nn.Parameter(torch.zeros(n_channels))

    def statistics(self, x: Tensor, dim: int = -2) -> tuple[Tensor, Tensor]:
        """Mean and std (biased variance + eps) of x over the time axis ``dim``, kept, detached."""
        mean = x.mean(dim=dim, keepdim=True).detach()
        std = torch.sqrt(x.var(dim=dim, keepdim=True, unbiased=False) + self.eps).detach()
        return mean, std

    def normalize(self, x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        """(x - mean) / std, then the affine map; channels on the last axis."""
        x = (x - mean) / std
        if self.affine:
            x = x * self.weight + self.bias
        return x

    def denormalize(self, y: Tensor, mean: Tensor, std: Tensor) -> Tensor:
        """Inverse of ``normalize`` with the same statistics."""
        if self.affine:
            y = (y - self.bias) / (self.weight + self.eps * self.eps)
        return y * std + mean

    def extra_repr(self) -> str:
        return f"n_channels={self.n_channels}, affine={self.affine}, eps={self.eps}"


def causal_patch_statistics(patches: Tensor, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """Prefix mean/std for a causal model: token i uses only the rows of patches 0..i.

    Args:
        patches: [B, N, P, C] non-overlapping patches in time order.
        eps: added to the variance.

    Returns:
        (mean, std), each [B, N, 1, C], detached. The last token's statistics are those of the
        whole input (= ``RevIN.statistics`` over the lookback).
    """
    patches = patches.detach()
    ref = patches[:, :1].mean(dim=(1, 2), keepdim=True)             # [B, 1, 1, C] shift for stability
    centred = patches - ref
    count = patches.shape[2] * torch.arange(1, patches.shape[1] + 1, device=patches.device, dtype=patches.dtype)
    count = count.view(1, -1, 1, 1)                                  # [1, N, 1, 1] rows seen so far
    s1 = centred.sum(dim=2, keepdim=True).cumsum(dim=1) / count      # [B, N, 1, C] prefix mean - ref
    s2 = centred.square().sum(dim=2, keepdim=True).cumsum(dim=1) / count
    var = (s2 - s1.square()).clamp_min(0.0)
    return ref + s1, torch.sqrt(var + eps)


class FeedForward(nn.Module):
    """Position-wise MLP: Linear -> GELU -> Dropout -> Linear (PatchTST's ``ff``).

    Args:
        d_model: token width.
        d_ff: hidden width.
        dropout: dropout between the two linears.
        bias: biases in both linears.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff, bias=bias),
            nn.GELU(),
            Dropout(dropout),
            nn.Linear(d_ff, d_model, bias=bias),
        )

    def forward(self, x: Tensor) -> Tensor:
        """x: [..., d_model] -> [..., d_model]."""
        return self.net(x)


class BatchNormTokens(nn.Module):
    """BatchNorm1d over the feature axis of tokens [B, N, d] (PatchTST's Transpose-BatchNorm-Transpose).

    In train mode the statistics are pooled over the batch *and* the N tokens of each window; all
    of them lie inside the lookback windows of the batch, so this is not a leak of a sample's own
    future, but a sample's train-mode output does depend on the other samples of its batch (which,
    in a shuffled time-series batch, may come from later windows). In eval mode the running
    statistics of the training data are used and samples are independent. Causal models should
    use LayerNorm instead (per token).

    Args:
        d_model: token width.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x: [B, N, d] -> [B, N, d]."""
        return self.norm(x.transpose(1, 2)).transpose(1, 2)

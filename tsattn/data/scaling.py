"""Standardisation fit on the train segment only (scikit-learn ``StandardScaler``, as published).

A zero-variance channel gets ``scale_ = 1`` from scikit-learn, so it scales to ``x - mean`` (zeros
on train), never NaN.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from sklearn.preprocessing import StandardScaler

__all__ = ["fit_scaler", "inverse_transform_channels", "scaler_from_stats"]


def fit_scaler(train_values: np.ndarray) -> StandardScaler:
    """Fit a ``StandardScaler`` on ``train_values`` [N_train, C] (float64; population std, ddof 0)."""
    scaler = StandardScaler().fit(np.asarray(train_values, dtype=np.float64))
    assert np.all(scaler.scale_ > 0) and np.all(np.isfinite(scaler.scale_)), "StandardScaler gave a zero scale"
    return scaler


def scaler_from_stats(mean: Sequence[float], scale: Sequence[float]) -> StandardScaler:
    """A fitted ``StandardScaler`` with the given per-channel ``mean`` [C] and ``scale`` [C] (e.g. the
    statistics a checkpoint stores): ``transform`` then gives exactly what the original scaler gave."""
    mean_ = np.asarray(mean, dtype=np.float64).reshape(-1)
    scale_ = np.asarray(scale, dtype=np.float64).reshape(-1)
    if mean_.shape != scale_.shape or not mean_.size:
        raise ValueError(f"mean and scale must be two lists of one value per channel; got {mean_.shape} and {scale_.shape}")
    if not (np.all(np.isfinite(mean_)) and np.all(np.isfinite(scale_)) and np.all(scale_ > 0)):
        raise ValueError("scaler statistics must be finite, with every scale > 0")
    scaler = StandardScaler()
    scaler.mean_, scaler.scale_, scaler.var_ = mean_, scale_, scale_**2
    scaler.n_features_in_ = mean_.size
    scaler.n_samples_seen_ = np.int64(0)
    return scaler


def inverse_transform_channels(y: torch.Tensor, scaler: StandardScaler, index: Sequence[int]) -> torch.Tensor:
    """Undo the scaling of ``y`` [..., len(index)] whose last axis holds the scaler's channels ``index``.

    Returns a tensor of ``y``'s dtype and device: ``y * scale[index] + mean[index]``.
    """
    if y.shape[-1] != len(index):
        raise ValueError(f"y has {y.shape[-1]} channels on its last axis; expected {len(index)}")
    idx = list(index)
    scale = torch.as_tensor(scaler.scale_[idx], dtype=y.dtype, device=y.device)
    mean = torch.as_tensor(scaler.mean_[idx], dtype=y.dtype, device=y.device)
    return y * scale + mean

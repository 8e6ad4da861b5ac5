"""Sliding windows over one split segment, built lazily by index arithmetic (no per-window copies).

Window ``i`` of a segment covers rows ``[i, i + L)`` as input and ``[i + L, i + L + H)`` as target,
stride 1; a segment of ``n`` rows holds ``n - L - H + 1`` windows.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch.utils.data import Dataset

from ..errors import DataError

__all__ = ["EpochShuffleSampler", "WindowDataset", "window_times"]


class WindowDataset(Dataset):
    """Forecasting windows of one segment; every item is a dict of tensors.

    Item keys:
        ``"x"``: float32 [L, C_in], the (scaled) lookback rows.
        ``"y"``: float32 [H, C_out], the (scaled) target channels of the next H rows.
        ``"t_x"``: float32 [L], knot times of the lookback rows relative to its first row
            (``t_x[0] == 0``; a regular series gives ``arange(L)``).
        ``"t_y"``: float32 [H], knot times of the target rows on the same origin
            (a regular series gives ``arange(L, L + H)``).
        ``"x_mark"``: float32 [L, F] and ``"y_mark"``: float32 [H, F], calendar features, only when
            ``marks`` is given.
        ``"index"``: int64 scalar, the window's first row within the segment.

    Args:
        values: float32 [n, C_in], the segment's rows (a view is fine; it is not copied).
        knot_times: [n], the segment's times (any origin): int64 ticks (e.g. nanoseconds), or
            float64 times.
        lookback: L >= 1.
        horizon: H >= 1.
        target_index: positions of the C_out target channels among the C_in; None means all.
        marks: float32 [n, F] calendar features, or None.
        time_unit: ticks per unit of the returned knot times: a window's times are
            ``(knot_times[i:end] - knot_times[i]) / time_unit`` in float64, then float32. With int64
            ticks the difference is exact, so a window's times do not depend on the origin.
    """

    def __init__(
        self,
        values: torch.Tensor,
        knot_times: torch.Tensor,
        lookback: int,
        horizon: int,
        target_index: Optional[Sequence[int]] = None,
        marks: Optional[torch.Tensor] = None,
        time_unit: float = 1.0,
    ) -> None:
        if values.dim() != 2:
            raise DataError(f"values must be [rows, channels]; got shape {tuple(values.shape)}")
        if knot_times.shape != values.shape[:1]:
            raise DataError(f"knot_times must be [{values.shape[0]}]; got shape {tuple(knot_times.shape)}")
        if marks is not None and marks.shape[0] != values.shape[0]:
            raise DataError(f"marks must have {values.shape[0]} rows; got shape {tuple(marks.shape)}")
        if not time_unit > 0:
            raise DataError(f"time_unit must be > 0; got {time_unit!r}")
        self.values = values
        self.knot_times = knot_times
        self.time_unit = float(time_unit)
        self.marks = marks
        self.lookback = int(lookback)
        self.horizon = int(horizon)
        n_in = values.shape[1]
        if target_index is None or list(target_index) == list(range(n_in)):
            self._target: Optional[torch.Tensor] = None  # all channels: y is a plain row slice
            self.target_index = tuple(range(n_in))
        else:
            self.target_index = tuple(int(i) for i in target_index)
            self._target = torch.tensor(self.target_index, dtype=torch.long)
        self._len = max(0, values.shape[0] - self.lookback - self.horizon + 1)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        i = int(index)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"window index {index} out of range for {self._len} windows")
        mid, end = i + self.lookback, i + self.lookback + self.horizon
        y = self.values[mid:end]
        if self._target is not None:
            y = y.index_select(1, self._target)
        t = window_times(self.knot_times[i:end], self.time_unit)
        item = {
            "x": self.values[i:mid],
            "y": y,
            "t_x": t[: self.lookback],
            "t_y": t[self.lookback :],
            "index": torch.tensor(i, dtype=torch.int64),
        }
        if self.marks is not None:
            item["x_mark"] = self.marks[i:mid]
            item["y_mark"] = self.marks[mid:end]
        return item


def window_times(ticks: torch.Tensor, time_unit: float = 1.0) -> torch.Tensor:
    """float32 [..., n]: ``(ticks - ticks[..., 0]) / time_unit`` for ``ticks`` [..., n] (int64 or
    float64; one window or a batch of them); the difference is taken in the input dtype (exact for
    int64), the division in float64."""
    return ((ticks - ticks[..., :1]).to(torch.float64) / time_unit).to(torch.float32)


class EpochShuffleSampler(torch.utils.data.RandomSampler):
    """A random permutation per epoch that depends only on (seed, epoch).

    Lightning calls ``set_epoch`` before every train epoch, so a run resumed from a checkpoint
    draws the same batches as an uninterrupted one. Under a distributed strategy Lightning swaps
    it for a ``DistributedSampler`` (it is a ``RandomSampler``), which is epoch-seeded too.

    Args:
        data_source: the dataset.
        seed: base seed; None draws one from torch's global RNG (reproducible after
            ``seed_everything``).
    """

    def __init__(self, data_source, seed: Optional[int] = None) -> None:
        super().__init__(data_source)
        self.seed = int(torch.randint(0, 2**31, ()).item()) if seed is None else int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + self.epoch) % 2**63)
        yield from torch.randperm(len(self.data_source), generator=generator).tolist()

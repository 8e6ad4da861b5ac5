"""Train / val / test borders of the benchmark protocol (Time-Series-Library, exactly).

Every segment after the first starts ``lookback`` rows early, so that each target row of the
segment is forecast by exactly one window; a segment of ``n`` rows holds ``n - lookback - horizon + 1``
windows at stride 1, and all of them are kept (no drop-last).

- ``"ett-hour"``: 12 / 4 / 4 months of 30 days of hourly rows (8640 / 2880 / 2880); rows after
  month 20 (14400) are unused.
- ``"ett-minute"``: the same at 15 minutes (x4: 34560 / 11520 / 11520; rows after 57600 unused).
- ``"ratio"``: ``num_train = int(n * 0.7)``, ``num_test = int(n * 0.2)``, val the rest.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DataError
from ..validation import SPLITS, check_positive_int

__all__ = ["SPLIT_PROTOCOLS", "SPLITS", "SplitBorders", "check_protocol", "split_borders"]

SPLIT_PROTOCOLS = ("ett-hour", "ett-minute", "ratio")
_MONTH_HOURS = 30 * 24


@dataclass(frozen=True)
class SplitBorders:
    """Row ranges ``[start, end)`` of the three segments (``start`` = TSLib's border1, ``end`` = border2)."""

    starts: tuple[int, int, int]
    ends: tuple[int, int, int]
    protocol: str
    lookback: int

    def segment(self, split: str) -> slice:
        """The rows of ``split`` ("train", "val" or "test"), lookback included."""
        i = _split_position(split)
        return slice(self.starts[i], self.ends[i])

    def n_rows(self, split: str) -> int:
        s = self.segment(split)
        return s.stop - s.start

    def n_windows(self, split: str, horizon: int) -> int:
        """Windows of ``split`` at stride 1: ``rows - lookback - horizon + 1`` (0 if negative)."""
        return max(0, self.n_rows(split) - self.lookback - horizon + 1)

    def check_windows(self, horizon: int) -> None:
        """Raise unless every split holds at least one window of lookback + horizon rows."""
        need = self.lookback + horizon
        for split in SPLITS:
            have = self.n_rows(split)
            if have < need:
                raise DataError(
                    f"too few rows for lookback + horizon = {self.lookback} + {horizon} = {need} in the "
                    f"{split} split: it has {have} rows (lookback rows included) under split="
                    f"{self.protocol!r}; use a shorter lookback or horizon, or more data"
                )


def _split_position(split: str) -> int:
    if split not in SPLITS:
        raise DataError(f"split must be one of {SPLITS}; got {split!r}")
    return SPLITS.index(split)


def check_protocol(split: str) -> str:
    """Raise unless ``split`` names a protocol."""
    if split not in SPLIT_PROTOCOLS:
        raise DataError(
            f"split must be one of {SPLIT_PROTOCOLS} ('ett-hour' / 'ett-minute': 12/4/4 months of ETT "
            f"data; 'ratio': 7:1:2 by rows); got {split!r}"
        )
    return split


def split_borders(n_rows: int, lookback: int, split: str = "ratio") -> SplitBorders:
    """The protocol's segment borders for a series of ``n_rows`` rows.

    Args:
        n_rows: rows in the whole series.
        lookback: L, rows of history per window (val and test start L rows early).
        split: ``"ett-hour"``, ``"ett-minute"`` or ``"ratio"``.
    """
    lookback = check_positive_int("lookback", lookback)
    check_protocol(split)
    if split in ("ett-hour", "ett-minute"):
        month = _MONTH_HOURS * (1 if split == "ett-hour" else 4)
        ends = (12 * month, 16 * month, 20 * month)
        if n_rows < ends[2]:
            raise DataError(
                f"split={split!r} needs at least {ends[2]} rows (20 months of 30 days); the data has "
                f"{n_rows}; use split='ratio' for data other than ETT"
            )
        starts = (0, ends[0] - lookback, ends[1] - lookback)
    else:
        num_train = int(n_rows * 0.7)
        num_test = int(n_rows * 0.2)
        num_val = n_rows - num_train - num_test
        ends = (num_train, num_train + num_val, n_rows)
        starts = (0, num_train - lookback, n_rows - num_test - lookback)
    if min(starts) < 0:
        raise DataError(
            f"lookback={lookback} is longer than the train segment ({ends[0]} rows under split={split!r}); "
            "the val segment would start before the first row: use a shorter lookback or more data"
        )
    return SplitBorders(starts=starts, ends=ends, protocol=split, lookback=lookback)

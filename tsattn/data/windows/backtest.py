"""Rolling-origin backtests of the window task: the last ``n_windows`` forecast origins of a series,
``step`` rows apart, each window's inputs the ``lookback`` rows before its origin (nothing at or after
it), its targets the ``horizon`` rows from it.

Origin k (0-based) is row ``N - horizon - (n_windows - 1 - k) * step``: the last window's targets end
with the data. The ``cutoff`` of a window is the timestamp of its last input row (the last one a
forecast made then could have seen), as neuralforecast's cross-validation names it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from ..errors import DataError
from ..validation import check_positive_int
from .datamodule import CSVDataModule
from .splits import split_borders

__all__ = ["BacktestWindows", "backtest_frame", "backtest_windows", "in_sample_windows"]


@dataclass(frozen=True)
class BacktestWindows:
    """K windows of a backtest.

    Attributes:
        starts: int64 [K], each window's first target row.
        horizon: h, target rows per window.
        cutoffs: [K] the timestamp of each window's last input row.
        times: [K, h] the target rows' timestamps.
        observed: float64 [K, h, C_out], the target rows' values in units.
    """

    starts: np.ndarray
    horizon: int
    cutoffs: pd.DatetimeIndex
    times: np.ndarray
    observed: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def backtest_windows(dm: CSVDataModule, n_windows: int, step: int = 1, horizon: Optional[int] = None) -> BacktestWindows:
    """The windows of a backtest over ``dm``'s whole series (see the module docstring).

    Raises:
        DataError: a horizon longer than the model's, a step of 0, or more windows than the data holds.
    """
    n_windows = check_positive_int("n_windows", n_windows)
    step = check_positive_int("step", step)
    h = dm.horizon if horizon is None else check_positive_int("horizon", horizon)
    if h > dm.horizon:
        raise DataError(
            f"a backtest horizon of {h} rows is longer than the model's ({dm.horizon}): it never learnt to forecast "
            f"that far; pass horizon <= {dm.horizon}, or fit a model with a longer horizon"
        )
    table = dm.table
    N, L = len(table), dm.lookback
    fit = (N - L - h) // step + 1 if N >= L + h else 0
    if n_windows > fit:
        raise DataError(
            f"n_windows={n_windows} do not fit the data: {N} rows hold at most {fit} window(s) of lookback {L} + horizon "
            f"{h} rows at step {step}; pass n_windows <= {fit}, a smaller step, or longer data"
        )
    starts = N - h - (n_windows - 1 - np.arange(n_windows)) * step                    # [K]
    rows = starts[:, None] + np.arange(h)                                             # [K, h]
    columns = [table.columns.index(c) for c in dm.target_names]
    return BacktestWindows(starts=starts, horizon=h, cutoffs=table.timestamps[starts - 1],
                           times=np.asarray(table.timestamps)[rows], observed=table.values[rows][..., columns])


def backtest_frame(windows: BacktestWindows, forecasts: np.ndarray, channels: list[str], time_name: str,
                   quantiles: Optional[object] = None) -> pd.DataFrame:
    """The tidy frame of a backtest: one row per (window, target row, output channel) with ``cutoff``,
    the time column, ``variable`` (the channel), ``step`` (1 .. h), ``forecast`` (a quantile model's
    median, with its intervals ``forecast-lo-80`` ... beside it) and ``observed``, in units.

    Args:
        windows: the backtest's windows.
        forecasts: [K, h, C_out] (a quantile model's [K, h, C_out, Q]) in units.
        channels: the C_out output channel names.
        time_name: the name of the time column.
        quantiles: the quantile model's ``QuantileSpec`` (None for a point model).
    """
    K, h, C = windows.observed.shape
    frame = pd.DataFrame({
        "cutoff": np.repeat(np.asarray(windows.cutoffs), h * C),
        time_name: np.repeat(windows.times.reshape(-1), C),
        "variable": np.tile(np.asarray(channels, dtype=object), K * h),
        "step": np.tile(np.repeat(np.arange(1, h + 1), C), K),
    })
    if quantiles is None:
        frame["forecast"] = forecasts.reshape(-1)
    else:
        for suffix, q in quantiles.suffixes():
            frame[f"forecast{suffix}"] = forecasts[..., q].reshape(-1)
    frame["observed"] = windows.observed.reshape(-1)
    return frame


def in_sample_windows(dm: CSVDataModule, windows: BacktestWindows) -> int:
    """How many of the windows forecast rows of ``dm``'s train segment (for the data a model was fit
    on: rows its weights and scaler were fit on, so that their errors are in-sample)."""
    stop = split_borders(len(dm.table), dm.lookback, dm.split).segment("train").stop
    return int((windows.starts < stop).sum())

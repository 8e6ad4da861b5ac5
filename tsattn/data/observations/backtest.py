"""Rolling-origin backtests of the observation task: forecast origins (cutoffs) in time, each series'
history before a cutoff (nothing at or after it is read), every observation of the next ``horizon``
time units a target at its own time and variable.

Cutoffs: given (``cutoffs=[24.0]``; timestamps for datetime data), the same for every series; or the
last ``n_windows`` of each series, ``step`` time units apart, the last ``horizon`` before the series'
last observation: ``t_last - horizon - (n_windows - 1 - k) * step``. A window's targets are the
observations in ``[cutoff, cutoff + horizon)`` (a model fit to forecast everything after its origins,
``horizon=None``: every later observation). A series without history before a cutoff has no window
there.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from ..validation import check_positive_int, check_span
from .dataset import ForecastSampleDataset
from .samples import ForecastSamples, rows_before
from .requests import as_shown, in_time_units, parse_times

__all__ = ["backtest_frame", "backtest_samples", "in_sample_windows"]


def _cutoff_times(dm: Any, n_windows: int, step: Optional[float], horizon: Optional[float],
                  cutoffs: Optional[Sequence[Any]]) -> np.ndarray:
    """float64 [K, S]: each window's cutoff in each series' time units (NaN: a series without data)."""
    obs = dm.observations
    S = len(obs)
    if cutoffs is not None:
        values = pd.Series(list(cutoffs) if not np.isscalar(cutoffs) else [cutoffs])
        if values.empty:
            raise DataError("cutoffs= holds no times; pass the forecast origins to backtest from, e.g. cutoffs=[24.0]")
        shown = parse_times(values, dm.request_context(), "cutoffs")                   # [K]
        series = np.tile(np.arange(S), len(shown))
        return in_time_units(obs, series, shown[np.repeat(np.arange(len(shown)), S)]).reshape(len(shown), S)
    n_windows = check_positive_int("n_windows", n_windows)
    if horizon is None:
        raise DataError("rolling cutoffs need a horizon (the model learnt to forecast everything after its origins): "
                        "pass horizon=<time units>, or cutoffs=[...]")
    step = horizon if step is None else step
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step == 0:
        raise DataError("step=0 would put every window at the same cutoff; pass a step > 0 in the data's time units")
    step = check_span("step", step)
    last = np.full(S, np.nan)
    present = obs.series_lengths > 0
    last[present] = obs.time[obs.offsets[1:][present] - 1]
    back = (n_windows - 1 - np.arange(n_windows))[:, None] * step                    # [K, 1]
    return last[None, :] - horizon - back                                            # [K, S]


def backtest_samples(dm: Any, n_windows: int = 1, step: Optional[float] = None, horizon: Optional[float] = None,
                     cutoffs: Optional[Sequence[Any]] = None) -> tuple[ForecastSampleDataset, Optional[float]]:
    """The backtest's windows as forecasting samples over ``dm``'s observations, scaled with its scaler,
    and the horizon used (None: every observation after a cutoff).

    Raises:
        DataError: a horizon longer than the model's, a step of 0, windows that fit no series' data.
    """
    model_span = float(dm.horizon) if dm.horizon is not None else None
    given = check_span("horizon", horizon)
    if given is not None and model_span is not None and given > model_span + 1e-9:
        raise DataError(
            f"a backtest horizon of {given:g} time units is longer than the model's ({model_span:g}): it never learnt "
            f"to forecast that far; pass horizon <= {model_span:g}, or fit a model with a longer horizon"
        )
    window = given if given is not None else (dm.target_span if cutoffs is not None else model_span)
    t0 = _cutoff_times(dm, n_windows, step, given if given is not None else model_span, cutoffs)   # [K, S]
    obs = dm.observations
    parts = []
    for row in t0:
        valid = np.isfinite(row)
        bound = np.where(valid, row, np.inf)                                          # [S]
        mid = rows_before(obs, bound)
        start = obs.offsets[:-1] if dm.lookback is None else rows_before(obs, bound - float(dm.lookback))
        stop = obs.offsets[1:] if window is None else rows_before(obs, bound + window)
        keep = np.flatnonzero(valid & (mid > start) & (stop > mid))
        parts.append(ForecastSamples(keep.astype(np.int64), row[keep], start[keep], mid[keep], stop[keep]))
    samples = ForecastSamples.concatenate(parts)
    if len(samples) == 0:
        raise DataError(
            f"the backtest's windows fit no series: none has history (within lookback {dm.lookback!r}) before a cutoff "
            "and observations after it; pass fewer windows (n_windows), a smaller step, later cutoffs, or longer data"
        )
    scaled = dm.scaler.transform(obs.value, obs.variable).astype(np.float32)
    return ForecastSampleDataset(obs.time, obs.variable.astype(np.int64), scaled, samples, dm.static_inputs()), window


def backtest_frame(dm: Any, dataset: ForecastSampleDataset, forecasts: list[np.ndarray],
                   quantiles: Optional[Any] = None) -> pd.DataFrame:
    """The tidy frame of a backtest: one row per target observation with the id column, ``cutoff``, the
    time column, the variable column, ``lead`` (time after the cutoff, in time units), ``forecast``
    (a quantile model's median, with ``forecast-lo-80`` ... beside it) and ``observed``, in units.

    Args:
        dm: the data module.
        dataset: the backtest's samples (``backtest_samples``).
        forecasts: per sample, its targets' forecasts [n] (a quantile model's [n, Q]) in units, in order.
        quantiles: the quantile model's ``QuantileSpec`` (None for a point model).
    """
    obs, s, columns = dm.observations, dataset.samples, dm.table_columns()
    rows = np.concatenate([np.arange(a, b) for a, b in zip(s.target_start, s.target_stop)])  # [T] target rows
    sample = np.repeat(np.arange(len(s)), s.n_targets)                                       # [T]
    series = s.series[sample]
    frame = pd.DataFrame({columns["id"] or "id": obs.series_ids[series]})
    frame["cutoff"] = as_shown(obs, s.series, s.origin)[sample]
    frame[columns["time"]] = as_shown(obs, series, obs.time[rows])
    frame[columns["variable"] or "variable"] = np.asarray(obs.variables, dtype=object)[obs.variable[rows]]
    frame["lead"] = obs.time[rows] - s.origin[sample]
    values = np.concatenate(forecasts)
    if quantiles is None:
        frame["forecast"] = values
    else:
        for suffix, q in quantiles.suffixes():
            frame[f"forecast{suffix}"] = values[:, q]
    frame["observed"] = obs.value[rows]
    return frame


def in_sample_windows(dm: Any, samples: ForecastSamples) -> int:
    """How many of the windows forecast observations the model was fit on, for the data it was fit on:
    windows of train series (a split by series), or cutoffs before a series' validation border (a
    split in time)."""
    borders = dm.time_borders
    if borders is not None:
        return int((samples.origin < borders[samples.series, 0]).sum())
    return int(np.isin(samples.series, dm.split_series("train")).sum())

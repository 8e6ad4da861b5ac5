"""Pictures of forecasts: the history, what was observed after it, the forecast and shaded intervals.

``plot_forecast`` draws one variable of one series from the frames ``Forecaster.predict`` and
``Forecaster.backtest`` return, for both tasks:

- the window task (a regular grid): frames indexed by time (or with a ``time_column``), a column per
  channel (``OT``) and a quantile model's intervals beside it (``OT-lo-80``, ``OT-hi-80``); drawn as lines;
- the observation task (irregular series): the long layout (``id_column``, ``time_column``,
  ``variable_column``, ``value_column``: an observation or a request per row) or the wide one (a
  column per variable, NaN = not observed); drawn as points at their own times, nothing joined
  across a gap that was never observed.

matplotlib is a dependency of tsattn; nothing is drawn until this module is used.
"""
from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np
import pandas as pd

__all__ = ["interval_columns", "plot_forecast"]


def interval_columns(frame: pd.DataFrame, name: str) -> list[tuple[float, str, str]]:
    """``(level, lo column, hi column)`` of the central intervals of column ``name`` in ``frame``
    (``<name>-lo-80`` / ``<name>-hi-80``), widest first."""
    found = []
    for column in frame.columns:
        match = re.fullmatch(re.escape(name) + r"-lo-(\d+(?:\.\d+)?)", str(column))
        if match and f"{name}-hi-{match.group(1)}" in frame.columns:
            found.append((float(match.group(1)), str(column), f"{name}-hi-{match.group(1)}"))
    return sorted(found, reverse=True)


def _rows(frame: pd.DataFrame, variable: str, series: Any, id_column: Optional[str], time_column: Optional[str],
          variable_column: Optional[str], value_column: str, what: str) -> tuple[pd.DataFrame, str, np.ndarray]:
    """The rows of ``frame`` for (series, variable), in time order: (rows, the value column, times)."""
    if id_column is not None and series is not None:
        if id_column not in frame.columns:
            raise ValueError(f"{what} has no id column {id_column!r}; its columns: {list(frame.columns)}")
        frame = frame[frame[id_column] == series]
    if variable_column is not None:
        if variable_column not in frame.columns or value_column not in frame.columns:
            raise ValueError(f"{what} has no columns {variable_column!r} / {value_column!r} of the long layout; pass "
                             f"variable_column= and value_column= as it names them (its columns: {list(frame.columns)})")
        frame, column = frame[frame[variable_column] == variable], value_column
    else:
        if variable not in frame.columns:
            raise ValueError(f"{what} has no column {variable!r}; its columns: {list(frame.columns)}")
        column = variable
    times = frame.index.to_numpy() if time_column is None else frame[time_column].to_numpy()
    order = np.argsort(times, kind="stable")
    frame, times = frame.iloc[order], times[order]
    keep = np.isfinite(frame[column].to_numpy(dtype=np.float64))
    return frame[keep], column, times[keep]


def plot_forecast(forecast: pd.DataFrame, variable: str, history: Optional[pd.DataFrame] = None,
                  observed: Optional[pd.DataFrame] = None, *, series: Any = None, id_column: Optional[str] = None,
                  time_column: Optional[str] = None, variable_column: Optional[str] = None, value_column: str = "value",
                  forecast_column: Optional[str] = None, observed_column: Optional[str] = None,
                  irregular: Optional[bool] = None, ax: Any = None, title: Optional[str] = None) -> Any:
    """Draw one variable's forecast (a quantile model's centre), its intervals, the history before it
    and what was observed.

    Args:
        forecast: ``predict``'s (or ``backtest``'s) frame.
        variable: the channel (window task) or variable (observation task) to draw.
        history, observed: frames in the layout of the data (the table the model was fit on, or
            ``predict``'s) with the values before and after the forecast origin; either may be None.
        series: the series to draw (its id) when the frames hold several (with ``id_column``).
        id_column, time_column, variable_column, value_column: the frames' column names as the data
            names them; ``time_column`` None: the frames' index is the time; ``variable_column`` given:
            the long layout (a row per observation, the value under ``value_column``).
        forecast_column, observed_column: the value columns of ``forecast`` and ``observed`` where they
            differ from the data's (a backtest frame: ``"forecast"`` and ``"observed"``).
        irregular: draw points at their own times (the observation task); None: when the frames
            are in the long layout or have an id column.
        ax: a matplotlib Axes to draw on; None: a new figure.
        title: the Axes' title; None: the variable (and series).

    Returns:
        the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.5))
    irregular = (variable_column is not None or id_column is not None) if irregular is None else irregular
    where = dict(series=series, id_column=id_column, time_column=time_column, variable_column=variable_column)
    dots = dict(marker="o", ms=3.5, lw=0.8) if irregular else dict(lw=1.2)
    if history is not None:
        rows, column, times = _rows(history, variable, value_column=value_column, what="history", **where)
        ax.plot(times, rows[column].to_numpy(), color="0.45", label="history", **dots)
    if observed is not None:
        rows, column, times = _rows(observed, variable, value_column=observed_column or value_column,
                                    what="observed", **where)
        ax.plot(times, rows[column].to_numpy(), color="k", label="observed", **(dots if irregular else dict(lw=1.5)))
    rows, column, times = _rows(forecast, variable, value_column=forecast_column or value_column, what="forecast",
                                **where)
    name = column
    for k, (level, lo, hi) in enumerate(interval_columns(rows, name)):
        ax.fill_between(times, rows[lo].to_numpy(dtype=np.float64), rows[hi].to_numpy(dtype=np.float64),
                        color="C0", alpha=0.15 + 0.15 * k, lw=0, label=f"{level:g}% interval",
                        step="mid" if irregular else None)
    ax.plot(times, rows[name].to_numpy(), color="C0", label="forecast",
            **(dict(marker=".", ms=5, lw=1.2) if irregular else dict(lw=1.5)))
    ax.set_title(title if title is not None else (variable if series is None else f"{variable}: {series}"))
    ax.legend(loc="best", fontsize="small")
    return ax

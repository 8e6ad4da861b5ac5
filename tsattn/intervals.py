"""Rolling conformal recalibration of a backtest's intervals.

A model calibrated once (``Forecaster.calibrate``, on the validation split) covers its level on data
like the calibration data. When the series moves to a calmer or a wilder regime, the same intervals
over- or under-cover. ``rolling_calibration`` recalibrates each window of a backtest frame on the
errors of the most recent earlier windows of the same series that were fully observed before its
cutoff (what a user who recalibrates as data arrives would have had), so no window's interval reads a
value at or after its own cutoff.
"""
from __future__ import annotations

import math
import re
from typing import Optional

import numpy as np
import pandas as pd

from .data.errors import DataError
from .data.validation import check_positive_int

_LOWER = re.compile(r"^forecast-lo-(\d+(?:\.\d+)?)$")


def interval_levels(frame: pd.DataFrame) -> list[str]:
    """The levels (as written in the column names, e.g. ``"80"``) of the frame's ``forecast-lo-<L>`` /
    ``forecast-hi-<L>`` pairs."""
    levels = [m.group(1) for m in map(_LOWER.match, frame.columns) if m]
    return [level for level in levels if f"forecast-hi-{level}" in frame.columns]


def rolling_calibration(frame: pd.DataFrame, windows: int, *, min_points: int = 30,
                        time: Optional[str] = None, by: Optional[str] = None) -> pd.DataFrame:
    """Each window's intervals recalibrated on the ``windows`` most recent earlier windows of its series
    whose every target time is before its cutoff (scaled conformalized quantile regression, as
    ``Forecaster.calibrate``, on a sliding set): per interval and variable, the intervals are widened
    (or narrowed) on both sides by ``q`` times their own width, ``q`` the ``ceil((n + 1) level) / n``
    empirical quantile of the scores ``max(lo - y, y - hi) / width`` of those windows' targets.

    A window whose calibration set has fewer than ``min_points`` observed targets of a variable keeps
    that variable's intervals as they were (the model's own calibration). The point forecast does not
    move. Intervals calibrated once on the validation split (``Forecaster.calibrate``) are the usual
    starting point; the rolling step then follows the series' current regime.

    Args:
        frame: a backtest frame (``Forecaster.backtest``): ``cutoff``, the time column, the variable
            column, ``forecast``, its ``forecast-lo-<L>`` / ``forecast-hi-<L>`` columns and ``observed``.
        windows: how many earlier windows calibrate each window (e.g. 720: a month of hourly cutoffs).
        min_points: the fewest observed targets per variable that recalibrate a window.
        time: the time column (default: ``frame.attrs["time_column"]``).
        by: the series id column (default: ``frame.attrs.get("id_column")``; None: one series).

    Returns:
        a copy of ``frame`` with the interval columns recalibrated, rows in the same order;
        ``attrs["rolling_calibration"]`` is ``windows``.
    """
    check_windows("windows", windows)
    levels = interval_levels(frame)
    if not levels:
        raise ValueError("the frame has no intervals (forecast-lo-80 / forecast-hi-80 columns): backtest a quantile "
                         "model (Forecaster(quantiles=[0.1, 0.5, 0.9]) or levels=[80])")
    time = time if time is not None else frame.attrs.get("time_column")
    by = by if by is not None else frame.attrs.get("id_column")
    variable = frame.attrs.get("variable_column", "variable")
    missing = [c for c in ("cutoff", time, variable, "forecast", "observed") + ((by,) if by else ()) if c not in frame]
    if time is None or missing:
        raise ValueError(f"the frame lacks the column(s) {missing or ['<time>']}: pass a Forecaster.backtest frame "
                         "(or name the time / id columns with time= / by=)")
    out = frame.copy()
    groups = [np.arange(len(frame))] if not by else list(frame.groupby(by, sort=False).indices.values())
    bounds = {level: [frame[f"forecast-{side}-{level}"].to_numpy(np.float64, copy=True) for side in ("lo", "hi")]
              for level in levels}
    for rows in groups:
        layout = _SeriesLayout(frame.iloc[rows], time, variable)
        for level, (lo, hi) in bounds.items():
            lo[rows], hi[rows] = layout.recalibrate(lo[rows], hi[rows], float(level) / 100.0, windows, min_points)
    for level, (lo, hi) in bounds.items():
        out[f"forecast-lo-{level}"], out[f"forecast-hi-{level}"] = lo, hi
    out.attrs = dict(frame.attrs, rolling_calibration=int(windows))
    return out


def check_windows(name: str, windows: object) -> int:
    """``windows`` (the number of earlier windows to calibrate on) as an int >= 1 (``check_positive_int``'s
    test), else a ``ValueError`` that says what the number counts."""
    try:
        return check_positive_int(name, windows)
    except DataError:
        raise ValueError(f"{name}={windows!r}: give a positive number of earlier windows to calibrate each window "
                         "on, e.g. 720 (a month of hourly cutoffs)") from None


class _SeriesLayout:
    """One series' rows of a backtest frame: their windows in time order, how many earlier windows had
    ended before each window's cutoff, and the rows of each variable by window (the same for every
    interval level)."""

    def __init__(self, part: pd.DataFrame, time: str, variable: str) -> None:
        cutoffs, self.window = np.unique(part["cutoff"].to_numpy(), return_inverse=True)   # windows in time order
        ends = pd.Series(part[time].to_numpy()).groupby(self.window).max().reindex(range(len(cutoffs))).to_numpy()
        ends = np.maximum.accumulate(ends)                                     # a prefix is fully observed
        self.usable = np.searchsorted(ends, cutoffs, side="left")               # windows [0, usable) end before
        self.y, self.centre = part["observed"].to_numpy(np.float64), part["forecast"].to_numpy(np.float64)
        self.observed = np.isfinite(self.y)
        codes, _ = pd.factorize(part[variable])
        bounds = np.arange(len(cutoffs) + 1)
        self.variables = []                                                     # per variable: rows, scored rows, offsets
        for v in range(codes.max() + 1 if len(part) else 0):
            rows = np.flatnonzero(codes == v)
            rows = rows[np.argsort(self.window[rows], kind="stable")]           # this variable's rows by window
            scored = rows[self.observed[rows]]
            self.variables.append((rows, scored, np.searchsorted(self.window[scored], bounds),
                                   np.searchsorted(self.window[rows], bounds)))

    def recalibrate(self, lo: np.ndarray, hi: np.ndarray, level: float, windows: int,
                    min_points: int) -> tuple[np.ndarray, np.ndarray]:
        """The interval [lo, hi] (this series' rows) recalibrated window by window."""
        typical = float(np.nanmean(hi - lo)) if len(lo) else 0.0              # from the forecasts alone
        width = np.maximum(hi - lo, 1e-6 * typical if np.isfinite(typical) and typical > 0 else 1e-12)
        score = np.maximum(lo - self.y, self.y - hi) / width
        new_lo, new_hi = lo.copy(), hi.copy()
        for rows, scored, start, first_row in self.variables:
            for w in np.unique(self.window[rows]):
                usable = self.usable[w]
                scores = score[scored[start[max(0, usable - windows)]:start[usable]]]
                if scores.size < min_points:
                    continue
                k = min(math.ceil((scores.size + 1) * level), scores.size)
                q = np.partition(scores, k - 1)[k - 1]
                at = rows[first_row[w]:first_row[w + 1]]
                new_lo[at] = np.minimum(lo[at] - q * width[at], self.centre[at])   # the median stays inside
                new_hi[at] = np.maximum(hi[at] + q * width[at], self.centre[at])
        return new_lo, new_hi

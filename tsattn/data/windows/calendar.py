"""Calendar features per row ("timeF" in Time-Series-Library): each in [-0.5, 0.5].

The feature set follows the series' frequency, finest unit first:

| frequency            | features                                                        |
|----------------------|-----------------------------------------------------------------|
| seconds              | second, minute, hour, day of week, day of month, day of year    |
| minutes (``15min``)  | minute, hour, day of week, day of month, day of year            |
| hours (``h``)        | hour, day of week, day of month, day of year                    |
| days (``D``, ``B``)  | day of week, day of month, day of year                          |
| weeks (``W``)        | day of month, week of year                                      |
| months, quarters     | month of year                                                   |
| years                | (none)                                                          |

Note: Time-Series-Library's scripts pass ``freq='h'`` by default even for 15-minute data, which
gives the 4 hourly features; pass ``calendar_freq="h"`` to reproduce that.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.tseries import offsets

from ..errors import DataError

__all__ = ["seasonal_naive_mae", "seasonal_period", "calendar_feature_names", "calendar_features"]


def _second(ts):
    return ts.second / 59.0 - 0.5


def _minute(ts):
    return ts.minute / 59.0 - 0.5


def _hour(ts):
    return ts.hour / 23.0 - 0.5


def _day_of_week(ts):
    return ts.day_of_week / 6.0 - 0.5


def _day_of_month(ts):
    return (ts.day - 1) / 30.0 - 0.5


def _day_of_year(ts):
    return (ts.day_of_year - 1) / 365.0 - 0.5


def _month_of_year(ts):
    return (ts.month - 1) / 11.0 - 0.5


def _week_of_year(ts):
    return (ts.isocalendar().week.to_numpy(dtype=np.float64) - 1) / 52.0 - 0.5


_FEATURES = {
    "second": _second,
    "minute": _minute,
    "hour": _hour,
    "day_of_week": _day_of_week,
    "day_of_month": _day_of_month,
    "day_of_year": _day_of_year,
    "month_of_year": _month_of_year,
    "week_of_year": _week_of_year,
}
_DAILY = ("day_of_week", "day_of_month", "day_of_year")


def calendar_feature_names(freq: str) -> tuple[str, ...]:
    """The calendar features for a pandas offset alias ``freq`` (see the module table)."""
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError):
        raise DataError(f"calendar frequency {freq!r} is not a pandas offset alias (e.g. 'h', '15min', 'D')") from None
    if isinstance(offset, (offsets.YearBegin, offsets.YearEnd, offsets.BYearBegin, offsets.BYearEnd)):
        return ()
    if isinstance(offset, (offsets.QuarterBegin, offsets.QuarterEnd, offsets.BQuarterBegin, offsets.BQuarterEnd)):
        return ("month_of_year",)
    if isinstance(offset, (offsets.MonthBegin, offsets.MonthEnd, offsets.BusinessMonthBegin, offsets.BusinessMonthEnd)):
        return ("month_of_year",)
    if isinstance(offset, offsets.Week):
        return ("day_of_month", "week_of_year")
    if isinstance(offset, (offsets.Day, offsets.BusinessDay)):
        return _DAILY
    if isinstance(offset, offsets.Hour):
        return ("hour",) + _DAILY
    if isinstance(offset, offsets.Minute):
        return ("minute", "hour") + _DAILY
    if isinstance(offset, (offsets.Second, offsets.Milli, offsets.Micro, offsets.Nano)):
        return ("second", "minute", "hour") + _DAILY
    raise DataError(
        f"no calendar features are defined for frequency {freq!r}; pass calendar_freq= one of "
        "'s', 'min', 'h', 'D', 'B', 'W', 'MS', 'QS', 'YS', or turn calendar features off"
    )


def calendar_features(timestamps: pd.DatetimeIndex, freq: str) -> np.ndarray:
    """float32 [N, F] calendar features of ``timestamps`` for frequency ``freq``, each in [-0.5, 0.5]."""
    names = calendar_feature_names(freq)
    ts = pd.DatetimeIndex(timestamps)
    if not names:
        return np.zeros((len(ts), 0), dtype=np.float32)
    columns = [np.asarray(_FEATURES[n](ts), dtype=np.float64) for n in names]
    return np.stack(columns, axis=1).astype(np.float32)


def seasonal_period(freq: str) -> int:
    """The seasonal period, in rows, that MASE's seasonal naive forecast uses for data at ``freq``: a day
    for sub-daily data (``"h"``: 24, ``"15min"``: 96), a week for daily data (7; business days: 5), a
    year for weekly (52), monthly (12) and quarterly (4) data, 1 otherwise (yearly, or a frequency
    that divides no day)."""
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError):
        return 1
    if isinstance(offset, (offsets.QuarterBegin, offsets.QuarterEnd, offsets.BQuarterBegin, offsets.BQuarterEnd)):
        return 4
    if isinstance(offset, (offsets.MonthBegin, offsets.MonthEnd, offsets.BusinessMonthBegin, offsets.BusinessMonthEnd)):
        return 12
    if isinstance(offset, offsets.Week):
        return 52
    if isinstance(offset, offsets.BusinessDay):
        return 5
    if isinstance(offset, offsets.Day):
        return 7 if offset.n == 1 else 1
    try:
        step = pd.Timedelta(offset)
    except (ValueError, TypeError):
        return 1
    day = pd.Timedelta(days=1)
    return int(day // step) if step < day and day % step == pd.Timedelta(0) else 1


def seasonal_naive_mae(values: np.ndarray, season: int) -> np.ndarray:
    """float64 [C]: per column of ``values`` [T, C], the mean absolute error of the seasonal naive
    forecast ``y[t - season]`` (NaN where there are no more than ``season`` rows)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= season:
        return np.full(values.shape[1], np.nan)
    return np.abs(values[season:] - values[:-season]).mean(axis=0)

"""Read a regular series (a CSV file or a DataFrame) into a validated, time-ordered numeric table.

``read_series`` is the one gate every series of the window task passes through. It

1. reads the table (``table.load_table``) and finds and parses its time column;
2. keeps the numeric columns as value columns (text columns are dropped with a ``DataWarning``);
3. checks the timestamps are increasing (``sort=True`` sorts) and handles repeated timestamps
   (``duplicates=``); warns when a step between rows is more than ``LARGE_STEP_RATIO`` (10) times
   the median step (a gap windows bridge, or misread dates);
4. rejects infinite values and values float32 cannot hold, warns about values many orders of
   magnitude outside the rest of their column (``table.check_magnitudes``), and handles missing
   ones (``missing=``), never from a later row;
5. computes knot times: time since the first row in ``time_unit`` (default: the median step).

Value columns: a column is a value column when pandas reads it as numbers (or booleans), or when
its text becomes numbers once the ``thousands`` separator is removed and ``decimal`` is read as the
decimal mark. A text column, or a column with no values at all, is dropped, listed in
``SeriesTable.dropped_columns`` and named in a ``DataWarning`` (unless ``columns=`` chooses the
value columns). Reading stops with an error naming the cells when a column is numbers with stray
text (say ``"n/a"``: at least half of its non-empty cells parse as numbers), numbers written with
thousands separators (``"5,827.0"``) while ``thousands`` is not set, or with a decimal comma
(``"0,7855"``) while ``decimal`` is ``"."``, because dropping it would lose a channel.

Gaps: a step between consecutive rows more than ``LARGE_STEP_RATIO`` (10) times the median step
gets a ``DataWarning`` (a 100-minute step in 10-minute data, exactly 10 times, does not). Windows
that span such a gap bridge it: with ``knot_times="timestamps"`` the model sees the gap in its knot
times; with ``"index"`` the rows are read as one step apart, as if contiguous.

Missing values are never filled from a later row: a filled value depends only on the rows
before it, so no window's inputs and no train statistic see the future (``missing="ffill"``).

Rows in error messages are 0-based data rows (the header is not counted), in the order of the
input; for a file the line number is given too.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..errors import DataError, warn_data
from ..validation import SHOW, check_choice, check_time_unit
from .table import (
    NaValues,
    check_magnitudes,
    check_reading_options,
    choose_value_columns,
    detect_time_column,
    load_table,
    normalize_na_values,
    parse_timestamps,
)

__all__ = [
    "DUPLICATE_POLICIES",
    "INTERPOLATE_REFUSAL",
    "KNOT_TIME_MODES",
    "MISSING_POLICIES",
    "SeriesTable",
    "check_freq",
    "check_series_options",
    "check_time_unit",
    "infer_freq",
    "knot_times_in",
    "median_step",
    "read_series",
    "with_time_unit",
]

MISSING_POLICIES = ("error", "ffill")
DUPLICATE_POLICIES = ("error", "keep", "first", "last", "mean")
KNOT_TIME_MODES = ("timestamps", "index")
LARGE_STEP_RATIO = 10  # a step more than this many times the median step gets a DataWarning

DataSource = Union[str, os.PathLike, pd.DataFrame]
RowLabel = Callable[[int], str]


@dataclass(frozen=True, eq=False)
class SeriesTable:
    """A validated series: N time-ordered rows of C numeric value columns.

    Attributes:
        timestamps: ``pd.DatetimeIndex`` [N], non-decreasing (strictly increasing unless
            ``duplicates="keep"``).
        values: float64 [N, C], finite, in file column order.
        columns: the C value column names.
        knot_times: float64 [N], ``(timestamp - first timestamp) / time_unit`` (or ``arange(N)``
            with ``knot_times="index"``); ``knot_times[0] == 0``.
        step: the median positive step between consecutive timestamps.
        freq: a pandas offset alias: the given one, else ``pd.infer_freq``, else from ``step``.
        time_column: the time column's name (None when it was the DataFrame's index).
        dropped_columns: text (or entirely empty) columns left out of ``columns``.
        source: where the data came from (a path, or ``"<DataFrame>"``).
        time_unit: the unit of ``knot_times`` (the given ``time_unit``, else ``step``); None with
            ``knot_times="index"`` (rows one step apart).
    """

    timestamps: pd.DatetimeIndex
    values: np.ndarray
    columns: tuple[str, ...]
    knot_times: np.ndarray
    step: pd.Timedelta
    freq: str
    time_column: Optional[str]
    dropped_columns: tuple[str, ...]
    source: str
    time_unit: Optional[pd.Timedelta] = None

    def __len__(self) -> int:
        return len(self.timestamps)

    def frame(self) -> pd.DataFrame:
        """The value columns as a DataFrame indexed by timestamp (a copy)."""
        return pd.DataFrame(self.values.copy(), index=self.timestamps, columns=list(self.columns))


INTERPOLATE_REFUSAL = (
    "missing='interpolate' is not offered: a linear interpolation fills a gap from the row after "
    "it, so a window's last inputs would depend on rows inside its forecast horizon, and train rows "
    "near the split border on the next split's values (look-ahead); use missing='ffill' (carry the "
    "last value forward), or fill the gaps in the data yourself"
)


def median_step(timestamps_ns: np.ndarray) -> Optional[pd.Timedelta]:
    """The median positive step between consecutive int64 nanosecond timestamps (None if there is none)."""
    steps = np.diff(np.asarray(timestamps_ns, dtype=np.int64))
    positive = steps[steps > 0]
    if positive.size == 0:
        return None
    return pd.Timedelta(int(np.median(positive)), unit="ns")


def knot_times_in(timestamps: pd.DatetimeIndex, unit: pd.Timedelta) -> np.ndarray:
    """float64 [N]: ``(timestamps - timestamps[0]) / unit`` (exact integer nanoseconds, then one division)."""
    ts_ns = pd.DatetimeIndex(timestamps).as_unit("ns").asi8
    return (ts_ns - ts_ns[0]).astype(np.float64) / float(unit.value)


def with_time_unit(table: "SeriesTable", unit: Optional[pd.Timedelta]) -> "SeriesTable":
    """``table`` with its timestamp knot times measured in ``unit`` (unchanged for index knot times)."""
    if table.time_unit is None or unit is None or unit == table.time_unit:
        return table
    unit = check_time_unit(unit)
    return replace(table, knot_times=knot_times_in(table.timestamps, unit), time_unit=unit)


def _warn_long_steps(ts_ns: np.ndarray, timestamps: pd.DatetimeIndex, position: np.ndarray, step: pd.Timedelta,
                     source: str, row_label, knot_times: str) -> None:
    """Warn when a step between consecutive rows is more than ``LARGE_STEP_RATIO`` times the median
    ``step``, naming the longest steps, what windows do across them under ``knot_times``, and
    misread dates."""
    steps = np.diff(ts_ns)
    long = np.flatnonzero(steps > LARGE_STEP_RATIO * step.value)
    if long.size == 0:
        return
    worst = long[np.lexsort((long, -steps[long]))[:SHOW]]  # longest first, then earliest
    listed = "; ".join(
        f"{pd.Timedelta(int(steps[i]), unit='ns')} from {row_label(int(position[i]))} ({timestamps[i]}) to "
        f"{row_label(int(position[i + 1]))} ({timestamps[i + 1]})"
        for i in worst
    )
    reading = {"timestamps": "the model sees the gap in its knot times",
               "index": "rows are read as one step apart, as if contiguous"}
    windows = "; ".join(f"with knot_times={mode!r}{' (this reading)' if mode == knot_times else ''} {what}"
                        for mode, what in reading.items())
    warn_data(
        f"{source}: {long.size} step(s) between consecutive rows exceed {LARGE_STEP_RATIO}x the median step "
        f"({step}); the longest: {listed}. Windows across such a gap bridge it: {windows}. If the series has "
        "such gaps, ignore this (or fill in the missing rows); otherwise check the timestamps (day-first dates "
        "read month-first jump by months: pass dayfirst=True or time_format=)"
    )


def _step_alias(step: pd.Timedelta) -> str:
    day = pd.Timedelta(days=1)
    if step >= day and step % day == pd.Timedelta(0):
        n = int(step // day)
        return "D" if n == 1 else f"{n}D"
    return pd.tseries.frequencies.to_offset(step).freqstr


def infer_freq(timestamps: pd.DatetimeIndex, step: Optional[pd.Timedelta] = None) -> Optional[str]:
    """A pandas offset alias for ``timestamps``: ``pd.infer_freq`` on the distinct timestamps, else
    the alias of the median step (``'10min'``, ``'h'``, ``'7D'``); None for fewer than 2 distinct."""
    unique = pd.DatetimeIndex(timestamps).unique().sort_values()
    if len(unique) >= 3:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas 3 announces a future return type change
            try:
                inferred = pd.infer_freq(unique)
            except (TypeError, ValueError):
                inferred = None
        if inferred is not None:
            return inferred if isinstance(inferred, str) else inferred.freqstr
    if step is None:
        if len(unique) < 2:
            return None
        step = pd.Series(unique[1:] - unique[:-1]).median()
    return _step_alias(step)


def check_freq(freq: str) -> str:
    try:
        pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError):
        raise DataError(
            f"freq={freq!r} is not a pandas offset alias; use one like 'h', '15min', '10min', 'D', 'W', 'MS'"
        ) from None
    return freq


def check_series_options(*, missing: str = "error", duplicates: str = "error", knot_times: str = "timestamps",
                         freq: Optional[str] = None) -> None:
    """Raise unless the series reader's own options are valid (and compatible with each other)."""
    if missing == "interpolate":
        raise DataError(INTERPOLATE_REFUSAL)
    check_choice("missing", missing, MISSING_POLICIES)
    check_choice("duplicates", duplicates, DUPLICATE_POLICIES)
    check_choice("knot_times", knot_times, KNOT_TIME_MODES)
    if duplicates == "keep" and knot_times == "timestamps":
        raise DataError(
            "duplicates='keep' keeps repeated timestamps, which would give two knots the same time "
            "(zero spacing); pass knot_times='index' (rows one step apart, the benchmark convention) or "
            "duplicates='first' | 'last' | 'mean'"
        )
    if freq is not None:
        check_freq(freq)


def _value_columns(frame: pd.DataFrame, time_name, columns: Optional[Sequence[str]], source: str, row_label: RowLabel,
                   thousands: Optional[str], decimal: str) -> tuple[list, dict]:
    """The value columns (kept) and the text / empty columns left out (name -> why; warned about)."""
    return choose_value_columns(
        frame, [c for c in frame.columns if c != time_name], columns, source, row_label, thousands, kind="value",
        none_left="a forecasting series needs at least one column of numbers", decimal=decimal)


def _in_time_order(timestamps: pd.DatetimeIndex, values: np.ndarray, position: np.ndarray, sort: bool,
                   row_label: RowLabel) -> tuple[pd.DatetimeIndex, np.ndarray, np.ndarray]:
    """Rows in time order: out-of-order timestamps are an error, or sorted (stable) with ``sort``."""
    ts_ns = timestamps.as_unit("ns").asi8  # UTC-based for tz-aware timestamps
    back = np.flatnonzero(np.diff(ts_ns) < 0)
    if not back.size:
        return timestamps, values, position
    if not sort:
        i = int(back[0])
        raise DataError(
            f"timestamps are not in increasing order: {row_label(i + 1)} ({timestamps[i + 1]}) comes "
            f"after {row_label(i)} ({timestamps[i]}); {back.size} such step(s) back in time; sort "
            "the file by time, or pass sort=True to sort the rows"
        )
    order = np.argsort(ts_ns, kind="stable")
    return timestamps[order], values[order], position[order]


def _merge_repeated(timestamps: pd.DatetimeIndex, values: np.ndarray, position: np.ndarray, duplicates: str,
                    row_label: RowLabel) -> tuple[pd.DatetimeIndex, np.ndarray, np.ndarray]:
    """Rows with repeated timestamps: an error, kept, or reduced to their first / last / mean."""
    ts_ns = timestamps.as_unit("ns").asi8
    repeated = np.flatnonzero(np.diff(ts_ns) == 0)  # row i + 1 repeats row i
    if not repeated.size or duplicates == "keep":
        return timestamps, values, position
    if duplicates == "error":
        i = int(repeated[0])
        raise DataError(
            f"timestamps repeat: {row_label(int(position[i]))} and {row_label(int(position[i + 1]))} "
            f"are both {timestamps[i]} ({repeated.size} repeated row(s) in all); remove them, or pass "
            "duplicates='first' | 'last' | 'mean' to aggregate, or 'keep' (with knot_times='index')"
        )
    changes = np.diff(ts_ns) != 0  # [N - 1]
    new_group = np.r_[True, changes]  # [N] the row starts a group of equal timestamps
    if duplicates == "mean":
        group = np.cumsum(new_group) - 1
        values = pd.DataFrame(values).groupby(group, sort=True).mean().to_numpy(dtype=np.float64)
        rows = np.flatnonzero(new_group)
    else:
        rows = np.flatnonzero(new_group if duplicates == "first" else np.r_[changes, True])
        values = values[rows]
    return timestamps[rows], values, position[rows]


def _checked_values(values: np.ndarray, names: list[str], na_values: list, position: np.ndarray,
                    row_label: RowLabel, source: str) -> np.ndarray:
    """``values`` [N, C] (in place) with numeric missing markers as NaN; an infinite value, or one
    float32 cannot hold, is an error, and one far outside the rest of its column is warned about
    (``table.check_magnitudes``)."""
    for v in na_values:
        try:
            number = float(v)
        except (TypeError, ValueError):
            continue
        values[values == number] = np.nan
    infinite = np.isinf(values)
    if infinite.any():
        r, c = np.argwhere(infinite)[0]
        per_col = {names[j]: int(n) for j, n in enumerate(infinite.sum(0)) if n}
        raise DataError(
            f"{int(infinite.sum())} infinite value(s) in value columns {per_col}, first in {names[c]!r} at "
            f"{row_label(int(position[r]))}; replace them in the data, or pass na_values=['inf', '-inf'] "
            "with missing='ffill' to treat them as missing"
        )
    n, c = values.shape
    check_magnitudes(values.ravel(), np.tile(np.arange(c), n), np.repeat(position, c), names, row_label, source,
                     kind="column")
    return values


def _missing_filled(values: np.ndarray, names: list[str], missing: str, position: np.ndarray,
                    row_label: RowLabel) -> np.ndarray:
    """``values`` [N, C] with NaN refused or carried forward (``missing="ffill"``: row r from rows
    <= r only)."""
    nan = np.isnan(values)
    if not nan.any():
        return values
    per_col = {names[j]: int(n) for j, n in enumerate(nan.sum(0)) if n}
    if missing == "error":
        r, c = np.argwhere(nan)[0]
        raise DataError(
            f"{int(nan.sum())} missing value(s) (NaN) in value columns {per_col}, first in {names[c]!r} "
            f"at {row_label(int(position[r]))}; pass missing='ffill' (carry the last value forward), "
            "or fill them in the data"
        )
    empty = [names[j] for j in range(values.shape[1]) if nan[:, j].all()]
    if empty:
        raise DataError(
            f"value column(s) {empty} have no values at all, so missing={missing!r} has nothing to fill "
            "from; leave them out with columns=[...] or fix the data"
        )
    leading = {names[j]: int(np.argmax(~nan[:, j])) for j in range(values.shape[1]) if nan[0, j]}
    if leading:
        k = max(leading.values())
        raise DataError(
            f"value column(s) {list(leading)} start with missing values ({leading} leading row(s)), and "
            f"missing='ffill' only carries values forward, so the first rows have nothing to take; "
            f"drop the first {k} row(s) (up to {row_label(int(position[k - 1]))}, e.g. frame.iloc[{k}:]) "
            "or fill them in the data"
        )
    return pd.DataFrame(values).ffill().to_numpy(dtype=np.float64)  # row r from rows <= r only


def _table(data: DataSource, time_column: Optional[str], time_format: Optional[str], dayfirst: Optional[bool],
           columns: Optional[Sequence[str]], na_values: list, thousands: Optional[str], sep: str, decimal: str) -> tuple:
    """The table read, its timestamps [N] and its value columns (kept, and dropped with why)."""
    frame, source, row_label = load_table(
        data, na_values, sep, decimal=decimal, accepts="a path to a CSV file, a registered dataset name or a pandas DataFrame",
        type_hint=("; wrap an array in a DataFrame with a time column, e.g. pd.DataFrame(values, "
                   "index=pd.date_range(start, periods=len(values), freq='h'))" if isinstance(data, np.ndarray) else ""),
        needs_columns="a header with a time column and value columns", needs_rows="lookback + horizon rows",
    )
    time_name = detect_time_column(frame, time_column)
    raw_time = pd.Series(frame.index, index=frame.index) if time_name is None else frame[time_name]
    timestamps = parse_timestamps(raw_time, time_name or "<index>", time_format, row_label, dayfirst)
    kept, dropped = _value_columns(frame, time_name, columns, source, row_label, thousands, decimal)
    return frame, source, row_label, time_name, timestamps, kept, dropped


def read_series(
    data: DataSource,
    *,
    time_column: Optional[str] = None,
    time_format: Optional[str] = None,
    dayfirst: Optional[bool] = None,
    columns: Optional[Sequence[str]] = None,
    na_values: NaValues = None,
    thousands: Optional[str] = None,
    sep: str = ",",
    decimal: str = ".",
    missing: str = "error",
    duplicates: str = "error",
    sort: bool = False,
    knot_times: str = "timestamps",
    time_unit: Optional[Union[str, pd.Timedelta]] = None,
    freq: Optional[str] = None,
) -> SeriesTable:
    """Read and validate a series from a CSV path or a DataFrame (not modified).

    Args:
        data: a path to a CSV file, or a DataFrame.
        time_column: the column holding timestamps; None detects one named ``date``, ``ds``,
            ``timestamp``, ``date_time``, ``datetime``, ``time`` (case-insensitive), or uses a
            DataFrame's ``DatetimeIndex``.
        time_format: a ``strftime`` format for the timestamps; None infers it from the first one.
            Timestamps with different UTC offsets (a zone with daylight saving) are read as UTC.
        dayfirst, columns, thousands, sep, decimal: see ``tsattn.data.ForecastDataModule`` (the table options).
        na_values: cell values that mean "missing": one (``-9999``, ``"n/a"``) or a list, as in
            ``pandas.read_csv``; numbers also match numerically (``-9999.0``).
        missing: ``"error"`` rejects missing values; ``"ffill"`` carries the last value forward (a
            column whose first rows are missing is an error naming the rows to drop). Interpolation
            is not offered: it fills from the row after a gap, which is look-ahead.
        duplicates: repeated timestamps: ``"error"``, ``"keep"`` every row (needs
            ``knot_times="index"``), ``"first"``, ``"last"`` or ``"mean"`` of each group.
        sort: sort rows by timestamp (stable) instead of rejecting out-of-order timestamps.
        knot_times: ``"timestamps"`` (time since the first row in ``time_unit``) or ``"index"``
            (``arange(N)``: every row one step apart, the benchmark convention).
        time_unit: the unit of timestamp knot times; None: the median step of this data.
        freq: a pandas offset alias overriding the inferred frequency.

    Raises ``DataError`` (or a subclass) naming the problem and the fix, also for a value float32
    cannot hold (|x| > ``np.finfo(np.float32).max``). Warns (``DataWarning``) when text or empty
    columns were dropped, a step between rows is more than ``LARGE_STEP_RATIO`` (10) times the
    median step (a real gap, or misread dates), or a value is more than ``table.OUTLIER_RATIO``
    (1e6) times the 99th percentile of |x| of its column.
    """
    check_series_options(missing=missing, duplicates=duplicates, knot_times=knot_times, freq=freq)
    check_reading_options(dayfirst=dayfirst, thousands=thousands, sep=sep, decimal=decimal)
    unit = None if time_unit is None else check_time_unit(time_unit)
    na_values = normalize_na_values(na_values) or []
    frame, source, row_label, time_name, timestamps, kept, dropped = _table(
        data, time_column, time_format, dayfirst, columns, na_values, thousands, sep, decimal)
    values = frame[kept].apply(pd.to_numeric).to_numpy(dtype=np.float64, na_value=np.nan, copy=True)  # [N, C]
    position = np.arange(len(frame))  # original row of each current row, for messages
    timestamps, values, position = _in_time_order(timestamps, values, position, sort, row_label)
    timestamps, values, position = _merge_repeated(timestamps, values, position, duplicates, row_label)
    ts_ns = timestamps.as_unit("ns").asi8
    step = median_step(ts_ns)
    if step is None:
        raise DataError(
            f"{source} has fewer than 2 distinct timestamps ({len(timestamps)} row(s)); a series needs "
            "at least lookback + horizon rows at distinct times"
        )
    _warn_long_steps(ts_ns, timestamps, position, step, source, row_label, knot_times)
    if knot_times == "index":
        knots, unit = np.arange(len(timestamps), dtype=np.float64), None
    else:
        unit = unit if unit is not None else step
        knots = knot_times_in(timestamps, unit)
    names = [str(c) for c in kept]
    values = _missing_filled(_checked_values(values, names, na_values, position, row_label, source), names, missing,
                             position, row_label)
    return SeriesTable(
        timestamps=timestamps, values=np.ascontiguousarray(values), columns=tuple(names), knot_times=knots, step=step,
        freq=freq if freq is not None else infer_freq(timestamps, step),
        time_column=None if time_name is None else str(time_name), dropped_columns=tuple(str(c) for c in dropped),
        source=source, time_unit=unit,
    )

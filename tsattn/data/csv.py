"""Read a CSV file or a DataFrame into a validated, time-ordered numeric table with knot times.

``read_series`` is the one gate every series passes through. It

1. reads the file (or copies the DataFrame), passing ``na_values`` to pandas;
2. finds and parses the time column (given, detected by name, or a ``DatetimeIndex``);
3. keeps the numeric columns as value columns (text columns are dropped, see ``value columns`` below);
4. checks the timestamps are increasing (``sort=True`` sorts) and handles repeated timestamps
   (``duplicates=``);
5. rejects infinite values and handles missing ones (``missing=``);
6. computes knot times: time since the first row in units of the median step.

Value columns: a column is a value column when pandas reads it as numbers (or booleans). A text
column, or a column with no values at all, is dropped and listed in ``SeriesTable.dropped_columns``
(unless named in ``columns=``), unless at least half of its
non-empty cells parse as numbers: then it is a numeric column with stray text (say ``"n/a"``), and
reading stops with an error naming the bad cells, because dropping it silently would lose a channel.

Rows in error messages are 0-based data rows (the header is not counted), in the order of the
input; for a file the line number is given too.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from .errors import DataError, DataFileNotFoundError

__all__ = [
    "DUPLICATE_POLICIES",
    "KNOT_TIME_MODES",
    "MISSING_POLICIES",
    "TIME_COLUMN_CANDIDATES",
    "SeriesTable",
    "check_freq",
    "infer_freq",
    "read_series",
]

TIME_COLUMN_CANDIDATES = ("date", "ds", "timestamp", "date_time", "datetime", "time", "time_stamp", "dt")
MISSING_POLICIES = ("error", "interpolate", "ffill")
DUPLICATE_POLICIES = ("error", "keep", "first", "last", "mean")
KNOT_TIME_MODES = ("timestamps", "index")
_SHOW = 3  # how many offending rows / values a message lists

DataSource = Union[str, os.PathLike, pd.DataFrame]


@dataclass(frozen=True, eq=False)
class SeriesTable:
    """A validated series: N time-ordered rows of C numeric value columns.

    Attributes:
        timestamps: ``pd.DatetimeIndex`` [N], non-decreasing (strictly increasing unless
            ``duplicates="keep"``).
        values: float64 [N, C], finite, in file column order.
        columns: the C value column names.
        knot_times: float64 [N], ``(timestamp - first timestamp) / step`` (or ``arange(N)`` with
            ``knot_times="index"``); ``knot_times[0] == 0``.
        step: the median positive step between consecutive timestamps.
        freq: a pandas offset alias: the given one, else ``pd.infer_freq``, else from ``step``.
        time_column: the time column's name (None when it was the DataFrame's index).
        dropped_columns: text (or entirely empty) columns left out of ``columns``.
        source: where the data came from (a path, or ``"<DataFrame>"``).
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

    def __len__(self) -> int:
        return len(self.timestamps)

    def frame(self) -> pd.DataFrame:
        """The value columns as a DataFrame indexed by timestamp (a copy)."""
        return pd.DataFrame(self.values.copy(), index=self.timestamps, columns=list(self.columns))


def _check_choice(name: str, value, choices: Sequence[str]) -> None:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise DataError(f"`{name}` must be one of {options}; got {value!r}")


def _read_file(path: Path, na_values) -> pd.DataFrame:
    if not path.exists():
        raise DataFileNotFoundError(
            f"CSV file not found: {str(path)!r}; check the path, or pass a registered dataset name "
            "(see tsattn.data.registry.list_datasets())"
        )
    if path.is_dir():
        raise DataError(f"{str(path)!r} is a directory, not a CSV file; pass the path of the .csv file inside it")
    if path.stat().st_size == 0:
        raise DataError(f"CSV file {str(path)!r} is empty (0 bytes); it needs a header row and data rows")
    try:
        frame = pd.read_csv(path, na_values=na_values)
    except pd.errors.EmptyDataError:
        raise DataError(
            f"CSV file {str(path)!r} is empty (no header, no rows); it needs a header row and data rows"
        ) from None
    except pd.errors.ParserError as exc:
        raise DataError(
            f"CSV file {str(path)!r} could not be parsed ({exc}); every row needs the same number of "
            "comma-separated fields as the header"
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"CSV file {str(path)!r} is not UTF-8 text ({exc}); re-save it as UTF-8") from None
    return frame


def _detect_time_column(frame: pd.DataFrame, time_column: Optional[str]) -> Optional[str]:
    """The time column's name, or None to use a ``DatetimeIndex``."""
    columns = [str(c) for c in frame.columns]
    if time_column is not None:
        if time_column not in frame.columns:
            raise DataError(
                f"time column {time_column!r} is not in the data; columns are {columns}; "
                "pass time_column=<one of them> (or None to detect it)"
            )
        return time_column
    by_lower = {}
    for c in frame.columns:
        by_lower.setdefault(str(c).strip().lower(), c)
    for candidate in TIME_COLUMN_CANDIDATES:
        if candidate in by_lower:
            return by_lower[candidate]
    for c in frame.columns:  # an already-parsed datetime column under any name
        if ptypes.is_datetime64_any_dtype(frame[c]):
            return c
    if isinstance(frame.index, pd.DatetimeIndex):
        return None
    raise DataError(
        f"no time column found: none of the columns {columns} is named one of "
        f"{list(TIME_COLUMN_CANDIDATES)}; pass time_column=<name of the column holding the timestamps>"
    )


def _parse_timestamps(raw: pd.Series, name: str, time_format: Optional[str], row_label) -> pd.DatetimeIndex:
    if ptypes.is_datetime64_any_dtype(raw):
        parsed = pd.Series(raw)
    elif ptypes.is_numeric_dtype(raw) or ptypes.is_bool_dtype(raw):
        raise DataError(
            f"time column {name!r} holds numbers, not dates (e.g. {raw.iloc[0]!r}); convert it to "
            f"datetimes first (e.g. df[{name!r}] = pd.to_datetime(df[{name!r}], unit='s')) or pass the "
            "right column as time_column="
        )
    else:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "could not infer format" chatter
                parsed = pd.to_datetime(raw, format=time_format, errors="coerce")
        except (ValueError, TypeError) as exc:
            raise DataError(
                f"time column {name!r} could not be parsed as dates ({exc}); pass time_format= "
                "(e.g. '%Y-%m-%d %H:%M:%S') or make all timestamps use one format and time zone"
            ) from None
    absent = raw.isna().to_numpy()
    if absent.any():
        rows = np.flatnonzero(absent)[:_SHOW]
        raise DataError(
            f"time column {name!r} has {int(absent.sum())} empty cell(s), first at "
            f"{', '.join(row_label(int(r)) for r in rows)}; every row needs a timestamp: fill or remove "
            "those rows"
        )
    bad = parsed.isna().to_numpy()
    if bad.any():
        rows = np.flatnonzero(bad)[:_SHOW]
        examples = ", ".join(f"{raw.iloc[r]!r} at {row_label(int(r))}" for r in rows)
        hint = f"the format {time_format!r}" if time_format else "the format of the first timestamp"
        raise DataError(
            f"time column {name!r}: {int(bad.sum())} timestamp(s) could not be parsed with {hint}: "
            f"{examples}; fix those cells or pass time_format= matching every row"
        )
    return pd.DatetimeIndex(parsed)


def _select_value_columns(
    frame: pd.DataFrame, candidates: list, explicit: bool, row_label
) -> tuple[list, list]:
    """Split ``candidates`` into numeric value columns and dropped text columns."""
    kept, dropped = [], []
    for c in candidates:
        s = frame[c]
        non_empty = s.notna().to_numpy()
        if not explicit and not non_empty.any():
            dropped.append(c)  # every cell empty or a missing marker: nothing to learn from
            continue
        if ptypes.is_bool_dtype(s) or ptypes.is_numeric_dtype(s):
            kept.append(c)
            continue
        as_numbers = pd.to_numeric(s, errors="coerce")
        parsed = as_numbers.notna().to_numpy()
        n_text = int((non_empty & ~parsed).sum())
        if non_empty.any() and parsed.sum() >= 0.5 * non_empty.sum():
            rows = np.flatnonzero(non_empty & ~parsed)[:_SHOW]
            examples = ", ".join(f"{s.iloc[r]!r} at {row_label(int(r))}" for r in rows)
            raise DataError(
                f"column {c!r} is numeric but {n_text} cell(s) hold text: {examples}; pass "
                "na_values=[...] listing those markers to treat them as missing, fix the cells, or "
                "leave the column out with columns=[...]"
            )
        if explicit:
            first = s[s.notna()].iloc[0] if non_empty.any() else None
            raise DataError(
                f"column {c!r} holds text, not numbers (e.g. {first!r}); value columns must be numeric: "
                "remove it from columns=[...] or encode it as numbers first"
            )
        dropped.append(c)
    return kept, dropped


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


def read_series(
    data: DataSource,
    *,
    time_column: Optional[str] = None,
    time_format: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    na_values: Optional[Sequence[Union[str, float]]] = None,
    missing: str = "error",
    duplicates: str = "error",
    sort: bool = False,
    knot_times: str = "timestamps",
    freq: Optional[str] = None,
) -> SeriesTable:
    """Read and validate a series from a CSV path or a DataFrame.

    Args:
        data: a path to a CSV file, or a DataFrame (not modified).
        time_column: the column holding timestamps; None detects one named ``date``, ``ds``,
            ``timestamp``, ``date_time``, ``datetime``, ``time`` (case-insensitive), or uses a
            DataFrame's ``DatetimeIndex``.
        time_format: a ``strftime`` format for the timestamps; None infers it from the first one.
        columns: the value columns to keep (default: every numeric column).
        na_values: cell values that mean "missing" (e.g. ``[-9999]``), as in ``pandas.read_csv``;
            numbers also match numerically (``-9999.0``).
        missing: ``"error"`` (default) rejects missing values; ``"interpolate"`` fills them linearly
            in time (the ends take the nearest value); ``"ffill"`` carries the last value forward
            (leading gaps take the first value).
        duplicates: what to do with repeated timestamps: ``"error"`` (default), ``"keep"`` every row
            (as Time-Series-Library does; needs ``knot_times="index"``), ``"first"``, ``"last"`` or
            ``"mean"`` of each group.
        sort: sort rows by timestamp (stable) instead of rejecting out-of-order timestamps.
        knot_times: ``"timestamps"`` (time since the first row in median steps) or ``"index"``
            (``arange(N)``: every row one step apart, the benchmark convention).
        freq: a pandas offset alias overriding the inferred frequency.

    Returns:
        a ``SeriesTable``.

    Raises:
        DataError (or a subclass) naming the problem and the fix.
    """
    _check_choice("missing", missing, MISSING_POLICIES)
    _check_choice("duplicates", duplicates, DUPLICATE_POLICIES)
    _check_choice("knot_times", knot_times, KNOT_TIME_MODES)
    if duplicates == "keep" and knot_times == "timestamps":
        raise DataError(
            "duplicates='keep' keeps repeated timestamps, which would give two knots the same time "
            "(zero spacing); pass knot_times='index' (rows one step apart, the benchmark convention) or "
            "duplicates='first' | 'last' | 'mean'"
        )
    if freq is not None:
        check_freq(freq)
    if na_values is not None and (isinstance(na_values, (str, bytes)) or not isinstance(na_values, Sequence)):
        na_values = [na_values]
    na_values = list(na_values) if na_values is not None else []

    if isinstance(data, pd.DataFrame):
        frame = data.copy()
        source = "<DataFrame>"

        def row_label(r: int) -> str:
            return f"row {r}"

        if na_values:
            frame = frame.replace([v for v in na_values if isinstance(v, str)], np.nan)
    elif isinstance(data, (str, os.PathLike)):
        path = Path(data).expanduser()
        frame = _read_file(path, na_values or None)
        source = str(path)

        def row_label(r: int) -> str:
            return f"row {r} (line {r + 2})"
    else:
        raise DataError(
            f"data must be a path to a CSV file, a registered dataset name or a pandas DataFrame; "
            f"got {type(data).__name__}"
        )

    if frame.shape[1] == 0:
        raise DataError(f"{source} has no columns; it needs a header with a time column and value columns")
    if len(frame) == 0:
        raise DataError(f"{source} has a header but no data rows; it needs at least lookback + horizon rows")
    if frame.columns.duplicated().any():
        dup = [str(c) for c in frame.columns[frame.columns.duplicated()]]
        raise DataError(f"{source} repeats column name(s) {dup}; give every column a distinct name")

    time_name = _detect_time_column(frame, time_column)
    raw_time = pd.Series(frame.index, index=frame.index) if time_name is None else frame[time_name]
    timestamps = _parse_timestamps(raw_time, time_name or "<index>", time_format, row_label)

    value_candidates = [c for c in frame.columns if c != time_name]
    if columns is not None:
        if isinstance(columns, str):
            columns = [columns]
        unknown = [c for c in columns if c not in frame.columns or c == time_name]
        if unknown:
            raise DataError(
                f"columns {unknown} are not value columns of {source}; available: "
                f"{[str(c) for c in value_candidates]}"
            )
        value_candidates = list(dict.fromkeys(columns))
    kept, dropped = _select_value_columns(frame, value_candidates, columns is not None, row_label)
    if not kept:
        raise DataError(
            f"{source} has no numeric value columns (text columns: {[str(c) for c in dropped]}); a "
            "forecasting series needs at least one column of numbers"
        )
    values = frame[kept].apply(pd.to_numeric).to_numpy(dtype=np.float64, na_value=np.nan, copy=True)  # [N, C]
    position = np.arange(len(frame))  # original row of each current row, for messages

    # -- order ------------------------------------------------------------------------------------------
    ts_ns = timestamps.as_unit("ns").asi8  # UTC-based for tz-aware timestamps
    back = np.flatnonzero(np.diff(ts_ns) < 0)
    if back.size:
        if not sort:
            i = int(back[0])
            raise DataError(
                f"timestamps are not in increasing order: {row_label(i + 1)} ({timestamps[i + 1]}) comes "
                f"after {row_label(i)} ({timestamps[i]}); {back.size} such step(s) back in time; sort "
                "the file by time, or pass sort=True to sort the rows"
            )
        order = np.argsort(ts_ns, kind="stable")
        timestamps, values, position, ts_ns = timestamps[order], values[order], position[order], ts_ns[order]

    # -- repeated timestamps ----------------------------------------------------------------------------
    repeated = np.flatnonzero(np.diff(ts_ns) == 0)  # row i + 1 repeats row i
    if repeated.size and duplicates != "keep":
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
        timestamps, position, ts_ns = timestamps[rows], position[rows], ts_ns[rows]

    # -- knot times -------------------------------------------------------------------------------------
    steps = np.diff(ts_ns)
    positive = steps[steps > 0]
    if positive.size == 0:
        raise DataError(
            f"{source} has fewer than 2 distinct timestamps ({len(timestamps)} row(s)); a series needs "
            "at least lookback + horizon rows at distinct times"
        )
    step = pd.Timedelta(int(np.median(positive)), unit="ns")
    if knot_times == "index":
        knots = np.arange(len(timestamps), dtype=np.float64)
    else:
        knots = (ts_ns - ts_ns[0]).astype(np.float64) / float(step.value)

    # -- infinite, sentinel and missing values ----------------------------------------------------------
    for v in na_values:
        try:
            number = float(v)
        except (TypeError, ValueError):
            continue
        values[values == number] = np.nan
    names = [str(c) for c in kept]
    infinite = np.isinf(values)
    if infinite.any():
        r, c = np.argwhere(infinite)[0]
        per_col = {names[j]: int(n) for j, n in enumerate(infinite.sum(0)) if n}
        raise DataError(
            f"{int(infinite.sum())} infinite value(s) in value columns {per_col}, first in {names[c]!r} at "
            f"{row_label(int(position[r]))}; replace them in the data, or pass na_values=['inf', '-inf'] "
            "with missing='interpolate' | 'ffill' to treat them as missing"
        )
    nan = np.isnan(values)
    if nan.any():
        per_col = {names[j]: int(n) for j, n in enumerate(nan.sum(0)) if n}
        if missing == "error":
            r, c = np.argwhere(nan)[0]
            raise DataError(
                f"{int(nan.sum())} missing value(s) (NaN) in value columns {per_col}, first in {names[c]!r} "
                f"at {row_label(int(position[r]))}; pass missing='interpolate' (linear in time) or "
                "missing='ffill' (carry the last value forward), or fill them in the data"
            )
        empty = [names[j] for j in range(values.shape[1]) if nan[:, j].all()]
        if empty:
            raise DataError(
                f"value column(s) {empty} have no values at all, so missing={missing!r} has nothing to fill "
                "from; leave them out with columns=[...] or fix the data"
            )
        if missing == "interpolate":
            for j in np.flatnonzero(nan.any(0)):
                good = ~nan[:, j]
                values[~good, j] = np.interp(knots[~good], knots[good], values[good, j])
        else:  # ffill
            values = pd.DataFrame(values).ffill().bfill().to_numpy(dtype=np.float64)

    return SeriesTable(
        timestamps=timestamps,
        values=np.ascontiguousarray(values),
        columns=tuple(names),
        knot_times=knots,
        step=step,
        freq=freq if freq is not None else infer_freq(timestamps, step),
        time_column=None if time_name is None else str(time_name),
        dropped_columns=tuple(str(c) for c in dropped),
        source=source,
    )

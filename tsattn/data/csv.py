"""Read a CSV file or a DataFrame into a validated, time-ordered numeric table with knot times.

``read_series`` is the one gate every series passes through. It

1. reads the file (or copies the DataFrame), passing ``na_values`` and ``sep`` to pandas, and
   rejects a header that repeats a column name;
2. finds and parses the time column (given, detected by name, or a ``DatetimeIndex``); dates
   written ``dd/mm/yyyy`` or ``mm/dd/yyyy`` are read the way the data shows, and when no row tells
   (every day <= 12) reading stops until ``dayfirst=`` or ``time_format=`` says which;
3. keeps the numeric columns as value columns (text columns are dropped with a ``DataWarning``,
   see ``value columns`` below);
4. checks the timestamps are increasing (``sort=True`` sorts) and handles repeated timestamps
   (``duplicates=``); warns when the longest step between rows is far above the median step;
5. rejects infinite values and handles missing ones (``missing=``), never from a later row;
6. computes knot times: time since the first row in ``time_unit`` (default: the median step).

Value columns: a column is a value column when pandas reads it as numbers (or booleans), or when
its text becomes numbers once the ``thousands`` separator is removed. A text column, or a column
with no values at all, is dropped, listed in ``SeriesTable.dropped_columns`` and named in a
``DataWarning`` (unless ``columns=`` chooses the value columns). Reading stops with an error naming
the cells when a column is numbers with stray text (say ``"n/a"``: at least half of its non-empty
cells parse as numbers), or numbers written with thousands separators (``"5,827.0"``) while
``thousands`` is not set, because dropping it would lose a channel.

Missing values are never filled from a later row: a filled value depends only on the rows
before it, so no window's inputs and no train statistic see the future (``missing="ffill"``).

Rows in error messages are 0-based data rows (the header is not counted), in the order of the
input; for a file the line number is given too.
"""
from __future__ import annotations

import numbers
import os
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from .errors import DataError, DataFileNotFoundError, DataWarning

__all__ = [
    "DUPLICATE_POLICIES",
    "KNOT_TIME_MODES",
    "MISSING_POLICIES",
    "TIME_COLUMN_CANDIDATES",
    "SeriesTable",
    "check_freq",
    "check_time_unit",
    "infer_freq",
    "knot_times_in",
    "median_step",
    "normalize_na_values",
    "read_series",
    "with_time_unit",
]

TIME_COLUMN_CANDIDATES = ("date", "ds", "timestamp", "date_time", "datetime", "time", "time_stamp", "dt")
MISSING_POLICIES = ("error", "ffill")
DUPLICATE_POLICIES = ("error", "keep", "first", "last", "mean")
KNOT_TIME_MODES = ("timestamps", "index")
_SHOW = 3  # how many offending rows / values a message lists
LARGE_STEP_RATIO = 100  # a step this many times the median step gets a DataWarning
_DELIMITERS = (";", "\t", "|")  # what a one-column header most likely holds instead of commas
# dd/mm/yyyy or mm/dd/yyyy (also with "." or "-"), at the start of a timestamp
_DAY_MONTH = re.compile(r"^\s*(\d{1,2})([/.\-])(\d{1,2})\2(\d{4}|\d{2})(?!\d)")
# a number written with "," between groups of three digits: 5,827.0 or -1,234,567
_THOUSANDS = re.compile(r"^\s*[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*$")

DataSource = Union[str, os.PathLike, pd.DataFrame]
NaValues = Union[str, float, Sequence[Union[str, float]], None]


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


def _check_choice(name: str, value, choices: Sequence[str]) -> None:
    if name == "missing" and value == "interpolate":
        raise DataError(INTERPOLATE_REFUSAL)
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise DataError(f"`{name}` must be one of {options}; got {value!r}")


def normalize_na_values(na_values: NaValues) -> Optional[list]:
    """``na_values`` as a list, as pandas reads it: one value (``-9999``, ``"-9999"``) is ``[value]``.

    Raises:
        DataError: a per-column dict (not supported) or a value that is not a string or a number.
    """
    if na_values is None:
        return None
    if isinstance(na_values, (str, bytes, numbers.Number)):
        return [na_values]
    if isinstance(na_values, dict):
        raise DataError(
            "na_values must be one marker or a list of markers for every column (e.g. [-9999, 'n/a']); "
            f"per-column dicts are not supported: got {na_values!r}"
        )
    if not isinstance(na_values, Iterable):
        raise DataError(f"na_values must be a string, a number or a list of them; got {na_values!r}")
    values = list(na_values)
    bad = [v for v in values if not isinstance(v, (str, bytes, numbers.Number))]
    if bad:
        raise DataError(f"na_values must hold strings or numbers (e.g. [-9999, 'n/a']); got {bad!r}")
    return values


def _read_file(path: Path, na_values, sep: str) -> pd.DataFrame:
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
        header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
        frame = pd.read_csv(path, na_values=na_values, sep=sep)
    except pd.errors.EmptyDataError:
        raise DataError(
            f"CSV file {str(path)!r} is empty (no header, no rows); it needs a header row and data rows"
        ) from None
    except pd.errors.ParserError as exc:
        raise DataError(
            f"CSV file {str(path)!r} could not be parsed ({exc}); every row needs the same number of "
            f"{sep!r}-separated fields as the header"
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"CSV file {str(path)!r} is not UTF-8 text ({exc}); re-save it as UTF-8") from None
    names = [str(c) for c in header.iloc[0]] if len(header) else []
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise DataError(
            f"the header of {str(path)!r} repeats the column name(s) {repeated} (pandas would rename the "
            f"copies {repeated[0]!r}.1, ...); give every column a distinct name"
        )
    if frame.shape[1] == 1:
        name = str(frame.columns[0])
        for delimiter in _DELIMITERS:
            if delimiter != sep and delimiter in name:
                raise DataError(
                    f"{str(path)!r} was read as one column named {name[:60]!r}: its fields look separated "
                    f"by {delimiter!r}, not {sep!r}; pass sep={delimiter!r}"
                )
    return frame


def load_table(data: Any, na_values: list, sep: str, *, accepts: str, needs_columns: str, needs_rows: str,
               type_hint: str = "") -> tuple[pd.DataFrame, str, Callable[[int], str]]:
    """A copy of a DataFrame (string ``na_values`` replaced by NaN) or a CSV file read, checked for
    columns, rows and repeated column names. Returns the frame, its name for messages and a function
    that names a row for messages (with the file's line number for a file)."""
    if isinstance(data, pd.DataFrame):
        frame = data.copy()
        source = "<DataFrame>"

        def row_label(r: int) -> str:
            return f"row {r}"

        if na_values:
            frame = frame.replace([v for v in na_values if isinstance(v, str)], np.nan)
    elif isinstance(data, (str, os.PathLike)):
        path = Path(data).expanduser()
        frame = _read_file(path, na_values or None, sep)
        source = str(path)

        def row_label(r: int) -> str:
            return f"row {r} (line {r + 2})"
    else:
        raise DataError(f"data must be {accepts}; got {type(data).__name__}{type_hint}")
    if frame.shape[1] == 0:
        raise DataError(f"{source} has no columns; it needs {needs_columns}")
    if len(frame) == 0:
        raise DataError(f"{source} has a header but no data rows; it needs at least {needs_rows}")
    if frame.columns.duplicated().any():
        dup = [str(c) for c in frame.columns[frame.columns.duplicated()]]
        raise DataError(f"{source} repeats column name(s) {dup}; give every column a distinct name")
    return frame, source, row_label


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


def _resolve_dayfirst(raw: pd.Series, name: str, dayfirst: Optional[bool]) -> bool:
    """Whether ``dd/mm/yyyy``-style dates are day-first: the given ``dayfirst``, else what the data
    shows (a first field above 12 means day-first, a second field above 12 month-first).

    Raises:
        DataError: every row could be read either way and ``dayfirst`` is None.
    """
    text = raw[raw.notna()].astype(str)
    if text.empty or not _DAY_MONTH.match(text.iloc[0]):
        return bool(dayfirst)
    if dayfirst is not None:
        return dayfirst
    parts = text.str.extract(_DAY_MONTH)
    if parts[0].isna().any():
        return False  # mixed forms: parsing reports the rows that do not fit
    first, second = parts[0].astype(int), parts[2].astype(int)
    if (first > 12).any() and (second <= 12).all():
        return True
    if (second > 12).any() and (first <= 12).all():
        return False
    if (first <= 12).all() and (second <= 12).all():
        example = text.iloc[0]
        day, month, year = int(parts[0].iloc[0]), int(parts[2].iloc[0]), parts[3].iloc[0]
        sep = parts[1].iloc[0]
        fmt = f"%d{sep}%m{sep}%Y" if len(year) == 4 else f"%d{sep}%m{sep}%y"
        raise DataError(
            f"time column {name!r} holds dates like {example!r} whose day and month cannot be told apart "
            f"(both fields are <= 12 in every row); pass dayfirst=True ({example.strip()[:5]!r} = day {day} "
            f"of month {month}) or dayfirst=False (= month {day}, day {month}), or time_format= (e.g. "
            f"{fmt!r} plus the time part)"
        )
    return False  # both fields exceed 12 somewhere: parsing reports the rows that do not fit


def _parse_timestamps(
    raw: pd.Series, name: str, time_format: Optional[str], row_label, dayfirst: Optional[bool] = None
) -> pd.DatetimeIndex:
    if ptypes.is_datetime64_any_dtype(raw):
        parsed = pd.Series(raw)
    elif ptypes.is_numeric_dtype(raw) or ptypes.is_bool_dtype(raw):
        raise DataError(
            f"time column {name!r} holds numbers, not dates (e.g. {raw.iloc[0]!r}); convert it to "
            f"datetimes first (e.g. df[{name!r}] = pd.to_datetime(df[{name!r}], unit='s')) or pass the "
            "right column as time_column="
        )
    else:
        if time_format is None:
            dayfirst = _resolve_dayfirst(raw, name, dayfirst)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "could not infer format" chatter
                parsed = pd.to_datetime(raw, format=time_format, dayfirst=bool(dayfirst), errors="coerce")
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


def _numbers_without_separator(s: pd.Series, thousands: str) -> pd.Series:
    """``s`` as numbers once ``thousands`` is removed from its text (NaN where that fails)."""
    return pd.to_numeric(s.astype("string").str.replace(thousands, "", regex=False), errors="coerce")


def _select_value_columns(
    frame: pd.DataFrame, candidates: list, explicit: bool, row_label, thousands: Optional[str]
) -> tuple[list, dict]:
    """Split ``candidates`` into numeric value columns and dropped ones (name -> why).

    Columns whose text is numbers with ``thousands`` separators are converted in ``frame`` in place.
    """
    kept, dropped = [], {}
    for c in candidates:
        s = frame[c]
        non_empty = s.notna().to_numpy()
        if not explicit and not non_empty.any():
            dropped[c] = "no values"  # every cell empty or a missing marker: nothing to learn from
            continue
        if ptypes.is_bool_dtype(s) or ptypes.is_numeric_dtype(s):
            kept.append(c)
            continue
        if thousands is not None:
            converted = _numbers_without_separator(s, thousands)
            if (converted.notna().to_numpy() == non_empty).all():
                frame[c] = converted
                kept.append(c)
                continue
        as_numbers = pd.to_numeric(s, errors="coerce")
        parsed = as_numbers.notna().to_numpy()
        text_cells = non_empty & ~parsed
        if thousands is None and text_cells.any():
            grouped = s[text_cells].astype(str).str.match(_THOUSANDS).to_numpy()
            if grouped.all():
                r = int(np.flatnonzero(text_cells)[0])
                raise DataError(
                    f"column {c!r} holds numbers written with thousands separators (e.g. {s.iloc[r]!r} at "
                    f"{row_label(r)}); pass thousands=',' to read them as numbers, or leave the column out "
                    "with columns=[...]"
                )
        n_text = int(text_cells.sum())
        if non_empty.any() and parsed.sum() >= 0.5 * non_empty.sum():
            rows = np.flatnonzero(text_cells)[:_SHOW]
            examples = ", ".join(f"{s.iloc[r]!r} at {row_label(int(r))}" for r in rows)
            raise DataError(
                f"column {c!r} is numeric but {n_text} cell(s) hold text: {examples}; pass "
                "na_values=[...] listing those markers to treat them as missing, fix the cells, or "
                "leave the column out with columns=[...]"
            )
        first = s[s.notna()].iloc[0] if non_empty.any() else None
        if explicit:
            raise DataError(
                f"column {c!r} holds text, not numbers (e.g. {first!r}); value columns must be numeric: "
                "remove it from columns=[...] or encode it as numbers first"
            )
        dropped[c] = f"text, e.g. {first!r}"
    return kept, dropped


def median_step(timestamps_ns: np.ndarray) -> Optional[pd.Timedelta]:
    """The median positive step between consecutive int64 nanosecond timestamps (None if there is none)."""
    steps = np.diff(np.asarray(timestamps_ns, dtype=np.int64))
    positive = steps[steps > 0]
    if positive.size == 0:
        return None
    return pd.Timedelta(int(np.median(positive)), unit="ns")


def check_time_unit(time_unit) -> pd.Timedelta:
    """``time_unit`` (``"1h"``, ``"10min"``, a ``pd.Timedelta``) as a positive ``pd.Timedelta``."""
    try:
        unit = pd.Timedelta(time_unit)
    except (ValueError, TypeError):
        unit = None
    if unit is None or pd.isna(unit) or unit <= pd.Timedelta(0):
        raise DataError(f"time_unit must be a positive duration such as '1h' or '10min'; got {time_unit!r}")
    return unit


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
                     source: str, row_label) -> None:
    steps = np.diff(ts_ns)
    long = np.flatnonzero(steps > LARGE_STEP_RATIO * step.value)
    if long.size == 0:
        return
    worst = long[np.lexsort((long, -steps[long]))[:_SHOW]]  # longest first, then earliest
    listed = "; ".join(
        f"{pd.Timedelta(int(steps[i]), unit='ns')} from {row_label(int(position[i]))} ({timestamps[i]}) to "
        f"{row_label(int(position[i + 1]))} ({timestamps[i + 1]})"
        for i in worst
    )
    warnings.warn(
        f"{source}: {long.size} step(s) between consecutive rows exceed {LARGE_STEP_RATIO}x the median step "
        f"({step}); the longest: {listed}. If the series has such gaps, ignore this; otherwise check the "
        "timestamps (day-first dates read month-first jump by months: pass dayfirst=True or time_format=)",
        DataWarning,
        stacklevel=3,
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
    missing: str = "error",
    duplicates: str = "error",
    sort: bool = False,
    knot_times: str = "timestamps",
    time_unit: Optional[Union[str, pd.Timedelta]] = None,
    freq: Optional[str] = None,
) -> SeriesTable:
    """Read and validate a series from a CSV path or a DataFrame.

    Args:
        data: a path to a CSV file, or a DataFrame (not modified).
        time_column: the column holding timestamps; None detects one named ``date``, ``ds``,
            ``timestamp``, ``date_time``, ``datetime``, ``time`` (case-insensitive), or uses a
            DataFrame's ``DatetimeIndex``.
        time_format: a ``strftime`` format for the timestamps; None infers it from the first one.
        dayfirst: for dates written ``07/01/2016`` (or with ``.`` / ``-``): True reads 7 January,
            False 1 July. None decides from the data (a first field above 12 means day-first) and
            raises when every row could be read either way.
        columns: the value columns to keep (default: every numeric column).
        na_values: cell values that mean "missing": one (``-9999``, ``"n/a"``) or a list, as in
            ``pandas.read_csv``; numbers also match numerically (``-9999.0``).
        thousands: the thousands separator of numbers written as text (``","`` reads ``"5,827.0"``
            as 5827.0); None: such a column is an error that names this option.
        sep: the field delimiter of a CSV file (``";"`` for semicolon-separated files).
        missing: ``"error"`` (default) rejects missing values; ``"ffill"`` carries the last value
            forward, so a filled value depends only on earlier rows. A column whose first rows are
            missing has nothing to carry: that is an error naming the rows to drop.
            (Interpolation is not offered: it fills from the row after a gap, which is look-ahead.)
        duplicates: what to do with repeated timestamps: ``"error"`` (default), ``"keep"`` every row
            (as Time-Series-Library does; needs ``knot_times="index"``), ``"first"``, ``"last"`` or
            ``"mean"`` of each group.
        sort: sort rows by timestamp (stable) instead of rejecting out-of-order timestamps.
        knot_times: ``"timestamps"`` (time since the first row in ``time_unit``) or ``"index"``
            (``arange(N)``: every row one step apart, the benchmark convention).
        time_unit: the unit of timestamp knot times (``"1h"``, a ``pd.Timedelta``); None: the
            median step of this data.
        freq: a pandas offset alias overriding the inferred frequency.

    Returns:
        a ``SeriesTable``.

    Raises:
        DataError (or a subclass) naming the problem and the fix.

    Warns:
        DataWarning: text or empty columns were dropped; a step between rows exceeds
            ``LARGE_STEP_RATIO`` times the median step (a real gap, or misread dates).
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
    if dayfirst is not None and not isinstance(dayfirst, bool):
        raise DataError(f"dayfirst must be True, False or None; got {dayfirst!r}")
    if thousands is not None and (not isinstance(thousands, str) or len(thousands) != 1):
        raise DataError(f"thousands must be one character such as ',' or None; got {thousands!r}")
    if not isinstance(sep, str) or not sep:
        raise DataError(f"sep must be a delimiter such as ',' or ';'; got {sep!r}")
    unit = None if time_unit is None else check_time_unit(time_unit)
    na_values = normalize_na_values(na_values) or []

    frame, source, row_label = load_table(
        data, na_values, sep, accepts="a path to a CSV file, a registered dataset name or a pandas DataFrame",
        type_hint=("; wrap an array in a DataFrame with a time column, e.g. pd.DataFrame(values, "
                   "index=pd.date_range(start, periods=len(values), freq='h'))" if isinstance(data, np.ndarray) else ""),
        needs_columns="a header with a time column and value columns", needs_rows="lookback + horizon rows",
    )

    time_name = _detect_time_column(frame, time_column)
    raw_time = pd.Series(frame.index, index=frame.index) if time_name is None else frame[time_name]
    timestamps = _parse_timestamps(raw_time, time_name or "<index>", time_format, row_label, dayfirst)

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
    kept, dropped = _select_value_columns(frame, value_candidates, columns is not None, row_label, thousands)
    if not kept:
        raise DataError(
            f"{source} has no numeric value columns (text columns: {[str(c) for c in dropped]}); a "
            "forecasting series needs at least one column of numbers"
        )
    if dropped:
        reasons = ", ".join(f"{str(c)!r} ({why})" for c, why in dropped.items())
        warnings.warn(
            f"{source}: column(s) left out of the value columns because they are not numbers: {reasons}; "
            "pass columns=[...] to choose the value columns yourself (this silences the warning), or "
            "encode text as numbers first",
            DataWarning,
            stacklevel=2,
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
    step = median_step(ts_ns)
    if step is None:
        raise DataError(
            f"{source} has fewer than 2 distinct timestamps ({len(timestamps)} row(s)); a series needs "
            "at least lookback + horizon rows at distinct times"
        )
    _warn_long_steps(ts_ns, timestamps, position, step, source, row_label)
    if knot_times == "index":
        knots, unit = np.arange(len(timestamps), dtype=np.float64), None
    else:
        unit = unit if unit is not None else step
        knots = knot_times_in(timestamps, unit)

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
            "with missing='ffill' to treat them as missing"
        )
    nan = np.isnan(values)
    if nan.any():
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
        values = pd.DataFrame(values).ffill().to_numpy(dtype=np.float64)  # row r from rows <= r only

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
        time_unit=unit,
    )

"""The table-reading core shared by every reader: a CSV file or a DataFrame -> a checked frame,
its time column, its timestamps and its value columns.

- ``load_table``: a copy of a DataFrame, or a CSV file read with ``na_values`` and ``sep``; refuses
  missing files, directories, empty files, ragged rows, non-UTF-8 text and repeated column names,
  and names the delimiter when a ``;``-, tab- or ``|``-separated file was read with ``sep=","``.
- ``detect_time_column``: the given column, one named like a time column, a datetime column, or
  a DataFrame's ``DatetimeIndex``.
- ``parse_timestamps``: dates written ``dd/mm/yyyy`` or ``mm/dd/yyyy`` are read the way the data
  shows; when no row tells (every day <= 12) reading stops until ``dayfirst=`` or ``time_format=``
  says which. Timestamps with different UTC offsets (one zone's winter and summer time,
  ``-05:00`` and ``-04:00``) are read as UTC.
- ``choose_value_columns`` / ``select_value_columns``: numeric columns are values; text columns
  are left out with a ``DataWarning`` naming ``columns=[...]``; a numeric column with stray text,
  numbers written with thousands separators while ``thousands`` is not set, or with a decimal
  comma while ``decimal`` is ``"."``, is an error naming the cells.
- ``check_magnitudes``: values float32 cannot hold are an error; values many orders of magnitude
  outside the rest of their column (or variable) get a ``DataWarning``.
- ``ids_as_written``: a CSV file's id column, read as text, stays text unless every id is the
  canonical text of an integer.
- ``check_reading_options``: the validation of the options every reader takes.

Rows in messages are 0-based data rows (the header is not counted); for a file the line number is
given too.
"""
from __future__ import annotations

import numbers
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from ..errors import DataError, DataFileNotFoundError, warn_data
from ..validation import SHOW

__all__ = [
    "FLOAT32_MAX",
    "OUTLIER_RATIO",
    "TIME_COLUMN_CANDIDATES",
    "NaValues",
    "check_magnitudes",
    "check_reading_options",
    "choose_value_columns",
    "detect_time_column",
    "ids_as_written",
    "load_table",
    "normalize_na_values",
    "parse_timestamps",
    "refuse_empty_cells",
    "select_value_columns",
]

TIME_COLUMN_CANDIDATES = ("date", "ds", "timestamp", "date_time", "datetime", "time", "time_stamp", "dt")
_DELIMITERS = (";", "\t", "|")  # what a one-column header most likely holds instead of commas
# dd/mm/yyyy or mm/dd/yyyy (also with "." or "-"), at the start of a timestamp
_DAY_MONTH = re.compile(r"^\s*(\d{1,2})([/.\-])(\d{1,2})\2(\d{4}|\d{2})(?!\d)")
# a number written with "," between groups of three digits: 5,827.0 or -1,234,567
_THOUSANDS = re.compile(r"^\s*[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*$")
# a number written with a decimal comma: 0,7855 or -12,5 (or 1.234,5 with "." between thousands)
_DECIMAL_COMMA = re.compile(r"^\s*[+-]?(\d+|\d{1,3}(\.\d{3})+),\d+([eE][+-]?\d+)?\s*$")
# the canonical text of an integer: 0, 7, -3 (not 007, +7, -0, 7.0)
_CANONICAL_INT = re.compile(r"^(0|-?[1-9][0-9]*)$")

FLOAT32_MAX = float(np.finfo(np.float32).max)  # about 3.4e38: models and forecasts run in float32
OUTLIER_RATIO = 1e6  # |x| above this times the 99th percentile of |x| of its column gets a DataWarning

NaValues = Union[str, float, Sequence[Union[str, float]], None]


def choose_value_columns(frame: pd.DataFrame, candidates: list, columns: Optional[Sequence[str]], source: str,
                         row_label: Callable[[int], str], thousands: Optional[str], *, kind: str,
                         none_left: str, decimal: str = ".") -> tuple[list, dict]:
    """The numeric ``kind`` columns of ``frame`` among ``candidates`` (or the chosen ``columns``, in
    their order) and the text / empty ones left out (name -> why), named in a ``DataWarning`` unless
    ``columns`` chose them. An unknown chosen column, or no numeric column at all (``none_left``
    says what to do then), is an error."""
    if columns is not None:
        wanted = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in wanted if c not in candidates]
        if unknown:
            raise DataError(
                f"columns {unknown} are not {kind} columns of {source}; available: {[str(c) for c in candidates]}"
            )
        candidates = list(dict.fromkeys(wanted))
    kept, dropped = select_value_columns(frame, candidates, columns is not None, row_label, thousands, decimal)
    if not kept:
        raise DataError(
            f"{source} has no numeric {kind} columns (text or empty columns: {[str(c) for c in dropped]}); {none_left}"
        )
    if dropped:
        reasons = ", ".join(f"{str(c)!r} ({why})" for c, why in dropped.items())
        warn_data(
            f"{source}: column(s) left out of the {kind} columns because they are not numbers: {reasons}; "
            f"pass columns=[...] to choose the {kind} columns yourself (this silences the warning), or "
            "encode text as numbers first"
        )
    return kept, dropped


def refuse_empty_cells(cells: pd.Series, what: str, need: str, row_label: Callable[[int], str]) -> None:
    """Raise unless every cell of ``cells`` holds a value: ``"<what> has n empty cell(s), first at
    ...; <need>: fill or remove those rows"``."""
    absent = cells.isna().to_numpy()
    if absent.any():
        rows = np.flatnonzero(absent)[:SHOW]
        raise DataError(
            f"{what} has {int(absent.sum())} empty cell(s), first at {', '.join(row_label(int(r)) for r in rows)}; "
            f"{need}: fill or remove those rows"
        )


def check_reading_options(*, dayfirst: Optional[bool] = None, thousands: Optional[str] = None, sep: str = ",",
                          decimal: str = ".") -> None:
    """Raise unless the reading options every reader takes have valid types (and ``decimal`` is not
    the thousands separator)."""
    if dayfirst is not None and not isinstance(dayfirst, bool):
        raise DataError(f"dayfirst must be True, False or None; got {dayfirst!r}")
    if thousands is not None and (not isinstance(thousands, str) or len(thousands) != 1):
        raise DataError(f"thousands must be one character such as ',' or None; got {thousands!r}")
    if not isinstance(sep, str) or not sep:
        raise DataError(f"sep must be a delimiter such as ',' or ';'; got {sep!r}")
    if not isinstance(decimal, str) or len(decimal) != 1:
        raise DataError(f"decimal must be one character such as '.' or ','; got {decimal!r}")
    if decimal == thousands:
        raise DataError(f"decimal={decimal!r} is also the thousands separator; pass thousands='.' (or None)")


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


def _read_file(path: Path, na_values, sep: str, decimal: str, text_columns: Sequence[str]) -> pd.DataFrame:
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
        frame = pd.read_csv(path, na_values=na_values, sep=sep, decimal=decimal,
                            dtype={c: str for c in text_columns} or None)
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
               type_hint: str = "", decimal: str = ".",
               text_columns: Sequence[str] = ()) -> tuple[pd.DataFrame, str, Callable[[int], str]]:
    """A copy of a DataFrame (string ``na_values`` replaced by NaN) or a CSV file read (with
    ``decimal`` as the decimal mark, ``text_columns`` as text), checked for columns, rows and
    repeated column names. Returns the frame, its name for messages and a function that names a row
    for messages (with the file's line number for a file)."""
    if isinstance(data, pd.DataFrame):
        frame = data.copy()
        source = "<DataFrame>"

        def row_label(r: int) -> str:
            return f"row {r}"

        if na_values:
            frame = frame.replace([v for v in na_values if isinstance(v, str)], np.nan)
    elif isinstance(data, (str, os.PathLike)):
        path = Path(data).expanduser()
        frame = _read_file(path, na_values or None, sep, decimal, text_columns)
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


def ids_as_written(raw: pd.Series) -> pd.Series:
    """A CSV file's id column read as text -> int64 when every id is the canonical text of an int64
    (``"7"``, ``"-3"``, ``"0"``), else unchanged: ``"007"``, ``"+7"``, ``"7.0"`` stay as written, so
    ``007`` and ``7`` are different series and a forecast shows ``007``. A column with empty cells
    is left as it is (the reader refuses those cells)."""
    if raw.isna().any() or not ptypes.is_string_dtype(raw):
        return raw
    if not raw.astype(str).str.fullmatch(_CANONICAL_INT).all():
        return raw
    numbers = pd.to_numeric(raw, errors="coerce")
    if numbers.dtype != np.int64:  # beyond the int64 range
        return raw
    return numbers


def detect_time_column(frame: pd.DataFrame, time_column: Optional[str]) -> Optional[str]:
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


def resolve_dayfirst(raw: pd.Series, name: str, dayfirst: Optional[bool]) -> bool:
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


def _to_datetime(raw: pd.Series, time_format: Optional[str], dayfirst: bool) -> pd.Series:
    """``pd.to_datetime`` (unparseable cells NaT); timestamps with different UTC offsets, which pandas
    refuses unless ``utc=True``, are read as UTC."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "could not infer format" chatter
        try:
            return pd.to_datetime(raw, format=time_format, dayfirst=dayfirst, errors="coerce")
        except ValueError as exc:
            if "utc=True" not in str(exc):  # pandas' "Mixed timezones detected. Pass utc=True ..."
                raise
        return pd.to_datetime(raw, format=time_format, dayfirst=dayfirst, errors="coerce", utc=True)


def parse_timestamps(
    raw: pd.Series, name: str, time_format: Optional[str], row_label, dayfirst: Optional[bool] = None
) -> pd.DatetimeIndex:
    """The timestamps of ``raw`` (text, or already datetimes), every cell parsed or an error naming
    the cells that are not. ``dd/mm/yyyy``-style dates follow ``dayfirst`` or the data
    (``resolve_dayfirst``). Timestamps with different UTC offsets (a zone with daylight saving:
    ``2021-01-10 08:00-05:00`` and ``2021-07-10 08:00-04:00``) are read as UTC, so a forecast of
    such data comes back in UTC; timestamps with one offset keep it."""
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
            dayfirst = resolve_dayfirst(raw, name, dayfirst)
        try:
            parsed = _to_datetime(raw, time_format, bool(dayfirst))
        except (ValueError, TypeError) as exc:
            raise DataError(
                f"time column {name!r} could not be parsed as dates ({exc}); pass time_format= "
                "(e.g. '%Y-%m-%d %H:%M:%S') or make all timestamps use one format and time zone"
            ) from None
    refuse_empty_cells(raw, f"time column {name!r}", "every row needs a timestamp", row_label)
    bad = parsed.isna().to_numpy()
    if bad.any():
        rows = np.flatnonzero(bad)[:SHOW]
        examples = ", ".join(f"{raw.iloc[r]!r} at {row_label(int(r))}" for r in rows)
        hint = f"the format {time_format!r}" if time_format else "the format of the first timestamp"
        raise DataError(
            f"time column {name!r}: {int(bad.sum())} timestamp(s) could not be parsed with {hint}: "
            f"{examples}; fix those cells or pass time_format= matching every row"
        )
    return pd.DatetimeIndex(parsed)


def _numbers_from_text(s: pd.Series, thousands: Optional[str], decimal: str) -> pd.Series:
    """``s`` as numbers once ``thousands`` is removed from its text and ``decimal`` read as the
    decimal mark (NaN where that fails)."""
    text = s.astype("string")
    if thousands is not None:
        text = text.str.replace(thousands, "", regex=False)
    if decimal != ".":
        text = text.str.replace(decimal, ".", regex=False)
    return pd.to_numeric(text, errors="coerce")


def _refuse_written_numbers(s: pd.Series, c: Any, text_cells: np.ndarray, row_label, thousands: Optional[str],
                            decimal: str) -> None:
    """Raise when every text cell of column ``c`` is a number written with thousands separators
    (``"5,827.0"``, ``thousands`` not set) or with a decimal comma (``"0,7855"``, ``decimal`` is
    ``"."``): the column would otherwise be dropped as text, or refused as numbers with stray text."""
    if not text_cells.any():
        return
    text = s[text_cells].astype(str)
    r = int(np.flatnonzero(text_cells)[0])
    comma_decimals = decimal == "." and bool(text.str.match(_DECIMAL_COMMA).all())
    if thousands is None and text.str.match(_THOUSANDS).all():
        either = " (or, if ',' is the decimal mark, pass decimal=',')" if comma_decimals else ""
        raise DataError(
            f"column {c!r} holds numbers written with thousands separators (e.g. {s.iloc[r]!r} at "
            f"{row_label(r)}); pass thousands=',' to read them as numbers{either}, or leave the column out "
            "with columns=[...]"
        )
    if comma_decimals:
        also = " and thousands='.'" if text.str.contains(".", regex=False).any() else ""
        raise DataError(
            f"column {c!r} holds numbers written with a decimal comma (e.g. {s.iloc[r]!r} at {row_label(r)}): "
            f"decimal comma? pass decimal=','{also} to read them as numbers, or leave the column out with "
            "columns=[...]"
        )


def select_value_columns(
    frame: pd.DataFrame, candidates: list, explicit: bool, row_label, thousands: Optional[str], decimal: str = "."
) -> tuple[list, dict]:
    """Split ``candidates`` into numeric value columns and dropped ones (name -> why).

    Columns whose text is numbers once ``thousands`` separators are removed and ``decimal`` is read
    as the decimal mark are converted in ``frame`` in place.
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
        if thousands is not None or decimal != ".":
            converted = _numbers_from_text(s, thousands, decimal)
            if (converted.notna().to_numpy() == non_empty).all():
                frame[c] = converted
                kept.append(c)
                continue
        as_numbers = pd.to_numeric(s, errors="coerce")
        parsed = as_numbers.notna().to_numpy()
        text_cells = non_empty & ~parsed
        _refuse_written_numbers(s, c, text_cells, row_label, thousands, decimal)
        n_text = int(text_cells.sum())
        if non_empty.any() and parsed.sum() >= 0.5 * non_empty.sum():
            rows = np.flatnonzero(text_cells)[:SHOW]
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


def check_magnitudes(value: np.ndarray, group: np.ndarray, row: np.ndarray, names: Sequence[str],
                     row_label: Callable[[int], str], source: str, *, kind: str) -> None:
    """Refuse values float32 cannot hold; warn about values far outside the rest of their column.

    ``value`` [n] float64 (NaN, an empty cell, is skipped), ``group`` [n] its column (``kind``
    ``"column"``) or variable (``"variable"``) index into ``names``, ``row`` [n] its 0-based input row.

    - Models and forecasts run in float32: a finite |x| above ``FLOAT32_MAX``
      (``np.finfo(np.float32).max``, about 3.4e38) raises a ``DataError`` naming the column, the
      row and the fix (rescale the column, or leave it out).
    - A |x| more than ``OUTLIER_RATIO`` (1e6) times the 99th percentile of |x| of its column (when
      that percentile is > 0) gets a ``DataWarning`` naming the column, the row and the value: a
      unit error or a missing-value marker, most likely.
    """
    magnitude = np.abs(np.asarray(value, dtype=np.float64))
    finite = np.isfinite(magnitude)
    huge = np.flatnonzero(finite & (magnitude > FLOAT32_MAX))
    if huge.size:
        g = int(group[huge[0]])
        mine = huge[group[huge] == g]
        shown = ", ".join(f"{value[i]:.6g} at {row_label(int(row[i]))}" for i in mine[:SHOW])
        exponent = int(np.floor(np.log10(magnitude[mine].max())))
        raise DataError(
            f"{kind} {names[g]!r} holds {mine.size} value(s) too large for float32 (|x| > {FLOAT32_MAX:.4g}), the "
            f"precision models and forecasts run in: {shown}; rescale the {kind} (e.g. divide it by 1e{exponent}) "
            f"or leave it out with columns=[...]"
        )
    percentile = pd.Series(magnitude[finite]).groupby(group[finite]).quantile(0.99)  # per column present
    p99 = np.zeros(len(names))
    p99[percentile.index.to_numpy(dtype=np.int64)] = percentile.to_numpy()
    far = np.flatnonzero(finite & (p99[group] > 0) & (magnitude > OUTLIER_RATIO * p99[group]))
    if far.size:
        worst = far[np.argsort(-magnitude[far], kind="stable")[:SHOW]]
        shown = "; ".join(
            f"{kind} {names[int(group[i])]!r}: {value[i]:.6g} at {row_label(int(row[i]))} (99th percentile of |x|: "
            f"{p99[int(group[i])]:.3g})" for i in worst
        )
        warn_data(
            f"{source}: {far.size} value(s) are more than {OUTLIER_RATIO:.0e} times the 99th percentile of |x| of "
            f"their {kind}: {shown}. Check for a unit error or a missing-value marker (pass na_values=[...]); "
            "if the values are real, ignore this"
        )

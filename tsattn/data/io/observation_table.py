"""Read irregular multivariate series from a table (a CSV file or a DataFrame): ``read_observations``.

Either layout:

- **long** (tidy): one observation per row, ``id, time, variable, value``; chosen when
  ``variable_column`` or ``value_column`` is given;
- **wide**: ``id, time`` and one column per variable, NaN meaning "not observed"; a row may hold
  several observations. Chosen otherwise.

No value is ever filled in. Rows in error messages are 0-based data rows of the input (the header
is not counted); for a file the line number is given too.

Ids: a CSV file's id column is read as text, and made int64 only when every id is the canonical
text of an integer (``"7"``, ``"-3"``; not ``"007"``, ``"+7"``, ``"7.0"``), so ids come back as
the file writes them. A DataFrame's id column is taken as given.

Several series without ``id_column``: when times go back and a column looks like it names series
(text or integers, at most half as many distinct values as rows, and within each of its values the
times increase), the error names ``id_column=<that column>``; when observations sharing a (time,
variable) were merged and a column tells them apart, a ``DataWarning`` names it.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from ..errors import DataError, warn_data
from ..observations.static import static_from_table
from ..observations.observation_set import (
    OBSERVATION_DUPLICATE_POLICIES,
    ObservationSet,
    assemble_observations,
    shown_id,
)
from ..validation import SHOW, check_choice, check_time_unit
from .table import (
    check_magnitudes,
    check_reading_options,
    choose_value_columns,
    detect_time_column,
    ids_as_written,
    load_table,
    normalize_na_values,
    parse_timestamps,
    refuse_empty_cells,
    select_value_columns,
)

__all__ = ["read_observations"]

DataSource = Union[str, os.PathLike, pd.DataFrame]
RowLabel = Callable[[int], str]


def _ids(frame: pd.DataFrame, id_column: Optional[str], columns: list[str], row_label: RowLabel) -> tuple[np.ndarray, np.ndarray]:
    """(series code [N] int64, ids [S] sorted; in order of first appearance if the ids do not sort)."""
    if id_column is None:
        return np.zeros(len(frame), dtype=np.int64), np.array([0], dtype=np.int64)
    if id_column not in frame.columns:
        raise DataError(
            f"id column {id_column!r} is not in the data; columns are {columns}; pass id_column=<one of them>, "
            "or id_column=None to read the whole table as one series"
        )
    raw = frame[id_column]
    refuse_empty_cells(raw, f"id column {id_column!r}", "every observation needs its series id", row_label)
    try:
        codes, uniques = pd.factorize(raw, sort=True)
    except TypeError:  # ids of mixed types
        codes, uniques = pd.factorize(raw, sort=False)
    ids = np.asarray(uniques)
    if ptypes.is_float_dtype(ids.dtype) and np.all(ids == np.round(ids)):
        ids = ids.astype(np.int64)
    elif ptypes.is_integer_dtype(ids.dtype) or ptypes.is_bool_dtype(ids.dtype):
        ids = ids.astype(np.int64)
    elif not ptypes.is_float_dtype(ids.dtype):
        ids = np.asarray([str(i) for i in ids], dtype=str)
    return codes.astype(np.int64), ids


_ID_NAMES = ("id", "key", "series", "patient", "subject", "stay", "station", "sensor", "unit", "item", "store")


def _id_candidates(frame: pd.DataFrame, roles: Sequence) -> list:
    """Columns that could name series: text or integers (not booleans), no empty cell, at least 2 and
    at most half as many distinct values as rows; those named like an id first, then text ones."""
    found = []
    for position, c in enumerate(frame.columns):
        s = frame[c]
        if c in roles or ptypes.is_bool_dtype(s) or not (ptypes.is_integer_dtype(s) or ptypes.is_string_dtype(s)
                                                         or isinstance(s.dtype, pd.CategoricalDtype)):
            continue
        if s.isna().any() or not 2 <= s.nunique() <= len(frame) // 2:
            continue
        name = str(c).strip().lower()
        named = name in _ID_NAMES or name.endswith("id") or any(name.startswith(n) for n in _ID_NAMES)
        found.append((not named, ptypes.is_integer_dtype(s), position, c))
    return [c for *_, c in sorted(found, key=lambda item: item[:3])]


def _codes_of(column: pd.Series) -> np.ndarray:
    return pd.factorize(column, sort=False)[0].astype(np.int64)


def _in_time_order_within(codes: np.ndarray, order_key: np.ndarray) -> bool:
    """Whether the times ``order_key`` [N] never go back within a group of ``codes`` [N] (input order)."""
    position = np.argsort(codes, kind="stable")
    return not ((np.diff(order_key[position]) < 0) & (np.diff(codes[position]) == 0)).any()


def _likely_id_column(frame: pd.DataFrame, roles: Sequence, fits: Callable[[np.ndarray], bool]) -> Optional[str]:
    """The first id candidate (``_id_candidates``) whose row groups ``fits`` (codes [N] -> bool), or None."""
    for c in _id_candidates(frame, roles):
        if fits(_codes_of(frame[c])):
            return c
    return None


def _warn_merged_series(frame: pd.DataFrame, roles: Sequence, rows: np.ndarray, times: np.ndarray,
                        variables: np.ndarray, merged: int, duplicates: str, source: str) -> None:
    """Warn when merged (time, variable) duplicates of a table read as one series are told apart by a
    column that looks like an id (``rows``, ``times``, ``variables`` [n]: the observations)."""
    def tells_apart(codes: np.ndarray) -> bool:
        keys = pd.DataFrame({"id": codes[rows], "time": times, "variable": variables})
        return not keys.duplicated().any()

    guess = _likely_id_column(frame, roles, tells_apart)
    if guess is not None:
        warn_data(
            f"{source}: read as one series (no id_column), {merged} observation(s) sharing a (time, variable) "
            f"with another were merged (duplicates={duplicates!r}); the table looks like it holds several series, "
            f"told apart by column {str(guess)!r}: pass id_column={str(guess)!r} (if it is one series, the merge "
            "is what you asked for)"
        )


def _numeric_times(raw: pd.Series, name: str, row_label: RowLabel) -> np.ndarray:
    times = raw.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(times)
    if bad.any():
        rows = np.flatnonzero(bad)[:SHOW]
        raise DataError(
            f"time column {name!r} has {int(bad.sum())} empty or infinite cell(s), first at "
            f"{', '.join(row_label(int(r)) for r in rows)}; every observation needs a finite time: fill or "
            "remove those rows"
        )
    return times


def _check_time_order(order_key: np.ndarray, codes: np.ndarray, ids: np.ndarray, shown: Callable[[int], str],
                      sort: bool, row_label: RowLabel, id_hint: Optional[Callable[[], Optional[str]]]) -> None:
    """Raise when times ``order_key`` [N] go back within a series (unless ``sort``). ``id_hint`` is
    None when an id column was given; else it gives a column that looks like one (or None), which the
    fix then names first."""
    position = np.argsort(codes, kind="stable")  # rows grouped by series, input order kept inside
    steps_back = (np.diff(order_key[position]) < 0) & (np.diff(codes[position]) == 0)
    if sort or not steps_back.any():
        return
    i = int(np.flatnonzero(steps_back)[0])
    a, b = int(position[i]), int(position[i + 1])
    guess = None if id_hint is None else id_hint()
    fix = ("sort the table by (id, time), or pass sort=True to sort the rows" if guess is None else
           f"the table looks like it holds several series: pass id_column={str(guess)!r} (or sort=True if it is "
           "one series)")
    within = f" within series {shown_id(ids[codes[a]])!r}" if id_hint is None else ""
    raise DataError(
        f"times go back{within}: {row_label(b)} ({shown(b)}) comes after "
        f"{row_label(a)} ({shown(a)}); {int(steps_back.sum())} such step(s) back in time; {fix}"
    )


def _times(frame: pd.DataFrame, time_name, codes: np.ndarray, ids: np.ndarray, unit: pd.Timedelta,
           time_format: Optional[str], dayfirst: Optional[bool], sort: bool, row_label: RowLabel,
           id_hint: Optional[Callable[[np.ndarray], Optional[str]]]) -> tuple[np.ndarray, Optional[pd.DatetimeIndex]]:
    """Every row's time [N] (numbers as given, or datetimes as ``unit``s since their series' first
    timestamp) and the series' first timestamps [S] (None for numeric times); times going back within
    a series are an error unless ``sort`` (``id_hint(times)``: a column that looks like an id; None
    when an id column was given)."""
    raw_time = pd.Series(frame.index, index=frame.index) if time_name is None else frame[time_name]
    shown_name = "<index>" if time_name is None else str(time_name)
    numeric_time = (
        ptypes.is_numeric_dtype(raw_time) and not ptypes.is_bool_dtype(raw_time)
        and not ptypes.is_datetime64_any_dtype(raw_time)
    )
    if numeric_time:
        times = _numeric_times(raw_time, shown_name, row_label)  # float64 [N]
        order_key: np.ndarray = times
    else:
        stamps = parse_timestamps(raw_time, shown_name, time_format, row_label, dayfirst)
        order_key = stamps.as_unit("ns").asi8  # int64 [N], exact
    shown = (lambda r: repr(float(times[r]))) if numeric_time else (lambda r: str(stamps[r]))
    _check_time_order(order_key, codes, ids, shown, sort, row_label,
                      None if id_hint is None else (lambda: id_hint(order_key)))
    if numeric_time:
        return times, None
    first_ns = np.full(len(ids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_ns, codes, order_key)
    times = (order_key - first_ns[codes]).astype(np.float64) / float(unit.value)
    origins = pd.DatetimeIndex(first_ns.astype("datetime64[ns]"))
    if stamps.tz is not None:
        origins = origins.tz_localize("UTC").tz_convert(stamps.tz)
    return times, origins


def _long_observations(frame: pd.DataFrame, variable_column: str, value_column: str, columns: Optional[Sequence[str]],
                       names: list[str], markers: list[float], row_label: RowLabel, thousands: Optional[str],
                       decimal: str, counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(row [n], variable [n], value [n] with NaN for empty cells, variables) of a long table."""
    for role, col in (("variable_column", variable_column), ("value_column", value_column)):
        if col not in frame.columns:
            raise DataError(f"{role} {col!r} is not in the data; columns are {names}; pass {role}=<one of them>")
    select_value_columns(frame, [value_column], True, row_label, thousands, decimal)  # text in the value column -> error
    values = pd.to_numeric(frame[value_column]).to_numpy(dtype=np.float64, na_value=np.nan)  # [N]
    raw_var = frame[variable_column]
    refuse_empty_cells(raw_var, f"variable column {variable_column!r}", "every observation needs a variable name",
                       row_label)
    var_names = raw_var.astype(str).to_numpy()
    if columns is not None:
        variables = [str(c) for c in ([columns] if isinstance(columns, str) else columns)]
        if len(set(variables)) != len(variables):
            raise DataError(f"columns= repeats a variable: {variables}; list every variable once")
    else:
        variables = sorted(set(var_names.tolist()))
    obs_var = pd.Categorical(var_names, categories=variables).codes.astype(np.int64)  # -1: not kept
    for number in markers:
        values[values == number] = np.nan
    listed = obs_var >= 0
    counts["other_variables_skipped"] = int((~listed).sum())
    return np.flatnonzero(listed), obs_var[listed], values[listed], variables


def _wide_observations(frame: pd.DataFrame, roles: list, columns: Optional[Sequence[str]], source: str,
                       markers: list[float], row_label: RowLabel, thousands: Optional[str], decimal: str,
                       counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(row [n], variable [n], value [n], variables) of a wide table: its non-empty cells, row-major;
    text and empty columns are left out with a ``DataWarning`` (``choose_value_columns``)."""
    kept, dropped = choose_value_columns(
        frame, [c for c in frame.columns if c not in roles], columns, source, row_label, thousands, kind="variable",
        none_left="pass variable_column= and value_column= for a long table (one observation per row)",
        decimal=decimal)
    counts["columns_skipped"] = len(dropped)
    cells = frame[kept].apply(pd.to_numeric).to_numpy(dtype=np.float64, na_value=np.nan)  # [N, V]
    for number in markers:
        cells[cells == number] = np.nan
    obs_row, obs_var = np.nonzero(~np.isnan(cells))  # row-major: input order
    counts["empty_skipped"] = int(cells.size - obs_row.size)
    return obs_row, obs_var, cells[obs_row, obs_var], [str(c) for c in kept]


def _numeric_markers(na_values: list) -> list[float]:
    markers = []
    for v in na_values:
        try:
            markers.append(float(v))
        except (TypeError, ValueError):
            continue
    return markers


def _load_frame(data: DataSource, na_values: list, sep: str, decimal: str,
                id_column: Optional[str]) -> tuple[pd.DataFrame, str, RowLabel]:
    """The table (``load_table``): a file's id column read as text and kept as written
    (``ids_as_written``); a DataFrame's object columns of numbers made numeric."""
    frame, source, row_label = load_table(
        data, na_values, sep, accepts="a path to a CSV file or a pandas DataFrame", decimal=decimal,
        needs_columns="a time column and values (and an id column for several series)", needs_rows="one observation",
        text_columns=() if id_column is None else (id_column,),
    )
    if isinstance(data, pd.DataFrame):
        for c in frame.columns:  # object columns holding only numbers (and NaN) become numeric
            if frame[c].dtype == object:
                try:
                    frame[c] = pd.to_numeric(frame[c])
                except (ValueError, TypeError):
                    pass
    elif id_column is not None and id_column in frame.columns:
        frame[id_column] = ids_as_written(frame[id_column])
    return frame, source, row_label


def _observations(frame: pd.DataFrame, long: Optional[tuple[str, str]], roles: list, columns, source: str,
                  markers: list[float], row_label: RowLabel, thousands: Optional[str], decimal: str,
                  counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(row [n], variable [n], value [n], variables): the observed values of a long table (``long`` =
    its variable and value columns) or a wide one; infinite values, and values float32 cannot hold,
    are an error; values far outside the rest of their variable are warned about."""
    if long is not None:
        obs_row, obs_var, obs_value, variables = _long_observations(
            frame, long[0], long[1], columns, [str(c) for c in frame.columns], markers, row_label, thousands, decimal,
            counts)
    else:
        obs_row, obs_var, obs_value, variables = _wide_observations(
            frame, roles, columns, source, markers, row_label, thousands, decimal, counts)
    infinite = np.isinf(obs_value)
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise DataError(
            f"{int(infinite.sum())} infinite value(s), first {variables[obs_var[i]]!r} at {row_label(int(obs_row[i]))}; "
            "replace them in the data, or pass na_values=['inf', '-inf'] to treat them as not observed"
        )
    check_magnitudes(obs_value, obs_var, obs_row, variables, row_label, source, kind="variable")
    if long is not None:
        empty = np.isnan(obs_value)
        counts["empty_skipped"] = int(empty.sum())
        obs_row, obs_var, obs_value = obs_row[~empty], obs_var[~empty], obs_value[~empty]
    if obs_value.size == 0:
        raise DataError(f"{source} holds no observations (every value is empty or left out); check the columns and na_values")
    return obs_row, obs_var, obs_value, variables


def _check_options(duplicates: str, dayfirst: Optional[bool], thousands: Optional[str], sep: str, decimal: str,
                   variable_column: Optional[str], value_column: Optional[str]) -> bool:
    """Raise unless the options are valid; whether the layout is long."""
    check_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
    check_reading_options(dayfirst=dayfirst, thousands=thousands, sep=sep, decimal=decimal)
    long_layout = variable_column is not None or value_column is not None
    if long_layout and (variable_column is None or value_column is None):
        given, absent = ("variable_column", "value_column") if value_column is None else ("value_column", "variable_column")
        raise DataError(
            f"the long layout needs both variable_column and value_column; {given} is given but {absent} is "
            f"not: pass {absent}=<column name>, or neither for the wide layout (one column per variable)"
        )
    return long_layout


def _roles(id_column: Optional[str], time_name: Any, variable_column: Optional[str],
           value_column: Optional[str]) -> list:
    """The id, time, variable and value columns given (or found); the same column twice is an error."""
    roles = [c for c in (id_column, time_name, variable_column, value_column) if c is not None]
    if len(set(roles)) != len(roles):
        raise DataError(
            f"the id, time, variable and value columns must be different columns; got id_column={id_column!r}, "
            f"time column {time_name!r}, variable_column={variable_column!r}, value_column={value_column!r}"
        )
    return roles


def read_observations(
    data: DataSource,
    *,
    id_column: Optional[str] = None,
    time_column: Optional[str] = None,
    variable_column: Optional[str] = None,
    value_column: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    time_unit: Union[str, pd.Timedelta] = "h",
    time_format: Optional[str] = None,
    na_values: Optional[Sequence[Union[str, float]]] = None,
    duplicates: str = "mean",
    sort: bool = False,
    dayfirst: Optional[bool] = None,
    thousands: Optional[str] = None,
    sep: str = ",",
    decimal: str = ".",
    static_columns: Optional[Sequence[str]] = None,
) -> ObservationSet:
    """Read irregular multivariate series from a CSV path or a DataFrame (not modified).

    The layout follows from the arguments: ``variable_column`` and ``value_column`` given -> long
    (a row whose value is empty is left out); neither given -> wide (an empty cell is a variable not
    observed at that time; text and empty columns are left out with a ``DataWarning``).

    Args:
        data: a path to a CSV file, or a DataFrame.
        id_column: the column naming each row's series; None reads the whole table as one series.
            Series are ordered by id (by first appearance when the ids do not sort). A file's ids
            are kept as written (``"007"``), int64 when every id is the canonical text of an integer.
        time_column: the column holding times; None detects one by name (``date``, ``time``, ...)
            or uses a DataFrame's ``DatetimeIndex``. Datetimes become float ``time_unit``s since each
            series' first timestamp (kept in ``origins``); numbers are taken as given.
        variable_column, value_column: long layout: the columns of each observation's variable name
            and value.
        columns: wide layout: the variable columns to keep (default: every numeric column but the id
            and time). Long layout: the variables to keep, in this order (default: all, by name).
        time_unit: the unit of datetime input (``"h"``, ``"15min"``, a ``pd.Timedelta``).
        duplicates: several observations of one (series, time, variable): ``"mean"`` (the PhysioNet
            benchmark's rule), ``"first"``, ``"last"`` (in input order) or ``"error"``.
        sort: accept (and sort) rows whose times go back within a series; by default an error.
        time_format, na_values, dayfirst, thousands, sep, decimal: as for ``read_series``.
        static_columns: columns of static covariates (a number per series, never variables): ``static``.

    Returns an ``ObservationSet`` whose ``read_counts`` say how many rows were read, observations
    kept, duplicates merged and empty cells skipped; raises ``DataError`` naming the problem and the
    fix (with no ``id_column``, times going back name a column that looks like one). Warns
    (``DataWarning``) about text columns left out, values far outside the rest of their variable
    (``table.check_magnitudes``), and merged duplicates a column that looks like an id tells apart.
    """
    long_layout = _check_options(duplicates, dayfirst, thousands, sep, decimal, variable_column, value_column)
    unit = check_time_unit(time_unit)
    na_values = normalize_na_values(na_values) or []
    frame, source, row_label = _load_frame(data, na_values, sep, decimal, id_column)
    codes, ids = _ids(frame, id_column, [str(c) for c in frame.columns], row_label)
    time_name = detect_time_column(frame, time_column)
    roles = _roles(id_column, time_name, variable_column, value_column)
    static, static_names = static_from_table(frame, codes, ids, static_columns, roles, row_label)
    roles = roles + list(static_names)

    def id_hint(order_key: np.ndarray) -> Optional[str]:
        return _likely_id_column(frame, roles, lambda group: _in_time_order_within(group, order_key))

    times, origins = _times(frame, time_name, codes, ids, unit, time_format, dayfirst, sort, row_label,
                            None if id_column is not None else id_hint)
    counts: dict[str, int] = {"rows": len(frame)}
    obs_row, obs_var, obs_value, variables = _observations(
        frame, (variable_column, value_column) if long_layout else None, roles, columns, source, _numeric_markers(na_values),
        row_label, thousands, decimal, counts)
    offsets, time, variable, value, merged = assemble_observations(
        codes[obs_row], times[obs_row], obs_var, obs_value, len(ids), duplicates, describe=lambda i: row_label(int(obs_row[i])))
    if merged and id_column is None:
        _warn_merged_series(frame, roles, obs_row, times[obs_row], obs_var, merged, duplicates, source)
    counts.update(duplicates_merged=merged, observations=len(value))
    return ObservationSet(
        series_ids=ids, offsets=offsets, time=time, variable=variable, value=value, variables=tuple(variables),
        time_unit=None if origins is None else unit, origins=origins, source=source, read_counts=counts,
        static=static, static_names=static_names,
    )

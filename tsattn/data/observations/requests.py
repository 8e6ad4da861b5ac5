"""Forecast requests of the observation task: ``at=`` (times, a long or wide table, or None) -> the
(series, time, variable) queries, checked; forecasts -> a DataFrame in the layout the model was fit on.

``RequestContext`` holds what a request is read against: the observations (their series, time
unit and first timestamps), the fit's variables, the input table's layout and column names, how
timestamps were parsed, and the horizon the model learnt. ``ObservationDataModule.request_context``
makes one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from ..errors import DataError
from ..io.table import parse_timestamps
from ..validation import SHOW
from .observation_set import ObservationSet, shown_id

__all__ = ["RequestContext", "Requests", "TimesLike", "build_requests", "check_requests", "forecast_frame"]

TimesLike = Union[Sequence[Any], np.ndarray, pd.Index, pd.Series, pd.DataFrame]


@dataclass(frozen=True)
class RequestContext:
    """What requests are read against.

    Attributes:
        observations: the data's observation set (series ids, time unit, first timestamps).
        variables: the fit's V variable names.
        columns: the input table's layout and names: ``{"layout": "long" | "wide", "id", "time",
            "variable", "value"}`` (``ObservationDataModule.table_columns``).
        time_format, dayfirst: how the fit parsed timestamps.
        horizon: how far after an origin the model learnt to forecast (time units).
    """

    observations: ObservationSet
    variables: list[str]
    columns: dict[str, Any]
    time_format: Optional[str]
    dayfirst: Optional[bool]
    horizon: float


@dataclass(frozen=True)
class Requests:
    """Forecast requests of an observation model, Q of them.

    Attributes:
        series: int64 [Q], series index into the observation set.
        time: float64 [Q], the requested time in the set's time units.
        variable: int64 [Q], variable index into the fit's variables.
        shown: [Q] the requested times as the data gives them (``DatetimeIndex`` or numbers).
        columns: the variables a wide result shows (None: all of them).
    """

    series: np.ndarray
    time: np.ndarray
    variable: np.ndarray
    shown: pd.Index
    columns: Optional[list[str]] = None


def parse_times(values: pd.Series, ctx: RequestContext, label: str) -> pd.Index:
    """Requested times [Q] as the data's time representation: numbers, or a ``DatetimeIndex``
    parsed as the fit parsed its timestamps (``time_format``, ``dayfirst``)."""
    values = values.reset_index(drop=True)
    observations = ctx.observations
    if observations.time_unit is None:
        numeric = ptypes.is_numeric_dtype(values) and not ptypes.is_bool_dtype(values)
        if not numeric or not np.isfinite(values.to_numpy(dtype=np.float64)).all():
            raise DataError(
                f"{label} must hold finite numbers: the data's times are numbers (as given, e.g. hours since "
                f"admission); got e.g. {values.iloc[0]!r}"
            )
        return pd.Index(values.to_numpy(dtype=np.float64))
    stamps = parse_timestamps(values, label, ctx.time_format, lambda r: f"position {r}", ctx.dayfirst)
    if (stamps.tz is None) != (observations.origins.tz is None):
        have = "without" if stamps.tz is None else "with"
        want = "with" if stamps.tz is None else "without"
        raise DataError(
            f"{label} holds timestamps {have} a time zone, but the data's are {want} one; give them the same kind"
        )
    return stamps


def in_time_units(observations: ObservationSet, series: np.ndarray, shown: pd.Index) -> np.ndarray:
    """Times ``shown`` [Q] of ``series`` [Q] -> float64 [Q] in the set's time units (for timestamps:
    since the series' first timestamp, computed exactly as ``read_observations`` computes them)."""
    if observations.time_unit is None:
        return shown.to_numpy(dtype=np.float64)
    ns = pd.DatetimeIndex(shown).as_unit("ns").asi8
    first = observations.origins.as_unit("ns").asi8[series]
    return (ns - first).astype(np.float64) / float(observations.time_unit.value)


def as_shown(observations: ObservationSet, series: np.ndarray, time: np.ndarray) -> pd.Index:
    """Times [Q] in the set's units of ``series`` [Q] -> as the data gives them: timestamps
    (the series' first timestamp + time, to the nanosecond) or numbers."""
    if observations.time_unit is None:
        return pd.Index(np.asarray(time, dtype=np.float64))
    ns = observations.origins.as_unit("ns").asi8[series] + np.round(time * observations.time_unit.value).astype(np.int64)
    stamps = pd.DatetimeIndex(ns.astype("datetime64[ns]"))
    tz = observations.origins.tz
    return stamps if tz is None else stamps.tz_localize("UTC").tz_convert(tz)


def id_key(series_id: Any) -> Any:
    """What a requested id is matched by: an integer (a Python or NumPy int, or a float with an
    integer value) by its decimal text, ``7`` -> ``"7"``; text as written; anything else as itself.
    So ``7``, ``7.0`` and ``"7"`` all name series 7, and ``"007"`` names only series ``"007"``."""
    if isinstance(series_id, (bool, np.bool_)):
        return series_id
    if isinstance(series_id, (int, np.integer)):
        return str(int(series_id))
    if isinstance(series_id, (float, np.floating)) and math.isfinite(series_id) and float(series_id).is_integer():
        return str(int(series_id))
    if isinstance(series_id, str):
        return str(series_id)
    return series_id


def series_codes(ids: pd.Series, observations: ObservationSet, label: str) -> np.ndarray:
    """Series ids [Q] -> int64 [Q] indices into the set; an unknown id is an error naming it. An id
    matches a series whose id has the same text or is the same integer (``id_key``): ``7`` and
    ``"7"`` match id 7, ``"007"`` matches id ``"007"`` (not 7)."""
    known = {id_key(i): s for s, i in enumerate(observations.series_ids.tolist())}
    values = ids.tolist()
    codes = np.asarray([known.get(id_key(i), -1) for i in values], dtype=np.int64)
    if (codes < 0).any():
        unknown = list(dict.fromkeys(values[i] for i in np.flatnonzero(codes < 0)))
        raise DataError(
            f"{label} names series the data does not hold: {unknown[:SHOW]}{' ...' if len(unknown) > SHOW else ''}; "
            f"its series are e.g. {[shown_id(i) for i in observations.series_ids[:SHOW]]}: request those, or pass "
            "the data that holds the series as data="
        )
    return codes


def variable_codes(names: Sequence[Any], variables: list[str], label: str) -> np.ndarray:
    """Variable names [Q] -> int64 [Q] indices into the fit's variables; an unknown name is an error."""
    index = {v: k for k, v in enumerate(variables)}
    codes = np.asarray([index.get(str(n), -1) for n in names], dtype=np.int64)
    if (codes < 0).any():
        unknown = list(dict.fromkeys(str(names[i]) for i in np.flatnonzero(codes < 0)))
        raise DataError(
            f"{label} names variables the model was not fit on: {unknown[:SHOW]}; its variables are {variables}"
        )
    return codes


def build_requests(at: Optional[TimesLike], ctx: RequestContext, last: np.ndarray, *,
                   given_origin: bool = False) -> Requests:
    """The forecast requests of ``predict(at=...)`` (see ``Forecaster.predict``); ``last`` [S] holds
    each series' forecast origin (its last observation time, or the given origin; NaN: no history)."""
    observations, horizon = ctx.observations, ctx.horizon
    V = len(ctx.variables)
    if at is None:
        absent = np.flatnonzero(np.isnan(last))
        if absent.size:
            raise_no_history(observations, absent, default_requests=True, given_origin=given_origin)
        series, times = [], []
        for s in range(len(observations)):
            own = np.unique(observations.series(s).time)
            own = own[own < last[s]] if given_origin else own                       # the history's times only
            step = float(np.median(np.diff(own))) if own.size > 1 else horizon
            step = min(step, horizon)
            k = max(1, math.floor(horizon / step + 1e-9))
            series.append(np.full(k, s))
            times.append(last[s] + step * np.arange(1, k + 1))
        s_, t_ = np.concatenate(series), np.concatenate(times)                      # [T_all]
        s_, t_ = np.repeat(s_, V), np.repeat(t_, V)                                  # every variable at each time
        var = np.tile(np.arange(V), len(s_) // V)
        return Requests(s_, t_, var, as_shown(observations, s_, t_))
    if isinstance(at, pd.DataFrame):
        return frame_requests(at, ctx)
    values = pd.Series([at] if np.ndim(at) == 0 else list(at))
    if values.empty:
        raise DataError("at= holds no times; pass the times to forecast at, or at=None for the default")
    shown = parse_times(values, ctx, "at")                                           # [T]
    S, T = len(observations), len(shown)
    series = np.repeat(np.arange(S), T * V)                                          # series, then time, then variable
    which = np.tile(np.repeat(np.arange(T), V), S)
    shown = shown[which]
    return Requests(series, in_time_units(observations, series, shown), np.tile(np.arange(V), S * T), shown)


def frame_requests(at: pd.DataFrame, ctx: RequestContext) -> Requests:
    """Requests from a DataFrame in the long layout (id, time, variable) or the wide one (id, time
    and variable columns)."""
    observations, columns, variables = ctx.observations, ctx.columns, ctx.variables
    names = [str(c) for c in at.columns]
    id_column, time_column = columns["id"], columns["time"]
    variable_column = columns["variable"] or "variable"
    needed = [c for c in (id_column, time_column) if c is not None and c not in at.columns]
    if needed:
        raise DataError(
            f"at= needs the columns {needed} (the data's id and time columns); it has {names}: name them as the "
            "data the model was fit on"
        )
    if at.empty:
        raise DataError("at= has no rows; give one row per (series, time) to forecast, or at=None for the default")
    rows = np.zeros(len(at), dtype=np.int64) if id_column is None else series_codes(at[id_column], observations, "at=")
    shown = parse_times(at[time_column], ctx, f"at[{time_column!r}]")                 # [R]
    if variable_column in at.columns:                                                  # long: one request per row
        var = variable_codes(at[variable_column].tolist(), variables, "at=")
        return Requests(rows, in_time_units(observations, rows, shown), var, shown)
    listed = [c for c in at.columns if c not in (id_column, time_column)]              # wide: columns = variables
    chosen = variable_codes(listed, variables, "at=") if listed else np.arange(len(variables))
    n = len(chosen)
    series = np.repeat(rows, n)
    shown = shown[np.repeat(np.arange(len(at)), n)]
    return Requests(series, in_time_units(observations, series, shown), np.tile(chosen, len(at)), shown,
                     columns=[variables[k] for k in chosen])


def raise_no_history(observations: ObservationSet, series: np.ndarray, *, default_requests: bool = False,
                      given_origin: bool = False) -> None:
    """Raise the error of requests for ``series`` [n], which have no observation (before the given
    origin); ``default_requests``: asked by ``at=None``, which requests every series."""
    ids = [shown_id(observations.series_ids[s]) for s in series[:SHOW]]
    fix = ("at=None forecasts every series of the data: pass data without them, or an at= DataFrame "
           "(id, time, ...) that names only the series to forecast" if default_requests
           else "leave them out of at=")
    where = "in the history window before origin=" if given_origin else "in the data"
    more = ", a later origin," if given_origin else ""
    raise DataError(
        f"{len(series)} series have no observation {where}, so no history to forecast from, e.g. {ids}; "
        f"{fix}{more} or pass data that holds their observations"
    )


def check_requests(requests: Requests, ctx: RequestContext, last: np.ndarray, *, given_origin: bool = False) -> None:
    """Raise on a request without history, at or before its series' last observation (before the
    given origin), beyond ``horizon`` after it, or repeated."""
    observations, variables, horizon = ctx.observations, ctx.variables, ctx.horizon
    series, time = requests.series, requests.time
    absent = np.isnan(last[series])
    if absent.any():
        raise_no_history(observations, np.unique(series[absent]), given_origin=given_origin)
    end = last[series]                                                               # [Q]
    anchor = "origin" if given_origin else "last observation"

    def example(i: int) -> str:
        s = int(series[i])
        last_shown = as_shown(observations, np.array([s]), np.array([last[s]]))[0]
        return f"series {shown_id(observations.series_ids[s])!r} at {requests.shown[i]} ({anchor} {last_shown})"

    # from the last observation: strictly after it; from a given origin: at it or after, as in training
    early = np.flatnonzero(time < end if given_origin else time <= end)
    if early.size:
        when = "before the forecast origin" if given_origin else "at or before their series' last observation"
        raise DataError(
            f"{early.size} requested time(s) are {when}, e.g. {example(int(early[0]))}; forecasts start "
            f"{'at the origin' if given_origin else 'after the last observation'}: request later times"
        )
    far = np.flatnonzero(time - end > horizon + 1e-9 * np.maximum(horizon, np.abs(time)))
    if far.size:
        raise DataError(
            f"{far.size} requested time(s) lie more than horizon = {horizon:g} time units after their series' "
            f"{anchor}, e.g. {example(int(far[0]))}; the model learnt to forecast only that far after an "
            "origin: request earlier times, or refit with a longer horizon"
        )
    repeated = pd.DataFrame({"s": series, "t": time, "v": requests.variable}).duplicated().to_numpy()
    if repeated.any():
        i = int(np.flatnonzero(repeated)[0])
        raise DataError(
            f"at= requests {int(repeated.sum())} (series, time, variable) more than once, e.g. {example(i)} of "
            f"{variables[requests.variable[i]]!r}; request each once"
        )


def forecast_frame(requests: Requests, values: np.ndarray, ctx: RequestContext,
                   quantiles: Optional[Any] = None) -> pd.DataFrame:
    """Forecasts ``values`` [Q] (a quantile model's: [Q, K], ``quantiles`` its ``QuantileSpec``) in the
    layout of the table the model was fit on (see ``Forecaster.predict``): a quantile model's median
    under the value (variable) column, its intervals beside it (``<column>-lo-80``, ``-hi-80``)."""
    columns, variables = ctx.columns, ctx.variables
    ids = ctx.observations.series_ids[requests.series]
    parts = [("", values)] if quantiles is None else [(suffix, values[:, k]) for suffix, k in quantiles.suffixes()]
    if columns["layout"] == "long":
        frame = {} if columns["id"] is None else {columns["id"]: ids}
        frame[columns["time"]] = requests.shown
        frame[columns["variable"]] = np.asarray(variables, dtype=object)[requests.variable]
        for suffix, part in parts:
            frame[f"{columns['value']}{suffix}"] = part
        return pd.DataFrame(frame)
    key = pd.DataFrame({"s": requests.series, "t": requests.time})
    row = key.groupby(["s", "t"], sort=False).ngroup().to_numpy()                    # [Q] first-appearance order
    _, first = np.unique(row, return_index=True)                                     # [rows] first request of a row
    shown_columns = requests.columns or variables
    column_of = np.full(len(variables), -1, dtype=np.int64)
    column_of[[variables.index(v) for v in shown_columns]] = np.arange(len(shown_columns))
    blocks = {}
    for suffix, part in parts:
        cells = np.full((len(first), len(shown_columns)), np.nan)
        cells[row, column_of[requests.variable]] = part
        blocks[suffix] = cells
    frame = pd.DataFrame({f"{name}{suffix}": blocks[suffix][:, j] for j, name in enumerate(shown_columns)
                          for suffix, _ in parts})
    frame.insert(0, columns["time"], requests.shown[first])
    if columns["id"] is not None:
        frame.insert(0, columns["id"], ids[first])
    return frame


"""Irregular multivariate series as sets of observations: ``ObservationSet`` and ``read_observations``.

An observation is one measured value of one variable of one series at one time. Nothing is put on a
grid and no value is invented for an unobserved (time, variable): a series is just its observations,
each with its own time and variable. ``ObservationSet`` stores S series in a CSR layout (compressed
sparse rows), sorted by (series, time, variable):

    rows offsets[s]:offsets[s + 1]  ->  time [M], variable [M], value [M]  of series s

``read_observations`` reads a CSV file or a DataFrame into one, from either layout:

- **long** (tidy): one observation per row, ``id, time, variable, value``; chosen when
  ``variable_column`` or ``value_column`` is given;
- **wide**: ``id, time`` and one column per variable, NaN meaning "not observed"; a row may hold
  several observations. Chosen otherwise.

Rows in error messages are 0-based data rows of the input (the header is not counted); for a file
the line number is given too.
"""
from __future__ import annotations

import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from .csv import (
    _check_choice,
    _detect_time_column,
    _parse_timestamps,
    _select_value_columns,
    load_table,
    normalize_na_values,
)
from .errors import DataError

__all__ = [
    "OBSERVATION_DUPLICATE_POLICIES",
    "ObservationSet",
    "SeriesObservations",
    "assemble_observations",
    "read_observations",
]

OBSERVATION_DUPLICATE_POLICIES = ("mean", "first", "last", "error")
_SHOW = 3  # how many offending rows / values a message lists
_NPZ_FORMAT = 1  # version of the .npz layout written by ObservationSet.save_npz

DataSource = Union[str, os.PathLike, pd.DataFrame]


class SeriesObservations(NamedTuple):
    """The observations of one series (read-only views into the set's arrays).

    Attributes:
        id: the series id, as given.
        time: float64 [m], non-decreasing.
        variable: int [m], indices into ``ObservationSet.variables``.
        value: float64 [m].
    """

    id: Any
    time: np.ndarray
    variable: np.ndarray
    value: np.ndarray


def shown_id(series_id: Any) -> Any:
    """A series id as a plain Python value (``7``, ``'p1'``), for messages."""
    return series_id.item() if isinstance(series_id, np.generic) else series_id


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def variable_dtype(n_variables: int) -> np.dtype:
    """int16 when the variable indices fit, else int32."""
    return np.dtype(np.int16) if n_variables <= np.iinfo(np.int16).max else np.dtype(np.int32)


@dataclass(frozen=True, eq=False, repr=False)
class ObservationSet:
    """S irregular multivariate series: M observations in a CSR layout, sorted by (series, time, variable).

    The arrays are read-only; ``subset`` and ``select_variables`` return new sets.

    Attributes:
        series_ids: [S] the series ids as given (int64, or str; float when the input ids were).
        offsets: int64 [S + 1]; series s is rows ``offsets[s]:offsets[s + 1]``; ``offsets[0] == 0``,
            ``offsets[-1] == M``.
        time: float64 [M], time since the series' origin in ``time_unit``s (datetime input), or the
            numbers as given (numeric input, e.g. hours since admission).
        variable: int16 (int32 beyond 32767 variables) [M], indices into ``variables``.
        value: float64 [M], finite.
        variables: the V variable names.
        time_unit: the length of one time unit for datetime input; None when times were numbers.
        origins: ``pd.DatetimeIndex`` [S], each series' absolute time 0 (its first timestamp) for
            datetime input; None otherwise.
        source: where the data came from (a path, ``"<DataFrame>"``, an archive list).
        read_counts: what happened while reading (rows read, observations kept, duplicates merged,
            cells skipped, ...); empty for a set derived with ``subset``.
    """

    series_ids: np.ndarray
    offsets: np.ndarray
    time: np.ndarray
    variable: np.ndarray
    value: np.ndarray
    variables: tuple[str, ...]
    time_unit: Optional[pd.Timedelta] = None
    origins: Optional[pd.DatetimeIndex] = None
    source: str = ""
    read_counts: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets, dtype=np.int64)
        n_series, m = len(self.series_ids), len(self.time)
        if offsets.shape != (n_series + 1,) or offsets[0] != 0 or offsets[-1] != m or np.any(np.diff(offsets) < 0):
            raise DataError(
                f"offsets must be a non-decreasing int64 array [S + 1] = [{n_series + 1}] from 0 to M = {m}; "
                f"got shape {offsets.shape}"
            )
        if len(self.variable) != m or len(self.value) != m:
            raise DataError(
                f"time, variable and value must have one entry per observation; got {m}, "
                f"{len(self.variable)}, {len(self.value)}"
            )
        variables = tuple(str(v) for v in self.variables)
        if len(set(variables)) != len(variables):
            raise DataError(f"variable names repeat in {variables}; give every variable a distinct name")
        variable = np.asarray(self.variable)
        if m and (variable.min() < 0 or variable.max() >= len(variables)):
            raise DataError(f"variable indices must lie in [0, {len(variables)}); got {variable.min()}..{variable.max()}")
        if self.origins is not None and len(self.origins) != n_series:
            raise DataError(f"origins must have one timestamp per series ({n_series}); got {len(self.origins)}")
        time, value = np.asarray(self.time, dtype=np.float64), np.asarray(self.value, dtype=np.float64)
        if not (np.isfinite(time).all() and np.isfinite(value).all()):
            raise DataError("times and values must be finite numbers (an unobserved value is left out, not NaN)")
        series = np.repeat(np.arange(n_series), np.diff(offsets))
        same_series = series[1:] == series[:-1]
        same_time = same_series & (time[1:] == time[:-1])
        if np.any(same_series & (time[1:] < time[:-1])) or np.any(same_time & (variable[1:] <= variable[:-1])):
            raise DataError(
                "rows must be sorted by (series, time, variable) with at most one observation per (series, time, "
                "variable); build the set with read_observations or assemble_observations"
            )
        set_ = object.__setattr__
        set_(self, "series_ids", _readonly(np.asarray(self.series_ids)))
        set_(self, "offsets", _readonly(offsets))
        set_(self, "time", _readonly(time))
        set_(self, "variable", _readonly(variable.astype(variable_dtype(len(variables)), copy=False)))
        set_(self, "value", _readonly(value))
        set_(self, "variables", variables)
        set_(self, "read_counts", dict(self.read_counts))

    # -- sizes -------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        """S, the number of series."""
        return len(self.series_ids)

    @property
    def n_observations(self) -> int:
        """M, the number of observations."""
        return len(self.time)

    @property
    def n_variables(self) -> int:
        """V, the number of variables."""
        return len(self.variables)

    @property
    def series_lengths(self) -> np.ndarray:
        """int64 [S], observations per series."""
        return np.diff(self.offsets)

    @cached_property
    def series_index(self) -> np.ndarray:
        """int64 [M], the series of every observation (computed once, read-only)."""
        return _readonly(np.repeat(np.arange(len(self), dtype=np.int64), self.series_lengths))

    def __repr__(self) -> str:
        return (
            f"ObservationSet({len(self)} series, {self.n_observations} observations, {self.n_variables} "
            f"variables, time_unit={self.time_unit}, source={self.source!r})"
        )

    # -- access ------------------------------------------------------------------------------------------
    def series(self, s: int) -> SeriesObservations:
        """The observations of series ``s`` (0 <= s < S), as read-only views."""
        n = len(self)
        if not -n <= int(s) < n:
            raise IndexError(f"series {s} out of range for an ObservationSet of {n} series")
        s = int(s) % n
        rows = slice(int(self.offsets[s]), int(self.offsets[s + 1]))
        return SeriesObservations(self.series_ids[s], self.time[rows], self.variable[rows], self.value[rows])

    def position(self, series_id: Any) -> int:
        """The index s of the series whose id is ``series_id``."""
        hits = np.flatnonzero(self.series_ids == series_id)
        if hits.size == 0:
            raise DataError(
                f"no series with id {series_id!r}; ids are e.g. {[shown_id(i) for i in self.series_ids[:_SHOW]]}"
            )
        return int(hits[0])

    def subset(self, indices: Union[Sequence[int], np.ndarray]) -> "ObservationSet":
        """A new set holding the series ``indices`` (in that order; int positions or a bool mask [S])."""
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise DataError(f"a boolean series mask must have shape [{len(self)}]; got {idx.shape}")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"series indices out of range for an ObservationSet of {len(self)} series")
        idx = idx % max(len(self), 1)
        rows = _ranges(self.offsets[idx], self.offsets[idx + 1])
        lengths = self.offsets[idx + 1] - self.offsets[idx]
        return ObservationSet(
            series_ids=self.series_ids[idx],
            offsets=np.r_[0, np.cumsum(lengths)].astype(np.int64),
            time=self.time[rows],
            variable=self.variable[rows],
            value=self.value[rows],
            variables=self.variables,
            time_unit=self.time_unit,
            origins=None if self.origins is None else self.origins[idx],
            source=self.source,
        )

    def select_variables(self, names: Sequence[str]) -> "ObservationSet":
        """A new set with only the variables ``names`` (in that order); other observations are left out."""
        names = [str(n) for n in ([names] if isinstance(names, str) else names)]
        unknown = [n for n in names if n not in self.variables]
        if unknown:
            raise DataError(f"variables {unknown} are not in this set; its variables are {list(self.variables)}")
        remap = np.full(self.n_variables, -1, dtype=np.int64)
        remap[[self.variables.index(n) for n in names]] = np.arange(len(names))
        new_var = remap[self.variable]
        keep = new_var >= 0
        order = np.lexsort((new_var[keep], self.time[keep], self.series_index[keep]))  # new variable order
        lengths = np.bincount(self.series_index[keep], minlength=len(self))
        return ObservationSet(
            series_ids=self.series_ids,
            offsets=np.r_[0, np.cumsum(lengths)].astype(np.int64),
            time=self.time[keep][order],
            variable=new_var[keep][order],
            value=self.value[keep][order],
            variables=tuple(names),
            time_unit=self.time_unit,
            origins=self.origins,
            source=self.source,
        )

    def thin(self, fraction: float, *, seed: int = 0, by: str = "time") -> "ObservationSet":
        """A random part of the observations, e.g. to make a regular series irregular.

        Args:
            fraction: the probability of keeping each unit, in (0, 1].
            seed: seed of ``numpy.random.default_rng``: the same seed keeps the same observations.
            by: ``"time"`` keeps or drops whole (series, time) groups (the rows of a wide table);
                ``"observation"`` keeps or drops every observation on its own.
        """
        if isinstance(fraction, bool) or not 0 < float(fraction) <= 1:
            raise DataError(f"fraction must be in (0, 1]; got {fraction!r}")
        if by not in ("time", "observation"):
            raise DataError(f"by must be 'time' or 'observation'; got {by!r}")
        rng = np.random.default_rng(seed)
        if by == "observation":
            keep = rng.random(self.n_observations) < fraction
        else:
            series = self.series_index
            new_row = np.ones(self.n_observations, dtype=bool)
            new_row[1:] = (series[1:] != series[:-1]) | (self.time[1:] != self.time[:-1])
            group = np.cumsum(new_row) - 1  # [M]
            keep = (rng.random(int(new_row.sum())) < fraction)[group]
        lengths = np.bincount(self.series_index[keep], minlength=len(self))
        return ObservationSet(
            series_ids=self.series_ids,
            offsets=np.r_[0, np.cumsum(lengths)].astype(np.int64),
            time=self.time[keep],
            variable=self.variable[keep],
            value=self.value[keep],
            variables=self.variables,
            time_unit=self.time_unit,
            origins=self.origins,
            source=self.source,
        )

    def with_values(self, value: np.ndarray) -> "ObservationSet":
        """The same observations (times, variables, series) with other values: float64 [M]."""
        value = np.asarray(value, dtype=np.float64)
        if value.shape != self.value.shape:
            raise DataError(f"values must have shape {self.value.shape}; got {value.shape}")
        return ObservationSet(
            series_ids=self.series_ids, offsets=self.offsets, time=self.time, variable=self.variable, value=value,
            variables=self.variables, time_unit=self.time_unit, origins=self.origins, source=self.source,
        )

    # -- back to tables ----------------------------------------------------------------------------------
    def to_frame(self, layout: str = "long") -> pd.DataFrame:
        """The observations as a DataFrame.

        Args:
            layout: ``"long"``: one row per observation, columns ``id, time, variable, value``
                (variable names); ``"wide"``: one row per (series, time) with at least one
                observation, columns ``id, time`` and one per variable (NaN = not observed).

        Times are the set's float times (read them back with ``read_observations``: they are
        numbers, taken as given).
        """
        ids = self.series_ids[self.series_index]
        if layout == "long":
            return pd.DataFrame({
                "id": ids,
                "time": self.time.copy(),
                "variable": np.asarray(self.variables, dtype=object)[self.variable] if self.variables else [],
                "value": self.value.copy(),
            })
        if layout != "wide":
            raise DataError(f"layout must be 'long' or 'wide'; got {layout!r}")
        clash = [v for v in self.variables if v in ("id", "time")]
        if clash:
            raise DataError(f"variables named {clash} clash with the wide layout's id / time columns; use layout='long'")
        series = self.series_index
        new_row = np.ones(self.n_observations, dtype=bool)
        new_row[1:] = (series[1:] != series[:-1]) | (self.time[1:] != self.time[:-1])
        row = np.cumsum(new_row) - 1  # [M] the wide row of every observation
        starts = np.flatnonzero(new_row)
        cells = np.full((starts.size, self.n_variables), np.nan)
        cells[row, self.variable] = self.value
        frame = pd.DataFrame(cells, columns=list(self.variables))
        frame.insert(0, "time", self.time[starts])
        frame.insert(0, "id", ids[starts])
        return frame

    # -- storage -----------------------------------------------------------------------------------------
    def save_npz(self, path: Union[str, os.PathLike], *, compress: bool = True) -> Path:
        """Write the set to an ``.npz`` atomically: a temporary file in the same folder, renamed into
        place; on any failure nothing is left behind. Returns the path.

        ``compress`` deflates at level 1 (PhysioNet 2012: 17.5 MB instead of 95 MB, in about 1.5 s;
        numpy's default level takes about four times longer for 13 MB); ``np.load`` reads either."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = self.series_ids
        if ids.dtype == object:
            ids = ids.astype(str)
        arrays = {
            "format": np.array(_NPZ_FORMAT),
            "series_ids": ids,
            "offsets": self.offsets,
            "time": self.time,
            "variable": self.variable,
            "value": self.value,
            "variables": np.array(self.variables, dtype=str),
            "time_unit_ns": np.array(-1 if self.time_unit is None else self.time_unit.value, dtype=np.int64),
            "origins_ns": np.zeros(0, np.int64) if self.origins is None else self.origins.as_unit("ns").asi8,
            "has_origins": np.array(self.origins is not None),
            "origins_tz": np.array("" if self.origins is None or self.origins.tz is None else str(self.origins.tz)),
            "source": np.array(self.source),
            "count_names": np.array(list(self.read_counts), dtype=str),
            "count_values": np.array(list(self.read_counts.values()), dtype=np.int64),
        }
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        tmp = Path(tmp_name)
        try:
            method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", method, compresslevel=1 if compress else None) as zf:
                for name, array in arrays.items():
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load_npz(cls, path: Union[str, os.PathLike]) -> "ObservationSet":
        """Read a set written by ``save_npz``.

        Raises:
            DataError: the file is not such a set (truncated, another format version, other content).
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                if int(z["format"]) != _NPZ_FORMAT:
                    raise DataError(
                        f"{str(path)!r} holds ObservationSet format {int(z['format'])}, not {_NPZ_FORMAT}; "
                        "delete it and read the data again"
                    )
                origins = None
                if bool(z["has_origins"]):
                    origins = pd.DatetimeIndex(z["origins_ns"].astype("datetime64[ns]"))
                    tz = str(z["origins_tz"])
                    if tz:
                        origins = origins.tz_localize("UTC").tz_convert(tz)
                unit_ns = int(z["time_unit_ns"])
                return cls(
                    series_ids=z["series_ids"],
                    offsets=z["offsets"],
                    time=z["time"],
                    variable=z["variable"],
                    value=z["value"],
                    variables=tuple(str(v) for v in z["variables"]),
                    time_unit=None if unit_ns < 0 else pd.Timedelta(unit_ns, unit="ns"),
                    origins=origins,
                    source=str(z["source"]),
                    read_counts=dict(zip((str(k) for k in z["count_names"]), (int(v) for v in z["count_values"]))),
                )
        except DataError:
            raise
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise DataError(
                f"{str(path)!r} is not a readable ObservationSet file ({type(exc).__name__}: {exc}); delete it "
                "and read the data again"
            ) from None


def _ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(starts[i], stops[i])`` over i, vectorised: int64 [sum(stops - starts)]."""
    lengths = (stops - starts).astype(np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = lengths > 0
    starts, lengths = starts[keep].astype(np.int64), lengths[keep]
    steps = np.ones(total, dtype=np.int64)
    first = np.r_[0, np.cumsum(lengths)[:-1]]
    steps[0] = starts[0]
    steps[first[1:]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(steps)


def _observation_order(series: np.ndarray, time: np.ndarray, variable: np.ndarray) -> np.ndarray:
    """The stable permutation sorting observations by (series, time, variable): int64 [M].

    Input is usually nearly sorted (series grouped, times non-decreasing, only the variables of one
    time out of order), so it is sorted by one int64 key with a stable (adaptive) sort, which is fast
    on nearly-sorted data; a general three-key ``lexsort`` handles the rest.
    """
    by_series = np.argsort(series, kind="stable")
    s, t = series[by_series], time[by_series]
    same_series = s[1:] == s[:-1]
    if np.any(same_series & (t[1:] < t[:-1])):
        return np.lexsort((variable, time, series))  # stable: ties keep the input order
    group = np.cumsum(np.r_[True, ~same_series | (t[1:] != t[:-1])])  # [M] (series, time) group, sorted
    key = group.astype(np.int64) * (int(variable.max(initial=0)) + 1) + variable[by_series]
    return by_series[np.argsort(key, kind="stable")]


def assemble_observations(
    series: np.ndarray,
    time: np.ndarray,
    variable: np.ndarray,
    value: np.ndarray,
    n_series: int,
    duplicates: str = "mean",
    describe: Optional[Callable[[int], str]] = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Sort observations by (series, time, variable) and merge repeated (series, time, variable).

    Args:
        series: int [M] series index of each observation (0 <= series < n_series), in input order.
        time: float64 [M].
        variable: int [M].
        value: float64 [M].
        n_series: S.
        duplicates: ``"mean"`` | ``"first"`` | ``"last"`` (in input order) | ``"error"``.
        describe: input position -> text for an error message (e.g. ``"row 7 (line 9)"``).

    Returns:
        ``(offsets [S + 1], time [M'], variable [M'], value [M'], merged)`` with ``merged = M - M'``,
        the observations folded into another of the same (series, time, variable).
    """
    _check_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
    order = _observation_order(series, time, variable)
    series, time, variable, value = series[order], time[order], variable[order], value[order]
    same = (series[1:] == series[:-1]) & (time[1:] == time[:-1]) & (variable[1:] == variable[:-1])  # [M - 1]
    merged = int(same.sum())
    if merged:
        if duplicates == "error":
            i = int(np.flatnonzero(same)[0])
            where = (
                f"{describe(int(order[i]))} and {describe(int(order[i + 1]))}" if describe else f"positions {order[i]} and {order[i + 1]}"
            )
            raise DataError(
                f"{merged} observation(s) repeat a (series, time, variable) already observed, first at {where}; "
                "remove them, or pass duplicates='mean' | 'first' | 'last' to merge them"
            )
        new_group = np.r_[True, ~same]
        if duplicates == "mean":
            starts = np.flatnonzero(new_group)
            counts = np.diff(np.r_[starts, len(value)])
            value = np.add.reduceat(value, starts) / counts
            keep = starts
        elif duplicates == "first":
            keep = np.flatnonzero(new_group)
            value = value[keep]
        else:  # last
            keep = np.flatnonzero(np.r_[~same, True])
            value = value[keep]
        series, time, variable = series[keep], time[keep], variable[keep]
    offsets = np.r_[0, np.cumsum(np.bincount(series, minlength=n_series))].astype(np.int64)
    return offsets, time, variable, value, merged


def _time_unit(unit: Union[str, pd.Timedelta]) -> pd.Timedelta:
    """``"h"`` / ``"15min"`` / a ``pd.Timedelta`` -> a positive ``pd.Timedelta``."""
    delta: Optional[pd.Timedelta] = None
    if isinstance(unit, pd.Timedelta):
        delta = unit
    elif isinstance(unit, str):
        for parse in (lambda u: pd.Timedelta(1, unit=u), pd.Timedelta):
            try:
                delta = parse(unit)
                break
            except (ValueError, TypeError):
                continue
    if delta is None or pd.isna(delta) or delta <= pd.Timedelta(0):
        raise DataError(f"time_unit must be a positive duration such as 'h', 'min', '15min' or 'D'; got {unit!r}")
    return delta


def _ids(frame: pd.DataFrame, id_column: Optional[str], columns: list[str], row_label) -> tuple[np.ndarray, np.ndarray]:
    """(series code [N] int64, ids [S] sorted; in order of first appearance if the ids do not sort)."""
    if id_column is None:
        return np.zeros(len(frame), dtype=np.int64), np.array([0], dtype=np.int64)
    if id_column not in frame.columns:
        raise DataError(
            f"id column {id_column!r} is not in the data; columns are {columns}; pass id_column=<one of them>, "
            "or id_column=None to read the whole table as one series"
        )
    raw = frame[id_column]
    absent = raw.isna().to_numpy()
    if absent.any():
        rows = np.flatnonzero(absent)[:_SHOW]
        raise DataError(
            f"id column {id_column!r} has {int(absent.sum())} empty cell(s) (NaN), first at "
            f"{', '.join(row_label(int(r)) for r in rows)}; every observation needs its series id: fill or "
            "remove those rows"
        )
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


def _numeric_times(raw: pd.Series, name: str, row_label) -> np.ndarray:
    times = raw.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(times)
    if bad.any():
        rows = np.flatnonzero(bad)[:_SHOW]
        raise DataError(
            f"time column {name!r} has {int(bad.sum())} empty or infinite cell(s), first at "
            f"{', '.join(row_label(int(r)) for r in rows)}; every observation needs a finite time: fill or "
            "remove those rows"
        )
    return times


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
) -> ObservationSet:
    """Read irregular multivariate series from a CSV path or a DataFrame (not modified).

    The layout follows from the arguments: ``variable_column`` and ``value_column`` given -> **long**
    (one observation per row: id, time, variable name, value; a row whose value is empty is left
    out); neither given -> **wide** (id, time and one column per variable; an empty cell (NaN) is a
    variable not observed at that time). No value is ever filled in.

    Args:
        data: a path to a CSV file, or a DataFrame.
        id_column: the column naming each row's series; None reads the whole table as one series.
            Series are ordered by id (by first appearance when the ids do not sort, e.g. mixed types).
        time_column: the column holding times; None detects one named ``date``, ``ds``, ``timestamp``,
            ``date_time``, ``datetime``, ``time``, ... (case-insensitive), or uses a DataFrame's
            ``DatetimeIndex``. Datetimes (parsed like ``read_series`` does) become float
            ``time_unit``s since each series' first timestamp (kept in ``origins``); numbers are
            taken as given, in their own unit (e.g. hours since admission).
        variable_column: long layout: the column naming each observation's variable.
        value_column: long layout: the column holding each observation's value (numbers).
        columns: wide layout: the variable columns to keep (default: every numeric column but the
            id and time; text columns are left out). Long layout: the variables to keep, in this
            order (rows of other variables are left out); default: every variable, sorted by name.
        time_unit: the unit of datetime input (``"h"``, ``"min"``, ``"15min"``, a ``pd.Timedelta``);
            ignored for numeric times.
        time_format: a ``strftime`` format for datetime times; None infers it from the first one.
        na_values: cell values that mean "not observed" (e.g. ``[-9999]``).
        duplicates: several observations of one (series, time, variable): ``"mean"`` (the
            PhysioNet benchmark's rule), ``"first"``, ``"last"`` (in input order) or ``"error"``.
        sort: accept rows whose times go back within a series (they are sorted); by default that is
            an error, since it often means a wrong time format or a misplaced row.
        dayfirst, thousands, sep: as for ``read_series`` (dates such as ``07/01/2016``, numbers
            written ``"5,827.0"``, semicolon-separated files).

    Returns:
        an ``ObservationSet``; its ``read_counts`` say how many rows were read, observations kept,
        duplicates merged and empty cells skipped.

    Raises:
        DataError (or a subclass) naming the problem and the fix.
    """
    _check_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
    long_layout = variable_column is not None or value_column is not None
    if long_layout and (variable_column is None or value_column is None):
        given, absent = ("variable_column", "value_column") if value_column is None else ("value_column", "variable_column")
        raise DataError(
            f"the long layout needs both variable_column and value_column; {given} is given but {absent} is "
            f"not: pass {absent}=<column name>, or neither for the wide layout (one column per variable)"
        )
    unit = _time_unit(time_unit)
    na_values = normalize_na_values(na_values) or []

    frame, source, row_label = load_table(
        data, na_values, sep, accepts="a path to a CSV file or a pandas DataFrame",
        needs_columns="a time column and values (and an id column for several series)", needs_rows="one observation",
    )
    if isinstance(data, pd.DataFrame):
        for c in frame.columns:  # object columns holding only numbers (and NaN) become numeric
            if frame[c].dtype == object:
                try:
                    frame[c] = pd.to_numeric(frame[c])
                except (ValueError, TypeError):
                    pass
    names = [str(c) for c in frame.columns]

    # -- series and times --------------------------------------------------------------------------------
    codes, ids = _ids(frame, id_column, names, row_label)
    time_name = _detect_time_column(frame, time_column)
    roles = [c for c in (id_column, time_name, variable_column, value_column) if c is not None]
    if len(set(roles)) != len(roles):
        raise DataError(
            f"the id, time, variable and value columns must be different columns; got id_column={id_column!r}, "
            f"time column {time_name!r}, variable_column={variable_column!r}, value_column={value_column!r}"
        )
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
        stamps = _parse_timestamps(raw_time, shown_name, time_format, row_label, dayfirst)
        order_key = stamps.as_unit("ns").asi8  # int64 [N], exact

    position = np.argsort(codes, kind="stable")  # rows grouped by series, input order kept inside
    steps_back = (np.diff(order_key[position]) < 0) & (np.diff(codes[position]) == 0)
    if steps_back.any() and not sort:
        i = int(np.flatnonzero(steps_back)[0])
        a, b = int(position[i]), int(position[i + 1])
        shown = (lambda r: repr(float(times[r]))) if numeric_time else (lambda r: str(stamps[r]))
        raise DataError(
            f"times go back within series {shown_id(ids[codes[a]])!r}: {row_label(b)} ({shown(b)}) comes after "
            f"{row_label(a)} ({shown(a)}); {int(steps_back.sum())} such step(s) back in time; sort the table "
            "by (id, time), or pass sort=True to sort the rows"
        )

    origins = None
    if not numeric_time:
        first_ns = np.full(len(ids), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_ns, codes, order_key)
        times = (order_key - first_ns[codes]).astype(np.float64) / float(unit.value)
        origins = pd.DatetimeIndex(first_ns.astype("datetime64[ns]"))
        if stamps.tz is not None:
            origins = origins.tz_localize("UTC").tz_convert(stamps.tz)

    # -- observations --------------------------------------------------------------------------------------
    numeric_markers = []
    for v in na_values:
        try:
            numeric_markers.append(float(v))
        except (TypeError, ValueError):
            continue
    counts: dict[str, int] = {"rows": len(frame)}
    if long_layout:
        for role, col in (("variable_column", variable_column), ("value_column", value_column)):
            if col not in frame.columns:
                raise DataError(f"{role} {col!r} is not in the data; columns are {names}; pass {role}=<one of them>")
        _select_value_columns(frame, [value_column], True, row_label, thousands)  # text in the value column -> error
        values = pd.to_numeric(frame[value_column]).to_numpy(dtype=np.float64, na_value=np.nan)  # [N]
        raw_var = frame[variable_column]
        absent = raw_var.isna().to_numpy()
        if absent.any():
            rows = np.flatnonzero(absent)[:_SHOW]
            raise DataError(
                f"variable column {variable_column!r} has {int(absent.sum())} empty cell(s), first at "
                f"{', '.join(row_label(int(r)) for r in rows)}; every observation needs a variable name: fill "
                "or remove those rows"
            )
        var_names = raw_var.astype(str).to_numpy()
        if columns is not None:
            variables = [str(c) for c in ([columns] if isinstance(columns, str) else columns)]
            if len(set(variables)) != len(variables):
                raise DataError(f"columns= repeats a variable: {variables}; list every variable once")
        else:
            variables = sorted(set(var_names.tolist()))
        obs_var = pd.Categorical(var_names, categories=variables).codes.astype(np.int64)  # -1: not kept
        for number in numeric_markers:
            values[values == number] = np.nan
        listed = obs_var >= 0
        counts["other_variables_skipped"] = int((~listed).sum())
        obs_row = np.flatnonzero(listed)
        obs_var, obs_value = obs_var[listed], values[listed]
    else:
        candidates = [c for c in frame.columns if c not in roles]
        if columns is not None:
            wanted = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in wanted if c not in candidates]
            if unknown:
                raise DataError(
                    f"columns {unknown} are not variable columns of {source}; available: {[str(c) for c in candidates]}"
                )
            candidates = list(dict.fromkeys(wanted))
        kept, dropped = _select_value_columns(frame, candidates, columns is not None, row_label, thousands)
        if not kept:
            raise DataError(
                f"{source} has no numeric variable columns (text or empty columns: {[str(c) for c in dropped]}); "
                "pass variable_column= and value_column= for a long table (one observation per row)"
            )
        counts["columns_skipped"] = len(dropped)
        cells = frame[kept].apply(pd.to_numeric).to_numpy(dtype=np.float64, na_value=np.nan)  # [N, V]
        for number in numeric_markers:
            cells[cells == number] = np.nan
        variables = [str(c) for c in kept]
        obs_row, obs_var = np.nonzero(~np.isnan(cells))  # row-major: input order
        obs_value = cells[obs_row, obs_var]
    infinite = np.isinf(obs_value)
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise DataError(
            f"{int(infinite.sum())} infinite value(s), first {variables[obs_var[i]]!r} at {row_label(int(obs_row[i]))}; "
            "replace them in the data, or pass na_values=['inf', '-inf'] to treat them as not observed"
        )
    if long_layout:
        empty = np.isnan(obs_value)
        counts["empty_skipped"] = int(empty.sum())
        obs_row, obs_var, obs_value = obs_row[~empty], obs_var[~empty], obs_value[~empty]
    else:
        counts["empty_skipped"] = int(cells.size - obs_value.size)
    if obs_value.size == 0:
        raise DataError(f"{source} holds no observations (every value is empty or left out); check the columns and na_values")

    offsets, time, variable, value, merged = assemble_observations(
        codes[obs_row], times[obs_row], obs_var, obs_value, len(ids), duplicates,
        describe=lambda i: row_label(int(obs_row[i])),
    )
    counts["duplicates_merged"] = merged
    counts["observations"] = len(value)
    return ObservationSet(
        series_ids=ids, offsets=offsets, time=time, variable=variable, value=value, variables=tuple(variables),
        time_unit=None if numeric_time else unit, origins=origins, source=source, read_counts=counts,
    )

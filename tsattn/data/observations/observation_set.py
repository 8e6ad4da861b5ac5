"""Irregular multivariate series as sets of observations: ``ObservationSet``.

An observation is one measured value of one variable of one series at one time. Nothing is put on a
grid and no value is invented for an unobserved (time, variable): a series is just its observations,
each with its own time and variable. ``ObservationSet`` stores S series in a CSR layout (compressed
sparse rows), sorted by (series, time, variable):

    rows offsets[s]:offsets[s + 1]  ->  time [M], variable [M], value [M]  of series s

Readers build one from a table (``tsattn.data.io.observation_table.read_observations``, long or
wide layout) or from a registered dataset's files (``tsattn.data.io.physionet``);
``assemble_observations`` sorts and merges raw observations into the CSR arrays.
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

from ..errors import DataError
from ..validation import SHOW, check_choice

__all__ = [
    "OBSERVATION_DUPLICATE_POLICIES",
    "ObservationSet",
    "SeriesObservations",
    "assemble_observations",
    "shown_id",
]

OBSERVATION_DUPLICATE_POLICIES = ("mean", "first", "last", "error")
_NPZ_FORMAT = 1  # version of the .npz layout written by ObservationSet.save_npz



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
        static: float64 [S, K], each series' static covariates (facts of the series, not observed
            over time: age, a store's size), NaN where unknown; None without any.
        static_names: the K static covariate names.
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
    static: Optional[np.ndarray] = None
    static_names: tuple[str, ...] = ()

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
        names = tuple(str(n) for n in self.static_names)
        static = None if self.static is None and not names else np.asarray(self.static, dtype=np.float64)
        if static is not None and (static.shape != (n_series, len(names)) or len(set(names)) != len(names)):
            raise DataError(f"static must be a float array [S, K] = [{n_series}, {len(names)}] with K distinct "
                            f"static_names; got shape {static.shape} and names {names}")
        set_(self, "static", None if static is None else _readonly(static))
        set_(self, "static_names", names)

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
                f"no series with id {series_id!r}; ids are e.g. {[shown_id(i) for i in self.series_ids[:SHOW]]}"
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
            static=None if self.static is None else self.static[idx],
            static_names=self.static_names,
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
            static=self.static,
            static_names=self.static_names,
        )

    def onto_variables(self, variables: Sequence[str]) -> "ObservationSet":
        """The same observations with their variable indices into ``variables`` (a fitted model's): a
        variable of this set that ``variables`` lacks is an error; one this set never observes is simply
        absent. Same observations, same order (the kept variables keep their relative order)."""
        names = tuple(str(v) for v in variables)
        if self.variables == names:
            return self
        unknown = [v for v in self.variables if v not in names]
        if unknown:
            raise DataError(
                f"the data has variables {unknown} that the model was not fit on (it knows {list(names)}); drop "
                "them from the data (or read only the known ones with columns=[...]), or fit a model on this data"
            )
        present = [v for v in names if v in self.variables]
        kept = self.select_variables(present)  # sorted by (series, time, position in `present`)
        position = np.asarray([names.index(v) for v in present], dtype=np.int64)  # increasing: order is kept
        return ObservationSet(
            series_ids=kept.series_ids, offsets=kept.offsets, time=kept.time, variable=position[kept.variable],
            value=kept.value, variables=names, time_unit=kept.time_unit, origins=kept.origins, source=kept.source,
            read_counts=self.read_counts, static=self.static, static_names=self.static_names,
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
            static=self.static,
            static_names=self.static_names,
        )

    def with_values(self, value: np.ndarray) -> "ObservationSet":
        """The same observations (times, variables, series) with other values: float64 [M]."""
        value = np.asarray(value, dtype=np.float64)
        if value.shape != self.value.shape:
            raise DataError(f"values must have shape {self.value.shape}; got {value.shape}")
        return ObservationSet(
            series_ids=self.series_ids, offsets=self.offsets, time=self.time, variable=self.variable, value=value,
            variables=self.variables, time_unit=self.time_unit, origins=self.origins, source=self.source,
            static=self.static, static_names=self.static_names,
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
            "static_names": np.array(self.static_names, dtype=str),
            "static": np.zeros((len(self), 0)) if self.static is None else self.static,
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
                    **_static_of(z),
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
    check_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
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


def _static_of(z: Any) -> dict[str, Any]:
    """The static covariates of a loaded ``.npz`` (none in files written before they existed)."""
    names = tuple(str(n) for n in z["static_names"]) if "static_names" in z.files else ()
    return {"static": z["static"] if names else None, "static_names": names}

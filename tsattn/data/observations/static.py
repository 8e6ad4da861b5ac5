"""Static covariates of irregular series: facts of a series that do not change over time (a patient's
age, a store's size), one value per series, beside its observations.

- ``static_from_table``: the static columns of a table, one value per series (a column that varies
  within a series is an error naming the series and the values).
- ``variables_as_static``: static covariates from variables recorded at a series' start (PhysioNet
  2012's descriptors at admission), the observations kept.
- ``StaticScaler``: standardisation fitted on the train series, and the model's input: the scaled
  values (0 where unknown) beside a known / unknown flag per covariate.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd

from ..errors import DataError
from .observation_set import ObservationSet, shown_id

__all__ = ["StaticScaler", "static_from_table", "variables_as_static"]


def check_static_columns(static_columns: Any) -> tuple[str, ...]:
    """``static_columns`` as a tuple of distinct names (None: none)."""
    if static_columns is None:
        return ()
    names = [static_columns] if isinstance(static_columns, str) else list(static_columns)
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise DataError(f"static_columns must be distinct column names, e.g. static_columns=['age', 'sex']; "
                        f"got {static_columns!r}")
    return tuple(names)


def static_from_table(frame: pd.DataFrame, codes: np.ndarray, ids: np.ndarray, static_columns: Any,
                      roles: Sequence[str], row_label: Callable[[int], str]) -> tuple[Optional[np.ndarray], tuple[str, ...]]:
    """(float64 [S, K] or None, the K names): per series (``codes`` [N]: each row's series, ``ids``
    [S]) the one value of each of the ``static_columns`` (empty cells ignored; NaN for a series with
    none); ``roles``: the id, time, variable and value columns, which cannot be static.

    Raises:
        DataError: a column that is missing, not numeric, one of ``roles``, or holds two values within
            one series.
    """
    names = check_static_columns(static_columns)
    clash = [c for c in names if c in roles]
    if clash:
        raise DataError(f"static_columns {clash} are the id, time, variable or value column; name other columns")
    if not names:
        return None, ()
    out = np.full((len(ids), len(names)), np.nan)
    for k, name in enumerate(names):
        if name not in frame.columns:
            raise DataError(
                f"static column {name!r} is not in the data (columns: {[str(c) for c in frame.columns]}); a model "
                "fit with static_columns reads them from every table it forecasts: add the column (one value per "
                "series), or fit without it"
            )
        raw = frame[name]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(np.isnan(values) & raw.notna().to_numpy())
        if bad.size:
            raise DataError(f"static column {name!r} holds {raw.iloc[bad[0]]!r} ({row_label(int(bad[0]))}): static "
                            "covariates are numbers; encode categories as numbers (e.g. 0 / 1) first")
        known = np.flatnonzero(np.isfinite(values))
        if known.size == 0:
            continue
        series, vals = codes[known], values[known]
        order = np.lexsort((vals, series))
        series, vals = series[order], vals[order]
        first = np.r_[True, series[1:] != series[:-1]]
        lo = np.minimum.reduceat(vals, np.flatnonzero(first))
        hi = np.maximum.reduceat(vals, np.flatnonzero(first))
        varies = np.flatnonzero(lo != hi)
        if varies.size:
            s = series[first][varies[0]]
            raise DataError(
                f"static column {name!r} varies within series {shown_id(ids[s])!r} ({lo[varies[0]]:g} and "
                f"{hi[varies[0]]:g}): a static covariate has one value per series; give it one value, or read it "
                "as a variable (an observation at its time) instead"
            )
        out[series[first], k] = lo
    return out, names


def variables_as_static(observations: ObservationSet, names: Sequence[str]) -> ObservationSet:
    """Static covariates (after any the set has) from the variables ``names``: each one's value at the
    series' first observation time (its admission), NaN for a series that does not observe it then
    (a later value could be a forecast target: it is never read). The observations stay as they are
    (a weight recorded at admission and later on is still forecast)."""
    names = [str(n) for n in ([names] if isinstance(names, str) else names)]
    unknown = [n for n in names if n not in observations.variables]
    if unknown or not names:
        raise DataError(f"static_variables: {unknown or names} are not variables of the data; its variables are "
                        f"{list(observations.variables)}")
    clash = [n for n in names if n in observations.static_names]
    if clash:
        raise DataError(f"{clash} are static covariates already; name each static covariate once")
    values = np.full((len(observations), len(names)), np.nan)
    start = np.full(len(observations), np.nan)
    present = observations.series_lengths > 0
    start[present] = observations.time[observations.offsets[:-1][present]]      # each series' first time
    at_start = observations.time == start[observations.series_index]
    for k, name in enumerate(names):
        rows = np.flatnonzero(at_start & (observations.variable == observations.variables.index(name)))
        values[observations.series_index[rows], k] = observations.value[rows]   # one per (series, time, var)
    static = values if observations.static is None else np.concatenate([observations.static, values], axis=1)
    return dataclasses.replace(observations, static=static, static_names=observations.static_names + tuple(names))


class StaticScaler:
    """Standardisation of static covariates, fitted on some series (the train split's).

    ``transform(static)`` [S, K] -> float32 [S, 2K]: the standardised values (0, the mean, where
    unknown) and a flag per covariate (1 known, 0 unknown), the model's input.
    """

    def __init__(self, names: Sequence[str], mean: Sequence[float], std: Sequence[float]) -> None:
        self.names = tuple(str(n) for n in names)
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)

    @classmethod
    def fit(cls, names: Sequence[str], static: np.ndarray) -> "StaticScaler":
        """Fit on ``static`` [S, K] (NaN: unknown); a covariate never known, or constant, gets mean 0 /
        std 1 where it has nothing to scale by."""
        known = np.isfinite(static)
        count = known.sum(0)
        mean = np.where(count > 0, np.nansum(np.where(known, static, 0.0), 0) / np.maximum(count, 1), 0.0)
        var = np.nansum(np.where(known, (static - mean) ** 2, 0.0), 0) / np.maximum(count, 1)
        std = np.sqrt(var)
        return cls(names, mean, np.where(std > 1e-12, std, 1.0))

    def transform(self, static: Optional[np.ndarray]) -> np.ndarray:
        """float32 [S, 2K]: scaled values (0 where unknown) and known flags."""
        if static is None or static.shape[1] != len(self.names):
            raise DataError(f"the data has no static covariates {list(self.names)}, which the model was fit with: "
                            "give them (static_columns / static_variables) as at fit time")
        known = np.isfinite(static)
        scaled = np.where(known, (static - self.mean) / self.std, 0.0)
        return np.concatenate([scaled, known.astype(np.float64)], axis=1).astype(np.float32)

    def to_record(self) -> dict[str, Any]:
        return {"names": list(self.names), "mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_record(cls, record: Optional[dict[str, Any]]) -> Optional["StaticScaler"]:
        return None if not record else cls(record["names"], record["mean"], record["std"])

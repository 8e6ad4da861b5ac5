"""Forecasting samples over an ``ObservationSet``: which (series, origin) pairs exist, and their split.

A sample is a series s and a forecast origin t0 (in the set's time units):

- history: every observation of s with ``t0 - lookback <= time < t0`` (``lookback=None``: all
  before t0);
- targets: every observation of s with ``t0 <= time < t0 + horizon`` (``horizon=None``: all from
  t0 on), each at its own time and variable.

Since a series' rows are sorted by time, both are row ranges of the set: ``[history_start,
target_start)`` and ``[target_start, target_stop)``; nothing at or after t0 is history.

Origins:

- **fixed** (``fixed_origin_samples``): the same origins in every series (PhysioNet: 24 h). A
  series with no history before an origin is an error naming it; a series with history but no
  targets is kept (it adds no loss).
- **rolling** (``rolling_origin_samples``): in each series, ``t0 = t_first + lookback + k * stride``
  for k = 0, 1, ... while ``t0 + horizon <= t_last`` (the target window ends by the series' last
  observation time); an origin with no history has no sample.

Splits:

- **by series** (``split_series``): the PhysioNet protocol's two scikit-learn calls on the sorted ids;
- **by time** (``time_borders`` + ``assign_time_splits``): fractions of each series' time span
  ``[t_first, t_last]``; a sample belongs to the split whose time range holds its whole target
  window (``[b0, b1)``, ``[b1, b2)``, ``[b2, inf)``); samples straddling a border are left out; the
  history of a val / test sample may reach back into the earlier split, as the regular protocol's
  val / test windows start ``lookback`` rows early.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np
from sklearn.model_selection import train_test_split

from ..errors import DataError
from ..validation import SPLITS
from .observation_set import ObservationSet, _ranges, shown_id

__all__ = [
    "ForecastSamples",
    "assign_time_splits",
    "check_fractions",
    "fixed_origin_samples",
    "rolling_origin_samples",
    "naive_errors",
    "rows_before",
    "split_samples",
    "split_series",
    "time_borders",
]


@dataclass(frozen=True, eq=False)
class ForecastSamples:
    """n forecasting samples as row ranges of an ``ObservationSet``.

    Attributes:
        series: int64 [n], the series of each sample (index into the set).
        origin: float64 [n], t0 in the set's time units.
        history_start: int64 [n], first history row.
        target_start: int64 [n], first target row (= one past the last history row).
        target_stop: int64 [n], one past the last target row.
    """

    series: np.ndarray
    origin: np.ndarray
    history_start: np.ndarray
    target_start: np.ndarray
    target_stop: np.ndarray

    def __len__(self) -> int:
        return len(self.series)

    @property
    def n_history(self) -> np.ndarray:
        """int64 [n], history observations per sample."""
        return self.target_start - self.history_start

    @property
    def n_targets(self) -> np.ndarray:
        """int64 [n], target observations per sample."""
        return self.target_stop - self.target_start

    def counts(self) -> dict[str, int]:
        """Samples, series, history and target observations."""
        return {"samples": len(self), "series": int(np.unique(self.series).size),
                "history_observations": int(self.n_history.sum()), "target_observations": int(self.n_targets.sum())}

    def target_rows(self) -> np.ndarray:
        """int64: the rows of every sample's targets, sample after sample."""
        return _ranges(self.target_start, self.target_stop)

    def take(self, index: np.ndarray) -> "ForecastSamples":
        """The samples ``index`` (int positions or a bool mask [n])."""
        return ForecastSamples(
            self.series[index], self.origin[index], self.history_start[index], self.target_start[index],
            self.target_stop[index],
        )

    @staticmethod
    def concatenate(parts: Sequence["ForecastSamples"]) -> "ForecastSamples":
        """The samples of ``parts``, in order."""
        if not parts:
            return _empty_samples()
        return ForecastSamples(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


_FIELDS = ("series", "origin", "history_start", "target_start", "target_stop")


def _empty_samples() -> ForecastSamples:
    i = np.zeros(0, dtype=np.int64)
    return ForecastSamples(i, np.zeros(0, dtype=np.float64), i, i, i)


def _check_window(name: str, value: Optional[float], required: bool) -> Optional[float]:
    if value is None:
        if required:
            raise DataError(f"rolling origins need a finite {name} (in the data's time units); pass {name}=<a number > 0>")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not np.isfinite(value) or value <= 0:
        raise DataError(f"{name} must be a number > 0 (in the data's time units) or None; got {value!r}")
    return float(value)


def rows_before(observations: ObservationSet, bound) -> np.ndarray:
    """int64 [S]: per series, the first row with time >= bound (a number, or one per series [S])."""
    bound = bound if np.isscalar(bound) else np.asarray(bound)[observations.series_index]
    counts = np.bincount(observations.series_index[observations.time < bound], minlength=len(observations))
    return observations.offsets[:-1] + counts


def fixed_origin_samples(
    observations: ObservationSet,
    origins: Union[Sequence[float], np.ndarray],
    lookback: Optional[float] = None,
    horizon: Optional[float] = None,
    series: Optional[np.ndarray] = None,
) -> ForecastSamples:
    """One sample per (series, origin), for every series and every origin (ordered by origin, then series).

    Args:
        observations: the set.
        origins: t0 values in the set's time units (e.g. ``[24.0]`` hours after admission), the same
            for every series; or float64 [K, S], each series' own K origins (absolute timestamps read
            as each series' time since its first one).
        lookback: length of the history window before t0; None: everything before t0.
        horizon: length of the target window from t0; None: everything from t0 on.
        series: int64 [n], only these series (indices into the set, in this order); None: every series.

    Raises:
        DataError: a series (of ``series``) has no observation in the history window of an origin (named).
    """
    lookback = _check_window("lookback", lookback, required=False)
    horizon = _check_window("horizon", horizon, required=False)
    per_series = isinstance(origins, np.ndarray) and origins.ndim == 2
    values = list(origins) if per_series else [float(o) for o in ([origins] if np.isscalar(origins) else origins)]
    if not values or not all(np.all(np.isfinite(v)) for v in values):
        raise DataError(f"origins must be a non-empty list of finite times; got {origins!r}")
    if len(observations) == 0:
        raise DataError("the observation set holds no series")
    series = np.arange(len(observations), dtype=np.int64) if series is None else np.asarray(series, dtype=np.int64)
    parts = []
    for t0 in values:
        start = observations.offsets[:-1] if lookback is None else rows_before(observations, t0 - lookback)
        mid = rows_before(observations, t0)
        stop = observations.offsets[1:] if horizon is None else rows_before(observations, t0 + horizon)
        start, mid, stop = start[series], mid[series], stop[series]
        empty = mid == start
        if empty.any():
            k = series[np.flatnonzero(empty)]
            ids = [shown_id(observations.series_ids[i]) for i in k[:3]]
            at = float(t0 if np.isscalar(t0) else t0[k[0]])
            window = f"[{at - lookback:g}, {at:g})" if lookback is not None else f"before {at:g}"
            raise DataError(
                f"{k.size} series have no observation {window} to forecast from at origin {at:g}, e.g. series "
                f"{', '.join(repr(i) for i in ids)} (index {', '.join(str(i) for i in k[:3])}); leave them out "
                "(ObservationSet.subset), or use a later origin or a longer history"
            )
        origin = np.broadcast_to(np.asarray(t0, dtype=np.float64), (len(observations),))[series]      # [n], a copy
        parts.append(ForecastSamples(series, origin, start, mid, stop))
    return ForecastSamples.concatenate(parts)


def rolling_origin_samples(
    observations: ObservationSet,
    lookback: float,
    horizon: float,
    stride: float,
) -> ForecastSamples:
    """Samples at origins ``t_first + lookback + k * stride`` of every series while ``t0 + horizon <= t_last``;
    origins without history have no sample (ordered by series, then origin).

    Args:
        observations: the set.
        lookback: length of the history window (> 0).
        horizon: length of the target window (> 0).
        stride: time between consecutive origins (> 0).
    """
    lookback = _check_window("lookback", lookback, required=True)
    horizon = _check_window("horizon", horizon, required=True)
    stride = _check_window("origin_stride", stride, required=True)
    assert lookback is not None and horizon is not None and stride is not None
    parts = []
    for s in range(len(observations)):
        a, b = int(observations.offsets[s]), int(observations.offsets[s + 1])
        if a == b:
            continue
        times = observations.time[a:b]
        first = times[0] + lookback
        room = times[-1] - horizon - first
        if room < 0:
            continue
        t0 = first + stride * np.arange(int(np.floor(room / stride)) + 2)
        t0 = t0[t0 + horizon <= times[-1]]
        start = a + np.searchsorted(times, t0 - lookback, side="left")
        mid = a + np.searchsorted(times, t0, side="left")
        stop = a + np.searchsorted(times, t0 + horizon, side="left")
        keep = mid > start
        parts.append(ForecastSamples(np.full(int(keep.sum()), s, dtype=np.int64), t0[keep], start[keep], mid[keep], stop[keep]))
    return ForecastSamples.concatenate(parts)


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Raise unless ``fractions`` are three numbers >= 0 summing to 1 with a train part > 0."""
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        values = ()
    if len(values) != 3 or min(values) < 0 or values[0] <= 0 or abs(sum(values) - 1.0) > 1e-9:
        raise DataError(
            f"split_fractions must be three numbers >= 0 (train > 0) summing to 1, e.g. (0.6, 0.2, 0.2); got {fractions!r}"
        )
    return values  # type: ignore[return-value]


def split_series(
    series_ids: np.ndarray, fractions: Sequence[float] = (0.6, 0.2, 0.2), seed: int = 42
) -> dict[str, np.ndarray]:
    """Split series into train / val / test, deterministically (the PhysioNet protocol's calls).

    On the ids **sorted**: ``seen, test = train_test_split(ids, train_size=train + val,
    random_state=seed, shuffle=True)``, then ``train, val = train_test_split(seen,
    train_size=train / (train + val), shuffle=False)`` (scikit-learn). The published benchmark made
    the same two calls on a list in file-system order, which cannot be reproduced; sorting makes the
    split a function of the ids alone. 12,000 stays at (0.6, 0.2, 0.2) give 7,200 / 2,400 / 2,400.

    Returns:
        ``{"train": int64 [n_train], "val": ..., "test": ...}``: positions into ``series_ids``, sorted.
    """
    train, val, test = check_fractions(fractions)
    ids = np.asarray(series_ids)
    order = np.argsort(ids, kind="stable")
    if np.any(ids[order][1:] == ids[order][:-1]):
        raise DataError("series ids repeat; a split by series needs distinct ids")
    positions = order  # positions of the sorted ids
    seen_fraction = round(train + val, 12)
    try:
        if test > 0:
            seen, held = train_test_split(positions, train_size=seen_fraction, random_state=seed, shuffle=True)
        else:
            seen, held = positions, positions[:0]
        if val > 0:
            first, second = train_test_split(seen, train_size=round(train / seen_fraction, 12), shuffle=False)
        else:
            first, second = seen, seen[:0]
    except ValueError as exc:
        raise DataError(
            f"cannot split {len(ids)} series by {fractions} ({exc}); use more series, other fractions, or "
            "split='time'"
        ) from None
    return {name: np.sort(np.asarray(part, dtype=np.int64)) for name, part in zip(SPLITS, (first, second, held))}


def time_borders(observations: ObservationSet, fractions: Sequence[float] = (0.7, 0.1, 0.2)) -> np.ndarray:
    """float64 [S, 2]: per series, the times b1, b2 where val and test begin:
    ``t_first + train * span`` and ``t_first + (train + val) * span``, span = ``t_last - t_first``
    (NaN for a series without observations)."""
    train, val, _ = check_fractions(fractions)
    lengths = observations.series_lengths
    borders = np.full((len(observations), 2), np.nan)
    present = lengths > 0
    first = observations.time[observations.offsets[:-1][present]]
    last = observations.time[observations.offsets[1:][present] - 1]
    span = last - first
    borders[present, 0] = first + train * span
    borders[present, 1] = first + (train + val) * span
    return borders


def assign_time_splits(
    samples: ForecastSamples, borders: np.ndarray, horizon: Optional[float]
) -> dict[str, ForecastSamples]:
    """Each sample to the split whose time range holds its whole target window ``[t0, t0 + horizon)``
    (train ``(-inf, b1)``, val ``[b1, b2)``, test ``[b2, inf)``); samples straddling a border are left out."""
    b1, b2 = borders[samples.series, 0], borders[samples.series, 1]
    end = samples.origin + (np.inf if horizon is None else horizon)
    masks = {
        "train": end <= b1,
        "val": (samples.origin >= b1) & (end <= b2),
        "test": samples.origin >= b2,
    }
    return {name: samples.take(np.flatnonzero(mask)) for name, mask in masks.items()}


def split_samples(observations: ObservationSet, samples: ForecastSamples, split: str, fractions: Sequence[float],
                  seed: int, scale_from: str, horizon: Optional[float]):
    """The samples of each split, the observations [M] (bool) a scaler may be fit on (the train, or
    train + val: ``scale_from="seen"``, observations), the series of each split (by series; else None)
    and the time borders [S, 2] (by time; else None)."""
    if split == "series":
        series_splits = split_series(observations.series_ids, fractions, seed)
        member = np.full(len(observations), -1, dtype=np.int64)
        for k, name in enumerate(SPLITS):
            member[series_splits[name]] = k
        by_split = {name: samples.take(np.flatnonzero(member[samples.series] == k)) for k, name in enumerate(SPLITS)}
        fit_series = series_splits["train"] if scale_from == "train" else np.r_[series_splits["train"], series_splits["val"]]
        in_fit = np.zeros(len(observations), dtype=bool)
        in_fit[fit_series] = True
        return by_split, in_fit[observations.series_index], series_splits, None
    borders = time_borders(observations, fractions)
    column = 0 if scale_from == "train" else 1
    fit_rows = observations.time < borders[observations.series_index, column]
    return assign_time_splits(samples, borders, horizon), fit_rows, None, borders


def naive_errors(observations: ObservationSet, rows: np.ndarray) -> np.ndarray:
    """float64 [V]: per variable, the mean absolute change between consecutive observations of it within a
    series, over the observations ``rows`` ([M] bool): the error of forecasting each observation by the
    variable's previous one (NaN for a variable with fewer than two there)."""
    series, variable, value = observations.series_index[rows], observations.variable[rows], observations.value[rows]
    order = np.lexsort((np.arange(len(value)), variable, series))          # by (series, variable), in time order
    s, v, x = series[order], variable[order], value[order]
    same = (s[1:] == s[:-1]) & (v[1:] == v[:-1])
    step = np.abs(np.diff(x))[same]
    V = observations.n_variables
    total = np.bincount(v[1:][same].astype(np.int64), weights=step, minlength=V)
    count = np.bincount(v[1:][same].astype(np.int64), minlength=V)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)

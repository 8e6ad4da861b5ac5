"""The datasets of the observation task: training samples and inference queries.

- ``ForecastSampleDataset``: the forecasting samples of one split over shared observation arrays
  (history and targets of each sample are row ranges); ``batch(indices)`` builds a padded batch
  with vectorised numpy.
- ``latest_histories`` / ``histories_before``: one history per series at a forecast origin (its last
  observation, or a given time), for inference.
- ``QueryBatches``: queries (series, time, variable) on those histories, grouped into batches of
  whole series: the inference counterpart of the training batches.

A batch is a dict of padded tensors, observations sorted by (time, variable) inside each part:

    x_time   float32 [B, Nx]  history times minus the origin (negative), in time units
    x_var    int64   [B, Nx]  variable index
    x_value  float32 [B, Nx]  scaled value
    x_mask   bool    [B, Nx]  True = a real observation
    y_time, y_var, y_value, y_mask  [B, Ny]  the targets (queries) likewise (times >= 0)
    series   int64   [B]      index of the series in the ObservationSet
    origin   float64 [B]      the forecast origin t0, in the set's time units
    static   float32 [B, 2K]  with static covariates only: their scaled values and known flags

Nx / Ny are the longest history / target in the batch (at least 1); padding is time 0, var 0,
value 0, mask False.
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset

from ..scaling import Scaler
from .observation_set import ObservationSet
from .samples import ForecastSamples, rows_before

__all__ = ["ForecastSampleDataset", "QueryBatches", "collate_forecast_samples", "histories_before", "latest_histories"]

_PARTS = ("x", "y")


class ForecastSampleDataset(Dataset):
    """The forecasting samples of one split over shared observation arrays.

    ``dataset[i]`` is one sample, unpadded: ``x_time``, ``x_var``, ``x_value`` [nx] and ``y_time``,
    ``y_var``, ``y_value`` [ny] (times relative to the origin), ``series`` and ``origin`` (scalars).
    ``dataset.batch(indices)`` (also ``__getitems__``, which ``DataLoader`` uses) builds a whole
    padded batch at once with vectorised numpy (see the module docstring for its keys).

    Args:
        time: float64 [M], every observation's time.
        variable: int [M], every observation's variable index.
        value: float32 [M], every observation's scaled value.
        samples: the split's samples (row ranges into those arrays).
        static: float32 [S, 2K], per series the static covariates' model input
            (``StaticScaler.transform``); None without any.
    """

    def __init__(self, time: np.ndarray, variable: np.ndarray, value: np.ndarray, samples: ForecastSamples,
                 static: Optional[np.ndarray] = None) -> None:
        self.time = time
        self.variable = variable
        self.value = value
        self.samples = samples
        self.static = static

    def __len__(self) -> int:
        return len(self.samples)

    def _index(self, index: int) -> int:
        n = len(self)
        if not -n <= int(index) < n:
            raise IndexError(f"sample {index} out of range for {n} samples")
        return int(index) % n

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        i = self._index(index)
        s = self.samples
        t0 = float(s.origin[i])
        item = {}
        for part, (a, b) in zip(_PARTS, ((s.history_start[i], s.target_start[i]), (s.target_start[i], s.target_stop[i]))):
            rows = slice(int(a), int(b))
            item[f"{part}_time"] = torch.from_numpy((self.time[rows] - t0).astype(np.float32))
            item[f"{part}_var"] = torch.from_numpy(self.variable[rows].astype(np.int64))
            item[f"{part}_value"] = torch.from_numpy(self.value[rows].copy())
        item["series"] = torch.tensor(int(s.series[i]), dtype=torch.int64)
        item["origin"] = torch.tensor(t0, dtype=torch.float64)
        if self.static is not None:
            item["static"] = torch.from_numpy(self.static[int(s.series[i])].copy())
        return item

    def batch(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """The padded batch of samples ``indices`` (vectorised)."""
        idx = np.asarray([self._index(i) for i in indices], dtype=np.int64)
        s = self.samples
        origin = s.origin[idx]  # [B]
        out: dict[str, torch.Tensor] = {}
        for part, (start, stop) in zip(_PARTS, ((s.history_start, s.target_start), (s.target_start, s.target_stop))):
            first, length = start[idx], stop[idx] - start[idx]  # [B]
            width = max(1, int(length.max(initial=0)))
            offset = np.arange(width)  # [N]
            mask = offset[None, :] < length[:, None]  # [B, N]
            rows = np.where(mask, first[:, None] + offset[None, :], 0)  # [B, N]; row 0 where padded
            out[f"{part}_time"] = torch.from_numpy(np.where(mask, self.time[rows] - origin[:, None], 0.0).astype(np.float32))
            out[f"{part}_var"] = torch.from_numpy(np.where(mask, self.variable[rows], 0).astype(np.int64))
            out[f"{part}_value"] = torch.from_numpy(np.where(mask, self.value[rows], 0.0).astype(np.float32))
            out[f"{part}_mask"] = torch.from_numpy(mask)
        out["series"] = torch.from_numpy(s.series[idx].copy())
        out["origin"] = torch.from_numpy(origin.astype(np.float64))
        if self.static is not None:
            out["static"] = torch.from_numpy(self.static[s.series[idx]])
        return out

    __getitems__ = batch


def collate_forecast_samples(batch: Union[Mapping[str, torch.Tensor], Sequence[Mapping[str, torch.Tensor]]]) -> dict[str, torch.Tensor]:
    """The ``collate_fn`` for ``ForecastSampleDataset``: a batch already built by ``__getitems__``
    passes through; a list of single samples (``dataset[i]``) is padded into the same layout."""
    if isinstance(batch, Mapping):
        return dict(batch)
    out: dict[str, torch.Tensor] = {}
    for part in _PARTS:
        lengths = [len(item[f"{part}_time"]) for item in batch]
        width = max([1, *lengths])
        mask = torch.zeros(len(batch), width, dtype=torch.bool)
        fields = {
            "time": torch.zeros(len(batch), width, dtype=torch.float32),
            "var": torch.zeros(len(batch), width, dtype=torch.int64),
            "value": torch.zeros(len(batch), width, dtype=torch.float32),
        }
        for b, (item, n) in enumerate(zip(batch, lengths)):
            mask[b, :n] = True
            for name, tensor in fields.items():
                tensor[b, :n] = item[f"{part}_{name}"]
        out.update({f"{part}_{name}": tensor for name, tensor in fields.items()})
        out[f"{part}_mask"] = mask
    out["series"] = torch.stack([item["series"] for item in batch])
    out["origin"] = torch.stack([item["origin"] for item in batch])
    if batch and "static" in batch[0]:
        out["static"] = torch.stack([item["static"] for item in batch])
    return out


def _scaled(observations: ObservationSet, scaler: Scaler) -> np.ndarray:
    return scaler.transform(observations.value, observations.variable).astype(np.float32)


def latest_histories(observations: ObservationSet, scaler: Scaler, lookback: Optional[float],
                     static: Optional[np.ndarray] = None) -> ForecastSampleDataset:
    """One sample per series that has observations, at the forecast origin t0 = its last
    observation time: the history is every observation with ``t0 - lookback <= time <= t0`` (the
    last one included, at relative time 0; ``lookback=None``: all of them), and there are no
    targets. Values are scaled with ``scaler``; ``dataset.samples.series`` [n] names each sample's
    series; ``static``: the static covariates' model input [S, 2K], if any."""
    present = np.flatnonzero(observations.series_lengths > 0)                  # [n]
    stop = observations.offsets[1:][present]                                    # [n]
    origin = observations.time[stop - 1]                                        # [n] last observation times
    if lookback is None:
        start = observations.offsets[:-1][present]
    else:
        bound = np.full(len(observations), -np.inf)
        bound[present] = origin - float(lookback)
        start = rows_before(observations, bound)[present]
    samples = ForecastSamples(present.astype(np.int64), origin, start, stop, stop)
    return ForecastSampleDataset(observations.time, observations.variable.astype(np.int64),
                                 _scaled(observations, scaler), samples, static)


def histories_before(observations: ObservationSet, scaler: Scaler, origins: np.ndarray,
                     lookback: Optional[float], static: Optional[np.ndarray] = None) -> ForecastSampleDataset:
    """One sample per series with an observation before its origin ``origins[s]`` ([S], in the set's
    time units), as the training samples are cut: the history is every observation with
    ``t0 - lookback <= time < t0`` (``lookback=None``: all before t0); later observations are not
    read, and there are no targets. Values are scaled with ``scaler``; ``static`` as for
    ``latest_histories``."""
    S = len(observations)
    origins = np.broadcast_to(np.asarray(origins, dtype=np.float64), (S,))
    stop = rows_before(observations, origins)                                   # rows before t0
    start = observations.offsets[:-1].copy() if lookback is None else rows_before(observations, origins - float(lookback))
    present = np.flatnonzero(stop > start)
    samples = ForecastSamples(present.astype(np.int64), origins[present].copy(), start[present], stop[present],
                              stop[present])
    return ForecastSampleDataset(observations.time, observations.variable.astype(np.int64),
                                 _scaled(observations, scaler), samples, static)


class QueryBatches:
    """Queries at ``time`` [Q] (the set's time units) of ``variable`` [Q], each from the history of
    sample ``sample`` [Q] of ``history`` (a ``latest_histories`` / ``histories_before`` dataset),
    as padded batches of up to ``batch_size`` whole series (in request order).

    Iterating yields ``(positions, cells, batch)``: the queries a batch holds (int64 [q]), where
    each sits in the batch's [B, Ny] query layout (``(row [q], column [q])``), and the model
    inputs, with ``y_time`` relative to each series' origin. ``forecast(fn)`` runs a model on every
    batch and returns the forecasts [Q] in query order.
    """

    def __init__(self, history: ForecastSampleDataset, sample: np.ndarray, time: np.ndarray, variable: np.ndarray,
                 batch_size: int) -> None:
        self.history, self.sample, self.time, self.variable = history, sample, time, variable
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[tuple[np.ndarray, tuple[np.ndarray, np.ndarray], dict[str, torch.Tensor]]]:
        order = pd.unique(self.sample)  # the series in request order
        slot = np.full(len(self.history), -1, dtype=np.int64)
        for first in range(0, len(order), self.batch_size):
            chunk = order[first:first + self.batch_size]                                  # [B] samples
            slot[:] = -1
            slot[chunk] = np.arange(len(chunk))
            chosen = np.flatnonzero(slot[self.sample] >= 0)                               # [q] this batch's queries
            row = slot[self.sample[chosen]]                                               # [q]
            counts = np.bincount(row, minlength=len(chunk))
            by_row = np.argsort(row, kind="stable")
            rank = np.empty_like(row)
            rank[by_row] = np.arange(len(row)) - (np.cumsum(counts) - counts)[row[by_row]]
            width = max(1, int(counts.max(initial=0)))
            y_time = np.zeros((len(chunk), width))
            y_var = np.zeros((len(chunk), width), dtype=np.int64)
            y_mask = np.zeros((len(chunk), width), dtype=bool)
            y_time[row, rank] = self.time[chosen] - self.history.samples.origin[chunk][row]  # relative to the origin
            y_var[row, rank] = self.variable[chosen]
            y_mask[row, rank] = True
            batch = self.history.batch(chunk)                                             # x_*: the histories
            batch.update(y_time=torch.from_numpy(y_time.astype(np.float32)), y_var=torch.from_numpy(y_var),
                         y_mask=torch.from_numpy(y_mask), y_value=torch.zeros(y_time.shape))
            yield chosen, (row, rank), batch

    def forecast(self, forecast_batch: Callable[[dict[str, torch.Tensor]], torch.Tensor]) -> np.ndarray:
        """Every query's forecast [Q] (float64): ``forecast_batch(batch) -> [B, Ny]`` on each batch (or
        [B, Ny, K], K values per query, e.g. quantiles: then [Q, K])."""
        out: Optional[np.ndarray] = None
        for positions, (row, rank), batch in self:
            pred = forecast_batch(batch).detach().cpu().double().numpy()[row, rank]     # [q] or [q, K]
            if out is None:
                out = np.empty((len(self.time), *pred.shape[1:]), dtype=np.float64)
            out[positions] = pred
        return np.empty(len(self.time)) if out is None else out

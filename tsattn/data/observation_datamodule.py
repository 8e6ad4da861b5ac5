"""``ObservationDataModule``: irregular observation sets -> forecasting samples -> padded batches.

The pipeline (``setup``): an ``ObservationSet`` (given, read with ``read_observations``, or a
registered dataset parsed once and cached) -> forecasting samples at fixed or rolling origins
(``forecast_samples``) -> a split by series or by time -> a per-variable scaler fit on the train
(or train + val: ``scale_from="seen"``) observations only -> three ``ForecastSampleDataset`` views
over one scaled copy of the values. ``setup`` never downloads; ``prepare_data`` fetches a
registered dataset that is not available locally.

A batch is a dict of padded tensors, observations sorted by (time, variable) inside each part:

    x_time   float32 [B, Nx]  history times minus the origin (negative), in time units
    x_var    int64   [B, Nx]  variable index (into ``variables``)
    x_value  float32 [B, Nx]  scaled value
    x_mask   bool    [B, Nx]  True = a real observation
    y_time, y_var, y_value, y_mask  [B, Ny]  the targets likewise (times >= 0)
    series   int64   [B]      index of the series in the ObservationSet
    origin   float64 [B]      the forecast origin t0, in the set's time units

Nx / Ny are the longest history / target in the batch (at least 1); padding is time 0, var 0,
value 0, mask False.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset

from . import registry
from .csv import _check_choice, _detect_time_column
from .datamodule import _looks_like_path as _looks_like_csv_path
from .errors import DataError
from .forecast_samples import (
    ForecastSamples,
    assign_time_splits,
    check_fractions,
    fixed_origin_samples,
    rolling_origin_samples,
    split_series,
    time_borders,
)
from .observations import OBSERVATION_DUPLICATE_POLICIES, ObservationSet, _time_unit, read_observations
from .physionet import UNKNOWN_DESCRIPTOR_POLICIES, load_physionet2012
from .splits import SPLITS, check_positive_int
from .variable_scaling import SCALER_KINDS, VariableScaler, fit_variable_scaler
from .windows import EpochShuffleSampler

__all__ = [
    "OBSERVATION_SPLITS",
    "SCALE_FROM",
    "ForecastSampleDataset",
    "ObservationDataModule",
    "collate_forecast_samples",
]

OBSERVATION_SPLITS = ("series", "time")
SCALE_FROM = ("train", "seen")
SUBSAMPLE_UNITS = ("time", "observation")
_DEFAULT_FRACTIONS = {"series": (0.6, 0.2, 0.2), "time": (0.7, 0.1, 0.2)}
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
    """

    def __init__(self, time: np.ndarray, variable: np.ndarray, value: np.ndarray, samples: ForecastSamples) -> None:
        self.time = time
        self.variable = variable
        self.value = value
        self.samples = samples

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
    return out


def _looks_like_path(text: str) -> bool:
    return text.lower().endswith(".npz") or _looks_like_csv_path(text)


def _check_optional_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value is not None:
        _check_choice(name, value, choices)


class ObservationDataModule(pl.LightningDataModule):
    """Forecasting samples over irregular multivariate series (each variable at its own times).

    A sample is a series and a forecast origin t0: the history is every observation with
    ``t0 - history <= time < t0``, the targets every observation with ``t0 <= time < t0 + horizon``.
    No value is invented: only observed (time, variable, value) triples appear, with masks.
    Batches: see the module docstring.

    Args:
        data: an ``ObservationSet``; a registered name (``"physionet2012"``; a registered CSV
            series such as ``"ETTh1"`` is read in the wide layout); a path to a CSV file or an
            ``.npz`` written by ``ObservationSet.save_npz``; or a DataFrame (long or wide; see
            ``read_observations`` and the reading options below).
        origins: fixed forecast origins, in time units (PhysioNet: ``[24.0]``); every series gets
            one sample per origin, and a series with no history before one is an error.
        origin_stride: rolling origins every this many time units in each series, from
            ``t_first + history`` while ``t0 + horizon <= t_last`` (needs ``history`` and
            ``horizon``); an origin without history has no sample. Give ``origins`` or this.
        history: length of the history window; None (fixed origins only): everything before t0.
        horizon: length of the target window; None (fixed origins only): everything from t0 on.
        split: ``"series"`` (whole series to train / val / test: scikit-learn's
            ``train_test_split`` on the sorted ids, see ``forecast_samples.split_series``) or
            ``"time"`` (fractions of each series' time span; a sample belongs to the split holding
            its whole target window; histories may reach into the earlier split). Default:
            ``"time"`` for rolling origins, else ``"series"``.
        split_fractions: train / val / test fractions; default (0.6, 0.2, 0.2) by series,
            (0.7, 0.1, 0.2) by time.
        split_seed: ``random_state`` of the split by series (42 in the PhysioNet protocol).
        scaler: ``"minmax"`` (``(x - min) / (max - min)``, the PhysioNet benchmark's),
            ``"standard"`` or ``"none"``; per variable, from observed values only; a constant
            variable gets scale 1. Or a fitted ``VariableScaler`` (a fitted model's, to read other
            data on the fit's scale): it is used as it is (``scale_from`` is then moot), and the
            data's variables are mapped onto its variables: a variable it does not know is an error,
            one it knows but the data never observes is simply not observed.
        scale_from: fit the scaler on the ``"train"`` split's observations, or on the ``"seen"``
            ones (train + val, never test: the PhysioNet protocol's choice). By series: every
            observation of those series; by time: the observations before the val (test) border.
        variables: keep only these variables (in this order); default all.
        max_series: keep only the first this many series (for quick runs; a registered archive is
            then only read that far).
        subsample: keep this fraction of the data at random (e.g. 0.3), to make a regular series
            irregular: ``subsample_by="time"`` keeps whole timestamps of a series (rows of a wide
            table), ``"observation"`` single values; fixed by ``subsample_seed``.
        id_column, time_column, variable_column, value_column, columns, time_unit, time_format,
            na_values, duplicates, sort, dayfirst, thousands, sep: reading options of
            ``read_observations`` for a path or a DataFrame (``time_unit`` also as a
            ``pd.Timedelta``).
        unknown_descriptors: PhysioNet only: ``"keep"`` (default, the benchmark's reading) or
            ``"drop"`` the descriptors' -1 ("unknown").
        batch_size: samples per batch.
        num_workers: DataLoader worker processes.
        pin_memory: pin batches in page-locked memory (for GPU training).
        drop_last_train: drop the last incomplete train batch.
        seed: seed of the train shuffling: epoch e uses a permutation fixed by (seed, e); None
            draws it from torch's global RNG.

    For a registered dataset, any of ``origins`` / ``history`` / ``horizon`` / ``split`` /
    ``split_fractions`` / ``split_seed`` / ``scaler`` / ``scale_from`` left at None takes the
    registry's protocol (``registry.get_observation_spec(name).protocol``); giving
    ``origin_stride`` replaces the protocol's origins.
    """

    def __init__(
        self,
        data: Union[str, Path, pd.DataFrame, ObservationSet],
        *,
        origins: Optional[Sequence[float]] = None,
        origin_stride: Optional[float] = None,
        history: Optional[float] = None,
        horizon: Optional[float] = None,
        split: Optional[str] = None,
        split_fractions: Optional[Sequence[float]] = None,
        split_seed: Optional[int] = None,
        scaler: Optional[Union[str, VariableScaler]] = None,
        scale_from: Optional[str] = None,
        variables: Optional[list[str]] = None,
        max_series: Optional[int] = None,
        subsample: Optional[float] = None,
        subsample_by: str = "time",
        subsample_seed: int = 0,
        id_column: Optional[str] = None,
        time_column: Optional[str] = None,
        variable_column: Optional[str] = None,
        value_column: Optional[str] = None,
        columns: Optional[list[str]] = None,
        time_unit: Union[str, pd.Timedelta] = "h",
        time_format: Optional[str] = None,
        na_values: Optional[list[Union[str, float]]] = None,
        duplicates: str = "mean",
        sort: bool = False,
        dayfirst: Optional[bool] = None,
        thousands: Optional[str] = None,
        sep: str = ",",
        unknown_descriptors: Optional[str] = None,
        batch_size: int = 32,
        num_workers: int = 0,
        pin_memory: bool = False,
        drop_last_train: bool = False,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        if isinstance(data, os.PathLike):
            data = os.fspath(data)
        in_memory = isinstance(data, (pd.DataFrame, ObservationSet))
        given_scaler = scaler if isinstance(scaler, VariableScaler) else None
        ignored = (["data"] if in_memory else []) + (["scaler"] if given_scaler is not None else [])
        self.save_hyperparameters(ignore=ignored or None)
        time_unit = _time_unit(time_unit)
        self.hparams["time_unit"] = str(time_unit)  # hparams stay plain YAML
        self.batch_size = check_positive_int("batch_size", batch_size)
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise DataError(f"num_workers must be an integer >= 0; got {num_workers!r}")
        if max_series is not None:
            check_positive_int("max_series", max_series)
        _check_optional_choice("split", split, OBSERVATION_SPLITS)
        if given_scaler is None:
            _check_optional_choice("scaler", scaler, SCALER_KINDS)
        _check_optional_choice("scale_from", scale_from, SCALE_FROM)
        _check_optional_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
        _check_optional_choice("unknown_descriptors", unknown_descriptors, UNKNOWN_DESCRIPTOR_POLICIES)
        _check_optional_choice("subsample_by", subsample_by, SUBSAMPLE_UNITS)
        if subsample is not None and (isinstance(subsample, bool) or not 0 < float(subsample) <= 1):
            raise DataError(f"subsample must be a fraction in (0, 1] or None; got {subsample!r}")

        # -- where the observations come from ---------------------------------------------------------------
        self.spec: Optional[registry.ObservationDatasetSpec] = None
        self.series_spec: Optional[registry.DatasetSpec] = None
        self._data: Union[Path, pd.DataFrame, ObservationSet, None] = None
        if in_memory:
            self._data = data  # type: ignore[assignment]
        elif isinstance(data, str):
            if not _looks_like_path(data) and registry.is_observation_dataset(data):
                self.spec = registry.get_observation_spec(data)
            elif not _looks_like_path(data) and registry.is_registered(data):
                self.series_spec = registry.get_spec(data)
            elif not _looks_like_path(data):
                raise DataError(
                    f"{data!r} is neither a registered dataset ({registry.list_datasets('all')}) nor a path; pass "
                    "a registered name, a path such as 'data/observations.csv', a DataFrame or an ObservationSet"
                )
            else:
                self._data = Path(data).expanduser()
        else:
            raise DataError(
                "data must be an ObservationSet, a registered dataset name, a path or a pandas DataFrame; got "
                f"{type(data).__name__}"
            )
        if unknown_descriptors is not None and (self.spec is None or self.spec.format != "physionet2012"):
            raise DataError("unknown_descriptors applies to the registered PhysioNet 2012 data only; leave it None")

        # -- the protocol: explicit arguments, else the registry's, else the defaults -----------------------
        protocol: Mapping[str, Any] = dict(self.spec.protocol) if self.spec is not None else {}
        if origins is not None or origin_stride is not None:
            protocol = {k: v for k, v in protocol.items() if k not in ("origins", "history", "horizon")}

        def pick(name: str, value: Any, default: Any = None) -> Any:
            return value if value is not None else protocol.get(name, default)

        self.origins = pick("origins", origins)
        self.origin_stride = origin_stride
        if (self.origins is None) == (self.origin_stride is None):
            raise DataError(
                "give either origins=[t0, ...] (fixed forecast origins, e.g. [24.0]) or origin_stride=<time between "
                "rolling origins> (with history= and horizon=), not both and not neither"
            )
        if self.origins is not None:
            self.origins = [float(o) for o in ([self.origins] if np.isscalar(self.origins) else self.origins)]
        self.history = pick("history", history)
        self.horizon = pick("horizon", horizon)
        self.split = pick("split", split, "time" if origin_stride is not None else "series")
        self.split_fractions = check_fractions(pick("split_fractions", split_fractions, _DEFAULT_FRACTIONS[self.split]))
        self.split_seed = int(pick("split_seed", split_seed, 42))
        self.scaler_kind = given_scaler.kind if given_scaler is not None else pick("scaler", scaler, "standard")
        self._given_scaler = given_scaler
        self.scale_from = pick("scale_from", scale_from, "train")
        self.variable_names = list(variables) if variables is not None else None
        self.max_series = max_series
        self.subsample = None if subsample is None else float(subsample)
        self.subsample_by = subsample_by
        self.subsample_seed = int(subsample_seed)
        self.read_options = dict(
            id_column=id_column, time_column=time_column, variable_column=variable_column, value_column=value_column,
            columns=columns, time_unit=time_unit, time_format=time_format, na_values=na_values,
            duplicates=duplicates, sort=sort, dayfirst=dayfirst, thousands=thousands, sep=sep,
        )
        self.unknown_descriptors = unknown_descriptors or "keep"
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.drop_last_train = drop_last_train
        self.seed = seed

        self._observations: Optional[ObservationSet] = None
        self._series_splits: Optional[dict[str, np.ndarray]] = None
        self._borders: Optional[np.ndarray] = None
        self._scaler: Optional[VariableScaler] = None
        self._datasets: Optional[dict[str, ForecastSampleDataset]] = None

    # -- reading (no downloads) ----------------------------------------------------------------------------
    def _load(self) -> ObservationSet:
        if self.spec is not None:
            if self.spec.format != "physionet2012":
                raise DataError(f"no reader for the format {self.spec.format!r} of {self.spec.name!r}")
            observations = load_physionet2012(
                dataset=self.spec, unknown_descriptors=self.unknown_descriptors, max_series=self.max_series
            )
        elif self.series_spec is not None:
            observations = read_observations(registry.resolve(self.series_spec), **self.read_options)
        elif isinstance(self._data, ObservationSet):
            observations = self._data
        elif isinstance(self._data, Path) and self._data.suffix == ".npz":
            observations = ObservationSet.load_npz(self._data)
        else:
            assert self._data is not None
            observations = read_observations(self._data, **self.read_options)
        if self.max_series is not None and len(observations) > self.max_series:
            observations = observations.subset(np.arange(self.max_series))
        if self.variable_names is not None:
            observations = observations.select_variables(self.variable_names)
        if self.subsample is not None and self.subsample < 1:
            observations = observations.thin(self.subsample, seed=self.subsample_seed, by=self.subsample_by)
        if observations.n_observations == 0:
            raise DataError(f"{observations.source}: no observations left to forecast; check the data and options")
        if self._given_scaler is not None:
            observations = _onto_variables(observations, self._given_scaler.variables)
        return observations

    @property
    def observations(self) -> ObservationSet:
        """The (unscaled) observation set, read on first use."""
        if self._observations is None:
            self._observations = self._load()
        return self._observations

    # -- Lightning hooks -----------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Download a registered dataset's files into the cache if they are not available locally."""
        if self.spec is not None:
            registry.fetch_files(self.spec)
        elif self.series_spec is not None:
            registry.fetch(self.series_spec)

    def setup(self, stage: Optional[str] = None) -> None:
        """Read, build the samples, split, fit the scaler and build the three datasets (once; no downloads)."""
        if self._datasets is not None:
            return
        observations = self.observations
        if self.origins is not None:
            samples = fixed_origin_samples(observations, self.origins, self.history, self.horizon)
        else:
            samples = rolling_origin_samples(observations, self.history, self.horizon, self.origin_stride)

        if self.split == "series":
            series_splits = split_series(observations.series_ids, self.split_fractions, self.split_seed)
            member = np.full(len(observations), -1, dtype=np.int64)
            for k, name in enumerate(SPLITS):
                member[series_splits[name]] = k
            by_split = {name: samples.take(np.flatnonzero(member[samples.series] == k)) for k, name in enumerate(SPLITS)}
            fit_series = series_splits["train"] if self.scale_from == "train" else np.r_[series_splits["train"], series_splits["val"]]
            in_fit = np.zeros(len(observations), dtype=bool)
            in_fit[fit_series] = True
            fit_rows = in_fit[observations.series_index]  # [M]
            borders = None
        else:
            borders = time_borders(observations, self.split_fractions)
            by_split = assign_time_splits(samples, borders, self.horizon)
            column = 0 if self.scale_from == "train" else 1
            fit_rows = observations.time < borders[observations.series_index, column]  # [M]
            series_splits = None
        if len(by_split["train"]) == 0:
            raise DataError(
                f"no train samples: {len(samples)} sample(s) in all, none of them in the train split (split="
                f"{self.split!r}, fractions {self.split_fractions}); use a shorter history / horizon, more data, or a "
                "larger train fraction"
            )
        scaler = self._given_scaler
        if scaler is None:
            scaler = fit_variable_scaler(
                observations.value[fit_rows], observations.variable[fit_rows], observations.variables,
                self.scaler_kind,
                fitted_on=f"the {'train' if self.scale_from == 'train' else 'train + val'} observations "
                f"(split={self.split!r})",
            )
        scaled = scaler.transform(observations.value, observations.variable).astype(np.float32)  # [M]
        variable = observations.variable.astype(np.int64)
        self._series_splits, self._borders, self._scaler = series_splits, borders, scaler
        self._datasets = {
            name: ForecastSampleDataset(observations.time, variable, scaled, by_split[name]) for name in SPLITS
        }

    def _dataset(self, split: str) -> ForecastSampleDataset:
        if split not in SPLITS:
            raise DataError(f"split must be one of {SPLITS}; got {split!r}")
        self.setup()
        assert self._datasets is not None
        return self._datasets[split]

    # -- what the model layer reads ------------------------------------------------------------------------
    @property
    def train_dataset(self) -> ForecastSampleDataset:
        return self._dataset("train")

    @property
    def val_dataset(self) -> ForecastSampleDataset:
        return self._dataset("val")

    @property
    def test_dataset(self) -> ForecastSampleDataset:
        return self._dataset("test")

    # What ``ForecastModule`` is built from (the CLI links these into the model, as for CSVDataModule).
    @property
    def lookback(self) -> Optional[float]:
        """The history span (``history``; None: everything before the origin)."""
        return self.history

    @property
    def n_channels_in(self) -> int:
        """The number of variables V (the model's ``n_channels``)."""
        return self.n_variables

    @property
    def target_index(self) -> None:
        """None: every variable is forecast."""
        return None

    @property
    def variables(self) -> list[str]:
        """The V variable names; ``x_var`` / ``y_var`` index into them."""
        if self._given_scaler is not None:
            return list(self._given_scaler.variables)
        if self.variable_names is not None:
            return list(self.variable_names)
        if self.spec is not None and self._observations is None:
            return list(self.spec.variables)
        return list(self.observations.variables)

    @property
    def n_variables(self) -> int:
        """V (cheap for a registered dataset before it is read)."""
        return len(self.variables)

    @property
    def scaler(self) -> VariableScaler:
        """The per-variable scaler (``offset``, ``scale``, ``statistics`` per variable): the given
        one, or the one ``setup`` fits."""
        if self._given_scaler is not None:
            return self._given_scaler
        self.setup()
        assert self._scaler is not None
        return self._scaler

    def samples(self, split: str) -> ForecastSamples:
        """The samples of ``split`` (series, origin, row ranges)."""
        return self._dataset(split).samples

    def split_series(self, split: str) -> np.ndarray:
        """int64: the series (indices into ``observations``) of ``split`` under ``split="series"``;
        under ``split="time"`` every series contributes to every split."""
        self._dataset(split)
        if self._series_splits is None:
            return np.arange(len(self.observations), dtype=np.int64)
        return self._series_splits[split]

    @property
    def time_borders(self) -> Optional[np.ndarray]:
        """float64 [S, 2], per series the times where val and test begin (``split="time"``), else None."""
        self.setup()
        return self._borders

    def sample_counts(self) -> pd.DataFrame:
        """Per split: samples, series, history and target observations."""
        rows = {}
        for split in SPLITS:
            s = self.samples(split)
            rows[split] = {
                "samples": len(s),
                "series": int(np.unique(s.series).size),
                "history_observations": int(s.n_history.sum()),
                "target_observations": int(s.n_targets.sum()),
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    @property
    def forecast_span(self) -> float:
        """The longest time after an origin that the train samples forecast: ``horizon`` when it
        is given, else the latest target of any train sample (PhysioNet's protocol: 24.0, the
        observations at 48:00 from the origin at 24:00); 0.0 when no train sample has a target."""
        if self.horizon is not None:
            return float(self.horizon)
        s = self.samples("train")
        has = s.n_targets > 0
        if not has.any():
            return 0.0
        return float(np.max(self.observations.time[s.target_stop[has] - 1] - s.origin[has]))

    def latest_histories(self, history: Optional[float]) -> ForecastSampleDataset:
        """One sample per series that has observations, at the forecast origin t0 = its last
        observation time: the history is every observation with ``t0 - history <= time <= t0``
        (the last one included, at relative time 0; ``history=None``: all of them), and there are
        no targets. Values are scaled with ``scaler`` (the given one, or the one ``setup`` fits).

        ``dataset.samples.series`` [n] names each sample's series; ``dataset.batch(indices)`` gives
        the history part of a batch (``x_*``; ``y_*`` are empty, one padded column).
        """
        observations = self.observations
        present = np.flatnonzero(observations.series_lengths > 0)                  # [n]
        stop = observations.offsets[1:][present]                                    # [n]
        origin = observations.time[stop - 1]                                        # [n] last observation times
        if history is None:
            start = observations.offsets[:-1][present]
        else:
            bound = np.full(len(observations), -np.inf)
            bound[present] = origin - float(history)
            before = observations.time < bound[observations.series_index]            # [M]
            counts = np.bincount(observations.series_index[before], minlength=len(observations))
            start = (observations.offsets[:-1] + counts)[present]
        samples = ForecastSamples(present.astype(np.int64), origin, start, stop, stop)
        scaled = self.scaler.transform(observations.value, observations.variable).astype(np.float32)
        return ForecastSampleDataset(observations.time, observations.variable.astype(np.int64), scaled, samples)

    def histories_before(self, origins: np.ndarray, history: Optional[float]) -> ForecastSampleDataset:
        """One sample per series with an observation before its origin ``origins[s]`` ([S], in the set's
        time units), as the training samples are cut: the history is every observation with
        ``t0 - history <= time < t0`` (``history=None``: all before t0); later observations are not read,
        and there are no targets. Values are scaled with ``scaler``; ``dataset.samples`` as in
        ``latest_histories``.
        """
        observations = self.observations
        S = len(observations)
        origins = np.broadcast_to(np.asarray(origins, dtype=np.float64), (S,))
        index, time = observations.series_index, observations.time                  # [M]
        first = observations.offsets[:-1]
        stop = first + np.bincount(index[time < origins[index]], minlength=S)        # rows before t0
        if history is None:
            start = first.copy()
        else:
            start = first + np.bincount(index[time < origins[index] - float(history)], minlength=S)
        present = np.flatnonzero(stop > start)
        samples = ForecastSamples(present.astype(np.int64), origins[present].copy(), start[present], stop[present],
                                  stop[present])
        scaled = self.scaler.transform(observations.value, observations.variable).astype(np.float32)
        return ForecastSampleDataset(observations.time, observations.variable.astype(np.int64), scaled, samples)

    # -- how the data was read and sampled (what a fitted model keeps to read other data alike) ------------
    @property
    def source(self) -> Optional[str]:
        """Where the data comes from, usable from any working directory: the registered name, the
        file's absolute path, or None for a DataFrame or an ObservationSet."""
        if self.spec is not None:
            return self.spec.name
        if self.series_spec is not None:
            return self.series_spec.name
        if isinstance(self._data, Path):
            return str(self._data.resolve())
        return None

    def reading_options(self) -> dict[str, Any]:
        """The resolved keyword arguments that shape ``observations`` (reading, variables, series,
        thinning): ``ObservationDataModule(other, **dm.reading_options(), ...)`` reads other data
        the way this data was read. ``time_unit`` is a ``pd.Timedelta``."""
        return {
            **self.read_options, "variables": self.variable_names, "max_series": self.max_series,
            "subsample": self.subsample, "subsample_by": self.subsample_by, "subsample_seed": self.subsample_seed,
            "unknown_descriptors": self.unknown_descriptors if self.spec is not None and self.spec.format == "physionet2012" else None,
        }

    def sampling_options(self) -> dict[str, Any]:
        """The resolved keyword arguments that build the samples, the split and the scaler's kind."""
        return {
            "origins": None if self.origins is None else list(self.origins), "origin_stride": self.origin_stride,
            "history": self.history, "horizon": self.horizon, "split": self.split,
            "split_fractions": list(self.split_fractions), "split_seed": self.split_seed,
            "scaler": self.scaler_kind, "scale_from": self.scale_from,
        }

    def table_columns(self) -> dict[str, Any]:
        """The layout of the input table and its column names: ``{"layout": "long" | "wide", "id",
        "time", "variable", "value"}`` (None where the input had no such column: no id column for
        one series; no variable / value column in the wide layout). The time column is the one the
        reader used (given or detected; a DataFrame's ``DatetimeIndex``: its name, or ``"time"``).
        An ObservationSet, an ``.npz`` or a registered observation dataset reads as the long layout
        ``id, time, variable, value``."""
        plain = {"layout": "long", "id": "id", "time": "time", "variable": "variable", "value": "value"}
        opts = self.read_options
        if self.spec is not None or isinstance(self._data, ObservationSet) or (
            isinstance(self._data, Path) and self._data.suffix == ".npz"
        ):
            return plain
        if self.series_spec is not None or isinstance(self._data, Path):
            path = registry.resolve(self.series_spec) if self.series_spec is not None else self._data
            frame = pd.read_csv(path, sep=opts["sep"], nrows=0)  # the header (a CSV's times are text)
        else:
            frame = self._data
        time = _detect_time_column(frame, opts["time_column"])
        if time is None:
            time = frame.index.name if frame.index.name is not None else "time"
        long = opts["variable_column"] is not None
        return {"layout": "long" if long else "wide", "id": opts["id_column"], "time": str(time),
                "variable": opts["variable_column"], "value": opts["value_column"]}

    def transform(self, values: Union[np.ndarray, torch.Tensor], variables: Union[np.ndarray, torch.Tensor]):
        """Original units -> scaled, per variable (``variables`` holds each value's variable index)."""
        return self.scaler.transform(values, variables)

    def inverse_transform(self, values: Union[np.ndarray, torch.Tensor], variables: Union[np.ndarray, torch.Tensor]):
        """Scaled -> original units: ``values * scale[variables] + offset[variables]`` (same shapes;
        numpy or torch, the dtype and device of ``values``)."""
        return self.scaler.inverse_transform(values, variables)

    # -- loaders -------------------------------------------------------------------------------------------
    def _loader(self, dataset: ForecastSampleDataset, train: bool) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=EpochShuffleSampler(dataset, self.seed) if train else None,
            drop_last=train and self.drop_last_train,
            collate_fn=collate_forecast_samples,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled train samples: a permutation per epoch fixed by (``seed``, epoch)."""
        return self._loader(self.train_dataset, train=True)

    def val_dataloader(self) -> DataLoader:
        """Every val sample, in order."""
        return self._loader(self.val_dataset, train=False)

    def test_dataloader(self) -> DataLoader:
        """Every test sample, in order."""
        return self._loader(self.test_dataset, train=False)

    def predict_dataloader(self) -> DataLoader:
        """Every test sample, in order."""
        return self._loader(self.test_dataset, train=False)


def _onto_variables(observations: ObservationSet, variables: Sequence[str]) -> ObservationSet:
    """``observations`` with their variable indices into ``variables`` (a fitted scaler's): a
    variable of the data that ``variables`` lacks is an error; one the data never observes is
    simply absent. Same observations, same order (the kept variables keep their relative order)."""
    names = tuple(str(v) for v in variables)
    if observations.variables == names:
        return observations
    unknown = [v for v in observations.variables if v not in names]
    if unknown:
        raise DataError(
            f"the data has variables {unknown} that the model was not fit on (it knows {list(names)}); drop "
            "them from the data (or read only the known ones with columns=[...]), or fit a model on this data"
        )
    present = [v for v in names if v in observations.variables]
    kept = observations.select_variables(present)  # sorted by (series, time, position in `present`)
    position = np.asarray([names.index(v) for v in present], dtype=np.int64)  # increasing: order is kept
    return ObservationSet(
        series_ids=kept.series_ids, offsets=kept.offsets, time=kept.time, variable=position[kept.variable],
        value=kept.value, variables=names, time_unit=kept.time_unit, origins=kept.origins, source=kept.source,
        read_counts=observations.read_counts,
    )

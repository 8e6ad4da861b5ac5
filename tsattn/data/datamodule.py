"""``CSVDataModule``: a CSV file, a DataFrame or a registered benchmark -> train / val / test windows.

The pipeline (``setup``): read and validate (``read_series``) -> pick channels (``select_channels``)
-> protocol borders (``split_borders``) -> ``StandardScaler`` fit on the train segment only (or the
one given) -> knot times in the train segment's median step (or the time unit given) -> lazy
``WindowDataset`` views over one contiguous float32 tensor. ``setup`` never downloads;
``prepare_data`` fetches a registered dataset that is not available locally.

Nothing a window holds depends on a later row or another split: missing values are only carried
forward, and the scaler, the time unit and the inferred frequency come from the train segment.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader

from . import registry
from .calendar import calendar_features as _calendar_features
from .channels import FEATURE_MODES, ChannelSelection, select_channels
from .csv import (
    DUPLICATE_POLICIES,
    INTERPOLATE_REFUSAL,
    KNOT_TIME_MODES,
    MISSING_POLICIES,
    NaValues,
    SeriesTable,
    check_freq,
    check_time_unit,
    infer_freq,
    median_step,
    normalize_na_values,
    read_series,
    with_time_unit,
)
from .errors import DataError, UnknownDatasetError
from .scaling import fit_scaler, inverse_transform_channels
from .splits import SPLITS, SplitBorders, check_positive_int, check_protocol, split_borders
from .windows import EpochShuffleSampler, WindowDataset, window_times

__all__ = ["CSVDataModule"]

_READ_DEFAULTS = {"missing": "error", "duplicates": "error", "knot_times": "timestamps"}


def _looks_like_path(text: str) -> bool:
    return text.lower().endswith((".csv", ".csv.gz", ".txt")) or "/" in text or os.sep in text or Path(text).exists()


def _data_type_error(data: Any) -> DataError:
    hint = ""
    if isinstance(data, np.ndarray) or hasattr(data, "__array__"):
        hint = (
            "; an array has no timestamps: wrap it in a DataFrame with a time index, e.g. "
            "pd.DataFrame(values, columns=names, index=pd.date_range('2024-01-01', periods=len(values), freq='h'))"
        )
    return DataError(
        "data must be a path to a CSV file, a registered dataset name or a pandas DataFrame; got "
        f"{type(data).__name__}{hint}"
    )


class CSVDataModule(pl.LightningDataModule):
    """Forecasting windows from a CSV file, a DataFrame or a registered benchmark dataset.

    Every item is a dict: ``"x"`` [L, C_in], ``"y"`` [H, C_out] (scaled, float32), ``"t_x"`` [L] and
    ``"t_y"`` [H] knot times (float32, ``t_x[0] == 0``), ``"index"`` (int64, the window's first row in
    its split segment), and with ``calendar_features=True`` ``"x_mark"`` [L, F], ``"y_mark"`` [H, F].

    Args:
        data: a path to a CSV file, a registered dataset name (``"ETTh1"``, ``"weather"``, ...; see
            ``tsattn.data.registry.list_datasets()``) or a pandas DataFrame.
        lookback: L, rows of history per window (>= 1).
        horizon: H, rows to forecast per window (>= 1).
        features: ``"M"`` (all channels in, all out), ``"S"`` (target in, target out) or ``"MS"``
            (all in, target out). With a channel-independent model (PatchTST, the patch decoder)
            ``"MS"`` forecasts the target from its own history only: see ``tsattn.data.channels``.
        target: the target column (or a list of them); None uses the registry's default or ``"OT"``
            where there is such a column. Under ``"M"`` it only moves the target to the last channel.
        split: ``"ett-hour"``, ``"ett-minute"`` or ``"ratio"`` (7:1:2); None uses the registry's
            protocol for a registered name, else ``"ratio"``.
        columns: the value columns to use (default: every numeric column; text columns are dropped
            with a warning).
        time_column: the column holding timestamps; None detects ``date``, ``ds``, ``timestamp``,
            ``date_time``, ``datetime`` or ``time``.
        time_format: a ``strftime`` format for the timestamps; None infers it.
        dayfirst: read ``07/01/2016`` as 7 January (True) or 1 July (False); None decides from the
            data and raises when no row tells.
        na_values: cell values that mean "missing": one (``-9999``) or a list (``[-9999, "n/a"]``).
        thousands: the thousands separator of numbers written as text (``","`` for ``"5,827.0"``).
        sep: the CSV file's field delimiter (``";"`` for semicolon-separated files).
        missing: ``"error"`` or ``"ffill"`` (carry the last value forward; a value is never filled
            from a later row); None uses the registry's reading for a registered name, else ``"error"``.
        duplicates: repeated timestamps: ``"error"``, ``"keep"``, ``"first"``, ``"last"`` or
            ``"mean"``; None uses the registry's reading (``"keep"``, as published), else ``"error"``.
        sort: sort rows by time instead of rejecting out-of-order timestamps.
        knot_times: ``"timestamps"`` (time since a window's first row in ``time_unit``; irregular
            series get gaps) or ``"index"`` (rows one step apart); None uses the registry's reading
            (``"index"``), else ``"timestamps"``.
        time_unit: the unit of timestamp knot times (``"1h"``, ``"10min"`` or a ``pd.Timedelta``);
            None: the median step of the train segment. A fitted model's unit is passed here when it
            reads other data, so that its times mean the same thing.
        freq: a pandas offset alias for the series; None infers it from the train segment.
        calendar_features: add ``"x_mark"`` / ``"y_mark"`` calendar features (in [-0.5, 0.5]).
        calendar_freq: the frequency that picks the calendar features; None uses ``freq``
            (Time-Series-Library's scripts use ``"h"`` for every dataset).
        scale: standardise every channel with a ``StandardScaler`` fit on the train segment.
        scaler: a fitted ``StandardScaler`` over the input channels to use instead of fitting one
            (a fitted model's scaler, to read other data on the fit's scale); needs ``scale=True``.
        batch_size: windows per batch.
        num_workers: DataLoader worker processes.
        pin_memory: pin batches in page-locked memory (for GPU training).
        drop_last_train: drop the last incomplete train batch (val / test / predict keep every window).
        seed: seed of the train shuffling: epoch e uses a permutation fixed by (seed, e), so resumed
            runs repeat uninterrupted ones; None draws the seed from torch's global RNG.
    """

    def __init__(
        self,
        data: Union[str, Path, pd.DataFrame],
        lookback: int,
        horizon: int,
        *,
        features: str = "M",
        target: Optional[Union[str, list[str]]] = None,
        split: Optional[str] = None,
        columns: Optional[list[str]] = None,
        time_column: Optional[str] = None,
        time_format: Optional[str] = None,
        dayfirst: Optional[bool] = None,
        na_values: NaValues = None,
        thousands: Optional[str] = None,
        sep: str = ",",
        missing: Optional[str] = None,
        duplicates: Optional[str] = None,
        sort: bool = False,
        knot_times: Optional[str] = None,
        time_unit: Optional[Union[str, pd.Timedelta]] = None,
        freq: Optional[str] = None,
        calendar_features: bool = False,
        calendar_freq: Optional[str] = None,
        scale: bool = True,
        scaler: Optional[StandardScaler] = None,
        batch_size: int = 32,
        num_workers: int = 0,
        pin_memory: bool = False,
        drop_last_train: bool = False,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        if isinstance(data, os.PathLike):
            data = os.fspath(data)  # a plain string in hparams.yaml
        self.save_hyperparameters(ignore=["data", "scaler"] if isinstance(data, pd.DataFrame) else ["scaler"])
        self.lookback = check_positive_int("lookback", lookback)
        self.horizon = check_positive_int("horizon", horizon)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise DataError(f"num_workers must be an integer >= 0; got {num_workers!r}")
        if features not in FEATURE_MODES:
            select_channels([], features)  # raises the standard message
        if split is not None:
            check_protocol(split)
        if missing == "interpolate":
            raise DataError(INTERPOLATE_REFUSAL)
        for name, value, choices in (
            ("missing", missing, MISSING_POLICIES),
            ("duplicates", duplicates, DUPLICATE_POLICIES),
            ("knot_times", knot_times, KNOT_TIME_MODES),
        ):
            if value is not None and value not in choices:
                raise DataError(f"`{name}` must be one of {', '.join(map(repr, choices))} (or None); got {value!r}")
        if freq is not None:
            check_freq(freq)
        if time_unit is not None:
            time_unit = check_time_unit(time_unit)
            self.hparams["time_unit"] = str(time_unit)  # hparams stay plain YAML
        if scaler is not None:
            if not scale:
                raise DataError("scaler= was given with scale=False; pass scale=True to use the scaler")
            if not hasattr(scaler, "mean_") or not hasattr(scaler, "scale_"):
                raise DataError(f"scaler must be a fitted StandardScaler; got {scaler!r}: call .fit(train_values) first")
        self.spec: Optional[registry.DatasetSpec] = None
        if isinstance(data, pd.DataFrame):
            self._data: Union[Path, pd.DataFrame, None] = data
        elif isinstance(data, (str, os.PathLike)):
            text = os.fspath(data)
            if isinstance(data, str) and not _looks_like_path(text) and registry.is_registered(text):
                self.spec = registry.get_spec(text)
                self._data = None  # resolved lazily by the registry; downloads only in prepare_data()
            elif isinstance(data, str) and not _looks_like_path(text):
                raise UnknownDatasetError(
                    f"{text!r} is neither a registered dataset ({registry.list_datasets()}) nor a path to a "
                    "CSV file; pass a registered name or a path such as 'data/series.csv'"
                )
            else:
                self._data = Path(text).expanduser()
        else:
            raise _data_type_error(data)

        spec_read = dict(self.spec.read_options) if self.spec else {}
        chosen = {"missing": missing, "duplicates": duplicates, "knot_times": knot_times}
        self.read_options = {
            k: (v if v is not None else spec_read.get(k, _READ_DEFAULTS[k])) for k, v in chosen.items()
        }
        self.features = features
        self.target = target if target is not None else (self.spec.target if self.spec else None)
        self.split = split if split is not None else (self.spec.split if self.spec else "ratio")
        self.columns = list(columns) if columns is not None else None
        self.time_column = time_column
        self.time_format = time_format
        self.dayfirst = dayfirst
        self.na_values = normalize_na_values(na_values)
        self.thousands = thousands
        self.sep = sep
        self.sort = sort
        self._time_unit: Optional[pd.Timedelta] = time_unit
        self._freq = freq
        self.calendar_features = calendar_features
        self.calendar_freq = calendar_freq
        self.scale = scale
        self._given_scaler = scaler
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.drop_last_train = drop_last_train
        self.seed = seed

        self._table: Optional[SeriesTable] = None
        self._selection: Optional[ChannelSelection] = None
        self._borders: Optional[SplitBorders] = None
        self._scaler: Optional[StandardScaler] = None
        self._inferred_freq: Optional[str] = None
        self._values: Optional[torch.Tensor] = None  # float32 [N, C_in], scaled
        self._ticks: Optional[torch.Tensor] = None  # int64 [N]: ns since the first row, or the row index
        self._tick_unit: float = 1.0  # ticks per knot-time unit
        self._marks: Optional[torch.Tensor] = None  # float32 [N, F]
        self._datasets: Optional[dict[str, WindowDataset]] = None

    # -- reading (no downloads) ----------------------------------------------------------------------------
    def _source(self) -> Union[Path, pd.DataFrame]:
        if self.spec is not None:
            return registry.resolve(self.spec, download_missing=False)
        return self._data

    def _read(self) -> SeriesTable:
        if self._table is None:
            table = read_series(
                self._source(),
                time_column=self.time_column,
                time_format=self.time_format,
                dayfirst=self.dayfirst,
                columns=self.columns,
                na_values=self.na_values,
                thousands=self.thousands,
                sep=self.sep,
                sort=self.sort,
                time_unit=self._time_unit,
                freq=self._freq,
                **self.read_options,
            )
            self._selection = select_channels(table.columns, self.features, self.target, dropped=table.dropped_columns)
            self._table = table
        return self._table

    def _channels(self) -> ChannelSelection:
        self._read()
        assert self._selection is not None
        return self._selection

    def _spec_only(self) -> bool:
        """True when the counts must come from the registry: a registered file not available yet."""
        return (
            self._table is None
            and self.spec is not None
            and registry.find_local(self.spec) is None
        )

    def _n_columns(self) -> int:
        assert self.spec is not None
        return len(self.columns) if self.columns is not None else self.spec.n_channels

    def _n_targets(self) -> int:
        return 1 if self.target is None or isinstance(self.target, str) else len(self.target)

    def _train_rows(self) -> slice:
        """The train segment's rows (what the scaler, the time unit and the frequency are learnt from)."""
        return split_borders(len(self._read()), self.lookback, self.split).segment("train")

    def _prepare(self) -> None:
        """Read, then learn (or take) the time unit, frequency and scaler, and scale every row (once).

        Needs the split borders only for what it learns from the train segment: with ``scaler``,
        ``time_unit`` (or index knot times) and ``freq`` given, any series of >= 1 row works.
        """
        if self._values is not None:
            return
        table = self._read()
        if table.time_unit is not None and self._time_unit is None:
            train_ns = table.timestamps[self._train_rows()].as_unit("ns").asi8
            table = with_time_unit(table, median_step(train_ns) or table.step)
        selection = self._channels()
        raw = table.values[:, [table.columns.index(c) for c in selection.input_names]]  # float64 [N, C_in]
        scaler = self._given_scaler
        if scaler is None and self.scale:
            scaler = fit_scaler(raw[self._train_rows()])
        if scaler is not None:
            if len(scaler.mean_) != raw.shape[1]:
                raise DataError(
                    f"the scaler has {len(scaler.mean_)} channels but the data has {raw.shape[1]} input "
                    f"channels {list(selection.input_names)}; pass data with the channels the scaler was fit on"
                )
            raw = scaler.transform(raw)
        values = torch.from_numpy(np.ascontiguousarray(raw, dtype=np.float32))  # [N, C_in]
        if table.time_unit is None:  # index knot times: rows one step apart
            ticks, tick_unit = torch.arange(len(table), dtype=torch.int64), 1.0
        else:
            ts_ns = table.timestamps.as_unit("ns").asi8
            ticks, tick_unit = torch.from_numpy(ts_ns - ts_ns[0]), float(table.time_unit.value)
        marks = None
        if self.calendar_features:
            marks = torch.from_numpy(_calendar_features(table.timestamps, self.calendar_freq or self.freq))
        self._table, self._scaler, self._ticks, self._tick_unit, self._marks = table, scaler, ticks, tick_unit, marks
        self._values = values

    # -- Lightning hooks -----------------------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Download a registered dataset into the cache if it is not available locally."""
        if self.spec is not None:
            registry.fetch(self.spec)

    def setup(self, stage: Optional[str] = None) -> None:
        """Read, validate, split, scale and build the three window datasets (once; no downloads)."""
        if self._datasets is not None:
            return
        self._prepare()
        table, selection = self._read(), self._channels()
        borders = split_borders(len(table), self.lookback, self.split)
        borders.check_windows(self.horizon)
        values, ticks, marks = self._values, self._ticks, self._marks
        assert values is not None and ticks is not None
        datasets = {}
        for split in SPLITS:
            seg = borders.segment(split)
            datasets[split] = WindowDataset(
                values[seg], ticks[seg], self.lookback, self.horizon, selection.target_index,
                None if marks is None else marks[seg], time_unit=self._tick_unit,
            )
        self._borders = borders
        self._datasets = datasets

    def _dataset(self, split: str) -> WindowDataset:
        self.setup()
        assert self._datasets is not None
        return self._datasets[split]

    # -- what the model layer reads ------------------------------------------------------------------------
    @property
    def train_dataset(self) -> WindowDataset:
        return self._dataset("train")

    @property
    def val_dataset(self) -> WindowDataset:
        return self._dataset("val")

    @property
    def test_dataset(self) -> WindowDataset:
        return self._dataset("test")

    @property
    def scaler(self) -> Optional[StandardScaler]:
        """The ``StandardScaler`` over the input channels: the one given, else fit on the train
        segment (None if ``scale=False``)."""
        self._prepare()
        return self._scaler

    @property
    def borders(self) -> SplitBorders:
        """The protocol's segment borders (TSLib's border1s / border2s)."""
        self.setup()
        assert self._borders is not None
        return self._borders

    @property
    def table(self) -> SeriesTable:
        """The validated series (unscaled), with knot times in ``time_unit``."""
        self._prepare()
        assert self._table is not None
        return self._table

    @property
    def value_columns(self) -> list[str]:
        """Every numeric value column of the data (read on first use), in file order."""
        return list(self._read().columns)

    @property
    def time_unit(self) -> Optional[pd.Timedelta]:
        """The unit of timestamp knot times: the one given, else the train segment's median step;
        None with ``knot_times="index"`` (rows one step apart)."""
        return self.table.time_unit

    @property
    def source(self) -> Optional[str]:
        """Where the data comes from, usable from any working directory: the registered name, the
        CSV file's absolute path, or None for a DataFrame."""
        if self.spec is not None:
            return self.spec.name
        if isinstance(self._data, Path):
            return str(self._data.resolve())
        return None

    def reading_options(self) -> dict[str, Any]:
        """The resolved keyword arguments that read other data the way this data was read
        (``CSVDataModule(other, lookback, horizon, **dm.reading_options())``)."""
        return {
            "features": self.features, "target": self.target, "split": self.split, "columns": self.columns,
            "time_column": self.time_column, "time_format": self.time_format, "dayfirst": self.dayfirst,
            "na_values": self.na_values, "thousands": self.thousands, "sep": self.sep, "sort": self.sort,
            **self.read_options, "calendar_features": self.calendar_features,
            "calendar_freq": self.calendar_freq, "scale": self.scale,
        }

    @property
    def n_channels_in(self) -> int:
        """C_in. Cheap before ``setup()``: reads the CSV once (kept for setup), or for a registered
        dataset not downloaded yet, takes the count from the registry."""
        if self._spec_only():
            assert self.spec is not None
            return self._n_targets() if self.features == "S" else self._n_columns()
        return len(self._channels().input_names)

    @property
    def n_channels_out(self) -> int:
        """C_out: C_in for ``"M"``, the number of targets for ``"S"`` / ``"MS"``."""
        if self._spec_only():
            assert self.spec is not None
            return self._n_columns() if self.features == "M" else self._n_targets()
        return len(self._channels().target_names)

    @property
    def channel_names(self) -> list[str]:
        """The input channel names, in the order of ``x``'s last axis."""
        return list(self._channels().input_names)

    @property
    def target_names(self) -> list[str]:
        """The output channel names, in the order of ``y``'s last axis."""
        return list(self._channels().target_names)

    @property
    def target_index(self) -> list[int]:
        """Positions of the outputs among the inputs (all for ``"M"``, the last for ``"MS"``, ``[0]`` for ``"S"``)."""
        return list(self._channels().target_index)

    @property
    def freq(self) -> str:
        """The series' pandas offset alias: the one given, else inferred from the train segment (the
        registry's before the file is read)."""
        if self._freq is not None:
            return self._freq
        if self._spec_only():
            assert self.spec is not None
            return self.spec.freq
        if self._inferred_freq is None:
            table = self._read()
            self._inferred_freq = infer_freq(table.timestamps[self._train_rows()]) or table.freq
        return self._inferred_freq

    def inverse_transform_target(self, y: torch.Tensor) -> torch.Tensor:
        """``y`` [..., C_out] in scaled units -> original units (a new tensor; ``y`` itself if unscaled)."""
        scaler = self.scaler
        return y if scaler is None else inverse_transform_channels(y, scaler, self.target_index)

    def inverse_transform_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [..., C_in] in scaled units -> original units."""
        scaler = self.scaler
        return x if scaler is None else inverse_transform_channels(x, scaler, range(self.n_channels_in))

    def timestamps_for(self, split: str, index: int, *, lookback: bool = False) -> pd.DatetimeIndex:
        """The H timestamps of window ``index``'s targets in ``split`` (its L input timestamps with
        ``lookback=True``), e.g. to plot a forecast against the actuals."""
        if split not in SPLITS:
            raise DataError(f"split must be one of {SPLITS}; got {split!r}")
        dataset = self._dataset(split)
        n = len(dataset)
        if not -n <= int(index) < n:
            raise IndexError(f"window index {index} out of range for the {n} windows of the {split} split")
        i = int(index) % n
        start = self.borders.segment(split).start + i
        ts = self.table.timestamps
        if lookback:
            return ts[start : start + self.lookback]
        return ts[start + self.lookback : start + self.lookback + self.horizon]

    def future_timestamps(self, horizon: Optional[int] = None) -> pd.DatetimeIndex:
        """The next ``horizon`` (default H) timestamps after the last row, at ``freq``."""
        h = check_positive_int("horizon", self.horizon if horizon is None else horizon)
        offset = pd.tseries.frequencies.to_offset(self.freq)
        last = self.table.timestamps[-1]
        return pd.date_range(start=last + offset, periods=h, freq=offset)

    def last_window(self, horizon: Optional[int] = None) -> dict[str, torch.Tensor]:
        """The final L rows of the whole (scaled) series, to forecast beyond the data.

        The same scaler, time unit and window arithmetic as the windows of ``setup()``: a model that
        reads this window reads what it was trained on. With ``scaler`` (and ``time_unit`` or index
        knot times, and ``freq``) given, any series of at least L rows works; no split is needed.

        Returns a dict with ``"x"`` [L, C_in], ``"t_x"`` [L] (``t_x[0] == 0``), ``"t_y"`` [H] (the
        knot times of ``future_timestamps(H)`` on the same origin) and, with calendar features on,
        ``"x_mark"`` [L, F] and ``"y_mark"`` [H, F].
        """
        h = check_positive_int("horizon", self.horizon if horizon is None else horizon)
        L = self.lookback
        n_rows = len(self._read())
        if L > n_rows:
            raise DataError(f"the data has {n_rows} rows but lookback={L}; pass at least {L} rows")
        self._prepare()
        assert self._values is not None and self._ticks is not None
        table = self.table
        future = self.future_timestamps(h)
        t_x = window_times(self._ticks[-L:], self._tick_unit)
        if table.time_unit is None:  # rows one step apart: the future rows continue the count
            t_y = torch.arange(L, L + h, dtype=torch.float32)
        else:
            origin = table.timestamps[-L:].as_unit("ns").asi8[0]
            future_ns = torch.from_numpy(future.as_unit("ns").asi8 - origin)
            t_y = (future_ns.to(torch.float64) / self._tick_unit).to(torch.float32)
        out = {"x": self._values[-L:].clone(), "t_x": t_x, "t_y": t_y}
        if self._marks is not None:
            out["x_mark"] = self._marks[-L:].clone()
            out["y_mark"] = torch.from_numpy(_calendar_features(future, self.calendar_freq or self.freq))
        return out

    # -- loaders -------------------------------------------------------------------------------------------
    def _loader(self, dataset: WindowDataset, train: bool) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=EpochShuffleSampler(dataset, self.seed) if train else None,
            drop_last=train and self.drop_last_train,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled train windows: a permutation per epoch fixed by (``seed``, epoch)."""
        return self._loader(self.train_dataset, train=True)

    def val_dataloader(self) -> DataLoader:
        """Every val window, in order."""
        return self._loader(self.val_dataset, train=False)

    def test_dataloader(self) -> DataLoader:
        """Every test window, in order."""
        return self._loader(self.test_dataset, train=False)

    def predict_dataloader(self) -> DataLoader:
        """Every test window, in order (forecast beyond the data with ``last_window()``)."""
        return self._loader(self.test_dataset, train=False)

"""``CSVDataModule``: a CSV file, a DataFrame or a registered series -> train / val / test windows.

The pipeline (``setup``): read and validate (``read_series``) -> pick channels (``select_channels``)
-> protocol borders (``split_borders``) -> a standard ``Scaler`` fit on the train segment only (or
the one given) -> knot times in the train segment's median step (or the time unit given) -> lazy
``WindowDataset`` views over one contiguous float32 tensor. ``setup`` never downloads;
``prepare_data`` fetches a registered dataset that is not available locally.

Nothing a window holds depends on a later row or another split: missing values are only carried
forward, and the scaler, the time unit and the inferred frequency come from the train segment.
``record()`` keeps what the fit learnt (channels, scaler, time unit, frequency), so
``CSVDataModule.from_record(record, other_data)`` reads other data on the fit's scale and time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler

from .. import registry
from ..base import ForecastDataModule
from ..errors import DataError
from ..io.series import SeriesTable, check_series_options, infer_freq, median_step, read_series, with_time_unit
from ..scaling import Scaler, fit_grid_scaler
from ..validation import SPLITS, check_positive_int, check_time_unit
from .calendar import calendar_features as _calendar_features
from .calendar import seasonal_naive_mae, seasonal_period
from .channels import FEATURE_MODES, ChannelSelection, select_channels
from .dataset import WindowDataset, window_times
from .splits import SplitBorders, check_protocol, split_borders

__all__ = ["CSVDataModule"]

_READ_DEFAULTS = {"missing": "error", "duplicates": "error", "knot_times": "timestamps"}


def _scaler_for(given: Optional[Union[Scaler, StandardScaler]], scale: bool, raw: np.ndarray, names: list[str],
                train_rows: Callable[[], slice]) -> Optional[Scaler]:
    """The given scaler (checked against the channels ``names``), else one fit on the train rows of
    ``raw`` (None with ``scale=False``); only a fit needs the split (``train_rows()``)."""
    if given is None:
        return fit_grid_scaler(raw[train_rows()], names) if scale else None
    offset = given.offset if isinstance(given, Scaler) else np.asarray(given.mean_)
    if len(offset) != len(names):
        raise DataError(
            f"the scaler has {len(offset)} channels but the data has {len(names)} input channels {names}; pass "
            "data with the channels the scaler was fit on"
        )
    return given if isinstance(given, Scaler) else Scaler.from_sklearn(given, names)


class CSVDataModule(ForecastDataModule):
    """Forecasting windows from a CSV file, a DataFrame or a registered benchmark series.

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
            ``"MS"`` forecasts the target from its own history only: see ``tsattn.data.windows.channels``.
        target: the target column (or a list of them); None uses the registry's default or ``"OT"``
            where there is such a column. Under ``"M"`` it only moves the target to the last channel.
        split: ``"ett-hour"``, ``"ett-minute"`` or ``"ratio"`` (7:1:2); None uses the registry's
            protocol for a registered name, else ``"ratio"``.
        missing: ``"error"`` or ``"ffill"`` (carry the last value forward; a value is never filled
            from a later row); None uses the registry's reading for a registered name, else ``"error"``.
        duplicates: repeated timestamps: ``"error"``, ``"keep"``, ``"first"``, ``"last"`` or
            ``"mean"``; None uses the registry's reading (``"keep"``, as published), else ``"error"``.
        knot_times: ``"timestamps"`` (time since a window's first row in ``time_unit``; irregular
            series get gaps) or ``"index"`` (rows one step apart); None uses the registry's reading
            (``"index"``), else ``"timestamps"``.
        time_unit: the unit of timestamp knot times (``"1h"``, ``"10min"`` or a ``pd.Timedelta``);
            None: the median step of the train segment.
        freq: a pandas offset alias for the series; None infers it from the train segment.
        calendar_features, calendar_freq: add ``"x_mark"`` / ``"y_mark"`` calendar features (in [-0.5,
            0.5]), picked by ``calendar_freq`` (None: ``freq``).
        scale: standardise every channel with a scaler fit on the train segment.
        scaler: a fitted ``Scaler`` (or scikit-learn ``StandardScaler``) over the input channels to use
            instead of fitting one; needs ``scale=True``.
        **kwargs: the table options and loader settings of ``ForecastDataModule`` (``columns``,
            ``time_column``, ``time_format``, ``dayfirst``, ``na_values``, ``thousands``, ``decimal``, ``sep``,
            ``sort``, ``batch_size``, ``num_workers``, ``pin_memory``, ``drop_last_train``, ``seed``).
    """

    task = "window"
    accepts = "a path to a CSV file, a registered dataset name or a pandas DataFrame"
    dataset_kinds = ("series",)

    def __init__(
        self,
        data: Union[str, Path, pd.DataFrame],
        lookback: int,
        horizon: int,
        *,
        features: str = "M",
        target: Optional[Union[str, list[str]]] = None,
        split: Optional[str] = None,
        missing: Optional[str] = None,
        duplicates: Optional[str] = None,
        knot_times: Optional[str] = None,
        time_unit: Optional[Union[str, pd.Timedelta]] = None,
        freq: Optional[str] = None,
        calendar_features: bool = False,
        calendar_freq: Optional[str] = None,
        scale: bool = True,
        scaler: Optional[Union[Scaler, StandardScaler]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, **kwargs)
        self.lookback = check_positive_int("lookback", lookback)
        self.horizon = check_positive_int("horizon", horizon)
        if features not in FEATURE_MODES:
            select_channels([], features)  # raises the standard message
        if split is not None:
            check_protocol(split)
        spec_read = dict(self.spec.read_options) if self.spec else {}
        chosen = {"missing": missing, "duplicates": duplicates, "knot_times": knot_times}
        self.read_options = {k: (v if v is not None else spec_read.get(k, _READ_DEFAULTS[k])) for k, v in chosen.items()}
        check_series_options(**self.read_options, freq=freq)
        if time_unit is not None:
            time_unit = check_time_unit(time_unit)
            self.hparams["time_unit"] = str(time_unit)  # hparams stay plain YAML
        if scaler is not None:
            if not scale:
                raise DataError("scaler= was given with scale=False; pass scale=True to use the scaler")
            if not isinstance(scaler, Scaler) and not (hasattr(scaler, "mean_") and hasattr(scaler, "scale_")):
                raise DataError(f"scaler must be a fitted Scaler or StandardScaler; got {scaler!r}: fit it first")
        self.features = features
        self.target = target if target is not None else (self.spec.target if self.spec else None)
        self.split = split if split is not None else (self.spec.split if self.spec else "ratio")
        self._time_unit: Optional[pd.Timedelta] = time_unit
        self._freq = freq
        self.calendar_features = calendar_features
        self.calendar_freq = calendar_freq
        self.scale = scale
        self._given_scaler = scaler
        self._fitted_time_column: Optional[str] = None

        self._table: Optional[SeriesTable] = None
        self._selection: Optional[ChannelSelection] = None
        self._borders: Optional[SplitBorders] = None
        self._scaler: Optional[Scaler] = None
        self._inferred_freq: Optional[str] = None
        self._values: Optional[torch.Tensor] = None  # float32 [N, C_in], scaled
        self._ticks: Optional[torch.Tensor] = None  # int64 [N]: ns since the first row, or the row index
        self._tick_unit: float = 1.0  # ticks per knot-time unit
        self._marks: Optional[torch.Tensor] = None  # float32 [N, F]
        self._datasets: Optional[dict[str, WindowDataset]] = None

    # -- reading (no downloads) ----------------------------------------------------------------------------
    def _read(self) -> SeriesTable:
        if self._table is None:
            source = self._local_files()[0] if self.spec is not None else self._data
            self._table = read_series(source, **self.table_options, time_unit=self._time_unit, freq=self._freq,
                                      **self.read_options)
        return self._table

    def _channels(self) -> ChannelSelection:
        if self._selection is None:
            table = self._read()
            self._selection = select_channels(table.columns, self.features, self.target, dropped=table.dropped_columns)
        return self._selection

    def _spec_only(self) -> bool:  # the counts come from the registry: a registered file not local yet
        return self._table is None and self.spec is not None and registry.find_local(self.spec)[0] is None

    def _n_columns(self) -> int:
        assert self.spec is not None and self.spec.n_channels is not None
        columns = self.table_options["columns"]
        return len(columns) if columns is not None else self.spec.n_channels

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
        scaler = _scaler_for(self._given_scaler, self.scale, raw, list(selection.input_names), self._train_rows)
        if scaler is not None:
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
    def setup(self, stage: Optional[str] = None) -> None:
        """Read, validate, split, scale and build the three window datasets (once; no downloads)."""
        if self._datasets is not None:
            return
        self._prepare()
        table, selection = self._read(), self._channels()
        try:
            borders = split_borders(len(table), self.lookback, self.split)
        except DataError as exc:
            if not self._fitted_given:
                raise
            raise DataError(  # a fitted model's data module evaluates: say what evaluation lacks
                f"the data has {len(table)} rows, too few for the model's lookback ({self.lookback}) under the fit's "
                f"split protocol {self.split!r} ({exc}): evaluating needs longer data"
            ) from None
        if not self._fitted_given:  # a fit needs windows in every split; a fitted model evaluates what is there
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

    # -- what the model layer reads ------------------------------------------------------------------------
    @property
    def scaler(self) -> Optional[Scaler]:
        """The input channels' ``Scaler``: the one given, else fit on the train segment (None: unscaled)."""
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
        """The validated series (unscaled), knot times in ``time_unit``."""
        self._prepare()
        assert self._table is not None
        return self._table

    @property
    def value_columns(self) -> list[str]:
        """Every numeric value column of the data (read on first use), in file order."""
        return list(self._read().columns)

    @property
    def time_unit(self) -> Optional[pd.Timedelta]:
        """The knot-time unit: the one given, else the train median step; None for index knot times."""
        return self.table.time_unit

    @property
    def time_column_name(self) -> str:
        """The time column's name as the fit read it (a forecast's index name)."""
        return self._fitted_time_column or self.table.time_column or "date"

    @property
    def n_channels_in(self) -> int:
        """C_in (cheap before ``setup()``; from the registry for a registered file not downloaded yet)."""
        if self._spec_only():
            return self._n_targets() if self.features == "S" else self._n_columns()
        return len(self._channels().input_names)

    @property
    def n_channels_out(self) -> int:
        """C_out: C_in for ``"M"``, the number of targets for ``"S"`` / ``"MS"``."""
        if self._spec_only():
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
        """The pandas offset alias: the one given, else inferred from the train segment (or the registry's)."""
        if self._freq is not None:
            return self._freq
        if self._spec_only():
            assert self.spec is not None and self.spec.freq is not None
            return self.spec.freq
        if self._inferred_freq is None:
            table = self._read()
            self._inferred_freq = infer_freq(table.timestamps[self._train_rows()]) or table.freq
        return self._inferred_freq

    @property
    def season(self) -> int:  # the seasonal period (rows) of MASE's naive forecast
        return seasonal_period(self.freq)

    def naive_scale(self) -> np.ndarray:
        """float64 [C_out]: per output channel, the mean absolute error of the seasonal naive forecast
        ``y[t - season]`` over the train segment, in units (MASE's denominator)."""
        rows = self.table.values[self._train_rows()][:, [self.table.columns.index(c) for c in self.target_names]]
        return seasonal_naive_mae(rows, self.season)

    def inverse_transform_target(self, y: torch.Tensor) -> torch.Tensor:
        """``y`` [..., C_out] in scaled units -> original units (``y`` itself if unscaled)."""
        scaler = self.scaler
        if scaler is None:
            return y
        index = self.target_index
        return y * torch.as_tensor(scaler.scale[index], dtype=y.dtype) + torch.as_tensor(scaler.offset[index], dtype=y.dtype)

    def inverse_transform_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [..., C_in] in scaled units -> original units."""
        scaler = self.scaler
        return x if scaler is None else scaler.inverse_transform(x)

    def timestamps_for(self, split: str, index: int, *, lookback: bool = False) -> pd.DatetimeIndex:
        """The H timestamps of window ``index``'s targets in ``split`` (its L input timestamps with
        ``lookback=True``), e.g. to plot a forecast against the actuals."""
        dataset = self.split_dataset(split)
        n = len(dataset)
        if not -n <= int(index) < n:
            raise IndexError(f"window index {index} out of range for the {n} windows of the {split} split")
        start = self.borders.segment(split).start + int(index) % n
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

    def windows_ending_at(self, ends: np.ndarray) -> dict[str, torch.Tensor]:
        """The windows whose L input rows end just before rows ``ends`` [K] (``x`` [K, L, C_in] scaled,
        ``t_x`` [K, L]), built as ``setup``'s windows are; rows at or after an end are not read."""
        self._prepare()
        assert self._values is not None and self._ticks is not None
        rows = torch.as_tensor(np.asarray(ends, dtype=np.int64))[:, None] - self.lookback + torch.arange(self.lookback)
        return {"x": self._values[rows], "t_x": window_times(self._ticks[rows], self._tick_unit)}

    def last_window(self, horizon: Optional[int] = None) -> dict[str, torch.Tensor]:
        """The final L rows of the whole (scaled) series, to forecast beyond the data.

        The same scaler, time unit and window arithmetic as the windows of ``setup()``. With ``scaler``
        (and ``time_unit`` or index knot times, and ``freq``) given, any series of at least L rows
        works; no split is needed. Returns ``"x"`` [L, C_in], ``"t_x"`` [L], ``"t_y"`` [H] (the knot
        times of ``future_timestamps(H)`` on the same origin) and, with calendar features on,
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

    # -- the fitted pipeline (ForecastDataModule.record / from_record) -------------------------------------
    def _options(self) -> dict[str, Any]:
        return {
            "lookback": self.lookback, "horizon": self.horizon, "features": self.features, "target": self.target,
            "split": self.split, **self.table_options, **self.read_options, "calendar_features": self.calendar_features,
            "calendar_freq": self.calendar_freq, "scale": self.scale,
        }

    def _fitted(self) -> dict[str, Any]:
        unit, scaler = self.time_unit, self.scaler
        return {
            "channels": self.channel_names, "targets": self.target_names, "target_index": self.target_index,
            "scaler": None if scaler is None else scaler.record(), "time_unit_ns": None if unit is None else int(unit.value),
            "freq": self.freq, "time_column": self.table.time_column,
        }

    def _restore(self, fitted: dict[str, Any]) -> None:
        if fitted.get("scaler") is not None:
            self._given_scaler = Scaler.from_record(fitted["scaler"])
        if fitted.get("time_unit_ns"):
            self._time_unit = pd.Timedelta(int(fitted["time_unit_ns"]), unit="ns")
        self._freq = fitted.get("freq")
        self._fitted_time_column = fitted.get("time_column")

    def _checked_against(self, record: dict[str, Any]) -> "CSVDataModule":
        """The data must hold the fit's channels (under ``"M"`` no others); read in the fit's order."""
        fitted = list(record["fitted"]["channels"])
        have = self.value_columns
        absent = [c for c in fitted if c not in have]
        if absent:
            raise DataError(
                f"the data lacks the channels {absent} that the model was fit on "
                f"(fit on {fitted}; this data has {have}); pass data with the same columns"
            )
        extra = [c for c in have if c not in fitted]
        if extra and self.features == "M":
            raise DataError(
                f"the data has columns {extra} that the model was not fit on (fit on {fitted}); "
                "drop them or refit on this data"
            )
        if self.channel_names == fitted:
            return self
        # other column order, or unused columns: read the fit's, in its order
        options = {**self._options(), "columns": fitted, "batch_size": self.batch_size}
        dm = CSVDataModule(self.spec.name if self.spec is not None else self._data, **options)
        dm.load_state_dict(record)
        return dm

"""``Forecaster``: fit a forecasting transformer on a CSV file, a DataFrame or a registered dataset.

    from tsattn import Forecaster
    f = Forecaster(model="patchtst", attention="continuous", sink="learned", lookback=336, horizon=96)
    f.fit("my.csv", target="OT", max_epochs=20)
    f.predict()                 # DataFrame: the next `horizon` timestamps x target channels
    f.evaluate(split="test")    # {"mse": ..., "mae": ..., "mse_orig": ..., "mae_orig": ...}
    f.save("model.ckpt"); Forecaster.load("model.ckpt")

    # irregular series (each variable at its own times; nothing imputed): spans in time units
    g = Forecaster(model="irregular", attention="continuous", sink="learned", lookback=48.0, horizon=12.0)
    g.fit(table, id_column="patient", time_column="time", variable_column="name", value_column="value")
    g.predict(at=["2024-03-02 08:00", "2024-03-02 14:00"])   # every series and variable at those times

The model picks the road: window models (``"patchtst"``, ``"decoder"``) read a regular grid
through ``CSVDataModule`` and forecast the next ``horizon`` rows; observation models
(``"irregular"``) read observation sets through ``ObservationDataModule`` and forecast any
requested (series, time, variable) after each series' last observation. Training, progress bars,
checkpoints, early stopping and loggers are Lightning's, shared by both roads; this class only wires
a data module, ``ForecastModule`` and a ``Trainer`` together.

One scale and one time unit from fit to forecast: whatever data ``predict`` or ``evaluate`` read
(the fit's, other data, or the source again after ``load``), they read it through a data module
given the fit's scaler, time unit and reading options (and, for windows, the frequency), and
forecast with ``ForecastModule.forecast`` / ``forecast_observations``. So a model forecasts the
same before and after ``save`` / ``load``, bit for bit in one process at one thread count.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import lightning
import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from pandas.api import types as ptypes

from .data import CSVDataModule, DataError, ObservationDataModule, ObservationSet, VariableScaler, registry
from .data.csv import NaValues, _parse_timestamps
from .data.observation_datamodule import ForecastSampleDataset, collate_forecast_samples
from .data.observations import shown_id
from .data.scaling import scaler_from_stats
from .data.splits import SPLITS, check_positive_int
from .lightning import ForecastModule
from .models.registry import get_model_class, input_kind

DataLike = Union[str, os.PathLike, pd.DataFrame]
ObservationsLike = Union[str, os.PathLike, pd.DataFrame, ObservationSet]
TimesLike = Union[Sequence[Any], np.ndarray, pd.Index, pd.Series, pd.DataFrame]

# CSVDataModule arguments that describe how data is read (taken from the fit for other data)
_READING = {
    name for name in inspect.signature(CSVDataModule).parameters
    if name not in ("data", "lookback", "horizon", "scaler", "time_unit", "freq", "seed", "num_workers",
                    "pin_memory", "drop_last_train")
}


# fit options that only one road reads, with their defaults
_WINDOW_OPTIONS = {"target": None, "features": "M", "missing": None, "knot_times": None}
_OBSERVATION_OPTIONS = {"id_column": None, "variable_column": None, "value_column": None, "time_unit": None,
                        "origins": None, "origin_stride": None, "split_fractions": None, "max_series": None}
_SHOW = 3  # how many offending items an error message lists


def _check_span(name: str, value: Any) -> Optional[float]:
    """A time span of the irregular road: None, or a finite number > 0 (in the data's time units)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise DataError(
            f"{name} must be a finite number > 0 in the data's time units (or None); got {value!r}: "
            f"pass e.g. {name}=24.0"
        )
    return float(value)


def _reject_options(given: dict[str, Any], defaults: dict[str, Any], model: str, which: str) -> None:
    """Raise if an option of the other road was given (differs from its default)."""
    wrong = [name for name, value in given.items()
             if not (value is None if defaults[name] is None else isinstance(value, str) and value == defaults[name])]
    if wrong:
        raise ValueError(f"{wrong} apply to {which} only, not to the model {model!r}; leave them out")


def _accelerator_name(trainer: pl.Trainer) -> str:
    """The accelerator a trainer ran on, as a ``Trainer(accelerator=...)`` string (``"cpu"``, ``"cuda"``, ...)."""
    name = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
    return {"xla": "tpu"}.get(name, name) or "auto"


@dataclass(frozen=True)
class _Requests:
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


def _parse_times(values: pd.Series, observations: ObservationSet, info: dict[str, Any], label: str) -> pd.Index:
    """Requested times [Q] as the data's time representation: numbers, or a ``DatetimeIndex``
    parsed as the fit parsed its timestamps (``time_format``, ``dayfirst``)."""
    values = values.reset_index(drop=True)
    if observations.time_unit is None:
        numeric = ptypes.is_numeric_dtype(values) and not ptypes.is_bool_dtype(values)
        if not numeric or not np.isfinite(values.to_numpy(dtype=np.float64)).all():
            raise DataError(
                f"{label} must hold finite numbers: the data's times are numbers (as given, e.g. hours since "
                f"admission); got e.g. {values.iloc[0]!r}"
            )
        return pd.Index(values.to_numpy(dtype=np.float64))
    options = info["read_options"]
    stamps = _parse_timestamps(values, label, options.get("time_format"), lambda r: f"position {r}",
                               options.get("dayfirst"))
    if (stamps.tz is None) != (observations.origins.tz is None):
        have = "without" if stamps.tz is None else "with"
        want = "with" if stamps.tz is None else "without"
        raise DataError(
            f"{label} holds timestamps {have} a time zone, but the data's are {want} one; give them the same kind"
        )
    return stamps


def _in_time_units(observations: ObservationSet, series: np.ndarray, shown: pd.Index) -> np.ndarray:
    """Times ``shown`` [Q] of ``series`` [Q] -> float64 [Q] in the set's time units (for timestamps:
    since the series' first timestamp, computed exactly as ``read_observations`` computes them)."""
    if observations.time_unit is None:
        return shown.to_numpy(dtype=np.float64)
    ns = pd.DatetimeIndex(shown).as_unit("ns").asi8
    first = observations.origins.as_unit("ns").asi8[series]
    return (ns - first).astype(np.float64) / float(observations.time_unit.value)


def _as_shown(observations: ObservationSet, series: np.ndarray, time: np.ndarray) -> pd.Index:
    """Times [Q] in the set's units of ``series`` [Q] -> as the data gives them: timestamps
    (the series' first timestamp + time, to the nanosecond) or numbers."""
    if observations.time_unit is None:
        return pd.Index(np.asarray(time, dtype=np.float64))
    ns = observations.origins.as_unit("ns").asi8[series] + np.round(time * observations.time_unit.value).astype(np.int64)
    stamps = pd.DatetimeIndex(ns.astype("datetime64[ns]"))
    tz = observations.origins.tz
    return stamps if tz is None else stamps.tz_localize("UTC").tz_convert(tz)


def _series_codes(ids: pd.Series, observations: ObservationSet, label: str) -> np.ndarray:
    """Series ids [Q] -> int64 [Q] indices into the set; an unknown id is an error naming it."""
    known = {i: s for s, i in enumerate(observations.series_ids.tolist())}
    values = ids.tolist()
    codes = np.asarray([known.get(i, -1) for i in values], dtype=np.int64)
    if (codes < 0).any():
        unknown = list(dict.fromkeys(values[i] for i in np.flatnonzero(codes < 0)))
        raise DataError(
            f"{label} names series the data does not hold: {unknown[:_SHOW]}{' ...' if len(unknown) > _SHOW else ''}; "
            f"its series are e.g. {[shown_id(i) for i in observations.series_ids[:_SHOW]]}: request those, or pass "
            "the data that holds the series as data="
        )
    return codes


def _variable_codes(names: Sequence[Any], variables: list[str], label: str) -> np.ndarray:
    """Variable names [Q] -> int64 [Q] indices into the fit's variables; an unknown name is an error."""
    index = {v: k for k, v in enumerate(variables)}
    codes = np.asarray([index.get(str(n), -1) for n in names], dtype=np.int64)
    if (codes < 0).any():
        unknown = list(dict.fromkeys(str(names[i]) for i in np.flatnonzero(codes < 0)))
        raise DataError(
            f"{label} names variables the model was not fit on: {unknown[:_SHOW]}; its variables are {variables}"
        )
    return codes


def _requests(at: Optional[TimesLike], observations: ObservationSet, info: dict[str, Any], last: np.ndarray,
              horizon: float, *, given_origin: bool = False) -> _Requests:
    """The forecast requests of ``predict(at=...)`` (see its docstring); ``last`` [S] holds each
    series' forecast origin (its last observation time, or the given origin; NaN: no history)."""
    variables = list(info["variables"])
    V = len(variables)
    if at is None:
        absent = np.flatnonzero(np.isnan(last))
        if absent.size:
            _raise_no_history(observations, absent, default_requests=True, given_origin=given_origin)
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
        return _Requests(s_, t_, var, _as_shown(observations, s_, t_))
    if isinstance(at, pd.DataFrame):
        return _frame_requests(at, observations, info)
    values = pd.Series([at] if np.ndim(at) == 0 else list(at))
    if values.empty:
        raise DataError("at= holds no times; pass the times to forecast at, or at=None for the default")
    shown = _parse_times(values, observations, info, "at")                           # [T]
    S, T = len(observations), len(shown)
    series = np.repeat(np.arange(S), T * V)                                          # series, then time, then variable
    which = np.tile(np.repeat(np.arange(T), V), S)
    shown = shown[which]
    return _Requests(series, _in_time_units(observations, series, shown), np.tile(np.arange(V), S * T), shown)


def _frame_requests(at: pd.DataFrame, observations: ObservationSet, info: dict[str, Any]) -> _Requests:
    """Requests from a DataFrame in the long layout (id, time, variable) or the wide one (id, time
    and variable columns)."""
    columns, variables = info["columns"], list(info["variables"])
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
    rows = np.zeros(len(at), dtype=np.int64) if id_column is None else _series_codes(at[id_column], observations, "at=")
    shown = _parse_times(at[time_column], observations, info, f"at[{time_column!r}]")  # [R]
    if variable_column in at.columns:                                                  # long: one request per row
        var = _variable_codes(at[variable_column].tolist(), variables, "at=")
        return _Requests(rows, _in_time_units(observations, rows, shown), var, shown)
    listed = [c for c in at.columns if c not in (id_column, time_column)]              # wide: columns = variables
    chosen = _variable_codes(listed, variables, "at=") if listed else np.arange(len(variables))
    n = len(chosen)
    series = np.repeat(rows, n)
    shown = shown[np.repeat(np.arange(len(at)), n)]
    return _Requests(series, _in_time_units(observations, series, shown), np.tile(chosen, len(at)), shown,
                     columns=[variables[k] for k in chosen])


def _raise_no_history(observations: ObservationSet, series: np.ndarray, *, default_requests: bool = False,
                      given_origin: bool = False) -> None:
    """Raise the error of requests for ``series`` [n], which have no observation (before the given
    origin); ``default_requests``: asked by ``at=None``, which requests every series."""
    ids = [shown_id(observations.series_ids[s]) for s in series[:_SHOW]]
    fix = ("at=None forecasts every series of the data: pass data without them, or an at= DataFrame "
           "(id, time, ...) that names only the series to forecast" if default_requests
           else "leave them out of at=")
    where = "in the history window before origin=" if given_origin else "in the data"
    more = ", a later origin," if given_origin else ""
    raise DataError(
        f"{len(series)} series have no observation {where}, so no history to forecast from, e.g. {ids}; "
        f"{fix}{more} or pass data that holds their observations"
    )


def _check_requests(requests: _Requests, observations: ObservationSet, variables: list[str], last: np.ndarray,
                    horizon: float, *, given_origin: bool = False) -> None:
    """Raise on a request without history, at or before its series' last observation (before the
    given origin), beyond ``horizon`` after it, or repeated."""
    series, time = requests.series, requests.time
    absent = np.isnan(last[series])
    if absent.any():
        _raise_no_history(observations, np.unique(series[absent]), given_origin=given_origin)
    end = last[series]                                                               # [Q]
    anchor = "origin" if given_origin else "last observation"

    def example(i: int) -> str:
        s = int(series[i])
        last_shown = _as_shown(observations, np.array([s]), np.array([last[s]]))[0]
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


def _forecast_frame(requests: _Requests, values: np.ndarray, observations: ObservationSet,
                    info: dict[str, Any]) -> pd.DataFrame:
    """Forecasts [Q] in the layout of the table the model was fit on (see ``Forecaster.predict``)."""
    columns, variables = info["columns"], list(info["variables"])
    ids = observations.series_ids[requests.series]
    if columns["layout"] == "long":
        frame = {} if columns["id"] is None else {columns["id"]: ids}
        frame[columns["time"]] = requests.shown
        frame[columns["variable"]] = np.asarray(variables, dtype=object)[requests.variable]
        frame[columns["value"]] = values
        return pd.DataFrame(frame)
    key = pd.DataFrame({"s": requests.series, "t": requests.time})
    row = key.groupby(["s", "t"], sort=False).ngroup().to_numpy()                    # [Q] first-appearance order
    _, first = np.unique(row, return_index=True)                                     # [rows] first request of a row
    shown_columns = requests.columns or variables
    column_of = np.full(len(variables), -1, dtype=np.int64)
    column_of[[variables.index(v) for v in shown_columns]] = np.arange(len(shown_columns))
    cells = np.full((len(first), len(shown_columns)), np.nan)
    cells[row, column_of[requests.variable]] = values
    frame = pd.DataFrame(cells, columns=shown_columns)
    frame.insert(0, columns["time"], requests.shown[first])
    if columns["id"] is not None:
        frame.insert(0, columns["id"], ids[first])
    return frame


class Forecaster:
    """A forecasting model with the fit / predict / evaluate / save / load life cycle.

    Args:
        model: registered model name: ``"patchtst"`` or ``"decoder"`` (window models: a regular
            grid of rows), or ``"irregular"`` (an observation model: irregular series, each
            variable at its own times, nothing imputed).
        attention: ``"softmax"`` or ``"continuous"``.
        sink: ``"zeros"``, ``"first"`` or ``"learned"``.
        rope: rotary position embedding on knot times.
        lookback: window models: L, rows of history the model reads (a positive int; NumPy
            integers are accepted; None: 336). Observation models: the history span before a
            forecast origin, in the data's time units (a number > 0; None, the default: all the
            history).
        horizon: window models: H, rows it forecasts (a positive int; None: 96). Observation
            models: the target span after a forecast origin, in the data's time units (a number
            > 0). None, the default, takes it from the data: a registered dataset's protocol
            (``"physionet2012"``: everything after the origin), or the longest target span of the
            training samples at fixed ``origins``; the default rolling origins need a number.
            After an observation model's fit, ``lookback`` and ``horizon`` hold the spans it was
            fit with (as after ``load``); a later ``fit`` samples with the values given here.
        model_kwargs: further model hyperparameters (e.g. ``{"d_model": 16, "n_layers": 3}``).
        loss: ``"mse"``, ``"mae"`` or ``"huber"``.
        lr: Adam learning rate.
        lr_schedule: ``"type3"``, ``"onecycle"`` or ``"constant"`` (see ``ForecastModule``).
        batch_size: windows (observation models: samples, and series in ``predict``) per batch
            (a positive int).
        seed: seeds weights, shuffling and dropout (an int >= 0); a fit is repeatable on CPU.
        compile: ``torch.compile`` the model for training and evaluation (off by default: on CPU
            the eager models, with the fused CPU kernel for continuous attention, train faster than
            compiled ones, with no warm-up); ``predict`` always runs the eager model.
            Observation models always run eagerly (ragged shapes; a warning says so).

    Raises:
        ValueError (``tsattn.data.DataError`` for the sizes): a setting of the wrong type or range.
    """

    def __init__(
        self,
        model: str = "patchtst",
        *,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        lookback: Optional[Union[int, float]] = None,
        horizon: Optional[Union[int, float]] = None,
        model_kwargs: Optional[dict[str, Any]] = None,
        loss: str = "mse",
        lr: float = 1e-4,
        lr_schedule: str = "type3",
        batch_size: int = 128,
        seed: int = 2021,
        compile: bool = False,
    ) -> None:
        self.input_kind = input_kind(get_model_class(model))  # "window" or "observations"
        lookback, horizon = self._checked_span("lookback", lookback), self._checked_span("horizon", horizon)
        batch_size = check_positive_int("batch_size", batch_size)
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0; got {seed!r}: pass e.g. seed=2021")
        seed = int(seed)
        if model_kwargs is not None and not isinstance(model_kwargs, dict):
            raise ValueError(f"model_kwargs must be a dict of model hyperparameters; got {model_kwargs!r}")
        self.config = dict(model=model, attention=attention, sink=sink, rope=rope, model_kwargs=model_kwargs,
                           loss=loss, lr=lr, lr_schedule=lr_schedule, compile=compile, seed=seed)
        self._lookback, self._horizon, self.batch_size, self.seed = lookback, horizon, batch_size, seed
        self._given_spans = (lookback, horizon)  # what a fit samples with (fit fills lookback / horizon in)
        # validate the model's settings now rather than after the data is read
        ForecastModule(n_channels=1, lookback=lookback, horizon=horizon, **self.config)
        self.module: Optional[ForecastModule] = None
        self.datamodule: Optional[Union[CSVDataModule, ObservationDataModule]] = None
        self.trainer: Optional[pl.Trainer] = None
        self.best_model_path: Optional[str] = None
        self.accelerator: str = "auto"  # the accelerator the fit ran on: evaluate() runs there too

    def _checked_span(self, name: str, value: Any) -> Optional[Union[int, float]]:
        """``lookback`` / ``horizon`` validated as the constructor takes it (window models: its default
        for None)."""
        if self.input_kind == "observations":
            return _check_span(name, value)
        return check_positive_int(name, {"lookback": 336, "horizon": 96}[name] if value is None else value)

    def _set_span(self, name: str, value: Any) -> None:
        if getattr(self, "module", None) is not None:
            raise ValueError(
                f"{name} is the span the model was fit with ({getattr(self, '_' + name)!r}) and forecasts read; "
                f"to fit with another, make a new Forecaster(..., {name}={value!r}) and fit it"
            )
        value = self._checked_span(name, value)
        setattr(self, "_" + name, value)
        lookback, horizon = self._given_spans
        self._given_spans = (value, horizon) if name == "lookback" else (lookback, value)

    @property
    def lookback(self) -> Optional[Union[int, float]]:
        """Window models: L rows; observation models: the history span (None: all). Settable before
        a fit (validated as in the constructor); after a fit, the span the model was fit with."""
        return self._lookback

    @lookback.setter
    def lookback(self, value: Any) -> None:
        self._set_span("lookback", value)

    @property
    def horizon(self) -> Optional[Union[int, float]]:
        """Window models: H rows; observation models: the target span. Settable before a fit; after a
        fit, the span the model was fit with."""
        return self._horizon

    @horizon.setter
    def horizon(self, value: Any) -> None:
        self._set_span("horizon", value)

    @property
    def reads_observations(self) -> bool:
        """Whether the model reads irregular observation sets (``"irregular"``), not grid windows."""
        return self.input_kind == "observations"

    # -- fit -------------------------------------------------------------------------------------
    def fit(
        self,
        data: ObservationsLike,
        *,
        target: Optional[Union[str, list[str]]] = None,
        features: str = "M",
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
        split: Optional[str] = None,
        id_column: Optional[str] = None,
        variable_column: Optional[str] = None,
        value_column: Optional[str] = None,
        time_unit: Optional[Union[str, pd.Timedelta]] = None,
        origins: Optional[Sequence[float]] = None,
        origin_stride: Optional[float] = None,
        split_fractions: Optional[Sequence[float]] = None,
        max_series: Optional[int] = None,
        max_epochs: int = 10,
        patience: Optional[int] = None,
        accelerator: str = "auto",
        devices: Union[int, str] = "auto",
        strategy: str = "auto",
        callbacks: Optional[list[pl.Callback]] = None,
        logger: Union[bool, Any] = True,
        default_root_dir: Optional[Union[str, os.PathLike]] = None,
        enable_checkpointing: bool = True,
        enable_progress_bar: bool = True,
        **trainer_kwargs: Any,
    ) -> "Forecaster":
        """Train on ``data`` under the split protocol; keeps the weights of the best validation epoch.

        Where runs go: with ``default_root_dir`` (a folder), Lightning's logs and checkpoints are
        written there and kept (``best_model_path`` names the best checkpoint). Without it (the
        default), the fit works in a temporary folder that is removed when ``fit`` returns: nothing
        is written to the working directory, and the best weights are kept in memory (``save()``
        writes them). ``enable_checkpointing=False`` writes no checkpoint and keeps the last
        epoch's weights instead of the best.

        Args:
            data: a CSV path, a DataFrame, or a registered dataset name (``"ETTh1"``, ...; for an
                observation model also ``"physionet2012"``, with its protocol, or an
                ``ObservationSet``).
            target, features, columns, time_column, time_format, dayfirst, na_values, thousands, sep,
                missing, duplicates, sort, knot_times, split: window models: the data layer's
                reading options (see ``tsattn.data.CSVDataModule``). ``features="MS"`` with PatchTST
                or the patch decoder (channel-independent models) forecasts the target from its own
                history only, and warns: the other columns cannot inform it; ``features="S"``
                gives the same for less.
            id_column, time_column, variable_column, value_column, columns, time_unit, time_format,
                dayfirst, na_values, thousands, sep, duplicates, sort: observation models: how the
                table is read (see ``tsattn.data.read_observations``): a **long** table (one
                observation per row: ``id, time, variable, value``; give ``variable_column`` and
                ``value_column``) or a **wide** one (``id, time`` and one column per variable, NaN =
                not observed). Datetimes become ``time_unit``s (default ``"h"``) since each series'
                first timestamp; numbers are times as given. ``duplicates`` defaults to ``"mean"``.
                No value is ever imputed.
            origins, origin_stride, split, split_fractions: observation models: the training
                samples (see ``tsattn.data.ObservationDataModule``). ``origins=[t0, ...]``: fixed
                forecast origins in every series; ``origin_stride``: rolling origins. Neither (the
                default): a registered dataset's protocol, else rolling origins every ``horizon``
                time units: the target windows tile each series without overlap (no observation is
                a target twice; the histories overlap), one sample per horizon of data; that needs
                ``lookback`` and ``horizon``. ``split``: ``"time"`` (default for rolling origins:
                0.7 / 0.1 / 0.2 of each series' span) or ``"series"`` (default for fixed origins).
            max_series: observation models: read only the first this many series (quick runs; the
                split is then made among those). It limits only the fit's own source (re-read the same
                way after ``load``): other data given to ``predict`` / ``evaluate`` is read whole.
            max_epochs: training epochs.
            patience: stop after this many epochs without a better validation MSE; None: no early stop.
            accelerator, devices, strategy, callbacks, logger, default_root_dir, enable_checkpointing,
                enable_progress_bar, trainer_kwargs: passed to ``lightning.pytorch.Trainer``.
        Returns:
            self.
        Raises:
            ValueError: an option of the other road (e.g. ``target`` for an observation model).
            DataError: the data cannot be read or sampled (naming the problem and the fix).
        """
        window_only = dict(target=target, features=features, missing=missing, knot_times=knot_times)
        observation_only = dict(id_column=id_column, variable_column=variable_column, value_column=value_column,
                                time_unit=time_unit, origins=origins, origin_stride=origin_stride,
                                split_fractions=split_fractions, max_series=max_series)
        model = self.config["model"]
        if self.reads_observations:
            _reject_options(window_only, _WINDOW_OPTIONS, model, "window models (patchtst, decoder)")
            dm = self._observation_datamodule(
                data, **observation_only, split=split, columns=columns, time_column=time_column,
                time_format=time_format, dayfirst=dayfirst, na_values=na_values, thousands=thousands, sep=sep,
                duplicates=duplicates, sort=sort,
            )
            pl.seed_everything(self.seed, workers=True, verbose=False)
            module = ForecastModule(n_channels=dm.n_variables, lookback=dm.history, horizon=dm.forecast_span,
                                    **self.config)
            # the spans the model is fit with (a protocol's, when left at None), as a loaded model reports them
            self._lookback, self._horizon = dm.history, dm.forecast_span
        else:
            _reject_options(observation_only, _OBSERVATION_OPTIONS, model, "observation models (irregular)")
            dm = CSVDataModule(
                data, self.lookback, self.horizon,
                features=features, target=target, split=split, columns=columns, time_column=time_column,
                time_format=time_format, dayfirst=dayfirst, na_values=na_values, thousands=thousands, sep=sep,
                missing=missing, duplicates=duplicates, sort=sort, knot_times=knot_times,
                batch_size=self.batch_size, seed=self.seed,
            )
            dm.prepare_data()
            dm.setup("fit")  # read + validate before building anything, so bad data fails fast
            pl.seed_everything(self.seed, workers=True, verbose=False)
            module = ForecastModule(n_channels=dm.n_channels_in, lookback=self.lookback, horizon=self.horizon,
                                    target_index=dm.target_index, **self.config)
        self._train(
            module, dm, max_epochs=max_epochs, patience=patience, accelerator=accelerator, devices=devices,
            strategy=strategy, callbacks=callbacks, logger=logger, default_root_dir=default_root_dir,
            enable_checkpointing=enable_checkpointing, enable_progress_bar=enable_progress_bar, **trainer_kwargs,
        )
        return self

    def _observation_datamodule(self, data: ObservationsLike, *, origins: Optional[Sequence[float]],
                                origin_stride: Optional[float], time_unit: Optional[Union[str, pd.Timedelta]],
                                duplicates: Optional[str], **options: Any) -> ObservationDataModule:
        """The fit's ``ObservationDataModule`` over ``data``, read, sampled and scaled (``setup``)."""
        lookback, horizon = self._given_spans
        protocol = {}
        if isinstance(data, str) and registry.is_observation_dataset(data):
            protocol = registry.get_observation_spec(data).protocol
        rolling = origin_stride is not None or (origins is None and protocol.get("origins") is None)
        if rolling and (lookback is None or horizon is None):
            raise DataError(
                "rolling forecast origins (the default training samples) need a history and a target span: pass "
                "Forecaster('irregular', lookback=<history span>, horizon=<target span>) in the data's time units "
                "(e.g. lookback=48.0, horizon=12.0 with time_unit='h'), or give fit(origins=[t0, ...]) for fixed "
                "origins (there lookback=None reads all the history before each origin)"
            )
        if rolling and origin_stride is None:
            origin_stride = horizon  # target windows tile each series: no observation is a target twice
        dm = ObservationDataModule(
            data, origins=origins, origin_stride=origin_stride, history=lookback, horizon=horizon,
            time_unit="h" if time_unit is None else time_unit, duplicates="mean" if duplicates is None else duplicates,
            batch_size=self.batch_size, seed=self.seed, **options,
        )
        dm.prepare_data()
        dm.setup("fit")  # read, sample, split and scale before building anything, so bad data fails fast
        empty = [split for split in SPLITS if len(dm.samples(split)) == 0]
        if empty:
            counts = {split: len(dm.samples(split)) for split in SPLITS}
            raise DataError(
                f"the {' and '.join(empty)} split(s) hold no forecasting samples ({counts} under split={dm.split!r}, "
                f"fractions {dm.split_fractions}); validation picks the best epoch and test evaluates it: use a "
                "shorter horizon, a smaller origin_stride, other split_fractions, or more data"
            )
        if dm.forecast_span <= 0:
            raise DataError(
                "no train sample has a target observation after its origin, so there is nothing to learn; use "
                "earlier origins, a horizon, or more data"
            )
        return dm

    def _train(
        self,
        module: ForecastModule,
        dm: Union[CSVDataModule, ObservationDataModule],
        *,
        max_epochs: int,
        patience: Optional[int],
        accelerator: str,
        devices: Union[int, str],
        strategy: str,
        callbacks: Optional[list[pl.Callback]],
        logger: Union[bool, Any],
        default_root_dir: Optional[Union[str, os.PathLike]],
        enable_checkpointing: bool,
        enable_progress_bar: bool,
        **trainer_kwargs: Any,
    ) -> None:
        """Train ``module`` on ``dm`` with a Lightning ``Trainer`` (both roads): checkpoint the best
        validation epoch and load its weights back, optional early stopping, a temporary run
        folder unless ``default_root_dir``; keeps the module, data module and trainer."""
        all_callbacks = list(callbacks or [])
        checkpoint = None
        if enable_checkpointing:
            checkpoint = ModelCheckpoint(monitor="val_mse", mode="min", save_top_k=1, filename="best-{epoch}")
            all_callbacks.insert(0, checkpoint)
        if patience is not None:
            all_callbacks.append(EarlyStopping(monitor="val_mse", mode="min", patience=patience))
        keep = default_root_dir is not None
        with contextlib.ExitStack() as scratch:
            root = os.fspath(Path(default_root_dir).expanduser()) if keep else scratch.enter_context(
                tempfile.TemporaryDirectory(prefix="tsattn-fit-"))
            trainer = pl.Trainer(
                max_epochs=max_epochs, accelerator=accelerator, devices=devices, strategy=strategy,
                callbacks=all_callbacks, logger=logger, default_root_dir=root,
                enable_checkpointing=enable_checkpointing, enable_progress_bar=enable_progress_bar,
                deterministic=trainer_kwargs.pop("deterministic", True), **trainer_kwargs,
            )
            trainer.fit(module, datamodule=dm)
            if checkpoint is not None and checkpoint.best_model_path:
                best = torch.load(checkpoint.best_model_path, map_location="cpu", weights_only=True)
                module.load_state_dict(best["state_dict"])
            self.best_model_path = checkpoint.best_model_path if keep and checkpoint is not None else None
        self.accelerator = accelerator if isinstance(accelerator, str) and accelerator != "auto" else (
            _accelerator_name(trainer))
        self.module, self.datamodule, self.trainer = module, dm, trainer

    # -- use -------------------------------------------------------------------------------------
    def _require_fit(self) -> ForecastModule:
        if self.module is None:
            raise RuntimeError("this Forecaster has no model yet: call fit(data) or Forecaster.load(path) first")
        return self.module

    def _eval_trainer(self, accelerator: Optional[str]) -> pl.Trainer:
        return pl.Trainer(accelerator=accelerator or self.accelerator, devices=1, logger=False,
                          enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)

    def _datamodule(self, data: Optional[DataLike]) -> CSVDataModule:
        """The fit's data module for ``data=None`` after a fit; else ``data`` (or, after ``load``, the
        fit's source) read the fit's way, on the fit's scale and time unit."""
        if data is None and self.datamodule is not None:
            return self.datamodule
        return self._datamodule_for(self._fit_source() if data is None else data)

    def evaluate(self, split: str = "test", data: Optional[ObservationsLike] = None,
                 accelerator: Optional[str] = None) -> dict[str, float]:
        """MSE / MAE on the scaled data (the published convention) and on the original scale.

        Observation models: the protocol's metrics (``ForecastModule``'s test step): per variable
        over every target observation of the split, then the mean over the variables.

        Args:
            split: ``"test"``, ``"val"`` or ``"train"`` windows (samples) of the protocol.
            data: evaluate on other data, read with the fit's options, sampled and split the fit's
                way and scaled with the fit's scaler (default: the fit's data).
            accelerator: where to run (default: the accelerator the fit ran on; ``"auto"`` after
                ``load``).
        Returns:
            ``{"mse", "mae", "mse_orig", "mae_orig"}`` as floats.
        """
        module = self._require_fit()
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
        if self.reads_observations:
            odm = self._observation_dm(data)
            odm.setup("test")
            dataset = {"train": odm.train_dataset, "val": odm.val_dataset, "test": odm.test_dataset}[split]
            loader = torch.utils.data.DataLoader(dataset, batch_size=odm.batch_size,  # every sample, in order
                                                 collate_fn=collate_forecast_samples)
        else:
            dm = self._datamodule(data)
            dm.setup("test")
            dataset = {"train": dm.train_dataset, "val": dm.val_dataset, "test": dm.test_dataset}[split]
            loader = torch.utils.data.DataLoader(dataset, batch_size=dm.batch_size)  # every window, in order
        result = self._eval_trainer(accelerator).test(module, dataloaders=loader, verbose=False)[0]
        return {key.removeprefix("test_"): float(value) for key, value in result.items()}

    def predict(self, data: Optional[ObservationsLike] = None, at: Optional[TimesLike] = None,
                origin: Optional[Any] = None) -> pd.DataFrame:
        """Forecast from the end of ``data`` (default: the fit's data; after ``load``, its source).

        Window models: the ``horizon`` rows that follow ``data``. ``data`` may be any extract of at
        least ``lookback`` rows with the channels the model was fit on, in any column order
        (columns it was not fit on are ignored, except under ``features="M"``, where they are an
        error); it is read with the fit's options, scaled with the fit's scaler and timed in the
        fit's time unit. ``at`` must be None. Returns a DataFrame indexed by the next ``horizon``
        timestamps (at the fit's frequency), one column per target channel, in original units.

        Observation models: the history of a series is every observation of it in ``data``
        within ``lookback`` of its last one, read with the fit's options, scaled with the fit's
        scaler and timed in the fit's time unit (variables the data never observes are simply
        not observed: nothing is imputed). The forecast origin of a series is its last
        observation time (that observation is in the history, at relative time 0); ``at``
        requests times after it, up to ``horizon``. ``origin``: one time for every series (a number
        for numeric times, a timestamp for datetimes) from which to forecast as the model was
        trained: the history is the observations in ``[origin - lookback, origin)``, observations
        at or after ``origin`` are not read, and ``at`` requests times from ``origin`` on, up to
        ``origin + horizon`` (to forecast, say, hours 24-48 of a stay from its first day, given
        records that go on). ``at``:

        - a DataFrame in the long layout (the fit's id and time columns and a variable column:
          the fit's ``variable_column``, ``"variable"`` for a model fit on a wide table): one
          request per row; or in the wide layout (id, time and variable columns, whose cells are
          not read; only id and time: every variable): every listed variable at each row's time;
        - a list / array of timestamps (numbers, for data with numeric times), or one: those times
          for every series and every variable;
        - None (default): every variable at the series' median step between its (history's)
          observation times after its origin, up to ``horizon`` (``floor(horizon / step)`` times;
          one time at ``horizon`` when the step exceeds it or the series has one observation
          time). For many long series pass ``at``: the default asks for a lot.

        Returns:
            observation models: the forecasts in original units, in the layout of the table the
            model was fit on: long (id, time, variable, value columns, one row per request) or
            wide (id, time and one column per variable, one row per (series, time); NaN where
            not requested). No id column when the fit had none (one series). Times as the data
            gives them: timestamps (for datetime data) or numbers.
        Raises:
            DataError: ``data`` lacks the channels the model was fit on or is too short (windows);
                a request at or before a series' last observation (before ``origin``), more than
                ``horizon`` after it (the model never learnt to forecast that far; refit with a
                longer horizon), for an unknown series or variable, repeated, or for a series
                without observations (before ``origin``); data with variables the model was not fit
                on; an ``origin`` that is not one time of the data's kind (observations).
        """
        for name, value in (("at", at), ("origin", origin)):
            if value is not None and not self.reads_observations:
                raise ValueError(
                    f"{name}= applies to observation models; the window model {self.config['model']!r} forecasts "
                    f"the {self.horizon} rows that follow the data: leave {name}=None"
                )
        module = self._require_fit()
        if self.reads_observations:
            return self._predict_observations(data, at, origin)
        dm = self._datamodule(data)
        window = dm.last_window()
        y = module.forecast(window["x"][None], window["t_x"][None])[0]  # [H, C_out], original units
        name = (module.data_info or {}).get("time_column") or dm.table.time_column or "date"
        future = pd.DatetimeIndex(dm.future_timestamps(), name=name)
        return pd.DataFrame(y.cpu().numpy(), index=future, columns=list(dm.target_names))

    def _fit_source(self) -> str:
        """The registered name or absolute path the loaded model was fit on (a DataFrame is not stored)."""
        source = (self._require_fit().data_info or {}).get("source")
        if not source:
            raise RuntimeError("this model was fit on a DataFrame, which a checkpoint does not keep; pass `data`")
        return source

    def _datamodule_for(self, data: DataLike) -> CSVDataModule:
        """A data module over ``data`` that reads it as the fit read its data: the fit's reading
        options, channels (by name), scaler, time unit and frequency."""
        info = self._require_fit().data_info
        if not info:
            raise RuntimeError(
                "this model carries no record of the data it was fit on (a checkpoint not written by tsattn); "
                "fit it with Forecaster.fit or the tsattn CLI"
            )
        options = {**info.get("datamodule", {}), **info.get("read_options", {})}
        options = {k: v for k, v in options.items() if k in _READING}
        options["batch_size"] = options.get("batch_size") or self.batch_size
        if info.get("scaler_mean") is not None:
            options["scaler"] = scaler_from_stats(info["scaler_mean"], info["scaler_scale"])
        if info.get("time_unit_ns"):
            options["time_unit"] = pd.Timedelta(int(info["time_unit_ns"]), unit="ns")
        options["freq"] = info.get("freq")
        fitted = list(info["channel_names"])
        dm = CSVDataModule(data, self.lookback, self.horizon, **options)
        dm.prepare_data()  # a registered name that is not local yet: fetch it (never for a path)
        have = dm.value_columns
        absent = [c for c in fitted if c not in have]
        if absent:
            raise DataError(
                f"the data lacks the channels {absent} that the model was fit on "
                f"(fit on {fitted}; this data has {have}); pass data with the same columns"
            )
        extra = [c for c in have if c not in fitted]
        if extra and info.get("features") == "M":
            raise DataError(
                f"the data has columns {extra} that the model was not fit on (fit on {fitted}); "
                "drop them or refit on this data"
            )
        if dm.channel_names != fitted:  # other column order, or unused columns: read the fit's, in its order
            options["columns"] = fitted
            dm = CSVDataModule(data, self.lookback, self.horizon, **options)
        return dm

    # -- observation models: reading other data the fit's way, requests, forecasts -------------------
    def _observation_info(self) -> dict[str, Any]:
        info = self._require_fit().data_info
        if not info or info.get("kind") != "observations":
            raise RuntimeError(
                "this model carries no record of the observations it was fit on (a checkpoint not written by "
                "tsattn); fit it with Forecaster.fit or the tsattn CLI"
            )
        return info

    def _fit_scaler(self) -> VariableScaler:
        """The fit's per-variable scaler, rebuilt exactly from the checkpoint's record."""
        record = self._observation_info()["scaler"]
        variables = tuple(record["variables"])
        statistics = pd.DataFrame(record["statistics"], index=pd.Index(list(variables), name="variable"))
        return VariableScaler(kind=record["kind"], variables=variables,
                              offset=np.asarray(record["offset"], dtype=np.float64),
                              scale=np.asarray(record["scale"], dtype=np.float64), statistics=statistics)

    def _observation_dm(self, data: Optional[ObservationsLike]) -> ObservationDataModule:
        """The fit's data module for ``data=None`` after a fit; else ``data`` (or, after ``load``,
        the fit's source) read with the fit's reading options onto the fit's variables, sampled the
        fit's way, with the fit's scaler and time unit (not ``setup`` yet)."""
        if data is None and isinstance(self.datamodule, ObservationDataModule):
            return self.datamodule
        info = self._observation_info()
        source = info["source"] if data is None else data
        if source is None:
            raise RuntimeError(
                "this model was fit on a DataFrame (or an ObservationSet), which a checkpoint does not keep; pass "
                "the data: predict(data) / evaluate(data=...)"
            )
        read = {**info["read_options"], "time_unit": pd.Timedelta(int(info["time_unit_ns"]), unit="ns")}
        if data is not None:  # how much of the fit's source was read is no limit on other data
            for option in ("max_series", "subsample", "subsample_by", "subsample_seed"):
                read.pop(option, None)
        if not (isinstance(source, str) and registry.is_observation_dataset(source)):
            read["unknown_descriptors"] = None
        columns = info["columns"]
        if columns["layout"] == "long" and read["variable_column"] is None:
            # fit on an ObservationSet or a registered set: a table is read in the long layout id, time, variable, value
            read.update(id_column=columns["id"], time_column=columns["time"], variable_column=columns["variable"],
                        value_column=columns["value"])
        sampling = {k: v for k, v in info["sampling"].items() if k != "scaler"}
        dm = ObservationDataModule(source, **sampling, **read, scaler=self._fit_scaler(),
                                   batch_size=info.get("batch_size") or self.batch_size, seed=self.seed)
        dm.prepare_data()  # a registered name that is not local yet: fetch it (never for a path)
        numeric = dm.observations.time_unit is None  # read now, so that bad data fails here
        if numeric != (info["times"] == "numeric"):
            have, want = ("numbers", "timestamps") if numeric else ("timestamps", "numbers")
            raise DataError(
                f"the data's times are {have}, but the model was fit on data whose times are {want}; pass data "
                f"with {want} in the time column"
            )
        return dm

    def _predict_observations(self, data: Optional[ObservationsLike], at: Optional[TimesLike],
                              origin: Optional[Any] = None) -> pd.DataFrame:
        module = self._require_fit()
        info = self._observation_info()
        dm = self._observation_dm(data)
        observations = dm.observations
        given = origin is not None
        if given:
            if not np.isscalar(origin) and not isinstance(origin, (pd.Timestamp, np.datetime64)):
                raise DataError(f"origin= takes one time for every series (a number or a timestamp); got {origin!r}")
            S = len(observations)
            shown = _parse_times(pd.Series([origin]), observations, info, "origin")[np.zeros(S, dtype=np.int64)]
            history = dm.histories_before(_in_time_units(observations, np.arange(S), shown), info["history"])
        else:
            history = dm.latest_histories(info["history"])
        sample_of = np.full(len(observations), -1, dtype=np.int64)   # [S] series -> its sample (-1: no history)
        sample_of[history.samples.series] = np.arange(len(history))
        last = np.full(len(observations), np.nan)                       # [S] forecast origins
        last[history.samples.series] = history.samples.origin
        horizon = float(info["horizon"])
        requests = _requests(at, observations, info, last, horizon, given_origin=given)
        _check_requests(requests, observations, list(info["variables"]), last, horizon, given_origin=given)
        values = self._forecast(module, history, sample_of[requests.series], requests.time, requests.variable)
        return _forecast_frame(requests, values, observations, info)

    def _forecast(self, module: ForecastModule, history: ForecastSampleDataset, sample: np.ndarray, time: np.ndarray,
                  variable: np.ndarray) -> np.ndarray:
        """Forecasts [Q] (original units) of queries at ``time`` [Q] (the set's time units) of
        ``variable`` [Q], each from the history of ``sample`` [Q] (a sample of ``history``, a
        ``latest_histories`` dataset), in batches of up to ``batch_size`` series."""
        out = np.empty(len(time), dtype=np.float64)
        order = pd.unique(sample)  # the series in request order
        slot = np.full(len(history), -1, dtype=np.int64)
        for first in range(0, len(order), self.batch_size):
            chunk = order[first:first + self.batch_size]                                  # [B] samples
            slot[:] = -1
            slot[chunk] = np.arange(len(chunk))
            chosen = np.flatnonzero(slot[sample] >= 0)                                    # [q] this batch's queries
            row = slot[sample[chosen]]                                                    # [q]
            counts = np.bincount(row, minlength=len(chunk))
            by_row = np.argsort(row, kind="stable")
            rank = np.empty_like(row)
            rank[by_row] = np.arange(len(row)) - (np.cumsum(counts) - counts)[row[by_row]]
            width = max(1, int(counts.max(initial=0)))
            y_time = np.zeros((len(chunk), width))
            y_var = np.zeros((len(chunk), width), dtype=np.int64)
            y_mask = np.zeros((len(chunk), width), dtype=bool)
            y_time[row, rank] = time[chosen] - history.samples.origin[chunk][row]       # relative to the origin
            y_var[row, rank] = variable[chosen]
            y_mask[row, rank] = True
            batch = history.batch(chunk)                                                  # x_*: the histories
            batch.update(y_time=torch.from_numpy(y_time.astype(np.float32)), y_var=torch.from_numpy(y_var),
                         y_mask=torch.from_numpy(y_mask), y_value=torch.zeros(y_time.shape))
            pred = module.forecast_observations(batch)                                    # [B, width], original units
            out[chosen] = pred.cpu().double().numpy()[row, rank]
        return out

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write a Lightning checkpoint (weights, hyperparameters, data facts) to ``path``, atomically.

        ``~`` is expanded. ``ForecastModule.load_from_checkpoint(path)`` reads it too.
        """
        module = self._require_fit()
        path = Path(path).expanduser()
        if path.is_dir():
            raise ValueError(f"{str(path)!r} is a directory; give a file name such as 'model.ckpt'")
        if not path.parent.exists():
            raise ValueError(f"the folder {str(path.parent)!r} does not exist; create it first")
        checkpoint = {
            "state_dict": module.state_dict(),
            "hyper_parameters": dict(module.hparams),
            "tsattn_data_info": module.data_info,
            "tsattn_forecaster": {"lookback": self.lookback, "horizon": self.horizon,
                                  "given_spans": list(self._given_spans),
                                  "batch_size": self.batch_size, "seed": self.seed},
            "pytorch-lightning_version": lightning.__version__,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            torch.save(checkpoint, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    @classmethod
    def load(cls, path: Union[str, os.PathLike], map_location: str = "cpu") -> "Forecaster":
        """A Forecaster from a checkpoint written by ``save`` (or by a ``ModelCheckpoint`` while
        training a ``ForecastModule``). ``~`` is expanded; the file is read with ``weights_only=True``.

        Raises:
            FileNotFoundError: there is no file at ``path``.
            ValueError: the file is not a tsattn checkpoint (text, CSV, truncated, another model's).
        """
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
        not_ours = (f"{str(path)!r} is not a tsattn checkpoint; pass a file written by Forecaster.save() or by "
                    "a ModelCheckpoint while training a ForecastModule (e.g. `tsattn fit`)")
        try:
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as exc:  # text, CSV, truncated zip, foreign pickle: all mean the same to the user
            raise ValueError(f"{not_ours} (it could not be read as a PyTorch checkpoint: {type(exc).__name__})") from None
        hp = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
        if not isinstance(hp, dict) or "model" not in hp or not isinstance(checkpoint.get("state_dict"), dict):
            raise ValueError(f"{not_ours} (it is a PyTorch file without a tsattn model's hyperparameters and weights)")
        known = inspect.signature(ForecastModule).parameters
        try:
            module = ForecastModule(**{k: v for k, v in hp.items() if k in known})
            module.load_state_dict(checkpoint["state_dict"])
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ValueError(f"{not_ours} (its weights do not fit the model it describes: {exc})") from None
        module.on_load_checkpoint(checkpoint)
        module.to(map_location)
        extra = checkpoint.get("tsattn_forecaster") or {}
        info = module.data_info or {}
        batch_size = extra.get("batch_size") or info.get("datamodule", {}).get("batch_size") or info.get("batch_size") or 128
        f = cls(hp["model"], attention=hp["attention"], sink=hp["sink"], rope=hp["rope"],
                lookback=hp["lookback"], horizon=hp["horizon"], model_kwargs=hp["model_kwargs"], loss=hp["loss"],
                lr=hp["lr"], lr_schedule=hp["lr_schedule"], compile=hp["compile"],
                batch_size=batch_size,
                seed=extra["seed"] if extra.get("seed") is not None else hp["seed"] if hp.get("seed") is not None else 2021)
        if "given_spans" in extra:  # a refit samples as the saved Forecaster's would (older files: the fit's spans)
            f._given_spans = tuple(extra["given_spans"])
        f.module = module
        return f

    def __repr__(self) -> str:
        state = "fit" if self.module is not None else "not fit"
        return f"Forecaster({self.config['model']!r}, attention={self.config['attention']!r}, lookback={self.lookback}, horizon={self.horizon}; {state})"


__all__: Sequence[str] = ["Forecaster"]

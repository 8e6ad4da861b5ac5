"""``ObservationDataModule``: irregular observation sets -> forecasting samples -> padded batches.

The pipeline (``setup``): an ``ObservationSet`` (given, read from a table with
``read_observations``, or a registered dataset read by its format's reader) -> forecasting samples
at fixed or rolling origins (``samples``) -> a split by series or by time -> a per-variable scaler
fit on the train (or train + val: ``scale_from="seen"``) observations only -> three
``ForecastSampleDataset`` views over one scaled copy of the values (batches: see
``tsattn.data.observations.dataset``). ``setup`` never downloads; ``prepare_data`` fetches a
registered dataset that is not available locally.

Inference lives here too: ``queries(at=..., origin=...)`` turns forecast requests into batches of
histories and queries (``QueryBatches``), and ``forecast_frame`` the forecasts into a table in the
input's layout. ``record()`` keeps what the fit learnt (variables, scaler, time unit, spans, the
table's layout), so ``ObservationDataModule.from_record(record, other_data)`` reads other data the
fit's way.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..base import ForecastDataModule
from ..errors import DataError
from ..io.observation_table import read_observations
from ..io.readers import get_reader
from ..io.table import parse_timestamps
from ..scaling import SCALER_KINDS, Scaler, fit_observation_scaler
from ..validation import SPLITS, check_choice, check_optional_choice, check_positive_int, check_time_unit
from .dataset import ForecastSampleDataset, collate_forecast_samples
from .inference import ObservationQueries
from .record import ObservationRecord
from .observation_set import OBSERVATION_DUPLICATE_POLICIES, ObservationSet
from .static import StaticScaler, check_static_columns, variables_as_static
from .samples import (
    ForecastSamples,
    check_fractions,
    fixed_origin_samples,
    naive_errors,
    rolling_origin_samples,
    split_samples,
)

__all__ = ["OBSERVATION_SPLITS", "SCALE_FROM", "ObservationDataModule"]

OBSERVATION_SPLITS = ("series", "time")
SCALE_FROM = ("train", "seen")
SUBSAMPLE_UNITS = ("time", "observation")
_DEFAULT_FRACTIONS = {"series": (0.6, 0.2, 0.2), "time": (0.7, 0.1, 0.2)}
_TABLE_COLUMNS = ("id_column", "variable_column", "value_column")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


class ObservationDataModule(ObservationRecord, ObservationQueries, ForecastDataModule):
    """Forecasting samples over irregular multivariate series (each variable at its own times).

    A sample is a series and a forecast origin t0: the history is every observation with
    ``t0 - lookback <= time < t0``, the targets every observation with ``t0 <= time < t0 + horizon``.
    No value is invented: only observed (time, variable, value) triples appear, with masks.

    Args:
        data: an ``ObservationSet``; a registered name (``"physionet2012"``; a registered CSV
            series such as ``"ETTh1"`` is read in the wide layout); a path to a CSV file or an
            ``.npz`` written by ``ObservationSet.save_npz``; or a DataFrame (long or wide; see
            ``read_observations``).
        origins: fixed forecast origins, in time units (PhysioNet: ``[24.0]``); every series gets
            one sample per origin, and a series with no history before one is an error.
        origin_stride: rolling origins every this many time units in each series, from
            ``t_first + lookback`` while ``t0 + horizon <= t_last`` (needs both spans); an origin
            without history has no sample. Give ``origins`` or this.
        lookback: the history span before an origin; None (fixed origins only): everything before t0.
        horizon: the target span after an origin; None (fixed origins only): everything from t0 on
            (``horizon`` then reports, after ``setup``, the latest target of any train sample).
        split: ``"series"`` (whole series to train / val / test: scikit-learn's ``train_test_split``
            on the sorted ids) or ``"time"`` (fractions of each series' time span; a sample belongs
            to the split holding its whole target window). Default: ``"time"`` for rolling origins,
            else ``"series"``.
        split_fractions: train / val / test fractions; default (0.6, 0.2, 0.2) by series,
            (0.7, 0.1, 0.2) by time.
        split_seed: ``random_state`` of the split by series (42 in the PhysioNet protocol).
        scaler: ``"minmax"`` (the PhysioNet benchmark's), ``"standard"`` or ``"none"``, per variable
            from observed values only; or a fitted ``Scaler`` (a fitted model's): used as it is, the
            data's variables mapped onto its variables (one it does not know is an error, one the
            data never observes is simply not observed).
        scale_from: fit the scaler on the ``"train"`` observations, or on the ``"seen"`` ones (train
            + val, never test: the PhysioNet protocol's choice).
        variables: keep only these variables (in this order); default all. max_series: only the first
            this many series (quick runs). subsample: keep this fraction at random (e.g. 0.3), whole
            timestamps (``subsample_by="time"``) or single values (``"observation"``; ``subsample_seed``).
        id_column, variable_column, value_column: the table's id column and, for the long layout
            (one observation per row), its variable and value columns (see ``read_observations``).
        time_unit: the unit of datetime times (``"h"``, ``"15min"``, a ``pd.Timedelta``).
        duplicates: several observations of one (series, time, variable): ``"mean"``, ``"first"``, ``"last"``, ``"error"``.
        reader_options: keyword arguments of a registered dataset's format reader (PhysioNet 2012:
            ``{"unknown_descriptors": "drop"}``; see ``tsattn.data.io.physionet``).
        static_columns: columns of the table holding static covariates, one number per series (a
            patient's age, a store's size; ``read_observations``): the model reads them beside each
            history, standardised on the train series, an unknown value flagged. The same columns
            are then needed in any table the model forecasts.
        static_variables: variables recorded at each series' start to read as static covariates too
            (their value at its first observation time; e.g. PhysioNet 2012's descriptors ``["Age",
            "Gender", "Height", "ICUType", "Weight"]``); they stay variables (and targets) as well.
        history: the former name of ``lookback`` (deprecated).
        train_origins: more fixed origins (numbers, in time units) for the train series only: each train
            series gets a sample at each of them too, beside those at ``origins``, with the same
            ``lookback`` and ``horizon``; validation and test keep ``origins`` alone, so the evaluation is
            unchanged (e.g. PhysioNet 2012: ``[20.0, 28.0]`` trains on three origins per train stay and
            evaluates at 24 h). Needs fixed ``origins`` and ``split="series"`` (a split by time takes
            whole target windows in time, which these would cross).
        **kwargs: the table options and loader settings of ``ForecastDataModule``.

    For a registered dataset, any of ``origins`` / ``lookback`` / ``horizon`` / ``split`` /
    ``split_fractions`` / ``split_seed`` / ``scaler`` / ``scale_from`` left at None takes the
    registry's protocol (``registry.get_spec(name).protocol``); giving ``origins`` or
    ``origin_stride`` replaces the protocol's origins and spans.
    """

    task = "observations"
    accepts = "an ObservationSet, a registered dataset name, a path or a pandas DataFrame"
    dataset_kinds = ("observations", "series")
    in_memory_types = (pd.DataFrame, ObservationSet)
    collate_fn = staticmethod(collate_forecast_samples)

    def __init__(
        self,
        data: Union[str, Path, pd.DataFrame, ObservationSet],
        *,
        origins: Optional[Sequence[float]] = None,
        origin_stride: Optional[float] = None,
        lookback: Optional[float] = None,
        horizon: Optional[float] = None,
        split: Optional[str] = None,
        split_fractions: Optional[Sequence[float]] = None,
        split_seed: Optional[int] = None,
        scaler: Optional[Union[str, Scaler]] = None,
        scale_from: Optional[str] = None,
        variables: Optional[list[str]] = None,
        max_series: Optional[int] = None,
        subsample: Optional[float] = None,
        subsample_by: str = "time",
        subsample_seed: int = 0,
        id_column: Optional[str] = None,
        variable_column: Optional[str] = None,
        value_column: Optional[str] = None,
        time_unit: Union[str, pd.Timedelta] = "h",
        duplicates: str = "mean",
        reader_options: Optional[dict[str, Any]] = None,
        static_columns: Optional[Sequence[str]] = None,
        static_variables: Optional[Sequence[str]] = None,
        history: Optional[float] = None,
        train_origins: Optional[Sequence[float]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, **kwargs)
        if history is not None:
            warnings.warn("history= is now lookback=", DeprecationWarning, stacklevel=2)
            lookback = history if lookback is None else lookback
        self.time_unit = check_time_unit(time_unit)
        self.hparams["time_unit"] = str(self.time_unit)  # hparams stay plain YAML
        if max_series is not None:
            check_positive_int("max_series", max_series)
        check_optional_choice("split", split, OBSERVATION_SPLITS)
        if not isinstance(scaler, Scaler):
            check_optional_choice("scaler", scaler, SCALER_KINDS)
        check_optional_choice("scale_from", scale_from, SCALE_FROM)
        check_choice("duplicates", duplicates, OBSERVATION_DUPLICATE_POLICIES)
        check_choice("subsample_by", subsample_by, SUBSAMPLE_UNITS)
        if subsample is not None and (isinstance(subsample, bool) or not 0 < float(subsample) <= 1):
            raise DataError(f"subsample must be a fraction in (0, 1] or None; got {subsample!r}")
        if reader_options and (self.spec is None or self.spec.format == "csv"):
            raise DataError(
                f"reader_options={reader_options!r} apply to a registered dataset's format reader "
                f"(e.g. physionet2012's unknown_descriptors); this data has none: leave reader_options None"
            )
        self.reader_options = dict(reader_options or {})
        self._set_protocol(origins, origin_stride, lookback, horizon, split, split_fractions, split_seed, scaler,
                           scale_from)
        self.variable_names = list(variables) if variables is not None else None
        self.max_series = max_series
        self.subsample = None if subsample is None else float(subsample)
        self.subsample_by = subsample_by
        self.subsample_seed = int(subsample_seed)
        self.columns_read = {"id_column": id_column, "variable_column": variable_column, "value_column": value_column,
                             "static_columns": list(check_static_columns(static_columns)) or None}
        self.static_variables = list(check_static_columns(static_variables)) or None
        self.train_origins = self._check_train_origins(train_origins)
        self.duplicates = duplicates
        self._observations: Optional[ObservationSet] = None
        self._series_splits: Optional[dict[str, np.ndarray]] = None
        self._borders: Optional[np.ndarray] = None
        self._scaler: Optional[Scaler] = None
        self._datasets: Optional[dict[str, ForecastSampleDataset]] = None
        self._fitted_horizon: Optional[float] = None
        self._fitted_columns: Optional[dict[str, Any]] = None
        self._static_scaler: Optional[StaticScaler] = None

    def _set_protocol(self, origins, origin_stride, lookback, horizon, split, split_fractions, split_seed, scaler,
                      scale_from) -> None:
        """The sampling: explicit arguments, else the registry's protocol, else the defaults."""
        registered = self.spec is not None and self.spec.kind == "observations"
        protocol: Mapping[str, Any] = dict(self.spec.protocol) if registered else {}
        if origins is not None or origin_stride is not None:
            protocol = {k: v for k, v in protocol.items() if k not in ("origins", "lookback", "horizon")}

        def pick(name: str, value: Any, default: Any = None) -> Any:
            return value if value is not None else protocol.get(name, default)

        self.origins = pick("origins", origins)
        self.origin_stride = origin_stride
        if (self.origins is None) == (self.origin_stride is None):
            raise DataError(
                "give either origins=[t0, ...] (fixed forecast origins, e.g. [24.0]) or origin_stride=<time between "
                "rolling origins> (with lookback= and horizon=), not both and not neither"
            )
        if self.origins is not None:  # numbers (time units), or timestamps (read at setup, per series)
            given = [self.origins] if np.isscalar(self.origins) or isinstance(self.origins, pd.Timestamp) else self.origins
            self.origins = [float(o) if _is_number(o) else str(o) for o in given]
        self.lookback = pick("lookback", lookback)
        self.target_span = pick("horizon", horizon)
        self.split = pick("split", split, "time" if origin_stride is not None else "series")
        self.split_fractions = check_fractions(pick("split_fractions", split_fractions, _DEFAULT_FRACTIONS[self.split]))
        self.split_seed = int(pick("split_seed", split_seed, 42))
        self._given_scaler = scaler if isinstance(scaler, Scaler) else None
        self.scaler_kind = scaler.kind if isinstance(scaler, Scaler) else pick("scaler", scaler, "standard")
        self.scale_from = pick("scale_from", scale_from, "train")

    # -- reading (no downloads) ----------------------------------------------------------------------------
    def _table_read_options(self) -> dict[str, Any]:
        return {**self.table_options, **self.columns_read, "time_unit": self.time_unit, "duplicates": self.duplicates}

    def _read(self) -> ObservationSet:
        if self.spec is not None:
            if self.spec.format != "csv" and self.columns_read["static_columns"]:
                raise DataError(f"static_columns apply to tables; {self.spec.name} is read by its format reader: "
                                "make its variables static with static_variables=[...] instead")
            options = self._table_read_options() if self.spec.format == "csv" else self.reader_options
            observations = get_reader(self.spec.format)(self._local_files(), max_series=self.max_series, **options)
            if self.max_series is None and self.spec.n_series and len(observations) != self.spec.n_series:
                warnings.warn(
                    f"the {self.spec.name} files hold {len(observations)} series, not the registered "
                    f"{self.spec.n_series}; results will not be comparable with the published protocol's",
                    UserWarning, stacklevel=3,
                )
        elif isinstance(self._data, ObservationSet):
            observations = self._data
        elif isinstance(self._data, Path) and self._data.suffix == ".npz":
            observations = ObservationSet.load_npz(self._data)
        else:
            observations = read_observations(self._data, **self._table_read_options())
        return observations

    def _load(self) -> ObservationSet:
        observations = self._read()
        if self.max_series is not None and len(observations) > self.max_series:
            observations = observations.subset(np.arange(self.max_series))
        if self.static_variables:
            observations = variables_as_static(observations, self.static_variables)
        if self.variable_names is not None:
            observations = observations.select_variables(self.variable_names)
        if self.subsample is not None and self.subsample < 1:
            observations = observations.thin(self.subsample, seed=self.subsample_seed, by=self.subsample_by)
        if observations.n_observations == 0:
            raise DataError(f"{observations.source}: no observations left to forecast; check the data and options")
        if self._given_scaler is not None:
            observations = observations.onto_variables(self._given_scaler.names)
        return observations

    @property
    def observations(self) -> ObservationSet:
        """The (unscaled) observation set, read on first use."""
        if self._observations is None:
            self._observations = self._load()
        return self._observations

    # -- Lightning hooks -----------------------------------------------------------------------------------
    def setup(self, stage: Optional[str] = None) -> None:
        """Read, build the samples, split, fit the scaler and build the three datasets (once; no downloads)."""
        if self._datasets is not None:
            return
        observations = self.observations
        if self.origins is not None:
            samples = fixed_origin_samples(observations, self._origin_times(), self.lookback, self.target_span)
        else:
            samples = rolling_origin_samples(observations, self.lookback, self.target_span, self.origin_stride)
        split = split_samples(observations, samples, self.split, self.split_fractions, self.split_seed,
                              self.scale_from, self.target_span)
        by_split, fit_rows, self._series_splits, self._borders = split
        if self.train_origins:                 # more samples of the train series; val / test as they were
            more = fixed_origin_samples(observations, self.train_origins, self.lookback, self.target_span,
                                        series=self._series_splits["train"])
            by_split["train"] = ForecastSamples.concatenate([by_split["train"], more])
        if len(by_split["train"]) == 0 and not self._fitted_given:  # a fitted model evaluates what is there
            raise DataError(
                f"no train samples: {len(samples)} sample(s) in all, none of them in the train split (split="
                f"{self.split!r}, fractions {self.split_fractions}); use a shorter lookback / horizon, more data, or "
                "a larger train fraction"
            )
        scaler = self._given_scaler
        if scaler is None:
            scaler = fit_observation_scaler(
                observations.value[fit_rows], observations.variable[fit_rows], observations.variables,
                self.scaler_kind,
                fitted_on=f"the {'train' if self.scale_from == 'train' else 'train + val'} observations "
                f"(split={self.split!r})",
            )
        scaled = scaler.transform(observations.value, observations.variable).astype(np.float32)  # [M]
        variable = observations.variable.astype(np.int64)
        self._scaler = scaler
        if self._static_scaler is None and observations.static_names:   # a static is no time's: any train series
            train = np.arange(len(observations)) if self._series_splits is None else self._series_splits["train"]
            self._static_scaler = StaticScaler.fit(observations.static_names, observations.static[train])
        static = self.static_inputs()
        self._datasets = {
            name: ForecastSampleDataset(observations.time, variable, scaled, by_split[name], static) for name in SPLITS
        }

    def _check_train_origins(self, train_origins: Optional[Sequence[float]]) -> Optional[list[float]]:
        if train_origins is None:
            return None
        given = [train_origins] if np.isscalar(train_origins) else list(train_origins)
        if not given or not all(_is_number(o) and np.isfinite(o) for o in given):
            raise DataError(f"train_origins must be a list of numbers (origins in the data's time units, e.g. "
                            f"[20.0, 28.0]); got {train_origins!r}")
        if self.origins is None or self.split != "series":
            raise DataError(
                f"train_origins adds fixed origins to the train series of a split by series; this data module has "
                f"{'rolling origins (origin_stride)' if self.origins is None else 'split=' + repr(self.split)}: give "
                "fixed origins=[...] with split='series', or leave train_origins None"
            )
        return [float(o) for o in given]

    def _origin_times(self) -> Union[list[float], np.ndarray]:
        """The fixed origins in the set's time units: numbers as given, or for datetime data timestamps
        as each series' own time since its first timestamp ([K, S])."""
        if all(isinstance(o, float) for o in self.origins):
            return list(self.origins)
        observations = self.observations
        if observations.time_unit is None:
            raise DataError(
                f"origins={self.origins!r} hold timestamps, but the data's times are numbers (as given, e.g. hours "
                "since admission): give origins as numbers in those units, e.g. origins=[24.0]"
            )
        stamps = parse_timestamps(pd.Series([str(o) for o in self.origins]), "origins", self.table_options["time_format"],
                                  lambda r: f"origins[{r}]", self.table_options["dayfirst"])
        first = observations.origins.as_unit("ns").asi8                                  # [S]
        if (stamps.tz is None) != (observations.origins.tz is None):
            raise DataError("origins and the data's timestamps must both have a time zone or both have none")
        ns = stamps.as_unit("ns").asi8[:, None]                                          # [K, 1]
        return (ns - first[None, :]).astype(np.float64) / float(observations.time_unit.value)  # [K, S]

    # -- what the model layer reads (the CLI links lookback, horizon, n_channels_in, target_index) --------
    @property
    def horizon(self) -> Optional[float]:
        """The target span: the given one (or the protocol's); else, once set up, the longest time
        after an origin that the train samples forecast (PhysioNet's protocol: 24.0, the observations
        at 48:00 from the origin at 24:00); None before that."""
        if self.target_span is not None:
            return float(self.target_span)
        if self._fitted_horizon is not None:
            return self._fitted_horizon
        if self._datasets is None:
            return None
        s = self.samples("train")
        has = s.n_targets > 0
        return float(np.max(self.observations.time[s.target_stop[has] - 1] - s.origin[has])) if has.any() else 0.0

    @property
    def forecast_span(self) -> float:
        """``horizon`` once set up (a number; 0.0 when no train sample has a target)."""
        self.setup()
        return float(self.horizon)

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
            return list(self._given_scaler.names)
        if self.variable_names is not None:
            return list(self.variable_names)
        if self.spec is not None and self.spec.variables and self._observations is None:
            return list(self.spec.variables)
        return list(self.observations.variables)

    @property
    def n_variables(self) -> int:
        """V (cheap for a registered dataset before it is read)."""
        return len(self.variables)

    @property
    def scaler(self) -> Scaler:
        """The per-variable scaler: the given one, or the one ``setup`` fits."""
        if self._given_scaler is not None:
            return self._given_scaler
        self.setup()
        assert self._scaler is not None
        return self._scaler

    def samples(self, split: str) -> ForecastSamples:
        """The samples of ``split`` (series, origin, row ranges)."""
        return self.split_dataset(split).samples

    def split_series(self, split: str) -> np.ndarray:
        """int64: the series of ``split`` under ``split="series"``; under ``"time"`` every series."""
        self.split_dataset(split)
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
        return pd.DataFrame.from_dict({split: self.samples(split).counts() for split in SPLITS}, orient="index")

    def target_counts(self, split: str = "train") -> np.ndarray:
        """int64 [V]: per variable, its target observations over the samples of ``split``."""
        rows = self.samples(split).target_rows()
        return np.bincount(self.observations.variable[rows].astype(np.int64), minlength=self.n_variables)

    season = 1  # MASE's naive forecast here: a variable's previous observation

    def naive_scale(self) -> np.ndarray:
        """float64 [V]: per variable, the in-sample error of the last-observation forecast over the train
        split (``samples.naive_errors``), in the variable's units: MASE's denominator."""
        self.setup()
        obs = self.observations
        train = np.isin(obs.series_index, self.split_series("train"))
        if self._borders is not None:
            train &= obs.time < self._borders[obs.series_index, 0]
        return naive_errors(obs, train)

    def inverse_transform(self, values, variables):
        """Scaled -> original units, per variable (``variables`` holds each value's variable index)."""
        return self.scaler.inverse_transform(values, variables)

"""Inference on the observation task: histories at forecast origins, requests as query batches, and
forecasts back to a table (``ObservationQueries``, a part of ``ObservationDataModule``).

The training samples (``ForecastSampleDataset``) cut a series at origins with targets after them;
inference cuts each series at its last observation (or a given origin) and asks for requested
(time, variable) points there: ``queries(at=..., origin=...)`` gives the ``QueryBatches`` and the
checked ``Requests``, ``forecast_frame`` the result in the layout of the table the model was fit on.
"""
from __future__ import annotations

from typing import Any, Optional

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from ..io.table import detect_time_column
from .dataset import ForecastSampleDataset, QueryBatches, histories_before, latest_histories
from .observation_set import ObservationSet
from .static import StaticScaler
from .requests import (
    RequestContext,
    Requests,
    TimesLike,
    build_requests,
    check_requests,
    forecast_frame,
    in_time_units,
    parse_times,
)

__all__ = ["ObservationQueries"]


class ObservationQueries:
    """Inference over a data module's observations, scaler, variables, spans and table layout (the
    attributes ``ObservationDataModule`` provides)."""

    @property
    def static_scaler(self) -> Optional[StaticScaler]:
        """The static covariates' scaler (a fitted model's, or the one ``setup`` fits); None without any."""
        if self._static_scaler is None and self.observations.static_names:
            self.setup()
        return self._static_scaler

    @property
    def n_static(self) -> int:
        """How many static covariates the model reads (K; its input is 2K wide: values and known flags)."""
        return 0 if self.static_scaler is None else len(self.static_scaler.names)

    def static_inputs(self) -> Optional[np.ndarray]:
        """float32 [S, 2K]: per series the static covariates' model input (``StaticScaler.transform``)."""
        scaler = self.static_scaler
        return None if scaler is None else scaler.transform(self._matching_static(scaler))

    def _matching_static(self, scaler: StaticScaler) -> Optional[np.ndarray]:
        obs = self.observations
        if obs.static is None or tuple(obs.static_names) != scaler.names:
            raise DataError(f"the data's static covariates are {list(obs.static_names)}, the model's "
                            f"{list(scaler.names)}: give the same static_columns / static_variables as at fit time")
        return obs.static

    def latest_histories(self, lookback: Optional[float]) -> ForecastSampleDataset:
        """One history per series at its last observation (see ``dataset.latest_histories``)."""
        return latest_histories(self.observations, self.scaler, lookback, self.static_inputs())

    def histories_before(self, origins: np.ndarray, lookback: Optional[float]) -> ForecastSampleDataset:
        """One history per series before ``origins`` [S] (see ``dataset.histories_before``)."""
        return histories_before(self.observations, self.scaler, origins, lookback, self.static_inputs())

    def request_context(self) -> RequestContext:
        """What forecast requests are read against (see ``requests.RequestContext``)."""
        horizon = self.horizon if self.horizon is not None else self.forecast_span  # a fit's own module: set up
        return RequestContext(self.observations, self.variables, self.table_columns(), self.table_options["time_format"],
                              self.table_options["dayfirst"], float(horizon))

    def queries(self, at: Optional[TimesLike] = None, origin: Optional[Any] = None) -> tuple[QueryBatches, Requests]:
        """The batches that forecast the requests ``at`` (see ``Forecaster.predict``) from each series'
        last observation, or from ``origin`` (one time for every series, as in training), and the
        requests (checked: a ``DataError`` names any that cannot be forecast)."""
        ctx = self.request_context()
        observations = ctx.observations
        S = len(observations)
        given = origin is not None
        if given:
            if not np.isscalar(origin) and not isinstance(origin, (pd.Timestamp, np.datetime64)):
                raise DataError(f"origin= takes one time for every series (a number or a timestamp); got {origin!r}")
            shown = parse_times(pd.Series([origin]), ctx, "origin")[np.zeros(S, dtype=np.int64)]
            history = self.histories_before(in_time_units(observations, np.arange(S), shown), self.lookback)
        else:
            history = self.latest_histories(self.lookback)
        sample_of = np.full(S, -1, dtype=np.int64)                       # [S] series -> its sample (-1: no history)
        sample_of[history.samples.series] = np.arange(len(history))
        last = np.full(S, np.nan)                                         # [S] forecast origins
        last[history.samples.series] = history.samples.origin
        requests = build_requests(at, ctx, last, given_origin=given)
        check_requests(requests, ctx, last, given_origin=given)
        batches = QueryBatches(history, sample_of[requests.series], requests.time, requests.variable, self.batch_size)
        return batches, requests

    def forecast_frame(self, requests: Requests, values: np.ndarray, quantiles: Optional[Any] = None) -> pd.DataFrame:
        """Forecasts [Q] (a quantile model's [Q, K] and its ``QuantileSpec``) of ``requests``, in original
        units, in the layout of the table the model was fit on."""
        return forecast_frame(requests, values, self.request_context(), quantiles)

    def table_columns(self) -> dict[str, Any]:
        """The layout of the input table and its column names: ``{"layout": "long" | "wide", "id",
        "time", "variable", "value"}`` (None where the input had no such column). An ObservationSet, an
        ``.npz`` or a registered observation dataset reads as the long layout ``id, time, variable, value``."""
        if self._fitted_columns is not None:
            return dict(self._fitted_columns)
        plain = {"layout": "long", "id": "id", "time": "time", "variable": "variable", "value": "value"}
        if (self.spec is not None and self.spec.format != "csv") or isinstance(self._data, ObservationSet) or (
                isinstance(self._data, Path) and self._data.suffix == ".npz"):
            return plain
        if self.spec is not None or isinstance(self._data, Path):
            path = self._local_files()[0] if self.spec is not None else self._data
            frame = pd.read_csv(path, sep=self.table_options["sep"], nrows=0)  # the header (a CSV's times are text)
        else:
            frame = self._data
        time = detect_time_column(frame, self.table_options["time_column"])
        if time is None:
            time = frame.index.name if frame.index.name is not None else "time"
        long = self.columns_read["variable_column"] is not None
        return {"layout": "long" if long else "wide", "id": self.columns_read["id_column"], "time": str(time),
                "variable": self.columns_read["variable_column"], "value": self.columns_read["value_column"]}

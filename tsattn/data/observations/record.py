"""The observation data module's fitted pipeline record (``ForecastDataModule.record`` /
``from_record``): the reading and sampling options, and what was learnt (variables, scaler, time
unit, table columns, spans, static covariates' scaler), so that a fitted model reads any data the
fit's way."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import registry
from ..errors import DataError
from ..scaling import Scaler
from .static import StaticScaler

if TYPE_CHECKING:
    from .datamodule import ObservationDataModule

__all__ = ["ObservationRecord"]

_ONLY_FOR_THE_FIT_SOURCE = ("max_series", "subsample", "subsample_by", "subsample_seed", "train_origins")


class ObservationRecord:
    """``ObservationDataModule``'s record hooks (its attributes are the data module's)."""

    def _options(self) -> dict[str, Any]:
        return {
            "origins": None if self.origins is None else list(self.origins), "origin_stride": self.origin_stride,
            "lookback": self.lookback, "horizon": self.target_span, "split": self.split,
            "split_fractions": list(self.split_fractions), "split_seed": self.split_seed, "scaler": self.scaler_kind,
            "scale_from": self.scale_from, "variables": self.variable_names, "max_series": self.max_series,
            "subsample": self.subsample, "subsample_by": self.subsample_by, "subsample_seed": self.subsample_seed,
            **self.table_options, **self.columns_read, "time_unit": str(self.time_unit), "duplicates": self.duplicates,
            "reader_options": dict(self.reader_options), "static_variables": self.static_variables,
            "train_origins": self.train_origins,
        }

    def _fitted(self) -> dict[str, Any]:
        return {
            "variables": self.variables, "scaler": self.scaler.record(), "time_unit_ns": int(self.time_unit.value),
            "times": "numeric" if self.observations.time_unit is None else "datetime",
            "columns": self.table_columns(), "horizon": self.forecast_span,
            "static": None if self.static_scaler is None else self.static_scaler.to_record(),
        }

    def _restore(self, fitted: dict[str, Any]) -> None:
        self._given_scaler = Scaler.from_record(fitted["scaler"])
        self.scaler_kind = self._given_scaler.kind
        self.time_unit = pd.Timedelta(int(fitted["time_unit_ns"]), unit="ns")
        self._fitted_horizon = float(fitted["horizon"])
        self._fitted_columns = dict(fitted["columns"])
        self._static_scaler = StaticScaler.from_record(fitted.get("static"))

    @classmethod
    def _options_for(cls, record: dict[str, Any], other_data: bool) -> dict[str, Any]:
        options = dict(record["options"])
        columns = record["fitted"]["columns"]
        if other_data:  # how much of the fit's source was read, and its extra train origins, are no limit on other data
            for name in _ONLY_FOR_THE_FIT_SOURCE:
                options.pop(name, None)
        if columns["layout"] == "long" and options.get("variable_column") is None:
            # fit on an ObservationSet or a registered set: a table is read in the long layout id, time, variable, value
            options.update(id_column=columns["id"], time_column=columns["time"], variable_column=columns["variable"],
                           value_column=columns["value"])
        return options

    @classmethod
    def from_record(cls, record: dict[str, Any], data: Any = None, **options: Any) -> "ObservationDataModule":
        formatted = isinstance(data, str) and registry.is_registered(data) and registry.get_spec(data).format != "csv"
        if data is not None and not formatted:
            options.setdefault("reader_options", None)  # a table or a set has no format reader
        return super().from_record(record, data, **options)

    def _checked_against(self, record: dict[str, Any]) -> "ObservationDataModule":
        """The data's times must be of the fit's kind (numbers or timestamps); read now, so bad data fails here."""
        numeric = self.observations.time_unit is None
        if numeric != (record["fitted"]["times"] == "numeric"):
            have, want = ("numbers", "timestamps") if numeric else ("timestamps", "numbers")
            raise DataError(
                f"the data's times are {have}, but the model was fit on data whose times are {want}; pass data "
                f"with {want} in the time column"
            )
        return self

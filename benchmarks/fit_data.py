"""What the benchmark scripts read again from a fitted observation model: its data module (the data read and
scaled the fit's way), the id and variable columns of its forecasts, each variable's scale, the stays of
each split and the protocol's origins. Shared by ``per_variable.py`` and ``checkpoint_ensembles.py``."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


class FitData:
    """``datamodule``, ``id_column``, ``variable_column``, ``scale`` (per variable: the fit's scaler's scale,
    which the protocol's metric divides by) and ``origins``."""

    def __init__(self, datamodule: Any, id_column: str, variable_column: str, scale: pd.Series,
                 origins: list[float]) -> None:
        self.datamodule, self.id_column, self.variable_column = datamodule, id_column, variable_column
        self.scale, self.origins = scale, origins

    @classmethod
    def of(cls, forecaster: Any, source: str = "the model") -> "FitData":
        """Read ``forecaster``'s data again (a loaded model reads the file it was fit on) and keep the data
        module on it, so that its backtests reuse the data read here. ``source`` names it in errors."""
        dm = forecaster._datamodule(None)
        dm.setup()
        forecaster.datamodule = dm
        record = forecaster.data_record
        origins = record["options"].get("origins")
        if not origins:
            raise SystemExit(f"{source}: the fit's data has no fixed origins (the protocol's `origins`); "
                             f"these tables are measured at a protocol's origins")
        columns = record["fitted"]["columns"]
        scale = pd.Series(np.asarray(record["fitted"]["scaler"]["scale"], dtype=np.float64), index=dm.variables)
        return cls(dm, columns["id"] or "id", columns["variable"] or "variable", scale,
                   [float(origin) for origin in origins])

    def series_ids(self, split: str) -> set:
        """The ids of the series (stays) of ``split``."""
        dm = self.datamodule
        return set(dm.observations.series_ids[dm.split_series(split)].tolist())

"""What the benchmark scripts read again from a fitted observation model: its data module (the data read and
scaled the fit's way), the id and variable columns of its forecasts, each variable's scale, the stays of
each split and the protocol's origins. Shared by ``per_variable.py`` and ``checkpoint_ensembles.py``."""
from __future__ import annotations

from typing import Any, Optional

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

    def observed_in_history(self, frame: pd.DataFrame, lookback: Optional[float]) -> pd.Series:
        """Per row of a backtest ``frame`` (its id, variable and ``cutoff`` columns): whether that series observed
        that variable in the history the model read, the ``lookback`` before the cutoff ([cutoff - lookback,
        cutoff), as the samples are cut; None: all before the cutoff). Numeric times only (the protocol's origins
        are numbers)."""
        if not pd.api.types.is_numeric_dtype(frame["cutoff"]):
            raise SystemExit("the history split needs numeric times (cutoffs in the data's time unit); this fit's "
                             "cutoffs are not numbers")
        if frame.empty:
            return pd.Series(False, index=frame.index)
        observations = self.datamodule.observations.to_frame()[["id", "time", "variable"]]
        keys = frame[[self.id_column, self.variable_column, "cutoff"]].set_axis(["id", "variable", "cutoff"], axis=1)
        seen = []
        for cutoff in keys["cutoff"].unique():
            start = -np.inf if lookback is None else cutoff - lookback             # None: all of the history
            window = observations[(observations["time"] < cutoff) & (observations["time"] >= start)]
            seen.append(window[["id", "variable"]].drop_duplicates().assign(cutoff=cutoff, observed=True))
        flags = keys.merge(pd.concat(seen, ignore_index=True), how="left", on=["id", "variable", "cutoff"])["observed"]
        return pd.Series(flags.fillna(False).to_numpy(dtype=bool), index=frame.index)

"""Per-variable scaling of irregular observations, fit on observed values only.

``x_scaled = (x - offset[v]) / scale[v]`` for an observation of variable v, with

- ``"minmax"`` (the PhysioNet benchmark's): offset = min, scale = max - min, so the fitting
  observations map into [0, 1];
- ``"standard"``: offset = mean, scale = the population standard deviation (ddof 0);
- ``"none"``: offset 0, scale 1.

Only observed values enter the statistics (nothing is filled in). A variable with a single distinct
value in the fitting observations (max == min, std == 0) gets scale 1, so it maps to ``x - offset``
(0 on the fitting data), never a division by zero. A variable never observed in the fitting
observations is an error naming it: it could not be scaled without looking at other splits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, TypeVar

import numpy as np
import pandas as pd
import torch

from .csv import _check_choice
from .errors import DataError

__all__ = ["SCALER_KINDS", "VariableScaler", "fit_variable_scaler"]

SCALER_KINDS = ("minmax", "standard", "none")

ArrayLike = TypeVar("ArrayLike", np.ndarray, torch.Tensor)


@dataclass(frozen=True, eq=False)
class VariableScaler:
    """Per-variable affine scaling: ``(x - offset[v]) / scale[v]``.

    Attributes:
        kind: ``"minmax"``, ``"standard"`` or ``"none"``.
        variables: the V variable names.
        offset: float64 [V].
        scale: float64 [V], > 0.
        statistics: a DataFrame indexed by variable: ``count``, ``min``, ``max``, ``mean``, ``std``
            (ddof 0) of the fitting observations, and the resulting ``offset`` and ``scale``.
    """

    kind: str
    variables: tuple[str, ...]
    offset: np.ndarray
    scale: np.ndarray
    statistics: pd.DataFrame

    def _params(self, like: ArrayLike, variable: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
        if isinstance(like, torch.Tensor):
            var = torch.as_tensor(variable, device=like.device).long()
            offset = torch.from_numpy(self.offset.copy()).to(like.device, like.dtype)[var]  # [V] -> like var
            scale = torch.from_numpy(self.scale.copy()).to(like.device, like.dtype)[var]
            return offset, scale
        var = np.asarray(variable, dtype=np.int64)
        return self.offset[var].astype(like.dtype, copy=False), self.scale[var].astype(like.dtype, copy=False)

    def transform(self, values: ArrayLike, variable: ArrayLike) -> ArrayLike:
        """``values`` [...] in original units -> scaled; ``variable`` [...] (same shape) holds each
        value's variable index. Returns the type (numpy / torch), dtype and device of ``values``."""
        values = values if isinstance(values, torch.Tensor) else np.asarray(values, dtype=np.float64)
        offset, scale = self._params(values, variable)
        return (values - offset) / scale

    def inverse_transform(self, values: ArrayLike, variable: ArrayLike) -> ArrayLike:
        """``values`` [...] scaled -> original units: ``values * scale[variable] + offset[variable]``."""
        values = values if isinstance(values, torch.Tensor) else np.asarray(values, dtype=np.float64)
        offset, scale = self._params(values, variable)
        return values * scale + offset


def fit_variable_scaler(
    value: np.ndarray,
    variable: np.ndarray,
    variables: Sequence[str],
    kind: str = "minmax",
    fitted_on: str = "the fitting observations",
) -> VariableScaler:
    """Fit a ``VariableScaler`` on observations.

    Args:
        value: float64 [m], the fitting observations' values.
        variable: int [m], their variable indices into ``variables``.
        variables: the V names.
        kind: ``"minmax"``, ``"standard"`` or ``"none"``.
        fitted_on: words naming the fitting observations, for messages (``"the train split"``).

    Raises:
        DataError: a variable has no observation to fit on (named).
    """
    _check_choice("scaler", kind, SCALER_KINDS)
    names = tuple(str(v) for v in variables)
    stats = (
        pd.DataFrame({"v": np.asarray(variable, dtype=np.int64), "x": np.asarray(value, dtype=np.float64)})
        .groupby("v")["x"]
        .agg(["count", "min", "max", "mean", lambda x: float(np.std(x.to_numpy()))])
        .reindex(range(len(names)))
    )
    stats.columns = ["count", "min", "max", "mean", "std"]
    stats["count"] = stats["count"].fillna(0).astype(np.int64)
    stats.index = pd.Index(names, name="variable")
    if kind == "none":
        offset, scale = np.zeros(len(names)), np.ones(len(names))
    else:
        absent = [n for n, c in zip(names, stats["count"]) if c == 0]
        if absent:
            raise DataError(
                f"variable(s) {absent} are never observed in {fitted_on}, so the {kind} scaler has nothing to fit "
                "them on; leave them out (variables=[...]), use more series, or fit on more data "
                "(scale_from='seen')"
            )
        if kind == "minmax":
            offset = stats["min"].to_numpy(dtype=np.float64)
            scale = (stats["max"] - stats["min"]).to_numpy(dtype=np.float64)
        else:
            offset = stats["mean"].to_numpy(dtype=np.float64)
            scale = stats["std"].to_numpy(dtype=np.float64)
        scale = np.where(scale > 0, scale, 1.0)  # a constant variable maps to x - offset
    stats["offset"], stats["scale"] = offset, scale
    return VariableScaler(kind=kind, variables=names, offset=offset, scale=scale, statistics=stats)

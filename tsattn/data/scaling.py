"""One scaler for both tasks: per-column (channel or variable) affine scaling ``(x - offset) / scale``.

- ``"standard"``: offset = mean, scale = the population standard deviation (ddof 0); on a grid of
  rows it is fit exactly as scikit-learn's ``StandardScaler`` (the published convention);
- ``"minmax"`` (the PhysioNet benchmark's): offset = min, scale = max - min;
- ``"none"``: offset 0, scale 1.

Fit only on what a model may see (the train segment of a series; the train, or train + val,
observations of a set of series): the data modules decide which rows. A column with a single
distinct value gets scale 1, so it maps to ``x - offset``, never a division by zero. Observation
sets are scaled from observed values only; a variable never observed in the fitting observations is
an error naming it.

``Scaler.record()`` / ``Scaler.from_record()`` keep the fitted float64 values exactly, so a model read
back from a checkpoint scales new data bit for bit as the fit did.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, TypeVar, Union

import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import StandardScaler

from .errors import DataError
from .validation import check_choice

__all__ = ["SCALER_KINDS", "Scaler", "fit_grid_scaler", "fit_observation_scaler"]

SCALER_KINDS = ("minmax", "standard", "none")

ArrayLike = TypeVar("ArrayLike", np.ndarray, torch.Tensor)


@dataclass(frozen=True, eq=False)
class Scaler:
    """Per-column affine scaling: ``(x - offset[c]) / scale[c]``.

    Attributes:
        kind: ``"standard"``, ``"minmax"`` or ``"none"``.
        names: the C column (channel or variable) names.
        offset: float64 [C].
        scale: float64 [C], > 0.
        statistics: optional table indexed by name (observation sets: ``count``, ``min``, ``max``,
            ``mean``, ``std`` of the fitting observations, and the resulting ``offset`` / ``scale``).
    """

    kind: str
    names: tuple[str, ...]
    offset: np.ndarray
    scale: np.ndarray
    statistics: Optional[pd.DataFrame] = None

    def __post_init__(self) -> None:
        offset = np.asarray(self.offset, dtype=np.float64).reshape(-1)
        scale = np.asarray(self.scale, dtype=np.float64).reshape(-1)
        if offset.shape != scale.shape or offset.size != len(self.names) or not offset.size:
            raise DataError(
                f"a scaler needs one offset and one scale per column; got {offset.size} offsets, {scale.size} "
                f"scales for {len(self.names)} names"
            )
        if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise DataError("scaler statistics must be finite, with every scale > 0")
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))

    def __len__(self) -> int:
        return len(self.names)

    # -- applying it -----------------------------------------------------------------------------------
    def _params(self, like: ArrayLike, column: Optional[ArrayLike]) -> tuple[Any, Any]:
        if isinstance(like, torch.Tensor):
            offset = torch.from_numpy(self.offset.copy()).to(like.device, like.dtype)
            scale = torch.from_numpy(self.scale.copy()).to(like.device, like.dtype)
            if column is None:
                return offset, scale
            index = torch.as_tensor(column, device=like.device).long()
            return offset[index], scale[index]
        if column is None:
            return self.offset.astype(like.dtype, copy=False), self.scale.astype(like.dtype, copy=False)
        index = np.asarray(column, dtype=np.int64)
        return self.offset[index].astype(like.dtype, copy=False), self.scale[index].astype(like.dtype, copy=False)

    def transform(self, values: ArrayLike, column: Optional[ArrayLike] = None) -> ArrayLike:
        """Original units -> scaled. ``column=None``: ``values`` [..., C] has the columns on its last
        axis; else ``column`` [...] (same shape as ``values``) holds each value's column index.
        Returns the type (numpy / torch), dtype and device of ``values``."""
        values = values if isinstance(values, torch.Tensor) else np.asarray(values, dtype=np.float64)
        offset, scale = self._params(values, column)
        return (values - offset) / scale

    def inverse_transform(self, values: ArrayLike, column: Optional[ArrayLike] = None) -> ArrayLike:
        """Scaled -> original units: ``values * scale + offset`` (columns as for ``transform``)."""
        values = values if isinstance(values, torch.Tensor) else np.asarray(values, dtype=np.float64)
        offset, scale = self._params(values, column)
        return values * scale + offset

    # -- persistence -----------------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """Plain Python values that rebuild this scaler exactly (``from_record``)."""
        out: dict[str, Any] = {"kind": self.kind, "names": list(self.names),
                               "offset": [float(v) for v in self.offset], "scale": [float(v) for v in self.scale]}
        if self.statistics is not None:
            out["statistics"] = {str(c): [v.item() for v in self.statistics[c].to_numpy()] for c in self.statistics}
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Scaler":
        names = tuple(record["names"])
        stats = record.get("statistics")
        statistics = None if stats is None else pd.DataFrame(stats, index=pd.Index(list(names), name="variable"))
        return cls(kind=record["kind"], names=names, offset=np.asarray(record["offset"], dtype=np.float64),
                   scale=np.asarray(record["scale"], dtype=np.float64), statistics=statistics)

    @classmethod
    def from_sklearn(cls, scaler: StandardScaler, names: Sequence[str]) -> "Scaler":
        """A fitted scikit-learn ``StandardScaler``'s ``mean_`` / ``scale_`` as a ``Scaler``."""
        if not hasattr(scaler, "mean_") or not hasattr(scaler, "scale_"):
            raise DataError(f"scaler must be fitted; got {scaler!r}: call .fit(train_values) first")
        return cls(kind="standard", names=tuple(names), offset=scaler.mean_, scale=scaler.scale_)


def fit_grid_scaler(values: np.ndarray, names: Sequence[str], kind: str = "standard") -> Scaler:
    """Fit a ``Scaler`` on rows ``values`` [N, C] (float64): ``"standard"`` exactly as scikit-learn's
    ``StandardScaler`` (population std; a zero-variance column gets scale 1)."""
    check_choice("scaler", kind, SCALER_KINDS)
    values = np.asarray(values, dtype=np.float64)
    if kind == "standard":
        fitted = StandardScaler().fit(values)
        return Scaler(kind=kind, names=tuple(names), offset=fitted.mean_, scale=fitted.scale_)
    if kind == "none":
        return Scaler(kind=kind, names=tuple(names), offset=np.zeros(values.shape[1]), scale=np.ones(values.shape[1]))
    low, high = values.min(0), values.max(0)
    span = high - low
    return Scaler(kind=kind, names=tuple(names), offset=low, scale=np.where(span > 0, span, 1.0))


def fit_observation_scaler(
    value: np.ndarray,
    variable: np.ndarray,
    variables: Sequence[str],
    kind: str = "minmax",
    fitted_on: str = "the fitting observations",
) -> Scaler:
    """Fit a ``Scaler`` on observations, per variable, from observed values only.

    Args:
        value: float64 [m], the fitting observations' values.
        variable: int [m], their variable indices into ``variables``.
        variables: the V names.
        kind: ``"minmax"``, ``"standard"`` or ``"none"``.
        fitted_on: words naming the fitting observations, for messages (``"the train split"``).

    Raises:
        DataError: a variable has no observation to fit on (named).
    """
    check_choice("scaler", kind, SCALER_KINDS)
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
    return Scaler(kind=kind, names=names, offset=offset, scale=scale, statistics=stats)


ScalerLike = Union[Scaler, StandardScaler]

"""Forecast errors, accumulated in float64 (a forecast in float32 of values near 1e30 still has a finite
squared error).

- ``GroupedError``: MSE, MAE, RMSE and sMAPE per group (channel or variable), pooled
  (``PointError``: every forecast value, the regular benchmarks' convention) or per group then
  averaged (``PerVariableError``: the irregular benchmarks' convention);
- ``QuantileError``: the pinball loss of quantile forecasts and the coverage of their intervals;
- ``mase``: the mean absolute scaled error against an in-sample naive forecast's error;
- ``backtest_metrics``: the same metrics from a forecast table (a backtest's), per cutoff, per
  horizon step or overall.

The per-variable mean is how the irregular-series benchmarks (PhysioNet 2012 in t-PatchGNN's protocol) define MSE and
MAE: for each variable, the mean squared (absolute) error over all of its target observations in the
whole split; then the plain mean over the variables that have at least one target. Variables with no
target in the split do not count. A variable observed rarely therefore weighs as much as one
observed every minute.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torchmetrics import Metric

__all__ = ["GroupedError", "PerVariableError", "PointError", "QuantileError", "backtest_metrics", "mase",
           "per_variable_mean", "pinball_loss"]


def per_variable_mean(total: Tensor, count: Tensor) -> Tensor:
    """Mean over the variables with count > 0 of total / count ([V] each) -> scalar (0 when none counts)."""
    seen = count > 0
    if not bool(seen.any()):
        return total.new_zeros(())
    return (total[seen] / count[seen]).mean()


class GroupedError(Metric):
    """Squared, absolute and symmetric percentage errors per group (a channel or a variable), float64.

    ``update(pred, target, group, mask=None)``; ``compute`` gives ``mse``, ``mae``, ``rmse`` (the
    square root of ``mse``) and ``smape``, either over every point pooled (``reduction="point"``: the
    regular benchmarks' convention) or per group and then averaged over the groups with points
    (``"group"``: the irregular benchmarks'). ``smape`` is in percent, on the 0-200 scale:
    ``200 |y - p| / (|y| + |p|)``, points where both are 0 left out. ``per_group_mae()`` [G] serves MASE.

    Args:
        n_groups: G.
        reduction: ``"point"`` or ``"group"``.
        scale: optional [G] factors that convert an error in scaled units into the group's own units
            (for min-max scaling, max - min); the errors are multiplied by them first (sMAPE then is
            not meaningful: pass values in units instead).
    """

    full_state_update = False

    def __init__(self, n_groups: int, reduction: str = "point", scale: Optional[Tensor] = None) -> None:
        super().__init__()
        if reduction not in ("point", "group"):
            raise ValueError(f"reduction must be 'point' or 'group'; got {reduction!r}")
        self.n_groups, self.reduction = n_groups, reduction
        for name in ("squared", "absolute", "count", "percent", "percent_count"):
            self.add_state(name, default=torch.zeros(n_groups, dtype=torch.float64), dist_reduce_fx="sum")
        self.scale: Optional[Tensor] = None if scale is None else scale.detach().to(torch.float64)

    def update(self, pred: Tensor, target: Tensor, group: Tensor, mask: Optional[Tensor] = None) -> None:
        """pred, target, group: [...] (group ids in [0, G)); mask: [...] bool (True = counts), or None."""
        pred, target, group = pred.detach().to(torch.float64), target.to(torch.float64), group.long()
        if mask is not None:
            pred, target, group = pred[mask], target[mask], group[mask]
        pred, target, group = pred.reshape(-1), target.reshape(-1), group.reshape(-1)
        err = pred - target
        if self.scale is not None:
            err = err * self.scale.to(err.device)[group]
        G = self.n_groups
        self.squared += torch.bincount(group, weights=err.square(), minlength=G)
        self.absolute += torch.bincount(group, weights=err.abs(), minlength=G)
        self.count += torch.bincount(group, minlength=G).to(torch.float64)
        denominator = target.abs() + pred.abs()
        valid = denominator > 0
        self.percent += torch.bincount(group[valid], weights=200.0 * err.abs()[valid] / denominator[valid], minlength=G)
        self.percent_count += torch.bincount(group[valid], minlength=G).to(torch.float64)

    def _reduce(self, total: Tensor, count: Tensor) -> Tensor:
        if self.reduction == "group":
            return per_variable_mean(total, count)
        return total.sum() / count.sum().clamp_min(1.0)

    def per_group_mae(self) -> Tensor:
        """[G] each group's mean absolute error (NaN for a group without points)."""
        return torch.where(self.count > 0, self.absolute / self.count.clamp_min(1.0), torch.nan)

    def compute(self) -> dict[str, Tensor]:
        mse = self._reduce(self.squared, self.count)
        return {"mse": mse, "mae": self._reduce(self.absolute, self.count), "rmse": mse.sqrt(),
                "smape": self._reduce(self.percent, self.percent_count)}


class PerVariableError(GroupedError):
    """``GroupedError`` per variable, averaged over the variables that occurred (the irregular
    benchmarks' MSE / MAE); ``update(pred, target, variable, mask)``."""

    def __init__(self, n_variables: int, scale: Optional[Tensor] = None) -> None:
        super().__init__(n_variables, "group", scale)
        self.n_variables = n_variables


class PointError(GroupedError):
    """``GroupedError`` over every value pooled (the regular benchmarks' MSE / MAE), with ``groups``
    (channels) kept apart only for ``per_group_mae``; ``update(pred, target, group=None)``."""

    def __init__(self, n_groups: int = 1) -> None:
        super().__init__(n_groups, "point")

    def update(self, pred: Tensor, target: Tensor, group: Optional[Tensor] = None, mask: Optional[Tensor] = None) -> None:
        if group is None:
            group = torch.zeros_like(target, dtype=torch.long)
        super().update(pred, target, group, mask)


def mase(mae: Tensor, naive_scale: Tensor) -> Tensor:
    """The mean over groups of ``mae / naive_scale`` ([G] each), groups with a finite positive scale and a
    finite MAE only (NaN when there is none): the mean absolute scaled error against the in-sample
    naive forecast whose mean absolute error is ``naive_scale``."""
    keep = torch.isfinite(mae) & torch.isfinite(naive_scale) & (naive_scale > 0)
    return (mae[keep] / naive_scale[keep]).mean() if bool(keep.any()) else mae.new_tensor(float("nan"))


def pinball_loss(pred: Tensor, target: Tensor, quantiles: Sequence[float]) -> Tensor:
    """The pinball (quantile) loss of ``pred`` [..., Q] against ``target`` [...]: ``max(q e, (q - 1) e)``
    with ``e = target - pred``, per quantile -> [..., Q]."""
    q = torch.as_tensor(quantiles, dtype=pred.dtype, device=pred.device)
    err = target[..., None] - pred
    return torch.maximum(q * err, (q - 1.0) * err)


class QuantileError(Metric):
    """Pinball loss and interval coverage of quantile forecasts, in float64.

    ``update(pred [N, Q], target [N], group [N])`` (``group``: each point's variable or channel, in
    [0, G)); ``compute`` gives ``quantile_loss`` (the mean over quantiles of the mean pinball loss,
    per group then averaged over the groups with points when ``per_group``, else over every point),
    the same for each quantile (``pinball_<q>``), and ``coverage_<level>``: the share of points inside
    each central interval ``pairs`` ``(level, lo, hi)`` (pooled over every point).

    Args:
        quantiles: the Q quantile levels.
        pairs: ``(level, lo, hi)`` of each interval (positions into ``quantiles``).
        n_groups: G.
        per_group: average the loss per group first (the irregular benchmarks' convention).
        scale: optional [G] factors converting scaled errors into the groups' own units.
    """

    full_state_update = False

    def __init__(self, quantiles: Sequence[float], pairs: Sequence[tuple[float, int, int]], n_groups: int,
                 per_group: bool = False, scale: Optional[Tensor] = None) -> None:
        super().__init__()
        self.quantiles, self.pairs, self.n_groups, self.per_group = list(quantiles), list(pairs), n_groups, per_group
        Q, K = len(self.quantiles), len(self.pairs)
        self.add_state("pinball", default=torch.zeros(n_groups, Q, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("inside", default=torch.zeros(K, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros(n_groups, dtype=torch.float64), dist_reduce_fx="sum")
        self.scale = None if scale is None else scale.detach().to(torch.float64)

    def update(self, pred: Tensor, target: Tensor, group: Tensor) -> None:
        pred, target, group = pred.detach().to(torch.float64), target.to(torch.float64), group.long()
        loss = pinball_loss(pred, target, self.quantiles)                          # [N, Q]
        if self.scale is not None:
            loss = loss * self.scale.to(loss.device)[group][:, None]
        self.pinball.index_add_(0, group, loss)
        self.count += torch.bincount(group, minlength=self.n_groups).to(torch.float64)
        for k, (_, lo, hi) in enumerate(self.pairs):
            self.inside[k] += ((target >= pred[:, lo]) & (target <= pred[:, hi])).sum()

    def compute(self) -> dict[str, Tensor]:
        if self.per_group:
            seen = self.count > 0
            per_quantile = (self.pinball[seen] / self.count[seen, None]).mean(0) if seen.any() else self.pinball[0] * 0
        else:
            per_quantile = self.pinball.sum(0) / self.count.sum().clamp_min(1.0)
        out = {"quantile_loss": per_quantile.mean()}
        out.update({f"pinball_{q:g}": v for q, v in zip(self.quantiles, per_quantile)})
        total = self.count.sum().clamp_min(1.0)
        out.update({f"coverage_{level:g}": self.inside[k] / total for k, (level, _, _) in enumerate(self.pairs)})
        return out


# -- metrics of a forecast table (a backtest's) ----------------------------------------------------------
def _quantile_columns(frame: pd.DataFrame) -> list[tuple[str, float]]:
    """``(column, quantile level)`` of a forecast table's ``forecast`` columns (the median: 0.5)."""
    out = []
    for column in frame.columns:
        name = str(column)
        if name == "forecast":
            out.append((name, 0.5))
        elif name.startswith("forecast-lo-") or name.startswith("forecast-hi-"):
            level = float(name.rsplit("-", 1)[1]) / 100.0
            out.append((name, (1 - level) / 2 if "-lo-" in name else (1 + level) / 2))
        elif name.startswith("forecast-q"):
            out.append((name, float(name[len("forecast-q"):])))
    return out


def _table_metrics(group: pd.DataFrame, variable: str, per_variable: bool,
                   naive_scale: Optional[Mapping[str, float]]) -> dict[str, float]:
    err = group["forecast"] - group["observed"]
    denominator = group["forecast"].abs() + group["observed"].abs()
    parts = pd.DataFrame({"v": group[variable], "se": err**2, "ae": err.abs(),
                          "sp": np.where(denominator > 0, 200 * err.abs() / denominator.where(denominator > 0, 1), np.nan)})
    for column, q in _quantile_columns(group):
        e = group["observed"] - group[column]
        parts[f"pinball_{q:g}"] = np.maximum(q * e, (q - 1) * e)
    means = parts.groupby("v").mean() if per_variable else parts.drop(columns="v").mean().to_frame().T
    out = means.mean().to_dict()
    metrics = {"mse": out.pop("se"), "mae": out.pop("ae"), "smape": out.pop("sp")}
    metrics["rmse"] = float(np.sqrt(metrics["mse"]))
    if naive_scale is not None:
        per = parts.groupby("v")["ae"].mean()
        scale = pd.Series(naive_scale).reindex(per.index)
        ok = np.isfinite(scale) & (scale > 0)
        metrics["mase"] = float((per[ok] / scale[ok]).mean()) if ok.any() else float("nan")
    pinball = {k: v for k, v in out.items() if k.startswith("pinball_")}
    if len(pinball) > 1:
        metrics["quantile_loss"] = float(np.mean(list(pinball.values())))
        metrics.update(pinball)
    for column, q in _quantile_columns(group):
        if "-lo-" in column:
            hi = column.replace("-lo-", "-hi-")
            inside = (group["observed"] >= group[column]) & (group["observed"] <= group[hi])
            metrics[f"coverage_{column.rsplit('-', 1)[1]}"] = float(inside.mean())
    return metrics


def backtest_metrics(frame: pd.DataFrame, by: Optional[Union[str, Sequence[str]]] = None,
                     per_variable: Optional[bool] = None,
                     naive_scale: Optional[Mapping[str, float]] = None) -> pd.DataFrame:
    """``evaluate``'s metrics from a forecast table (``Forecaster.backtest``'s), in its units: ``mse``,
    ``mae``, ``rmse``, ``smape`` (percent, 0-200), ``mase`` (with ``naive_scale``), and with interval
    columns ``quantile_loss``, each quantile's pinball loss and each interval's ``coverage_<level>``.

    Args:
        frame: columns ``variable`` (or the fit's variable column), ``forecast`` (its intervals
            ``forecast-lo-80`` ... optional) and ``observed``.
        by: the columns to group by (``"cutoff"``, ``"step"``, ``"lead"``, ...); None: one row, overall.
        per_variable: the mean over variables of per-variable means (the irregular benchmarks') or the
            mean over every row; None: as the frame says (``frame.attrs["per_variable"]``, else False).
        naive_scale: per variable, the in-sample naive forecast's mean absolute error (MASE's
            denominator); None: ``frame.attrs["naive_scale"]`` if the frame has it.

    Returns:
        a DataFrame of metrics, one row per group (indexed by ``by``).
    """
    per_variable = bool(frame.attrs.get("per_variable", False)) if per_variable is None else per_variable
    naive_scale = frame.attrs.get("naive_scale") if naive_scale is None else naive_scale
    variable = frame.attrs.get("variable_column", "variable")
    if by is None:
        return pd.DataFrame([_table_metrics(frame, variable, per_variable, naive_scale)])
    keys = [by] if isinstance(by, str) else list(by)
    rows = {key: _table_metrics(group, variable, per_variable, naive_scale)
            for key, group in frame.groupby(keys if len(keys) > 1 else keys[0], sort=True)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(keys if len(keys) > 1 else keys[0])

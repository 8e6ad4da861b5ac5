"""Forecast errors, accumulated in float64 (a forecast in float32 of values near 1e30 still has a finite
squared error).

- ``PointError``: MSE / MAE over every forecast value (the regular benchmarks' convention).
- ``PerVariableError``: errors per variable over every target point, then the mean over variables.
- ``QuantileError``: the pinball loss of quantile forecasts and the coverage of their intervals.

This is how the irregular-series benchmarks (PhysioNet 2012 in t-PatchGNN's protocol) define MSE and
MAE: for each variable, the mean squared (absolute) error over all of its target observations in the
whole split; then the plain mean over the variables that have at least one target. Variables with no
target in the split do not count. A variable observed rarely therefore weighs as much as one
observed every minute.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor
from torchmetrics import Metric

__all__ = ["PerVariableError", "PointError", "QuantileError", "per_variable_mean"]


def per_variable_mean(total: Tensor, count: Tensor) -> Tensor:
    """Mean over the variables with count > 0 of total / count ([V] each) -> scalar (0 when none counts)."""
    seen = count > 0
    if not bool(seen.any()):
        return total.new_zeros(())
    return (total[seen] / count[seen]).mean()


class PerVariableError(Metric):
    """Accumulates squared and absolute errors per variable; ``compute`` returns
    ``{"mse", "mae"}``: per-variable means over all points, averaged over the variables that occurred.

    Args:
        n_variables: V.
        scale: optional [V] factors that convert an error in scaled units into the variable's own
            units (for min-max scaling, max - min); the errors are multiplied by them first.
    """

    full_state_update = False

    def __init__(self, n_variables: int, scale: Optional[Tensor] = None) -> None:
        super().__init__()
        self.n_variables = n_variables
        self.add_state("squared", default=torch.zeros(n_variables, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("absolute", default=torch.zeros(n_variables, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros(n_variables, dtype=torch.float64), dist_reduce_fx="sum")
        self.scale: Optional[Tensor] = None if scale is None else scale.detach().to(torch.float64)

    def update(self, pred: Tensor, target: Tensor, variable: Tensor, mask: Tensor) -> None:
        """pred, target: [...] values; variable: [...] ids in [0, V); mask: [...] bool (True = counts)."""
        err = (pred.detach().to(torch.float64) - target.to(torch.float64))[mask]
        var = variable[mask].long()
        if self.scale is not None:
            err = err * self.scale.to(err.device)[var]
        self.squared += torch.bincount(var, weights=err.square(), minlength=self.n_variables)
        self.absolute += torch.bincount(var, weights=err.abs(), minlength=self.n_variables)
        self.count += torch.bincount(var, minlength=self.n_variables).to(torch.float64)

    def compute(self) -> dict[str, Tensor]:
        return {"mse": per_variable_mean(self.squared, self.count), "mae": per_variable_mean(self.absolute, self.count)}


class PointError(Metric):
    """Accumulates squared and absolute errors over every value in float64; ``compute`` returns
    ``{"mse", "mae"}``: the means over all values seen (0 when none was)."""

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("squared", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("absolute", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, pred: Tensor, target: Tensor) -> None:
        """pred, target: [...] values of the same shape."""
        err = pred.detach().to(torch.float64) - target.to(torch.float64)
        self.squared += err.square().sum()
        self.absolute += err.abs().sum()
        self.count += err.numel()

    def compute(self) -> dict[str, Tensor]:
        count = self.count.clamp_min(1.0)
        return {"mse": self.squared / count, "mae": self.absolute / count}


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
        q = torch.as_tensor(self.quantiles, dtype=torch.float64, device=pred.device)
        err = target[:, None] - pred                                              # [N, Q]
        loss = torch.maximum(q * err, (q - 1.0) * err)
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

"""Reference forecasts for irregular observation sets: no training, the same inputs as a model.

- ``LastObservation``: a query (t, v) gets the last value of variable v observed in the history
  (the "persistence" forecast); a variable never observed in the history gets its mean.
- ``VariableMean``: a query (t, v) gets the mean of variable v (the mean of its training
  observations, set with ``fit_means``).

Both read the batches of ``IrregularTransformer`` (see its ``forward``) and return [B, Ny]; the
means are a buffer [V] in scaled units, so a checkpoint keeps them.
"""
from __future__ import annotations

from typing import Iterable, Optional

import torch
from torch import Tensor, nn

__all__ = ["LastObservation", "VariableMean", "variable_means"]


def variable_means(batches: Iterable[dict[str, Tensor]], n_variables: int) -> Tensor:
    """Mean of every variable's observations (history and targets) over ``batches`` -> [V] (float64).

    A variable with no observation gets 0 (the value of nothing seen, in scaled units)."""
    total = torch.zeros(n_variables, dtype=torch.float64)
    count = torch.zeros(n_variables, dtype=torch.float64)
    for batch in batches:
        for part in ("x", "y"):
            mask = batch[f"{part}_mask"]
            var = batch[f"{part}_var"][mask].long()
            total += torch.bincount(var, weights=batch[f"{part}_value"][mask].double(), minlength=n_variables)
            count += torch.bincount(var, minlength=n_variables).double()
    return torch.where(count > 0, total / count.clamp_min(1), 0.0)


class VariableMean(nn.Module):
    """Forecast every query of variable v with the mean of v.

    Args:
        n_variables: V.
    """

    def __init__(self, n_variables: int) -> None:
        super().__init__()
        self.n_variables = n_variables
        self.register_buffer("mean", torch.zeros(n_variables))

    def fit_means(self, means: Tensor) -> None:
        """Set the per-variable means [V] (e.g. ``variable_means(train_loader, V)``)."""
        self.mean.copy_(means.to(self.mean))

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor,
                y_var: Tensor, y_mask: Optional[Tensor] = None) -> Tensor:
        """As ``IrregularTransformer.forward``: [B, Ny] forecasts, 0 at padded queries."""
        out = self.mean[y_var.long()].to(y_time.dtype)
        return out if y_mask is None else torch.where(y_mask, out, 0.0)


class LastObservation(VariableMean):
    """Forecast every query of variable v with the last value of v in the history (its mean if none).

    Args:
        n_variables: V.
    """

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor,
                y_var: Tensor, y_mask: Optional[Tensor] = None) -> Tensor:
        B, V = x_time.shape[0], self.n_variables
        key = x_var.long()
        times = torch.where(x_mask, x_time.double(), -torch.inf)                     # [B, Nx]
        last_time = torch.full((B, V), -torch.inf, dtype=torch.float64, device=x_time.device)
        last_time.scatter_reduce_(1, key, times, reduce="amax")                      # latest time per variable
        is_last = x_mask & (times == last_time.gather(1, key))                       # the observation made then
        values = torch.zeros(B, V + 1, dtype=torch.float64, device=x_time.device)    # column V: a bin for the rest
        values.scatter_(1, torch.where(is_last, key, V), torch.where(is_last, x_value.double(), 0.0))
        last_value = torch.where(torch.isfinite(last_time), values[:, :V], self.mean.double())
        out = last_value.gather(1, y_var.long()).to(y_time.dtype)
        return out if y_mask is None else torch.where(y_mask, out, 0.0)
